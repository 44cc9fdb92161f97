"""--gpu lists: argument rewriting per GPU, UUID/index resolution, bad values."""

from __future__ import annotations

import pytest

from zincbench.errors import InputError
from zincbench.gpu import selection


def test_argv_for_gpu_replaces_both_forms():
    assert selection.argv_for_gpu(["microbench", "t2", "--gpu", "all", "--quick"], "GPU-1") == [
        "microbench",
        "t2",
        "--gpu",
        "GPU-1",
        "--quick",
    ]
    assert selection.argv_for_gpu(["ab", "--gpu=0,1"], "GPU-2") == ["ab", "--gpu=GPU-2"]


def test_resolve(monkeypatch):
    monkeypatch.setattr(selection, "_nvml_uuids", lambda: ["GPU-a", "GPU-b"])
    assert selection.resolve_gpus("all") == ["GPU-a", "GPU-b"]
    assert selection.resolve_gpus("1,0") == ["GPU-b", "GPU-a"]
    assert selection.resolve_gpus("GPU-x,GPU-y") == ["GPU-x", "GPU-y"]  # UUIDs pass through unchecked
    with pytest.raises(InputError, match="not a GPU of this host"):
        selection.resolve_gpus("7")
    with pytest.raises(InputError):
        selection.resolve_gpus(" , ")


def test_run_per_gpu_returns_the_worst_code(monkeypatch):
    calls = []

    class Done:
        def __init__(self, code):
            self.returncode = code

    def fake_run(argv):
        calls.append(argv)
        return Done({"GPU-a": 0, "GPU-b": 1}[argv[argv.index("--gpu") + 1]])

    monkeypatch.setattr(selection.subprocess, "run", fake_run)
    assert selection.run_per_gpu(["GPU-a", "GPU-b"], ["microbench", "--gpu", "all"]) == 1
    assert [c[-1] for c in calls] == ["GPU-a", "GPU-b"]


@pytest.mark.parametrize("died, says", [(-11, "killed by signal 11"), (120, "exit code 120")])
def test_a_run_that_dies_on_one_gpu_is_an_internal_error_not_a_verdict(monkeypatch, capsys, died, says):
    class Done:
        def __init__(self, code):
            self.returncode = code

    monkeypatch.setattr(
        selection.subprocess, "run", lambda argv: Done({"GPU-a": 0, "GPU-b": died}[argv[argv.index("--gpu") + 1]])
    )
    assert selection.run_per_gpu(["GPU-a", "GPU-b"], ["microbench", "--gpu", "all"]) == 5
    (line,) = capsys.readouterr().err.splitlines()[-1:]
    assert line.startswith("zincbench: error: the run on GPU-b ") and says in line
