"""nsys stats CSV and ncu CSV parsers on the hand-made edge_* fixtures (see tests/fixtures/profile/README.md)."""

import math
from pathlib import Path

import pytest

from zincbench.errors import InputError
from zincbench.profile import ncu, nsys
from zincbench.profile.categories import load_rules
from zincbench.profile.parse import NO_RANGE, detect_format, parse_file, traffic_comparison

FIXTURES = Path(__file__).parent / "fixtures" / "profile"
ADD_KERNEL = (
    "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctorOnSelf_add<float>, "
    "std::array<char *, (unsigned long)2>>(int, T2, T3)"
)


@pytest.fixture(scope="module")
def rules():
    return load_rules()


def test_kern_sum_with_quoted_template_names(rules):
    tables = parse_file(FIXTURES / "edge_run_cuda_gpu_kern_sum.csv", rules)
    assert tables.format == "nsys-stats-csv"
    kernels = tables.kernels.set_index("name")
    assert kernels.loc[ADD_KERNEL, "calls"] == 4
    assert kernels.loc[ADD_KERNEL, "median_ns"] == 2000.0
    assert (
        kernels.loc["void gather_rows<float, (int)4>(const float *, const int *, float *, int, int)", "category"]
        == "moe-routing"
    )
    assert list(tables.kernels["total_ns"]) == sorted(tables.kernels["total_ns"], reverse=True)
    assert tables.kernels["share"].sum() == pytest.approx(1.0)
    # 16608 of 35552 ns: the share is recomputed from totals, not copied from the rounded Time (%) column.
    assert kernels.loc["nvjet_sm90_hsh_128x64_64x8_1x2_h_bz_NNT", "share"] == pytest.approx(16608 / 35552)


def test_sibling_reports_give_ranges_and_cpu_time(rules):
    tables = parse_file(FIXTURES / "edge_run_cuda_gpu_kern_sum.csv", rules)
    ranges = tables.ranges.set_index("range")
    assert set(ranges.index) == {"step", "mydomain:dom_range"}  # the default domain's leading ':' is stripped
    assert ranges.loc["step", "calls"] == 7 and ranges.loc["step", "kernels"] == 2
    assert ranges.loc["step", "total_ns"] == 24608
    assert ranges.loc["step", "instances"] == 3 and ranges.loc["step", "range_total_ns"] == 1362607
    # Starting from another report of the same run gives the same tables.
    other = parse_file(FIXTURES / "edge_run_nvtx_kern_sum.csv", rules)
    assert other.kernels.equals(tables.kernels) and other.ranges.equals(tables.ranges)


def test_console_output_with_preamble(rules):
    tables = parse_file(FIXTURES / "edge_console_stats.txt", rules)
    assert list(tables.kernels["name"]) == ["rms_norm_f32", "nvjet_sm90_hsh_128x64_64x8_1x2_h_bz_NNT"]
    assert list(tables.categories["category"]) == ["norm", "gemm"]


def test_header_on_the_processing_line_parses(tmp_path):
    text = (FIXTURES / "edge_console_stats.txt").read_text().replace("... \nTime (%)", "... Time (%)")
    (tmp_path / "console.txt").write_text(text)
    report = nsys.read_stats_csv(tmp_path / "console.txt")
    assert report.kind == "kern_sum" and len(report.table) == 2


def test_skipped_report_is_empty_with_a_note(rules):
    tables = parse_file(FIXTURES / "edge_skipped_stats.txt", rules)
    assert tables.kernels.empty and tables.categories.empty
    assert tables.notes == ["SKIPPED: /tmp/empty.sqlite does not contain CUDA kernel data."]


def test_old_report_without_median(rules):
    tables = parse_file(FIXTURES / "edge_old_gpukernsum.csv", rules)
    kernels = tables.kernels.set_index("name")
    assert kernels.loc["dequant_q4k_to_f16", "mean_ns"] == 3500.0
    assert math.isnan(kernels.loc["dequant_q4k_to_f16", "median_ns"])
    assert kernels.loc["dmmv_q4k_experts_batched", "category"] == "matvec"


def test_time_unit_suffix_is_converted_to_ns(rules):
    kernels = parse_file(FIXTURES / "edge_timeunit_us_kern_sum.csv", rules).kernels
    assert kernels.loc[0, "total_ns"] == pytest.approx(12500.0)
    assert kernels.loc[0, "median_ns"] == pytest.approx(2400.0)


def test_choose_reports_prefers_current_names():
    assert nsys.choose_reports("  cuda_gpu_kern_sum[:nvtx-name] -- CUDA GPU Kernel Summary\n  nvtx_sum -- x\n") == {
        "cuda_gpu_kern_sum": "cuda_gpu_kern_sum",
        "nvtx_sum": "nvtx_sum",
    }
    assert nsys.choose_reports("gpukernsum -- GPU Kernel Summary\nnvtxkernsum\n") == {
        "cuda_gpu_kern_sum": "gpukernsum",
        "nvtx_kern_sum": "nvtxkernsum",
    }


def test_ncu_raw_csv(rules):
    tables = parse_file(FIXTURES / "edge_ncu_raw.csv", rules)
    assert tables.format == "ncu-csv"
    kernels = tables.kernels.set_index("name")
    matvec = kernels.loc["dmmv_q4k_experts_batched"]
    assert matvec["calls"] == 2 and matvec["total_ns"] == 6176 + 6240  # "6,176": thousands separators
    assert matvec["dram_read_bytes"] == 4_000_000
    gather = kernels.loc["void gather_tokens<__half, 8>(const float *, const int *, __half *, int, int)"]
    assert gather["dram_read_bytes"] == pytest.approx(87573.33)
    assert math.isnan(kernels.loc["cupy_copy__float32_float16", "dram_read_bytes"])  # n/a stays unknown, not 0
    ranges = tables.ranges.set_index("range")
    assert ranges.loc["t2/grouped/E256-M512-Ne16", "calls"] == 2  # innermost of a two-deep push/pop stack
    assert ranges.loc["se_range", "calls"] == 1  # start/end range when no push/pop range is open
    assert ranges.loc[NO_RANGE, "calls"] == 1
    assert "t2" not in ranges.index


def test_ncu_details_page_is_pivoted_with_units(rules):
    kernels = parse_file(FIXTURES / "edge_ncu_details.csv", rules).kernels.set_index("name")
    assert kernels.loc["dequant_q4k_to_f16", "total_ns"] == pytest.approx(4580.0)  # 4.58 us
    assert kernels.loc["dequant_q4k_to_f16", "dram_write_bytes"] == pytest.approx(5.24e6)  # Mbyte
    assert kernels.loc["void k<float, 2>(float *, int)", "dram_read_bytes"] == 2048


def test_ncu_log_without_kernels(rules):
    tables = parse_file(FIXTURES / "edge_ncu_no_kernels.csv", rules)
    assert tables.kernels.empty and tables.ranges.empty
    assert "ncu profiled no kernels" in tables.notes[0]


def _wide_raw_export(path: Path, copies: int, extra_columns: int) -> None:
    """edge_ncu_raw.csv's launches ``copies`` times over (fresh IDs), each row widened by ``extra_columns``
    metrics nobody reads, as ``ncu --set full`` writes them."""
    import csv
    import io

    lines = (FIXTURES / "edge_ncu_raw.csv").read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if '"Kernel Name"' in line)
    header, units, *launches = csv.reader(lines[start:])
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(header + [f"sm__extra_{k}.sum" for k in range(extra_columns)])
    writer.writerow(units + ["byte"] * extra_columns)
    with path.open("w") as fh:
        fh.write("".join(lines[:start]) + out.getvalue())
        for copy in range(copies):
            out = io.StringIO()
            writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
            for row in launches:
                writer.writerow([str(copy * len(launches) + int(row[0])), *row[1:], *["1,234,567"] * extra_columns])
            fh.write(out.getvalue())


def test_ncu_csv_is_read_row_by_row_keeping_only_the_columns_used(tmp_path, rules):
    """A wide export is parsed in memory for its launches, not its text: the old read-it-whole parser
    peaked at several times the file's size here."""
    import tracemalloc

    copies = 400
    path = tmp_path / "wide.csv"
    _wide_raw_export(path, copies, extra_columns=300)
    tracemalloc.start()
    try:
        launches, notes = ncu.read_csv(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < path.stat().st_size / 2
    one = parse_file(FIXTURES / "edge_ncu_raw.csv", rules).kernels.set_index("name")
    many = parse_file(path, rules).kernels.set_index("name")
    assert (many["calls"] == one["calls"] * copies).all()
    assert many["total_ns"].to_numpy() == pytest.approx(one["total_ns"].to_numpy() * copies)
    assert len(launches) == len(ncu.read_csv(FIXTURES / "edge_ncu_raw.csv")[0]) * copies and not notes


def test_a_line_past_the_bound_is_an_input_error_not_a_held_string(tmp_path):
    from zincbench.inputs import read_lines

    path = tmp_path / "one_line.csv"
    path.write_text("short\r\n" + "x" * 10 + "\n" + "x" * 11 + "\n")
    lines = read_lines(path, "ncu CSV", max_line_chars=10)
    assert next(lines) == "short" and next(lines) == "x" * 10  # a line at the bound comes whole, without its end
    with pytest.raises(InputError, match="longer than 10 characters"):
        next(lines)


@pytest.mark.parametrize(
    "cell, start_end, expected",
    [
        ('6393  "<default domain>:step:Int64:0:RGB:0xff0000:REGISTERED:step" ', False, "step"),
        (
            '6393  "<default domain>:a:none:none:none:none:REGISTERED:a" "dom:b:none:none:none:none:REGISTERED:b"',
            False,
            "dom:b",
        ),
        ('1  "<default domain>:x:y:none:none:none:none:REGISTERED:x:y"', False, "x:y"),  # ':' inside the name
        ("0:<default domain>:se_range:none:none:RGB:0xff:REGISTERED:se_range", True, "se_range"),
        ("6393", False, None),
        ("", True, None),
    ],
)
def test_range_from_nvtx_cell(cell, start_end, expected):
    assert ncu.range_from_nvtx_cell(cell, start_end) == expected


def test_ncu_number():
    assert ncu.number("1,980,000") == 1980000
    assert ncu.number(" 87,573.33 ") == pytest.approx(87573.33)
    assert math.isnan(ncu.number("n/a")) and math.isnan(ncu.number(""))


def test_traffic_comparison_per_invocation(rules):
    tables = parse_file(FIXTURES / "edge_ncu_raw.csv", rules)
    results = [
        {"variant": "matvec", "case": "E256-M512-Ne16", "traffic": {"bytes_model": 1_000_000}},
        {"variant": "grouped", "shape": "E256-M512-Ne16", "traffic.bytes_model": 1_565_741.33},
        {"variant": "unprofiled", "case": "E256-M512-Ne16", "traffic": {"bytes_model": 5}},
    ]
    table = traffic_comparison(tables.launches, results).set_index("variant")
    assert set(table.index) == {"matvec", "grouped"}
    assert table.loc["matvec", "invocations"] == 2
    assert table.loc["matvec", "measured_bytes"] == pytest.approx(2_000_000)
    assert table.loc["matvec", "measured_over_model"] == pytest.approx(2.0)
    assert table.loc["grouped", "invocations"] == 1
    assert table.loc["grouped", "measured_over_model"] == pytest.approx(1.0)


def test_traffic_comparison_ignores_timer_launches():
    import pandas as pd

    # 5 invocations of a two-kernel variant plus one launch of a timer kernel in the same range.
    names = ["dequant"] * 5 + ["gemm"] * 5 + ["spin"]
    launches = pd.DataFrame(
        {
            "name": names,
            "duration_ns": 1.0,
            "range": "t2/v/c",
            "start_ns": range(11),
            "dram_read_bytes": 100.0,
            "dram_write_bytes": 0.0,
        }
    )
    table = traffic_comparison(launches, [{"variant": "v", "case": "c", "traffic": {"bytes_model": 200}}])
    assert table.loc[0, "invocations"] == 5
    assert table.loc[0, "measured_bytes"] == pytest.approx(1100 / 5)


@pytest.mark.parametrize(
    "name, message",
    [
        ("x.nsys-rep", "nsys export --type sqlite"),
        ("x.ncu-rep", "ncu --import"),
        ("x.qdstrm", "QdstrmImporter"),
    ],
)
def test_binary_reports_get_a_hint(tmp_path, name, message):
    path = tmp_path / name
    path.write_bytes(b"\0binary")
    with pytest.raises(InputError, match=message):
        detect_format(path)


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "empty file"),
        ("hello,world\n1,2\n", "not a recognized profiler output"),
    ],
)
def test_unrecognized_text(tmp_path, content, message):
    path = tmp_path / "x.csv"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        parse_file(path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        parse_file(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="directory"):
        parse_file(tmp_path)
