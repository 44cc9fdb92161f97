"""The rows of an ``aa`` document (schema 1, ``records.SCHEMA_VERSION``), one type per ``type`` key:

- ``ProcessRow`` (``aa microbench``): one microbench process, its samples and summary or why it has none;
- ``ComparisonRow`` (``aa microbench``): two processes' medians compared by the family's gate rule;
- ``RepeatRow`` (``aa ab``): one model of one repeated A/B, the judged part of its scoreboard row.

``to_json`` writes the recorded shape, the same keys in the same order as the documents in results/, so a
recorded row survives ``aa_row`` then ``to_json`` unchanged. Reading refuses an unknown ``type`` or key
(ValueError) and a missing or misshapen part (TypeError), naming it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Literal

from zincbench.bench.rows import Summary
from zincbench.runs.ab_rows import ArmStats, PairedRatio, ScoreboardRow, ScoredRow, fields_of


def _untyped(cls, obj, what: str) -> dict:
    """``obj`` without its ``type`` key, which must name ``cls``, then checked as ``fields_of`` checks."""
    if isinstance(obj, dict):
        if obj.get("type") != cls.type:
            raise ValueError(f"{what} has type {obj.get('type')!r}, not {cls.type!r}")
        obj = {key: value for key, value in obj.items() if key != "type"}
    return fields_of(cls, obj, what)


@dataclass(kw_only=True)
class ProcessRow:
    """A process that timed out has no ``exit_code``; one that failed has ``error`` (and ``stderr_tail`` when
    it printed any); one that ended normally has its samples (``gpu_us``), their ``summary``, its timer's
    ``stop_reason`` and ``dropped_throttled`` count, and the row's ``detail``."""

    type: ClassVar[str] = "process"
    OK_KEYS: ClassVar[tuple[str, ...]] = ("gpu_us", "summary", "stop_reason", "dropped_throttled", "detail")

    index: int
    exit_code: int | None = None
    status: Literal["ok", "error"]
    error: str | None = None
    stderr_tail: str | None = None
    gpu_us: list[float] | None = None
    summary: Summary | None = None
    stop_reason: str | None = None
    dropped_throttled: int | None = None
    detail: dict | None = None

    def __post_init__(self):
        if self.status not in ("ok", "error"):
            raise ValueError(f"aa process row status must be ok or error, got {self.status!r}")
        if self.status == "ok" and self.summary is None:
            raise TypeError("aa process row with status ok has no summary")

    def to_json(self) -> dict:
        out = {"type": self.type, "index": self.index}
        if self.exit_code is not None:
            out["exit_code"] = self.exit_code
        out["status"] = self.status
        if self.status == "ok":
            return {
                **out,
                **{key: getattr(self, key) for key in self.OK_KEYS},
                "summary": dataclasses.asdict(self.summary),
            }
        return {**out, "error": self.error, **({} if self.stderr_tail is None else {"stderr_tail": self.stderr_tail})}

    @classmethod
    def from_json(cls, obj: dict) -> ProcessRow:
        obj = _untyped(cls, obj, "aa process row")
        summary = obj.get("summary")
        if summary is not None and not isinstance(summary, dict):
            raise TypeError(f"aa process row's summary must be an object, got {type(summary).__name__}")
        return cls(**{**obj, "summary": None if summary is None else Summary(**summary)})


@dataclass(kw_only=True)
class ComparisonRow:
    """Process ``candidate`` against process ``baseline`` (the earlier one): the ratio of their medians, its
    interval, the verdict, and the smallest change the verdict would call (``change_to_call``). Pairs that
    share no process (0-1, 2-3, ...) are ``independent``."""

    type: ClassVar[str] = "comparison"

    baseline: int
    candidate: int
    independent: bool
    time_ratio: float
    ci: list
    verdict: str
    change_to_call: list  # [speed-up, slow-down] it would call (runs.aa.change_to_call)

    def to_json(self) -> dict:
        return {"type": self.type, **dataclasses.asdict(self)}

    @classmethod
    def from_json(cls, obj: dict) -> ComparisonRow:
        return cls(**_untyped(cls, obj, "aa comparison row"))


@dataclass(kw_only=True)
class RepeatRow(ScoredRow):
    """One model of repeat ``repeat``: what its scoreboard row says of the verdict, the rounds it took, why it
    stopped, the arms' statistics, the failed runs and B/A per metric."""

    type: ClassVar[str] = "repeat"
    WHAT: ClassVar[str] = "aa repeat row"

    repeat: int
    model: str
    verdict: str
    rounds: int | None
    stop: str | None
    failed_runs: int | None
    arms: dict[str, ArmStats]
    errors: list[dict]
    prefill: PairedRatio | None
    decode: PairedRatio | None

    @classmethod
    def of(cls, repeat: int, scored: ScoreboardRow) -> RepeatRow:
        return cls(
            repeat=repeat, **{f.name: getattr(scored, f.name) for f in dataclasses.fields(cls) if f.name != "repeat"}
        )

    def to_json(self) -> dict:
        return {"type": self.type, **super().to_json()}

    @classmethod
    def from_json(cls, obj: dict) -> RepeatRow:
        return super().from_json(_untyped(cls, obj, cls.WHAT))


AARow = ProcessRow | ComparisonRow | RepeatRow
ROW_TYPES = {row_type.type: row_type for row_type in (ProcessRow, ComparisonRow, RepeatRow)}


def aa_row(obj: dict) -> AARow:
    """A recorded row of an ``aa`` document, typed by its ``type`` key."""
    kind = obj.get("type") if isinstance(obj, dict) else None
    if kind not in ROW_TYPES:
        raise ValueError(f"aa row type must be one of {', '.join(ROW_TYPES)}, got {kind!r}")
    return ROW_TYPES[kind].from_json(obj)
