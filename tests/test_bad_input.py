"""The bad-input suite: every way a user or an engine can hand zincbench garbage, through the real CLI
in a subprocess (``python -m zincbench ...``).

Bad input: exactly one line on stderr, ``zincbench: error: ...``, exit 2 (or the documented code), no
traceback, and nothing left in the results folder (temp files included). A crashing, hanging or
babbling engine is not bad input but a failed run: the command's documented exit code and one-line
verdict, the failure named on stderr, and a complete (not partial) results document.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from documents import microbench_document
from fake_engine import write_launcher

from zincbench import records
from zincbench.config import EXPERIMENTS_DIR
from zincbench.errors import InputError
from zincbench.inputs import read_text

FIXTURES = Path(__file__).parent / "fixtures" / "llama-bench"

# --- llama-bench output, one valid sample per format (shaped like the real tool's) -------------------------

_ROWS = [
    {
        "build_commit": "0c1e570",
        "build_number": 5000,
        "model_filename": "/m/tiny.gguf",
        "model_type": "llama ?B Q4_K - Medium",
        "backends": "CUDA",
        "gpu_info": "NVIDIA H200",
        "n_prompt": 512,
        "n_gen": 0,
        "n_depth": 0,
        "avg_ns": 56000000,
        "stddev_ns": 10000,
        "avg_ts": 9142.86,
        "stddev_ts": 1.5,
        "samples_ns": [56000000, 56010000],
        "samples_ts": [9142.8, 9141.1],
    },
    {
        "build_commit": "0c1e570",
        "build_number": 5000,
        "model_filename": "/m/tiny.gguf",
        "model_type": "llama ?B Q4_K - Medium",
        "backends": "CUDA",
        "gpu_info": "NVIDIA H200",
        "n_prompt": 0,
        "n_gen": 128,
        "n_depth": 0,
        "avg_ns": 846000000,
        "stddev_ns": 20000,
        "avg_ts": 151.3,
        "stddev_ts": 0.4,
        "samples_ns": [846000000, 846020000],
        "samples_ts": [151.3, 151.2],
    },
]
_SCALARS = [k for k in _ROWS[0] if not k.startswith("samples")]


def _sql_value(v) -> str:
    return f"'{v}'" if isinstance(v, str) else str(v)


_SQL_TYPES = {str: "TEXT", int: "INTEGER", float: "REAL"}
LLAMA_BENCH_SAMPLES = {
    "jsonl": "".join(json.dumps(r) + "\n" for r in _ROWS),
    "json": json.dumps(_ROWS, indent=2) + "\n",
    "csv": ",".join(_SCALARS) + "\n" + "".join(",".join(f'"{r[k]}"' for k in _SCALARS) + "\n" for r in _ROWS),
    "sql": "CREATE TABLE IF NOT EXISTS llama_bench (\n"
    + ",\n".join(f"  {k} {_SQL_TYPES[type(_ROWS[0][k])]}" for k in _SCALARS)
    + "\n);\n"
    + "".join(
        f"INSERT INTO llama_bench ({', '.join(_SCALARS)}) VALUES ({', '.join(_sql_value(r[k]) for k in _SCALARS)});\n"
        for r in _ROWS
    ),
    "md": "| model | backend | ngl | test | t/s |\n| --- | --- | --: | --: | --: |\n"
    "| llama ?B Q4_K - Medium | CUDA | 99 | pp512 | 9142.86 ± 1.50 |\n"
    "| llama ?B Q4_K - Medium | CUDA | 99 | tg128 | 151.30 ± 0.40 |\n\nbuild: 0c1e570 (5000)\n",
}


def truncated(text: str) -> str:
    """The text cut in the middle of its last result (the tg128 row), as a killed llama-bench leaves it."""
    start = text.rindex("\n", 0, text.rindex("151.3")) + 1
    end = text.find("\n", start)
    return text[: start + (end - start) // 2]


MALFORMED = {
    "md": ("9142.86 ± 1.50", "fast", "field 't/s'"),
    "csv": ('"9142.86"', '"n/a"', "field 'avg_ts': expected a number"),
    "json": ('"avg_ts": 9142.86', '"avg_ts": "fast"', "field 'avg_ts': expected a number"),
    "jsonl": ('"avg_ts": 151.3,', '"avg_ts": 151.3,,', "bad.jsonl:2: invalid JSON line"),
    "sql": ("INSERT INTO", "DROP TABLE llama_bench;\nINSERT INTO", "not a llama_bench CREATE TABLE/INSERT"),
}


# --- helpers -------------------------------------------------------------------------------------------


def zincbench(tmp_path: Path, *args, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real CLI in a subprocess, results going to tmp_path/results. A wide console keeps rich
    from wrapping a one-line verdict the way an 80-column CI log would."""
    full_env = {**os.environ, "ZINCBENCH_RESULTS": str(tmp_path / "results"), "COLUMNS": "250", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "zincbench", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=full_env,
        timeout=timeout,
    )


def assert_one_line_error(result: subprocess.CompletedProcess, code: int, message: str) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("zincbench: error: "), result.stderr
    assert message in lines[0]


def assert_no_results(tmp_path: Path) -> None:
    results = tmp_path / "results"
    assert not results.exists() or sorted(p.name for p in results.iterdir()) == []


def assert_complete_results(tmp_path: Path, kind: str) -> dict:
    """Exactly one results document (plus its CSV for ab), complete, and no temp files."""
    names = sorted(p.name for p in (tmp_path / "results").iterdir())
    assert not [n for n in names if n.endswith(".tmp") or n.startswith(".")], names
    (doc_path,) = [n for n in names if n.endswith(".json")]
    doc = records.read(tmp_path / "results" / doc_path)
    assert doc["kind"] == kind and doc["complete"] is True
    return doc


@pytest.fixture
def fake(tmp_path, monkeypatch):
    for var in ("FAKE_SPEED", "FAKE_DRIFT", "FAKE_SEED", "FAKE_FAIL", "FAKE_FAIL_RUNS", "FAKE_NOISE"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "tiny.gguf").touch()
    return write_launcher(tmp_path)


def experiment(tmp_path: Path, family_file: str, old: str, new: str) -> Path:
    text = (EXPERIMENTS_DIR / family_file).read_text()
    assert old in text
    path = tmp_path / f"bad-{family_file}"
    path.write_text(text.replace(old, new, 1))
    return path


# --- llama-bench files -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(LLAMA_BENCH_SAMPLES))
def test_valid_samples_parse_so_the_broken_ones_below_mean_something(tmp_path, fmt):
    (tmp_path / f"ok.{fmt}").write_text(LLAMA_BENCH_SAMPLES[fmt])
    result = zincbench(tmp_path, "llamabench", "show", f"ok.{fmt}", "--json")
    assert result.returncode == 0, result.stderr
    assert [row["test"] for row in json.loads(result.stdout)] == ["pp512", "tg128"]


@pytest.mark.parametrize("fmt", sorted(LLAMA_BENCH_SAMPLES))
def test_truncated_llama_bench_file(tmp_path, fmt):
    (tmp_path / f"cut.{fmt}").write_text(truncated(LLAMA_BENCH_SAMPLES[fmt]))
    result = zincbench(tmp_path, "llamabench", "show", f"cut.{fmt}")
    assert_one_line_error(result, 2, f"cut.{fmt}")
    assert_no_results(tmp_path)


@pytest.mark.parametrize("fmt", sorted(MALFORMED))
def test_malformed_llama_bench_file(tmp_path, fmt):
    old, new, message = MALFORMED[fmt]
    text = LLAMA_BENCH_SAMPLES[fmt]
    assert old in text
    (tmp_path / f"bad.{fmt}").write_text(text.replace(old, new, 1))
    assert_one_line_error(zincbench(tmp_path, "llamabench", "show", f"bad.{fmt}"), 2, message)


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("empty.md", b"", "empty file"),
        ("binary.json", b"\x89PNG\r\n\x1a\n\x00\xff\xfe", "not a text file"),
        ("prose.txt", b"llama-bench crashed before printing anything\n", "not llama-bench output"),
    ],
)
def test_files_that_are_not_llama_bench_output(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    assert_one_line_error(zincbench(tmp_path, "llamabench", "show", name), 2, message)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("tiny-truncated.*")), ids=lambda p: p.name)
def test_real_truncated_llama_bench_outputs(tmp_path, path):
    """llama-bench killed mid-run, recorded (tests/fixtures/llama-bench/README.md)."""
    result = zincbench(tmp_path, "llamabench", "show", path)
    assert_one_line_error(result, 2, path.name)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("tiny.*")), ids=lambda p: p.name)
def test_real_llama_bench_outputs_cut_in_half(tmp_path, path):
    text = path.read_text()
    (tmp_path / f"cut{path.suffix}").write_text(text[: len(text) // 2])
    result = zincbench(tmp_path, "llamabench", "show", f"cut{path.suffix}")
    assert_one_line_error(result, 2, f"cut{path.suffix}")


def test_truncated_llama_bench_file_given_to_ab(tmp_path, fake):
    (tmp_path / "cut.json").write_text(truncated(LLAMA_BENCH_SAMPLES["json"]))
    result = zincbench(tmp_path, "ab", "--a", fake, "--model", "tiny=tiny.gguf", "--llama-bench", "cut.json")
    assert_one_line_error(result, 2, "cut.json")
    assert_no_results(tmp_path)


# --- YAML and catalog input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["microbench", "t2", "-e", "broken.yaml"],
        ["gate", "broken.yaml"],
        ["validate", "--catalog", "broken.yaml", "--engine-bin", "fake-engine"],
    ],
)
def test_invalid_yaml(tmp_path, fake, command):
    (tmp_path / "broken.yaml").write_text("k: [1, 2\nshapes: {")
    assert_one_line_error(zincbench(tmp_path, *command), 2, "broken.yaml:")
    assert_no_results(tmp_path)


@pytest.mark.parametrize(
    "family, family_file, old, new, message",
    [
        ("t2", "t2_moe_expert.yaml", "k: 2048", "k: 300", "K=300 is not a multiple of 256"),
        ("t1", "t1_dense_gemm.yaml", "rows: 4096, k: 4096}", "rows: 4096, k: 300}", "K=300 is not a multiple of 256"),
        (
            "t2",
            "t2_moe_expert.yaml",
            "tokens_per_expert: [8, 16, 32, 64]",
            "tokens_per_expert: [0]",
            "tokens_per_expert must be >= 1",
        ),
        ("t1", "t1_dense_gemm.yaml", "tokens: [512, 1024, 2048]", "tokens: [0]", "tokens must be a non-empty list"),
    ],
)
def test_experiment_shapes_that_cannot_run(tmp_path, family, family_file, old, new, message):
    """Rejected while loading the experiment, before CuPy is asked for: the same on a GPU host and here."""
    path = experiment(tmp_path, family_file, old, new)
    assert_one_line_error(zincbench(tmp_path, "microbench", family, "-e", path), 2, message)
    assert_no_results(tmp_path)


def test_gate_file_that_does_not_exist(tmp_path):
    assert_one_line_error(zincbench(tmp_path, "gate", "missing.yaml"), 2, "file not found: missing.yaml")
    assert_no_results(tmp_path)


def test_gate_with_a_broken_check_runs_nothing(tmp_path):
    path = experiment(tmp_path, "t2_moe_expert.yaml", "k: 2048", "k: 300")
    (tmp_path / "gates.yaml").write_text(f"checks:\n  - {{name: t2, kind: microbench, experiment: {path}}}\n")
    result = zincbench(tmp_path, "gate", "gates.yaml")
    assert_one_line_error(result, 2, "checks[0] (t2): K=300 is not a multiple of 256")
    assert_no_results(tmp_path)


@pytest.mark.parametrize(
    "command",
    [
        ["validate", "--models", "no-such-model", "--engine-bin", "fake-engine"],
        ["ab", "--a", "fake-engine", "--models", "no-such-model"],
    ],
)
def test_unknown_catalog_model(tmp_path, fake, command):
    assert_one_line_error(zincbench(tmp_path, *command), 2, "unknown catalog model 'no-such-model'")
    assert_no_results(tmp_path)


def test_missing_gguf_for_ab(tmp_path, fake):
    result = zincbench(tmp_path, "ab", "--a", fake, "--model", "tiny=/nonexistent/tiny.gguf")
    assert_one_line_error(result, 2, "GGUF file not found: /nonexistent/tiny.gguf")
    assert_no_results(tmp_path)


def test_missing_gguf_for_validate(tmp_path, fake):
    result = zincbench(tmp_path, "validate", "--gguf", "/nonexistent/tiny.gguf", "--engine-bin", fake)
    assert_one_line_error(result, 2, "/nonexistent/tiny.gguf")
    assert_no_results(tmp_path)


def test_catalog_model_whose_gguf_is_absent_is_missing(tmp_path, fake):
    """Not bad input but a documented outcome: MISSING fails validate (exit 1) unless --allow-missing."""
    (tmp_path / "models").mkdir()
    result = zincbench(
        tmp_path,
        "validate",
        "--models",
        "qwen35-9b",
        "--engine-bin",
        fake,
        env={"ZINC_MODELS": str(tmp_path / "models")},
    )
    assert "Traceback" not in result.stdout + result.stderr
    assert result.returncode == 1
    assert "=== 0/1 catalog models token-correct (1 missing) ===" in result.stdout.splitlines()
    assert assert_complete_results(tmp_path, "validate")["results"][0]["status"] == "MISSING"


def test_catalog_models_folder_not_configured(tmp_path, fake):
    env = {k: v for k, v in os.environ.items() if k != "ZINC_MODELS"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "zincbench",
            "validate",
            "--models",
            "qwen35-9b",
            "--engine-bin",
            str(fake),
            "--results-dir",
            str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert_one_line_error(result, 2, "needs the environment variable ZINC_MODELS")
    assert_no_results(tmp_path)


def test_report_of_a_file_that_is_not_a_results_document(tmp_path):
    (tmp_path / "other.json").write_text('{"hello": 1}')
    assert_one_line_error(zincbench(tmp_path, "report", "other.json"), 2, "not a zincbench results document")


def test_report_reads_a_gzipped_document_as_the_document(tmp_path):
    """Results folders commit large documents as *.json.gz: report reads one as it reads the JSON."""
    plain = records.write(microbench_document(), tmp_path / "run.json")
    (tmp_path / "run.json.gz").write_bytes(gzip.compress(plain.read_bytes()))
    assert records.read(tmp_path / "run.json.gz") == records.read(plain)
    assert zincbench(tmp_path, "report", "run.json.gz", "--markdown").stdout == zincbench(
        tmp_path, "report", "run.json", "--markdown"
    ).stdout.replace("run.json", "run.json.gz")


@pytest.mark.parametrize(
    "content, says",
    [
        (lambda doc: gzip.compress(doc)[:-9], "damaged gzip file"),  # truncated
        (lambda doc: gzip.compress(doc)[:10] + b"\xff" * 40, "damaged gzip file"),
        (lambda doc: gzip.compress(b"\xff\xfe" + doc), "not a text file (not UTF-8)"),
        (lambda doc: gzip.compress(b"{" + b" " * (2**20 + 1)), "decompressed, it is more than a results file can be"),
    ],
    ids=["truncated", "damaged", "not-utf8", "inflates-past-the-limit"],
)
def test_bad_gzipped_documents(tmp_path, content, says):
    """One line, exit 2, through the CLI; the size limit after decompression checked at 1 MiB (a gzip bomb's
    inflation is bounded by the limit, not by the memory the machine has)."""
    doc = json.dumps(records.to_jsonable(microbench_document())).encode()
    (tmp_path / "bad.json.gz").write_bytes(content(doc))
    with pytest.raises(InputError, match=re.escape(says)):
        read_text(tmp_path / "bad.json.gz", "results file", max_bytes=2**20)
    if "decompressed" not in says:
        assert_one_line_error(zincbench(tmp_path, "report", "bad.json.gz"), 2, says)


# --- engines that crash, hang or print garbage ----------------------------------------------------------


@pytest.mark.parametrize(
    "failure, env, says",
    [
        ("crash", {"FAKE_FAIL": "crash"}, "exited with code 134"),
        ("hang", {"FAKE_FAIL": "hang", "FAKE_FAIL_RUNS": "2,3"}, "timed out after"),  # half the measured runs
        ("garbage", {"FAKE_FAIL": "garbage"}, "no 'Prefill complete: N tokens in X ms (Y tok/s)' line"),
    ],
)
def test_engine_failures_in_ab(tmp_path, fake, failure, env, says):
    env = {**env, "FAKE_COUNTER": str(tmp_path / "counter")}
    result = zincbench(
        tmp_path,
        "ab",
        "--a",
        fake,
        "--b",
        fake,
        "--model",
        "tiny=tiny.gguf",
        "--rounds",
        "2",
        "--timeout",
        "2",
        env=env,
    )
    assert "Traceback" not in result.stdout + result.stderr
    assert result.returncode == 3  # documented: more failed runs than --max-failure-rate -> error, exit 3
    verdicts = [line for line in result.stdout.splitlines() if line.startswith("verdict:")]
    assert len(verdicts) == 1 and verdicts[0].startswith("verdict: error (exit 3)")
    assert says in result.stderr
    doc = assert_complete_results(tmp_path, "ab")
    errors = [r for r in doc["results"] if r["status"] == "error"]
    assert (
        errors and errors[0]["error"]["reason"] == {"crash": "crash", "hang": "timeout", "garbage": "garbage"}[failure]
    )


def test_engine_crash_in_validate(tmp_path, fake):
    from zincbench import reference_store
    from zincbench.catalog import DEFAULT_PROMPT
    from zincbench.testing.tiny_gguf import write_tiny_llama

    gguf = write_tiny_llama(tmp_path / "model" / "tiny.gguf", quant="q4_k")
    reference_store.save(
        reference_store.Reference(
            gguf=str(gguf),
            identity=reference_store.gguf_identity(gguf),
            prompt=DEFAULT_PROMPT,
            n_gen=12,
            prompt_ids=[1, 2, 3],
            generated_ids=list(range(7, 19)),
            tokens=[reference_store.TokenRow(7 + i, 10.0, 3, 9.0) for i in range(12)],
            producer={},
        ),
        tmp_path / "refs",
    )
    args = [
        "validate",
        "--engine-kind",
        "zinc-dbg",
        "--engine-bin",
        fake,
        "--gguf",
        gguf,
        "--references-dir",
        tmp_path / "refs",
    ]
    healthy = zincbench(tmp_path, *args)
    assert healthy.returncode == 0, healthy.stderr  # the fake speaks cuda-dbg's protocol: 12/12 tokens agree
    (tmp_path / "results" / next((tmp_path / "results").glob("validate-*.json")).name).unlink()

    result = zincbench(tmp_path, *args, env={"FAKE_FAIL": "crash"})
    assert "Traceback" not in result.stdout + result.stderr
    assert result.returncode == 1  # documented: any ERROR row fails the gate
    summaries = [line for line in result.stdout.splitlines() if re.match(r"=== \d+/\d+ catalog models", line)]
    assert summaries == ["=== 0/1 catalog models token-correct ==="]
    assert "exited with code 134" in result.stdout
    doc = assert_complete_results(tmp_path, "validate")
    assert doc["results"][0]["status"] == "ERROR"


# --- the error boundary: no crash reads as a verdict ----------------------------------------------------


def test_an_unexpected_exception_is_exit_5_with_its_traceback_saved(tmp_path, monkeypatch, capsys):
    """A bug (here: an exception nobody anticipated) is neither a verdict (0/1/3) nor bad input (2)."""
    import tempfile

    from zincbench.cli import main
    from zincbench.gpu import device

    def broken_report():
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(device, "environment_report", broken_report)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(SystemExit) as exc:
        main(["env"])
    err = capsys.readouterr().err
    assert exc.value.code == 5
    (line,) = err.splitlines()
    match = re.fullmatch(r"zincbench: internal error: RuntimeError: boom second line \(traceback saved to (.+)\)", line)
    assert match, line
    log = Path(match[1]).read_text()
    assert log.startswith("zincbench ") and "Traceback" in log and "broken_report" in log


def _without_package(tmp_path: Path, package: str, *args) -> subprocess.CompletedProcess:
    """``python -m zincbench ARGS`` in an installation where importing ``package`` fails."""
    code = (
        f"import runpy, sys; sys.modules[{package!r}] = None; sys.argv = ['zincbench', *{[str(a) for a in args]!r}]; "
        "runpy.run_module('zincbench', run_name='__main__', alter_sys=True)"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, "ZINCBENCH_RESULTS": str(tmp_path / "results")},
    )


RECORDED_VALIDATE = Path(__file__).resolve().parents[1] / "results" / "cpu" / "validate-20261129T142543-1082a4e4.json"


@pytest.mark.parametrize("package", ["click", "rich", "numpy"])
def test_a_missing_dependency_is_exit_4_not_a_traceback(tmp_path, package):
    """A broken installation is the environment (4), whether the package is imported at start (click,
    rich) or by the command that needs it (numpy); Python's own answer was a traceback and exit 1."""
    result = _without_package(tmp_path, package, "report", RECORDED_VALIDATE)
    assert_one_line_error(result, 4, "a Python package zincbench needs cannot be imported")
    assert package in result.stderr


def test_a_failed_import_of_zincbench_itself_is_an_internal_error(tmp_path):
    result = _without_package(tmp_path, "zincbench.records", "report", RECORDED_VALIDATE)
    assert result.returncode == 5 and "Traceback" not in result.stderr
    assert result.stderr.startswith("zincbench: internal error: ModuleNotFoundError")


def _closed_pipe_run(tmp_path, *args) -> subprocess.CompletedProcess:
    """The command with its stdout a pipe whose reader is already gone (`zincbench ... | head -0`)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        env = {**os.environ, "ZINCBENCH_RESULTS": str(tmp_path / "results"), "COLUMNS": "250"}
        return subprocess.run(
            [sys.executable, "-m", "zincbench", *map(str, args)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [["env"], ["llamabench", "show", FIXTURES / "tiny.md"], ["llamabench", "show", FIXTURES / "tiny.md", "--json"]],
    ids=["rich", "rich-table", "json"],
)
def test_a_closed_pipe_is_exit_141_and_silent(tmp_path, args):
    """rich answers a broken pipe with SystemExit(1), which would read as NO-GO: 141 (128 + SIGPIPE) instead."""
    result = _closed_pipe_run(tmp_path, *args)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""


def test_a_closed_stdout_does_not_crash_a_finished_run(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "zincbench", "llamabench", "show", FIXTURES / "tiny.md", "--json"],
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        timeout=120,
        preexec_fn=lambda: os.close(1),
    )
    assert result.returncode == 0 and result.stderr == ""


@pytest.mark.parametrize("args", [["env"], ["llamabench", "show", FIXTURES / "tiny.md"]])
def test_an_ascii_only_terminal_gets_degraded_glyphs_not_a_crash(tmp_path, args):
    result = zincbench(tmp_path, *args, env={"PYTHONIOENCODING": "ascii"})
    assert result.returncode == 0, result.stderr
    assert "Error" not in result.stderr


# --- output paths: checked before any work, written after the verdict ---------------------------------------


@pytest.fixture
def quick_gates(tmp_path) -> Path:
    """A gates file whose one check (recorded llama-bench output still parses) needs nothing but a CPU."""
    path = tmp_path / "gates.yaml"
    path.write_text(
        f"checks:\n  - {{name: parse, kind: parse, parser: llama-bench, path: {FIXTURES / 'tiny.jsonl'}}}\n"
    )
    return path


@pytest.mark.parametrize(
    "option, value, code, message",
    [
        ("--junit", "nodir/x.xml", 2, "--junit nodir/x.xml: folder nodir does not exist"),
        ("--markdown", ".", 2, "--markdown .: is a folder"),
        ("--junit", "gates.yaml/x.xml", 2, "gates.yaml is not a folder"),
        ("--markdown", "x" * 300 + "/y.md", 4, "File name too long"),
    ],
)
def test_unwritable_output_files_are_refused_before_any_work(tmp_path, quick_gates, option, value, code, message):
    result = zincbench(tmp_path, "gate", quick_gates, option, value)
    assert_one_line_error(result, code, message)
    assert_no_results(tmp_path)


def test_step_summary_path_is_checked_before_any_work(tmp_path, quick_gates):
    result = zincbench(tmp_path, "gate", quick_gates, env={"GITHUB_STEP_SUMMARY": str(tmp_path / "no" / "summary.md")})
    assert_one_line_error(result, 2, "$GITHUB_STEP_SUMMARY")
    assert_no_results(tmp_path)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a file whose writes fail: disk full)")
def test_a_write_that_fails_after_the_work_does_not_hide_the_verdict(tmp_path, quick_gates):
    result = zincbench(tmp_path, "gate", quick_gates, "--markdown", "/dev/full")
    assert "Traceback" not in result.stdout + result.stderr
    assert result.returncode == 4
    assert "PASS" in result.stdout  # the verdict was shown first
    assert (
        result.stderr.splitlines()[-1] == "zincbench: error: cannot write --markdown /dev/full: No space left on device"
    )
    assert assert_complete_results(tmp_path, "gate")["verdict"]["status"] == "PASS"


def test_an_empty_results_variable_means_the_default_folder_not_the_current_one(tmp_path, quick_gates):
    result = zincbench(tmp_path, "gate", quick_gates, env={"ZINCBENCH_RESULTS": ""})
    assert result.returncode == 0, result.stderr
    assert list((tmp_path / "results").glob("gate-*.json")) and not list(tmp_path.glob("gate-*.json"))


@pytest.mark.parametrize(
    "results, message",
    [
        ("gates.yaml/results", "Not a directory"),  # under a file
        ("r" * 300, "File name too long"),
        ("loop/results", "Too many levels of symbolic links"),
    ],
)
def test_results_folders_the_os_refuses_are_exit_4_before_any_work(tmp_path, quick_gates, results, message):
    (tmp_path / "loop").symlink_to("loop")
    result = zincbench(tmp_path, "gate", quick_gates, env={"ZINCBENCH_RESULTS": str(tmp_path / results)})
    assert_one_line_error(result, 4, f"results folder {tmp_path / results}: {message}")


def test_a_full_disk_while_writing_results_is_one_environment_error(tmp_path, monkeypatch):
    import errno

    def no_space(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(records.os, "replace", no_space)
    from zincbench.errors import EnvironmentProblem

    with pytest.raises(EnvironmentProblem, match="cannot write results document .*: No space left on device"):
        records.write(records.Document(kind="gate", config={}, environment={}), directory=tmp_path)
    assert list(tmp_path.iterdir()) == []  # no temp file left behind


# --- option values ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "soon"])
@pytest.mark.parametrize(
    "command",
    [
        ["validate", "--engine-bin", "fake-engine"],
        ["ab", "--a", "fake-engine", "--model", "tiny=tiny.gguf"],
        ["aa", "ab", "--a", "fake-engine", "--model", "tiny=tiny.gguf"],
        ["aa", "microbench"],
        ["profile", "run"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_every_timeout_option_takes_a_finite_positive_number_of_seconds(tmp_path, fake, command, value):
    args = [*command, "--timeout", value] + (["--", "true"] if command[0] == "profile" else [])
    result = zincbench(tmp_path, *args)
    assert_one_line_error(result, 2, "Invalid value for '--timeout'")
    assert_no_results(tmp_path)


def _nvml_available() -> bool:
    from zincbench.gpu.nvml import Nvml

    return Nvml().available


@pytest.mark.skipif(_nvml_available(), reason="checks the behaviour on a host without NVML")
@pytest.mark.parametrize(
    "option, message",
    [
        (["--require-clean-gpu"], "--require-clean-gpu: NVML is unavailable"),
        (["--gpu", "GPU-00000000-1111-2222-3333-444444444444"], "NVML is unavailable"),
    ],
)
def test_gpu_options_without_nvml_are_environment_errors(tmp_path, fake, option, message):
    result = zincbench(tmp_path, "ab", "--a", fake, "--model", "tiny=tiny.gguf", *option)
    assert_one_line_error(result, 4, message)
    assert "knows no GPU" not in result.stderr
    assert_no_results(tmp_path)


# --- YAML every loader reads --------------------------------------------------------------------------------


BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8)
)


@pytest.mark.parametrize(
    "text, message",
    [
        ("description: x\ndescription: y\n", "broken.yaml:2: invalid YAML: duplicate key 'description'"),
        (BILLION_LAUGHS, "expands to more than"),
        ("k: " + "[" * 200 + "]" * 200 + "\n", "nested"),
    ],
    ids=["duplicate-key", "billion-laughs", "deep"],
)
@pytest.mark.parametrize(
    "command",
    [
        ["microbench", "t2", "-e", "broken.yaml"],
        ["gate", "broken.yaml"],
        ["validate", "--catalog", "broken.yaml", "--engine-bin", "fake-engine"],
        ["profile", "parse", "--categories", "broken.yaml", FIXTURES.parent / "profile" / "nsys_run.sqlite"],
    ],
    ids=lambda c: c[0],
)
def test_yaml_that_safe_load_would_accept_is_refused(tmp_path, fake, command, text, message):
    (tmp_path / "broken.yaml").write_text(text)
    assert_one_line_error(zincbench(tmp_path, *command), 2, message)
    assert_no_results(tmp_path)


def test_the_bundled_yaml_files_have_no_duplicate_keys():
    from zincbench.config import load_yaml

    for path in sorted(EXPERIMENTS_DIR.glob("*.yaml")):
        load_yaml(path)  # raises ConfigError on a duplicate key


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("threshold: 0.03 ", "threshold: -5 ", "threshold must be a fraction in [0, 1)"),
        ("confidence: 0.99 ", "confidence: 0 ", "confidence must be strictly between 0 and 1"),
        ("confidence: 0.99 ", "confidence: 5 ", "confidence must be strictly between 0 and 1"),
        ("stopping: noise", "stopping: bogus", "stopping: unknown rule 'bogus'"),
        ("max_noise: 0.005", "max_noise: .nan", "max_noise must be strictly between 0 and 1"),
        ("max_noise: 0.005", "samples: 50", "timer: unknown key 'samples'"),
    ],
)
def test_rule_values_out_of_range(tmp_path, old, new, message):
    path = experiment(tmp_path, "t2_moe_expert.yaml", old, new)
    assert_one_line_error(zincbench(tmp_path, "microbench", "t2", "-e", path), 2, message)
    assert_no_results(tmp_path)


def test_top_k_zero_is_one_line(tmp_path):
    path = experiment(tmp_path, "t2_moe_expert.yaml", "top_k: 8", "top_k: 0")
    assert_one_line_error(zincbench(tmp_path, "microbench", "t2", "-e", path), 2, "top_k")


# --- results documents and profiler files -------------------------------------------------------------------


@pytest.mark.parametrize(
    "edit, message, gate_code",
    [
        ({"schema_version": "1"}, "schema_version must be a positive integer, got '1'", 2),
        ({"schema_version": None}, "schema_version must be a positive integer, got None", 2),
        ({"results": {"case": "x"}}, "field 'results' must be a list", 2),
        (
            {"results": [{"case": "x", "variant": "v", "extra": json.loads("[" * 200 + "]" * 200)}]},
            "nested too deeply",
            2,
        ),
        # Rows the re-judging does not use (no correctness check recorded): no evidence, inconclusive.
        ({"results": [{"variant": "matvec"}]}, "results[0] has no 'case' field", 3),
        ({"results": [{"case": ["E1"], "variant": "matvec"}]}, "results[0].case must be a string", 3),
    ],
)
def test_malformed_results_documents_in_report_and_gate(tmp_path, edit, message, gate_code):
    doc = {
        "schema_version": 1,
        "kind": "microbench",
        "config": {"family": "t2"},
        "environment": {},
        "results": [],
        "complete": True,
        **edit,
    }
    (tmp_path / "doc.json").write_text(json.dumps(doc))
    assert_one_line_error(zincbench(tmp_path, "report", "doc.json"), 2, message)
    (tmp_path / "gates.yaml").write_text("checks:\n  - {name: r, kind: recorded, path: doc.json, family: t2}\n")
    gate = zincbench(tmp_path, "gate", "gates.yaml")
    assert "Traceback" not in gate.stdout + gate.stderr
    assert gate.returncode == gate_code, gate.stdout + gate.stderr


@pytest.mark.parametrize("command", [["report"], ["llamabench", "show"], ["profile", "parse"]], ids=lambda c: c[0])
def test_device_files_are_refused_not_read_forever(tmp_path, command):
    assert_one_line_error(zincbench(tmp_path, *command, "/dev/zero"), 2, "/dev/zero: not a regular file")


def test_profile_parse_opens_the_file_it_is_given_whatever_its_name(tmp_path):
    """A '?' in the name once cut the file: URI short, so 'a?b.sqlite' silently parsed a file named 'a'."""
    profile = FIXTURES.parent / "profile"
    (tmp_path / "a").write_bytes((profile / "nsys_run.sqlite").read_bytes())
    (tmp_path / "a?b.sqlite").write_bytes((profile / "nsys_empty.sqlite").read_bytes())
    given = zincbench(tmp_path, "profile", "parse", "a?b.sqlite", "--json")
    direct = zincbench(tmp_path, "profile", "parse", profile / "nsys_empty.sqlite", "--json")
    assert given.returncode == direct.returncode == 0, given.stderr
    assert json.loads(given.stdout)["kernels"] == json.loads(direct.stdout)["kernels"]
    assert json.loads(zincbench(tmp_path, "profile", "parse", "a", "--json").stdout)["kernels"]  # 'a' has kernels


def test_a_recursive_query_in_llama_bench_sql_is_refused(tmp_path):
    sql = LLAMA_BENCH_SAMPLES["sql"] + (
        "INSERT INTO llama_bench (n_prompt, n_gen, avg_ts) WITH RECURSIVE c(x) AS "
        "(SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT 512, 0, x FROM c;\n"
    )
    (tmp_path / "cte.sql").write_text(sql)
    assert_one_line_error(zincbench(tmp_path, "llamabench", "show", "cte.sql"), 2, "far more work")


@pytest.mark.parametrize(
    "old, new, message",
    [
        ('"avg_ts": 9142.86', '"avg_ts": -7.2', "is not a measured rate"),
        ('"avg_ts": 9142.86', '"avg_ts": 0.0', "is not a measured rate"),
        ('"avg_ts": 9142.86', '"avg_ts": 1e300', "is not a measured rate"),
        ('"avg_ts": 9142.86', '"avg_ts": ' + "4" * 400, "expected a number, got"),
        ('"n_prompt": 512', '"n_prompt": 100000000000000000000000', "tokens is out of range"),
        ("      151.3,", "      0.0,", "is not a measured rate"),
    ],
)
def test_llama_bench_values_that_are_not_measurements(tmp_path, old, new, message):
    text = LLAMA_BENCH_SAMPLES["json"]
    assert old in text
    (tmp_path / "odd.json").write_text(text.replace(old, new, 1))
    assert_one_line_error(zincbench(tmp_path, "llamabench", "show", "odd.json"), 2, message)
