"""validate with a fake cuda-dbg (a small script speaking its line protocol): adapters, timeouts,
crashes, garbage, modes, statuses, exit codes and the results document. The real thing (llama.cpp
on a tiny model) is tests/test_validate_e2e.py."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zincbench import records, reference_store
from zincbench.catalog import load_catalog
from zincbench.engines import make_engine
from zincbench.errors import EnvironmentProblem, ExitCode, InputError
from zincbench.measure.process import EngineFailure
from zincbench.reference_store import Reference, TokenRow
from zincbench.runs.validate import Status, ValidateOptions, common_prefix, validate_models
from zincbench.show.validate_table import to_markdown
from zincbench.testing.tiny_gguf import write_tiny_llama

# Behaviour from the environment: FAKE_DBG=ok|crash|hang|garbage, FAKE_GEN_IDS (the GEN_IDS line),
# FAKE_TF (the TF_MATCH line), FAKE_ECHO_DROP=k (echo the prompt without its last k ids, as a
# truncating engine would), FAKE_LOG (append argv there).
FAKE_DBG = """\
import os, sys, time
if os.environ.get("FAKE_LOG"):
    with open(os.environ["FAKE_LOG"], "a") as fh:
        fh.write(" ".join(sys.argv[1:]) + "\\n")
behaviour = os.environ.get("FAKE_DBG", "ok")
if behaviour == "crash":
    print("CUDA error 700: an illegal memory access was encountered (kernels.cu:1743)", file=sys.stderr)
    sys.exit(134)
if behaviour == "hang":
    time.sleep(120)
if behaviour == "garbage":
    print("Segmentation fault (core dumped)?", file=sys.stderr)
    sys.exit(0)
mode, prompt = sys.argv[1], sys.argv[2].split(",")
drop = int(os.environ.get("FAKE_ECHO_DROP", "0"))
print("PROMPT_IDS:" + ",".join(prompt[:len(prompt) - drop]), file=sys.stderr)
if mode == "gen":
    print(f"PREFILL: {len(prompt)} tokens in 0.010s = 500.00 tok/s (skip=false batched=true)", file=sys.stderr)
    print("GEN_IDS:" + os.environ["FAKE_GEN_IDS"], file=sys.stderr)
    print(f"DECODE: {int(sys.argv[3]) - 1} tokens in 0.100s = 110.00 tok/s (correctness-first)", file=sys.stderr)
elif mode == "tf":
    print("TF_MATCH:" + os.environ["FAKE_TF"], file=sys.stderr)
"""

REF_IDS = list(range(100, 112))
PROMPT_IDS = [1, 40, 41, 42]
NEAR_TIE_POSITION = 5  # margin 0.1, before min_match 8: tolerant mode needs teacher forcing
LATE_NEAR_TIE_POSITION = 9  # margin 0.05, after min_match 8; every other position has margin 2.0


@pytest.fixture(scope="module")
def fake_dbg(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bin") / "cuda-dbg"
    path.write_text(f"#!{sys.executable}\n{FAKE_DBG}")
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def gguf(tmp_path_factory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("models") / "tiny.gguf", n_layers=1)


def _ids(ids) -> str:
    return ",".join(map(str, ids))


RUNNER_UP = 9  # llama.cpp's recorded top-2 token at both near-ties


def _with_divergence(position: int, token: int = 7) -> str:
    ids = list(REF_IDS)
    ids[position] = token
    return _ids(ids)


@pytest.fixture
def setup(tmp_path, gguf, monkeypatch):
    """A one-model catalog on the tiny GGUF, its recorded reference, and a results folder."""
    monkeypatch.setenv("TINY_DIR", str(gguf.parent))
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        "defaults:\n  n_gen: 12\n  min_match: 8\n  engine_env: {FAKE_TF: '0/12'}\n"
        "models:\n  tiny:\n    gguf: ${TINY_DIR}/tiny.gguf\n    arch: llama\n    shape: dense\n"
        "    engine_env: {FAKE_GEN_IDS: '" + _ids(REF_IDS) + "'}\n"
        "  absent:\n    gguf: ${TINY_DIR}/absent.gguf\n    arch: llama\n    shape: moe\n"
    )
    tokens = [TokenRow(t, 5.0, t + 1, 3.0) for t in REF_IDS]
    tokens[NEAR_TIE_POSITION] = TokenRow(REF_IDS[NEAR_TIE_POSITION], 5.0, 9, 4.9)
    tokens[LATE_NEAR_TIE_POSITION] = TokenRow(REF_IDS[LATE_NEAR_TIE_POSITION], 5.0, 9, 4.95)
    refs = tmp_path / "refs"
    reference_store.save(
        Reference(
            gguf=str(gguf),
            identity=reference_store.gguf_identity(gguf),
            prompt="The capital of France is",
            n_gen=12,
            prompt_ids=PROMPT_IDS,
            generated_ids=REF_IDS,
            tokens=tokens,
            producer={"test": "hand-made"},
        ),
        refs,
    )
    return {"catalog": load_catalog(catalog), "catalog_path": catalog, "refs": refs, "results": tmp_path / "results"}


def _run(setup, engine, names=("tiny",), **options):
    options.setdefault("references_dir", setup["refs"])
    return validate_models(
        setup["catalog"].select(list(names)),
        engine,
        ValidateOptions(**options),
        results_dir=setup["results"],
        progress=False,
    )


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 3]) == 3
    assert common_prefix([1, 2, 3], [1, 9, 3]) == 1
    assert common_prefix([1, 2, 3], [1, 2]) == 2


def test_adapter_generates_with_extra_environment(fake_dbg, tmp_path):
    log = tmp_path / "argv.log"
    engine = make_engine("zinc-dbg", bin=str(fake_dbg))
    result = engine.generate(Path("m.gguf"), [1, 2, 3], 4, env={"FAKE_GEN_IDS": "9,8,7,6", "FAKE_LOG": str(log)})
    assert result.generated_ids == [9, 8, 7, 6]
    assert log.read_text().split() == ["gen", "1,2,3", "4", "m.gguf"]


def test_adapter_teacher_forced_and_throughput(fake_dbg):
    engine = make_engine("zinc-dbg", bin=str(fake_dbg))
    tf = engine.teacher_forced(Path("m.gguf"), [1, 2], [5, 6, 7], env={"FAKE_TF": "2/3"})
    assert (tf.match, tf.total) == (2, 3)
    rates = engine.throughput(Path("m.gguf"), "1,2,3,4,5", 8, env={"FAKE_GEN_IDS": "1"})
    assert (rates.prefill_tokens, rates.decode_tokens) == (5, 7)
    with pytest.raises(InputError, match="comma-separated token ids"):
        engine.throughput(Path("m.gguf"), "The capital of France is", 8)


@pytest.mark.parametrize("behaviour, reason", [("crash", "crash"), ("hang", "timeout"), ("garbage", "garbage")])
def test_adapter_failures(fake_dbg, behaviour, reason):
    engine = make_engine("zinc-dbg", bin=str(fake_dbg))
    with pytest.raises(EngineFailure) as info:
        engine.generate(Path("m.gguf"), [1, 2], 3, env={"FAKE_DBG": behaviour}, timeout_s=1.0)
    assert info.value.reason == reason
    if behaviour == "crash":
        assert "illegal memory access" in info.value.stderr_tail


def test_adapter_refuses_prompts_it_would_truncate(fake_dbg):
    engine = make_engine("zinc-dbg", bin=str(fake_dbg))
    with pytest.raises(InputError, match="at most 256 prompt ids"):
        engine.generate(Path("m.gguf"), list(range(257)), 4)
    with pytest.raises(EngineFailure, match="echoed different prompt ids"):
        engine.generate(Path("m.gguf"), [1, 2, 3], 4, env={"FAKE_GEN_IDS": "1", "FAKE_ECHO_DROP": "1"})


def test_generic_engine_from_yaml(fake_dbg, tmp_path):
    config = tmp_path / "engine.yaml"
    config.write_text(
        f"bin: {fake_dbg}\nenv: {{FAKE_GEN_IDS: '4,5'}}\n"
        "generate:\n  command: '{bin} gen {prompt_ids} {n_gen} {model}'\n  ids_regex: 'GEN_IDS:(.*)'\n"
    )
    engine = make_engine("generic", config=str(config))
    assert engine.generate(Path("m.gguf"), [1], 2).generated_ids == [4, 5]


def test_missing_binary_is_an_environment_problem(tmp_path):
    with pytest.raises(EnvironmentProblem, match="binary not found"):
        make_engine("zinc-dbg", bin=str(tmp_path / "no-such-dbg"))
    (tmp_path / "not-executable").write_text("#!/bin/sh\n")
    with pytest.raises(EnvironmentProblem, match="not executable"):
        make_engine("zinc-dbg", bin=str(tmp_path / "not-executable"))


def test_exact_pass_writes_a_validate_document(setup, fake_dbg):
    report = _run(setup, make_engine("zinc-dbg", bin=str(fake_dbg)), mode="exact")
    (o,) = report.outcomes
    assert (o.status, o.match, o.first_divergence, o.tf_match) == (Status.OK, 12, None, None)
    assert report.exit_code == ExitCode.OK and report.summary == "1/1 catalog models token-correct"
    doc = records.read(report.path)
    assert doc["kind"] == "validate" and doc["complete"] and doc["verdict"]["n_ok"] == 1
    frame = records.load(report.path)
    assert list(frame["status"]) == ["OK"] and list(frame["model"]) == ["tiny"]


def test_exact_fail_names_the_divergence_and_near_tie(setup, fake_dbg):
    report = _run(
        setup,
        make_engine("zinc-dbg", bin=str(fake_dbg)),
        mode="exact",
        env={"FAKE_GEN_IDS": _with_divergence(NEAR_TIE_POSITION)},
    )
    (o,) = report.outcomes
    assert (o.status, o.match, o.first_divergence) == (Status.FAIL, NEAR_TIE_POSITION, NEAR_TIE_POSITION)
    assert o.margin == pytest.approx(0.1) and o.near_tie
    assert report.exit_code == ExitCode.FAIL
    assert "| 0.100 | near-tie; not all identical |" in to_markdown(report)


def test_divergence_away_from_a_tie_is_not_labelled(setup, fake_dbg):
    report = _run(
        setup, make_engine("zinc-dbg", bin=str(fake_dbg)), mode="exact", env={"FAKE_GEN_IDS": _with_divergence(3)}
    )
    (o,) = report.outcomes
    assert o.margin == pytest.approx(2.0) and not o.near_tie


def test_tolerant_forgives_the_runner_up_at_a_late_near_tie_and_checks_the_rest_by_teacher_forcing(setup, fake_dbg):
    report = _run(
        setup,
        make_engine("zinc-dbg", bin=str(fake_dbg)),
        env={"FAKE_GEN_IDS": _with_divergence(LATE_NEAR_TIE_POSITION, RUNNER_UP), "FAKE_TF": "11/12"},
    )
    (o,) = report.outcomes
    assert (o.status, o.match, o.first_divergence, o.tf_match) == (Status.OK, 9, 9, 11)
    assert [f["position"] for f in o.forgiven] == [LATE_NEAR_TIE_POSITION] and o.forgiven[0]["margin"] == pytest.approx(
        0.05
    )
    assert "forgave 9 (near-tie: runner-up 9, margin 0.050 < 0.2)" in to_markdown(report)


def test_a_flip_followed_by_garbage_fails_and_the_note_keeps_the_reason(setup, fake_dbg):
    """After a forgiven near-tie the rest is still checked: teacher forcing finds the garbage."""
    report = _run(
        setup,
        make_engine("zinc-dbg", bin=str(fake_dbg)),
        env={"FAKE_GEN_IDS": _with_divergence(LATE_NEAR_TIE_POSITION, RUNNER_UP), "FAKE_TF": "9/12"},
    )
    (o,) = report.outcomes
    assert o.status is Status.FAIL and o.forgiven and "teacher-forced 9/12 < 10" in o.reason
    row = to_markdown(report)
    assert "forgave 9" in row and "teacher-forced 9/12 < 10" in row


@pytest.mark.parametrize("token", [7, 99999, 0, REF_IDS[LATE_NEAR_TIE_POSITION] + 1])
def test_tolerant_forgives_only_the_recorded_runner_up_at_a_near_tie(setup, fake_dbg, token):
    report = _run(
        setup,
        make_engine("zinc-dbg", bin=str(fake_dbg)),
        env={"FAKE_GEN_IDS": _with_divergence(LATE_NEAR_TIE_POSITION, token), "FAKE_TF": "12/12"},
    )
    (o,) = report.outcomes
    assert o.status is Status.FAIL and o.forgiven == [] and o.tf_match is None
    assert f"with token {token}, not llama.cpp's runner-up 9" in o.reason


@pytest.mark.parametrize("position", [2, 10])
def test_tolerant_fails_a_divergence_with_a_clear_margin_even_after_a_long_prefix(setup, fake_dbg, position):
    report = _run(
        setup,
        make_engine("zinc-dbg", bin=str(fake_dbg)),
        env={"FAKE_GEN_IDS": _with_divergence(position), "FAKE_TF": "12/12"},
    )
    (o,) = report.outcomes
    assert o.status is Status.FAIL and o.forgiven == [] and o.tf_match is None
    assert f"diverges at {position} where llama.cpp's margin 2.000 is not a near-tie" in o.reason


def test_near_tie_threshold_is_configurable(setup, fake_dbg):
    report = _run(
        setup,
        make_engine("zinc-dbg", bin=str(fake_dbg)),
        near_tie=0.01,
        env={"FAKE_GEN_IDS": _with_divergence(LATE_NEAR_TIE_POSITION, RUNNER_UP)},
    )
    assert report.outcomes[0].status is Status.FAIL and "not a near-tie (>= 0.01)" in report.outcomes[0].reason


# Two near-ties in the reference (positions 5 and 9): teacher forcing must agree on the other 10.
@pytest.mark.parametrize(
    "tf, status", [("12/12", Status.OK), ("10/12", Status.OK), ("9/12", Status.FAIL), ("8/12", Status.FAIL)]
)
def test_tolerant_checks_the_tokens_after_a_forgiven_flip_by_teacher_forcing(setup, fake_dbg, tf, status):
    report = _run(
        setup,
        make_engine("zinc-dbg", bin=str(fake_dbg)),
        env={"FAKE_GEN_IDS": _with_divergence(NEAR_TIE_POSITION, RUNNER_UP), "FAKE_TF": tf},
    )
    (o,) = report.outcomes
    assert (o.status, o.match, f"{o.tf_match}/{o.tf_total}") == (status, NEAR_TIE_POSITION, tf)


@pytest.mark.parametrize("tf", ["8/1000", "8/11", "12/13"])
def test_impossible_teacher_forced_total_fails(setup, fake_dbg, tf):
    report = _run(
        setup,
        make_engine("zinc-dbg", bin=str(fake_dbg)),
        env={"FAKE_GEN_IDS": _with_divergence(NEAR_TIE_POSITION, RUNNER_UP), "FAKE_TF": tf},
    )
    (o,) = report.outcomes
    assert o.status is Status.FAIL and f"teacher-forced total {tf.split('/')[1]} is not n_gen 12" in o.reason


@pytest.mark.parametrize("mode", ["tolerant", "exact"])
@pytest.mark.parametrize(
    "ids, words",
    [
        (REF_IDS[:8], "generated 8 tokens, expected n_gen 12 (short output)"),
        (REF_IDS + [5, 6], "generated 14 tokens, expected n_gen 12 (over-long output)"),
    ],
)
def test_short_or_over_long_output_fails(setup, fake_dbg, mode, ids, words):
    report = _run(setup, make_engine("zinc-dbg", bin=str(fake_dbg)), mode=mode, env={"FAKE_GEN_IDS": _ids(ids)})
    (o,) = report.outcomes
    assert o.status is Status.FAIL and words in o.reason and report.exit_code == ExitCode.FAIL


def test_min_match_override(setup, fake_dbg):
    report = _run(
        setup,
        make_engine("zinc-dbg", bin=str(fake_dbg)),
        min_match=11,
        env={"FAKE_GEN_IDS": _with_divergence(LATE_NEAR_TIE_POSITION, RUNNER_UP), "FAKE_TF": "10/12"},
    )
    assert report.outcomes[0].status is Status.FAIL
    with pytest.raises(InputError, match="exceeds n_gen"):
        _run(setup, make_engine("zinc-dbg", bin=str(fake_dbg)), min_match=13)


@pytest.mark.parametrize("behaviour", ["crash", "hang", "garbage"])
def test_engine_failures_are_error_rows(setup, fake_dbg, behaviour):
    report = _run(setup, make_engine("zinc-dbg", bin=str(fake_dbg)), timeout_s=1.0, env={"FAKE_DBG": behaviour})
    (o,) = report.outcomes
    assert o.status is Status.ERROR and report.exit_code == ExitCode.FAIL
    if behaviour == "crash":
        assert "illegal memory access" in o.stderr_tail
    assert records.read(report.path)["results"][0]["status"] == "ERROR"


def test_missing_models(setup, fake_dbg):
    engine = make_engine("zinc-dbg", bin=str(fake_dbg))
    report = _run(setup, engine, names=("tiny", "absent"))
    assert [o.status for o in report.outcomes] == [Status.OK, Status.MISSING]
    assert report.exit_code == ExitCode.FAIL and report.summary == "1/2 catalog models token-correct (1 missing)"
    assert _run(setup, engine, names=("tiny", "absent"), allow_missing=True).exit_code == ExitCode.OK
    assert _run(setup, engine, names=("absent",), allow_missing=True).exit_code == ExitCode.INCONCLUSIVE


def test_missing_reference_says_how_to_record_and_writes_nothing(setup, fake_dbg, tmp_path):
    with pytest.raises(InputError, match=r"zincbench validate record --gguf \S+tiny.gguf --models tiny"):
        _run(setup, make_engine("zinc-dbg", bin=str(fake_dbg)), references_dir=tmp_path / "empty")
    with pytest.raises(InputError, match="--full-hash"):
        _run(setup, make_engine("zinc-dbg", bin=str(fake_dbg)), full_hash=True)
    assert not setup["results"].exists()


def _cli(*args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_")}
    return subprocess.run(
        [sys.executable, "-m", "zincbench", "validate", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


def test_cli_table_json_markdown(setup, fake_dbg, tmp_path):
    common = [
        "--catalog",
        str(setup["catalog_path"]),
        "--models",
        "tiny",
        "--engine-bin",
        str(fake_dbg),
        "--references-dir",
        str(setup["refs"]),
        "--results-dir",
        str(setup["results"]),
    ]
    ok = _cli(*common, "--markdown", str(tmp_path / "report.md"), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "1/1 catalog models token-correct" in ok.stdout
    assert "| tiny | OK | 12/12 |" in (tmp_path / "report.md").read_text()

    failed = _cli(*common, "--json", "--mode", "exact", "--env", f"FAKE_GEN_IDS={_with_divergence(4)}", cwd=tmp_path)
    assert failed.returncode == 1, failed.stderr
    data = json.loads(failed.stdout)
    assert data["outcomes"][0]["first_divergence"] == 4 and data["outcomes"][0]["status"] == "FAIL"
    assert Path(data["results"]).is_file()


@pytest.mark.parametrize(
    "args, words",
    [
        (["--env", "NOEQUALS"], "expected KEY=VAL"),
        (["--models", "nope"], "unknown catalog model 'nope'"),
        (["--mode", "strict"], "'strict' is not one of"),
        (["--engine-kind", "generic"], "needs --engine-config"),
        (["--near-tie", "inf"], "--near-tie must be a finite non-negative logit margin"),
        (["--near-tie", "nan"], "--near-tie"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(setup, fake_dbg, tmp_path, args, words):
    result = _cli(
        "--catalog",
        str(setup["catalog_path"]),
        "--engine-bin",
        str(fake_dbg),
        "--references-dir",
        str(setup["refs"]),
        *args,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "results").exists()


def test_a_prompt_the_engine_would_truncate_is_refused_before_anything_runs(setup, fake_dbg, gguf, tmp_path):
    long_refs = tmp_path / "long-refs"
    reference_store.save(
        Reference(
            gguf=str(gguf),
            identity=reference_store.gguf_identity(gguf),
            prompt="The capital of France is",
            n_gen=12,
            prompt_ids=list(range(300)),
            generated_ids=REF_IDS,
            tokens=[TokenRow(t, 1.0, 0, 0.0) for t in REF_IDS],
            producer={},
        ),
        long_refs,
    )
    log = tmp_path / "argv.log"
    with pytest.raises(InputError, match="at most 256 prompt ids"):
        _run(setup, make_engine("zinc-dbg", bin=str(fake_dbg)), references_dir=long_refs, env={"FAKE_LOG": str(log)})
    assert not log.exists() and not setup["results"].exists()


def test_a_reference_shorter_than_n_gen_is_one_line_exit_2_and_no_results_file(setup, fake_dbg, gguf, tmp_path):
    (path,) = setup["refs"].glob("*.json")
    doc = records.read(path)
    doc["results"] = doc["results"][:10]
    path.write_text(json.dumps(doc))
    result = _cli(
        "--catalog",
        str(setup["catalog_path"]),
        "--models",
        "tiny",
        "--engine-bin",
        str(fake_dbg),
        "--references-dir",
        str(setup["refs"]),
        "--results-dir",
        str(setup["results"]),
        cwd=tmp_path,
    )
    assert result.returncode == 2 and "holds 10 token rows for n_gen 12" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not setup["results"].exists()


def test_a_native_crash_of_the_llama_cpp_reference_is_one_line_naming_the_signal_and_the_fix(gguf, monkeypatch):
    from zincbench.engines import llama_cpp
    from zincbench.measure import process

    def sigill(argv, **options):  # what a libllama built with AMX does on a host that lacks it
        return process.run_process(
            [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGILL)"], **options
        )

    monkeypatch.setattr(llama_cpp, "run_process", sigill)
    with pytest.raises(EnvironmentProblem) as exc:
        llama_cpp.decode_reference(gguf, "The capital of France is", 12)
    message = str(exc.value)
    assert "killed by SIGILL" in message and "\n" not in message
    assert (
        'CMAKE_ARGS="-DGGML_NATIVE=OFF"' in message
        and "--no-cache-dir --force-reinstall --no-binary llama-cpp-python" in message
    )


# --- a crashed child is a crash with its signal; only SIGILL is blamed on the CPU -------------------------


def _died(returncode: int, timed_out: bool):
    from zincbench.measure.process import ProcessResult

    return lambda argv, **options: ProcessResult(list(map(str, argv)), returncode, "", "boom", 5.0, timed_out)


@pytest.mark.parametrize("timed_out", [False, True])  # True: its crash outlasted the timeout (a long core dump)
def test_a_llama_cpp_reference_child_that_segfaults_is_a_crash_not_amx_nor_a_timeout(gguf, monkeypatch, timed_out):
    from zincbench.engines import llama_cpp

    monkeypatch.setattr(llama_cpp, "run_process", _died(-11, timed_out))
    with pytest.raises(EnvironmentProblem) as exc:
        llama_cpp.decode_reference(gguf, "The capital of France is", 12)
    message = str(exc.value)
    assert "crashed: killed by SIGSEGV" in message and "\n" not in message
    assert "AMX" not in message and "timed out" not in message and "GGML_NATIVE" not in message


def test_a_llama_cpp_reference_child_stopped_at_its_timeout_is_a_timeout(gguf, monkeypatch):
    from zincbench.engines import llama_cpp

    monkeypatch.setattr(llama_cpp, "run_process", _died(-15, True))  # our SIGTERM at the timeout
    with pytest.raises(EnvironmentProblem, match="timed out after 12 s"):
        llama_cpp.decode_reference(gguf, "The capital of France is", 12, timeout_s=12)


@pytest.mark.parametrize(
    "returncode, timed_out, reason, words",
    [
        (-11, False, "crash", "crashed: killed by SIGSEGV"),
        (-11, True, "crash", "crashed: killed by SIGSEGV"),
        (-6, True, "crash", "crashed: killed by SIGABRT"),
        (-15, True, "timeout", "timed out"),
        (-9, True, "timeout", "timed out"),
        (-15, False, "crash", "killed by SIGTERM"),  # someone else stopped it
    ],
)
def test_checked_tells_a_crash_from_a_timeout(returncode, timed_out, reason, words):
    from zincbench.measure.process import ProcessResult, checked

    with pytest.raises(EngineFailure) as exc:
        checked(ProcessResult(["engine"], returncode, "", "", 5.0, timed_out))
    assert exc.value.reason == reason and words in str(exc.value)


def test_an_engine_that_kills_itself_is_an_error_row_naming_the_signal(setup, tmp_path):
    crasher = tmp_path / "crasher"
    crasher.write_text(f"#!{sys.executable}\nimport os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    crasher.chmod(0o755)
    report = _run(setup, make_engine("zinc-dbg", bin=str(crasher)))
    (o,) = report.outcomes
    assert o.status is Status.ERROR and o.reason == "crash: crasher crashed: killed by SIGSEGV"


def test_validate_record_takes_a_timeout(setup, monkeypatch, capsys):
    from zincbench.cli import main
    from zincbench.engines import llama_cpp
    from zincbench.runs import validate

    seen = {}
    monkeypatch.setattr(llama_cpp, "import_llama_cpp", lambda: None)
    monkeypatch.setattr(validate, "record_references", lambda models, directory, **kw: seen.update(kw) or [])
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "validate",
                "record",
                "--catalog",
                str(setup["catalog_path"]),
                "--models",
                "tiny",
                "--timeout",
                "42",
                "--references-dir",
                str(setup["refs"]),
            ]
        )
    assert exc.value.code == 0 and seen["timeout_s"] == 42.0
