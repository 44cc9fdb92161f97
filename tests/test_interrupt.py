"""Ctrl-C (or SIGTERM, SIGHUP) in the middle of a run: `zincbench ab` against the fake engine,
interrupted while the engine is busy after the first run was recorded. The results file must stay
valid, say it is incomplete and why, and keep what was measured; the command exits 130 with one
line, and the engine it was waiting for is not left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fake_engine import write_launcher
from zincbench import records
from zincbench.errors import InputError

POLL_S = 0.1
WAIT_LIMIT_S = 60  # a safety net for a broken run, not a timing assertion


def _first_recorded_run(results: Path, proc: subprocess.Popen) -> Path:
    """The ab document once it holds a run (written atomically, so every read sees a whole file)."""
    deadline = time.monotonic() + WAIT_LIMIT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        for path in results.glob("ab-*.json"):
            try:
                if records.read(path)["results"]:
                    return path
            except InputError:
                pass
        time.sleep(POLL_S)
    raise AssertionError("no run was recorded")


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text in cmdline.read_bytes().decode(errors="replace"):
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return pids


NOTE_OF_SIGNAL = {signal.SIGINT: "interrupted (SIGINT)", signal.SIGTERM: "interrupted by SIGTERM",
                  signal.SIGHUP: "interrupted by SIGHUP"}


@pytest.mark.parametrize("signum", list(NOTE_OF_SIGNAL), ids=lambda s: signal.Signals(s).name)
def test_signal_leaves_a_valid_incomplete_results_file(tmp_path, signum):
    fake = write_launcher(tmp_path)
    (tmp_path / "tiny.gguf").touch()
    env = {**os.environ, "FAKE_COUNTER": str(tmp_path / "counter"), "FAKE_FAIL": "hang", "FAKE_FAIL_RUNS": "1",
           "COLUMNS": "250"}
    for var in ("FAKE_SPEED", "FAKE_DRIFT", "FAKE_NOISE"):
        env.pop(var, None)
    proc = subprocess.Popen([sys.executable, "-m", "zincbench", "ab", "--a", str(fake), "--b", str(fake), "--model",
                             "tiny=tiny.gguf", "--rounds", "2", "--results-dir", str(tmp_path / "results")],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        path = _first_recorded_run(tmp_path / "results", proc)  # run 0 done, run 1 hangs
        while not _processes_mentioning(str(fake)):  # the hanging engine is up
            time.sleep(POLL_S)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=WAIT_LIMIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    assert proc.returncode == 130
    assert "Traceback" not in out + err
    errors = [line for line in err.splitlines() if line.startswith("zincbench: error:")]
    assert len(errors) == 1 and errors[0] in ("zincbench: error: interrupted", "zincbench: error: aborted")
    assert err.rstrip("\n").endswith(errors[0])  # the last word, after any warnings

    doc = records.read(path)
    assert doc["complete"] is False and any(NOTE_OF_SIGNAL[signum] in note for note in doc["notes"])
    assert [(r["arm"], r["round"], r["status"]) for r in doc["results"]] == [("A", 0, "ok")]
    assert doc["results"][0]["prefill_tps"] > 0
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == [path.name]  # no temp file, no CSV
    assert _processes_mentioning(str(fake)) == []  # the engine's process group was killed with it
