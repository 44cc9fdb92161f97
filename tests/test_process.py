"""Child processes: hard timeouts that stop the whole group, and no wait on a pipe a grandchild holds."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from zincbench.engines import generic
from zincbench.measure.process import EngineFailure, Terminated, checked, run_process, signals_as_interrupts


def _alive(pid: int) -> bool:
    """Running (a zombie reparented to init and not yet reaped counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _gone(pid: int, patience_s: float = 30.0) -> bool:
    """The process is dead or dying (a SIGKILL takes effect asynchronously); a safety net, not a timing assertion."""
    deadline = time.monotonic() + patience_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "engine.py"
    path.write_text(body)
    return [sys.executable, str(path)]


GRANDCHILD = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])  # inherits stdout/stderr
print(f"GRANDCHILD:{child.pid}", flush=True)
print("Prefill complete: 5 tokens in 1.0 ms (5000.00 tok/s)", file=sys.stderr, flush=True)
"""


def test_engine_that_leaves_a_grandchild_holding_stdout_returns_and_the_grandchild_is_killed(tmp_path):
    result = run_process(_script(tmp_path, GRANDCHILD + "sys.exit(0)\n"), timeout_s=600)
    assert result.returncode == 0 and not result.timed_out
    grandchild = int(result.stdout.split("GRANDCHILD:")[1].split()[0])
    assert "Prefill complete" in result.stderr
    assert _gone(grandchild)


def test_timeout_kills_the_whole_group_even_when_the_engine_ignores_sigterm(tmp_path):
    body = GRANDCHILD + "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(3600)\n"
    result = run_process(_script(tmp_path, body), timeout_s=1)
    assert result.timed_out and result.returncode == -signal.SIGKILL
    assert _gone(int(result.stdout.split("GRANDCHILD:")[1].split()[0]))
    with pytest.raises(EngineFailure, match="timed out") as exc:
        checked(result)
    assert exc.value.reason == "timeout" and "Prefill complete" in exc.value.stderr_tail


def test_a_signal_death_names_the_signal(tmp_path):
    result = run_process(_script(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n"))
    with pytest.raises(EngineFailure, match="killed by SIGILL") as exc:
        checked(result)
    assert exc.value.reason == "crash"


def test_missing_binary_is_engine_failure_missing(tmp_path):
    with pytest.raises(EngineFailure) as exc:
        run_process([tmp_path / "no-such-engine"])
    assert exc.value.reason == "missing"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: signal.Signals(s).name)
def test_sigterm_and_sighup_become_an_interrupt_that_names_them(signum):
    before = signal.getsignal(signum)
    with pytest.raises(KeyboardInterrupt, match=f"interrupted by {signal.Signals(signum).name}") as exc:
        with signals_as_interrupts():
            os.kill(os.getpid(), signum)
    assert isinstance(exc.value, Terminated)
    assert signal.getsignal(signum) == before  # restored on the way out


@pytest.mark.parametrize("pattern", [r"(a+)+b", r"(\w+\s?)*$", r"x((ab?)*)*", r"(a{1,3})+c", r"((a+)?)+"])
def test_exponential_backtracking_regexes_are_refused_when_the_config_loads(pattern):
    with pytest.raises(ValueError, match="prefill_regex: regex .* backtrack"):
        generic.EngineSpec(throughput=generic.ThroughputSpec("{bin}", prefill_regex=pattern))


@pytest.mark.parametrize(
    "pattern",
    [
        r"Prefill complete: (\S+) tokens in \S+ ms \((\S+) tok/s\)",
        r"GEN_IDS:((?:\d+,)*\d+)",
        r"(\S*\s)*x",
        r"(a++)+b",
        r"(ab){2}+",
    ],
)
def test_ordinary_regexes_load(pattern):
    generic.EngineSpec(throughput=generic.ThroughputSpec("{bin}", prefill_regex=pattern))


def test_matching_sees_at_most_max_line_chars_of_a_line():
    ids = ",".join(["7"] * generic.MAX_LINE_CHARS)  # a line twice the cap
    kept = generic.MAX_LINE_CHARS - len("GEN_IDS:")  # "7,7,...": every other character an id
    assert len(generic.parse_ids(f"GEN_IDS:{ids}\n", r"GEN_IDS:([\d,]*\d)", "ids")) == (kept + 1) // 2
