"""A/A self-test: how often do zincbench's verdicts call identical code faster or slower?

A gate is only worth as much as its false-positive rate (nvbench #316: repeat runs of the same code
flagged SLOW/FAST). Two modes, both writing one results document of kind ``aa``:

- ``run_microbench_aa``: N separate processes of ``python -m zincbench microbench`` time the same
  variant of the same case (separate processes, so that between-process variation counts as it does
  when a gate runs); every pair of processes is compared with ``judge.compare_medians`` at the
  family's gate threshold and confidence.
- ``run_ab_aa``: the same engine binary as arm A and arm B through ``zincbench.runs.ab``, repeated R
  times; every repeat's per-model verdict is one comparison. With a planted change (extra environment
  for arm B only, e.g. a fake engine's ``FAKE_SPEED=0.96``) and the verdict it should get, the same
  loop measures the detection rate (the power) instead: it passes when at least
  ``detection_coverage`` of the comparisons call the planted change.

Reported: the false-positive rate (``faster`` or ``slower`` verdicts) with a Clopper-Pearson interval
over *independent* comparisons only, the inconclusive rate, the noise floor (spread between processes
or rounds) and the minimum detectable change: the smallest uniform speed change of the candidate the
verdict would call in ``detection_coverage`` of the observed comparisons. The pass/fail decision is a
test over the independent comparisons (``judge_aa``), corrected for testing several models at once:
exit 0 when the Clopper-Pearson upper bound shows the false-positive rate at most the target, 1 when an
exact binomial test (Holm over the models) shows it above, 3 when the comparisons are too few to show
either or a process or repeat failed to produce a verdict, 4 when the machine lacks a GPU.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import math
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from zincbench import records
from zincbench.bench.rows import rows_of
from zincbench.config import experiment_path, load_config
from zincbench.errors import EnvironmentProblem, ExitCode, InputError
from zincbench.judge import Verdict, compare_medians
from zincbench.measure.process import run_process, signals_as_interrupts
from zincbench.progress import progress_bar
from zincbench.runs.aa_rows import ComparisonRow, ProcessRow, RepeatRow
from zincbench.runs.ab import ABSettings
from zincbench.runs.ab_rows import PAIRED_METRICS, PairedRatio

DEFAULT_CONFIG = "aa"
STDERR_TAIL_LINES = 20


# --- configuration (experiments/aa.yaml) ---------------------------------------------------------------


@dataclass
class MicrobenchAASettings:
    family: str = "t2"
    experiment: str | None = None
    case: str = "E256-M512-K2048-Ne16"
    variant: str = "fused_grouped"
    processes: int = 10
    quick: bool = False
    seed: int | None = None
    timeout_s: float = 600.0

    def __post_init__(self):
        if self.processes < 2:
            raise ValueError(f"processes must be at least 2 (an A/A compares two processes), got {self.processes}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s}")


@dataclass
class ABAASettings(ABSettings):
    """``zincbench ab``'s own settings (runs.ab.ABSettings, same defaults) plus how many independent
    A/B runs of the same binary to make."""

    repeats: int = 20

    def __post_init__(self):
        super().__post_init__()
        if self.repeats < 1:
            raise ValueError(f"repeats must be at least 1, got {self.repeats}")

    def ab_settings(self, repeat: int, gpu_uuid: str | None = None) -> ABSettings:
        """The ``zincbench ab`` settings of one repeat (its own seed for the random order)."""
        own = {f.name: getattr(self, f.name) for f in dataclasses.fields(ABSettings)}
        return ABSettings(**{**own, "seed": repeat, "gpu_uuid": gpu_uuid})


@dataclass
class AAConfig:
    target_fp_rate: float = 0.01
    interval_confidence: float = 0.95
    detection_coverage: float = 0.95
    microbench: MicrobenchAASettings = field(default_factory=MicrobenchAASettings)
    ab: ABAASettings = field(default_factory=ABAASettings)

    def __post_init__(self):
        for name in ("target_fp_rate", "interval_confidence", "detection_coverage"):
            if not 0 < getattr(self, name) < 1:
                raise ValueError(f"{name} must be a fraction strictly between 0 and 1, got {getattr(self, name)}")

    def with_overrides(self, mode: Literal["microbench", "ab"], **values) -> AAConfig:
        """A copy with the given ``mode`` settings replaced (None values are left alone); bad values are InputError."""
        values = {k: v for k, v in values.items() if v is not None}
        try:
            return dataclasses.replace(self, **{mode: dataclasses.replace(getattr(self, mode), **values)})
        except ValueError as exc:
            raise InputError(str(exc)) from None


def load_aa_config(path: str | Path | None = None) -> AAConfig:
    """experiments/aa.yaml, or the given file."""
    return load_config(AAConfig, experiment_path(path or DEFAULT_CONFIG))


# --- statistics ----------------------------------------------------------------------------------------


def clopper_pearson(events: int, trials: int, confidence: float) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval of a binomial rate; (nan, nan) without trials."""
    from scipy import stats

    if trials == 0:
        return (math.nan, math.nan)
    ci = stats.binomtest(events, trials).proportion_ci(confidence_level=confidence, method="exact")
    return (float(ci.low), float(ci.high))


def trials_to_bound(target: float, confidence: float) -> int:
    """Independent comparisons, all without a false positive, that put the Clopper-Pearson upper
    bound at or below ``target``: the upper bound of 0/n is 1 - (alpha/2)^(1/n)."""
    return math.ceil(math.log((1.0 - confidence) / 2.0) / math.log1p(-target))


@dataclass(frozen=True)
class VerdictTally:
    """How many comparisons of identical code ended in each verdict."""

    faster: int = 0
    slower: int = 0
    same: int = 0
    inconclusive: int = 0

    @classmethod
    def of(cls, verdicts: Iterable[str | Verdict]) -> VerdictTally:
        counts = collections.Counter(Verdict(v).value for v in verdicts)
        return cls(**{v.value: counts[v.value] for v in Verdict})

    @property
    def comparisons(self) -> int:
        return self.faster + self.slower + self.same + self.inconclusive

    @property
    def false_positives(self) -> int:
        return self.faster + self.slower

    def rate(self, events: int, confidence: float) -> dict:
        n = self.comparisons
        return {
            "events": events,
            "n": n,
            "rate": events / n if n else None,
            "ci": list(clopper_pearson(events, n, confidence)),
            "confidence": confidence,
        }

    def rates(self, confidence: float) -> dict:
        """The tally with its false-positive and inconclusive rates (Clopper-Pearson intervals)."""
        return {
            "tally": self.as_dict(),
            "false_positive": self.rate(self.false_positives, confidence),
            "inconclusive": self.rate(self.inconclusive, confidence),
        }

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def change_to_call(ratio: float, ci: Sequence[float], threshold: float, higher_is_better: bool) -> tuple[float, float]:
    """(speed-up, slow-down) of the candidate, as fractions of its speed, that this comparison would call.

    Scaling every candidate value by s scales the ratio and its interval by s exactly (bootstrap of
    medians and paired geometric mean alike), so the verdict turns to the "higher" side for every
    s >= max(1/lo, (1+threshold)/ratio) and to the "lower" side for every s <= min(1/hi, (1-threshold)/ratio).
    For times (lower is better) the speed is 1/s. (inf, inf) when the comparison has no interval.
    """
    lo, hi = ci
    if not all(v is not None and math.isfinite(v) and v > 0 for v in (ratio, lo, hi)):
        return (math.inf, math.inf)
    up = max(1.0 / lo, (1.0 + threshold) / ratio)
    down = min(1.0 / hi, (1.0 - threshold) / ratio)
    gain, loss = (up, down) if higher_is_better else (1.0 / down, 1.0 / up)
    return (max(0.0, gain - 1.0), max(0.0, 1.0 - loss))


def detectable_change(changes: Sequence[tuple[float, float]], coverage: float) -> dict:
    """The minimum detectable effect: the speed-up (slow-down) that ``coverage`` of the comparisons would call."""
    if not changes:
        return {"speedup": None, "slowdown": None, "coverage": coverage, "n": 0}
    gains, losses = np.array(changes, dtype=float).T
    # inverted_cdf: the smallest value with at least ``coverage`` of the comparisons at or below it
    return {
        "speedup": float(np.quantile(gains, coverage, method="inverted_cdf")),
        "slowdown": float(np.quantile(losses, coverage, method="inverted_cdf")),
        "coverage": coverage,
        "n": len(changes),
    }


def binomial_excess_p(events: int, trials: int, target: float) -> float:
    """One-sided exact binomial p-value of "the rate is at most ``target``": P(X >= events) for
    X ~ B(trials, target)."""
    from scipy import stats

    if trials == 0:
        return 1.0
    return float(stats.binomtest(events, trials, target, alternative="greater").pvalue)


def holm(p_values: dict[str, float], alpha: float) -> dict[str, bool]:
    """Holm's step-down correction: which hypotheses are rejected with a family-wise error of at most ``alpha``."""
    rejected = {name: False for name in p_values}
    for i, (name, p) in enumerate(sorted(p_values.items(), key=lambda item: item[1])):
        if p > alpha / (len(p_values) - i):
            break
        rejected[name] = True
    return rejected


def judge_aa(
    verdicts: Sequence[str], independent: Sequence[str] | dict[str, Sequence[str]], failures: int, config: AAConfig
) -> dict:
    """The A/A summary: false-positive and inconclusive rates, the pass/fail decision and its exit code.

    ``verdicts``: every comparison (the point estimate, shown); ``independent``: the comparisons that
    share no measurement, as one list or as groups (one per model of an ``ab`` A/A), each group a
    hypothesis "its false-positive rate is at most the target". The decision is a test, never a point
    estimate: FAIL when an exact one-sided binomial test rejects a group's hypothesis after Holm's
    correction over the groups (family-wise error 1 - interval_confidence); PASS when every group's
    Clopper-Pearson upper bound, Bonferroni-adjusted over the groups, is at most the target; otherwise
    INCONCLUSIVE (exit 3): too few comparisons to tell, with how many would do.
    """
    groups = dict(independent) if isinstance(independent, dict) else {"all": list(independent)}
    indep_all = [v for group in groups.values() for v in group]
    every, indep = VerdictTally.of(verdicts), VerdictTally.of(indep_all)
    confidence = config.interval_confidence
    alpha = 1.0 - confidence
    simultaneous = 1.0 - alpha / max(1, len(groups))  # Bonferroni: every group's bound holds at once
    tests = _group_tests(groups, config.target_fp_rate, alpha, simultaneous)
    summary = {
        "target_fp_rate": config.target_fp_rate,
        "comparisons": every.rates(confidence),
        "independent": indep.rates(confidence),
        "independent_needed": trials_to_bound(config.target_fp_rate, simultaneous),
        "test": {
            "method": "exact one-sided binomial test per group, Holm-corrected; pass: Clopper-Pearson "
            "upper bound per group, Bonferroni-adjusted",
            "alpha": alpha,
            "groups": tests,
        },
        "failures": failures,
        "notes": [],
    }
    code, outcome = _fp_decision(indep, tests, config.target_fp_rate)
    if outcome == "inconclusive":
        worst_upper = max(t["upper"] for t in tests.values() if t["upper"] is not None)
        summary["notes"].append(
            f"{indep.false_positives} false positive(s) in {indep.comparisons} independent comparisons neither show "
            f"the rate above the {config.target_fp_rate:.0%} target nor bound it below (upper bound "
            f"{worst_upper:.1%}): {summary['independent_needed']} independent comparisons without a false positive "
            f"{'per group ' if len(groups) > 1 else ''}would bound it"
        )
    if failures:
        summary["notes"].append(f"{failures} run(s) produced no verdict: see the results rows")
        if code == ExitCode.OK:
            code, outcome = ExitCode.INCONCLUSIVE, "inconclusive"
    if every.inconclusive > every.comparisons / 2:
        summary["notes"].append(
            "most comparisons are inconclusive: a low false-positive rate here also means "
            "the verdict rarely decides; more samples or rounds would narrow the intervals"
        )
    summary.update(outcome=outcome, exit_code=int(code))
    return summary


def _group_tests(groups: dict[str, list[str]], target: float, alpha: float, simultaneous: float) -> dict:
    """Per group of independent comparisons: its false positives, the exact test's p-value against "the rate is
    at most ``target``", whether Holm rejects that over the groups, and the Clopper-Pearson upper bound at
    the ``simultaneous`` confidence (None without comparisons)."""
    tallies = {name: VerdictTally.of(group) for name, group in groups.items()}
    tests = {
        name: {
            "false_positives": t.false_positives,
            "n": t.comparisons,
            "p_excess": binomial_excess_p(t.false_positives, t.comparisons, target),
            "upper": clopper_pearson(t.false_positives, t.comparisons, simultaneous)[1] if t.comparisons else None,
        }
        for name, t in tallies.items()
    }
    rejected = holm({name: t["p_excess"] for name, t in tests.items()}, alpha)
    for name, t in tests.items():
        t["rejected"] = rejected[name]
    return tests


def _fp_decision(indep: VerdictTally, tests: dict, target: float) -> tuple[ExitCode, str]:
    """Pass, fail or neither from the groups' tests, before failed runs count: fail when a group's excess is
    shown, pass when every group's upper bound is at most ``target``."""
    if not indep.comparisons:
        return ExitCode.INCONCLUSIVE, "no comparisons"
    if any(t["rejected"] for t in tests.values()):
        return ExitCode.FAIL, "fail"
    if all(t["upper"] is not None and t["upper"] <= target for t in tests.values()):
        return ExitCode.OK, "pass"
    return ExitCode.INCONCLUSIVE, "inconclusive"


def judge_detection(verdicts: Sequence[str], expected: str, failures: int, config: AAConfig) -> dict:
    """A planted change: how often the verdict calls it (``expected``), with a Clopper-Pearson interval;
    passes when that rate is at least ``detection_coverage``, fails below it."""
    tally = VerdictTally.of(verdicts)
    hits = getattr(tally, Verdict(expected).value)
    opposite = {"slower": tally.faster, "faster": tally.slower}.get(expected, 0)
    confidence = config.interval_confidence
    detected = tally.rate(hits, confidence)
    summary = {
        "expected": expected,
        "target_detection_rate": config.detection_coverage,
        "comparisons": {
            "tally": tally.as_dict(),
            "detected": detected,
            "wrong_direction": tally.rate(opposite, confidence),
            "inconclusive": tally.rate(tally.inconclusive, confidence),
        },
        "failures": failures,
        "notes": [],
    }
    if detected["rate"] is None:
        code, outcome = ExitCode.INCONCLUSIVE, "no comparisons"
    elif detected["rate"] >= config.detection_coverage:
        code, outcome = ExitCode.OK, "pass"
    else:
        code, outcome = ExitCode.FAIL, "fail"
    if failures:
        summary["notes"].append(f"{failures} run(s) produced no verdict: see the results rows")
    summary.update(outcome=outcome, exit_code=int(code))
    return summary


# --- microbench A/A ------------------------------------------------------------------------------------

Launcher = Callable[[list, float], subprocess.CompletedProcess]


def launch_process(argv: list, timeout_s: float) -> subprocess.CompletedProcess:
    """Run one microbench process to completion in its own process group (measure.process: the
    whole group is stopped at the timeout); raises subprocess.TimeoutExpired then."""
    result = run_process(argv, timeout_s=timeout_s)
    if result.timed_out:
        raise subprocess.TimeoutExpired(argv, timeout_s, result.stdout, result.stderr)
    return subprocess.CompletedProcess(argv, result.returncode, result.stdout, result.stderr)


def microbench_argv(settings: MicrobenchAASettings, results_dir: Path) -> list:
    argv = [
        sys.executable,
        "-m",
        "zincbench",
        "microbench",
        settings.family,
        "--case",
        settings.case,
        "--variant",
        settings.variant,
        "--no-ceilings",
        "--json",
        "--results-dir",
        str(results_dir),
    ]
    if settings.experiment:
        argv += ["--experiment", settings.experiment]
    if settings.quick:
        argv.append("--quick")
    if settings.seed is not None:
        argv += ["--seed", str(settings.seed)]
    return argv


def _tail(text: str | None) -> str:
    return "\n".join((text or "").strip().splitlines()[-STDERR_TAIL_LINES:])


def _last_line(text: str | None) -> str:
    """A child's one-line error, without its own "zincbench: error: " prefix."""
    lines = (text or "").strip().splitlines()
    return lines[-1].removeprefix("zincbench: error: ") if lines else "(no output)"


def _process_row(
    index: int, completed: subprocess.CompletedProcess, settings: MicrobenchAASettings
) -> tuple[ProcessRow, dict]:
    """One process's row (its raw samples, or why it has none) and its results document's environment.

    A child that finds no GPU (exit 4) or rejects its input (exit 2) would fail the same way every
    time: those abort the A/A with the child's own message. A single-variant microbench exits 3
    (the gate has no baseline to judge): that, 0 and 1 are normal ends.
    """
    rc = completed.returncode
    if rc == ExitCode.ENVIRONMENT:
        raise EnvironmentProblem(f"microbench process: {_last_line(completed.stderr)}")
    if rc == ExitCode.USAGE:
        raise InputError(f"microbench process: {_last_line(completed.stderr)}")
    if rc not in (ExitCode.OK, ExitCode.FAIL, ExitCode.INCONCLUSIVE):
        return ProcessRow(
            index=index, exit_code=rc, status="error", error=f"exit code {rc}", stderr_tail=_tail(completed.stderr)
        ), {}
    try:
        doc = records.read(json.loads(completed.stdout)["results_file"])
        rows = rows_of(doc)
    except (ValueError, KeyError, TypeError, InputError) as exc:
        return ProcessRow(
            index=index,
            exit_code=rc,
            status="error",
            error=f"unreadable output: {exc}",
            stderr_tail=_tail(completed.stderr),
        ), {}
    found = [r for r in rows if r.case == settings.case and r.variant == settings.variant]
    if not found or not found[0].timed:
        why = (found[0].skipped or f"correctness check: {found[0].to_json().get('check')}") if found else "no row"
        return ProcessRow(
            index=index,
            exit_code=rc,
            status="error",
            error=f"no timing for {settings.variant} on {settings.case}: {why}",
        ), {}
    result = found[0]
    m = result.measurement
    return ProcessRow(
        index=index,
        exit_code=rc,
        status="ok",
        gpu_us=m.gpu_us,
        summary=result.summary,
        stop_reason=m.stop_reason,
        dropped_throttled=m.dropped_throttled,
        detail=result.detail,
    ), doc.get("environment") or {}


def _process_noise(rows: list[ProcessRow]) -> dict:
    """Spread of the per-process medians (between-process noise) and the median in-process CI half-width."""
    medians = np.array([r.summary.median_us for r in rows], dtype=float)
    within = [r.summary.rel_noise for r in rows if r.summary.rel_noise is not None]
    return {
        "median_us": float(np.median(medians)),
        "process_cv": float(np.std(medians, ddof=1) / np.mean(medians)),
        "process_range": float((medians.max() - medians.min()) / np.median(medians)),
        "within_process_rel_noise": float(np.median(within)) if within else None,
    }


def compare_processes(samples: Sequence[Sequence[float]], threshold: float, confidence: float) -> list[ComparisonRow]:
    """Every pair (i < j) of processes, i as baseline; pairs (0,1), (2,3), ... share no process and
    are marked independent."""
    out = []
    for i, j in itertools.combinations(range(len(samples)), 2):
        cmp = compare_medians(samples[i], samples[j], threshold=threshold, confidence=confidence)
        out.append(
            ComparisonRow(
                baseline=i,
                candidate=j,
                independent=i % 2 == 0 and j == i + 1,
                time_ratio=cmp.ratio,
                ci=list(cmp.ci),
                verdict=cmp.verdict.value,
                change_to_call=list(change_to_call(cmp.ratio, cmp.ci, threshold, higher_is_better=False)),
            )
        )
    return out


@dataclass
class AAOutcome:
    document: records.Document
    path: Path
    summary: dict  # the document's verdict
    exit_code: ExitCode


def _gate_rule(settings: MicrobenchAASettings):
    """The family's gate rule, after checking that the case and variant exist (no GPU needed)."""
    from zincbench.bench import load_family

    family = load_family(settings.family)
    path = experiment_path(settings.experiment or family.default_experiment)
    cfg = family.load(path)
    cases = [c.key for c in family.cases(cfg)]
    if settings.case not in cases:
        raise InputError(f"no {settings.family} case {settings.case!r} in {path} (cases: {', '.join(cases)})")
    variants = [v.name for v in family.variants(cfg)]
    if settings.variant not in variants:
        raise InputError(
            f"no {settings.family} variant {settings.variant!r} in {path} (variants: {', '.join(variants)})"
        )
    return family.gate_rule(cfg), path


def run_microbench_aa(
    config: AAConfig, *, results_dir=None, launch: Launcher = launch_process, progress: bool = True
) -> AAOutcome:
    """Time one kernel against itself in ``config.microbench.processes`` separate processes and judge
    every pair at the family's gate threshold and confidence."""
    settings = config.microbench
    rule, experiment = _gate_rule(settings)
    doc = records.Document(
        kind="aa",
        environment={},
        config={
            "mode": "microbench",
            "settings": dataclasses.asdict(settings),
            "experiment": str(experiment),
            "verdict_rule": {
                "method": "bootstrap-median",
                "threshold": rule.threshold,
                "confidence": rule.confidence,
                "source": f"{experiment} gate",
            },
            "target_fp_rate": config.target_fp_rate,
            "interval_confidence": config.interval_confidence,
            "detection_coverage": config.detection_coverage,
        },
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="zincbench-aa-") as scratch, progress_bar(progress) as bar:
        task = bar.add_task(f"A/A {settings.variant} {settings.case}", total=settings.processes)
        argv = microbench_argv(settings, Path(scratch))

        def measured():
            for index in range(settings.processes):
                try:
                    yield _process_row(index, launch(argv, settings.timeout_s), settings)
                except subprocess.TimeoutExpired:
                    yield ProcessRow(index=index, status="error", error=f"timed out after {settings.timeout_s:g} s"), {}
                bar.advance(task)

        processes = measured()
        first = next(processes)  # no GPU or bad input stops here, before a results file exists
        with signals_as_interrupts(), records.IncrementalWriter(doc, directory=results_dir) as writer:
            for row, environment in itertools.chain([first], processes):
                doc.environment = doc.environment or environment
                rows.append(row)
                doc.results.append(row)
                writer.flush()
            ok = [r for r in rows if r.status == "ok"]
            comparisons = compare_processes([r.gpu_us for r in ok], rule.threshold, rule.confidence)
            doc.results.extend(comparisons)
            summary = judge_aa(
                [c.verdict for c in comparisons],
                [c.verdict for c in comparisons if c.independent],
                len(rows) - len(ok),
                config,
            )
            summary.update(
                mode="microbench",
                threshold=rule.threshold,
                confidence=rule.confidence,
                processes={"requested": settings.processes, "ok": len(ok)},
                noise=_process_noise(ok) if len(ok) >= 2 else None,
                detectable=detectable_change([c.change_to_call for c in comparisons], config.detection_coverage),
            )
            doc.verdict = summary
    return AAOutcome(doc, writer.path, summary, ExitCode(summary["exit_code"]))


# --- ab A/A --------------------------------------------------------------------------------------------


def _ratios(rows: list[RepeatRow], metric: str) -> list[PairedRatio]:
    """The repeats' B/A of ``metric``, where they have one."""
    return [getattr(r, metric) for r in rows if getattr(r, metric) is not None]


def _ab_noise(rows: list[RepeatRow]) -> dict:
    """Round-to-round spread of the B/A ratios pooled over repeats (standard deviation of log B/A,
    about the relative spread): the noise the paired verdict sees."""
    out = {}
    for metric in PAIRED_METRICS:
        logs = np.log([x for ratio in _ratios(rows, metric) for x in ratio.round_ratios])
        out[f"{metric}_round_cv"] = float(np.std(logs, ddof=1)) if logs.size > 1 else None
    return out


def _by_model(rows: list[RepeatRow]) -> dict[str, list[str]]:
    """The repeats' verdicts per model: each model is one hypothesis of the A/A's test (Holm over models)."""
    groups: dict[str, list[str]] = {}
    for r in rows:
        groups.setdefault(r.model, []).append(r.verdict)
    return groups


def _rounds_used(rows: list[RepeatRow]) -> dict:
    """How many rounds the adaptive A/Bs took: the budget they used to decide."""
    rounds = np.array([r.rounds for r in rows], dtype=float)
    if not rounds.size:
        return {"mean": None, "median": None, "max": None, "stops": {}}
    return {
        "mean": float(rounds.mean()),
        "median": float(np.median(rounds)),
        "max": int(rounds.max()),
        "stops": dict(collections.Counter(r.stop for r in rows)),
    }


def run_ab_aa(
    models: Sequence,
    engine,
    config: AAConfig,
    *,
    env: dict | None = None,
    gpu_uuid: str | None = None,
    planted: dict | None = None,
    expect: str | None = None,
    results_dir=None,
    monitor=None,
    progress: bool = True,
) -> AAOutcome:
    """The same ``engine`` as arm A and arm B, ``config.ab.repeats`` independent A/B runs; every
    (repeat, model) verdict is one comparison of identical code. ``planted``: extra environment for
    arm B only, a change the verdict should call ``expect`` (slower/faster): the detection rate is judged."""
    from zincbench.runs.ab import Arm

    settings = config.ab
    if bool(planted) != bool(expect) or expect not in (None, "slower", "faster"):
        raise InputError("a planted change needs both --env-b K=V and --expect slower|faster")
    if monitor is None:
        from zincbench.gpu.nvml import Nvml

        monitor = Nvml(uuid=gpu_uuid)
    arms = [Arm("A", engine, dict(env or {})), Arm("B", engine, {**(env or {}), **(planted or {})})]
    doc = _ab_aa_document(models, engine, config, env=env, gpu_uuid=gpu_uuid, planted=planted, expect=expect)
    rows = []
    with progress_bar(progress) as bar:
        repeats = _repeated_ab(models, arms, settings, gpu_uuid, monitor, bar)
        # bad input (a missing model file, a binary that is no engine) stops here, before a results file
        first = next(repeats)
        with signals_as_interrupts(), records.IncrementalWriter(doc, directory=results_dir) as writer:
            for repeat, outcome in itertools.chain([first], repeats):
                doc.environment = doc.environment or outcome.document.environment
                doc.notes.extend(n for n in outcome.document.notes if n not in doc.notes)
                for model in outcome.models:
                    row = RepeatRow.of(repeat, model)
                    rows.append(row)
                    doc.results.append(row)
                writer.flush()
            summary = _judge_repeats(rows, config, len(models), expect)
            doc.verdict = summary
    return AAOutcome(doc, writer.path, summary, ExitCode(summary["exit_code"]))


def _ab_aa_document(models: Sequence, engine, config: AAConfig, *, env, gpu_uuid, planted, expect) -> records.Document:
    """The ``ab`` A/A's results document before its first repeat: the A/B settings, the engine, the planted
    change if any, and the verdict rule each repeat applies."""
    settings = config.ab
    return records.Document(
        kind="aa",
        environment={},
        config={
            "mode": "ab",
            "settings": dataclasses.asdict(settings),
            "engine": engine.describe(),
            "env": env or {},
            "planted": {"env_b": planted, "expect": expect} if planted else None,
            "models": [m.name for m in models],
            "gpu_uuid": gpu_uuid,
            "verdict_rule": {
                "method": "group-sequential paired-t-log (runs.sequential)",
                "threshold": settings.threshold,
                "alpha": settings.alpha,
                "source": "zincbench ab (runs.ab.summarize_model)",
            },
            "target_fp_rate": config.target_fp_rate,
            "interval_confidence": config.interval_confidence,
            "detection_coverage": config.detection_coverage,
        },
    )


def _repeated_ab(models: Sequence, arms: list, settings: ABAASettings, gpu_uuid, monitor, bar):
    """(repeat, ABOutcome) for each of ``settings.repeats`` A/B runs, lazily: each run quiet, without a CSV and
    with its results in a scratch folder (the A/A keeps their rows and notes, not their files)."""
    from rich.console import Console

    from zincbench.runs.ab import run_ab

    quiet = Console(quiet=True)  # run_ab's warnings land in its document's notes, gathered by the caller
    task = bar.add_task("A/A ab", total=settings.repeats)
    for repeat in range(settings.repeats):
        with tempfile.TemporaryDirectory(prefix="zincbench-aa-") as scratch:
            yield (
                repeat,
                run_ab(
                    models,
                    arms,
                    settings.ab_settings(repeat, gpu_uuid),
                    results_dir=scratch,
                    monitor=monitor,
                    console=quiet,
                    progress=False,
                    write_csv=False,
                ),
            )
        bar.advance(task)


def _judge_repeats(rows: list[RepeatRow], config: AAConfig, n_models: int, expect: str | None) -> dict:
    """The ``ab`` A/A's summary over its repeats' rows: the false-positive test (with a planted change, the
    detection rate instead) over the repeats that reached a verdict, then what they show per metric: verdicts,
    round-to-round noise, the change they would call, and the rounds they took."""
    settings = config.ab
    judged = [r for r in rows if r.verdict != "error"]
    verdicts = [r.verdict for r in judged]
    summary = (
        judge_detection(verdicts, expect, len(rows) - len(judged), config)
        if expect
        else judge_aa(verdicts, _by_model(judged), len(rows) - len(judged), config)
    )
    changes = {
        metric: [change_to_call(ratio.ratio, ratio.ci, settings.threshold, True) for ratio in _ratios(judged, metric)]
        for metric in PAIRED_METRICS
    }
    summary.update(
        mode="ab",
        threshold=settings.threshold,
        alpha=settings.alpha,
        repeats={"requested": settings.repeats, "models": n_models},
        rounds=_rounds_used(judged),
        by_metric={
            metric: VerdictTally.of(ratio.verdict for ratio in _ratios(judged, metric)).as_dict()
            for metric in PAIRED_METRICS
        },
        noise=_ab_noise(judged),
        detectable={metric: detectable_change(changes[metric], config.detection_coverage) for metric in PAIRED_METRICS},
    )
    return summary
