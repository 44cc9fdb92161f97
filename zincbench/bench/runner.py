"""Run a microbench gate: for every case, check every variant against the float64 reference, time
the ones that pass (cold L2 by default), compare candidates with the baseline and decide GO/NO-GO.

Flow: measure (this module + zincbench.measure) -> records (MicrobenchRow rows in a Document) ->
judge (zincbench.judge) -> show (zincbench.show.microbench_table). Rows are written after every case,
so an interrupted run leaves a valid document marked incomplete.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np

from zincbench import judge, records
from zincbench.bench import autotune, load_family
from zincbench.bench.base import CheckResult, NotApplicable
from zincbench.bench.declared import declared_for
from zincbench.bench.rows import Floor, MicrobenchRow, Summary, VsBaseline
from zincbench.config import experiment_path
from zincbench.errors import InputError
from zincbench.measure.traffic import rates
from zincbench.progress import progress_bar


def _nvtx_range(name: str):
    try:
        import nvtx
    except ImportError:
        return contextlib.nullcontext()
    return nvtx.annotate(name, color="green")


def _check(family, config, case, inputs, prepared, tolerance, timer) -> CheckResult:
    import cupy

    # Inputs and workspaces were made on the default stream; the timer's stream does not wait for it.
    cupy.cuda.Device().synchronize()
    with timer.stream:
        if prepared.before_check:  # poison on the run's own stream: done before its first launch reads
            prepared.before_check()
        if prepared.output.dtype.kind == "f":
            prepared.output.fill(cupy.nan)  # poison: unwritten elements stay NaN
    # the launches meet on the GPU as in a timed sample: a launch that starts early reads what a timed one reads
    timer.run_held(prepared.run)
    failure = prepared.after_check() if prepared.after_check else None
    rel, written = family.check(config, case, inputs, prepared.output)
    if not math.isfinite(rel) and failure is None:
        failure = f"non-finite output: {trace_non_finite(prepared, timer.stream)}"
    return CheckResult(rel_error=rel, fully_written=written, tolerance=tolerance, failure=failure)


def trace_non_finite(prepared, stream) -> str:
    """Run the variant again stage by stage and name the first stage that wrote a non-finite value into the
    output or one of its workspaces (NaN-poisoned, so a read of unwritten memory shows up the same way)."""
    import cupy

    buffers = {"output": prepared.output, **(prepared.workspace or {})}
    floats = {name: a for name, a in buffers.items() if a.dtype.kind == "f"}
    with stream:
        if prepared.before_check:
            prepared.before_check()
        prepared.output.fill(cupy.nan)
    for stage, run in prepared.stages or [("the whole run", prepared.run)]:
        with stream:
            before = {name: a.copy() for name, a in floats.items()}
            run()
        stream.synchronize()
        for name, a in floats.items():
            kept = (a == before[name]) | (cupy.isnan(a) & cupy.isnan(before[name]))
            bad = ~kept & ~cupy.isfinite(a)
            if bool(bad.any()):
                first = np.unravel_index(int(cupy.argmax(bad.ravel())), a.shape)
                return (
                    f"stage {stage!r} wrote {int(bad.sum())} non-finite value(s) into {name} "
                    f"(first at {[int(i) for i in first]})"
                )
    return "no stage wrote a non-finite value; an output element was never written"


def run_microbench(
    family_name: str = "t2",
    experiment: str | None = None,
    *,
    results_dir=None,
    case_filter: str | None = None,
    variant_filter: list[str] | None = None,
    quick: bool = False,
    retune: bool = False,
    progress: bool = True,
    seed: int | None = None,
    ceilings: bool = True,
    gguf: str | None = None,
    layer: int | None = None,
    kernel_packs=(),
    engine_src: str | None = None,
    candidate: str | None = None,
    baseline: str | None = None,
) -> tuple[records.Document, judge.GateDecision, Path]:
    """Run one family's gate end to end; returns the document, the decision and where it was written.

    ``gguf``/``layer`` take shapes and weights from a real model file instead of random blocks.
    ``retune`` ignores cached autotune picks (and replaces them).
    ``variant_filter`` keeps only the named variants (the gate then decides only if both its
    candidate and baseline ran); ``ceilings=False`` skips the copy/cuBLAS ceiling measurement (no
    floor columns), for A/A self-tests that time one variant in many processes. ``kernel_packs`` adds
    declared-variant packs (YAML files) to the experiment's own; ``engine_src`` is the engine's source tree
    (the variable a pack names as its ``engine_tree``), in whose absence packs fall back to their bundled
    stand-ins.
    ``candidate`` / ``baseline`` replace the experiment's gate pair (e.g. a kernel declared in a pack).
    """
    from zincbench.gpu import require_cupy
    from zincbench.measure.timer import GpuTimer

    family = load_family(family_name)
    path = experiment_path(experiment or family.default_experiment)
    config = family.load(path, gguf=gguf, layer=layer)
    plan = plan_run(
        family,
        config,
        path,
        case_filter=case_filter,
        variant_filter=variant_filter,
        kernel_packs=kernel_packs,
        engine_src=engine_src,
        candidate=candidate,
        baseline=baseline,
    )
    require_cupy("microbench")
    timer_cfg = family.timer_config(config)
    timer = GpuTimer(timer_cfg.quick() if quick else timer_cfg)
    doc = microbench_document(family_name, path, config, plan, quick=quick, case_filter=case_filter, seed=seed)
    rng = np.random.default_rng(seed)
    writer = records.IncrementalWriter(doc, directory=results_dir)
    tuner = autotune.Autotuner(timer, autotune.device_scope(timer.device.name), retune=retune)

    with writer:
        ceil = record_ceilings(doc, timer) if ceilings else None
        measure_cases(family, config, plan, doc, writer, rng, tuner, timer, ceil, progress=progress)
        decision = record_verdict(family, config, plan, doc)
    return doc, decision, writer.path


def microbench_document(family_name: str, path: Path, config, plan, *, quick, case_filter, seed) -> records.Document:
    """The run's results document before its first row: what was asked, where the declared variants came from
    and the machine it runs on."""
    from zincbench.gpu.device import environment_report

    return records.Document(
        kind="microbench",
        config={
            "family": family_name,
            "experiment": str(path),
            "settings": records.to_jsonable(config),
            "quick": quick,
            "case_filter": case_filter,
            "seed": seed,
            "declared_sources": plan.declared_sources,
        },
        environment=environment_report(include_tools=False),
    )


def record_ceilings(doc: records.Document, timer):
    """Measure the copy and cuBLAS ceilings (every row's floor comes from them) and keep them, with their
    samples, in the document's config."""
    from zincbench.measure.ceilings import measure_ceilings

    ceil = measure_ceilings(timer)
    doc.config["ceilings"] = asdict(ceil.ceilings)
    doc.config["ceiling_samples_us"] = {"copy": ceil.copy.gpu_us, "cublas_fp16": ceil.gemm.gpu_us}
    return ceil


def measure_cases(family, config, plan, doc, writer, rng, tuner, timer, ceil, *, progress: bool) -> None:
    """Every planned variant on every planned case, one row each in the document; the variants of a case are
    compared with its baseline and the document written once the case is done (an interrupted run keeps
    the cases it finished). Each case's inputs are freed before the next is built."""
    import cupy

    with progress_bar(progress) as bar:
        task = bar.add_task(f"{family.name} microbench", total=len(plan.cases) * len(plan.variants))
        for case in plan.cases:
            inputs = family.build_inputs(config, case, rng)
            case_rows = {}
            for info in plan.variants:
                bar.update(task, description=f"{case.key} {info.name}")
                row = measure_variant(family, config, case, inputs, info, plan.declared, tuner, timer, ceil)
                if row.skipped is None:
                    case_rows[info.name] = row
                doc.results.append(row)
                bar.advance(task)
            compare_case(case_rows, plan.rule)
            del inputs
            cupy.get_default_memory_pool().free_all_blocks()
            writer.flush()


@dataclasses.dataclass
class RunPlan:
    """What one microbench run measures: its cases, its variants (the family's and the declared ones, after
    --variant), the declared variants' packs and the gate rule (after --candidate / --baseline)."""

    cases: list
    variants: list
    declared: object  # bench.declared.DeclaredSet
    declared_sources: dict  # declared variant -> engine / stand-in / file
    rule: object  # bench.base.GateRule


def plan_run(
    family,
    config,
    path: Path,
    *,
    case_filter=None,
    variant_filter=None,
    kernel_packs=(),
    engine_src=None,
    candidate=None,
    baseline=None,
) -> RunPlan:
    """Resolve the command line against the experiment: every name it gives must exist (InputError
    otherwise), before any GPU work."""
    name = family.name
    cases = [c for c in family.cases(config) if not case_filter or case_filter in c.key]
    if engine_src is not None and not Path(engine_src).is_dir():
        raise InputError(f"--engine-src: not a folder: {engine_src}")
    declared = declared_for(name, path, config, kernel_packs, str(Path(engine_src).resolve()) if engine_src else None)
    variants = family.variants(config)
    clash = {v.name for v in variants} & set(declared.variants)
    if clash:
        raise InputError(f"declared variant(s) {', '.join(sorted(clash))} clash with {name}'s own variants")
    variants += declared.infos()
    declared_sources = declared.source_kinds()  # an unset ${VAR} or a missing file is an input error now
    rule = family.gate_rule(config)
    rule = dataclasses.replace(rule, candidate=candidate or rule.candidate, baseline=baseline or rule.baseline)
    for role in ("candidate", "baseline"):
        if getattr(rule, role) not in {v.name for v in variants}:
            raise InputError(
                f"{path}: gate.{role}: no variant named {getattr(rule, role)!r} "
                f"(variants: {', '.join(v.name for v in variants)})"
            )
    if variant_filter:
        unknown = set(variant_filter) - {v.name for v in variants}
        if unknown:
            raise InputError(
                f"unknown variant(s) {', '.join(sorted(unknown))} for {name} "
                f"(available: {', '.join(v.name for v in variants)})"
            )
        variants = [v for v in variants if v.name in variant_filter]
    if not cases:
        raise InputError(f"no {name} case matches {case_filter!r}")
    return RunPlan(cases, variants, declared, declared_sources, rule)


def measure_variant(family, config, case, inputs, info, declared, tuner, timer, ceil) -> MicrobenchRow:
    """One variant on one case: prepared (or skipped as not applicable), checked, and when correct timed
    whole and stage by stage."""
    base = dict(family=family.name, case=case.key, params=case.params, variant=info.name, role=info.role)
    try:
        if info.name in declared.variants:
            prepared = declared.prepare(info.name, family.declared_binding(config, case, inputs))
        else:
            prepared = family.prepare(config, case, inputs, info.name, tuner)
    except NotApplicable as exc:
        return MicrobenchRow(**base, skipped=str(exc))
    check = _check(family, config, case, inputs, prepared, info.tolerance, timer)
    judge_output = getattr(family, "judge_output", None)
    if judge_output is not None:  # a family's own judgement of the checked output (t4: its bits)
        detail, failure = judge_output(config, case, inputs, info, prepared.output)
        prepared.detail.update(detail)
        if failure and check.failure is None:
            check.failure = failure
    floor_us, bound = ceil.ceilings.floor_us(prepared.traffic) if ceil else (None, None)
    row = MicrobenchRow(
        **base,
        check=check,
        traffic=asdict(prepared.traffic),
        detail=prepared.detail,
        reference=family.reference_columns(config, case, timer.device.name),
        floor=Floor(us=floor_us, bound=bound),
    )
    if not check.passed:
        return row
    label = f"{family.name}/{info.name}/{case.key}"
    with _nvtx_range(label):
        row.measurement = timer.measure(prepared.run, name=label)
    row.summary = Summary.of_samples(row.measurement.gpu_us)
    autotune.flag_drift(row, cache=tuner.cache)
    row.rates = rates(prepared.traffic, row.summary.median_us)
    if floor_us is not None:
        row.floor.pct_of_floor = 100.0 * floor_us / row.summary.median_us
    if prepared.stages:
        row.detail["stages_us"] = time_stages(timer, prepared.stages, label)
    return row


def time_stages(timer, stages, label: str) -> list[dict]:
    """Each named stage timed on its own, with the block's timer and in its own NVTX range: medians in
    launch order (the stages' sum can differ from the whole: overlap, launch gaps, cold caches per stage)."""
    out = []
    for name, fn in stages:
        with _nvtx_range(f"{label}/{name}"):
            measured = timer.measure(fn, name=f"{label}/{name}")
        out.append({"stage": name, "median_us": Summary.of_samples(measured.gpu_us).median_us})
    return out


def compare_case(case_rows: dict[str, MicrobenchRow], rule) -> None:
    """Set each timed variant's ``vs_baseline`` against the rule's baseline in the same case."""
    base = case_rows.get(rule.baseline)
    for name, row in case_rows.items():
        if name == rule.baseline or not row.timed:
            continue
        if base is None or not base.timed:
            row.vs_baseline = VsBaseline(
                baseline=rule.baseline, verdict=judge.Verdict.INCONCLUSIVE.value, note="baseline has no valid timing"
            )
            continue
        short = {
            who: len(r.measurement.gpu_us)
            for who, r in ((rule.baseline, base), (name, row))
            if len(r.measurement.gpu_us) < judge.MIN_SAMPLES_TO_JUDGE
        }
        if short:  # e.g. a stall ran the stopping rule into its timeout after 2 samples
            row.vs_baseline = VsBaseline(
                baseline=rule.baseline,
                verdict=judge.Verdict.INCONCLUSIVE.value,
                note="too few samples to judge: " + ", ".join(f"{k} n={n}" for k, n in short.items()),
            )
            continue
        cmp = judge.compare_medians(
            base.measurement.gpu_us, row.measurement.gpu_us, threshold=rule.threshold, confidence=rule.confidence
        )
        row.vs_baseline = VsBaseline(
            baseline=rule.baseline,
            time_ratio=cmp.ratio,
            time_ratio_ci=list(cmp.ci),
            speedup=cmp.speedup,
            speedup_ci=list(cmp.speedup_ci),
            verdict=cmp.verdict.value,
            confidence=cmp.confidence,
            method=cmp.method,
        )


def record_verdict(family, config, plan, doc: records.Document) -> judge.GateDecision:
    """Decide the gate over the document's rows and write the decision, the rule and its cells into the
    document's verdict."""
    decision, cells = decide_gate(family, config, plan.cases, doc.results, plan.rule)
    doc.verdict = {
        "decision": decision.value,
        "rule": asdict(plan.rule),
        "cells": cells,
        "exit_code": int(decision.exit_code),
    }
    return decision


def decide_gate(family, config, cases, rows: list[MicrobenchRow], rule) -> tuple[judge.GateDecision, list[dict]]:
    """Apply the YAML rule to the cells it selects."""
    by_key = {(r.case, r.variant): r for r in rows if r.ran}
    verdicts, cells, failed = [], [], False
    for case in cases:
        if not family.gate_applies(config, case):
            continue
        cand = by_key.get((case.key, rule.candidate))
        base = by_key.get((case.key, rule.baseline))
        if cand is None or base is None:
            continue
        if not cand.passed:
            failed = True
            cells.append({"case": case.key, "verdict": "FAIL", "why": f"{rule.candidate} failed correctness"})
            continue
        vs = cand.vs_baseline
        verdict = judge.Verdict(vs.verdict if vs else "inconclusive")
        verdicts.append(verdict)
        cells.append({"case": case.key, "verdict": verdict.value, "speedup": vs.speedup if vs else None})
    wanted = judge.Verdict(rule.require)
    return judge.require_all(verdicts, wanted, failed=failed), cells
