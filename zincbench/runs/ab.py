"""Interleaved A/B of two engine builds, or the p90 scoreboard of one build, against llama-bench.

Run plan per model: one discarded warm-up round (every arm once), then measured rounds whose arm
order is counterbalanced (abba: A B, B A, A B, ...), so boost-clock and thermal drift hit both arms
alike. An A/B is adaptive: after ``min_rounds`` and then every ``look_every`` rounds the verdict is
computed, and the model is done as soon as it is decided (runs.sequential: a group-sequential design
whose chance of any wrong faster/slower/same call stays at most ``alpha``), or when ``max_rounds``
or ``max_time_s`` is spent (then it is inconclusive). ``rounds`` fixes the count instead (one look).
Before every run NVML is asked whether anything else computes on the GPU; its SM clock, temperature
and power are recorded before and right after the run. The results document is rewritten after
every run, so an interrupted A/B keeps what it measured (``complete: false``); the CSV is written
before the document is marked complete.

Statistics per model and arm: median and p90 of prefill and decode tokens/s, the p90 by the
nearest-rank rule of the team's p90_scoreboard.sh (sorted ascending, index int((n-1)*0.9 + 0.5)),
reported only from ``P90_MIN_SAMPLES`` runs on (below that it is nearly the maximum). B against A:
paired per-round ratios B/A over the rounds where both arms succeeded, geometric mean with a t
interval (``judge.compare_paired``), four-way verdict at ``threshold``. Failed runs are counted
apart: they never turn a decided verdict into "error"; only a failure share above
``max_failure_rate`` (or no complete pair at all) does.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
import platform
import random
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from zincbench.engines.base import Engine, NotSupported
from zincbench.errors import EnvironmentProblem, ExitCode, InputError, worst
from zincbench.judge import Verdict, compare_paired
from zincbench.measure.llama_bench import LlamaBenchRow, run_llama_bench
from zincbench.measure.process import EngineFailure, launch_problem, signals_as_interrupts
from zincbench.progress import progress_bar
from zincbench.records import Document, IncrementalWriter, Rejudged, drift_details, to_jsonable
from zincbench.runs.ab_rows import PAIRED_METRICS, ABRun, ArmStats, PairedRatio, ScoreboardRow
from zincbench.runs.sequential import METRICS, SequentialDesign

# A neutral sentence (no code, no numbers, no chat markers) repeated to the wanted length, as
# p90_scoreboard.sh repeats its own 40 times for ~512 tokens. 12.8 tokens per sentence is an
# estimate for common BPE vocabularies; what gets recorded and matched is the T the engine reports.
NEUTRAL_SENTENCE = "The quiet garden behind the old library opens early each morning. "
TOKENS_PER_SENTENCE = 12.8
ORDERS = ("abba", "ab", "random")
AFTER_RUN_FIELDS = ("sm_clock_mhz", "temperature_c", "power_w", "clock_event_reasons")
PERCENTILE_RULE = "nearest-rank (p90_scoreboard.sh): sorted ascending, index int((n-1)*0.9 + 0.5)"
P90_MIN_SAMPLES = 10  # below this the nearest-rank p90 is (nearly) the maximum: not reported


def neutral_prompt(tokens: int = 512) -> str:
    """The deterministic benchmark prompt of about ``tokens`` tokens; the engine reports the exact count."""
    return (NEUTRAL_SENTENCE * max(1, round(tokens / TOKENS_PER_SENTENCE))).strip()


def id_prompt(tokens: int) -> str:
    """Synthetic prompt of ids 1..T for engines that take token ids (as prefill_catalog.sh)."""
    return ",".join(str(i) for i in range(1, tokens + 1))


def nearest_rank(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile, q in [0, 1], exactly as the team's scoreboard script computes it."""
    x = sorted(values)
    if not x:
        return float("nan")
    return float(x[int((len(x) - 1) * q + 0.5)])


def round_orders(arms: Sequence[str], rounds: int, order: str = "abba", seed: int = 0) -> list[tuple[str, ...]]:
    """Arm order of each measured round: abba alternates A B / B A, ab keeps A B, random shuffles (seeded)."""
    if order not in ORDERS:
        raise InputError(f"unknown run order {order!r} (known: {', '.join(ORDERS)})")
    arms = tuple(arms)
    if order == "ab":
        return [arms] * rounds
    if order == "abba":
        return [arms if r % 2 == 0 else arms[::-1] for r in range(rounds)]
    rng = random.Random(seed)
    return [tuple(rng.sample(arms, len(arms))) for _ in range(rounds)]


@dataclass
class Arm:
    """One side of the comparison: an engine build plus its extra environment (feature flags)."""

    name: str
    engine: Engine
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class ABSettings:
    """How an A/B runs and judges (checked on construction: ValueError naming the option)."""

    min_rounds: int = 6  # the first look at the verdict
    max_rounds: int = 30  # the budget in rounds (per model)
    look_every: int = 4  # rounds between looks: two abba blocks
    max_time_s: float = 1800.0  # the budget in time (per model), checked at every look
    alpha: float = 0.01  # chance of any wrong faster/slower/same call for one model (runs.sequential)
    max_failure_rate: float = 0.25  # above this share of failed runs the model's verdict is "error"
    rounds: int | None = None  # a fixed number of rounds instead of the adaptive design
    order: str = "abba"
    seed: int = 0
    prompt_tokens: int = 512
    n_gen: int = 160
    gpu_uuid: str | None = None
    threshold: float = 0.02
    timeout_s: float = 600.0
    require_clean_gpu: bool = False
    llama_bench_reps: int = 5

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"--order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        if self.rounds is not None and self.rounds < 2:
            raise ValueError(f"--rounds must be at least 2 (a paired comparison needs two rounds), got {self.rounds}")
        if self.min_rounds < 2 or self.max_rounds < self.min_rounds:
            raise ValueError(
                f"--min-rounds must be at least 2 and --max-rounds at least --min-rounds, "
                f"got {self.min_rounds}/{self.max_rounds}"
            )
        if self.look_every < 1:
            raise ValueError(f"--look-every must be at least 1, got {self.look_every}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"--alpha is a probability between 0 and 1 (0.01 = 1%), got {self.alpha}")
        if not 0 <= self.max_failure_rate < 1:
            raise ValueError(f"--max-failure-rate is a fraction in [0, 1), got {self.max_failure_rate}")
        if self.prompt_tokens < 2 or self.n_gen < 1:
            raise ValueError(
                f"--prompt-tokens must be at least 2 and --n-gen at least 1, got {self.prompt_tokens}/{self.n_gen}"
            )
        if not 0 < self.threshold < 1:
            raise ValueError(f"--threshold is a fraction between 0 and 1 (0.02 = 2%), got {self.threshold}")
        if not self.timeout_s > 0 or not self.max_time_s > 0:  # `not >` also refuses NaN
            raise ValueError(f"--timeout and --max-time must be positive, got {self.timeout_s}/{self.max_time_s}")

    @classmethod
    def checked(cls, **values) -> ABSettings:
        """Settings from the command line: a value out of range is bad input (InputError naming the option)."""
        try:
            return cls(**values)
        except ValueError as exc:
            raise InputError(str(exc)) from None

    def design(self) -> SequentialDesign:
        """When the A/B looks at its verdict: fixed ``rounds`` is a single look."""
        if self.rounds is not None:
            return SequentialDesign(self.rounds, self.rounds, 1, self.alpha)
        return SequentialDesign(self.min_rounds, self.max_rounds, self.look_every, self.alpha)

    def scoreboard_rounds(self) -> int:
        """Rounds of a one-arm scoreboard (nothing to decide): enough for its p90."""
        return self.rounds if self.rounds is not None else max(self.min_rounds, P90_MIN_SAMPLES)


@dataclass
class ABOutcome:
    document: Document
    path: Path
    csv_path: Path | None
    models: list[ScoreboardRow]
    overall: str
    exit_code: ExitCode


def benchmark_prompt(engine: Engine, prompt_tokens: int) -> str:
    """Text for engines that tokenize; ids 1..T for those that take ids (cuda-dbg, capped at 256)."""
    if engine.kind != "zinc-dbg":
        return neutral_prompt(prompt_tokens)
    cap = getattr(engine, "max_prompt_ids", None)
    if cap is not None and prompt_tokens > cap:
        raise InputError(
            f"zinc-dbg takes at most {cap} prompt ids (it drops the rest silently): use --prompt-tokens {cap} or less"
        )
    return id_prompt(prompt_tokens)


# --- measuring ---------------------------------------------------------------------------------------


class _GpuGuard:
    """The clean-GPU check before each run, over a ``zincbench.gpu.nvml.Nvml``-like monitor."""

    def __init__(self, monitor, uuid: str | None, require_clean: bool, warn):
        self.monitor, self.require_clean, self.warn = monitor, require_clean, warn
        if uuid and getattr(monitor, "unknown_uuid", False):
            raise InputError(f"--gpu {uuid}: NVML knows no GPU with this UUID")

    def before_run(self) -> dict:
        snap = self.monitor.snapshot()
        others = snap.get("other_compute_processes") or []
        if others:
            listing = ", ".join(f"pid {p['pid']} ({p.get('used_mib', '?')} MiB)" for p in others)
            if self.require_clean:
                raise EnvironmentProblem(f"GPU is not clean, other compute processes: {listing} (--require-clean-gpu)")
            self.warn(f"GPU is not clean, other compute processes: {listing}; numbers may be disturbed")
        return snap

    def after_run(self) -> dict:
        """Clock, temperature and power right after a run, while the GPU still shows the run's state."""
        snap = self.monitor.snapshot()
        return {key: snap.get(key) for key in ("available", *AFTER_RUN_FIELDS)}


def _run_record(model, arm: Arm, round_no: int, prompt: str, settings: ABSettings, guard: _GpuGuard) -> ABRun:
    gpu = guard.before_run()
    env = {**model.engine_env, **arm.env}
    if settings.gpu_uuid:
        env["CUDA_VISIBLE_DEVICES"] = settings.gpu_uuid
    start = time.perf_counter()
    try:
        result = arm.engine.throughput(model.gguf, prompt, settings.n_gen, env=env, timeout_s=settings.timeout_s)
    except NotSupported as exc:
        raise InputError(f"arm {arm.name}: {exc}") from None
    except EngineFailure as exc:
        if exc.reason == "missing":
            raise InputError(f"arm {arm.name}: {exc}") from None
        outcome = {
            "status": "error",
            "error": {"reason": exc.reason, "message": str(exc), "stderr_tail": exc.stderr_tail},
        }
    else:
        outcome = {
            "status": "ok",
            "prefill_tokens": result.prefill_tokens,
            "prefill_tps": result.prefill_tps,
            "decode_tokens": result.decode_tokens,
            "decode_tps": result.decode_tps,
            "extra": result.extra,
        }
    wall_s = time.perf_counter() - start
    return ABRun(
        model=model.name,
        arm=arm.name,
        round=round_no,
        warmup=round_no == 0,
        gpu=gpu,
        **outcome,
        wall_s=wall_s,
        gpu_after=guard.after_run(),
    )


# --- judging -----------------------------------------------------------------------------------------


def _arm_stats(records: list[ABRun]) -> ArmStats:
    prefill = [r.prefill_tps for r in records]
    decode = [r.decode_tps for r in records if r.decode_tps is not None]
    tokens = collections.Counter(r.prefill_tokens for r in records)

    def p90(values):
        return nearest_rank(values, 0.9) if len(values) >= P90_MIN_SAMPLES else None

    return ArmStats(
        n=len(records),
        n_decode=len(decode),
        prefill_tokens=tokens.most_common(1)[0][0] if tokens else None,
        prefill_p90=p90(prefill),
        prefill_median=float(np.median(prefill)) if prefill else None,
        decode_p90=p90(decode),
        decode_median=float(np.median(decode)) if decode else None,
    )


def zero_rates(run: ABRun) -> list[str]:
    """The rates of a successful run that are not a measurement (zero, negative or NaN), as 'prefill 0 tok/s'."""
    rates = (("prefill", run.prefill_tps), ("decode", run.decode_tps))
    return [
        f"{name} {value:g} tok/s"
        for name, value in rates
        if value is not None and not (isinstance(value, (int, float)) and 0 < value < math.inf)
    ]


def _zero_against_a(measured: list[ABRun], arms: Sequence[str]) -> list[int]:
    """The measured rounds where B reported a zero rate of a metric that A measured (> 0) in that round."""
    if len(arms) != 2:
        return []
    by_round = collections.defaultdict(dict)
    for r in measured:
        if r.status == "ok":
            by_round[r.round][r.arm] = r
    rounds = []
    for round_no, runs in sorted(by_round.items()):
        a, b = runs.get(arms[0]), runs.get(arms[1])
        if a is None or b is None:
            continue
        for metric in ("prefill_tps", "decode_tps"):
            va, vb = getattr(a, metric), getattr(b, metric)
            if vb is not None and vb <= 0 and va is not None and 0 < va < math.inf:
                rounds.append(round_no)
                break
    return rounds


def _paired(records: list[ABRun], metric: str, threshold: float, confidence: float) -> PairedRatio | None:
    """B/A per round over the rounds where both arms produced the metric."""
    by_round = collections.defaultdict(dict)
    for r in records:
        if getattr(r, metric) is not None:
            by_round[r.round][r.arm] = getattr(r, metric)
    pairs = [(v["A"], v["B"]) for _, v in sorted(by_round.items()) if "A" in v and "B" in v]
    if not pairs:
        return None
    a, b = zip(*pairs)
    cmp = compare_paired(a, b, threshold=threshold, confidence=confidence, higher_is_better=True)
    return PairedRatio(
        ratio=cmp.ratio,
        ci=list(cmp.ci),
        confidence=cmp.confidence,
        verdict=cmp.verdict.value,
        n_pairs=len(pairs),
        method=cmp.method,
        round_ratios=[y / x for x, y in pairs],
    )


def combine_verdicts(prefill: str | None, decode: str | None) -> str:
    """One verdict per model: slower if either metric is slower, faster if one is faster and none
    slower, same only if every measured metric is the same; otherwise inconclusive."""
    verdicts = [v for v in (prefill, decode) if v is not None]
    if not verdicts:
        return Verdict.INCONCLUSIVE.value
    if Verdict.SLOWER.value in verdicts:
        return Verdict.SLOWER.value
    if Verdict.FASTER.value in verdicts:
        return Verdict.FASTER.value
    if all(v == Verdict.SAME.value for v in verdicts):
        return Verdict.SAME.value
    return Verdict.INCONCLUSIVE.value


VERDICT_EXIT = {
    "faster": ExitCode.OK,
    "same": ExitCode.OK,
    "measured": ExitCode.OK,
    "slower": ExitCode.FAIL,
    "inconclusive": ExitCode.INCONCLUSIVE,
    "error": ExitCode.INCONCLUSIVE,
}


def decided(summary: ScoreboardRow) -> bool:
    """Can the A/B of this model stop? When it is slower on some metric, or every measured metric
    is decided (faster/same/slower), or its failures already make it an error."""
    if summary.verdict in ("slower", "error"):
        return True
    verdicts = [ratio.verdict for ratio in summary.paired().values()]
    return bool(verdicts) and Verdict.INCONCLUSIVE.value not in verdicts


def summarize_model(
    model,
    records: list[ABRun],
    arms: Sequence[str],
    threshold: float,
    confidence: float | None = None,
    max_failure_rate: float = ABSettings.max_failure_rate,
) -> ScoreboardRow:
    """The scoreboard row of one model from its run records (warm-up runs excluded from statistics).

    ``confidence``: of the paired intervals; by default that of a fixed-rounds A/B at the default
    alpha. Failed runs are listed in ``errors`` and counted in ``failed_runs``; the verdict is
    judged on the rounds where both arms succeeded, and is "error" only when no round did or the
    share of failed measured runs is above ``max_failure_rate``.
    """
    if confidence is None:  # a single look spends the whole alpha of its metric
        confidence = 1.0 - ABSettings.alpha / METRICS
    measured = [r for r in records if not r.warmup]
    # A run that reported a rate of zero (or a negative or NaN one) measured no throughput: it is kept out
    # of every statistic and ratio (no division by zero), listed apart (_run_errors) and judged (_judge_failures).
    ok = [r for r in measured if r.status == "ok" and not zero_rates(r)]
    stats = {arm: _arm_stats([r for r in ok if r.arm == arm]) for arm in arms}
    prefill = decode = None
    if len(arms) == 2:
        prefill = _paired(ok, "prefill_tps", threshold, confidence)
        decode = _paired(ok, "decode_tps", threshold, confidence)
        verdict = combine_verdicts(*(ratio.verdict if ratio else None for ratio in (prefill, decode)))
    else:
        verdict = "measured"
    verdict, notes = _judge_failures(verdict, measured, ok, arms, prefill, max_failure_rate)
    return ScoreboardRow(
        model=model.name,
        shape=model.shape,
        gguf=str(model.gguf),
        arms=stats,
        prefill=prefill,
        decode=decode,
        errors=_run_errors(records),
        failed_runs=len(measured) - len(ok),
        rounds=len({r.round for r in measured}),
        verdict=verdict,
        prefill_tokens=stats[arms[-1]].prefill_tokens or stats[arms[0]].prefill_tokens,
        notes=notes + _arm_notes(stats, arms),
    )


def _run_errors(records: list[ABRun]) -> list[dict]:
    """The failed runs of a model (warm-up included), for the scoreboard row's ``errors``: the engine's own
    failures, then the runs that reported a zero rate."""
    errors = [{"arm": r.arm, "round": r.round, **r.error} for r in records if r.status == "error"]
    return errors + [
        {
            "arm": r.arm,
            "round": r.round,
            "reason": "zero-rate",
            "message": f"reported {', '.join(zero_rates(r))}: no throughput measured",
            "stderr_tail": "",
        }
        for r in records
        if r.status == "ok" and zero_rates(r)
    ]


def _judge_failures(
    verdict: str,
    measured: list[ABRun],
    ok: list[ABRun],
    arms: Sequence[str],
    prefill: PairedRatio | None,
    max_failure_rate: float,
) -> tuple[str, list[str]]:
    """The verdict once the failed measured runs are counted, with a note saying why it changed (or what was
    left out). Failures never turn a decided verdict into "error" unless there are too many of them or no
    round is complete; a zero rate of B where A measured one is always "slower"."""
    failed = len(measured) - len(ok)
    zero_b = _zero_against_a(measured, arms)
    if zero_b:
        # B measured nothing where A measured a rate: the slowest a build can be, a regression whatever
        # the other rounds say (never "error" or "inconclusive", which would hide it).
        return "slower", [
            f"arm {arms[-1]} reported a zero rate in round(s) {', '.join(map(str, zero_b))} where "
            f"{arms[0]} measured one: slower"
        ]
    if measured and failed / len(measured) > max_failure_rate:
        return "error", [
            f"{failed} of {len(measured)} measured runs failed (more than {max_failure_rate:.0%}): no verdict"
        ]
    if not ok or (len(arms) == 2 and prefill is None):
        return "error", ["no round where every arm succeeded: no verdict"]
    if failed:
        return verdict, [
            f"{failed} failed run(s) left out; the verdict is judged on the rounds where both arms succeeded"
        ]
    return verdict, []


def _arm_notes(stats: dict[str, ArmStats], arms: Sequence[str]) -> list[str]:
    """What the arms' statistics leave out or disagree on: runs without a decode rate, different prompt lengths."""
    notes = []
    for arm in arms:
        dropped = stats[arm].n - stats[arm].n_decode
        if stats[arm].n_decode and dropped:
            notes.append(
                f"arm {arm}: {dropped} of {stats[arm].n} successful runs printed no decode rate "
                "(left out of the decode statistics)"
            )
    tokens = {s.prefill_tokens for s in stats.values() if s.prefill_tokens is not None}
    if len(tokens) > 1:
        notes.append(f"arms report different prompt lengths {sorted(tokens)}: are the tokenizers the same?")
    return notes


def summarize_recorded(model, records: list[ABRun], arms: Sequence[str], settings: dict) -> ScoreboardRow:
    """Re-judge one model of a recorded A/B (``config.settings`` of its document) at the confidence
    of the look it stopped at, so a recorded adaptive verdict can be reproduced from its raw runs."""
    known = {f.name for f in dataclasses.fields(ABSettings)}
    recorded = ABSettings(**{k: v for k, v in settings.items() if k in known})
    rounds = len({r.round for r in records if not r.warmup})
    return summarize_model(
        model, records, arms, recorded.threshold, recorded.design().confidence_at(rounds), recorded.max_failure_rate
    )


def rejudge(doc: dict, where: str) -> Rejudged:
    """A recorded A/B document judged again, model by model, from its rounds."""
    config = doc["config"]
    arms = list(config["arms"])
    recorded_models = {m["model"]: m for m in (doc.get("verdict") or {}).get("models", [])}
    by_model = collections.defaultdict(list)
    for record in map(ABRun.from_json, doc["results"]):
        by_model[record.model].append(record)
    summaries = []
    for name in config["models"]:
        if by_model[name]:
            known = recorded_models.get(name, {})
            model = types.SimpleNamespace(name=name, shape=known.get("shape"), gguf=known.get("gguf", ""))
            summaries.append(summarize_recorded(model, by_model[name], arms, config["settings"]))
    if not summaries:
        return Rejudged(ExitCode.INCONCLUSIVE, "no runs recorded")
    code = worst(VERDICT_EXIT[s.verdict] for s in summaries)
    details = drift_details("exit code", (doc.get("verdict") or {}).get("exit_code"), int(code))
    details["verdicts"] = {s.model: s.verdict for s in summaries}
    return Rejudged(code, ", ".join(f"{k}: {v}" for k, v in details["verdicts"].items()), details)


# --- llama-bench baseline ----------------------------------------------------------------------------


def _nearest(rows: list[LlamaBenchRow], size, target: int | None) -> LlamaBenchRow | None:
    if not rows:
        return None
    return min(rows, key=lambda r: abs(size(r) - target) if target else 0)


def llama_baseline(
    rows: Sequence[LlamaBenchRow], model, prefill_tokens: int | None, n_gen: int, only_model: bool
) -> dict | None:
    """This model's llama-bench pp (nearest to the engine's T) and tg (nearest to n_gen) results.

    Rows are matched by GGUF file name or alias; markdown output names no file, so its rows are
    used only when the run has one model and the file one model type.
    """
    matched = [r for r in rows if r.model_filename and model.matches_file(r.model_filename)]
    if (
        not matched
        and only_model
        and all(r.model_filename is None for r in rows)
        and len({r.model_type for r in rows}) == 1
    ):
        matched = list(rows)
    pp = _nearest([r for r in matched if r.is_prefill], lambda r: r.n_prompt, prefill_tokens)
    tg = _nearest([r for r in matched if r.is_decode], lambda r: r.n_gen, n_gen)
    if pp is None and tg is None:
        return None
    return {name: (row.summary() if row else None) for name, row in (("pp", pp), ("tg", tg))}


def _gap(summary: ScoreboardRow, arms: Sequence[str]) -> float | None:
    """llama ppT over the newest build's prefill p90: how many times faster llama.cpp is."""
    pp = ((summary.llama or {}).get("pp") or {}).get("avg_ts")
    p90 = summary.arms[arms[-1]].prefill_p90
    return pp / p90 if pp and p90 else None


# --- the run -----------------------------------------------------------------------------------------


def _verdict(summaries: list[ScoreboardRow], arms: Sequence[str]) -> tuple[str, ExitCode]:
    """The run's verdict and exit code: any slower model fails it, any error or inconclusive one
    leaves it inconclusive."""
    code = worst(VERDICT_EXIT[s.verdict] for s in summaries)
    if len(arms) == 1:
        return ("error" if code != ExitCode.OK else "measured"), code
    verdicts = {s.verdict for s in summaries}
    if "slower" in verdicts:
        return "slower", code
    if verdicts & {"error", "inconclusive"}:
        return ("error" if "error" in verdicts else "inconclusive"), code
    return ("faster" if "faster" in verdicts else "same"), code


def run_ab(
    models: Sequence,
    arms: Sequence[Arm],
    settings: ABSettings,
    *,
    llama_rows: Sequence[LlamaBenchRow] | None = None,
    llama_bench_bin: str | Path | None = None,
    results_dir: str | Path | None = None,
    results_path: str | Path | None = None,
    monitor=None,
    console=None,
    progress: bool = True,
    write_csv: bool = True,
) -> ABOutcome:
    """Measure every model with every arm in counterbalanced rounds until decided; return the judged scoreboard.

    ``models`` are catalog models (``name``, ``gguf``, ``shape``, ``engine_env``, ``matches_file``);
    ``arms`` one (scoreboard) or two (A/B). ``monitor`` defaults to NVML on ``settings.gpu_uuid``.
    With ``write_csv`` the scoreboard CSV lands next to the results document before it is marked
    complete. SIGTERM and SIGHUP are handled as Ctrl-C (measure.process.signals_as_interrupts).
    """
    from rich.console import Console

    check_runnable(models, arms, llama_bench_bin)
    names = [a.name for a in arms]
    prompts = {a.name: benchmark_prompt(a.engine, settings.prompt_tokens) for a in arms}
    console = console or Console(stderr=True)
    if monitor is None:
        from zincbench.gpu.nvml import Nvml

        monitor = Nvml(uuid=settings.gpu_uuid)
    doc = ab_document(models, arms, settings, prompts, monitor, llama_rows=llama_rows, llama_bench_bin=llama_bench_bin)
    warn = _warn_once(doc, console)
    if not monitor.available:
        warn(f"NVML unavailable ({monitor.error}): clean-GPU check and clocks not recorded")
    guard = _GpuGuard(monitor, settings.gpu_uuid, settings.require_clean_gpu, warn)
    with (
        signals_as_interrupts(),
        IncrementalWriter(doc, results_path, results_dir) as writer,
        progress_bar(progress, console) as bar,
    ):
        task = bar.add_task("ab", total=_planned_steps(models, arms, settings, live_llama=bool(llama_bench_bin)))
        summaries: list[ScoreboardRow] = []
        for model in models:
            summary = _measure_model(model, arms, settings, prompts, guard, warn, doc, writer, bar, task)
            if llama_bench_bin:
                bar.update(task, description=f"{model.name} llama-bench")
                summary.llama = _live_llama(llama_bench_bin, model, summary, settings, warn)
                bar.advance(task)
            elif llama_rows:
                summary.llama = _filed_llama(llama_rows, model, summary, settings.n_gen, len(models) == 1, warn)
            summary.gap = _gap(summary, names)
            summaries.append(summary)
            overall, code = _record_verdict(doc, summaries, names, settings.threshold)
            writer.flush()
        csv_path = None
        if write_csv:  # before the document says complete: an interrupt here leaves complete: false
            csv_path = writer.path.with_suffix(".csv")
            write_scoreboard_csv(summaries, names, csv_path)
    return ABOutcome(doc, writer.path, csv_path, summaries, overall, code)


def check_runnable(models: Sequence, arms: Sequence[Arm], llama_bench_bin) -> None:
    """Refuse, as bad input, what would fail every run: one arm or two, some models, every GGUF file there,
    every binary able to start. Checked before the results document exists, so bad input leaves no
    partial file."""
    if len(arms) not in (1, 2):
        raise InputError("an A/B needs one arm (scoreboard) or two (A and B)")
    if not models:
        raise InputError("no models to run (give --models with a catalog, or --model NAME=PATH)")
    for model in models:
        if not Path(model.gguf).is_file():
            raise InputError(f"model {model.name}: GGUF file not found: {model.gguf}")
    for arm in arms:
        program = arm.engine.program()
        problem = launch_problem(program, env={**os.environ, **arm.env}) if program else None
        if problem:
            raise InputError(f"arm {arm.name}: engine binary {problem}: {program}")
    problem = launch_problem(llama_bench_bin) if llama_bench_bin else None
    if problem:
        raise InputError(f"--llama-bench-bin {problem}: {llama_bench_bin}")


def ab_document(
    models: Sequence, arms: Sequence[Arm], settings: ABSettings, prompts: dict, monitor, *, llama_rows, llama_bench_bin
) -> Document:
    """The A/B's results document before its first run: the settings, the builds, the prompts, how the
    verdict is reached (the looks of the sequential design, for an A/B) and the GPU as it is now."""
    design = settings.design()
    return Document(
        kind="ab",
        config={
            "settings": dataclasses.asdict(settings),
            "models": [m.name for m in models],
            "arms": {a.name: {"engine": a.engine.describe(), "env": a.env} for a in arms},
            "llama_bench": {
                "source": "live" if llama_bench_bin else ("file" if llama_rows else None),
                "binary": str(llama_bench_bin) if llama_bench_bin else None,
            },
            "prompt": prompts,
            "percentile": PERCENTILE_RULE,
            "p90_min_samples": P90_MIN_SAMPLES,
            "design": {
                "method": "group-sequential paired-t-log, O'Brien-Fleming-type alpha spending, Bonferroni over looks",
                "looks": design.looks(),
                "look_confidence": [1.0 - a for a in design.look_alphas()],
                "alpha": settings.alpha,
            }
            if len(arms) == 2
            else None,
        },
        environment={
            "gpu": monitor.snapshot(),
            "host": platform.node(),
            "python": platform.python_version(),
        },
    )


def _warn_once(doc: Document, console):
    """The run's ``warn(message)``: each distinct message once, as a note in the document and on the console."""
    warned: set[str] = set()

    def warn(message: str) -> None:
        if message not in warned:
            warned.add(message)
            doc.notes.append(f"warning: {message}")
            console.print(f"[yellow]warning:[/] {message}", soft_wrap=True, highlight=False)

    return warn


def _planned_steps(models: Sequence, arms: Sequence[Arm], settings: ABSettings, live_llama: bool) -> int:
    """The progress bar's total: per model, every arm's warm-up and every round the budget allows, and a live
    llama-bench (rounds an A/B does not need are counted off as it stops)."""
    rounds_each = settings.scoreboard_rounds() if len(arms) == 1 else settings.design().max_rounds
    return len(models) * ((rounds_each + 1) * len(arms) + (1 if live_llama else 0))


def _filed_llama(rows: Sequence[LlamaBenchRow], model, summary: ScoreboardRow, n_gen: int, only_model: bool, warn):
    """This model's llama-bench columns from the --llama-bench file; a warning when no row matches it."""
    llama = llama_baseline(rows, model, summary.prefill_tokens, n_gen, only_model=only_model)
    if llama is None:
        warn(f"{model.name}: no row of the --llama-bench file matches this model (by GGUF file name or alias)")
    return llama


def _record_verdict(doc: Document, summaries: list[ScoreboardRow], names: Sequence[str], threshold: float):
    """The run's verdict over the models measured so far, written into the document's verdict; returns
    (overall, exit code)."""
    overall, code = _verdict(summaries, names)
    doc.verdict = {
        "overall": overall,
        "exit_code": int(code),
        "threshold": threshold,
        "models": to_jsonable(summaries),
    }
    return overall, code


def scoreboard_frame(models: Sequence[ScoreboardRow], arms: Sequence[str]):
    """The scoreboard as numbers, not text: one row per model (the CSV beside the results document)."""
    import pandas as pd

    records = []
    for s in models:
        rec = {
            "model": s.model,
            "shape": s.shape,
            "verdict": s.verdict,
            "prefill_tokens": s.prefill_tokens,
            "rounds": s.rounds,
            "failed_runs": s.failed_runs,
        }
        for arm in arms:
            for key in ("prefill_p90", "prefill_median", "decode_p90", "decode_median", "n"):
                rec[f"{arm}_{key}"] = getattr(s.arms[arm], key)
        for metric in PAIRED_METRICS:
            cmp = getattr(s, metric)
            low, high = cmp.ci if cmp else (None, None)
            rec.update(
                {
                    f"{metric}_ratio": cmp.ratio if cmp else None,
                    f"{metric}_ci_low": low,
                    f"{metric}_ci_high": high,
                    f"{metric}_confidence": cmp.confidence if cmp else None,
                    f"{metric}_verdict": cmp.verdict if cmp else None,
                }
            )
        llama = s.llama or {}
        pp, tg = llama.get("pp") or {}, llama.get("tg") or {}
        rec.update(
            llama_pp_test=pp.get("test"),
            llama_pp_ts=pp.get("avg_ts"),
            llama_tg_test=tg.get("test"),
            llama_tg_ts=tg.get("avg_ts"),
            gap=s.gap,
        )
        records.append(rec)
    return pd.DataFrame.from_records(records)


def write_scoreboard_csv(models: Sequence[ScoreboardRow], arms: Sequence[str], path: Path) -> None:
    scoreboard_frame(models, arms).to_csv(path, index=False)


def _measure_model(
    model,
    arms: Sequence[Arm],
    settings: ABSettings,
    prompts: dict,
    guard: _GpuGuard,
    warn,
    doc: Document,
    writer: IncrementalWriter,
    bar,
    task,
) -> ScoreboardRow:
    """Warm-up, then rounds until the verdict is decided or the budget is spent; the model's summary."""
    names = [a.name for a in arms]
    design = settings.design()
    looks = dict(zip(design.looks(), design.look_alphas()))
    last_round = settings.scoreboard_rounds() if len(arms) == 1 else design.max_rounds
    plan = [tuple(names)] + round_orders(names, last_round, settings.order, settings.seed)
    records: list[ABRun] = []
    start = time.monotonic()
    summary, stop = None, "max rounds"
    for round_no, order in enumerate(plan):
        for name in order:
            arm = next(a for a in arms if a.name == name)
            bar.update(task, description=f"{model.name} {'warm-up' if round_no == 0 else f'round {round_no}'} {name}")
            record = _run_record(model, arm, round_no, prompts[name], settings, guard)
            if record.status == "error":
                warn(f"{model.name} arm {name} round {round_no}: {record.error['message']}")
            records.append(record)
            doc.results.append(record)
            writer.flush()
            bar.advance(task)
        if len(arms) == 2 and round_no in looks:
            summary = summarize_model(
                model, records, names, settings.threshold, 1.0 - looks[round_no], settings.max_failure_rate
            )
            if decided(summary):
                stop = "decided"
                break
            if time.monotonic() - start >= settings.max_time_s:
                stop = "max time"
                break
    if summary is None:  # the scoreboard (one arm) has nothing to decide
        summary = summarize_model(model, records, names, settings.threshold, max_failure_rate=settings.max_failure_rate)
    summary.stop = stop if len(arms) == 2 else "rounds"
    bar.advance(task, (len(plan) - 1 - summary.rounds) * len(arms))  # rounds not needed
    for name in names:
        stats = summary.arms[name]
        if settings.n_gen > 1 and stats.n and not stats.n_decode:
            warn(f"{model.name} arm {name}: no run printed a decode rate the engine adapter could parse")
    return summary


def _live_llama(binary, model, summary: ScoreboardRow, settings: ABSettings, warn) -> dict | None:
    """This model's llama-bench columns, run now at the prompt length the engine reported (the asked one if
    it reported none). A failed llama-bench is a warning and an error entry, not the A/B's end."""
    n_prompt = summary.prefill_tokens or settings.prompt_tokens
    env = {"CUDA_VISIBLE_DEVICES": settings.gpu_uuid} if settings.gpu_uuid else None
    try:
        rows = run_llama_bench(
            binary,
            model.gguf,
            n_prompt,
            settings.n_gen,
            settings.llama_bench_reps,
            env=env,
            timeout_s=settings.timeout_s * settings.llama_bench_reps,
        )
    except EngineFailure as exc:
        if exc.reason == "missing":
            raise InputError(str(exc)) from None
        warn(f"{model.name}: llama-bench failed: {exc}" + (f"\n{exc.stderr_tail}" if exc.stderr_tail else ""))
        return {"error": {"reason": exc.reason, "message": str(exc), "stderr_tail": exc.stderr_tail}}
    return llama_baseline(rows, model, n_prompt, settings.n_gen, only_model=True)
