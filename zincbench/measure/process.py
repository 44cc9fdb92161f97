"""Child processes with hard limits: every engine, llama-bench and profiler run goes through here.

- Each child starts in its own session (so its own process group): Ctrl-C in the terminal does not
  reach it directly, and killing its group takes every grandchild with it.
- ``timeout_s`` is a hard limit. Output goes to temporary files, not pipes, so a grandchild that
  keeps stdout open cannot make us wait for an EOF; on expiry the group gets SIGTERM, then SIGKILL
  after ``TERM_GRACE_S``. When the child ends normally, whatever it left running in its group is
  killed too (a leaked helper would disturb the next measurement).
- SIGTERM and SIGHUP to zincbench (``signals_as_interrupts``) raise ``Terminated``, a
  KeyboardInterrupt, so they take the same path as Ctrl-C: the running child's group is killed, the
  results document is closed with ``complete: false`` and the reason, the command exits 130.
- A run with no usable result (missing program, crash, timeout; or output its caller cannot parse)
  is one ``EngineFailure``, whoever started it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

TERM_GRACE_S = 3.0  # SIGTERM to SIGKILL
CAPTURE_LIMIT_BYTES = 16 << 20  # per stream; the tail is kept (engines print their results last)
POLL_MIN_S, POLL_MAX_S = 0.001, 0.05
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class EngineFailure(Exception):
    """A run of an external program (engine, llama-bench, profiler) that produced no usable result:
    crash, timeout, or output we could not parse.

    ``reason`` is one of "crash", "timeout", "garbage", "missing"; ``stderr_tail`` is the last
    lines the program printed, for the ERROR row of a report.
    """

    def __init__(self, reason: str, message: str, stderr_tail: str = ""):
        super().__init__(message)
        self.reason = reason
        self.stderr_tail = stderr_tail


class Terminated(KeyboardInterrupt):
    """zincbench itself got SIGTERM or SIGHUP: handled as an interrupt, the signal named in the message."""

    def __init__(self, signum: int):
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.signal_name}")


def _raise_terminated(signum, frame):
    raise Terminated(signum)


@contextlib.contextmanager
def signals_as_interrupts():
    """While inside, SIGTERM/SIGHUP raise ``Terminated`` in the main thread (elsewhere: no change)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise_terminated) for sig in FORWARDED_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass
class ProcessResult:
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool = False

    @property
    def fatal_signal(self) -> int | None:
        """The signal the child died of on its own, or None. A child killed by our SIGTERM/SIGKILL at its
        timeout did not crash; one that died of any other signal did, even when the timeout passed while
        it was dying (a crash writing a large core dump can outlast the timeout): it is a crash, not a timeout."""
        if self.returncode is None or self.returncode >= 0:
            return None
        signum = -self.returncode
        return None if self.timed_out and signum in (signal.SIGTERM, signal.SIGKILL) else signum

    def tail(self, lines: int = 15) -> str:
        text = (self.stderr or "") + ("\n" + self.stdout if self.stdout and not self.stderr else "")
        return "\n".join(text.strip().splitlines()[-lines:])


def _exited(pid: int) -> bool:
    """Has the child exited? It is not reaped, so its pid (= its group id) cannot be reused yet."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _wait_exited(pid: int, timeout_s: float) -> bool:
    """Wait until the child exits or ``timeout_s`` passes; True when it exited. A pidfd wakes us the
    moment it exits (Linux 5.3+); elsewhere we poll with a growing pause."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return _poll_exited(pid, timeout_s)
    try:
        select.select([pidfd], [], [], timeout_s)
    finally:
        os.close(pidfd)
    return _exited(pid)


def _poll_exited(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    pause = POLL_MIN_S
    while not _exited(pid):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 2, POLL_MAX_S)
    return True


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _stop_group(proc: subprocess.Popen, grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM the child's group, SIGKILL it after ``grace_s`` (stragglers included), reap the child."""
    if not _exited(proc.pid):
        _signal_group(proc.pid, signal.SIGTERM)
        _wait_exited(proc.pid, grace_s)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _read_tail(fh) -> str:
    size = fh.seek(0, os.SEEK_END)
    fh.seek(max(0, size - CAPTURE_LIMIT_BYTES))
    return fh.read().decode("utf-8", errors="replace")


def run_process(
    argv: list, *, env: dict[str, str] | None = None, timeout_s: float = 600.0, cwd: str | os.PathLike | None = None
) -> ProcessResult:
    """Run one child to completion or to ``timeout_s`` (then its whole group is stopped), never longer."""
    argv = [str(a) for a in argv]
    full_env = {**os.environ, **(env or {})}
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=full_env, cwd=cwd, start_new_session=True
            )
        except OSError as exc:  # not found, not executable, a #! line naming no interpreter, not a program
            raise EngineFailure(
                "missing", f"engine binary {launch_problem(argv[0], env=full_env) or exc.strerror}: {argv[0]}"
            ) from None
        try:
            timed_out = not _wait_exited(proc.pid, timeout_s)
        finally:  # an interrupt (Ctrl-C, SIGTERM) lands here too: the child's group never outlives us
            _stop_group(proc)
        return ProcessResult(
            argv, proc.returncode, _read_tail(out), _read_tail(err), time.perf_counter() - start, timed_out
        )


def launch_problem(program: str | os.PathLike, env: dict[str, str] | None = None) -> str | None:
    """Why ``program`` cannot be started, in a few words, or None when it looks startable.

    "not found", "is a folder", "is not executable (chmod +x)", or, for a script, what is wrong with
    its ``#!`` line (an interpreter that does not exist reads to the OS as the script not existing:
    that is said here, so the message names the interpreter, not the script, as the thing missing).
    """
    import shutil

    text = os.fspath(program)
    path = shutil.which(text, path=(env or os.environ).get("PATH")) if os.sep not in text else text
    if path is None or not os.path.exists(path):
        return "not found"
    if os.path.isdir(path):
        return "is a folder, not a program"
    if not os.access(path, os.X_OK):
        return "is not executable (chmod +x)"
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if head.startswith(b"#!"):
        # The kernel splits the line at spaces and tabs only: a CRLF script's interpreter ends in "\r".
        words = [w for w in head[2:].split(b"\n", 1)[0].replace(b"\t", b" ").split(b" ") if w]
        if not words:
            return "has an empty #! line"
        interpreter = words[0].decode("utf-8", errors="replace")
        if not os.path.isfile(interpreter):
            return f"has a bad #! line: its interpreter {interpreter!r} does not exist"
        if not os.access(interpreter, os.X_OK):
            return f"has a bad #! line: its interpreter {interpreter!r} is not executable"
    return None


def checked(result: ProcessResult) -> ProcessResult:
    """Raise EngineFailure for a timeout or non-zero exit; return the result otherwise."""
    name = Path(result.argv[0]).name
    if result.fatal_signal is not None:
        raise EngineFailure("crash", f"{name} crashed: killed by {signal_name(result.fatal_signal)}", result.tail())
    if result.timed_out:
        raise EngineFailure("timeout", f"{name} timed out after {result.wall_s:.0f} s", result.tail())
    if result.returncode != 0:
        raise EngineFailure("crash", f"{name} exited with code {result.returncode}", result.tail())
    return result


def signal_name(signum: int) -> str:
    """SIGILL for 4; 'signal 99' for a number Python has no name for."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
