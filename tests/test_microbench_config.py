"""Microbench families without a GPU: experiment YAML -> cases and gate rules, real GGUF shapes,
the gate decision over recorded rows, and the fused kernel's tile specs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from documents import failed_row, timed_row
from hypothesis import given, settings
from hypothesis import strategies as st

from zincbench import records
from zincbench.bench import load_family
from zincbench.bench.runner import compare_case, decide_gate
from zincbench.config import experiment_path
from zincbench.errors import ConfigError, InputError
from zincbench.measure.stopping.count import QUICK_SAMPLES, FixedCountRule
from zincbench.measure.stopping.noise import QUICK_MAX_TIME_S, QUICK_MIN_SAMPLES, MedianNoiseRule
from zincbench.ops.fused import EPILOGUE_COMBINE, MmaTile, check_tiles


def test_bundled_experiments_load():
    t2 = load_family("t2")
    cfg = t2.load(experiment_path("t2_moe_expert"))
    cases = t2.cases(cfg)
    assert len(cases) == 12 and cases[0].key == "E256-M512-K2048-Ne8" and cases[0].params["tokens"] == 256
    assert sum(t2.gate_applies(cfg, c) for c in cases) == 9  # N_e >= 16
    t1 = load_family("t1")
    cfg1 = t1.load(experiment_path("t1_dense_gemm"))
    assert sum(t1.gate_applies(cfg1, c) for c in t1.cases(cfg1)) == 45  # Q4_K shapes only


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"k": 300}, "K=300 is not a multiple of 256"),
        ({"tokens_per_expert": [0]}, "tokens_per_expert must be >= 1"),
        ({"variants": ["matvec", "magic"]}, "unknown variant"),
        ({"gate": {"candidate": "x", "baseline": "y", "when": {"min_tokens": 5}}}, "gate.when: unknown key"),
        # the timer's keys are the chosen stopping rule's own fields
        (
            {"timer": {"stopping": "noise", "samples": 50}},
            r"timer: unknown key 'samples' \(allowed with stopping: noise",
        ),
        ({"timer": {"stopping": "count", "max_noise": 0.01}}, "timer: unknown key 'max_noise'"),
        ({"timer": {"stopping": "count", "samples": 0}}, "timer: samples must be at least 1"),
        (
            {"timer": {"stopping": "noise", "min_time_s": 2.0, "max_time_s": 1.0}},
            "timer: need 0 <= min_time_s <= max_time_s",
        ),
        ({"timer": {"stopping": "count", "warmup": -1}}, "timer: warmup must be at least 0"),
        # a tile that does not parse is the YAML's mistake (one that does not fit a GPU is the autotuner's to skip)
        ({"fused_tiles": ["1,2,4,1,3", "wgmma:"]}, r"fused_tiles: tile must be .*\(integers\), got 'wgmma:'"),
        ({"fused_tiles": ["wgmma:2,8,4,1,3"]}, "fused_tiles: tile 'wgmma:2,8,4,1,3': the wgmma path needs wm 1"),
        ({"fused_tiles": []}, "fused_tiles must list at least one tile"),
    ],
)
def test_bad_t2_experiments_are_config_errors(tmp_path, edit, message):
    data = yaml.safe_load(experiment_path("t2_moe_expert").read_text())
    data.update(edit)
    path = tmp_path / "t2.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises((ConfigError, InputError), match=message):
        load_family("t2").load(path)


@pytest.fixture
def model_gguf(tmp_path):
    from zincbench.testing.weights_gguf import write_weights_gguf

    path = tmp_path / "model.gguf"
    written = write_weights_gguf(
        path,
        {
            "blk.0.attn_q.weight": ("q4_k", (64, 512)),
            "blk.0.ffn_down.weight": ("q6_k", (32, 256)),
            "blk.1.ffn_gate_exps.weight": ("q4_k", (8, 16, 512)),
        },
    )
    return path, written


def test_gguf_gives_the_real_shapes(model_gguf):
    path, tensors = model_gguf
    t2 = load_family("t2")
    cfg = t2.load(experiment_path("t2_moe_expert"), gguf=str(path))
    assert [(s.experts, s.rows) for s in cfg.shapes] == [(8, 16)] and cfg.k == 512 and cfg.weights == "q4_k"
    assert np.array_equal(t2._gguf_tensor(cfg).data, tensors["blk.1.ffn_gate_exps.weight"])
    t1 = load_family("t1")
    cfg1 = t1.load(experiment_path("t1_dense_gemm"), gguf=str(path))
    assert {(s.name, s.rows, s.k, s.weights) for s in cfg1.shapes} == {
        ("attn_q", 64, 512, "q4_k"),
        ("ffn_down", 32, 256, "q6_k"),
    }
    with pytest.raises(InputError, match="layer 1 has none of the dense projections"):
        t1.load(experiment_path("t1_dense_gemm"), gguf=str(path), layer=1)


def _row(case, variant, samples, passed=True):
    return timed_row(case, variant, samples) if passed else failed_row(case, variant)


def test_gate_decision_over_rows(rng):
    fam = load_family("t2")
    cfg = fam.load(experiment_path("t2_moe_expert"))
    cases = [c for c in fam.cases(cfg) if c.key.startswith("E256-M512")]
    rows = []
    for case in cases:
        base = _row(case.key, cfg.gate.baseline, rng.normal(1000, 2, 50))
        cand = _row(case.key, cfg.gate.candidate, rng.normal(100, 1, 50))
        compare_case({cfg.gate.baseline: base, cfg.gate.candidate: cand}, cfg.gate)
        rows += [base, cand]
    decision, cells = decide_gate(fam, cfg, cases, rows, cfg.gate)
    assert decision.value == "GO" and len(cells) == 3 and all(c["verdict"] == "faster" for c in cells)
    rows[-1] = _row(cases[-1].key, "fused_grouped", [], passed=False)  # a candidate failing correctness
    decision, cells = decide_gate(fam, cfg, cases, rows, cfg.gate)
    assert decision.value == "NO-GO" and cells[-1]["verdict"] == "FAIL"


def test_tile_specs():
    tile = MmaTile.parse("1,8,8,1,3,2")
    assert (tile.bm, tile.bn, tile.threads, tile.min_blocks) == (128, 64, 256, 2)
    assert tile.expression(grouped=True, weights="q4_k") == "gemm_kquant_mma<ZbQ4K,1,8,8,1,3,2,false,true,0>"
    assert tile.expression(grouped=False, weights="q6_k") == "gemm_kquant_mma<ZbQ6K,1,8,8,1,3,2,false,false,0>"
    trimmed = MmaTile.parse("1,8,4,1,3,1,1")
    assert trimmed.trim_n and trimmed.label == "64x64/w4x1/s3/n8"
    assert trimmed.expression(grouped=True, weights="q4_k") == "gemm_kquant_mma<ZbQ4K,1,8,4,1,3,1,true,true,0>"
    # the epilogue is the last template argument (ZB_EPI_*; the compile test pins the values)
    assert tile.expression(grouped=True, weights="q6_k", epilogue=EPILOGUE_COMBINE).endswith(",false,true,3>")
    assert not MmaTile.parse("1,8,4,1,3,1,0").trim_n
    # per stage: X [halves][64 tokens][256 B] + weights [128 rows][80 B (Q4_K half) or 240 B (Q6_K superblock)]
    assert tile.smem_bytes("q4_k") == 3 * (64 * 256 + 128 * 80)
    assert tile.smem_bytes("q6_k") == 3 * (2 * 64 * 256 + 128 * 240)
    assert tile.smem_bytes("q5_k") == 3 * (64 * 256 + 128 * 112)
    with pytest.raises(InputError, match="q8_0"):
        tile.expression(grouped=True, weights="q8_0")
    assert MmaTile.parse("2,8,4,1,3").min_blocks == 1
    # "4,8,2,1,2": 128 rows, 64 threads (the Q4_K/Q5_K header copy has one thread per row); 33 warps; 1 stage
    for bad in ("1,2,3", "1,8,4,1,3,1,2", "1,8,4,1,3,0", "4,8,2,1,2", "1,1,33,1,2", "1,8,4,1,1"):
        with pytest.raises(ValueError):
            MmaTile.parse(bad)


def test_wgmma_tile_specs():
    """The Hopper instantiation: a trailing template argument, its own X order, 1 KB of alignment slack, and
    the shapes its wgmma widths and pipeline allow."""
    tile = MmaTile.parse("wgmma:1,16,8,1,3,1,1")
    assert tile.wgmma and tile.trim_n and (tile.bm, tile.bn, tile.threads) == (128, 128, 256)
    # its Q6_K stages are half superblocks (ZbQ6KHalf: 176 bytes a row), the portable path's whole ones (240)
    assert tile.expression(grouped=True, weights="q6_k") == "gemm_kquant_mma<ZbQ6KHalf,1,16,8,1,3,1,true,true,0,true>"
    assert tile.label == "128x128/w8x1/s3/n8/wgmma" and tile.x_order == "wgmma"
    assert tile.smem_bytes("q4_k") == 3 * (128 * 256 + 128 * 80) + 1024
    assert tile.smem_bytes("q6_k") == 3 * (128 * 256 + 128 * 176) + 1024
    # Q6_K repacked at load (ZbQ6KR): half superblocks of 7 aligned chunks a row, on both paths
    assert tile.expression(grouped=False, weights="q6_k_r") == "gemm_kquant_mma<ZbQ6KR,1,16,8,1,3,1,true,false,0,true>"
    assert tile.smem_bytes("q6_k_r") == 3 * (128 * 256 + 128 * 112) + 1024
    # every multiple of 8 up to 256 is a wgmma width: any such BN, trimmed (its tokens rounded up to 8) or not
    assert MmaTile.parse("wgmma:1,12,8,1,3,1,1").bn == 96 and MmaTile.parse("wgmma:1,2,4,1,3,1,1").trim_n
    assert MmaTile.parse("wgmma+quarter:1,10,8,1,3,2,1").bn == 80 and MmaTile.parse("wgmma:1,9,4,1,3").bn == 72
    plain = MmaTile.parse("1,16,8,1,3,1,1")
    assert plain.x_order == "mma" and not plain.expression(grouped=True, weights="q4_k").endswith(",true>")
    assert plain.expression(grouped=True, weights="q6_k").startswith("gemm_kquant_mma<ZbQ6K,")
    assert plain.smem_bytes("q6_k") == 3 * (2 * 128 * 256 + 128 * 240)
    # static: the token tables (8 bytes a column) and, on the wgmma path, the stage ring's two mbarriers a stage
    assert (tile.static_smem_bytes, plain.static_smem_bytes) == (8 * 128 + 2 * 8 * 3, 8 * 128)
    for bad, message in (
        ("wgmma:2,8,4,1,3", "wm 1, warps_n 1 and whole warpgroups"),  # two 16-row slices per warp
        ("wgmma:1,8,6,1,3", "whole warpgroups"),  # 6 warps
        ("wgmma:1,8,4,2,3", "warps_n 1"),
        ("wgmma:1,8,4,1,2", "stages >= 3"),  # the pipeline decodes stage t + 1 while stage t runs
        ("wgmma:1,33,4,1,3", "not 264"),  # m64nNk16 stops at N = 256
        ("wgmma:1,40,4,1,3,1,1", "not 320"),  # trimmed or not, BN is a wgmma width
        ("wgmma:x,2,4,1,3", "integers"),
        ("mma:1,2,4,1,3", "flags wgmma, sk"),
    ):
        with pytest.raises(ValueError, match=message):
            MmaTile.parse(bad)


def test_stream_k_tile_specs():
    """``sk`` compiles the stream-K blocks in (the kernel's last template argument), on either path."""
    tile = MmaTile.parse("wgmma+sk:1,32,8,1,3")
    assert tile.stream_k and tile.wgmma and tile.label == "128x256/w8x1/s3/wgmma/sk"
    assert (
        tile.expression(grouped=False, weights="q4_k") == "gemm_kquant_mma<ZbQ4K,1,32,8,1,3,1,false,false,0,true,true>"
    )
    assert MmaTile.parse("sk+wgmma:1,32,8,1,3") == tile
    portable = MmaTile.parse("sk:2,8,4,1,3")
    assert portable.stream_k and not portable.wgmma and portable.x_order == "mma"
    assert portable.expression(grouped=False, weights="q6_k").endswith(",0,false,true>")
    assert MmaTile.parse("2,8,4,1,3").expression(grouped=False, weights="q6_k").endswith(",0>")
    for bad in ("sk+sk:2,8,4,1,3", ":2,8,4,1,3", "+:2,8,4,1,3", "sk:wgmma:1,32,8,1,3", "SK:2,8,4,1,3"):
        with pytest.raises(ValueError, match="flags wgmma, sk"):
            MmaTile.parse(bad)


# Each schedule flag's label and template arguments: the trailing ones are written up to the last one set, every
# argument before it spelled out (quarter: STREAM_K's false; allrows: TMA's 1; producer: ALL_ROWS's false; persist
# after PRODUCER).
FLAG_SPECS = [
    (
        "wgmma+quarter:1,12,8,1,3,2,1",
        "128x96/w8x1/s3/b2/n8/wgmma/qtr",
        "ZbQ4K,1,12,8,1,3,2,true,true,0,true,false,true",
    ),
    (
        "wgmma+quarter+tma+allrows:1,12,16,1,4,1,1",
        "256x96/w16x1/s4/n8/wgmma/qtr/tma/rows",
        "ZbQ4K,1,12,16,1,4,1,true,true,0,true,false,true,1,true",
    ),
    (
        "wgmma+quarter+tma+producer:1,12,16,1,4,1,1",
        "256x96/w16x1/s4/n8/wgmma/qtr/tma/prod",
        "ZbQ4K,1,12,16,1,4,1,true,true,0,true,false,true,1,false,true",
    ),
    (
        "wgmma+quarter+tma+whole+allrows+producer+persist:1,8,16,1,3,1,1",
        "256x64/w16x1/s3/n8/wgmma/qtr/tma/sb/rows/prod/pers",
        "ZbQ4KWhole,1,8,16,1,3,1,true,true,0,true,false,true,1,true,true,true",
    ),
]


@pytest.mark.parametrize("text,label,arguments", FLAG_SPECS)
def test_schedule_flag_labels_and_template_arguments(text, label, arguments):
    tile = MmaTile.parse(text)
    assert tile.label == label
    assert tile.expression(grouped=True, weights="q4_k") == f"gemm_kquant_mma<{arguments}>"


def test_quarter_tile_specs():
    """``quarter`` (wgmma only) is the kernel's QUARTERS, the template argument after STREAM_K: written with
    STREAM_K's false before it when the tile is not stream-K."""
    tile = MmaTile.parse("wgmma+quarter:1,12,8,1,3,2,1")
    assert tile.quarter and tile.wgmma and not tile.stream_k
    assert (
        MmaTile.parse("quarter+sk+wgmma:1,24,8,1,3")
        .expression(grouped=False, weights="q6_k")
        .endswith(",0,true,true,true>")
    )
    assert tile.smem_bytes("q4_k") == MmaTile.parse("wgmma:1,12,8,1,3,2,1").smem_bytes("q4_k")
    assert not MmaTile.parse("wgmma:1,12,8,1,3,2,1").quarter
    with pytest.raises(ValueError, match="quarter pipelines the wgmma path's A fragments"):
        MmaTile.parse("quarter:1,2,4,1,3")
    with pytest.raises(ValueError, match="flags wgmma, sk, quarter"):
        MmaTile.parse("wgmma+quarter+quarter:1,8,8,1,3")


def test_all_rows_tile_specs():
    """``allrows`` (grouped, wgmma+tma) is the kernel's ALL_ROWS, the template argument after TMA: written with every
    argument before it."""
    tile = MmaTile.parse("wgmma+quarter+tma+allrows:1,12,16,1,4,1,1")
    assert tile.all_rows
    assert (
        MmaTile.parse("allrows+tma+wgmma:1,8,16,1,3,1,1")
        .expression(grouped=True, weights="q4_k")
        .endswith(",0,true,false,false,1,true>")
    )
    assert tile.smem_bytes("q4_k") == MmaTile.parse("wgmma+quarter+tma:1,12,16,1,4,1,1").smem_bytes("q4_k")
    with pytest.raises(ValueError, match="allrows loads the next row block's weights as TMA boxes"):
        MmaTile.parse("wgmma+allrows:1,8,16,1,3")
    with pytest.raises(ValueError, match="allrows and producer schedule grouped GEMMs, not dense ones"):
        check_tiles(["wgmma+tma+allrows:1,8,16,1,3"], grouped=False)
    check_tiles(["wgmma+tma+allrows:1,8,16,1,3"], grouped=True)


def test_producer_tile_specs():
    """``producer`` (grouped, wgmma+tma, 16 MMA warps, one block per SM) is the kernel's PRODUCER, after ALL_ROWS; its
    block has one more warpgroup."""
    tile = MmaTile.parse("wgmma+quarter+tma+producer:1,12,16,1,4,1,1")
    assert tile.producer and tile.threads == 512 and tile.launch_threads == 640
    assert MmaTile.parse("wgmma+quarter+tma:1,12,16,1,4,1,1").launch_threads == 512
    with pytest.raises(ValueError, match="producer fills a grouped tile's ring with TMA boxes"):
        MmaTile.parse("wgmma+quarter+producer:1,12,16,1,4,1,1")
    with pytest.raises(ValueError, match="warps_m 16, min_blocks 1"):
        MmaTile.parse("wgmma+quarter+tma+producer:1,12,8,1,3,2,1")
    with pytest.raises(ValueError, match="allrows and producer schedule grouped GEMMs, not dense ones"):
        check_tiles(["wgmma+quarter+tma+producer:1,12,16,1,4,1,1"], grouped=False)


def test_persist_tile_specs():
    """``persist`` (producer and allrows) is the kernel's PERSIST, after PRODUCER: a second token table and the tables'
    ring in static shared memory (ptxas -v: 1152 bytes at 256x64 s3, 1680 at 256x96 s4)."""
    tile = MmaTile.parse("wgmma+quarter+tma+whole+allrows+producer+persist:1,8,16,1,3,1,1")
    assert tile.persist
    assert tile.static_smem_bytes == 1152
    assert MmaTile.parse("wgmma+quarter+tma+allrows+producer+persist:1,12,16,1,4,1,1").static_smem_bytes == 1680
    assert tile.smem_bytes("q4_k") == MmaTile.parse("wgmma+quarter+tma+whole:1,8,16,1,3,1,1").smem_bytes("q4_k")
    for text in (
        "wgmma+quarter+tma+allrows+persist:1,12,16,1,4,1,1",
        "wgmma+quarter+tma+producer+persist:1,12,16,1,4,1,1",
    ):
        with pytest.raises(ValueError, match="it needs producer\\+allrows"):
            MmaTile.parse(text)
    with pytest.raises(ValueError, match="allrows and producer schedule grouped GEMMs, not dense ones"):
        check_tiles(["wgmma+quarter+tma+allrows+producer+persist:1,12,16,1,4,1,1"], grouped=False)


def test_the_producer_split_matches_the_kernel():
    """The launcher's copy of the kernel's register split, which it checks against the launch allocation, and the
    split fits the block's registers at the 96 a thread ptxas gives 640 threads (65536 / 640, in steps of 8)."""
    from zincbench.ops import fused

    source = (Path(__file__).resolve().parents[1] / "kernels" / "kquant_fused_mma.cu").read_text()
    defines = dict(re.findall(r"#define (ZB_\w+) (\d+)", source))
    assert int(defines["ZB_PRODUCER_THREADS"]) == fused.PRODUCER_THREADS
    assert int(defines["ZB_PRODUCER_REGS"]) == fused.PRODUCER_REGS
    assert int(defines["ZB_MMA_REGS"]) == fused.PRODUCER_MMA_REGS
    threads = 32 * fused.PRODUCER_MMA_WARPS
    assert threads * fused.PRODUCER_MMA_REGS + fused.PRODUCER_THREADS * fused.PRODUCER_REGS <= 96 * (
        threads + fused.PRODUCER_THREADS
    )


@pytest.mark.parametrize("family,experiment", [("t2", "t2_moe_expert"), ("layer", None)])
def test_stream_k_tiles_are_refused_where_the_gemm_is_grouped(family, experiment, tmp_path):
    fam = load_family(family)
    path = experiment_path(experiment or fam.default_experiment)
    data = yaml.safe_load(path.read_text())
    data["fused_tiles"] = ["sk:1,2,4,1,3"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises((ConfigError, InputError), match="stream-K .* dense GEMMs, not grouped"):
        fam.load(bad)


def test_recorded_llama_cpp_times_are_shown_only_for_their_device():
    fam = load_family("t2")
    cfg = fam.load(experiment_path("t2_moe_expert"))
    case = fam.cases(cfg)[0]
    assert fam.reference_columns(cfg, case, "NVIDIA H200")["llama_cpp_us"] == 413
    assert fam.reference_columns(cfg, case, "NVIDIA GeForce RTX 4090") == {}
    assert fam.timer_config(cfg).mode == "cold" and fam.gate_rule(cfg).candidate == "fused_grouped"


def test_recorded_llama_cpp_times_are_shown_only_for_the_routing_they_were_measured_with(tmp_path):
    fam = load_family("t2")
    text = experiment_path("t2_moe_expert").read_text()
    assert "llama_cpp_routing: uniform" in text
    zipf = tmp_path / "zipf.yaml"
    zipf.write_text(text.replace("routing: uniform   # each", "routing: zipf   # each"))
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(text.replace("llama_cpp_routing: uniform", "llama_cpp_routing: null"))
    for path, shown in ((experiment_path("t2_moe_expert"), True), (zipf, False), (unknown, False)):
        cfg = fam.load(path)
        columns = fam.reference_columns(cfg, fam.cases(cfg)[0], "NVIDIA H200")
        assert ("llama_cpp_us" in columns) is shown, path.name


def test_a_measurement_cut_short_is_not_judged(rng):
    fam = load_family("t2")
    cfg = fam.load(experiment_path("t2_moe_expert"))
    key = fam.cases(cfg)[0].key
    base = _row(key, cfg.gate.baseline, [4658.0, 2005781.0])  # a stall: the stopping rule's timeout after 2 samples
    cand = _row(key, cfg.gate.candidate, rng.normal(100, 1, 50))
    compare_case({cfg.gate.baseline: base, cfg.gate.candidate: cand}, cfg.gate)
    assert cand.vs_baseline.verdict == "inconclusive"
    assert f"{cfg.gate.baseline} n=2" in cand.vs_baseline.note


def _t2_with_timer(tmp_path, timer: dict):
    data = yaml.safe_load(experiment_path("t2_moe_expert").read_text())
    data["timer"] = timer
    path = tmp_path / "t2.yaml"
    path.write_text(yaml.safe_dump(data))
    t2 = load_family("t2")
    return t2.timer_config(t2.load(path))


def test_the_count_rule_takes_its_sample_number_from_yaml_and_quick_shortens_it(tmp_path):
    timer = _t2_with_timer(tmp_path, {"mode": "hot", "stopping": "count", "samples": 40})
    assert timer.mode == "hot" and timer.stopping == FixedCountRule(40)
    assert timer.quick().stopping == FixedCountRule(QUICK_SAMPLES) and timer.quick().mode == "hot"
    assert _t2_with_timer(tmp_path, {"stopping": "count", "samples": 3}).quick().stopping == FixedCountRule(3)


def test_the_recorded_timer_settings_load_back_as_yaml(tmp_path):
    """A results document records the timer in its YAML form: fed back, it is the same timer."""
    for timer in ({"stopping": "count", "samples": 7}, {"stopping": "noise", "max_noise": 0.01, "max_time_s": 3.0}):
        loaded = _t2_with_timer(tmp_path, timer)
        assert _t2_with_timer(tmp_path, records.to_jsonable(loaded)) == loaded


@settings(derandomize=True, max_examples=200, deadline=None)
@given(
    max_noise=st.floats(1e-4, 0.5),
    min_samples=st.integers(1, 100),
    extra_samples=st.integers(0, 1000),
    min_time_s=st.floats(0.0, 5.0),
    extra_time_s=st.floats(0.0, 5.0),
)
def test_quick_never_lengthens_the_noise_rule(max_noise, min_samples, extra_samples, min_time_s, extra_time_s):
    rule = MedianNoiseRule(
        max_noise=max_noise,
        min_samples=min_samples,
        max_samples=min_samples + extra_samples,
        min_time_s=min_time_s,
        max_time_s=min_time_s + extra_time_s,
    )
    quick = rule.quick()  # a valid rule: __post_init__ ran again
    assert quick.max_time_s <= min(rule.max_time_s, QUICK_MAX_TIME_S)
    assert quick.min_samples <= min(rule.min_samples, QUICK_MIN_SAMPLES)
    assert quick.min_time_s <= quick.max_time_s and quick.max_noise == rule.max_noise


def test_down_projection_gates_the_fused_q6k_kernel_against_dequant_once():
    fam = load_family("t2")
    cfg = fam.load(experiment_path("t2_moe_down"))
    assert cfg.weights == "q6_k" and cfg.x_per_slot
    assert "fused_grouped" in [v.name for v in fam.variants(cfg)]
    assert (cfg.gate.candidate, cfg.gate.baseline) == ("fused_grouped", "dequant_cublas")
    # Portable tiles: a block gets at most 99 KB of shared memory on sm_89 / sm_120.
    assert all(MmaTile.parse(t).smem_bytes("q6_k") + 8 * MmaTile.parse(t).bn <= 99 * 1024 for t in cfg.fused_tiles)
