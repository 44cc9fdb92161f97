"""`zincbench profile microbench` on a GPU host: the T2 microbench under nsys (and ncu when present).

Run with `pytest -m gpu` where CuPy, a CUDA device and the profilers are available; skipped otherwise.
"""

import math

import pytest

from zincbench.errors import EnvironmentProblem
from zincbench.profile import choose_tools, microbench_argv, newest_document, profile_command
from zincbench.profile.categories import load_rules
from zincbench.profile.parse import traffic_comparison
from zincbench.records import read

pytestmark = pytest.mark.gpu
ARGS = ["t2", "--quick", "--case", "Ne16", "--no-progress"]


def profiled(tool, tmp_path):
    try:
        choose_tools(tool)
    except EnvironmentProblem as exc:
        pytest.skip(str(exc))
    results = tmp_path / "microbench"
    (run,) = profile_command(
        microbench_argv(ARGS), [tool], tmp_path, load_rules(), env={"ZINCBENCH_RESULTS": str(results)}, timeout_s=1200
    )
    document = newest_document(results)
    assert document is not None, f"the microbench wrote no results document; see {run.artifacts['log']}"
    return run, read(document)["results"]


def test_t2_microbench_under_nsys(tmp_path):
    run, rows = profiled("nsys", tmp_path)
    tables = run.tables
    variants = {row["variant"] for row in rows if "measurement" in row}
    t2_ranges = {r for r in tables.ranges["range"] if r.startswith("t2/")}
    assert {r.split("/")[1] for r in t2_ranges} == variants
    assert {"matvec", "gemm"} <= set(tables.categories["category"])
    assert tables.categories["share"].sum() == pytest.approx(1.0)


def test_t2_microbench_dram_bytes_under_ncu(tmp_path):
    run, rows = profiled("ncu", tmp_path)
    traffic = traffic_comparison(run.tables.launches, rows)
    assert not traffic.empty
    for ratio in traffic["measured_over_model"]:
        assert math.isfinite(ratio) and ratio > 0
