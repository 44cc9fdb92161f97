"""The small protocol every engine adapter implements (their child processes run through measure.process).

Capabilities (each optional; an adapter lists those it has in ``capabilities`` and raises
``NotSupported`` for the others):
- ``generate``: greedy token ids for a prompt (validate);
- ``teacher_forced``: argmax agreement when fed a reference continuation (validate);
- ``throughput``: prefill and decode tokens/s for a prompt (ab).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

ENGINE_KINDS: dict[str, type["Engine"]] = {}
GENERATE, TEACHER_FORCED, THROUGHPUT = "generate", "teacher_forced", "throughput"


def register(kind: str):
    def deco(cls):
        cls.kind = kind
        ENGINE_KINDS[kind] = cls
        return cls

    return deco


class NotSupported(Exception):
    """The adapter cannot do this (e.g. llama-bench cannot generate token ids)."""


def file_md5(path: str | Path) -> str | None:
    """md5 of a binary, so every result says exactly which build produced it."""
    digest = hashlib.md5()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


@dataclass
class GenerationResult:
    prompt_ids: list[int]
    generated_ids: list[int]
    wall_s: float = 0.0


@dataclass
class TeacherForcedResult:
    match: int
    total: int


@dataclass
class ThroughputResult:
    prefill_tokens: int
    prefill_tps: float
    decode_tokens: int | None = None
    decode_tps: float | None = None
    extra: dict = field(default_factory=dict)


class Engine:
    """Base class of adapters. ``kind`` is set by ``@register``."""

    kind: str = "abstract"
    capabilities: frozenset[str] = frozenset()  # of GENERATE, TEACHER_FORCED, THROUGHPUT

    @classmethod
    def for_run(cls, bin=None, config=None, *, prompt_tokens: int = 512, llama=None) -> "Engine":
        """The adapter for a run: ``bin`` and ``config`` as the command line or gates file gave them, and
        the run's settings, of which an adapter that needs one takes it here (llama-bench its prompt
        length, llama-cpp its ``LlamaSettings``); most need none."""
        return cls(bin=bin, config=config)

    def describe(self) -> dict:
        """Identity for results documents (binary path, md5, version...)."""
        return {"kind": self.kind}

    def program(self) -> str | Path | None:
        """The executable this adapter starts, checked before a run writes anything (None: none, or in-process)."""
        return None

    def generate(
        self,
        model: Path,
        prompt_ids: list[int],
        n_gen: int,
        *,
        env: dict[str, str] | None = None,
        timeout_s: float = 600.0,
    ) -> GenerationResult:
        raise NotSupported(f"{self.kind} cannot generate token ids")

    def teacher_forced(
        self,
        model: Path,
        prompt_ids: list[int],
        reference_ids: list[int],
        *,
        env: dict[str, str] | None = None,
        timeout_s: float = 600.0,
    ) -> TeacherForcedResult:
        raise NotSupported(f"{self.kind} has no teacher-forced mode")

    def throughput(
        self, model: Path, prompt_text: str, n_gen: int, *, env: dict[str, str] | None = None, timeout_s: float = 600.0
    ) -> ThroughputResult:
        raise NotSupported(f"{self.kind} cannot measure throughput")
