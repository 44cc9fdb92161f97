"""The rows of an ``ab`` document (schema 1, ``records.SCHEMA_VERSION``), as ``run_ab`` writes them and the
scoreboard, the report, the re-judging and ``aa`` read them:

- ``ABRun``: one run of one arm in one round (the document's ``results``);
- ``ScoreboardRow``: one model's judged summary (``verdict.models``, the scoreboard's row and the CSV's),
  holding an ``ArmStats`` per arm and, with two arms, a ``PairedRatio`` (B/A) per metric.

``to_json`` writes the recorded shape, the same keys in the same order as the documents in results/, so a
recorded row survives ``from_json`` then ``to_json`` unchanged. ``from_json`` refuses an unknown key
(ValueError) and a missing or misshapen part (TypeError), naming it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar, Literal

PAIRED_METRICS = ("prefill", "decode")  # the rates an A/B compares, B/A


def fields_of(cls, obj, what: str) -> dict:
    """``obj`` checked to be a JSON object with no key ``cls`` does not have."""
    if not isinstance(obj, dict):
        raise TypeError(f"{what} must be an object, got {type(obj).__name__}")
    unknown = set(obj) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ValueError(f"{what} has unknown key(s) {', '.join(sorted(unknown))}")
    return obj


@dataclass(kw_only=True)
class ABRun:
    """One run of one arm in one round. The GPU's state is NVML's snapshot before (``gpu``) and right after
    the run (``gpu_after``). A run that failed has ``error`` ({reason, message, stderr_tail}); one that
    succeeded has the engine's rates instead (``decode_*`` None where the engine printed none); ``to_json``
    writes only the part its status has, in the recorded key order."""

    model: str
    arm: str
    round: int
    warmup: bool  # round 0: run, recorded, left out of every statistic
    gpu: dict
    status: Literal["ok", "error"]
    error: dict | None = None
    prefill_tokens: int | None = None
    prefill_tps: float | None = None
    decode_tokens: int | None = None
    decode_tps: float | None = None
    extra: dict | None = None
    wall_s: float
    gpu_after: dict

    OUTCOME_KEYS: ClassVar[dict[str, tuple[str, ...]]] = {
        "ok": ("prefill_tokens", "prefill_tps", "decode_tokens", "decode_tps", "extra"),
        "error": ("error",),
    }

    def __post_init__(self):
        if self.status not in self.OUTCOME_KEYS:
            raise ValueError(f"ab run status must be ok or error, got {self.status!r}")

    def to_json(self) -> dict:
        head = {
            "model": self.model,
            "arm": self.arm,
            "round": self.round,
            "warmup": self.warmup,
            "gpu": self.gpu,
            "status": self.status,
        }
        return {
            **head,
            **{k: getattr(self, k) for k in self.OUTCOME_KEYS[self.status]},
            "wall_s": self.wall_s,
            "gpu_after": self.gpu_after,
        }

    @classmethod
    def from_json(cls, obj: dict) -> ABRun:
        return cls(**fields_of(cls, obj, "ab run"))


@dataclass(kw_only=True)
class ArmStats:
    """One arm's successful measured runs of one model: how many (``n_decode`` of them printed a decode rate),
    the prompt length they reported most, and the median and p90 tokens/s (a p90 is None below
    ``runs.ab.P90_MIN_SAMPLES`` runs, where it would be about the maximum)."""

    n: int
    n_decode: int
    prefill_tokens: int | None
    prefill_p90: float | None
    prefill_median: float | None
    decode_p90: float | None
    decode_median: float | None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, obj: dict) -> ArmStats:
        return cls(**fields_of(cls, obj, "ab arm statistics"))


@dataclass(kw_only=True)
class PairedRatio:
    """B against A on one metric over the rounds where both arms measured it: the geometric mean of the
    per-round ratios B/A, its t interval at ``confidence`` (that of the look that decided), the verdict."""

    ratio: float
    ci: list
    confidence: float
    verdict: str
    n_pairs: int
    method: str
    round_ratios: list[float]

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, obj: dict) -> PairedRatio:
        return cls(**fields_of(cls, obj, "ab paired ratio"))


class ScoredRow:
    """What a scoreboard row and an A/A repeat row (runs.aa_rows) share: ``arms``, an ``ArmStats`` per arm,
    and B/A per metric (``prefill``, ``decode``: a ``PairedRatio``, or None). A dataclass that mixes it in
    names itself in ``WHAT`` for its errors."""

    WHAT: ClassVar[str]

    def paired(self) -> dict[str, PairedRatio]:
        """B/A of the metrics that have one."""
        return {metric: getattr(self, metric) for metric in PAIRED_METRICS if getattr(self, metric) is not None}

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out.update(
            arms={name: stats.to_json() for name, stats in self.arms.items()},
            **{metric: ratio.to_json() for metric, ratio in self.paired().items()},
        )
        return out

    @classmethod
    def from_json(cls, obj: dict):
        obj = fields_of(cls, obj, cls.WHAT)
        arms = obj.get("arms")
        if not isinstance(arms, dict):
            raise TypeError(f"{cls.WHAT}'s arms must be an object, got {type(arms).__name__}")
        return cls(
            **{
                **obj,
                "arms": {name: ArmStats.from_json(stats) for name, stats in arms.items()},
                **{
                    metric: PairedRatio.from_json(obj[metric])
                    for metric in PAIRED_METRICS
                    if obj.get(metric) is not None
                },
            }
        )


@dataclass(kw_only=True)
class ScoreboardRow(ScoredRow):
    """One model of an A/B (or of a one-build scoreboard): per-arm statistics, B/A per metric, failed runs and
    the verdict. ``llama`` (llama-bench's nearest pp and tg rows, or its error) is written only when the run
    had a llama-bench source and it gave something for this model. A row needs only ``model``, ``verdict``,
    ``errors`` and ``arms`` to be read (the report's minimum); the others default to None, ``notes`` to []."""

    WHAT: ClassVar[str] = "ab scoreboard row"

    model: str
    shape: str | None = None
    gguf: str | None = None
    arms: dict[str, ArmStats]
    prefill: PairedRatio | None = None  # None with one arm, or without a round where both arms measured it
    decode: PairedRatio | None = None
    errors: list[dict]  # failed and zero-rate runs: arm, round, reason, message, stderr_tail
    failed_runs: int | None = None  # measured runs (warm-up excluded) that failed or measured nothing
    rounds: int | None = None  # measured rounds run
    verdict: str  # faster | same | slower | inconclusive | error, or measured (one arm)
    prefill_tokens: int | None = None  # the prompt length the engine reported
    notes: list[str] = field(default_factory=list)
    stop: str | None = None  # why the model's rounds ended: decided | max rounds | max time | rounds
    llama: dict | None = None
    gap: float | None = None  # llama-bench's ppT over the newest build's prefill p90

    def to_json(self) -> dict:
        out = super().to_json()
        if self.llama is None:
            del out["llama"]
        return out
