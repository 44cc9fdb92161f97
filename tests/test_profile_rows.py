"""Profile rows (zincbench.profile.rows): every table the parsers make from the real nsys/ncu outputs in
tests/fixtures/profile becomes typed rows that write the columns the table had, in its order, and read
back to the same JSON; a row of another shape is an error naming what is wrong."""

import re
from pathlib import Path

import pytest

from zincbench import records
from zincbench.profile import ToolRun, result_rows
from zincbench.profile.categories import load_rules
from zincbench.profile.parse import frame_records, parse_file
from zincbench.profile.rows import ABSENT, KernelRow, ProfileRow, RangeRow, TrafficRow

REFUSED = {"nsys_help_reports.txt", "nsys_stats_stale_sqlite.txt", "versions.txt"}  # fixtures of refusals
FIXTURES = sorted(
    p
    for p in (Path(__file__).parent / "fixtures" / "profile").iterdir()
    if p.suffix in (".csv", ".sqlite", ".txt") and p.name not in REFUSED
)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_rows_of_real_profiles_have_the_tables_columns_and_read_back(path):
    tables = parse_file(path, load_rules())
    tool = "ncu" if path.name.startswith(("ncu", "edge_ncu")) else "nsys"
    rows = result_rows([ToolRun(tool, tables, {}, 0, None)])
    written = records.to_jsonable(rows)
    for table, frame in (("category", tables.categories), ("kernel", tables.kernels), ("range", tables.ranges)):
        assert [r for r in written if r["table"] == table] == [
            {"tool": tool, "table": table, **r} for r in records.to_jsonable(frame_records(frame))
        ]
    assert records.to_jsonable([ProfileRow.from_json(r) for r in written]) == written


def test_a_column_the_table_lacked_is_left_out_but_a_missing_value_is_null():
    row = KernelRow(
        tool="ncu",
        name="k",
        category="gemm",
        calls=1,
        total_ns=5.0,
        mean_ns=5.0,
        median_ns=5.0,
        share=1.0,
        dram_read_bytes=None,
        dram_write_bytes=ABSENT,
    )
    assert row.to_json()["dram_read_bytes"] is None and "dram_write_bytes" not in row.to_json()
    assert list(RangeRow(tool="nsys", range="r", instances=2).to_json()) == ["tool", "table", "range", "instances"]


def test_a_traffic_row_reads_back():
    row = TrafficRow(
        tool="ncu",
        range="t2/a/s",
        variant="a",
        shape="s",
        kernels=1,
        launches=4,
        invocations=4,
        measured_bytes=10.0,
        model_bytes=8.0,
        measured_over_model=1.25,
    )
    assert ProfileRow.from_json(row.to_json()) == row


@pytest.mark.parametrize(
    "obj, message",
    [
        ({"tool": "ncu", "table": "launch"}, "table must be one of category, kernel, range, traffic, got 'launch'"),
        ({"tool": "nsys", "table": "range", "range": "r", "bogus": 1}, "range row has unknown key(s) bogus"),
    ],
)
def test_a_row_of_another_shape_is_a_value_error_naming_it(obj, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ProfileRow.from_json(obj)


def test_a_missing_column_is_a_type_error():
    with pytest.raises(TypeError, match="category"):
        ProfileRow.from_json({"tool": "nsys", "table": "category", "kernels": 1, "calls": 1, "total_ns": 1, "share": 1})
