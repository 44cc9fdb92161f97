"""The A/B runner and its statistics, driven through the fake engine (tests/fake_engine.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_engine import write_launcher
from hypothesis import given, settings
from hypothesis import strategies as st

from zincbench.catalog import CatalogModel
from zincbench.engines import make_engine
from zincbench.engines.base import Engine, ThroughputResult
from zincbench.errors import EnvironmentProblem, ExitCode, InputError
from zincbench.measure.llama_bench import load as load_llama_bench
from zincbench.runs.ab import (
    P90_MIN_SAMPLES,
    ABSettings,
    Arm,
    combine_verdicts,
    nearest_rank,
    neutral_prompt,
    round_orders,
    run_ab,
    summarize_recorded,
)
from zincbench.runs.ab_rows import ABRun, ScoreboardRow

FIXTURES = Path(__file__).parent / "fixtures" / "llama-bench"


class FakeMonitor:
    """NVML stand-in: a GPU with fixed clocks and, optionally, other compute processes on it."""

    def __init__(self, available=True, others=()):
        self.available = available
        self.error = None if available else "NVMLError_LibraryNotFound: NVML Shared Library Not Found"
        self.others = list(others)

    def snapshot(self):
        if not self.available:
            return {"available": False, "error": self.error}
        return {
            "available": True,
            "uuid": "GPU-fake",
            "sm_clock_mhz": 1980,
            "temperature_c": 41,
            "power_w": 88.5,
            "other_compute_processes": self.others,
        }


def tiny_model(path: Path, name="tiny", gguf_name="tiny.gguf", shape="dense") -> CatalogModel:
    gguf = path / gguf_name
    gguf.touch()
    return CatalogModel(
        name=name, gguf_template=str(gguf), arch="llama", shape=shape, prompt="x", n_gen=12, min_match=8
    )


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """The fake engine launcher, with a run counter so every run draws fresh noise."""
    monkeypatch.setenv("FAKE_COUNTER", str(tmp_path / "counter"))
    for var in ("FAKE_SPEED", "FAKE_NOISE", "FAKE_DRIFT", "FAKE_SEED", "FAKE_FAIL", "FAKE_FAIL_RUNS"):
        monkeypatch.delenv(var, raising=False)
    return write_launcher(tmp_path)


def ab(tmp_path, fake_bin, env_a=None, env_b=None, kind="zinc-main", models=None, monitor=None, **settings):
    arms = [Arm("A", make_engine(kind, bin=fake_bin), env_a or {})]
    if env_b is not None:
        arms.append(Arm("B", make_engine(kind, bin=fake_bin), env_b))
    settings.setdefault("timeout_s", 60)
    return run_ab(
        models or [tiny_model(tmp_path)],
        arms,
        ABSettings(**settings),
        results_dir=tmp_path / "results",
        monitor=monitor or FakeMonitor(),
        progress=False,
    )


# --- plan and statistics ------------------------------------------------------------------------------


def test_neutral_prompt_is_deterministic_and_scales_with_tokens():
    assert neutral_prompt(512) == neutral_prompt(512)
    assert 1.8 < len(neutral_prompt(1024)) / len(neutral_prompt(512)) < 2.2
    assert neutral_prompt(1)  # never empty


def test_round_orders_counterbalance():
    assert round_orders("AB", 4, "abba") == [("A", "B"), ("B", "A"), ("A", "B"), ("B", "A")]
    assert round_orders("AB", 3, "ab") == [("A", "B")] * 3
    shuffled = round_orders("AB", 20, "random", seed=3)
    assert shuffled == round_orders("AB", 20, "random", seed=3)
    assert {order for order in shuffled} == {("A", "B"), ("B", "A")}
    with pytest.raises(InputError, match="unknown run order"):
        round_orders("AB", 2, "zigzag")


def test_nearest_rank_p90_is_the_scoreboard_scripts_rule():
    assert nearest_rank([5, 1, 4, 2, 3], 0.9) == 5  # n = 5: p90 is the maximum
    assert nearest_rank(range(1, 11), 0.9) == 9  # index int(9 * 0.9 + 0.5) = 8
    assert nearest_rank([3, 1, 2], 0.5) == 2


@pytest.mark.parametrize(
    "prefill, decode, expected",
    [
        ("slower", "same", "slower"),
        ("faster", "inconclusive", "faster"),
        ("same", "same", "same"),
        ("same", "inconclusive", "inconclusive"),
        ("faster", "slower", "slower"),
        ("same", None, "same"),
    ],
)
def test_combine_verdicts(prefill, decode, expected):
    assert combine_verdicts(prefill, decode) == expected


# --- A/B verdicts -------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", ["0", "1"])
def test_injected_5pct_slowdown_is_slower_within_6_rounds_at_1pct_noise(tmp_path, fake, monkeypatch, seed):
    monkeypatch.setenv("FAKE_NOISE", "0.01")
    monkeypatch.setenv("FAKE_SEED", seed)
    out = ab(tmp_path, fake, env_b={"FAKE_SPEED": "0.95"}, rounds=6)
    model = out.models[0]
    assert model.verdict == "slower" and out.overall == "slower" and out.exit_code == ExitCode.FAIL
    assert model.prefill.n_pairs == 6
    assert model.prefill.ci[1] < 0.98  # the whole interval beyond the 2% threshold
    assert 0.93 < model.prefill.ratio < 0.97


@pytest.mark.parametrize("seed", ["0", "1"])
def test_a_a_run_keeps_interleaving_until_it_is_same(tmp_path, fake, monkeypatch, seed):
    monkeypatch.setenv("FAKE_NOISE", "0.01")
    monkeypatch.setenv("FAKE_SEED", seed)
    out = ab(tmp_path, fake, env_b={})
    model = out.models[0]
    assert model.prefill.verdict == "same" and model.decode.verdict == "same"
    assert out.overall == "same" and out.exit_code == ExitCode.OK
    design = ABSettings().design()
    assert model.stop == "decided" and model.rounds in design.looks()
    assert model.prefill.confidence == pytest.approx(design.confidence_at(model.rounds))
    assert len(out.document.results) == 2 * (model.rounds + 1)  # no run after the deciding look


def test_a_recorded_adaptive_run_is_rejudged_to_the_same_verdict(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_NOISE", "0.01")
    out = ab(tmp_path, fake, env_b={})
    saved = json.loads(out.path.read_text())
    runs = [ABRun.from_json(r) for r in saved["results"]]
    again = summarize_recorded(tiny_model(tmp_path), runs, ["A", "B"], saved["config"]["settings"])
    assert again.verdict == out.models[0].verdict and again.prefill == out.models[0].prefill


def test_slowdown_is_called_at_an_early_look(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_NOISE", "0.01")
    out = ab(tmp_path, fake, env_b={"FAKE_SPEED": "0.95"})
    model = out.models[0]
    assert model.verdict == "slower" and model.stop == "decided"
    assert model.rounds < ABSettings().max_rounds


def test_undecidable_noise_spends_the_round_budget_and_is_inconclusive(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_NOISE", "0.3")
    out = ab(tmp_path, fake, env_b={}, min_rounds=4, max_rounds=8)
    model = out.models[0]
    assert model.verdict == "inconclusive" and model.stop == "max rounds" and model.rounds == 8
    assert out.exit_code == ExitCode.INCONCLUSIVE


def test_time_budget_stops_at_the_first_look(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_NOISE", "0.3")
    out = ab(tmp_path, fake, env_b={}, min_rounds=2, max_rounds=20, max_time_s=1e-9)
    model = out.models[0]
    assert model.stop == "max time" and model.rounds == 2 and model.verdict == "inconclusive"


def test_faster_candidate(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_NOISE", "0.01")
    out = ab(tmp_path, fake, env_b={"FAKE_SPEED": "1.10"}, rounds=4)
    assert out.models[0].verdict == "faster" and out.exit_code == ExitCode.OK


def test_abba_order_keeps_drift_from_posing_as_a_regression(tmp_path, fake, monkeypatch):
    # Every run 2.5% slower than the one before (a GPU heating up): with a fixed A-then-B order an A/A
    # comparison reads as a regression; counterbalanced, the drift cancels and it is no longer "slower".
    monkeypatch.setenv("FAKE_DRIFT", "-0.025")
    fixed = ab(tmp_path, fake, env_b={}, rounds=4, order="ab")
    assert fixed.models[0].prefill.verdict == "slower"
    balanced = ab(tmp_path, fake, env_b={}, rounds=4, order="abba")
    assert balanced.models[0].prefill.verdict != "slower"
    assert balanced.models[0].prefill.ratio == pytest.approx(1.0, abs=0.01)


def test_warmup_is_run_and_discarded(tmp_path, fake):
    out = ab(tmp_path, fake, env_b={}, rounds=2)
    rounds = [(r.arm, r.round, r.warmup) for r in out.document.results]
    assert rounds == [
        ("A", 0, True),
        ("B", 0, True),
        ("A", 1, False),
        ("B", 1, False),
        ("B", 2, False),
        ("A", 2, False),
    ]
    assert out.models[0].arms["A"].n == 2


# --- records, GPU checks -------------------------------------------------------------------------------


def test_results_written_with_gpu_state_per_run(tmp_path, fake):
    out = ab(tmp_path, fake, env_b={}, rounds=2, gpu_uuid="GPU-fake")
    saved = json.loads(out.path.read_text())
    assert saved["kind"] == "ab" and saved["complete"] is True
    assert len(saved["results"]) == 6
    run = saved["results"][2]
    assert run["status"] == "ok" and run["gpu"]["sm_clock_mhz"] == 1980 and run["gpu"]["temperature_c"] == 41
    assert run["gpu_after"]["power_w"] == 88.5
    assert run["prefill_tokens"] > 1 and run["decode_tokens"] == 160
    assert saved["verdict"]["overall"] == "same" and saved["verdict"]["models"][0]["model"] == "tiny"
    assert saved["config"]["settings"]["gpu_uuid"] == "GPU-fake"


def test_scoreboard_rows_round_trip_through_json(tmp_path, fake):
    """The typed scoreboard row a run returns is the one its document records: to JSON and back equals."""
    out = ab(tmp_path, fake, env_b={"FAKE_SPEED": "0.95"}, rounds=3)
    (recorded,) = json.loads(out.path.read_text())["verdict"]["models"]
    assert ScoreboardRow.from_json(recorded) == out.models[0]
    assert ScoreboardRow.from_json(recorded).to_json() == recorded
    assert "llama" not in recorded  # no llama-bench source: the key is left out, as before


@pytest.mark.parametrize(
    "row, problem",
    [
        ({"model": "m", "verdict": "same", "errors": [], "arms": {}, "speedup": 2}, "unknown key"),
        ({"model": "m", "verdict": "same", "errors": []}, "arms must be an object"),
        ({"model": "m", "verdict": "same", "errors": [], "arms": {"A": {"n": 1}}}, "n_decode"),
        (
            {"model": "m", "verdict": "same", "errors": [], "arms": {}, "prefill": [1.0]},
            "paired ratio must be an object",
        ),
    ],
)
def test_a_misshapen_scoreboard_row_names_what_is_wrong(row, problem):
    with pytest.raises((TypeError, ValueError), match=problem):
        ScoreboardRow.from_json(row)


def test_gpu_pinned_by_uuid(tmp_path):
    seen = []

    class Recorder(Engine):
        kind = "recorder"

        def throughput(self, model, prompt_text, n_gen, *, env=None, timeout_s=600.0):
            seen.append(env["CUDA_VISIBLE_DEVICES"])
            return ThroughputResult(100, 1000.0, n_gen, 50.0)

    run_ab(
        [tiny_model(tmp_path)],
        [Arm("A", Recorder())],
        ABSettings(rounds=2, gpu_uuid="GPU-1234"),
        results_dir=tmp_path,
        monitor=FakeMonitor(),
        progress=False,
    )
    assert seen == ["GPU-1234"] * 3


def test_busy_gpu_warns_or_aborts(tmp_path, fake):
    busy = FakeMonitor(others=[{"pid": 4242, "used_mib": 2048}])
    out = ab(tmp_path, fake, rounds=2, monitor=busy)
    assert any("pid 4242" in note for note in out.document.notes)
    with pytest.raises(EnvironmentProblem, match="pid 4242"):
        ab(tmp_path, fake, rounds=2, monitor=busy, require_clean_gpu=True)


def test_no_nvml_is_recorded_as_unavailable(tmp_path, fake):
    out = ab(tmp_path, fake, rounds=2, monitor=FakeMonitor(available=False))
    assert out.document.results[0].gpu == {"available": False, "error": FakeMonitor(False).error}
    assert any("NVML unavailable" in note for note in out.document.notes)
    assert out.exit_code == ExitCode.OK


def test_unknown_gpu_uuid_is_bad_input(tmp_path, fake):
    monitor = FakeMonitor(available=False)
    monitor.error = "NVMLError_NotFound: Not Found"
    monitor.unknown_uuid = True  # what Nvml sets when NVML answers NotFound for the UUID
    with pytest.raises(InputError, match="no GPU with this UUID"):
        ab(tmp_path, fake, rounds=2, monitor=monitor, gpu_uuid="GPU-00000000")


def test_missing_nvml_is_not_an_unknown_uuid(tmp_path, fake):
    # "LibraryNotFound" contains "NotFound": the UUID must not be blamed when NVML itself is missing.
    outcome = ab(tmp_path, fake, rounds=2, monitor=FakeMonitor(available=False), gpu_uuid="GPU-00000000")
    assert outcome.document.complete


def test_interrupted_run_keeps_what_it_measured(tmp_path):
    class Interrupted(Engine):
        kind = "interrupted"
        calls = 0

        def throughput(self, model, prompt_text, n_gen, *, env=None, timeout_s=600.0):
            Interrupted.calls += 1
            if Interrupted.calls == 3:
                raise KeyboardInterrupt
            return ThroughputResult(100, 1000.0, n_gen, 50.0)

    with pytest.raises(KeyboardInterrupt):
        run_ab(
            [tiny_model(tmp_path)],
            [Arm("A", Interrupted()), Arm("B", Interrupted())],
            ABSettings(rounds=2),
            results_dir=tmp_path / "r",
            monitor=FakeMonitor(),
            progress=False,
        )
    (saved,) = [json.loads(p.read_text()) for p in (tmp_path / "r").glob("ab-*.json")]
    assert saved["complete"] is False and len(saved["results"]) == 2
    assert any("interrupted" in note for note in saved["notes"])


# --- failures ------------------------------------------------------------------------------------------


def test_crash_becomes_an_error_entry_judged_apart_from_the_verdict(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL", "crash")
    monkeypatch.setenv("FAKE_FAIL_RUNS", "3")  # the 4th run: round 1, arm B
    out = ab(tmp_path, fake, env_b={}, rounds=3)
    model = out.models[0]
    (error,) = model.errors
    assert error["arm"] == "B" and error["round"] == 1 and error["reason"] == "crash"
    assert "CUDA error 700" in error["stderr_tail"]
    assert model.failed_runs == 1 and any("1 failed run" in note for note in model.notes)
    assert model.prefill.n_pairs == 2  # the other rounds still pair up
    assert model.verdict == "same" and out.exit_code == ExitCode.OK  # noise-free fake: identical rates
    assert out.document.complete is True


def test_a_failed_run_does_not_mask_a_regression(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_NOISE", "0.01")
    monkeypatch.setenv("FAKE_FAIL", "crash")
    monkeypatch.setenv("FAKE_FAIL_RUNS", "5")  # round 2, arm B
    out = ab(tmp_path, fake, env_b={"FAKE_SPEED": "0.95"})
    model = out.models[0]
    assert model.failed_runs == 1 and model.verdict == "slower" and out.exit_code == ExitCode.FAIL


def test_failures_above_the_cap_are_an_error(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL", "crash")
    monkeypatch.setenv("FAKE_FAIL_RUNS", "2,3,5")  # 3 of 4 measured runs
    out = ab(tmp_path, fake, env_b={}, rounds=2, max_failure_rate=0.5)
    model = out.models[0]
    assert model.verdict == "error" and model.failed_runs == 3 and out.exit_code == ExitCode.INCONCLUSIVE
    assert any("3 of 4 measured runs failed" in note for note in model.notes)


def test_hang_is_killed_at_the_timeout(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL", "hang")
    monkeypatch.setenv("FAKE_FAIL_RUNS", "2")
    out = ab(tmp_path, fake, env_b={}, rounds=2, timeout_s=2)
    (error,) = out.models[0].errors
    assert error["reason"] == "timeout" and error["round"] == 1
    assert out.models[0].failed_runs == 1 and out.models[0].verdict == "inconclusive"  # one pair decides nothing


def test_p90_is_reported_only_from_enough_runs(tmp_path, fake):
    few = ab(tmp_path, fake, rounds=P90_MIN_SAMPLES - 1).models[0].arms["A"]
    enough = ab(tmp_path, fake, rounds=P90_MIN_SAMPLES).models[0].arms["A"]
    assert few.prefill_p90 is None and few.decode_p90 is None and few.prefill_median is not None
    assert enough.prefill_p90 is not None and enough.decode_p90 is not None


def test_an_undecided_scoreboard_runs_enough_rounds_for_its_p90(tmp_path, fake):
    assert ab(tmp_path, fake).models[0].arms["A"].n == P90_MIN_SAMPLES


def test_csv_is_written_before_the_document_says_complete(tmp_path, fake, monkeypatch):
    import zincbench.runs.ab

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(zincbench.runs.ab, "write_scoreboard_csv", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ab(tmp_path, fake, env_b={}, rounds=2)
    (saved,) = [json.loads(p.read_text()) for p in (tmp_path / "results").glob("ab-*.json")]
    assert saved["complete"] is False and saved["verdict"]["overall"] == "same"


def test_decode_line_that_never_parses_is_a_warning(tmp_path):
    class PrefillOnly(Engine):
        kind = "prefill-only"

        def throughput(self, model, prompt_text, n_gen, *, env=None, timeout_s=600.0):
            return ThroughputResult(100, 1000.0)

    out = run_ab(
        [tiny_model(tmp_path)],
        [Arm("A", PrefillOnly())],
        ABSettings(rounds=2),
        results_dir=tmp_path,
        monitor=FakeMonitor(),
        progress=False,
    )
    assert any("no run printed a decode rate" in note for note in out.document.notes)


def test_garbage_output_of_one_arm(tmp_path, fake):
    out = ab(tmp_path, fake, env_b={"FAKE_FAIL": "garbage"}, rounds=2)
    model = out.models[0]
    assert {e["reason"] for e in model.errors} == {"garbage"} and len(model.errors) == 3
    assert model.prefill is None and model.verdict == "error"
    assert model.arms["A"].n == 2 and model.arms["B"].n == 0


def test_missing_model_file_is_bad_input(tmp_path, fake):
    model = CatalogModel(
        name="ghost",
        gguf_template=str(tmp_path / "ghost.gguf"),
        arch=None,
        shape=None,
        prompt="x",
        n_gen=1,
        min_match=1,
    )
    with pytest.raises(InputError, match="GGUF file not found"):
        ab(tmp_path, fake, models=[model])


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"rounds": 1}, "--rounds"),
        ({"threshold": 2.0}, "--threshold"),
        ({"order": "zz"}, "--order"),
        ({"timeout_s": 0}, "--timeout"),
        ({"timeout_s": float("nan")}, "--timeout"),
        ({"max_time_s": -1}, "--max-time"),
        ({"min_rounds": 8, "max_rounds": 6}, "--max-rounds"),
        ({"alpha": 0}, "--alpha"),
        ({"look_every": 0}, "--look-every"),
        ({"max_failure_rate": 1}, "--max-failure-rate"),
    ],
)
def test_bad_settings(tmp_path, fake, settings, message):
    with pytest.raises(ValueError, match=message):
        ab(tmp_path, fake, **settings)


# --- other engines, the llama-bench baseline -------------------------------------------------------


def test_zinc_dbg_engine_gets_token_ids(tmp_path, fake):
    out = ab(tmp_path, fake, env_b={}, kind="zinc-dbg", rounds=2, prompt_tokens=250, n_gen=8)
    assert out.models[0].prefill_tokens == 250
    assert out.document.results[2].decode_tokens == 7  # cuda-dbg counts n_gen - 1 decode steps
    with pytest.raises(InputError, match="at most 256"):
        ab(tmp_path, fake, kind="zinc-dbg", prompt_tokens=512)


def test_two_llama_bench_builds(tmp_path, fake):
    arms = [
        Arm("A", make_engine("llama-bench", bin=fake, prompt_tokens=64), {}),
        Arm("B", make_engine("llama-bench", bin=fake, prompt_tokens=64), {"FAKE_SPEED": "0.9"}),
    ]
    out = run_ab(
        [tiny_model(tmp_path)],
        arms,
        ABSettings(rounds=2, n_gen=16),
        results_dir=tmp_path,
        monitor=FakeMonitor(),
        progress=False,
    )
    model = out.models[0]
    assert model.prefill_tokens == 64 and model.verdict == "slower"
    assert model.prefill.ratio == pytest.approx(0.9, rel=1e-3)


def test_scoreboard_against_a_llama_bench_file(tmp_path, fake):
    rows = load_llama_bench(FIXTURES / "tiny.jsonl")
    model = tiny_model(tmp_path, name="tiny", gguf_name=Path(rows[0].model_filename).name)
    out = run_ab(
        [model],
        [Arm("A", make_engine("zinc-main", bin=fake), {})],
        ABSettings(),
        llama_rows=rows,
        results_dir=tmp_path,
        monitor=FakeMonitor(),
        progress=False,
    )
    summary = out.models[0]
    pp = min((r for r in rows if r.is_prefill), key=lambda r: abs(r.n_prompt - summary.prefill_tokens))
    assert summary.llama["pp"]["test"] == pp.test
    assert summary.gap == pytest.approx(pp.avg_ts / summary.arms["A"].prefill_p90)
    assert summary.verdict == "measured" and out.exit_code == ExitCode.OK


def test_llama_rows_of_another_model_are_not_used(tmp_path, fake):
    rows = load_llama_bench(FIXTURES / "tiny.jsonl")
    out = run_ab(
        [tiny_model(tmp_path, name="other", gguf_name="other.gguf")],
        [Arm("A", make_engine("zinc-main", bin=fake), {})],
        ABSettings(rounds=2),
        llama_rows=rows,
        results_dir=tmp_path,
        monitor=FakeMonitor(),
        progress=False,
    )
    assert out.models[0].llama is None and out.models[0].gap is None
    assert any("no row of the --llama-bench file matches" in note for note in out.document.notes)


def test_live_llama_bench(tmp_path, fake):
    out = run_ab(
        [tiny_model(tmp_path)],
        [Arm("A", make_engine("zinc-main", bin=fake), {})],
        ABSettings(n_gen=32),
        llama_bench_bin=fake,
        results_dir=tmp_path,
        monitor=FakeMonitor(),
        progress=False,
    )
    summary = out.models[0]
    assert summary.llama["pp"]["n_prompt"] == summary.prefill_tokens
    assert summary.llama["tg"]["test"] == "tg32"
    assert summary.gap == pytest.approx(summary.llama["pp"]["avg_ts"] / summary.arms["A"].prefill_p90)


# --- rates of zero -------------------------------------------------------------------------------------


def test_a_build_that_reports_zero_tok_s_is_slower_not_a_crash(tmp_path, fake):
    out = ab(tmp_path, fake, env_b={"FAKE_PREFILL_TPS": "0"}, rounds=3)
    model = out.models[0]
    assert model.verdict == "slower" and out.exit_code == ExitCode.FAIL
    assert any("zero rate" in note for note in model.notes)
    assert {e["reason"] for e in model.errors} == {"zero-rate"} and model.failed_runs == 3
    rejudged = summarize_recorded(
        out.models and tiny_model(tmp_path),
        [ABRun.from_json(r) for r in json.loads(out.path.read_text())["results"]],
        ["A", "B"],
        json.loads(out.path.read_text())["config"]["settings"],
    )
    assert rejudged.verdict == "slower"


def test_a_baseline_that_reports_zero_tok_s_is_an_error_not_a_crash(tmp_path, fake):
    out = ab(tmp_path, fake, env_a={"FAKE_DECODE_TPS": "0"}, env_b={}, rounds=3)
    model = out.models[0]
    assert model.verdict == "error" and out.exit_code == ExitCode.INCONCLUSIVE
    assert "zero-rate" in {e["reason"] for e in model.errors}


def test_a_dropped_decode_sample_is_reported(tmp_path):
    class SometimesNoDecode(Engine):
        kind = "sometimes-no-decode"
        calls = 0

        def throughput(self, model, prompt_text, n_gen, *, env=None, timeout_s=600.0):
            SometimesNoDecode.calls += 1
            return ThroughputResult(100, 1000.0, *((None, None) if SometimesNoDecode.calls == 4 else (n_gen, 50.0)))

    out = run_ab(
        [tiny_model(tmp_path)],
        [Arm("A", SometimesNoDecode()), Arm("B", SometimesNoDecode())],
        ABSettings(rounds=3),
        results_dir=tmp_path,
        monitor=FakeMonitor(),
        progress=False,
    )
    model = out.models[0]
    assert model.decode.n_pairs == 2
    assert any("1 of 3 successful runs printed no decode rate" in note for note in model.notes)


rates = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(0.0), st.floats(1.0, 5000.0))


@given(
    st.lists(st.tuples(rates, st.one_of(st.none(), rates), rates, st.one_of(st.none(), rates)), min_size=1, max_size=8)
)
@settings(deadline=None, max_examples=200)
def test_any_recorded_rates_judge_without_an_exception(rounds):
    """Whatever rates a results file holds (zero, negative, NaN, inf), the judge gives a verdict."""
    from zincbench.runs.ab import VERDICT_EXIT, summarize_model

    runs = []
    for i, (pa, da, pb, db) in enumerate(rounds, start=1):
        for arm, (p, d) in (("A", (pa, da)), ("B", (pb, db))):
            runs.append(
                ABRun(
                    model="m",
                    arm=arm,
                    round=i,
                    warmup=False,
                    gpu={},
                    status="ok",
                    prefill_tokens=100,
                    prefill_tps=p,
                    decode_tokens=None if d is None else 10,
                    decode_tps=d,
                    wall_s=1.0,
                    gpu_after={},
                )
            )
    model = type("M", (), {"name": "m", "shape": None, "gguf": "m.gguf"})()
    summary = summarize_model(model, runs, ["A", "B"], 0.02)
    assert summary.verdict in VERDICT_EXIT
    zero_b = any(b[0] <= 0 and 0 < a[0] < float("inf") for a, b in ((r[0:2], r[2:4]) for r in rounds))
    assert not zero_b or summary.verdict == "slower"
