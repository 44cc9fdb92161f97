"""Token-correctness gate: an engine's greedy tokens against llama.cpp's, per catalog model.

Modes (shared/seed/prefill-gap-closure-plan.md, "5/5 token-correct; bit-identical for structural
changes; token-tolerance for fp16/reduction-order"):
- ``exact``: all n_gen generated ids identical to the reference;
- ``tolerant``: forgives one near-tie flip only. At the first divergence llama.cpp's own top1−top2
  logit margin must be below ``near_tie`` (an fp16/reduction-order flip) *and* the engine's token
  must be llama.cpp's recorded runner-up there; anything else fails. The tokens after the flip
  follow the runner-up's branch, which the reference does not hold, so they are still checked, by
  teacher forcing: fed llama.cpp's tokens, the engine's argmax must agree at every position except
  llama.cpp's own near-ties (and on at least min_match); an engine without a teacher-forced mode
  fails there, saying so. The forgiven position, runner-up and margin are reported beside the reason.

In both modes an engine that generates fewer or more than n_gen tokens fails, and so does a
teacher-forced total other than n_gen (an engine that scored something else than it was given).
Each model ends OK, FAIL, MISSING (GGUF absent) or ERROR (crash, timeout, unreadable output).
llama.cpp's reference, live or recorded, is decoded in a child process (engines.llama_cpp).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import time
from pathlib import Path
from typing import Literal

from zincbench import records, reference_store
from zincbench.catalog import CatalogModel
from zincbench.engines.base import Engine, NotSupported
from zincbench.engines.llama_cpp import LlamaSettings, decode_reference, llama_cpp_version
from zincbench.errors import ExitCode, InputError
from zincbench.measure.process import EngineFailure, signals_as_interrupts
from zincbench.progress import progress_bar
from zincbench.reference_store import Reference, TokenRow

Mode = Literal["exact", "tolerant"]
ReferenceSource = Literal["live", "recorded"]


class Status(str, enum.Enum):
    OK = "OK"
    FAIL = "FAIL"
    MISSING = "MISSING"
    ERROR = "ERROR"


@dataclasses.dataclass
class ValidateOptions:
    """How the gate judges (checked on construction: ValueError naming the option)."""

    mode: Mode = "tolerant"
    min_match: int | None = None  # overrides every model's catalog value
    near_tie: float = 0.2
    reference: ReferenceSource = "recorded"
    references_dir: Path | None = None  # default: <results>/references
    full_hash: bool = False
    allow_missing: bool = False
    timeout_s: float = 600.0
    env: dict[str, str] = dataclasses.field(default_factory=dict)  # over each model's engine_env
    llama: LlamaSettings = LlamaSettings()  # how live references run

    def __post_init__(self):
        if self.mode not in ("exact", "tolerant"):
            raise ValueError(f"mode must be exact or tolerant, got {self.mode!r}")
        if self.reference not in ("live", "recorded"):
            raise ValueError(f"reference must be live or recorded, got {self.reference!r}")
        if not self.timeout_s > 0:  # `not >` also refuses NaN
            raise ValueError(f"--timeout must be positive, got {self.timeout_s}")
        if not 0 <= self.near_tie < float("inf"):  # inf would forgive every divergence; NaN none
            raise ValueError(f"--near-tie must be a finite non-negative logit margin, got {self.near_tie}")
        if self.min_match is not None and self.min_match < 1:
            raise ValueError(f"--min-match must be at least 1, got {self.min_match}")


@dataclasses.dataclass
class ModelOutcome:
    """One model's row of a validate document (schema 1), as ``validate`` writes it and report, the gate's
    re-judging and the tables read it."""

    model: str
    gguf: str
    status: Status
    mode: str
    n_gen: int
    min_match: int
    match: int | None = None  # length of the leading common prefix
    tf_match: int | None = None  # teacher-forced agreement m/n, when it ran
    tf_total: int | None = None
    first_divergence: int | None = None  # generated position (0-based), None if all n_gen agree
    margin: float | None = None  # reference top1 - top2 logit at first_divergence
    near_tie: bool = False
    # tolerant mode: {position, margin, why}; None in rows recorded before it was kept (left out of their JSON)
    forgiven: list[dict] | None = dataclasses.field(default_factory=list)
    reason: str = ""
    prompt_ids: list[int] = dataclasses.field(default_factory=list)
    reference_ids: list[int] = dataclasses.field(default_factory=list)
    engine_ids: list[int] = dataclasses.field(default_factory=list)
    stderr_tail: str = ""
    wall_s: float = 0.0

    def to_json(self) -> dict:
        """The recorded shape: every field in declaration order, a ``forgiven`` of None left out."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["status"] = self.status.value
        if self.forgiven is None:
            del out["forgiven"]
        return out

    @classmethod
    def from_json(cls, obj: dict) -> ModelOutcome:
        """A recorded row; an unknown key or status is a ValueError, a missing one a TypeError, naming it."""
        unknown = set(obj) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"validate row has unknown key(s) {', '.join(sorted(unknown))}")
        return cls(**{**obj, "status": Status(obj.get("status")), "forgiven": obj.get("forgiven")})


@dataclasses.dataclass
class ValidateReport:
    outcomes: list[ModelOutcome]
    mode: str
    allow_missing: bool
    path: Path | None = None  # the results document, when one was written

    @property
    def n_ok(self) -> int:
        return sum(o.status is Status.OK for o in self.outcomes)

    @property
    def exit_code(self) -> ExitCode:
        statuses = [o.status for o in self.outcomes]
        if Status.FAIL in statuses or Status.ERROR in statuses:
            return ExitCode.FAIL
        if Status.MISSING in statuses and not self.allow_missing:
            return ExitCode.FAIL
        return ExitCode.OK if self.n_ok else ExitCode.INCONCLUSIVE  # all missing, allowed: nothing judged

    @property
    def summary(self) -> str:
        text = f"{self.n_ok}/{len(self.outcomes)} catalog models token-correct"
        missing = sum(o.status is Status.MISSING for o in self.outcomes)
        if missing:
            text += f" ({missing} missing{', allowed' if self.allow_missing else ''})"
        return text

    def verdict(self) -> dict:
        return {
            "summary": self.summary,
            "n_ok": self.n_ok,
            "n_models": len(self.outcomes),
            "exit_code": int(self.exit_code),
            "counts": {s.value: sum(o.status is s for o in self.outcomes) for s in Status},
        }


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def make_reference(
    gguf: Path,
    prompt: str,
    n_gen: int,
    settings: LlamaSettings = LlamaSettings(),
    full_hash: bool = False,
    timeout_s: float = 600.0,
) -> Reference:
    """llama.cpp's greedy continuation of ``prompt``, with top-2 logits at each generated position
    (decoded in a child process)."""
    identity = reference_store.gguf_identity(gguf, full=full_hash)
    prompt_ids, decoded = decode_reference(gguf, prompt, n_gen, settings, timeout_s)
    return Reference(
        gguf=str(gguf),
        identity=identity,
        prompt=prompt,
        n_gen=n_gen,
        prompt_ids=prompt_ids,
        generated_ids=decoded.ids,
        tokens=[TokenRow(*top_two) for top_two in decoded.top2],
        producer={"llama_cpp_python": llama_cpp_version(), **dataclasses.asdict(settings)},
    )


def record_references(
    models: list[CatalogModel],
    directory: str | Path,
    *,
    settings: LlamaSettings = LlamaSettings(),
    full_hash: bool = False,
    force: bool = False,
    timeout_s: float = 600.0,
    progress: bool = True,
) -> list[tuple[Path, Path | None]]:
    """Run llama.cpp on every model, then save every reference: (path, where a replaced old one was
    kept). Every GGUF must exist; a different existing reference stops it before anything is
    written, unless ``force``."""
    absent = [f"{m.name} ({m.gguf})" for m in models if not m.gguf.is_file()]
    if absent:
        raise InputError(f"cannot record references, GGUF not found: {'; '.join(absent)}")
    refs = []
    with signals_as_interrupts(), progress_bar(progress) as bar:
        task = bar.add_task("recording references", total=len(models))
        for model in models:
            bar.update(task, description=f"llama.cpp reference: {model.name}")
            refs.append(make_reference(model.gguf, model.prompt, model.n_gen, settings, full_hash, timeout_s))
            bar.advance(task)
    conflicts = [str(path) for ref in refs if (path := reference_store.conflict(ref, directory))]
    if conflicts and not force:
        raise InputError(
            f"a different reference is already recorded in {', '.join(conflicts)}; re-run with "
            f"--force to replace it (the old one is kept beside it as *.replaced-<time>.json)"
        )
    return [reference_store.save(ref, directory, force=force) for ref in refs]


def _record_args(model: CatalogModel) -> str:
    """The `validate record` options that select this model with this file."""
    args = f"--gguf {model.gguf}"
    return f"{args} --models {model.name}" if model.in_catalog else args


def _references(models: list[CatalogModel], options: ValidateOptions, directory: Path, bar) -> dict[str, Reference]:
    """References of every present model, fetched before any engine runs (bad input fails early)."""
    refs = {}
    task = bar.add_task("references", total=len(models))
    for model in models:
        bar.update(task, description=f"{options.reference} reference: {model.name}")
        if model.gguf.is_file():
            if options.reference == "live":
                refs[model.name] = make_reference(
                    model.gguf, model.prompt, model.n_gen, options.llama, options.full_hash, options.timeout_s
                )
            else:
                refs[model.name] = reference_store.load(
                    directory,
                    model.gguf,
                    model.prompt,
                    model.n_gen,
                    full=options.full_hash,
                    record_args=_record_args(model),
                )
        bar.advance(task)
    bar.remove_task(task)
    return refs


def _min_match(model: CatalogModel, options: ValidateOptions) -> int:
    return options.min_match if options.min_match is not None else model.min_match


def _check_one(model: CatalogModel, ref: Reference, engine: Engine, options: ValidateOptions) -> ModelOutcome:
    min_match = _min_match(model, options)
    outcome = ModelOutcome(
        model=model.name,
        gguf=str(model.gguf),
        status=Status.FAIL,
        mode=options.mode,
        n_gen=ref.n_gen,
        min_match=min_match,
        prompt_ids=ref.prompt_ids,
        reference_ids=ref.generated_ids,
    )
    env = {**model.engine_env, **options.env}
    start = time.perf_counter()
    try:
        generated = engine.generate(model.gguf, ref.prompt_ids, ref.n_gen, env=env, timeout_s=options.timeout_s)
        outcome.engine_ids = list(generated.generated_ids)
        outcome.match = common_prefix(ref.generated_ids, outcome.engine_ids)
        if outcome.match < ref.n_gen and outcome.match < len(outcome.engine_ids):
            outcome.first_divergence = outcome.match
            outcome.margin = ref.margin(outcome.match)
            outcome.near_tie = outcome.margin < options.near_tie
        passed, outcome.reason = _judge(outcome, ref, engine, model, options, env)
        outcome.status = Status.OK if passed else Status.FAIL
    except EngineFailure as exc:
        outcome.status, outcome.reason, outcome.stderr_tail = Status.ERROR, f"{exc.reason}: {exc}", exc.stderr_tail
    except NotSupported as exc:
        outcome.reason = f"prefix < {min_match}; {exc}"
    outcome.wall_s = time.perf_counter() - start
    return outcome


def _judge(
    outcome: ModelOutcome, ref: Reference, engine: Engine, model: CatalogModel, options: ValidateOptions, env: dict
) -> tuple[bool, str]:
    """(passed, why) for one model's generated ids; may run the teacher-forced check (tolerant mode)."""
    produced = len(outcome.engine_ids)
    if produced != ref.n_gen:
        return (
            False,
            f"generated {produced} tokens, expected n_gen {ref.n_gen} "
            f"({'short' if produced < ref.n_gen else 'over-long'} output)",
        )
    if options.mode == "exact":
        return (True, "all identical") if outcome.match == ref.n_gen else (False, "not all identical")
    if outcome.first_divergence is None:  # all n_gen identical
        return True, f"prefix >= {outcome.min_match}"
    position, margin = outcome.first_divergence, outcome.margin
    if not outcome.near_tie:
        return False, (
            f"diverges at {position} where llama.cpp's margin {margin:.3f} is not a near-tie (>= {options.near_tie:g})"
        )
    token, runner_up = outcome.engine_ids[position], ref.tokens[position].top2_token
    if token != runner_up:
        return False, (
            f"diverges at {position} with token {token}, not llama.cpp's runner-up {runner_up} there "
            f"(margin {margin:.3f} < {options.near_tie:g}): only the runner-up of a near-tie is forgiven"
        )
    outcome.forgiven.append(
        {
            "position": position,
            "margin": margin,
            "why": f"near-tie: runner-up {runner_up}, margin {margin:.3f} < {options.near_tie:g}",
        }
    )
    after = ref.n_gen - position - 1
    if after == 0:
        return True, f"prefix {position}/{ref.n_gen}, the last token a forgiven near-tie"
    # The tokens after the flip continue the runner-up's branch, which the reference does not hold, so
    # they are checked by teacher forcing: fed llama.cpp's tokens, the engine must agree at every position
    # but llama.cpp's own near-ties (and on at least min_match).
    ties = sum(ref.margin(i) < options.near_tie for i in range(ref.n_gen))
    need = max(outcome.min_match, ref.n_gen - ties)
    try:
        tf = engine.teacher_forced(model.gguf, ref.prompt_ids, ref.generated_ids, env=env, timeout_s=options.timeout_s)
    except NotSupported:
        return False, (
            f"the {after} token(s) after the forgiven near-tie at {position} cannot be checked: the "
            f"{engine.kind} engine has no teacher-forced mode"
        )
    outcome.tf_match, outcome.tf_total = tf.match, tf.total
    if tf.total != ref.n_gen:
        return False, f"teacher-forced total {tf.total} is not n_gen {ref.n_gen} (impossible {tf.match}/{tf.total})"
    passed = tf.match >= need
    return passed, (
        f"teacher-forced {tf.match}/{tf.total} {'>=' if passed else '<'} {need} "
        f"(every position but llama.cpp's {ties} near-tie(s))"
    )


def validate_models(
    models: list[CatalogModel],
    engine: Engine,
    options: ValidateOptions = ValidateOptions(),
    *,
    config: dict | None = None,
    results_dir: str | Path | None = None,
    write: bool = True,
    progress: bool = True,
) -> ValidateReport:
    """Validate each model; with ``write`` the results document (kind "validate") is re-written
    after every model, so an interrupted run keeps what it checked."""
    if not models:
        raise InputError("no models to validate")
    for model in models:
        if _min_match(model, options) > model.n_gen:
            raise InputError(f"{model.name}: min_match {_min_match(model, options)} exceeds n_gen {model.n_gen}")
    directory = (
        Path(options.references_dir) if options.references_dir else reference_store.default_directory(results_dir)
    )
    report = ValidateReport(outcomes=[], mode=options.mode, allow_missing=options.allow_missing)
    with signals_as_interrupts(), progress_bar(progress) as bar:
        refs = _references(models, options, directory, bar)
        check_prompt = getattr(engine, "check_prompt", None)  # engines that cap the prompt length
        for ref in refs.values():
            if check_prompt is not None:
                check_prompt(ref.prompt_ids)
        doc = records.Document(
            kind="validate",
            config={
                **(config or {}),
                **records.to_jsonable(dataclasses.asdict(options)),
                "references_dir": str(directory),
                "engine": engine.describe(),
                "models": [m.name for m in models],
            },
            environment=_environment(),
        )
        writer = records.IncrementalWriter(doc, directory=results_dir) if write else contextlib.nullcontext()
        with writer:
            task = bar.add_task("validate", total=len(models))
            for model in models:
                bar.update(task, description=f"{engine.kind}: {model.name}")
                ref = refs.get(model.name)
                if ref is None:
                    outcome = ModelOutcome(
                        model=model.name,
                        gguf=str(model.gguf),
                        status=Status.MISSING,
                        mode=options.mode,
                        n_gen=model.n_gen,
                        min_match=_min_match(model, options),
                        reason="GGUF not found",
                    )
                else:
                    outcome = _check_one(model, ref, engine, options)
                report.outcomes.append(outcome)
                doc.results.append(records.to_jsonable(outcome))
                doc.verdict = report.verdict()
                if write:
                    writer.flush()
                bar.advance(task)
        if write:
            report.path = writer.path
    return report


def _environment() -> dict:
    from zincbench.gpu.device import environment_report

    return {**environment_report(include_tools=False), "llama_cpp_python": llama_cpp_version()}


def rejudge(doc: dict, where: str) -> records.Rejudged:
    """A recorded validate document judged again from its per-model outcomes."""
    outcomes = [ModelOutcome.from_json(row) for row in doc["results"]]
    report = ValidateReport(
        outcomes, mode=doc["config"]["mode"], allow_missing=bool(doc["config"].get("allow_missing"))
    )
    details = records.drift_details("exit code", (doc.get("verdict") or {}).get("exit_code"), int(report.exit_code))
    details["statuses"] = {o.model: o.status.value for o in outcomes}
    return records.Rejudged(report.exit_code, report.summary, details)
