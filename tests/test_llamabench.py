"""llama-bench parsing on real output of a real llama-bench build in all five formats.

The fixtures (tests/fixtures/llama-bench/, see its README) come from one command per format on
the tiny test GGUF: tests pp16, tg8 and pp16+tg8 at depths 0 and 16, two repetitions each.
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import pytest

from zincbench.cli import main
from zincbench.errors import InputError
from zincbench.measure.llama_bench import FORMATS, detect_format, load, parse, run_llama_bench

FIXTURES = Path(__file__).parent / "fixtures" / "llama-bench"
EXPECTED_TESTS = ["pp16", "tg8", "pp16+tg8", "pp16 @ d16", "tg8 @ d16", "pp16+tg8 @ d16"]


def fixture(fmt: str, variant: str = "tiny") -> Path:
    return FIXTURES / f"{variant}.{fmt}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_is_detected_and_parsed(fmt):
    text = fixture(fmt).read_text()
    assert detect_format(text) == fmt
    rows = load(fixture(fmt))
    assert sorted(r.test for r in rows) == sorted(EXPECTED_TESTS)
    for row in rows:
        assert row.avg_ts > 0 and row.stddev_ts is not None and row.stddev_ts >= 0
        assert row.model_type and row.backend and row.build_commit


def test_formats_agree_on_what_was_run():
    """Five separate runs of one command: the same tests, model, backend and build in every format."""

    def identity(fmt):
        return sorted(
            (r.test, r.n_prompt, r.n_gen, r.n_depth, r.model_type, r.backend, r.build_commit)
            for r in load(fixture(fmt))
        )

    reference = identity("jsonl")
    for fmt in FORMATS:
        assert identity(fmt) == reference, fmt


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "sql"])
def test_machine_formats_carry_the_model_file_and_gpu_field(fmt):
    rows = load(fixture(fmt))
    assert {r.model_filename for r in rows} == {"tiny.gguf"}
    assert all(r.gpu_info is not None for r in rows)
    assert all(r.raw["n_threads"] not in (None, "") for r in rows)


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_avg_and_stddev_are_the_statistics_of_the_samples(fmt):
    for row in load(fixture(fmt)):
        assert len(row.samples_ts) == 2
        assert row.avg_ts == pytest.approx(statistics.mean(row.samples_ts), rel=1e-4)
        # samples_ts are printed to 6 significant digits, which bounds how well they reproduce the stddev
        assert row.stddev_ts == pytest.approx(statistics.stdev(row.samples_ts), abs=2e-5 * max(row.samples_ts))


def test_markdown_rows_round_trip_test_names_and_rates():
    rows = load(fixture("md"))
    for row in rows:
        assert row.raw["test"] == row.test  # pp16, tg8, pp16+tg8, pp16 @ d16 ...
        avg, sd = row.raw["t/s"].split(" ± ")
        assert (row.avg_ts, row.stddev_ts) == (float(avg), float(sd))
        assert row.model_filename is None and row.samples_ts is None
    assert {r.backend for r in rows} == {r.backend for r in load(fixture("jsonl"))}


def test_markdown_accepts_the_compare_script_test_spelling():
    text = fixture("md").read_text().replace("pp16 @ d16", "pp16@d16")
    assert sorted(r.test for r in parse(text)) == sorted(EXPECTED_TESTS)


# What a CUDA build logs on stderr before llama-bench silences logging (captured with 2>&1).
BACKEND_INIT_NOISE = """\
ggml_cuda_init: found 1 CUDA devices:
  Device 0: NVIDIA H200, compute capability 9.0, VMM: yes
load_backend: loaded CUDA backend from /opt/llama.cpp/build/bin/libggml-cuda.so
"""


def error_of(text: str) -> str:
    with pytest.raises(InputError) as exc:
        parse(text, source="f")
    return str(exc.value)


@pytest.mark.parametrize("fmt", FORMATS)
def test_backend_init_noise_before_the_results_is_skipped(fmt):
    assert parse(BACKEND_INIT_NOISE + fixture(fmt).read_text()) == load(fixture(fmt))
    truncated = fixture(fmt, "tiny-truncated").read_text()
    line = int(error_of(truncated).split(":")[1])
    assert error_of(BACKEND_INIT_NOISE + truncated).startswith(f"f:{line + 3}:")  # the file's own line numbers


@pytest.mark.parametrize("fmt", FORMATS)
def test_truncated_files_name_the_line(fmt):
    path = fixture(fmt, "tiny-truncated")
    with pytest.raises(InputError) as exc:
        load(path)
    message = str(exc.value)
    assert message.startswith(f"{path}:") and "\n" not in message


@pytest.mark.parametrize(
    "fmt, old, new, expected",
    [
        ("md", " ± ", " +- ", "field 't/s'"),
        ("md", "pp16+tg8 @ d16", "  warmup-run  ", "field 'test'"),
        ("csv", '"tiny.gguf"', '"tiny.gguf","extra"', "values for"),
        ("jsonl", '"avg_ts": ', '"avg_ts_x": ', "missing field 'avg_ts'"),
        ("json", '"n_prompt": 16', '"n_prompt": "sixteen"', "field 'n_prompt': expected an integer"),
        ("sql", "INSERT INTO llama_bench", "DROP TABLE llama_bench; INSERT INTO llama_bench", "not a llama_bench"),
    ],
)
def test_malformed_fields_are_one_clear_line(fmt, old, new, expected):
    text = fixture(fmt).read_text()
    assert old in text
    with pytest.raises(InputError, match=expected) as exc:
        parse(text.replace(old, new, 1), source="edited")
    assert "\n" not in str(exc.value) and str(exc.value).startswith("edited")


def test_extra_and_missing_optional_fields_are_tolerated():
    line = json.loads(fixture("jsonl").read_text().splitlines()[0])
    for optional in ("n_depth", "gpu_info", "build_commit", "samples_ts", "stddev_ts", "model_filename"):
        line.pop(optional)
    line["a_future_field"] = 7
    (row,) = parse(json.dumps(line))
    assert row.n_depth == 0 and row.gpu_info is None and row.samples_ts is None and row.stddev_ts is None
    assert row.raw["a_future_field"] == 7


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty file"),
        ("hello world\n", "not llama-bench output"),
        ("[]", "no llama-bench result rows"),
    ],
)
def test_not_llama_bench_output(text, message):
    with pytest.raises(InputError, match=message):
        parse(text)


def test_missing_file():
    with pytest.raises(InputError, match="llama-bench file not found"):
        load(FIXTURES / "absent.jsonl")


def test_show_json_prints_the_parsed_rows(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["llamabench", "show", str(fixture("sql")), "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert exc.value.code == 0 and len(rows) == len(EXPECTED_TESTS)
    assert set(rows[0]) >= {
        "model_filename",
        "model_type",
        "backend",
        "n_prompt",
        "n_gen",
        "n_depth",
        "avg_ts",
        "stddev_ts",
    }
    assert "samples_ts" not in rows[0]  # sql carries no samples


def test_show_table_and_bad_file_exit_code(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["llamabench", "show", str(fixture("md"))])
    assert exc.value.code == 0 and "pp16 @ d16" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["llamabench", "show", str(fixture("json", "tiny-truncated"))])
    assert exc.value.code == 2 and "truncated" in capsys.readouterr().err


@pytest.mark.skipif(
    not os.environ.get("ZINCBENCH_LLAMA_BENCH"),
    reason="set ZINCBENCH_LLAMA_BENCH=/path/to/llama-bench to run a real llama-bench",
)
def test_run_llama_bench_live(tmp_path):
    from zincbench.testing.tiny_gguf import write_tiny_llama

    gguf = write_tiny_llama(tmp_path / "tiny.gguf", seed=0)
    rows = run_llama_bench(os.environ["ZINCBENCH_LLAMA_BENCH"], gguf, 16, 4, 2, extra_args=("-t", "2"), timeout_s=300)
    assert [r.test for r in rows] == ["pp16", "tg4"]
    assert all(len(r.samples_ts) == 2 and r.model_filename == str(gguf) for r in rows)


# --- NUL bytes: a damaged or binary file is never llama-bench output -----------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(fmt=st.sampled_from(FORMATS), where=st.floats(0, 1), count=st.integers(1, 64))
@settings(deadline=None)
def test_nul_bytes_anywhere_in_any_format_are_rejected(fmt, where, count):
    text = fixture(fmt).read_text()
    at = int(where * len(text))
    with pytest.raises(InputError, match="NUL byte"):
        parse(text[:at] + "\x00" * count + text[at:], source="damaged")


def test_a_csv_of_nul_bytes_is_one_line_and_exit_2(tmp_path, capsys):
    header = fixture("csv").read_text().splitlines()[0]
    damaged = tmp_path / "nul.csv"
    damaged.write_bytes(header.encode() + b"\n" + b",".join(b"\x00" * 8 for _ in header.split(",")) + b"\n")
    rows = fixture("csv").read_text().splitlines()
    text_fields = tmp_path / "nul-text.csv"  # only the text columns damaged: every number still parses
    cells = rows[1].split(",")
    for i, name in enumerate(header.split(",")):
        if name in ("model_filename", "gpu_info", "build_commit"):
            cells[i] = "\x00" * 8
    text_fields.write_text(header + "\n" + ",".join(cells) + "\n")
    for path in (damaged, text_fields, tmp_path / "all-nul.csv"):
        if not path.exists():
            path.write_bytes(b"\x00" * 4096)
        with pytest.raises(SystemExit) as exc:
            main(["llamabench", "show", str(path)])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and "NUL byte" in err and "\\x00" not in err
