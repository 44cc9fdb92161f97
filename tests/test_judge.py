"""Statistics and verdicts: order-statistic CIs, the four-way verdict rule, both comparisons."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from zincbench.judge import (
    GateDecision,
    Verdict,
    compare_medians,
    compare_paired,
    decide,
    quantile_ci,
    require_all,
    summarize,
)


def test_quantile_ci_covers_the_true_median_at_its_confidence(sample_rng):
    """Coverage of the binomial order-statistic CI, checked by simulation on an exponential law."""
    true_median = math.log(2)
    hits = sum(
        lo <= true_median <= hi
        for lo, hi in (quantile_ci(sample_rng.exponential(size=60), 0.5, 0.95) for _ in range(400))
    )
    # 95% nominal (order statistics make it conservative); 400 trials: allow binomial scatter.
    assert hits / 400 >= 0.92


def test_quantile_ci_is_undefined_for_too_few_samples():
    lo, hi = quantile_ci([1.0, 2.0, 3.0], 0.9, 0.95)
    assert math.isnan(lo) and math.isnan(hi)
    assert all(math.isnan(v) for v in summarize([5.0, 6.0, 7.0]).p90_ci)


def test_summary_fields(rng):
    x = rng.normal(100, 1, size=500)
    s = summarize(x)
    assert s.n == 500 and s.median == pytest.approx(np.median(x)) and s.p90 == pytest.approx(np.quantile(x, 0.9))
    assert s.median_ci[0] <= s.median <= s.median_ci[1] and 0 < s.rel_noise < 0.01


@pytest.mark.parametrize(
    "ratio, ci, want",
    [
        (0.90, (0.88, 0.92), Verdict.FASTER),  # significant and beyond 3%
        (0.99, (0.985, 0.995), Verdict.SAME),  # significant but inside the band: same
        (1.10, (1.08, 1.12), Verdict.SLOWER),
        (0.95, (0.80, 1.10), Verdict.INCONCLUSIVE),  # practical but not significant
        (1.00, (0.96, 1.04), Verdict.INCONCLUSIVE),  # CI wider than the band
        (float("nan"), (0.9, 1.1), Verdict.INCONCLUSIVE),
    ],
)
def test_decide_needs_threshold_and_evidence(ratio, ci, want):
    assert decide(ratio, ci, threshold=0.03, higher_is_better=False) is want


def test_decide_direction_for_throughput():
    assert decide(1.10, (1.08, 1.12), 0.03, higher_is_better=True) is Verdict.FASTER


def test_compare_medians_detects_a_shift_and_calls_identical_same(sample_rng):
    base = sample_rng.normal(100, 0.5, size=300)
    assert compare_medians(base, sample_rng.normal(90, 0.5, size=300)).verdict is Verdict.FASTER
    assert compare_medians(base, sample_rng.normal(110, 0.5, size=300)).verdict is Verdict.SLOWER
    same = compare_medians(base, sample_rng.normal(100, 0.5, size=300))
    # SAME because the whole interval lies inside the 3% band (not because it covers 1: a 99% interval
    # misses the true ratio in 1% of draws, and SAME must not depend on that).
    assert same.verdict is Verdict.SAME and 0.97 < same.ci[0] <= same.ci[1] < 1.03
    assert compare_medians([1.0], [2.0]).verdict is Verdict.INCONCLUSIVE


def test_compare_paired_uses_the_t_interval_of_log_ratios():
    a = np.array([100.0, 102.0, 98.0, 101.0, 99.0, 100.0])
    b = a * np.array([0.95, 0.96, 0.94, 0.95, 0.955, 0.945])
    cmp = compare_paired(a, b, threshold=0.02, confidence=0.95, higher_is_better=True)
    logs = np.log(b / a)
    half = stats.t.ppf(0.975, 5) * logs.std(ddof=1) / math.sqrt(6)
    assert cmp.ratio == pytest.approx(math.exp(logs.mean()))
    assert cmp.ci == pytest.approx((math.exp(logs.mean() - half), math.exp(logs.mean() + half)))
    assert cmp.verdict is Verdict.SLOWER and cmp.speedup < 1
    with pytest.raises(ValueError):
        compare_paired([1.0, 2.0], [1.0])


def test_require_all():
    f, s, i = Verdict.FASTER, Verdict.SAME, Verdict.INCONCLUSIVE
    assert require_all([f, f]) is GateDecision.GO
    assert require_all([f, s]) is GateDecision.NO_GO
    assert require_all([f, i]) is GateDecision.INCONCLUSIVE
    assert require_all([f, f], failed=True) is GateDecision.NO_GO
    assert require_all([]) is GateDecision.INCONCLUSIVE
    assert [d.exit_code for d in GateDecision] == [0, 1, 3]
