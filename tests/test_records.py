"""Results documents: atomic writes, JSON-safe values, DataFrame loading, incomplete runs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from zincbench import records
from zincbench.errors import InputError
from zincbench.judge import Verdict


def _doc(**kw):
    return records.Document(kind="microbench", config={"family": "t2"}, environment={"gpu": {"name": "H200"}}, **kw)


def test_write_is_atomic_and_json_safe(tmp_path):
    doc = _doc(
        results=[
            {
                "case": "a",
                "summary": {"median_us": np.float64(1.5), "ci": (float("nan"), 2.0)},
                "verdict": Verdict.FASTER,
                "samples": np.arange(3),
            }
        ]
    )
    path = records.write(doc, directory=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left behind
    data = json.loads(path.read_text())
    row = data["results"][0]
    assert row["summary"] == {"median_us": 1.5, "ci": [None, 2.0]} and row["verdict"] == "faster"
    assert row["samples"] == [0, 1, 2]
    assert data["schema_version"] == records.SCHEMA_VERSION and data["command_line"] and data["timestamp"]


def test_load_returns_one_row_per_result(tmp_path):
    for case in ("a", "b"):
        records.write(_doc(results=[{"case": case, "summary": {"median_us": 1.0}}]), directory=tmp_path)
    frame = records.load(sorted(tmp_path.glob("*.json")))
    assert sorted(frame["case"]) == ["a", "b"] and set(frame["device"]) == {"H200"}
    assert "summary.median_us" in frame.columns


def test_read_rejects_other_files(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="invalid JSON"):
        records.read(bad)
    bad.write_text("[]")
    with pytest.raises(InputError, match="not a zincbench results document"):
        records.read(bad)
    with pytest.raises(InputError, match="not found"):
        records.read(tmp_path / "missing.json")


def test_incremental_writer_marks_an_interrupted_run_incomplete(tmp_path):
    doc = _doc()
    with pytest.raises(KeyboardInterrupt):
        with records.IncrementalWriter(doc, directory=tmp_path) as writer:
            doc.results.append({"case": "a"})
            writer.flush()
            raise KeyboardInterrupt
    data = records.read(writer.path)
    assert data["complete"] is False and data["results"] == [{"case": "a"}]
    assert "interrupted (SIGINT)" in data["notes"]


def test_a_final_write_that_fails_still_says_how_the_run_ended(tmp_path, monkeypatch):
    import errno
    import os

    from zincbench.errors import EnvironmentProblem

    doc = records.Document(kind="microbench", config={}, environment={})
    with pytest.raises(EnvironmentProblem, match=r"No space left on device; the run itself finished: NO-GO \(exit 1\)"):
        with records.IncrementalWriter(doc, directory=tmp_path):
            doc.verdict = {"decision": "NO-GO", "exit_code": 1}

            def no_space(src, dst):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

            monkeypatch.setattr(records.os, "replace", no_space)  # the disk fills during the run
