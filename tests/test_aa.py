"""The A/A self-test (`zincbench aa`): its rate arithmetic, the microbench orchestration with a stubbed
process runner, and the ab A/A against the fake engine (tests/fake_engine.py)."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from documents import timed_row
from fake_engine import write_launcher
from test_ab import FakeMonitor, tiny_model

from zincbench import records
from zincbench.cli import main
from zincbench.engines import make_engine
from zincbench.errors import ConfigError, EnvironmentProblem, ExitCode, InputError
from zincbench.judge import Verdict, compare_medians, compare_paired
from zincbench.runs.aa import (
    AAConfig,
    VerdictTally,
    change_to_call,
    clopper_pearson,
    compare_processes,
    detectable_change,
    judge_aa,
    load_aa_config,
    run_ab_aa,
    run_microbench_aa,
    trials_to_bound,
)
from zincbench.runs.aa_rows import aa_row

CASE, VARIANT = "E256-M512-K2048-Ne16", "fused_grouped"


def timings(rng, n=200, median_us=450.0, noise=0.01, scale=1.0) -> list[float]:
    """Kernel-like times: lognormal around the median with ``noise`` relative spread."""
    return list(scale * median_us * np.exp(noise * rng.standard_normal(n)))


# --- rates and intervals ------------------------------------------------------------------------------


def test_clopper_pearson_is_the_exact_binomial_interval():
    lo, hi = clopper_pearson(0, 45, 0.95)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 45))  # closed form for zero events
    lo, hi = clopper_pearson(45, 45, 0.95)
    assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / 45))
    lo, hi = clopper_pearson(3, 100, 0.95)
    assert lo < 0.03 < hi and hi == pytest.approx(0.0852, abs=5e-4)
    assert all(math.isnan(v) for v in clopper_pearson(0, 0, 0.95))


def test_trials_to_bound_is_the_first_n_whose_upper_bound_reaches_the_target():
    n = trials_to_bound(0.01, 0.95)
    assert n == 368
    assert clopper_pearson(0, n, 0.95)[1] <= 0.01 < clopper_pearson(0, n - 1, 0.95)[1]


def test_tally_counts_faster_and_slower_as_false_positives():
    tally = VerdictTally.of(["faster", "slower", "same", "inconclusive", Verdict.SAME, "slower"])
    assert (tally.faster, tally.slower, tally.same, tally.inconclusive) == (1, 2, 2, 1)
    assert tally.comparisons == 6 and tally.false_positives == 3
    rate = tally.rate(tally.false_positives, 0.95)
    assert rate["rate"] == 0.5 and rate["n"] == 6 and rate["ci"][0] < 0.5 < rate["ci"][1]


@pytest.mark.parametrize(
    "independent, failures, outcome, code",
    [
        (["same"] * 400, 0, "pass", ExitCode.OK),  # 0/400: the upper bound (0.9%) is below the 1% target
        (["same"] * 100, 0, "inconclusive", ExitCode.INCONCLUSIVE),  # 0/100: the rate may still be up to 3.6%
        (["same"] * 99 + ["faster"], 0, "inconclusive", ExitCode.INCONCLUSIVE),  # 1/100 is no evidence of more than 1%
        (["same"] * 17 + ["faster", "slower", "slower"], 0, "fail", ExitCode.FAIL),  # 3/20: P = 0.001 at a 1% rate
        (["same"] * 400, 1, "inconclusive", ExitCode.INCONCLUSIVE),  # a run without a verdict
        (["same"] * 17 + ["slower"] * 3, 1, "fail", ExitCode.FAIL),  # a shown excess decides anyway
        ([], 2, "no comparisons", ExitCode.INCONCLUSIVE),
    ],
)
def test_judge_aa_exit_codes(independent, failures, outcome, code):
    summary = judge_aa(independent, independent, failures, AAConfig())
    assert summary["outcome"] == outcome and summary["exit_code"] == code
    assert summary["comparisons"]["tally"]["same"] == independent.count("same")
    assert summary["independent"]["false_positive"]["n"] == len(independent)


def test_judge_aa_says_when_the_evidence_cannot_bound_the_rate():
    summary = judge_aa(["same"] * 45, ["same"] * 5, 0, AAConfig())
    assert summary["outcome"] == "inconclusive" and summary["exit_code"] == ExitCode.INCONCLUSIVE
    assert any("368 independent comparisons" in note for note in summary["notes"])
    mostly_inconclusive = judge_aa(["inconclusive"] * 6 + ["same"] * 2, ["inconclusive"], 0, AAConfig())
    assert any("rarely decides" in note for note in mostly_inconclusive["notes"])


def test_one_false_positive_in_20_is_not_a_fail_and_20_clean_are_not_a_pass():
    """The A/A of 20 comparisons the issue saw: the point estimate (0% or 5%) never decides alone."""
    assert judge_aa(["same"] * 20, ["same"] * 20, 0, AAConfig())["outcome"] == "inconclusive"
    assert judge_aa(["same"] * 19 + ["slower"], ["same"] * 19 + ["slower"], 0, AAConfig())["outcome"] == "inconclusive"


def test_several_models_are_corrected_for_multiple_comparisons():
    """Each model is one hypothesis: a borderline excess in one of many models is what chance gives (Holm)."""
    from zincbench.runs.aa import binomial_excess_p, holm

    p = binomial_excess_p(2, 25, 0.01)
    assert p < 0.05  # alone, 2 false positives in 25 comparisons show a rate above 1%
    alone = judge_aa(["same"] * 23 + ["slower"] * 2, ["same"] * 23 + ["slower"] * 2, 0, AAConfig())
    assert alone["outcome"] == "fail"
    groups = {"m0": ["same"] * 23 + ["slower"] * 2, **{f"m{i}": ["same"] * 25 for i in range(1, 10)}}
    every = [v for g in groups.values() for v in g]
    corrected = judge_aa(every, groups, 0, AAConfig())
    assert corrected["outcome"] != "fail" and not corrected["test"]["groups"]["m0"]["rejected"]
    assert holm({"a": 0.01, "b": 0.04}, 0.05) == {"a": True, "b": True}
    assert holm({"a": 0.03, "b": 0.04}, 0.05) == {"a": False, "b": False}


# --- comparisons of constructed sample sets -----------------------------------------------------------


def test_identical_distributions_give_no_false_positives(sample_rng):
    samples = [timings(sample_rng) for _ in range(8)]
    comparisons = compare_processes(samples, threshold=0.03, confidence=0.99)
    assert len(comparisons) == 28 and sum(c.independent for c in comparisons) == 4
    assert [(c.baseline, c.candidate) for c in comparisons if c.independent] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert VerdictTally.of(c.verdict for c in comparisons).false_positives == 0


def test_a_10pct_shift_is_detected_in_every_comparison_with_the_shifted_process(sample_rng):
    samples = [timings(sample_rng) for _ in range(5)] + [timings(sample_rng, scale=0.9)]
    comparisons = compare_processes(samples, threshold=0.03, confidence=0.99)
    shifted = [c for c in comparisons if c.candidate == 5]
    assert len(shifted) == 5 and all(c.verdict == "faster" for c in shifted)
    assert all(0.88 < c.time_ratio < 0.92 for c in shifted)
    untouched = [c for c in comparisons if c.candidate != 5]
    assert VerdictTally.of(c.verdict for c in untouched).false_positives == 0
    # ... and the minimum detectable change of the A/A comparisons says so: 10% is above it.
    mde = detectable_change([c.change_to_call for c in untouched], 0.95)
    assert 0 < mde["speedup"] < 0.1 and 0 < mde["slowdown"] < 0.1


@pytest.mark.parametrize("higher_is_better", [False, True], ids=["times", "rates"])
def test_change_to_call_is_exactly_where_the_verdict_flips(sample_rng, higher_is_better):
    """Scale the candidate just beyond (and just short of) the computed change: the verdict flips there."""
    if higher_is_better:
        base, cand = timings(sample_rng, 6, 2000, 0.005), timings(sample_rng, 6, 2000, 0.005)

        def compare(scale):
            return compare_paired(base, [scale * v for v in cand], threshold=0.02)

        def faster_scale(gain):
            return 1 + gain  # rates scale with speed

        def slower_scale(loss):
            return 1 - loss
    else:
        base, cand = timings(sample_rng), timings(sample_rng)

        def compare(scale):
            return compare_medians(base, [scale * v for v in cand], threshold=0.03)

        def faster_scale(gain):
            return 1 / (1 + gain)  # times scale with 1/speed

        def slower_scale(loss):
            return 1 / (1 - loss)

    c = compare(1.0)
    gain, loss = change_to_call(c.ratio, c.ci, c.threshold, higher_is_better)
    assert 0 < gain < 0.1 and 0 < loss < 0.1
    beyond, short = 1.001, 0.999
    assert compare(faster_scale(gain * beyond)).verdict == Verdict.FASTER
    assert compare(faster_scale(gain * short)).verdict != Verdict.FASTER
    assert compare(slower_scale(loss * beyond)).verdict == Verdict.SLOWER
    assert compare(slower_scale(loss * short)).verdict != Verdict.SLOWER


def test_change_to_call_without_an_interval_is_infinite_and_detectable_change_takes_the_quantile():
    assert change_to_call(1.0, (math.nan, math.nan), 0.03, False) == (math.inf, math.inf)
    changes = [(i / 100, i / 200) for i in range(1, 101)]
    assert detectable_change(changes, 0.95) == {"speedup": 0.95, "slowdown": 0.475, "coverage": 0.95, "n": 100}
    assert detectable_change([], 0.95)["speedup"] is None


# --- configuration ------------------------------------------------------------------------------------


def test_bundled_config_and_overrides(tmp_path):
    config = load_aa_config()
    assert config.target_fp_rate == 0.01 and config.microbench.case == CASE and config.microbench.variant == VARIANT
    assert config.with_overrides("microbench", processes=4, case=None).microbench.processes == 4
    with pytest.raises(InputError, match="processes must be at least 2"):
        config.with_overrides("microbench", processes=1)
    bad = tmp_path / "aa.yaml"
    bad.write_text("target_fp_rate: 1.5\n")
    with pytest.raises(ConfigError, match="target_fp_rate"):
        load_aa_config(bad)
    bad.write_text("ab: {order: zigzag}\n")
    with pytest.raises(ConfigError, match="order"):
        load_aa_config(bad)


# --- microbench A/A with a stubbed process runner -----------------------------------------------------


class StubMicrobench:
    """Stands in for `python -m zincbench microbench ... --json`: writes a microbench document with
    this process's samples where the argv says and prints the JSON line the real command prints."""

    def __init__(self, rng, scales=None, exit_codes=None, stderr=""):
        self.rng, self.scales, self.exit_codes, self.stderr = rng, scales or {}, exit_codes or {}, stderr
        self.calls: list[list[str]] = []

    def __call__(self, argv, timeout_s):
        index = len(self.calls)
        self.calls.append(list(argv))
        rc = self.exit_codes.get(index, ExitCode.INCONCLUSIVE)  # a one-variant microbench has no baseline: exit 3
        if rc == "timeout":
            raise subprocess.TimeoutExpired(argv, timeout_s)
        if rc not in (0, 1, 3):
            return subprocess.CompletedProcess(argv, rc, "", self.stderr)
        gpu_us = timings(self.rng, scale=self.scales.get(index, 1.0))
        row = timed_row(
            argv[argv.index("--case") + 1], argv[argv.index("--variant") + 1], gpu_us, detail={"tile": "64x32"}
        )
        doc = records.Document(kind="microbench", config={}, environment={"gpu": {"name": "Stub H200"}}, results=[row])
        path = records.write(doc, directory=argv[argv.index("--results-dir") + 1])
        return subprocess.CompletedProcess(
            argv, rc, json.dumps({"results_file": str(path), "rows": [row.to_json()]}), ""
        )


def microbench_aa(tmp_path, stub, processes=6):
    config = load_aa_config().with_overrides("microbench", processes=processes)
    return run_microbench_aa(config, results_dir=tmp_path / "results", launch=stub, progress=False)


def test_microbench_aa_launches_separate_processes_and_judges_every_pair(tmp_path, sample_rng):
    stub = StubMicrobench(sample_rng)
    out = microbench_aa(tmp_path, stub, processes=6)
    assert len(stub.calls) == 6
    argv = stub.calls[0]
    assert argv[:5] == [sys.executable, "-m", "zincbench", "microbench", "t2"]
    assert {"--no-ceilings", "--json"} <= set(argv) and argv[argv.index("--case") + 1] == CASE
    assert argv[argv.index("--variant") + 1] == VARIANT
    # 3 independent pairs cannot bound a 1% rate: inconclusive, never a pass on the point estimate
    assert out.exit_code == ExitCode.INCONCLUSIVE and out.summary["outcome"] == "inconclusive"
    assert out.summary["comparisons"]["false_positive"] == {
        **out.summary["comparisons"]["false_positive"],
        "events": 0,
        "n": 15,
    }
    assert out.summary["independent"]["false_positive"]["n"] == 3
    assert (out.summary["threshold"], out.summary["confidence"]) == (0.03, 0.99)  # the T2 gate's rule
    assert out.summary["noise"]["median_us"] == pytest.approx(450, rel=0.01)
    saved = records.read(out.path)
    assert saved["kind"] == "aa" and saved["complete"] and saved["environment"]["gpu"]["name"] == "Stub H200"
    processes = [r for r in saved["results"] if r["type"] == "process"]
    assert len(processes) == 6 and all(len(r["gpu_us"]) == 200 for r in processes)
    assert sum(r["type"] == "comparison" for r in saved["results"]) == 15
    assert [aa_row(r) for r in saved["results"]] == out.document.results  # typed rows, to JSON and back
    assert [aa_row(r).to_json() for r in saved["results"]] == saved["results"]
    assert not list(Path(argv[argv.index("--results-dir") + 1]).parent.glob("zincbench-aa-*")), "scratch left behind"


def test_microbench_aa_fails_when_one_process_is_10pct_off(tmp_path, sample_rng):
    out = microbench_aa(tmp_path, StubMicrobench(sample_rng, scales={3: 1.1}), processes=6)
    assert out.exit_code == ExitCode.FAIL and out.summary["outcome"] == "fail"
    assert out.summary["comparisons"]["false_positive"]["events"] == 5  # process 3 against each of the others


def test_microbench_aa_records_crashes_and_timeouts_and_is_inconclusive(tmp_path, sample_rng):
    stub = StubMicrobench(sample_rng, exit_codes={1: 139, 4: "timeout"}, stderr="CUDA error 700: illegal memory access")
    out = microbench_aa(tmp_path, stub, processes=6)
    assert out.exit_code == ExitCode.INCONCLUSIVE
    assert out.summary["processes"] == {"requested": 6, "ok": 4} and out.summary["failures"] == 2
    errors = [r for r in out.document.results if r.type == "process" and r.status == "error"]
    assert [e.index for e in errors] == [1, 4]
    assert "illegal memory access" in errors[0].stderr_tail and "timed out" in errors[1].error
    saved = records.read(out.path)["results"]
    assert [aa_row(r) for r in saved] == out.document.results and [aa_row(r).to_json() for r in saved] == saved
    assert out.summary["comparisons"]["false_positive"]["n"] == 6


@pytest.mark.parametrize("rc, error", [(ExitCode.ENVIRONMENT, EnvironmentProblem), (ExitCode.USAGE, InputError)])
def test_microbench_aa_stops_without_a_results_file_when_a_process_cannot_run(tmp_path, sample_rng, rc, error):
    stub = StubMicrobench(sample_rng, exit_codes={0: rc}, stderr="zincbench: error: no CUDA device")
    with pytest.raises(error, match=r"^microbench process: no CUDA device$"):
        microbench_aa(tmp_path, stub)
    assert len(stub.calls) == 1 and not (tmp_path / "results").exists()


def test_microbench_aa_rejects_unknown_case_and_variant_before_launching(tmp_path, sample_rng):
    stub = StubMicrobench(sample_rng)
    for override, message in (({"case": "E7-M1-K256-Ne1"}, "no t2 case"), ({"variant": "cutlass"}, "no t2 variant")):
        config = load_aa_config().with_overrides("microbench", **override)
        with pytest.raises(InputError, match=message):
            run_microbench_aa(config, results_dir=tmp_path, launch=stub, progress=False)
    assert stub.calls == []


@pytest.mark.skipif(
    importlib.util.find_spec("cupy") is not None,
    reason="with CuPy installed the real microbench processes would run (see the gpu test)",
)
def test_cli_microbench_aa_without_a_gpu_exits_4_with_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["aa", "microbench", "--processes", "2", "--results-dir", str(tmp_path / "results")])
    _, err = capsys.readouterr()
    assert exc.value.code == ExitCode.ENVIRONMENT
    assert err.strip().count("\n") == 0 and err.startswith("zincbench: error: microbench process: ")
    assert not (tmp_path / "results").exists()


@pytest.mark.gpu
@pytest.mark.slow
def test_microbench_aa_end_to_end_on_the_gpu(tmp_path):
    config = load_aa_config().with_overrides("microbench", processes=3, quick=True)
    out = run_microbench_aa(config, results_dir=tmp_path, progress=False)
    assert out.summary["processes"] == {"requested": 3, "ok": 3}, out.document.results
    assert out.summary["comparisons"]["false_positive"]["n"] == 3
    assert out.summary["noise"]["median_us"] > 0 and out.document.environment.get("gpu")
    # 3 comparisons cannot bound the false-positive rate (PASS needs independent_needed of them): FAIL or
    # INCONCLUSIVE, and INCONCLUSIVE says how many would do.
    assert out.exit_code in (ExitCode.FAIL, ExitCode.INCONCLUSIVE)
    assert out.exit_code == ExitCode.FAIL or out.summary["independent_needed"] > 3


# --- ab A/A against the fake engine -------------------------------------------------------------------


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_COUNTER", str(tmp_path / "counter"))
    monkeypatch.setenv("FAKE_NOISE", "0.01")
    for var in ("FAKE_SPEED", "FAKE_DRIFT", "FAKE_SEED", "FAKE_FAIL", "FAKE_FAIL_RUNS"):
        monkeypatch.delenv(var, raising=False)
    return write_launcher(tmp_path)


def ab_aa(tmp_path, fake, **settings):
    config = load_aa_config().with_overrides("ab", **settings)
    return run_ab_aa(
        [tiny_model(tmp_path)],
        make_engine("zinc-main", bin=fake),
        config,
        results_dir=tmp_path / "results",
        monitor=FakeMonitor(),
        progress=False,
    )


def test_same_binary_as_a_and_b_gives_no_false_positives(tmp_path, fake):
    out = ab_aa(tmp_path, fake, repeats=3, rounds=4)
    assert out.exit_code == ExitCode.INCONCLUSIVE and out.summary["outcome"] == "inconclusive"  # 3 cannot bound 1%
    rows = out.document.results
    assert [r.repeat for r in rows] == [0, 1, 2] and {r.verdict for r in rows} <= {"same", "inconclusive"}
    fp = out.summary["comparisons"]["false_positive"]
    assert fp["events"] == 0 and fp["n"] == 3 and out.summary["independent"]["false_positive"] == fp
    assert all(r.prefill.n_pairs == 4 for r in rows)
    assert 0.002 < out.summary["noise"]["prefill_round_cv"] < 0.02  # FAKE_NOISE=0.01 on each arm
    saved = records.read(out.path)
    assert saved["kind"] == "aa" and saved["config"]["mode"] == "ab" and saved["complete"]
    assert [aa_row(r) for r in saved["results"]] == rows  # typed rows, to JSON and back
    assert [aa_row(r).to_json() for r in saved["results"]] == saved["results"]


def test_ab_order_under_drift_is_caught_as_false_positives_and_abba_is_not(tmp_path, fake, monkeypatch):
    """Every run 3% faster than the one before: with order ab, B always runs right after A and looks faster."""
    monkeypatch.setenv("FAKE_DRIFT", "0.03")
    biased = ab_aa(tmp_path, fake, repeats=2, rounds=8, order="ab")
    assert biased.exit_code == ExitCode.FAIL
    assert (
        biased.summary["comparisons"]["tally"]["faster"] == 2 and biased.summary["by_metric"]["prefill"]["faster"] == 2
    )
    balanced = ab_aa(tmp_path, fake, repeats=2, rounds=8, order="abba")
    assert balanced.summary["comparisons"]["false_positive"]["events"] == 0


def test_engine_failures_above_the_cap_make_the_ab_aa_inconclusive(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL", "crash")
    monkeypatch.setenv("FAKE_FAIL_RUNS", "2,3")  # round 1 of the first repeat: half its measured runs
    out = ab_aa(tmp_path, fake, repeats=2, rounds=2)
    assert out.exit_code == ExitCode.INCONCLUSIVE and out.summary["failures"] == 1
    assert out.document.results[0].verdict == "error"


def test_planted_slowdown_measures_the_detection_rate(tmp_path, fake):
    config = load_aa_config().with_overrides("ab", repeats=3)
    out = run_ab_aa(
        [tiny_model(tmp_path)],
        make_engine("zinc-main", bin=fake),
        config,
        planted={"FAKE_SPEED": "0.95"},
        expect="slower",
        results_dir=tmp_path / "results",
        monitor=FakeMonitor(),
        progress=False,
    )
    detected = out.summary["comparisons"]["detected"]
    assert detected["events"] == 3 and detected["n"] == 3 and out.summary["outcome"] == "pass"
    assert out.exit_code == ExitCode.OK and out.document.config["planted"]["env_b"] == {"FAKE_SPEED": "0.95"}
    assert out.summary["rounds"]["max"] <= config.ab.max_rounds


def test_planted_change_the_verdict_misses_fails_the_detection_test(tmp_path, fake):
    config = load_aa_config().with_overrides("ab", repeats=2)
    out = run_ab_aa(
        [tiny_model(tmp_path)],
        make_engine("zinc-main", bin=fake),
        config,
        planted={"FAKE_SPEED": "1.0"},
        expect="slower",
        results_dir=tmp_path / "results",
        monitor=FakeMonitor(),
        progress=False,
    )
    assert out.summary["comparisons"]["detected"]["events"] == 0 and out.exit_code == ExitCode.FAIL


def run_cli(tmp_path, capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(["aa", *args])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_cli_ab_aa_table_markdown_and_json(tmp_path, capsys, fake):
    (tmp_path / "tiny.gguf").touch()
    common = [
        "ab",
        "--a",
        str(fake),
        "--model",
        f"tiny={tmp_path / 'tiny.gguf'}",
        "--repeats",
        "2",
        "--rounds",
        "3",
        "--results-dir",
        str(tmp_path / "results"),
    ]
    code, out, _ = run_cli(tmp_path, capsys, *common, "--markdown", str(tmp_path / "aa.md"))
    assert code == 3 and "false-positive rate" in out and "A/A INCONCLUSIVE" in out
    assert "| false-positive rate | 0.0% (0/2) |" in (tmp_path / "aa.md").read_text()
    code, out, _ = run_cli(tmp_path, capsys, *common, "--json")
    data = json.loads(out)
    assert code == 3 and data["summary"]["outcome"] == "inconclusive" and Path(data["results_file"]).is_file()


def test_cli_detection_table(tmp_path, capsys, fake):
    (tmp_path / "tiny.gguf").touch()
    code, out, _ = run_cli(
        tmp_path,
        capsys,
        "ab",
        "--a",
        str(fake),
        "--model",
        f"tiny={tmp_path / 'tiny.gguf'}",
        "--repeats",
        "2",
        "--env-b",
        "FAKE_SPEED=0.9",
        "--expect",
        "slower",
        "--results-dir",
        str(tmp_path / "results"),
    )
    assert code == 0 and "DETECTION PASS" in out and "detection rate (slower)" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--env-b", "FAKE_SPEED=0.9"], "--env-b and --expect go together"),
        (["--rounds", "1"], "--rounds must be at least 2"),
        (["--repeats", "0"], "repeats must be at least 1"),
        (["--model", "tiny=/nonexistent.gguf"], "GGUF file not found"),
    ],
)
def test_cli_ab_aa_bad_input_is_one_line_exit_2_and_no_results_file(tmp_path, capsys, fake, args, message):
    (tmp_path / "tiny.gguf").touch()
    model = [] if any(a.startswith("tiny=") for a in args) else ["--model", f"tiny={tmp_path / 'tiny.gguf'}"]
    code, out, err = run_cli(
        tmp_path, capsys, "ab", "--a", str(fake), *model, *args, "--results-dir", str(tmp_path / "results")
    )
    assert code == ExitCode.USAGE and message in err and err.strip().count("\n") == 0 and not out
    assert not (tmp_path / "results").exists()
