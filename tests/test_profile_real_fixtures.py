"""Parsers on real nsys/ncu output of tests/fixtures/profile/capture.py, recorded by capture.sh on a GPU host.

The workload is known, so the tables are too: rms_norm_f32 and gather_rows run REPS times, each inside
its own ``t2/<variant>/<shape>`` range; the cuBLAS GEMM is a gemm; a warm-up kernel runs outside every
range; the epilogue kernels sit in a range nested inside a t2 range. Each test skips (with the
reason) while its fixture file has not been recorded.
"""

from pathlib import Path

import pytest

from zincbench.errors import InputError
from zincbench.profile import nsys
from zincbench.profile.categories import load_rules
from zincbench.profile.parse import NO_RANGE, parse_file

FIXTURES = Path(__file__).parent / "fixtures" / "profile"
REPS = 3  # capture.py
NORM_RANGE = "t2/norm_swiglu/T64-D1024"
GATHER_RANGE = "t2/gather_template/T64-D1024"
GEMM_RANGE = "t2/cublas_f16/M256-N64-K1024"


def fixture(name: str) -> Path:
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(
            f"{name} not recorded yet: run `bash tests/fixtures/profile/capture.sh OUT` on a GPU host "
            "and copy OUT's files here"
        )
    return path


@pytest.fixture(scope="module")
def rules():
    return load_rules()


def kernel_named(tables, fragment: str):
    rows = tables.kernels[tables.kernels["name"].str.contains(fragment, regex=False)]
    assert len(rows) == 1, f"expected one kernel containing {fragment!r}, got {list(rows['name'])}"
    return rows.iloc[0]


def check_workload_kernels(tables):
    assert (tables.kernels["calls"] > 0).all() and (tables.kernels["total_ns"] > 0).all()
    assert tables.kernels["share"].sum() == pytest.approx(1.0)
    assert tables.categories["share"].sum() == pytest.approx(1.0)
    assert kernel_named(tables, "rms_norm_f32")["calls"] == REPS
    assert kernel_named(tables, "rms_norm_f32")["category"] == "norm"
    gather = kernel_named(tables, "gather_rows<float,")  # a template name with commas survived the CSV
    assert gather["calls"] == REPS and gather["category"] == "moe-routing"
    assert kernel_named(tables, "swiglu_f32")["category"] == "elementwise"
    gemm = tables.kernels[tables.kernels["category"] == "gemm"]
    assert gemm["calls"].sum() >= REPS, f"no cuBLAS GEMM kernel recognized among {list(tables.kernels['name'])}"
    assert {"norm", "moe-routing", "elementwise", "gemm"} <= set(tables.categories["category"])


def test_nsys_stats_csvs(rules):
    tables = parse_file(fixture("nsys_run_cuda_gpu_kern_sum.csv"), rules)
    check_workload_kernels(tables)
    ranges = set(tables.ranges["range"])
    assert {NORM_RANGE, GATHER_RANGE, GEMM_RANGE, "fixture", "se_range", "fixture_domain:dom_range"} <= ranges


def test_nsys_sqlite_matches_the_stats_report_of_the_same_run(rules):
    from_sqlite = parse_file(fixture("nsys_run.sqlite"), rules)
    check_workload_kernels(from_sqlite)
    report = nsys.read_stats_csv(fixture("nsys_run_cuda_gpu_kern_sum.csv")).table
    ours = from_sqlite.kernels[~from_sqlite.kernels["name"].str.startswith("[CUDA ")]
    merged = ours.merge(report, on="name", suffixes=("", "_nsys"), how="outer", indicator=True)
    assert (merged["_merge"] == "both").all(), merged[merged["_merge"] != "both"]["name"].tolist()
    assert (merged["calls"] == merged["calls_nsys"]).all()
    assert (merged["total_ns"] == merged["total_ns_nsys"]).all()
    assert merged["median_ns"].tolist() == pytest.approx(merged["median_ns_nsys"].tolist(), abs=0.5)


def test_nsys_sqlite_innermost_range_attribution(rules):
    tables = parse_file(fixture("nsys_run.sqlite"), rules)
    launches = tables.launches
    by_kernel = {name: set(group["range"].fillna(NO_RANGE)) for name, group in launches.groupby("name")}
    norm = next(n for n in by_kernel if "rms_norm_f32" in n)
    gather = next(n for n in by_kernel if "gather_rows<float," in n)
    assert by_kernel[norm] == {NORM_RANGE}
    assert by_kernel[gather] == {GATHER_RANGE}
    gemm_ranges = set().union(*(by_kernel[n] for n in tables.kernels.query("category == 'gemm'")["name"]))
    assert gemm_ranges == {GEMM_RANGE}
    ranges = set(tables.ranges["range"])
    assert {"epilogue", "se_range", "fixture_domain:dom_range", NO_RANGE} <= ranges  # nested, start/end, domain, none
    memops = tables.kernels[tables.kernels["category"] == "memcpy/memset"]
    assert len(memops) >= 2, "expected host-to-device and device-to-host copies (and a memset)"
    assert "EXPORT_SCHEMA_VERSION" in tables.metadata


def test_nvtx_kern_sum_agrees_on_leaf_ranges(rules):
    """nvtx_kern_sum counts a kernel in every enclosing range; for a range without children it must match ours."""
    stats = nsys.read_stats_csv(fixture("nsys_run_nvtx_kern_sum.csv")).table
    ours = parse_file(fixture("nsys_run.sqlite"), rules).ranges.set_index("range")
    for leaf in (NORM_RANGE, GATHER_RANGE):
        rows = stats[stats["range"] == leaf]
        assert rows["calls"].sum() == ours.loc[leaf, "calls"]
        assert rows["total_ns"].sum() == ours.loc[leaf, "total_ns"]


def test_nsys_memory_operations_named_as_nsys_stats_names_them(rules):
    ours = parse_file(fixture("nsys_run.sqlite"), rules).kernels.set_index("name")
    report = nsys.read_stats_csv(fixture("nsys_run_cuda_gpu_mem_time_sum.csv")).table
    assert len(report) >= 2
    for row in report.itertuples():
        assert ours.loc[row.name, "calls"] == row.calls and ours.loc[row.name, "total_ns"] == row.total_ns


def test_stale_sqlite_refusal_names_the_fix(rules):
    with pytest.raises(InputError, match="--force-export=true"):
        parse_file(fixture("nsys_stats_stale_sqlite.txt"), rules)


def test_empty_stats_reports_of_a_run_without_kernels(rules):
    tables = parse_file(fixture("nsys_empty_cuda_gpu_kern_sum.csv"), rules)
    assert tables.kernels.empty and tables.ranges.empty
    assert any("empty report" in note for note in tables.notes)


def test_nsys_console_output_parses_like_the_file(rules):
    console = parse_file(fixture("nsys_stats_console.txt"), rules)
    from_file = nsys.read_stats_csv(fixture("nsys_run_cuda_gpu_kern_sum.csv")).table
    assert sorted(console.kernels["name"]) == sorted(from_file["name"])


def test_nsys_help_reports_lists_the_reports_we_ask_for():
    chosen = nsys.choose_reports(fixture("nsys_help_reports.txt").read_text())
    assert chosen == {name: name for name in nsys.STATS_REPORTS}


def test_nsys_run_without_cuda_work(rules):
    stdout = parse_file(fixture("nsys_empty_stats_stdout.txt"), rules)
    assert stdout.kernels.empty
    assert any(note.startswith("SKIPPED:") for note in stdout.notes)
    export = parse_file(fixture("nsys_empty.sqlite"), rules)
    assert export.kernels.empty and export.categories.empty


def test_ncu_raw_csv_with_nvtx(rules):
    tables = parse_file(fixture("ncu_raw_nvtx.csv"), rules)
    check_workload_kernels(tables)
    assert tables.has_dram_bytes
    assert (tables.kernels["dram_read_bytes"].fillna(0) >= 0).all()
    assert tables.kernels["dram_read_bytes"].sum() > 0
    launches = tables.launches
    norm_ranges = set(launches[launches["name"].str.contains("rms_norm_f32")]["range"])
    assert norm_ranges == {NORM_RANGE}, "innermost push/pop range of an ncu --nvtx cell"
    epilogue = set(launches[launches["range"] == "epilogue"]["name"])
    assert epilogue, "kernels of the nested 'epilogue' range"
    assert launches["range"].isna().any(), "the warm-up kernel runs outside every range"


def test_ncu_and_nsys_attribute_the_same_launches_to_the_same_ranges(rules):
    """Two tools, two attribution mechanisms (ncu's NVTX stack per launch, our SQLite containment rule)."""
    by_nsys = parse_file(fixture("nsys_run.sqlite"), rules).launches
    by_ncu = parse_file(fixture("ncu_raw_nvtx.csv"), rules).launches
    kernels_only = by_nsys[~by_nsys["name"].str.startswith("[CUDA ")]

    def counts(launches):
        return launches.assign(range=launches["range"].fillna(NO_RANGE)).groupby(["range", "name"]).size().sort_index()

    assert counts(kernels_only).equals(counts(by_ncu))


def test_ncu_nvtx_include_keeps_only_launches_inside_the_range(rules):
    every = parse_file(fixture("ncu_raw_nvtx.csv"), rules).launches
    included = parse_file(fixture("ncu_raw_nvtx_include.csv"), rules).launches
    # "fixture/" selects every launch under the outer push/pop range, nested ranges included: all but the warm-up.
    assert len(included) == every["range"].notna().sum() < len(every)
    assert included["range"].notna().all()
