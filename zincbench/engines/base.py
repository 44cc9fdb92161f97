"""The small protocol every engine adapter implements, and the subprocess runner they share.

Capabilities (each optional; an adapter raises ``NotSupported`` for what it cannot do):
- ``generate``: greedy token ids for a prompt (validate);
- ``teacher_forced``: argmax agreement when fed a reference continuation (validate);
- ``throughput``: prefill and decode tokens/s for a prompt (ab).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ENGINE_KINDS: dict[str, type["Engine"]] = {}


def register(kind: str):
    def deco(cls):
        cls.kind = kind
        ENGINE_KINDS[kind] = cls
        return cls
    return deco


class NotSupported(Exception):
    """The adapter cannot do this (e.g. llama-bench cannot generate token ids)."""


class EngineFailure(Exception):
    """A run that produced no usable result: crash, timeout, or output we could not parse.

    ``reason`` is one of "crash", "timeout", "garbage", "missing"; ``stderr_tail`` is the last
    lines the engine printed, for the ERROR row of a report.
    """

    def __init__(self, reason: str, message: str, stderr_tail: str = ""):
        super().__init__(message)
        self.reason = reason
        self.stderr_tail = stderr_tail


@dataclass
class ProcessResult:
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool = False

    def tail(self, lines: int = 15) -> str:
        text = (self.stderr or "") + ("\n" + self.stdout if self.stdout and not self.stderr else "")
        return "\n".join(text.strip().splitlines()[-lines:])


def run_process(argv: list[str], *, env: dict[str, str] | None = None, timeout_s: float = 600.0,
                cwd: str | os.PathLike | None = None) -> ProcessResult:
    """Run one engine process with extra environment, killing its whole process group on timeout."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            [str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            errors="replace", env=full_env, cwd=cwd, start_new_session=True,
        )
    except FileNotFoundError:
        raise EngineFailure("missing", f"engine binary not found: {argv[0]}") from None
    except PermissionError:
        raise EngineFailure("missing", f"engine binary is not executable: {argv[0]}") from None
    try:
        out, err = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        timed_out = True
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        raise
    return ProcessResult([str(a) for a in argv], proc.returncode, out or "", err or "",
                         time.perf_counter() - start, timed_out)


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


def checked(result: ProcessResult) -> ProcessResult:
    """Raise EngineFailure for a timeout or non-zero exit; return the result otherwise."""
    if result.timed_out:
        raise EngineFailure("timeout", f"{Path(result.argv[0]).name} timed out after {result.wall_s:.0f} s", result.tail())
    if result.returncode != 0:
        raise EngineFailure("crash", f"{Path(result.argv[0]).name} exited with code {result.returncode}", result.tail())
    return result


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

    def describe(self) -> dict:
        """Identity for results documents (binary path, md5, version...)."""
        return {"kind": self.kind}

    def generate(self, model: Path, prompt_ids: list[int], n_gen: int, *, env: dict[str, str] | None = None,
                 timeout_s: float = 600.0) -> GenerationResult:
        raise NotSupported(f"{self.kind} cannot generate token ids")

    def teacher_forced(self, model: Path, prompt_ids: list[int], reference_ids: list[int], *,
                       env: dict[str, str] | None = None, timeout_s: float = 600.0) -> TeacherForcedResult:
        raise NotSupported(f"{self.kind} has no teacher-forced mode")

    def throughput(self, model: Path, prompt_text: str, n_gen: int, *, env: dict[str, str] | None = None,
                   timeout_s: float = 600.0) -> ThroughputResult:
        raise NotSupported(f"{self.kind} cannot measure throughput")
