"""Structure-aware fuzzing: real inputs parsed, one field at a time given the wrong type, an absurd value
or removed, and written back in their own format, for every file format zincbench reads: results
documents, experiment/gate/catalog YAML, llama-bench (all five formats), nsys stats CSV, nsys SQLite
exports and ncu CSV. Garbled *text* is test_fuzz_parsers.py's job; here every input is well formed and
only its values lie. Each reader must give a result that keeps its invariants, or the project's own
InputError; and the CLI in front of it must answer with exit 0 or 2 and at most one line on stderr,
never a traceback, exit 1 or exit 5.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import math
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_bad_input import _ROWS
from test_fuzz_parsers import EXAMPLES, YAML_TEXTS, _loaders

from zincbench import records
from zincbench.errors import InputError
from zincbench.measure import llama_bench
from zincbench.show import stage_table, t3_view, t4_view

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "profile"
FUZZ = settings(max_examples=max(1, EXAMPLES // 3))

# Values a field may be given instead of its own: every JSON/YAML type, empty and absurd magnitudes.
ABSURD_NUMBERS = [0, -1, -1e300, 1e300, 10**400, 2**63, -(2**63), 1e-300, float("nan"), float("inf")]
scalars = (
    st.none()
    | st.booleans()
    | st.sampled_from(ABSURD_NUMBERS)
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=10)
    | st.sampled_from(["", "nan", "inf", "-5", "1e999", "9" * 400, "0.00", "t2", "faster"])
)
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)


DELETE = "<delete>"


@st.composite
def edits_of(draw, seeds: dict[str, object]) -> tuple[str, list[tuple[tuple, object]]]:
    """(seed name, edits): each edit is a path to one field anywhere in the parsed tree and its new value
    (or DELETE). Edits, not whole trees, are what a failing example prints."""
    name = draw(st.sampled_from(sorted(seeds)))
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        path, node = (), seeds[name]
        while isinstance(node, (dict, list)) and node and (not path or draw(st.integers(0, 3)) > 0):
            key = draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
            path, node = (*path, key), node[key]
        if path:
            edits.append((path, DELETE if isinstance(path[-1], str) and draw(st.integers(0, 4)) == 0 else draw(values)))
    return name, edits


def edited(seeds: dict[str, object], name: str, edits) -> object:
    """A fresh copy of the seed with the edits applied (a path an earlier edit removed is skipped)."""
    tree = json.loads(json.dumps(seeds[name]))
    for path, value in edits:
        parent = tree
        try:
            for key in path[:-1]:
                parent = parent[key]
            if value == DELETE:
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    return tree


@pytest.fixture(scope="module")
def scratch():
    directory = Path(tempfile.mkdtemp(prefix="zincbench-fuzz-docs-"))
    yield directory
    shutil.rmtree(directory)


def run_cli(*args) -> tuple[int, str]:
    """``zincbench ARGS`` in this process: (exit code, stderr)."""
    from zincbench.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return exc.value.code, err.getvalue()


def assert_clean_answer(code: int, stderr: str, allowed=(0, 2)) -> None:
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert code in allowed, (code, stderr)
    lines = stderr.splitlines()
    assert code in (0, 6) or (len(lines) == 1 and lines[0].startswith("zincbench: error: ")), stderr  # 6: a verdict


# --- results documents ---------------------------------------------------------------------------------

DOCUMENTS = {
    p.name: json.loads(p.read_text())
    for p in [
        *sorted((ROOT / "results" / "h200").glob("microbench-20261129T134040-*.json")),
        # families with tables after the common one (report --family-tables): t4's and t3's views, layer's stages
        ROOT / "results" / "h200" / "t4" / "microbench-20261202T003114-63cf59ef.json",
        *sorted((ROOT / "results" / "h200" / "t3").glob("microbench-*.json")),
        ROOT / "results" / "h200" / "layer" / "microbench-20261201T232924-f3c1f172.json",
        *sorted((ROOT / "results" / "h200").glob("gate-*.json")),
        *sorted((ROOT / "results" / "cpu").glob("validate-*.json")),
        *sorted((ROOT / "results" / "references").glob("*.json")),
    ]
}


MICROBENCH = next(name for name in DOCUMENTS if name.startswith("microbench"))
FAMILY_RUNS = {
    doc["config"]["family"]: name
    for name, doc in DOCUMENTS.items()
    if doc["kind"] == "microbench" and doc["config"]["family"] in ("t3", "t4", "layer")
}
T4, T3, LAYER = FAMILY_RUNS["t4"], FAMILY_RUNS["t3"], FAMILY_RUNS["layer"]
LAYER_STAGES = next(i for i, r in enumerate(DOCUMENTS[LAYER]["results"]) if (r.get("detail") or {}).get("stages_us"))


def show_report(path) -> None:
    """report's views of one document: markdown, JSON, the terminal (wide, and 80 columns for the narrow
    layouts), with the family tables after the merged ones; InputError is the one failure allowed."""
    from rich.console import Console

    from zincbench import report
    from zincbench.show import report_tables

    merged = report.build_report([path])
    report_tables.to_markdown(merged)
    report.to_dict(merged)
    report_tables.print_report(merged, Console(file=io.StringIO(), width=200))
    report_tables.to_markdown(merged, family_tables=True)
    report_tables.print_report(merged, Console(file=io.StringIO(), width=80), family_tables=True)


@FUZZ
@given(case=edits_of(DOCUMENTS))
@example(case=(MICROBENCH, [(("schema_version",), "1")]))
@example(case=(MICROBENCH, [(("schema_version",), None)]))
@example(case=(MICROBENCH, [(("results",), {"case": "x"})]))
@example(case=(MICROBENCH, [(("results", 0, "case"), DELETE)]))
@example(case=(MICROBENCH, [(("results", 0, "case"), ["E1"])]))
@example(case=(MICROBENCH, [(("results", 0, "summary", "median_us"), 10**400)]))  # OverflowError in format
@example(case=(T4, [(("results", 0, "params", "tokens"), "512")]))
@example(case=(T4, [(("results", 0, "params", "model"), DELETE)]))
@example(case=(T4, [(("results", 0, "params", "model"), "[/]")]))  # rich markup in a name
@example(case=(T4, [(("results", 0, "detail", "bits"), [])]))
@example(case=(T4, [(("results", 0, "summary", "median_us"), 0)]))  # a prefill of no time
@example(case=(T4, [(("environment", "gpu", "name"), None)]))
@example(case=(T4, [(("environment", "gpu", "name"), "RTX 4090")]))  # its llama.cpp table: model -> T -> tok/s
@example(case=(T4, [(("config", "settings", "llama_cpp_pp_tps"), {"H200": {"qwen35-9b": {"9" * 5000: 1}}})]))
@example(case=(T4, [(("config", "family"), "t3")]))  # another family's view: the fields it reads are absent
@example(case=(T4, [(("config", "family"), "..")]))
@example(case=(T3, [(("results", 0, "params"), ["scan"])]))
@example(case=(T3, [(("results", 0, "summary", "median_us"), -1e300)]))
@example(case=(LAYER, [(("results", LAYER_STAGES, "detail", "stages_us", 0, "stage"), DELETE)]))
@example(case=(LAYER, [(("results", LAYER_STAGES, "params", "tokens"), DELETE)]))
@example(case=(LAYER, [(("results", LAYER_STAGES, "params", "shape"), DELETE)]))  # mixed None/str sort keys
@example(case=(LAYER, [(("results", LAYER_STAGES, "floor", "pct_of_floor"), "34")]))
@example(case=(LAYER, [(("environment", "gpu", "name"), "RTX 4090"), (("config", "settings"), [])]))
def test_results_documents(scratch, case):
    """report (all its views, the family tables too) and the gate's re-judging of a recorded document."""
    from zincbench.runs.gate import rejudge_document

    name, edits = case
    path = scratch / name
    path.write_text(json.dumps(edited(DOCUMENTS, name, edits)))
    try:
        show_report(path)
    except InputError:
        pass
    try:
        data = records.read(path)
    except InputError:
        return
    try:
        rejudge_document(data, name)
    except InputError:
        pass


@FUZZ
@given(data=st.data())
def test_ab_documents(scratch, ab_document, data):
    """A real two-arm A/B document (tests/conftest.py) with edited fields, through report's scoreboard."""
    from rich.console import Console

    from zincbench import report
    from zincbench.show import report_tables

    seeds = {"ab.json": json.loads(Path(ab_document).read_text())}
    name, edits = data.draw(edits_of(seeds))
    path = scratch / name
    path.write_text(json.dumps(edited(seeds, name, edits)))
    try:
        merged = report.build_report([path])
    except InputError:
        return
    report_tables.to_markdown(merged)
    report_tables.print_report(merged, Console(file=io.StringIO(), width=200))


GZIPPED = gzip.compress(json.dumps(DOCUMENTS[MICROBENCH]).encode(), mtime=0)


@FUZZ
@given(
    edits=st.lists(st.tuples(st.integers(0, len(GZIPPED) - 1), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, len(GZIPPED)),
)
@example(edits=[], cut=len(GZIPPED))  # intact: the document itself
@example(edits=[(3, 0x1F)], cut=len(GZIPPED))  # FLG bits of header fields that are absent
def test_gzipped_documents_with_flipped_or_missing_bytes(scratch, edits, cut):
    """A committed *.json.gz damaged in transit: one InputError (the gzip CRC catches a changed payload byte), or a
    document (a changed header byte: mtime, OS); the intact file is the document; never another exception."""
    data = bytearray(GZIPPED[:cut])
    for at, value in edits:
        if at < len(data):
            data[at] = value
    path = scratch / "doc.json.gz"
    path.write_bytes(bytes(data))
    try:
        doc = records.read(path)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    if cut == len(GZIPPED) and all(GZIPPED[at] == value for at, value in edits):
        assert doc == DOCUMENTS[MICROBENCH]


def test_a_hundred_thousand_levels_of_json_are_one_line(scratch):
    path = scratch / "deeper.json"
    path.write_text('{"schema_version": 1, "kind": "microbench", "results": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(InputError, match="nested too deeply"):
        records.read(path)


@settings(max_examples=max(1, EXAMPLES // 15))
@given(case=edits_of(DOCUMENTS), family_tables=st.booleans())
def test_report_cli_on_documents(scratch, case, family_tables):
    name, edits = case
    path = scratch / f"cli-{name}"
    path.write_text(json.dumps(edited(DOCUMENTS, name, edits)))
    assert_clean_answer(*run_cli("report", path, "--markdown", *(["--family-tables"] if family_tables else [])))


# Where the family tables read a document: the fields their views declare (t4_view, t3_view, stage_table
# FIELDS), the llama.cpp table in the experiment's settings, and the row fields the common table reads too.
FAMILY_FIELDS = sorted(
    {
        *(path for view in (t3_view, t4_view, stage_table) for path in view.FIELDS),
        "config.family",
        "config.settings",
        "config.settings.llama_cpp_pp_tps.*",
        "config.settings.llama_cpp_pp_tps.*.*",
        "config.settings.llama_cpp_pp_tps.*.*.*",
        "environment.gpu.name",
        "results.*.case",
        "results.*.variant",
        "results.*.summary.median_us",
    }
)


@st.composite
def family_field_edits(draw) -> tuple[str, list[tuple[tuple, object]]]:
    """(seed, edits) of a t3/t4/layer run, each edit at a field the family tables read (``*``: a drawn row or
    key of the seed), to another value or removed: what blind edits reach too rarely."""
    name = draw(st.sampled_from([T4, T3, LAYER]))
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        path, node = (), DOCUMENTS[name]
        for key in draw(st.sampled_from(FAMILY_FIELDS)).split("."):
            if key == "*":
                if not isinstance(node, (dict, list)) or not node:
                    break
                key = draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
            path = (*path, key)
            node = node.get(key) if isinstance(node, dict) else node[key] if isinstance(node, list) else None
        value = draw(values | st.sampled_from([DELETE, 0, "[/]", "[bold]x", "x|y", "-T512"]))
        edits.append((path, DELETE if value == DELETE and isinstance(path[-1], str) else value))
    return name, edits


@FUZZ
@given(case=family_field_edits())
def test_family_tables_on_edited_fields(scratch, case):
    """report --family-tables of a t3/t4/layer run whose fields the views read lie: the tables, or InputError."""
    name, edits = case
    path = scratch / f"family-{name}"
    path.write_text(json.dumps(edited(DOCUMENTS, name, edits)))
    try:
        show_report(path)
    except InputError:
        pass


@settings(max_examples=max(1, EXAMPLES // 15))
@given(case=family_field_edits())
def test_report_cli_family_tables_on_edited_fields(scratch, case):
    name, edits = case
    path = scratch / f"cli-family-{name}"
    path.write_text(json.dumps(edited(DOCUMENTS, name, edits)))
    assert_clean_answer(*run_cli("report", path, "--family-tables"))


# --- YAML: experiments, gates, catalog, kernel categories, engine specs ------------------------------------

YAML_TREES = {name: yaml.safe_load(text) for name, text in YAML_TEXTS.items()}


@FUZZ
@given(case=edits_of(YAML_TREES))
@example(case=("t2_moe_expert.yaml", [(("zipf_s",), 10**400)]))  # OverflowError in float()
@example(case=("t2_moe_expert.yaml", [(("k",), 10**400)]))
def test_yaml_documents(scratch, case):
    """Every loader, given a valid file whose values lie: a config with its invariants, or a ConfigError.
    Rule values are range-checked at load, so a loaded gate rule is one the judge can use."""
    name, edits = case
    path = scratch / name
    path.write_text(yaml.safe_dump(edited(YAML_TREES, name, edits), allow_unicode=True))
    try:
        config = _loaders()[name](path)
    except InputError:
        return
    gate = getattr(config, "gate", None)
    if gate is not None:
        assert 0 <= gate.threshold < 1 and 0 < gate.confidence < 1


# --- llama-bench: the five formats, rows of any values -----------------------------------------------------

FIELDS = list(_ROWS[0])


@st.composite
def llama_bench_rows(draw) -> list[dict]:
    rows = [dict(r) for r in _ROWS]
    for _ in range(draw(st.integers(1, 3))):
        row = draw(st.sampled_from(rows))
        field = draw(st.sampled_from(FIELDS))
        row[field] = draw(scalars)
    return rows


def _sql_literal(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, float) and not math.isfinite(v):
        return "'" + str(v) + "'"
    return str(int(v) if isinstance(v, bool) else v)


def render(rows: list[dict], fmt: str) -> str:
    """The rows as llama-bench would print them in ``fmt`` (the markdown shows model, test and t/s)."""
    scalars_only = [k for k in FIELDS if not k.startswith("samples")]
    if fmt == "jsonl":
        return "".join(json.dumps(r) + "\n" for r in rows)
    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(scalars_only)
        writer.writerows([[r[k] for k in scalars_only] for r in rows])
        return out.getvalue()
    if fmt == "sql":
        return (
            "CREATE TABLE IF NOT EXISTS llama_bench (\n"
            + ",\n".join(f"  {k}" for k in scalars_only)
            + "\n);\n"
            + "".join(
                f"INSERT INTO llama_bench ({', '.join(scalars_only)}) VALUES "
                f"({', '.join(_sql_literal(r[k]) for k in scalars_only)});\n"
                for r in rows
            )
        )
    lines = ["| model | backend | test | t/s |", "| --- | --- | --: | --: |"]
    for r in rows:
        test = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
        lines.append(f"| {r['model_type']} | {r['backends']} | {test} | {r['avg_ts']} ± {r['stddev_ts']} |")
    return "\n".join(lines) + "\n\nbuild: 0c1e570 (5000)\n"


@FUZZ
@given(rows=llama_bench_rows(), fmt=st.sampled_from(llama_bench.FORMATS))
@example(rows=[{**_ROWS[0], "avg_ts": -7.2}], fmt="jsonl")
@example(rows=[{**_ROWS[0], "avg_ts": 0.0}], fmt="csv")
@example(rows=[{**_ROWS[0], "avg_ts": 1e300}], fmt="json")
@example(rows=[{**_ROWS[0], "n_prompt": 10**23}], fmt="jsonl")
@example(rows=[{**_ROWS[0], "avg_ts": int("9" * 400)}], fmt="json")
@example(rows=[{**_ROWS[0], "samples_ts": [9142.8, 0.0]}], fmt="jsonl")
def test_llama_bench_rows_keep_their_invariants(rows, fmt):
    """A parsed row is a real measurement: a finite rate above zero and below any engine's, sane token counts."""
    try:
        parsed = llama_bench.parse(render(rows, fmt), source=f"fuzz.{fmt}", fmt=fmt)
    except InputError:
        return
    for row in parsed:
        assert 0 < row.avg_ts < llama_bench.MAX_TOKENS_PER_S
        assert 0 < row.n_prompt + row.n_gen and max(row.n_prompt, row.n_gen, row.n_depth) <= llama_bench.MAX_TOKENS
        assert row.stddev_ts is None or row.stddev_ts >= 0
        assert all(0 < s < llama_bench.MAX_TOKENS_PER_S for s in row.samples_ts or ())


@settings(max_examples=max(1, EXAMPLES // 15))
@given(rows=llama_bench_rows(), fmt=st.sampled_from(llama_bench.FORMATS))
def test_llamabench_cli_on_rows(scratch, rows, fmt):
    path = scratch / f"rows.{fmt}"
    path.write_text(render(rows, fmt))
    assert_clean_answer(*run_cli("llamabench", "show", path, "--json"))


# --- profiler outputs: nsys stats CSV, ncu CSV, nsys SQLite -------------------------------------------------

CSV_FIXTURES = sorted(FIXTURES.glob("nsys_run_*.csv")) + sorted(FIXTURES.glob("ncu_raw_*.csv"))


@st.composite
def profiler_csvs(draw) -> tuple[str, str]:
    """A real nsys stats / ncu CSV with a few cells (header cells included) replaced."""
    source = draw(st.sampled_from(CSV_FIXTURES))
    lines = source.read_text().splitlines(keepends=True)
    preamble = [line for line in lines if line.startswith("==")]
    rows = list(csv.reader(line for line in lines if not line.startswith("==")))
    for _ in range(draw(st.integers(1, 4))):
        r = draw(st.integers(0, len(rows) - 1))
        if rows[r]:
            c = draw(st.integers(0, len(rows[r]) - 1))
            value = draw(scalars)
            rows[r][c] = "" if value is None else str(value)
    out = io.StringIO()
    csv.writer(
        out, quoting=csv.QUOTE_ALL if "ncu" in source.name else csv.QUOTE_MINIMAL, lineterminator="\n"
    ).writerows(rows)
    return source.name, "".join(preamble) + out.getvalue()


def _assert_tables_sane(tables) -> None:
    for frame in (tables.kernels, tables.ranges, tables.categories):
        for column in ("calls", "total_ns"):
            if column in frame and len(frame):
                numbers = frame[column].astype(float)
                assert (numbers.isna() | ((numbers >= 0) & (numbers < math.inf))).all(), frame[column]


@FUZZ
@given(case=profiler_csvs())
def test_profiler_csvs(scratch, case):
    from zincbench.profile.parse import parse_file

    name, text = case
    folder = scratch / "csv"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    try:
        tables = parse_file(folder / name)
    except InputError:
        return
    _assert_tables_sane(tables)


SQLITE_TABLES = [
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "NVTX_EVENTS",
    "StringIds",
    "ENUM_NSYS_EVENT_TYPE",
]


@st.composite
def sqlite_edits(draw) -> list[tuple[str, str, object, int]]:
    """UPDATEs of one column of a few rows (or all of them) of the tables the reader queries."""
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        table = draw(st.sampled_from(SQLITE_TABLES))
        value = draw(
            st.none()
            | st.text(max_size=6)
            | st.sampled_from([2**63 - 1, -(2**63), -1, 0, 1.5, b"\x00\xff"])
            | st.integers(-(10**12), 10**12)
        )
        edits.append((table, draw(st.integers(0, 30)), value, draw(st.integers(0, 4))))
    return edits


@FUZZ
@given(edits=sqlite_edits())
@example(edits=[("CUPTI_ACTIVITY_KIND_KERNEL", 0, "12ab", 0)])  # text timestamps (column 0: start)
@example(edits=[("NVTX_EVENTS", 7, None, 0)])  # NULL thread ids (column 7: globalTid)
@example(edits=[("StringIds", 1, b"\x00\xff", 0)])  # kernel names as blobs (column 1: value)
def test_nsys_sqlite_values(scratch, edits):
    """A real export whose columns hold what SQLite allows but nsys never writes: text, NULL, huge ints."""
    from zincbench.profile.parse import parse_file

    path = scratch / "edited.sqlite"
    shutil.copyfile(FIXTURES / "nsys_run.sqlite", path)
    con = sqlite3.connect(path)
    for table, column_pick, value, every in edits:
        columns = [row[1] for row in con.execute(f"PRAGMA table_info({table})")]
        if not columns:
            continue
        column = columns[column_pick % len(columns)]
        where = "" if every == 0 else f" WHERE rowid % {every + 1} = 0"
        with contextlib.suppress(sqlite3.IntegrityError):  # a NOT NULL column keeps its values
            con.execute(f'UPDATE {table} SET "{column}" = ?{where}', (value,))
    con.commit()
    con.close()
    try:
        tables = parse_file(path)
    except InputError:
        return
    _assert_tables_sane(tables)


@settings(max_examples=max(1, EXAMPLES // 15))
@given(case=profiler_csvs())
def test_profile_parse_cli(scratch, case):
    name, text = case
    folder = scratch / "cli-csv"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    assert_clean_answer(*run_cli("profile", "parse", folder / name, "--json"))


@settings(max_examples=max(1, EXAMPLES // 15))
@given(case=edits_of({name: tree for name, tree in YAML_TREES.items() if name.startswith("gates")}))
def test_gate_cli_on_gates_files(scratch, case):
    """A gates file whose values lie is bad input (2), a gate where some check ran (0) or one whose every check
    skipped here (6: nothing checked); never 1 or 5."""
    name, edits = case
    folder = scratch / "gates"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(edited(YAML_TREES, name, edits), allow_unicode=True))
    assert_clean_answer(*run_cli("gate", path, "--results-dir", scratch / "gate-results"), allowed=(0, 2, 6))
