"""Judge: robust summaries with confidence intervals, comparisons and four-way verdicts.

Every comparison needs two things before it calls a difference real (the lesson of asv, nvbench's
robust compare and hyperfine's users): a *practical* threshold (the ratio must be beyond it) and
*statistical* evidence (its confidence interval must exclude 1). "same" needs the whole interval
inside the threshold band; anything else is "inconclusive", never silently "same".
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from zincbench.errors import ExitCode

# Fewer samples than this on either side and a comparison is inconclusive, whatever its interval says:
# a bootstrap over 2-4 samples cannot carry a 99% claim.
MIN_SAMPLES_TO_JUDGE = 5


class Verdict(str, enum.Enum):
    FASTER = "faster"
    SLOWER = "slower"
    SAME = "same"
    INCONCLUSIVE = "inconclusive"


class GateDecision(str, enum.Enum):
    GO = "GO"
    NO_GO = "NO-GO"
    INCONCLUSIVE = "INCONCLUSIVE"

    @property
    def exit_code(self) -> ExitCode:
        return {
            GateDecision.GO: ExitCode.OK,
            GateDecision.NO_GO: ExitCode.FAIL,
            GateDecision.INCONCLUSIVE: ExitCode.INCONCLUSIVE,
        }[self]


NAN = float("nan")


@dataclass(frozen=True)
class Summary:
    """Robust summary of one sample set (any unit; lower or higher is better is the caller's business)."""

    n: int
    median: float
    p90: float
    mean: float
    stdev: float
    minimum: float
    maximum: float
    median_ci: tuple[float, float]
    p90_ci: tuple[float, float]
    confidence: float

    @property
    def rel_noise(self) -> float:
        """Half-width of the median's confidence interval over the median (NaN if undefined)."""
        lo, hi = self.median_ci
        if not (math.isfinite(lo) and math.isfinite(hi)) or self.median == 0:
            return NAN
        return (hi - lo) / 2.0 / abs(self.median)


def quantile_ci(values: Sequence[float], q: float, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free CI of the q-quantile from binomial order statistics (asv's quantile_ci).

    Returns (nan, nan) when the sample is too small for an interval at this confidence.
    """
    from scipy import stats

    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    if n == 0:
        return (NAN, NAN)
    alpha = 1.0 - confidence
    # 1-based ranks r, s with P(r <= B <= s-1) >= confidence, B ~ Binomial(n, q) = samples below the quantile.
    r = int(stats.binom.ppf(alpha / 2.0, n, q))
    s = int(stats.binom.ppf(1.0 - alpha / 2.0, n, q)) + 1
    if r < 1 or s > n:
        return (NAN, NAN)
    return (float(x[r - 1]), float(x[s - 1]))


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 1]."""
    x = np.asarray(values, dtype=float)
    return float(np.quantile(x, q)) if x.size else NAN


def summarize(values: Sequence[float], confidence: float = 0.95) -> Summary:
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return Summary(0, NAN, NAN, NAN, NAN, NAN, NAN, (NAN, NAN), (NAN, NAN), confidence)
    return Summary(
        n=int(x.size),
        median=float(np.median(x)),
        p90=percentile(x, 0.9),
        mean=float(np.mean(x)),
        stdev=float(np.std(x, ddof=1)) if x.size > 1 else 0.0,
        minimum=float(np.min(x)),
        maximum=float(np.max(x)),
        median_ci=quantile_ci(x, 0.5, confidence),
        p90_ci=quantile_ci(x, 0.9, confidence),
        confidence=confidence,
    )


@dataclass(frozen=True)
class Comparison:
    """candidate vs baseline. ``ratio`` is candidate/baseline of the compared statistic."""

    ratio: float
    ci: tuple[float, float]
    confidence: float
    threshold: float
    higher_is_better: bool
    verdict: Verdict
    method: str

    @property
    def speedup(self) -> float:
        """How many times faster the candidate is (>1 means faster), whatever the metric's direction."""
        return self.ratio if self.higher_is_better else 1.0 / self.ratio

    @property
    def speedup_ci(self) -> tuple[float, float]:
        lo, hi = self.ci
        return (lo, hi) if self.higher_is_better else (1.0 / hi, 1.0 / lo)


def decide(ratio: float, ci: tuple[float, float], threshold: float, higher_is_better: bool) -> Verdict:
    """Four-way verdict from a ratio (candidate/baseline) and its confidence interval."""
    lo, hi = ci
    if not all(math.isfinite(v) for v in (ratio, lo, hi)):
        return Verdict.INCONCLUSIVE
    better_side = (lo > 1.0) if higher_is_better else (hi < 1.0)
    worse_side = (hi < 1.0) if higher_is_better else (lo > 1.0)
    beyond_better = ratio >= 1.0 + threshold if higher_is_better else ratio <= 1.0 - threshold
    beyond_worse = ratio <= 1.0 - threshold if higher_is_better else ratio >= 1.0 + threshold
    if better_side and beyond_better:
        return Verdict.FASTER
    if worse_side and beyond_worse:
        return Verdict.SLOWER
    if 1.0 - threshold <= lo and hi <= 1.0 + threshold:
        return Verdict.SAME
    return Verdict.INCONCLUSIVE


def compare_medians(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    threshold: float = 0.03,
    confidence: float = 0.99,
    higher_is_better: bool = False,
    n_boot: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Two independent sample sets (kernel timings): ratio of medians with a bootstrap percentile CI."""
    a = np.asarray(baseline, dtype=float)
    b = np.asarray(candidate, dtype=float)
    if a.size < 2 or b.size < 2:
        ratio = float(np.median(b) / np.median(a)) if a.size and b.size else NAN
        return Comparison(
            ratio, (NAN, NAN), confidence, threshold, higher_is_better, Verdict.INCONCLUSIVE, "bootstrap-median"
        )
    rng = np.random.default_rng(seed)
    ma = np.median(a[rng.integers(0, a.size, size=(n_boot, a.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, size=(n_boot, b.size))], axis=1)
    boots = mb / ma
    alpha = 1.0 - confidence
    ci = (float(np.quantile(boots, alpha / 2.0)), float(np.quantile(boots, 1.0 - alpha / 2.0)))
    ratio = float(np.median(b) / np.median(a))
    return Comparison(
        ratio,
        ci,
        confidence,
        threshold,
        higher_is_better,
        decide(ratio, ci, threshold, higher_is_better),
        "bootstrap-median",
    )


def _exp(x: float) -> float:
    """exp that saturates to inf instead of raising OverflowError."""
    return math.inf if x > 709.0 else math.exp(x)


def compare_paired(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    threshold: float = 0.02,
    confidence: float = 0.95,
    higher_is_better: bool = True,
) -> Comparison:
    """Paired rounds (A/B runs interleaved in time): geometric mean of per-round ratios, t interval.

    Pairing cancels slow drift (boost clock, temperature) that would otherwise masquerade as a
    difference between arms.
    """
    from scipy import stats

    a = np.asarray(baseline, dtype=float)
    b = np.asarray(candidate, dtype=float)
    if a.shape != b.shape:
        raise ValueError("paired comparison needs equally many baseline and candidate values")
    logs = np.log(b) - np.log(a)  # not log(b / a): a ratio of extreme rates would underflow to 0
    n = logs.size
    if n == 0:
        return Comparison(
            NAN, (NAN, NAN), confidence, threshold, higher_is_better, Verdict.INCONCLUSIVE, "paired-t-log"
        )
    mean = float(np.mean(logs))
    if n < 2:
        return Comparison(
            _exp(mean), (NAN, NAN), confidence, threshold, higher_is_better, Verdict.INCONCLUSIVE, "paired-t-log"
        )
    se = float(np.std(logs, ddof=1)) / math.sqrt(n)
    half = float(stats.t.ppf(0.5 + confidence / 2.0, n - 1)) * se
    ratio = _exp(mean)
    ci = (_exp(mean - half), _exp(mean + half))  # a wild interval overflows to inf: inconclusive, not an error
    return Comparison(
        ratio,
        ci,
        confidence,
        threshold,
        higher_is_better,
        decide(ratio, ci, threshold, higher_is_better),
        "paired-t-log",
    )


def require_all(verdicts: Sequence[Verdict], wanted: Verdict = Verdict.FASTER, failed: bool = False) -> GateDecision:
    """GO when every verdict is ``wanted``; NO-GO when any is decidedly not (or a correctness check
    failed); INCONCLUSIVE when the only obstacles are inconclusive cells."""
    if failed:
        return GateDecision.NO_GO
    if not verdicts:
        return GateDecision.INCONCLUSIVE
    if all(v == wanted for v in verdicts):
        return GateDecision.GO
    if any(v not in (wanted, Verdict.INCONCLUSIVE) for v in verdicts):
        return GateDecision.NO_GO
    return GateDecision.INCONCLUSIVE
