"""`zincbench ab` end to end against the fake engine: verdicts, exit codes and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_engine import write_launcher

from zincbench.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "llama-bench"


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_COUNTER", str(tmp_path / "counter"))
    monkeypatch.setenv("FAKE_NOISE", "0.01")
    monkeypatch.setenv("COLUMNS", "200")  # the scoreboard table unwrapped
    for var in ("FAKE_SPEED", "FAKE_DRIFT", "FAKE_SEED", "FAKE_FAIL", "FAKE_FAIL_RUNS"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "tiny.gguf").touch()
    return write_launcher(tmp_path)


def run(tmp_path, capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["ab", "--results-dir", str(tmp_path / "results"), *args])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_slower_build_exits_1_with_scoreboard_markdown_and_csv(tmp_path, capsys, fake):
    code, out, err = run(
        tmp_path,
        capsys,
        "--a",
        str(fake),
        "--b",
        str(fake),
        "--env-b",
        "FAKE_SPEED=0.95",
        "--model",
        f"tiny={tmp_path / 'tiny.gguf'}",
        "--markdown",
        str(tmp_path / "sb.md"),
    )
    assert code == 1
    assert "tiny" in out and "slower" in out and "verdict: slower (exit 1)" in out.replace("\n", " ")
    markdown = (tmp_path / "sb.md").read_text()
    assert markdown.count("\n| tiny |") == 1 and "| slower |" in markdown
    (csv_path,) = (tmp_path / "results").glob("ab-*.csv")
    import pandas as pd

    frame = pd.read_csv(csv_path)
    assert frame.loc[0, "prefill_verdict"] == "slower" and frame.loc[0, "A_n"] == frame.loc[0, "rounds"]


def test_json_output_for_a_feature_flag_a_a(tmp_path, capsys, fake):
    code, out, _ = run(
        tmp_path,
        capsys,
        "--a",
        str(fake),
        "--b",
        str(fake),
        "--env-a",
        "ZINC_FLAG=0",
        "--env-b",
        "ZINC_FLAG=1",
        "--model",
        f"tiny={tmp_path / 'tiny.gguf'}",
        "--json",
    )
    data = json.loads(out)
    assert code == 0 and data["overall"] == "same" and data["exit_code"] == 0 and data["complete"] is True
    saved = json.loads(Path(data["results"]).read_text())
    assert saved["config"]["arms"]["B"]["env"] == {"ZINC_FLAG": "1"}


def test_scoreboard_of_one_build_against_a_llama_bench_file(tmp_path, capsys, fake):
    rows = [json.loads(line) for line in (FIXTURES / "tiny.jsonl").read_text().splitlines()]
    gguf = tmp_path / Path(rows[0]["model_filename"]).name
    gguf.touch()
    code, out, _ = run(
        tmp_path,
        capsys,
        "--a",
        str(fake),
        "--model",
        f"tiny={gguf}",
        "--llama-bench",
        str(FIXTURES / "tiny.md"),
        "--json",
    )
    model = json.loads(out)["models"][0]
    assert code == 0 and model["verdict"] == "measured"
    assert model["llama"]["pp"]["avg_ts"] > 0 and model["gap"] is not None


def test_engine_crash_exits_3_and_says_so(tmp_path, capsys, fake, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL", "crash")
    code, out, err = run(
        tmp_path,
        capsys,
        "--a",
        str(fake),
        "--b",
        str(fake),
        "--model",
        f"tiny={tmp_path / 'tiny.gguf'}",
        "--rounds",
        "2",
    )
    assert code == 3
    assert "exited with code 134" in err and "verdict: error (exit 3)" in out.replace("\n", " ")
    (csv_path,) = (tmp_path / "results").glob("ab-*.csv")
    import pandas as pd

    assert pd.read_csv(csv_path).loc[0, "failed_runs"] == 4  # the measured runs; the warm-up's are listed, not counted


@pytest.mark.parametrize(
    "args, message",
    [
        (["--models", "no-such-model"], "unknown catalog model 'no-such-model'"),
        (["--model", "tiny=/nonexistent/x.gguf"], "GGUF file not found"),
        (["--model", "broken"], "expected KEY=VAL"),
        (["--model", "tiny=TINY", "--llama-bench", str(FIXTURES / "tiny-truncated.json")], "tiny-truncated.json:"),
        (["--model", "tiny=TINY", "--rounds", "1"], "--rounds must be at least 2"),
        (["--model", "tiny=TINY", "--max-rounds", "4"], "--max-rounds at least --min-rounds"),
        (["--model", "tiny=TINY", "--max-time", "nan"], "--max-time must be positive"),
        (["--model", "tiny=TINY", "--env-b", "X=1"], "--env-b needs --b"),
        (["--model", "tiny=TINY", "--engine-kind", "zinc-dbg", "--prompt-tokens", "512"], "at most 256"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, fake, args, message):
    args = [a.replace("TINY", str(tmp_path / "tiny.gguf")) for a in args]
    code, out, err = run(tmp_path, capsys, "--a", str(fake), *args)
    assert code == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_missing_binary_is_bad_input(tmp_path, capsys, fake):
    code, _, err = run(tmp_path, capsys, "--a", str(tmp_path / "nope"), "--model", f"tiny={tmp_path / 'tiny.gguf'}")
    assert code == 2 and "does not exist" in err


def test_unparsable_engine_output_is_reported(tmp_path, capsys, fake, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL", "garbage")
    code, out, err = run(
        tmp_path, capsys, "--a", str(fake), "--model", f"tiny={tmp_path / 'tiny.gguf'}", "--rounds", "2"
    )
    assert code == 3 and "no 'Prefill complete" in err


# --- engines that cannot start: bad input before anything is written -------------------------------------


@pytest.mark.parametrize(
    "content, mode, message",
    [
        ("#!/bin/sh\necho hi\n", 0o644, "is not executable"),
        (
            "#!/nonexistent/python3\nprint('hi')\n",
            0o755,
            "bad #! line: its interpreter '/nonexistent/python3' does not exist",
        ),
        ("#!/bin/sh\r\necho hi\n", 0o755, "bad #! line: its interpreter '/bin/sh\\r' does not exist"),  # CRLF script
    ],
)
def test_an_engine_that_cannot_start_is_one_line_exit_2_and_no_results_file(
    tmp_path, capsys, fake, content, mode, message
):
    engine = tmp_path / "engine"
    engine.write_text(content)
    engine.chmod(mode)
    code, out, err = run(
        tmp_path,
        capsys,
        "--a",
        str(fake),
        "--b",
        str(engine),
        "--model",
        f"tiny={tmp_path / 'tiny.gguf'}",
        "--rounds",
        "2",
    )
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert message in err and "arm B" in err and "not found" not in err
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").iterdir())


def test_launch_problem_says_what_is_wrong(tmp_path):
    from zincbench.measure.process import EngineFailure, launch_problem, run_process

    script = tmp_path / "script"
    script.write_text("#!/nonexistent/interp\n")
    script.chmod(0o755)
    assert launch_problem(sys_executable()) is None and launch_problem(tmp_path / "nope") == "not found"
    assert launch_problem(tmp_path) == "is a folder, not a program"
    with pytest.raises(EngineFailure) as exc:
        run_process([script], timeout_s=30)
    assert "/nonexistent/interp" in str(exc.value) and "does not exist" in str(exc.value)


def sys_executable():
    import sys

    return sys.executable


def test_ab_and_aa_ab_declare_the_a_b_options_once():
    """`zincbench aa ab` runs the A/B of `zincbench ab`: the options they share read the same in both --helps;
    ab's defaults are ABSettings', aa's are unset (its --config file fills them)."""
    from zincbench.cli import aa, ab
    from zincbench.runs.ab import ABSettings

    ab_options = {p.name: p for p in ab.command.params}
    aa_options = {p.name: p for p in aa.command.commands["ab"].params}
    design = {"min_rounds", "max_rounds", "max_time_s", "order", "threshold", "prompt_tokens", "n_gen", "timeout_s"}
    for name in {"engine_kind", "engine_config", "catalog_path", "model_names", "model_pairs", "rounds", *design}:
        assert ab_options[name].help == aa_options[name].help and ab_options[name].opts == aa_options[name].opts, name
    for name in design:
        assert ab_options[name].default == getattr(ABSettings(), name) and aa_options[name].default is None, name
