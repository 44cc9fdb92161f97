"""``zincbench gate``: run a declared list of checks and reduce them to one exit code.

A gates file (experiments/gates.yaml) lists ``checks``; each has a ``name``, a ``kind`` and that
kind's keys (the dataclasses below are the schema):

- ``microbench``: a microbench family's GO rule from its experiment YAML (needs CuPy and a GPU);
- ``validate``: the catalog token-correctness gate with one engine;
- ``ab``: an interleaved A/B of two engine builds at a threshold;
- ``recorded``: re-judge recorded results documents from their raw data with the current judge
  (microbench samples against the experiment's rule, validate outcomes, A/B rounds, references);
- ``parse``: recorded real tool outputs (llama-bench, nsys, ncu) must still parse.

The whole file is checked before anything runs: a bad key, an unknown catalog model or a broken
experiment YAML is bad input (exit 2) and no results are written. What a machine may lack is
decided per check when it runs: no GPU, an unset ``${VAR}`` or an absent model, binary or recorded
file makes the check SKIPPED with the reason, and ``strict`` turns every skip into a failure.

Relative paths are resolved against the folder of the gates file; ``${VAR}`` expands from the
environment. The gate's exit code is ``errors.worst`` of its checks' codes, except that a gate whose
every check was skipped checked nothing: it exits ``NOTHING_CHECKED`` (6), never 0 and never the
regression code 1 (``--strict`` makes those skips failures instead).
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import glob
import os
import string
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Literal

from zincbench import records
from zincbench.bench import family_names
from zincbench.config import EXPERIMENTS_DIR, FLAT, build, experiment_path, load_yaml
from zincbench.engines import GENERATE, THROUGHPUT, engine_kinds
from zincbench.engines.llama_cpp import LlamaSettings
from zincbench.errors import ConfigError, ExitCode, InputError, ZincbenchError, worst
from zincbench.runs.ab import ABSettings
from zincbench.runs.validate import ValidateOptions

DEFAULT_GATES = EXPERIMENTS_DIR / "gates.yaml"

# The registries' names as the schema's choices (a family or adapter added in one file is a valid key here).
FamilyName = Literal[tuple(family_names())]
ValidateEngineKind = Literal[tuple(engine_kinds(GENERATE))]
ABEngineKind = Literal[tuple(engine_kinds(THROUGHPUT))]


class Status(str, enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"
    SKIPPED = "SKIPPED"
    ERROR = "ERROR"


STATUS_OF_CODE = {ExitCode.OK: Status.PASS, ExitCode.FAIL: Status.FAIL, ExitCode.INCONCLUSIVE: Status.INCONCLUSIVE}
CODE_OF_STATUS = {
    Status.PASS: ExitCode.OK,
    Status.SKIPPED: ExitCode.OK,
    Status.FAIL: ExitCode.FAIL,
    Status.INCONCLUSIVE: ExitCode.INCONCLUSIVE,
}


class Skip(Exception):
    """This machine lacks what the check needs (GPU, model, binary, recorded file)."""


@dataclass
class Judged:
    """What a check concluded: status, a one-line reason, and where its own results went."""

    status: Status
    reason: str
    results_file: str | None = None
    details: dict = field(default_factory=dict)


@dataclass
class Context:
    base: Path  # the gates file's folder: relative paths start here
    results_dir: str | os.PathLike | None


# --- helpers -------------------------------------------------------------------------------------------


def check_template(text: str | None) -> None:
    """A ``${VAR}`` template must be well formed (checked at load time, expanded at run time)."""
    if text is not None:
        try:
            string.Template(text).substitute(collections.defaultdict(str))
        except ValueError as exc:
            raise ValueError(f"bad ${{VAR}} placeholder in {text!r} ({exc})") from None


def resolve(text: str, base: Path) -> Path:
    """A path from the gates file: ``${VAR}`` expanded (unset -> Skip), relative to ``base``."""
    try:
        expanded = string.Template(text).substitute(os.environ)
    except KeyError as exc:
        raise Skip(f"needs ${exc.args[0]}, which is not set") from None
    path = Path(expanded).expanduser()
    return Path(os.path.normpath(path if path.is_absolute() else base / path))


def shown(path: Path) -> str:
    """A path as short as it can be said: relative to the current folder when it is under it."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def existing(text: str, base: Path, what: str) -> Path:
    path = resolve(text, base)
    if not path.exists():
        raise Skip(f"{what} not found: {shown(path)}")
    return path


def matching_files(pattern: str, base: Path) -> list[Path]:
    """Files matching a path or glob pattern; none -> Skip."""
    resolved = resolve(pattern, base)
    paths = sorted(Path(p) for p in glob.glob(str(resolved), recursive=True) if Path(p).is_file())
    if not paths:
        raise Skip(f"no file matches {shown(resolved)}")
    return paths


def require_cupy_device() -> None:
    from zincbench.errors import EnvironmentProblem
    from zincbench.gpu import require_cupy

    try:
        require_cupy("this check")
    except EnvironmentProblem as exc:
        raise Skip(f"needs a GPU: {exc}") from None


def require_nvidia_driver() -> None:
    """Engine runs need a driver and a device, not CuPy: ask NVML."""
    from zincbench.gpu.nvml import Nvml

    nvml = Nvml()
    if not nvml.available:
        raise Skip(f"needs a GPU: NVML finds none ({nvml.error})")


def bundled_or_path(name: str, base: Path) -> Path:
    """A bundled experiments/ name (``catalog``, ``t2_moe_expert``) or a path relative to the gates file."""
    if os.sep not in name and not Path(name).suffix:
        return experiment_path(name)
    return Path(os.path.normpath(base / name))


def _experiment(name: str | None, family: str, base: Path) -> Path:
    from zincbench.bench import default_experiment

    return bundled_or_path(name or default_experiment(family), base)


def _load_experiment(family_name: str, experiment: str | None, base: Path):
    from zincbench.bench import load_family

    family = load_family(family_name)
    path = _experiment(experiment, family_name, base)
    return family, family.load(path), path


def _catalog_models(catalog: str | None, names: list[str], base: Path):
    from zincbench.catalog import load_catalog

    cat = load_catalog(bundled_or_path(catalog, base) if catalog else None)
    return cat, cat.select(names or None)


def present_models(models) -> list:
    """The models whose GGUF is here; otherwise Skip naming the absent ones."""
    absent, unset = [], None
    for model in models:
        try:
            path = model.gguf
        except InputError as exc:  # e.g. ${ZINC_MODELS} not set: the models are not on this machine
            absent.append(model.name)
            unset = unset or str(exc)
            continue
        if not path.is_file():
            absent.append(f"{model.name} ({shown(path)})")
    if absent:
        raise Skip(f"model GGUF absent: {', '.join(absent)}" + (f" ({unset})" if unset else ""))
    return list(models)


# --- re-judging recorded documents -------------------------------------------------------------------


def rejudge_document(doc: dict, where: str, *, experiment: str | None = None, base: Path = Path(".")) -> Judged:
    """Judge a recorded results document again from its raw data with today's code.

    ``details`` carries ``recorded`` and ``rejudged`` conclusions, ``drift`` (a sentence) when they
    differ under an unchanged rule, and ``incomplete`` for an interrupted run (INCONCLUSIVE).
    """
    from zincbench import reference_store
    from zincbench.runs import ab, validate

    # Each kind is re-judged by the module that produces it; microbench needs today's experiment rule.
    rejudges: dict[str, Callable[[dict, str], records.Rejudged]] = {
        "microbench": lambda doc, where: _rejudge_microbench(doc, where, experiment, base),
        "validate": validate.rejudge,
        "ab": ab.rejudge,
        "reference": reference_store.rejudge,
    }
    kind = doc.get("kind")
    if kind not in rejudges:
        raise InputError(f"{where}: cannot re-judge a {kind!r} document (only {', '.join(rejudges)})")
    if not doc.get("complete", True):
        notes = "; ".join(doc.get("notes") or []) or "no reason recorded"
        return Judged(Status.INCONCLUSIVE, f"incomplete {kind} run ({notes})", details={"incomplete": True})
    try:
        rejudged = rejudges[kind](doc, where)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a document edited or from another schema
        raise InputError(f"{where}: not a valid {kind} document ({type(exc).__name__}: {exc})") from None
    return Judged(STATUS_OF_CODE[rejudged.exit_code], rejudged.reason, details=rejudged.details)


def _rejudge_microbench(doc: dict, where: str, experiment: str | None, base: Path) -> records.Rejudged:
    from zincbench.bench.rejudge import rejudge_microbench

    family, cfg, path = _load_experiment(doc["config"]["family"], experiment, base)
    judged = rejudge_microbench(doc, family, cfg, where)
    recorded = doc.get("verdict") or {}
    rule = records.to_jsonable(judged.rule)
    details = records.drift_details(
        "decision", recorded.get("decision") if judged.same_rule else None, judged.decision.value
    )
    details.update(cells=judged.cells, rule=rule, experiment=str(path))
    reason = _microbench_reason(judged.decision.value, {"rule": rule, "cells": judged.cells})
    if judged.unmeasured and judged.same_rule:
        reason += f" (by its recorded rule: this run did not measure {', '.join(judged.unmeasured)})"
    if not judged.same_rule and recorded.get("decision"):
        reason += f" (recorded {recorded['decision']} under another rule)"
    return records.Rejudged(judged.decision.exit_code, reason, details)


# --- check kinds ---------------------------------------------------------------------------------------


@dataclass
class MicrobenchCheck:
    """A microbench family's gate: GO -> PASS, NO-GO -> FAIL, INCONCLUSIVE -> INCONCLUSIVE."""

    kind: ClassVar[str] = "microbench"
    name: str
    family: FamilyName = "t2"
    experiment: str | None = None  # bundled name or path (default: the family's experiment)
    case: str | None = None  # only cases whose key contains this
    variants: list[str] = field(default_factory=list)
    quick: bool = False
    seed: int | None = None
    ceilings: bool = True

    def check_inputs(self, base: Path) -> None:
        _load_experiment(self.family, self.experiment, base)

    def run(self, ctx: Context) -> Judged:
        from zincbench.bench.runner import run_microbench

        require_cupy_device()
        doc, decision, path = run_microbench(
            self.family,
            str(_experiment(self.experiment, self.family, ctx.base)),
            results_dir=ctx.results_dir,
            case_filter=self.case,
            variant_filter=self.variants or None,
            quick=self.quick,
            progress=False,
            seed=self.seed,
            ceilings=self.ceilings,
        )
        verdict = doc.verdict or {}
        return Judged(
            STATUS_OF_CODE[decision.exit_code],
            _microbench_reason(decision.value, verdict),
            str(path),
            {"decision": decision.value, "cells": verdict.get("cells", [])},
        )


def _microbench_reason(decision: str, verdict: dict) -> str:
    rule = verdict.get("rule") or {}
    cells = verdict.get("cells") or []
    off = [f"{c['case']}: {c['verdict']}" for c in cells if c["verdict"] != rule.get("require")]
    text = (
        f"{decision}: {rule.get('candidate')} {rule.get('require')} than {rule.get('baseline')} "
        f"in {len(cells) - len(off)}/{len(cells)} gated cells"
    )
    return text + (f" ({'; '.join(off[:4])}{'; ...' if len(off) > 4 else ''})" if off else "")


@dataclass
class ValidateCheck:
    """The catalog token-correctness gate (zincbench.runs.validate) with one engine."""

    kind: ClassVar[str] = "validate"
    name: str
    engine_kind: ValidateEngineKind = "zinc-dbg"
    engine_bin: str | None = None
    engine_config: str | None = None
    catalog: str | None = None
    models: list[str] = field(default_factory=list)
    references_dir: str | None = None  # a ${VAR} template, resolved when the check runs
    # The run's own settings, under their own keys: mode, min_match, near_tie, reference, full_hash,
    # allow_missing, timeout_s, env (ValidateOptions); n_gpu_layers, n_batch, n_ctx, n_threads
    # (LlamaSettings: llama.cpp for live references and the llama-cpp engine; 0 GPU layers = CPU, bit-stable).
    options: ValidateOptions = field(default_factory=ValidateOptions, metadata=FLAT)
    llama: LlamaSettings = field(default_factory=LlamaSettings, metadata=FLAT)
    needs_gpu: bool = True  # false for CPU engines (llama-cpp with 0 GPU layers)

    def __post_init__(self):
        for text in (self.engine_bin, self.engine_config, self.references_dir):
            check_template(text)

    def _options(self, references_dir: Path | None) -> ValidateOptions:
        return dataclasses.replace(self.options, references_dir=references_dir, llama=self.llama)

    def check_inputs(self, base: Path) -> None:
        _catalog_models(self.catalog, self.models, base)

    def run(self, ctx: Context) -> Judged:
        from zincbench.engines import make_engine
        from zincbench.runs.validate import validate_models

        if self.needs_gpu:
            require_nvidia_driver()
        catalog, chosen = _catalog_models(self.catalog, self.models, ctx.base)
        chosen = present_models(chosen)
        engine = make_engine(
            self.engine_kind,
            str(existing(self.engine_bin, ctx.base, "engine binary")) if self.engine_bin else None,
            str(existing(self.engine_config, ctx.base, "engine config")) if self.engine_config else None,
            llama=self.llama,
        )
        refs = resolve(self.references_dir, ctx.base) if self.references_dir else None
        report = validate_models(
            chosen,
            engine,
            self._options(refs),
            config={"catalog": str(catalog.path)},
            results_dir=ctx.results_dir,
            progress=False,
        )
        return Judged(
            STATUS_OF_CODE[report.exit_code],
            report.summary,
            str(report.path) if report.path else None,
            {"statuses": {o.model: o.status.value for o in report.outcomes}},
        )


@dataclass
class ABCheck:
    """An interleaved A/B (zincbench.runs.ab): B not slower than A -> PASS."""

    kind: ClassVar[str] = "ab"
    name: str
    a: str
    b: str | None = None
    engine_kind: ABEngineKind = "zinc-main"
    engine_config: str | None = None
    catalog: str | None = None
    models: list[str] = field(default_factory=list)  # catalog names or aliases
    model: dict[str, str] = field(default_factory=dict)  # NAME: PATH, no catalog row needed
    env_a: dict[str, str] = field(default_factory=dict)
    env_b: dict[str, str] = field(default_factory=dict)
    # The A/B's own settings under their own keys (runs.ab.ABSettings: rounds, order, threshold,
    # prompt_tokens, n_gen, timeout_s, require_clean_gpu, min_rounds, ...); a gate runs 6 fixed rounds
    # unless it says otherwise.
    settings: ABSettings = field(default_factory=lambda: ABSettings(rounds=6), metadata=FLAT)
    llama_bench: str | None = None  # a recorded llama-bench output to show beside the builds
    needs_gpu: bool = True

    def __post_init__(self):
        for text in (self.a, self.b, self.engine_config, self.llama_bench, *self.model.values()):
            check_template(text)
        if not self.models and not self.model:
            raise ValueError("give models (catalog names) or model (NAME: PATH)")

    def _models(self, base: Path) -> list:
        catalog, chosen = _catalog_models(self.catalog, self.models, base) if self.models else (None, [])
        if self.model:
            from zincbench.catalog import add_model_files, load_catalog

            catalog = catalog or load_catalog(bundled_or_path(self.catalog, base) if self.catalog else None)
            chosen = add_model_files(catalog, chosen, {name: resolve(path, base) for name, path in self.model.items()})
        return chosen

    def check_inputs(self, base: Path) -> None:
        if self.models:
            _catalog_models(self.catalog, self.models, base)

    def run(self, ctx: Context) -> Judged:
        from rich.console import Console

        from zincbench.engines import make_engine
        from zincbench.measure import llama_bench
        from zincbench.runs.ab import Arm, run_ab

        if self.needs_gpu:
            require_nvidia_driver()
        models = present_models(self._models(ctx.base))
        config = str(existing(self.engine_config, ctx.base, "engine config")) if self.engine_config else None
        arms = [
            Arm(
                "A",
                make_engine(
                    self.engine_kind,
                    str(existing(self.a, ctx.base, "binary A")),
                    config,
                    prompt_tokens=self.settings.prompt_tokens,
                ),
                dict(self.env_a),
            )
        ]
        if self.b:
            arms.append(
                Arm(
                    "B",
                    make_engine(
                        self.engine_kind,
                        str(existing(self.b, ctx.base, "binary B")),
                        config,
                        prompt_tokens=self.settings.prompt_tokens,
                    ),
                    dict(self.env_b),
                )
            )
        rows = llama_bench.load(existing(self.llama_bench, ctx.base, "llama-bench file")) if self.llama_bench else None
        outcome = run_ab(
            models,
            arms,
            self.settings,
            llama_rows=rows,
            results_dir=ctx.results_dir,
            console=Console(stderr=True),
            progress=False,
        )
        per_model = ", ".join(f"{m.model}: {m.verdict}" for m in outcome.models)
        return Judged(
            STATUS_OF_CODE[outcome.exit_code],
            f"{outcome.overall} ({per_model})",
            str(outcome.path),
            {"verdicts": {m.model: m.verdict for m in outcome.models}},
        )


@dataclass
class RecordedCheck:
    """Re-judge recorded results documents (a path or glob) with today's judge.

    Each document must re-judge to ``expect`` (PASS, FAIL or INCONCLUSIVE), and to what it
    recorded when the rule is unchanged: a different conclusion from the same samples means the
    judge changed behaviour. An incomplete document is INCONCLUSIVE.
    """

    kind: ClassVar[str] = "recorded"
    name: str
    path: str
    expect: Literal["PASS", "FAIL", "INCONCLUSIVE"] = "PASS"
    family: FamilyName | None = None  # only microbench documents of this family among the matches
    experiment: str | None = None  # microbench documents: the rule's experiment (default: the family's)

    def __post_init__(self):
        check_template(self.path)

    def check_inputs(self, base: Path) -> None:
        pass  # the documents are looked for when the check runs: absent ones are a skip

    def _documents(self, base: Path) -> list[tuple[Path, dict]]:
        documents = [(path, records.read(path)) for path in matching_files(self.path, base)]
        if self.family:
            documents = [
                (p, d)
                for p, d in documents
                if d["kind"] == "microbench" and (d.get("config") or {}).get("family") == self.family
            ]
            if not documents:
                raise Skip(f"no {self.family} microbench document matches {shown(resolve(self.path, base))}")
        return documents

    def _against_expectation(self, one: Judged) -> Judged:
        if one.details.get("drift"):
            return Judged(Status.FAIL, one.details["drift"], details=one.details)
        if self.expect == "PASS" or one.details.get("incomplete"):
            return one
        if one.status.value == self.expect:
            return Judged(Status.PASS, f"re-judged {self.expect} as expected: {one.reason}", details=one.details)
        return Judged(
            Status.FAIL, f"expected {self.expect}, re-judged {one.status.value}: {one.reason}", details=one.details
        )

    def run(self, ctx: Context) -> Judged:
        judged = []
        for path, doc in self._documents(ctx.base):
            one = rejudge_document(doc, str(path), experiment=self.experiment, base=ctx.base)
            judged.append((path, self._against_expectation(one)))
        code = worst(CODE_OF_STATUS[j.status] for _, j in judged)
        status = STATUS_OF_CODE[code]
        shown = [(p, j) for p, j in judged if j.status is status] or judged
        reason = "; ".join(f"{p.name}: {j.reason}" for p, j in shown[:3]) + ("; ..." if len(shown) > 3 else "")
        return Judged(
            status,
            f"{len(judged)} document(s): {reason}",
            details={
                "documents": {str(p): {"status": j.status.value, "reason": j.reason, **j.details} for p, j in judged}
            },
        )


@dataclass
class ParseCheck:
    """Recorded real outputs of a tool (a path or glob) must parse into at least ``min_rows`` rows."""

    kind: ClassVar[str] = "parse"
    name: str
    parser: Literal["llama-bench", "profile"]
    path: str
    min_rows: int = 1

    def __post_init__(self):
        check_template(self.path)
        if self.min_rows < 0:
            raise ValueError(f"min_rows must be >= 0, got {self.min_rows}")

    def check_inputs(self, base: Path) -> None:
        pass

    def _rows(self, path: Path) -> int:
        if self.parser == "llama-bench":
            from zincbench.measure import llama_bench

            return len(llama_bench.load(path))
        from zincbench.profile.parse import parse_file

        return len(parse_file(path).kernels)

    def run(self, ctx: Context) -> Judged:
        files = matching_files(self.path, ctx.base)
        counts, problems = {}, []
        for path in files:
            try:
                counts[str(path)] = self._rows(path)
            except InputError as exc:  # a recorded real output that no longer parses: a regression
                problems.append(str(exc))
                continue
            if counts[str(path)] < self.min_rows:
                problems.append(f"{path.name}: {counts[str(path)]} rows, expected at least {self.min_rows}")
        if problems:
            return Judged(
                Status.FAIL,
                f"{len(problems)} of {len(files)} file(s) failed: " + "; ".join(problems[:3]),
                details={"rows": counts, "problems": problems},
            )
        return Judged(
            Status.PASS, f"{len(files)} file(s) parsed ({sum(counts.values())} rows)", details={"rows": counts}
        )


CHECK_KINDS: dict[str, type] = {
    cls.kind: cls for cls in (MicrobenchCheck, ValidateCheck, ABCheck, RecordedCheck, ParseCheck)
}


# --- loading and running -------------------------------------------------------------------------------


@dataclass
class _GatesFile:
    checks: list[dict[str, Any]]
    description: str = ""


@dataclass
class Gates:
    path: Path
    description: str
    checks: list  # check dataclasses, in file order

    @property
    def base(self) -> Path:
        return self.path.resolve().parent


def bundled_gates() -> list[str]:
    """The names of the gates files shipped in the package (``gates``, ``gates_ci``): experiments/gates*.yaml."""
    return sorted(p.stem for p in EXPERIMENTS_DIR.glob("gates*.yaml"))


def bundled_gates_path(name: str) -> Path:
    """``zincbench gate --bundled NAME``: a gates file shipped in the package, by name (``.yaml`` optional)."""
    stem = name.removesuffix(".yaml")
    if stem not in bundled_gates():
        raise InputError(f"--bundled: no bundled gates file {name!r} (bundled: {', '.join(bundled_gates())})")
    return EXPERIMENTS_DIR / f"{stem}.yaml"


def load_gates(path: str | os.PathLike | None = None) -> Gates:
    """Schema-check the gates file and every check's static inputs; any problem is a ConfigError/InputError."""
    p = Path(path) if path is not None else DEFAULT_GATES
    spec = build(_GatesFile, load_yaml(p), str(p))
    if not spec.checks:
        raise ConfigError(f"{p}: checks: the gates file declares no checks")
    checks, names = [], set()
    for i, entry in enumerate(spec.checks):
        where = f"{p}: checks[{i}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(entry).__name__}")
        kind = entry.get("kind")
        if not isinstance(kind, str) or kind not in CHECK_KINDS:
            raise ConfigError(f"{where}.kind: must be one of {', '.join(CHECK_KINDS)}, got {kind!r}")
        check = build(CHECK_KINDS[kind], {k: v for k, v in entry.items() if k != "kind"}, where)
        if check.name in names:
            raise ConfigError(f"{where}.name: {check.name!r} is used by another check")
        names.add(check.name)
        try:
            check.check_inputs(p.resolve().parent)
        except ZincbenchError as exc:
            raise type(exc)(f"{where} ({check.name}): {exc}") from None
        checks.append(check)
    return Gates(path=p, description=spec.description, checks=checks)


@dataclass
class CheckOutcome:
    name: str
    kind: str
    status: Status
    exit_code: int
    reason: str
    results_file: str | None = None
    wall_s: float = 0.0
    skipped: bool = False  # a skip (also when strict turned it into a failure)
    details: dict = field(default_factory=dict)


@dataclass
class GateResult:
    outcomes: list[CheckOutcome]
    strict: bool
    document: records.Document
    path: Path

    @property
    def exit_code(self) -> ExitCode:
        return gate_code(self.outcomes)


def gate_code(outcomes: list[CheckOutcome]) -> ExitCode:
    """The worst of the checks' codes; a gate where every check was skipped checked nothing (exit 6)."""
    if outcomes and all(o.status is Status.SKIPPED for o in outcomes):
        return ExitCode.NOTHING_CHECKED
    return worst(o.exit_code for o in outcomes)


def run_check(check, ctx: Context, strict: bool = False) -> CheckOutcome:
    """One check -> an outcome; expected failures become ERROR rows carrying their exit code."""
    start = time.perf_counter()
    skipped = False
    try:
        judged = check.run(ctx)
        code = CODE_OF_STATUS[judged.status]
    except Skip as exc:
        skipped = True
        judged, code = Judged(Status.SKIPPED, str(exc)), ExitCode.OK
        if strict:
            judged, code = Judged(Status.FAIL, f"skipped, and --strict forbids skips: {exc}"), ExitCode.FAIL
    except ZincbenchError as exc:
        judged, code = Judged(Status.ERROR, str(exc)), exc.exit_code
    return CheckOutcome(
        check.name,
        check.kind,
        judged.status,
        int(code),
        judged.reason,
        judged.results_file,
        time.perf_counter() - start,
        skipped,
        judged.details,
    )


def overall_status(code: ExitCode) -> str:
    return {
        ExitCode.OK: "PASS",
        ExitCode.FAIL: "FAIL",
        ExitCode.INCONCLUSIVE: "INCONCLUSIVE",
        ExitCode.NOTHING_CHECKED: "NOTHING CHECKED",
    }.get(code, "ERROR")


def verdict(outcomes: list[CheckOutcome], strict: bool) -> dict:
    code = gate_code(outcomes)
    return {
        "status": overall_status(code),
        "exit_code": int(code),
        "strict": strict,
        "counts": {s.value: sum(o.status is s for o in outcomes) for s in Status},
    }


def run_gates(
    gates: Gates, *, strict: bool = False, results_dir=None, on_check: Callable[[int, int, Any], None] | None = None
) -> GateResult:
    """Run every check in order; the gate document (kind "gate") is rewritten after each one."""
    from zincbench.gpu.device import environment_report

    doc = records.Document(
        kind="gate",
        config={
            "gates_file": str(gates.path),
            "description": gates.description,
            "strict": strict,
            "checks": [{"kind": c.kind, **records.to_jsonable(c)} for c in gates.checks],
        },
        environment=environment_report(include_tools=False),
    )
    ctx = Context(base=gates.base, results_dir=results_dir)
    outcomes: list[CheckOutcome] = []
    with records.IncrementalWriter(doc, directory=results_dir) as writer:
        for i, check in enumerate(gates.checks):
            if on_check:
                on_check(i, len(gates.checks), check)
            outcomes.append(run_check(check, ctx, strict))
            doc.results.append(records.to_jsonable(outcomes[-1]))
            doc.verdict = verdict(outcomes, strict)
            writer.flush()
    return GateResult(outcomes, strict, doc, writer.path)
