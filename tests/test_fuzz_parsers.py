"""Hypothesis fuzzing of every parser of outside input: random text, and real outputs cut, spliced and
garbled, must give either a parsed result or the project's own error (InputError / ConfigError /
EngineFailure, which the CLI turns into one line and a documented exit code), never another exception.

Parsers: llama-bench (all five formats), the engines' line parsers (zinc main binary, cuda-dbg,
generic regex engines), the nsys/ncu readers, and the YAML loaders (experiments, catalog, gates,
engine specs, kernel categories).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from test_bad_input import LLAMA_BENCH_SAMPLES

from zincbench.config import EXPERIMENTS_DIR
from zincbench.engines import generic, zinc_dbg, zinc_main
from zincbench.errors import InputError
from zincbench.measure import llama_bench
from zincbench.measure.process import EngineFailure

FIXTURES = Path(__file__).parent / "fixtures"
# ZINCBENCH_FUZZ_EXAMPLES scales every fuzz test: the default keeps CI quick, a deeper run uses thousands.
# The hypothesis profile (tests/conftest.py) derandomizes CI; failing draws found since are kept below as
# explicit @example cases, so they run on every run whatever the draw.
EXAMPLES = int(os.environ.get("ZINCBENCH_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES)
FUZZ_FILES = settings(max_examples=max(1, EXAMPLES // 3))

# Fragments that break parsers in interesting ways: separators, quotes, numbers out of range, markers.
SPECIALS = [
    "\n",
    ",",
    "|",
    '"',
    "'",
    ";",
    "{",
    "}",
    "[",
    "]",
    ":",
    " ± ",
    "nan",
    "inf",
    "-1",
    "1e999",
    "0",
    "\x00",
    "\ufeff",
    "±",
    "—",
    "tok/s",
    "ms",
    "==PROF==",
    "ID",
    "Kernel Name",
    "INSERT INTO llama_bench",
    "PREFILL:",
    "GEN_IDS:",
    "TF_MATCH:",
    "${",
    "!!python/object",
    "&a",
    "*a",
    "- ",
    "? ",
]


@st.composite
def garbled(draw, originals: list[str]) -> str:
    """A real text after a few random cuts, deletions, insertions and line shuffles."""
    text = draw(st.sampled_from(originals))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["cut", "delete", "insert", "duplicate_line", "drop_line"]))
        if op == "cut":
            text = text[:i]
        elif op == "delete":
            text = text[:i] + text[draw(st.integers(i, min(len(text), i + 60))) :]
        elif op == "insert":
            text = text[:i] + draw(st.sampled_from(SPECIALS) | st.text(max_size=12)) + text[i:]
        else:
            lines = text.splitlines(keepends=True)
            if lines:
                j = draw(st.integers(0, len(lines) - 1))
                lines[j : j + 1] = [lines[j]] * 2 if op == "duplicate_line" else []
                text = "".join(lines)
    return text


def any_text(originals: list[str]):
    return garbled(originals) | st.text(max_size=300)


def _real_texts(pattern: str) -> list[str]:
    return [p.read_text(errors="replace") for p in sorted(FIXTURES.glob(pattern))]


def parsed_or_input_error(fn, *args):
    """``fn(*args)``, or None for the project's InputError; any other exception fails the test."""
    try:
        return fn(*args)
    except InputError:
        return None


@pytest.fixture(scope="module")
def scratch():
    directory = Path(tempfile.mkdtemp(prefix="zincbench-fuzz-"))
    yield directory
    shutil.rmtree(directory)


# --- llama-bench -----------------------------------------------------------------------------------------

LLAMA_BENCH_TEXTS = list(LLAMA_BENCH_SAMPLES.values()) + _real_texts("llama-bench/tiny*.*")


@FUZZ
@given(text=any_text(LLAMA_BENCH_TEXTS), fmt=st.sampled_from([None, *llama_bench.FORMATS]))
def test_llama_bench_parser(text, fmt):
    rows = parsed_or_input_error(lambda: llama_bench.parse(text, source="fuzz", fmt=fmt))
    if rows is not None:
        assert rows and all(r.n_prompt + r.n_gen > 0 for r in rows)


# --- engine output lines ---------------------------------------------------------------------------------

ENGINE_LOGS = [
    "info(forward): Prompt tokens (4): [1, 2, 3, 4]\n"
    "info(forward): Prefill complete: 41 tokens in 20.5 ms (2000.00 tok/s)\n"
    "info(forward): Generated 160 tokens in 1590.0 ms \u2014 100.00 tok/s (10.00 ms/tok)\n",
    "PROMPT_IDS:1,2,3\nPREFILL: 3 tokens in 0.002s = 1500.00 tok/s (skip=false batched=true)\n"
    "GEN_IDS:7,8,9,10\nDECODE: 3 tokens in 0.030s = 100.00 tok/s (correctness-first, sync-per-layer)\n",
    "TF_MATCH:11/12\n",
]


def _parsed_or_engine_failure(fn, *args):
    try:
        return fn(*args)
    except EngineFailure as exc:
        assert exc.reason == "garbage" and str(exc)
        return None


@FUZZ
@given(text=any_text(ENGINE_LOGS))
def test_zinc_main_throughput_line(text):
    result = _parsed_or_engine_failure(zinc_main.parse_throughput, text)
    if result is not None:
        assert result.prefill_tokens >= 0 and result.prefill_tps >= 0


@FUZZ
@given(text=any_text(ENGINE_LOGS), parser=st.sampled_from(["gen_ids", "tf_match", "throughput"]))
def test_cuda_dbg_lines(text, parser):
    fn = {
        "gen_ids": zinc_dbg.parse_gen_ids,
        "tf_match": zinc_dbg.parse_tf_match,
        "throughput": zinc_dbg.parse_throughput,
    }[parser]
    result = _parsed_or_engine_failure(fn, text)
    if parser == "tf_match" and result is not None:
        assert 0 <= result.match <= result.total


@FUZZ
@given(text=any_text(ENGINE_LOGS))
def test_generic_regex_parsers(text):
    _parsed_or_engine_failure(generic.parse_ids, text, zinc_dbg.PROMPT_IDS_RE, "prompt ids")
    _parsed_or_engine_failure(generic.parse_ratio, text, zinc_dbg.TF_MATCH_RE, "teacher-forced match")
    _parsed_or_engine_failure(generic.parse_rate, text, zinc_dbg.DECODE_RE, "decode rate")


# --- profiler outputs ------------------------------------------------------------------------------------

PROFILE_TEXT_FIXTURES = sorted(p for p in (FIXTURES / "profile").glob("*.csv")) + sorted(
    (FIXTURES / "profile").glob("edge_*stats.txt")
)


@st.composite
def profile_texts(draw) -> tuple[str, str]:
    """(fixture name, garbled text of that fixture)."""
    source = draw(st.sampled_from(PROFILE_TEXT_FIXTURES))
    return source.name, draw(any_text([source.read_text(errors="replace")]))


_KERN_SUM = "nsys_run_cuda_gpu_kern_sum.csv"
_KERN_SUM_ROW = "23.5,10080,3,3360.0,3360.0,3328,3392,32.0,nvjet_sm90_hsh_64x8_64x16_1x4_h_bz_NNT\n"


@FUZZ_FILES
@given(case=profile_texts())
# A draw CI once passed by luck: a newline inside a quoted header name hid the Total Time column (KeyError).
@example(
    case=(
        _KERN_SUM,
        'Time (%),"T\notal Time (ns)",Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n' + _KERN_SUM_ROW,
    )
)
@example(
    case=(_KERN_SUM, "Time (%),Tot,Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n" + _KERN_SUM_ROW)
)
@example(
    case=(
        _KERN_SUM,
        "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
        + _KERN_SUM_ROW.replace(",3,", ",1e999,"),
    )
)
@example(
    case=(
        _KERN_SUM,
        "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
        + _KERN_SUM_ROW.replace("10080", "9" * 400),
    )
)
@example(
    case=(
        _KERN_SUM,
        "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
        + _KERN_SUM_ROW.replace("nvjet", '"' + "x" * (2 << 20) + '"'),
    )
)
# A details page whose header was cut after "C": no Metric Value column, metrics left as text (TypeError).
@example(
    case=(
        "edge_ncu_details.csv",
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
        '"Block Size","Grid Size","Device","C\n"0","7001","python3.12","127.0.0.1","dequant_q4k_to_f16","1","7",'
        '"(256, 1, 1)","(512, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","us",'
        '"4.58"\n',
    )
)
# Details pages found by a differential run of the streaming reader against the old one: no Metric Unit
# column (KeyError), and a metric named like a key column (pandas: "cannot insert ID, already exists").
@example(
    case=(
        "edge_ncu_details.csv",
        '"ID","Kernel Name","Metric Name","Metric Value"\n"0","k","gpu__time_duration.sum","4.58"\n',
    )
)
@example(
    case=(
        "edge_ncu_details.csv",
        '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n"0","k","ID","","1"\n',
    )
)
def test_profile_text_parsers(scratch, case):
    """parse_file detects nsys stats CSV / ncu CSV from content; the file keeps its fixture's name so
    name-based report detection is exercised too. Parsed tables hold finite, non-negative numbers."""
    from zincbench.profile.parse import parse_file

    name, text = case
    folder = scratch / "text"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    path = folder / name
    path.write_text(text, errors="surrogateescape")
    tables = parsed_or_input_error(parse_file, path)
    if tables is not None:
        assert set(tables.kernels.columns) >= {"name", "category", "calls", "total_ns", "share"}
        for column in ("calls", "total_ns"):
            values = tables.kernels[column].astype(float)
            assert (values.isna() | ((values >= 0) & (values < float("inf")))).all()


@FUZZ_FILES
@given(data=st.data(), source=st.sampled_from(sorted((FIXTURES / "profile").glob("*.sqlite"))))
def test_nsys_sqlite_reader(scratch, data, source):
    """Byte-level damage to a real nsys SQLite export: flipped bytes and truncation."""
    from zincbench.profile.parse import parse_file

    blob = bytearray(source.read_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.one_of(st.none(), st.integers(0, len(blob))))
    path = scratch / "fuzz.sqlite"
    path.write_bytes(bytes(blob[:cut]))
    parsed_or_input_error(parse_file, path)


# --- YAML loaders ----------------------------------------------------------------------------------------

yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)


def _loaders():
    from zincbench.bench import load_family
    from zincbench.catalog import load_catalog
    from zincbench.profile.categories import load_rules
    from zincbench.runs.gate import load_gates

    return {
        "t2_moe_expert.yaml": load_family("t2").load,
        "t1_dense_gemm.yaml": load_family("t1").load,
        "catalog.yaml": load_catalog,
        "gates.yaml": load_gates,
        "gates_ci.yaml": load_gates,
        "kernel_categories.yaml": load_rules,
        "engine.yaml": generic.load_engine_spec,
    }


ENGINE_SPEC = generic.__doc__.split(
    "Example (every section optional; an absent one means the engine cannot do that)::"
)[1].split("Placeholders:")[0]
YAML_TEXTS = {
    name: (EXPERIMENTS_DIR / name).read_text()
    if name != "engine.yaml"
    else "\n".join(line[4:] for line in ENGINE_SPEC.splitlines())
    for name in _loaders()
}


@FUZZ_FILES
@given(data=st.data(), name=st.sampled_from(sorted(YAML_TEXTS)))
def test_yaml_loaders(scratch, data, name):
    """Garbled real files, and random YAML documents, against every loader."""
    import yaml

    if data.draw(st.booleans()):
        text = data.draw(garbled([YAML_TEXTS[name]]))
    else:
        value = data.draw(yaml_values)
        try:
            text = yaml.safe_dump(value)
        except yaml.YAMLError:
            assume(False)
    path = scratch / name
    path.write_text(text, errors="surrogateescape")
    try:
        _loaders()[name](path)
    except InputError:  # ConfigError included
        pass


def test_the_yaml_seeds_load_unchanged(scratch):
    """The fuzz seeds are valid, so a garbled seed is a near miss, not noise."""
    for name, text in YAML_TEXTS.items():
        path = scratch / name
        path.write_text(text)
        _loaders()[name](path)


# --- damaged inputs the fuzzing once found to escape as raw exceptions ------------------------------------


@pytest.mark.parametrize("damage", ["header row repeated", "column repeated", "column renamed"])
def test_nsys_stats_csv_with_a_damaged_header_is_an_input_error(scratch, damage):
    from zincbench.profile.parse import parse_file

    source = (
        FIXTURES
        / "profile"
        / ("nsys_run_nvtx_kern_sum.csv" if damage == "column renamed" else "nsys_run_cuda_gpu_kern_sum.csv")
    )
    text = source.read_text()
    lines = text.splitlines(keepends=True)
    if damage == "header row repeated":  # two console reports pasted without the blank line between them
        text = lines[0] + text
    elif damage == "column repeated":
        text = "".join(line.rstrip("\n") + "," + line.split(",")[3] + "\n" for line in lines)
    else:
        text = text.replace("Kern Inst", "Kernel Instances", 1)
    folder = scratch / "known"
    folder.mkdir(exist_ok=True)
    (folder / source.name).write_text(text)
    with pytest.raises(InputError):
        parse_file(folder / source.name)


def test_damaged_nsys_sqlite_export_is_an_input_error(scratch):
    from zincbench.profile import nsys

    blob = (FIXTURES / "profile" / "nsys_run.sqlite").read_bytes()
    path = scratch / "damaged.sqlite"
    for offset in range(106 * 997, 141 * 997, 997):  # pages of the string, metadata and activity tables
        damaged = bytearray(blob)
        damaged[offset] ^= 0xFF
        path.write_bytes(bytes(damaged))
        try:
            nsys.read_sqlite(path)
        except InputError:
            pass


def test_ncu_csv_with_a_repeated_column_is_an_input_error(scratch):
    import csv
    import io

    from zincbench.profile import ncu

    source = FIXTURES / "profile" / "ncu_raw_nvtx.csv"
    lines = source.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if '"Kernel Name"' in line)
    rows = list(csv.reader(lines[start:]))
    column = rows[0].index("ID")
    table = io.StringIO()
    csv.writer(table, quoting=csv.QUOTE_ALL).writerows(row + [row[column]] for row in rows)
    path = scratch / "repeated_id.csv"
    path.write_text("".join(lines[:start]) + table.getvalue())
    with pytest.raises(InputError):
        ncu.read_csv(path)


def test_llama_bench_sql_with_a_nul_character_is_an_input_error():
    with pytest.raises(InputError):
        llama_bench.parse(LLAMA_BENCH_SAMPLES["sql"].replace("llama_bench (", "llama_bench\x00 (", 1), fmt="sql")


# --- found by deeper fuzzing (ZINCBENCH_FUZZ_EXAMPLES=2500) ----------------------------------------------


def test_nsys_stats_csv_with_a_non_numeric_count_is_an_input_error(scratch):
    from zincbench.profile.parse import parse_file

    source = FIXTURES / "profile" / "nsys_run_cuda_gpu_kern_sum.csv"
    folder = scratch / "count"
    folder.mkdir(exist_ok=True)
    (folder / source.name).write_text(source.read_text().replace(",3,2410.7", ",|3,2410.7", 1))
    with pytest.raises(InputError):
        parse_file(folder / source.name)


def test_nsys_sqlite_export_with_a_damaged_table_name_is_an_input_error(scratch):
    from zincbench.profile import nsys

    blob = bytearray((FIXTURES / "profile" / "nsys_empty.sqlite").read_bytes())
    blob[85248] = 0x80  # a byte of a table name in the schema page: no longer UTF-8
    path = scratch / "bad_name.sqlite"
    path.write_bytes(bytes(blob))
    with pytest.raises(InputError):
        nsys.read_sqlite(path)
