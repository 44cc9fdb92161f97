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

POLL_S = 0.05


def _hanging_engine(marker: Path, proc: subprocess.Popen) -> int:
    """The pid of the engine once it hangs (it writes the marker right before): by then zincbench has recorded
    run 0 and waits for run 1. No wall-clock limit: a zincbench that died instead fails the test at once."""
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(POLL_S)
    return int(marker.read_text())


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


NOTE_OF_SIGNAL = {
    signal.SIGINT: "interrupted (SIGINT)",
    signal.SIGTERM: "interrupted by SIGTERM",
    signal.SIGHUP: "interrupted by SIGHUP",
}


@pytest.mark.parametrize("signum", list(NOTE_OF_SIGNAL), ids=lambda s: signal.Signals(s).name)
def test_signal_leaves_a_valid_incomplete_results_file(tmp_path, signum):
    fake = write_launcher(tmp_path)
    (tmp_path / "tiny.gguf").touch()
    marker = tmp_path / "hanging"
    env = {
        **os.environ,
        "FAKE_COUNTER": str(tmp_path / "counter"),
        "FAKE_FAIL": "hang",
        "FAKE_FAIL_RUNS": "1",
        "FAKE_HANG_MARKER": str(marker),
        "COLUMNS": "250",
    }
    for var in ("FAKE_SPEED", "FAKE_DRIFT", "FAKE_NOISE"):
        env.pop(var, None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zincbench",
            "ab",
            "--a",
            str(fake),
            "--b",
            str(fake),
            "--model",
            "tiny=tiny.gguf",
            "--rounds",
            "2",
            "--results-dir",
            str(tmp_path / "results"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        engine = _hanging_engine(marker, proc)  # run 0 recorded, run 1 hangs
        proc.send_signal(signum)
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    assert proc.returncode == 130
    assert "Traceback" not in out + err
    errors = [line for line in err.splitlines() if line.startswith("zincbench: error:")]
    assert len(errors) == 1 and errors[0] in ("zincbench: error: interrupted", "zincbench: error: aborted")
    assert err.rstrip("\n").endswith(errors[0])  # the last word, after any warnings

    (path,) = (tmp_path / "results").glob("ab-*.json")
    doc = records.read(path)
    assert doc["complete"] is False and any(NOTE_OF_SIGNAL[signum] in note for note in doc["notes"])
    assert [(r["arm"], r["round"], r["status"]) for r in doc["results"]] == [("A", 0, "ok")]
    assert doc["results"][0]["prefill_tps"] > 0
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == [path.name]  # no temp file, no CSV
    assert not _alive(engine)  # the engine's process group was killed with it
