"""``zincbench report``: results documents of several runs (and GPUs) merged into one view.

- microbench: one row per family x case x variant, median and p90 per run side by side;
- validate: one row per model, each run's status and leading match;
- ab: each run's scoreboard (zincbench.show.scoreboard).

Runs are labelled by their device; when one device has several runs of a kind, the run id is added,
and an interrupted run is labelled "(incomplete)". Numbers from different GPUs differ by hardware,
not by code, so documents of one kind from different devices are refused unless ``ignore_device``.
The merged view is shown by zincbench.show.report_tables (rich tables, markdown) and show.plots.
"""

from __future__ import annotations

import collections
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from zincbench import records
from zincbench.bench.rows import MicrobenchRow, check_schema
from zincbench.errors import InputError
from zincbench.runs.ab_rows import ScoreboardRow
from zincbench.runs.validate import ModelOutcome

TABULATED = ("microbench", "validate", "ab")
ROW_TYPES = {"microbench": MicrobenchRow, "validate": ModelOutcome}  # the typed rows of each kind's results


@dataclass
class Source:
    path: Path
    doc: dict
    label: str = ""

    @property
    def kind(self) -> str:
        return self.doc["kind"]

    @property
    def device(self) -> str:
        """The GPU's name; its UUID where only NVML was asked (ab runs); "no-gpu" without one."""
        environment = self.doc.get("environment") or {}
        uuid = (environment.get("gpu") or {}).get("uuid")
        label = records.device_label(environment)
        return uuid if label == "no-gpu" and uuid else label

    @property
    def complete(self) -> bool:
        return bool(self.doc.get("complete", True))

    @property
    def group(self) -> tuple:
        """Documents that share a table: one kind, and for the microbench one family."""
        return (self.kind, (self.doc.get("config") or {}).get("family")) if self.kind == "microbench" else (self.kind,)


@dataclass
class Report:
    sources: list[Source]
    microbench: list[dict] = field(default_factory=list)  # one per family x case x variant, per-run columns
    validate: list[dict] = field(default_factory=list)  # one per model
    ab: list[dict] = field(default_factory=list)  # one per ab run: label, arms, models (scoreboard rows)
    notes: list[str] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[Source]:
        return [s for s in self.sources if s.kind == kind]

    def labels(self, *group) -> list[str]:
        """Run labels of one table: ``labels("validate")``, ``labels("microbench", "t2")``."""
        return [s.label for s in self.sources if s.group == group]

    @property
    def families(self) -> list[str]:
        return list(dict.fromkeys(row["family"] for row in self.microbench))


# JSON types a field may have, for schemas here and in the views that read a document's fields (show.*_view)
NUMBER = (int, float, type(None))
TEXT = (str, type(None))
MAPPING = (dict, type(None))
# The fields the tables read, per kind, with their JSON types ("*": every key of a mapping; rows and
# scoreboard models are checked one by one). Those in _REQUIRED must be present.
_SCHEMAS = {
    "microbench": {
        "case": (str,),
        "variant": (str,),
        "family": TEXT,
        "role": TEXT,
        "summary": MAPPING,
        "summary.median_us": NUMBER,
        "summary.p90_us": NUMBER,
        "vs_baseline": MAPPING,
        "vs_baseline.speedup": NUMBER,
        "vs_baseline.verdict": TEXT,
        "check": MAPPING,
        "check.rel_error": NUMBER,
        "check.tolerance": (int, float),
        "check.failure": TEXT,
        "check.fully_written": (bool,),
        "skipped": TEXT,
    },
    "document": {
        "environment.gpu": MAPPING,
        "environment.gpu.name": TEXT,
        "environment.gpu.uuid": TEXT,
        "config.family": TEXT,
        "run_id": TEXT,
        "timestamp": TEXT,
    },
    "validate": {"model": (str,), "status": TEXT, "match": NUMBER, "n_gen": NUMBER, "reason": TEXT},
    "ab-model": {
        "model": (str,),
        "verdict": (str,),
        "errors": (list,),
        "arms": (dict,),
        "arms.*": (dict,),
        "arms.*.prefill_p90": NUMBER,
        "arms.*.prefill_median": NUMBER,
        "arms.*.decode_p90": NUMBER,
        "prefill": MAPPING,
        "prefill.ratio": (int, float),
        "prefill.ci": (list,),
        "prefill.ci.*": NUMBER,
        "decode": MAPPING,
        "decode.ratio": (int, float),
        "decode.ci": (list,),
        "decode.ci.*": NUMBER,
        "llama": MAPPING,
        "llama.pp": MAPPING,
        "llama.pp.avg_ts": NUMBER,
        "llama.pp.test": TEXT,
        "gap": NUMBER,
        "shape": TEXT,
    },
}
_REQUIRED = {
    "document": (),
    "microbench": ("case", "variant"),
    "validate": ("model",),
    "ab-model": ("model", "verdict", "errors", "arms"),
}
_TYPE_NAMES = {
    str: "a string",
    int: "a number",
    float: "a number",
    dict: "an object",
    list: "a list",
    bool: "true or false",
    type(None): "null",
}


def _values_at(obj, dotted: str, where: str):
    """(place, value) of every value at a dotted path (``*`` = each item); absent parents are skipped."""
    found = [(where, obj)]
    for key in dotted.split("."):
        step = []
        for place, value in found:
            if key == "*" and isinstance(value, (dict, list)):
                items = value.items() if isinstance(value, dict) else enumerate(value)
                step += [(f"{place}.{k}" if isinstance(value, dict) else f"{place}[{k}]", v) for k, v in items]
            elif isinstance(value, dict) and key in value:
                step.append((f"{place}.{key}", value[key]))
        found = step
    return found


def check_fields(obj, schema: dict, where: str, required: Iterable[str] = ()) -> None:
    """``obj`` (a document or one of its rows) has the fields a table reads, of their JSON types: ``schema``
    maps dotted paths (``*``: each item) to the types allowed there; a path in ``required`` must be present
    wherever its parent is an object. A number must fit a float: the tables compute with it. Else one
    InputError naming the place."""
    if not isinstance(obj, dict):
        raise InputError(f"{where} must be an object, got {_TYPE_NAMES.get(type(obj), type(obj).__name__)}")
    for dotted in required:
        parent, _, name = dotted.rpartition(".")
        for place, value in _values_at(obj, parent, where) if parent else [(where, obj)]:
            if isinstance(value, dict) and name not in value:
                raise InputError(f"{place} has no {name!r} field"[:200])
    for dotted, types in schema.items():
        for place, value in _values_at(obj, dotted, where):
            if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
                wanted = " or ".join(dict.fromkeys(_TYPE_NAMES[t] for t in types))
                raise InputError(f"{place} must be {wanted}, got {value!r}"[:200])
            if isinstance(value, int) and abs(value) > sys.float_info.max:
                raise InputError(f"{place} is out of range: {str(value)[:20]}... has {len(str(value))} digits")


def _check_fields(obj, kind: str, where: str) -> None:
    check_fields(obj, _SCHEMAS[kind], where, _REQUIRED[kind])


def _typed_row(row_type, row: dict, where: str):
    """``row_type.from_json(row)``; a row of another shape is one InputError naming the place."""
    try:
        return row_type.from_json(row)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: {exc}"[:200]) from None


def check_tabulated(path: Path, doc: dict) -> dict:
    """A document whose rows (and ab scoreboard) have the fields and types the report's tables read, loaded
    as their typed rows; ``config``/``environment``/``verdict`` given as null are read as empty."""
    doc = {**doc, **{k: doc.get(k) or {} for k in ("config", "environment", "verdict")}}
    _check_fields(doc, "document", str(path))
    kind = doc["kind"]
    if kind in ("microbench", "validate"):
        for i, row in enumerate(doc.get("results") or []):
            _check_fields(row, kind, f"{path}: results[{i}]")
    if kind == "microbench":
        try:
            check_schema(doc)
        except ValueError as exc:
            raise InputError(f"{path}: {exc}") from None
    if kind in ROW_TYPES:
        doc["results"] = [
            _typed_row(ROW_TYPES[kind], row, f"{path}: results[{i}]") for i, row in enumerate(doc.get("results") or [])
        ]
    if kind == "ab":
        arms = doc["config"].get("arms")  # arm name -> engine and env
        if not isinstance(arms, (dict, list)) or not arms or not all(isinstance(a, str) for a in arms):
            raise InputError(f"{path}: config.arms must name the arms, got {arms!r}"[:200])
        models = doc["verdict"].get("models") or []
        if not isinstance(models, list):
            raise InputError(f"{path}: verdict.models must be a list, got {type(models).__name__}")
        for i, model in enumerate(models):
            _check_fields(model, "ab-model", f"{path}: verdict.models[{i}]")
            if set(arms) - set(model["arms"]):
                raise InputError(
                    f"{path}: verdict.models[{i}].arms lacks arm(s) {sorted(set(arms) - set(model['arms']))}"
                )
        doc["verdict"] = {
            **doc["verdict"],
            "models": [
                _typed_row(ScoreboardRow, model, f"{path}: verdict.models[{i}]") for i, model in enumerate(models)
            ],
        }
    return doc


def load_sources(paths: Iterable[str | os.PathLike]) -> list[Source]:
    """Every document once (a path given twice is read once), in the order given, with the fields its
    table reads checked (one InputError naming the file and the field)."""
    seen, sources = set(), []
    for p in paths:
        key = Path(p).resolve()
        if key not in seen:
            seen.add(key)
            sources.append(Source(Path(p), check_tabulated(Path(p), records.read(p))))
    if not sources:
        raise InputError("no results documents given")
    return sources


def check_devices(sources: list[Source], ignore_device: bool = False) -> None:
    """Refuse to put runs of one kind from different devices side by side, unless told to."""
    if ignore_device:
        return
    for kind in TABULATED:
        by_device = collections.defaultdict(list)
        for s in sources:
            if s.kind == kind:
                by_device[s.device].append(s.path.name)
        if len(by_device) > 1:
            listing = "; ".join(f"{device}: {', '.join(names)}" for device, names in by_device.items())
            raise InputError(
                f"refusing to compare {kind} runs from different devices ({listing}): their numbers "
                f"differ by hardware, not by code; pass --ignore-device to show them side by side anyway"
            )


def _label(sources: list[Source]) -> None:
    """Device name; plus the run id where a device has several runs in one table; plus incompleteness."""
    runs = collections.Counter((s.group, s.device) for s in sources)
    for s in sources:
        label = s.device if runs[(s.group, s.device)] == 1 else f"{s.device} · {s.doc.get('run_id', s.path.stem)}"
        s.label = label if s.complete else f"{label} (incomplete)"


def _microbench_rows(sources: list[Source]) -> list[dict]:
    rows: dict[tuple, dict] = {}
    for s in sources:
        r: MicrobenchRow
        for r in s.doc.get("results") or []:
            key = (r.family or s.doc["config"].get("family"), r.case, r.variant)
            row = rows.setdefault(
                key, {"family": key[0], "case": key[1], "variant": key[2], "role": r.role, "runs": {}}
            )
            status = "n/a" if r.skipped is not None else ("ok" if r.passed else "FAIL") if r.ran else "?"
            summary, vs = r.summary, r.vs_baseline
            row["runs"][s.label] = {
                "median_us": summary.median_us if summary else None,
                "p90_us": summary.p90_us if summary else None,
                "speedup": vs.speedup if vs else None,
                "verdict": vs.verdict if vs else None,
                "check": status,
            }
    return list(rows.values())


def _validate_rows(sources: list[Source]) -> list[dict]:
    rows: dict[str, dict] = {}
    for s in sources:
        r: ModelOutcome
        for r in s.doc.get("results") or []:
            row = rows.setdefault(r.model, {"model": r.model, "runs": {}})
            row["runs"][s.label] = {"status": r.status.value, "match": r.match, "n_gen": r.n_gen, "reason": r.reason}
    return list(rows.values())


def _ab_runs(sources: list[Source], notes: list[str]) -> list[dict]:
    out = []
    for s in sources:
        models = (s.doc.get("verdict") or {}).get("models")
        if not models:
            notes.append(
                f"{s.path.name}: ab run with no scoreboard yet ({len(s.doc.get('results') or [])} runs recorded)"
            )
            continue
        out.append(
            {
                "run": s.label,
                "arms": list(s.doc["config"]["arms"]),
                "models": models,
                "overall": (s.doc.get("verdict") or {}).get("overall"),
                "path": str(s.path),
            }
        )
    return out


def build_report(paths: Iterable[str | os.PathLike], ignore_device: bool = False) -> Report:
    """Read, check devices, label runs and merge; unknown kinds are left out with a note."""
    sources = load_sources(paths)
    check_devices(sources, ignore_device)
    report = Report(sources=[s for s in sources if s.kind in TABULATED])
    for s in sources:
        if s.kind not in TABULATED:
            report.notes.append(f"{s.path.name}: {s.kind} documents have no report table; left out")
        elif not s.complete:
            report.notes.append(
                f"{s.path.name}: incomplete run ({'; '.join(s.doc.get('notes') or []) or 'interrupted'})"
            )
    if not report.sources:
        raise InputError(f"nothing to report: no {', '.join(TABULATED)} documents among the {len(sources)} given")
    _label(report.sources)
    report.microbench = _microbench_rows(report.of_kind("microbench"))
    report.validate = _validate_rows(report.of_kind("validate"))
    report.ab = _ab_runs(report.of_kind("ab"), report.notes)
    return report


def to_dict(report: Report) -> dict:
    """The merged view as JSON-ready data (``--json``)."""
    return records.to_jsonable(
        {
            "runs": [
                {
                    "path": str(s.path),
                    "kind": s.kind,
                    "label": s.label,
                    "device": s.device,
                    "complete": s.complete,
                    "run_id": s.doc.get("run_id"),
                    "timestamp": s.doc.get("timestamp"),
                }
                for s in report.sources
            ],
            "microbench": report.microbench,
            "validate": report.validate,
            "ab": report.ab,
            "notes": report.notes,
        }
    )
