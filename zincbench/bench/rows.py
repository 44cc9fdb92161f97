"""The microbench row: one family x case x variant of a microbench document, as the runner writes it and
the table, report, gate and tests read it.

``to_json`` writes the recorded shape (schema 1): the same keys in the same order as the documents in
results/, optional parts absent rather than null, so a recorded row survives ``from_json`` then
``to_json`` unchanged. A row the family could not run (``NotApplicable``) has only its identity and
``skipped``; a row that ran has its check, traffic, detail, reference and floor; a row that passed its
check adds the measurement, summary, rates and, for every variant but the baseline, ``vs_baseline``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from zincbench import judge
from zincbench.bench.base import CheckResult
from zincbench.measure.timer import Measurement
from zincbench.records import SCHEMA_VERSION


def _present(obj) -> dict:
    """A dataclass's fields in declaration order, those that are None left out."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if getattr(obj, f.name) is not None}


@dataclass(kw_only=True)
class Summary:
    n: int
    median_us: float
    p90_us: float
    mean_us: float
    stdev_us: float
    min_us: float
    max_us: float
    median_ci_us: list
    p90_ci_us: list
    rel_noise: float | None

    @classmethod
    def of_samples(cls, samples) -> Summary:
        s = judge.summarize(samples)
        return cls(
            n=s.n,
            median_us=s.median,
            p90_us=s.p90,
            mean_us=s.mean,
            stdev_us=s.stdev,
            min_us=s.minimum,
            max_us=s.maximum,
            median_ci_us=list(s.median_ci),
            p90_ci_us=list(s.p90_ci),
            rel_noise=s.rel_noise,
        )


@dataclass(kw_only=True)
class VsBaseline:
    """The variant against the case's baseline: a comparison, or an inconclusive verdict with a ``note``."""

    baseline: str
    time_ratio: float | None = None
    time_ratio_ci: list | None = None
    speedup: float | None = None
    speedup_ci: list | None = None
    verdict: str
    confidence: float | None = None
    method: str | None = None
    note: str | None = None


@dataclass(kw_only=True)
class Floor:
    """The time the roofline allows (the ceilings measured in the run); absent ceilings leave us/bound None."""

    us: float | None
    bound: str | None
    pct_of_floor: float | None = None

    def to_json(self) -> dict:
        return {
            "us": self.us,
            "bound": self.bound,
            **({} if self.pct_of_floor is None else {"pct_of_floor": self.pct_of_floor}),
        }


@dataclass(kw_only=True)
class MicrobenchRow:
    family: str
    case: str
    params: dict
    variant: str
    role: str
    skipped: str | None = None  # why the family could not run this variant for this case
    check: CheckResult | None = None
    traffic: dict | None = None
    detail: dict | None = None  # family- or pack-specific: tile, autotune, launches, source...
    reference: dict | None = None  # recorded llama.cpp times for this device
    floor: Floor | None = None
    measurement: Measurement | None = None
    summary: Summary | None = None
    warnings: list[str] | None = None
    rates: dict | None = None
    vs_baseline: VsBaseline | None = None

    @property
    def ran(self) -> bool:
        return self.check is not None

    @property
    def timed(self) -> bool:
        return self.measurement is not None

    @property
    def passed(self) -> bool:
        return self.check is not None and self.check.passed

    def to_json(self) -> dict:
        out = {
            "family": self.family,
            "case": self.case,
            "params": self.params,
            "variant": self.variant,
            "role": self.role,
        }
        if self.skipped is not None:
            out["skipped"] = self.skipped
        if self.check is not None:
            out.update(
                check={**dataclasses.asdict(self.check), "passed": self.check.passed},
                traffic=self.traffic,
                detail=self.detail,
                reference=self.reference,
                floor=(self.floor or Floor(us=None, bound=None)).to_json(),
            )
        if self.measurement is not None:
            out["measurement"] = dataclasses.asdict(self.measurement)
        if self.summary is not None:
            out["summary"] = dataclasses.asdict(self.summary)
        if self.warnings is not None:
            out["warnings"] = self.warnings
        if self.rates is not None:
            out["rates"] = self.rates
        if self.vs_baseline is not None:
            out["vs_baseline"] = _present(self.vs_baseline)
        return out

    @classmethod
    def from_json(cls, obj: dict) -> MicrobenchRow:
        """A recorded row; a key this schema does not know, or a part of the wrong shape, is a ValueError
        or TypeError naming it."""
        unknown = set(obj) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"microbench row has unknown key(s) {', '.join(sorted(unknown))}")
        check = obj.get("check")
        if isinstance(check, dict):  # ``passed`` is not stored: it follows from the rest
            check = {k: v for k, v in check.items() if k != "passed"}
        check = _load("check", CheckResult, check)
        return cls(
            **{
                **obj,
                "check": check,
                "floor": _load("floor", Floor, obj.get("floor")),
                "measurement": _load("measurement", Measurement, obj.get("measurement")),
                "summary": _load("summary", Summary, obj.get("summary")),
                "vs_baseline": _load("vs_baseline", VsBaseline, obj.get("vs_baseline")),
            }
        )


def _load(key: str, kind, obj: dict | None):
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise TypeError(f"microbench row's {key} must be an object, got {type(obj).__name__}")
    return kind(**obj)


def check_schema(doc: dict) -> None:
    """A document written in another schema version is a ValueError: its rows may mean other things."""
    version = doc.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise ValueError(f"schema_version {version!r} (this zincbench reads {SCHEMA_VERSION})")


def rows_of(doc: dict) -> list[MicrobenchRow]:
    """A microbench document's rows, typed."""
    check_schema(doc)
    return [MicrobenchRow.from_json(row) for row in doc.get("results") or []]
