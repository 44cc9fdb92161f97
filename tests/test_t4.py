"""T4 (norm + GEMM group) on a CPU: the experiment, its cases, the launch counts, the bit-identity judgement,
the NumPy model of the norm's summation order, the declared engine path and the tables at 80 columns."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from rich.console import Console

from zincbench import judge
from zincbench.bench import declared, load_family
from zincbench.bench.base import Case
from zincbench.bench.runner import decide_gate
from zincbench.bench.t4_fusion import (
    GemmSpec,
    compare_bits,
    gemm_at,
    gemm_weights,
    judge_bits,
    weight_runs,
)
from zincbench.config import experiment_path
from zincbench.errors import ConfigError, InputError
from zincbench.gpu.kernel_abi import source_abi
from zincbench.gpu.runtime import KERNELS_DIR
from zincbench.ops.norm_cast import NORM_BLOCK, launch_count
from zincbench.reference.rms_norm_ref import block_sum_of_squares, rms_norm_f32_model, rms_norm_f64

ROOT = Path(__file__).resolve().parent.parent


def _config():
    family = load_family("t4")
    return family, family.load(experiment_path("t4_fusion"))


# ---- the experiment ----------------------------------------------------------------------------------------
def test_bundled_experiment_covers_the_dense_models_groups_at_three_lengths():
    family, cfg = _config()
    cases = family.cases(cfg)
    assert cfg.tokens == [512, 1024, 2048]
    assert {c.params["model"] for c in cases} == {"qwen35-9b", "qwen36-27b", "gemma4-31b"}
    assert len(cases) == 3 * len(cfg.groups)
    case = next(c for c in cases if c.key == "qwen35-9b.attn-vq6-T1024")
    assert case.params["gemms"] == [["q", 8192, "q4_k"], ["k", 1024, "q4_k"], ["v", 1024, "q6_k"]]
    assert case.params["n_embd"] == 4096 and case.params["tokens"] == 1024
    # the layer counts cover each model: attention layers split by V type, every layer has the FFN group
    layers = {}
    for g in cfg.groups:
        layers.setdefault((g.model, g.group.split("-")[0]), 0)
        layers[(g.model, g.group.split("-")[0])] += g.layers
    assert layers == {
        ("qwen35-9b", "attn"): 8,
        ("qwen35-9b", "ffn"): 32,
        ("qwen36-27b", "attn"): 16,
        ("qwen36-27b", "ffn"): 64,
        ("gemma4-31b", "attn"): 60,
        ("gemma4-31b", "ffn"): 60,
    }
    assert [v.name for v in family.variants(cfg)] == ["engine_path", "norm_f16", "norm_f16_shared", "t1_fused"]


def _experiment(tmp_path, **changes) -> Path:
    data = yaml.safe_load(experiment_path("t4_fusion").read_text())
    data.update(changes)
    path = tmp_path / "t4.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    "change, words",
    [
        ({"tokens": []}, "tokens"),
        ({"variants": ["norm_f16"]}, "engine_path"),
        ({"bit_identical": ["nope"]}, "unknown variant"),
        ({"eps": 0}, "eps"),
        (
            {"groups": [{"model": "m", "group": "g", "n_embd": 300, "layers": 1, "gemms": [{"name": "q", "rows": 8}]}]},
            "n_embd",
        ),
        ({"groups": [{"model": "m", "group": "g", "n_embd": 256, "layers": 1, "gemms": []}]}, "gemms"),
        ({"llama_cpp_pp_tps": {"H200": {"m": {"pp512": 1.0}}}}, "prompt lengths"),
        ({"gate": {"candidate": "norm_f16", "baseline": "engine_path", "when": {"weights": "q4_k"}}}, "gate.when"),
    ],
)
def test_bad_experiments_are_config_errors(tmp_path, change, words):
    with pytest.raises(ConfigError, match=words):
        load_family("t4").load(_experiment(tmp_path, **change))


def test_gguf_is_refused_in_one_line():
    with pytest.raises(InputError, match="--gguf is not supported"):
        load_family("t4").load(experiment_path("t4_fusion"), gguf="model.gguf")


def test_cli_bad_yaml_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("description: x\ntokens: [512\n")  # not YAML
    typo = _experiment(tmp_path, tokenz=[512])
    for path in (bad, typo):
        done = subprocess.run(
            [sys.executable, "-m", "zincbench", "microbench", "t4", "--experiment", str(path), "--no-progress"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path.name) in lines[0] and "Traceback" not in done.stderr


# ---- launches, runs and the output layout -------------------------------------------------------------------
def test_launch_counts_per_path():
    attn_v6, ffn = ["q4_k", "q4_k", "q6_k"], ["q4_k", "q4_k"]
    assert [launch_count(p, attn_v6) for p in ("engine", "norm_f16", "norm_f16_shared", "t1_fused")] == [10, 7, 6, 5]
    assert [launch_count(p, ffn) for p in ("engine", "norm_f16", "norm_f16_shared", "t1_fused")] == [7, 5, 4, 4]
    # a type that comes back later is a new run (its rows are not next to the first run's)
    assert launch_count("norm_f16_shared", ["q4_k", "q6_k", "q4_k"]) == 1 + 3 + 3


def test_weight_runs_group_consecutive_types_and_split_back():
    gemms = [GemmSpec("q", 5), GemmSpec("k", 3), GemmSpec("v", 2, "q6_k")]
    assert weight_runs(gemms) == [("q4_k", 8), ("q6_k", 2)]
    runs = [("q4_k", np.arange(8 * 2).reshape(8, 2)), ("q6_k", np.arange(4).reshape(2, 2))]
    parts = gemm_weights(runs, gemms)
    assert [p.shape[0] for p in parts] == [5, 3, 2] and parts[1][0, 0] == 10 and parts[2][0, 0] == 0


def test_gemm_at_names_the_gemm_token_and_row_of_a_flat_index():
    names = [("q", 4), ("k", 2)]  # T = 3: q is 12 words, then k 6
    assert gemm_at(names, 3, 0) == ("q", 0, 0)
    assert gemm_at(names, 3, 11) == ("q", 2, 3)
    assert gemm_at(names, 3, 12) == ("k", 0, 0)
    assert gemm_at(names, 3, 17) == ("k", 2, 1)
    with pytest.raises(IndexError):
        gemm_at(names, 3, 18)


# ---- bit identity ---------------------------------------------------------------------------------------
def _case(t=3):
    return Case("m.attn-T3", {"gemms": [["q", 4, "q4_k"], ["k", 2, "q4_k"]], "tokens": t, "layers": 1})


def test_one_differing_bit_fails_a_candidate_and_is_recorded_for_the_others():
    _, cfg = _config()
    ref = np.random.default_rng(1).standard_normal(18).astype(np.float32)
    out = ref.copy()
    out.view(np.uint32)[13] ^= 1  # the last mantissa bit of k, token 0, row 1
    for variant in ("norm_f16", "norm_f16_shared"):
        detail, failure = judge_bits(cfg, _case(), variant, ref, out)
        assert detail["bits"] == {"identical": False, "differing": 1, "total": 18, "first": 13}
        assert "not bit-identical" in failure and "k token 0 row 1" in failure
    detail, failure = judge_bits(cfg, _case(), "t1_fused", ref, out)  # a reference: recorded, not failed
    assert failure is None and not detail["bits"]["identical"]
    detail, failure = judge_bits(cfg, _case(), "norm_f16", ref, ref.copy())
    assert failure is None and detail["bits"]["identical"]


def test_bits_not_values_are_compared():
    ref = np.array([0.0, np.nan, 1.0], dtype=np.float32)
    assert not compare_bits(ref, np.array([-0.0, np.nan, 1.0], dtype=np.float32)).identical  # signed zero
    other_nan = ref.copy()
    other_nan.view(np.uint32)[1] ^= 1  # another NaN payload
    assert compare_bits(ref, other_nan).differing == 1
    assert compare_bits(ref, ref.copy()).identical
    assert not compare_bits(ref, ref[:2]).identical  # a shape mismatch is never identical


def test_the_gates_candidate_must_be_bit_identical_even_when_not_listed(tmp_path):
    cfg = load_family("t4").load(
        _experiment(tmp_path, bit_identical=[], gate={"candidate": "t1_fused", "baseline": "engine_path"})
    )
    ref = np.zeros(18, dtype=np.float32)
    _, failure = judge_bits(cfg, _case(), "t1_fused", ref, ref + 1)
    assert failure is not None
    _, failure = judge_bits(cfg, _case(), "norm_f16", ref, ref + 1)
    assert failure is None


def _row(case, variant, passed=True, verdict="faster"):
    return SimpleNamespace(
        case=case, variant=variant, ran=True, passed=passed, vs_baseline=SimpleNamespace(verdict=verdict, speedup=1.1)
    )


def test_a_faster_candidate_that_is_not_bit_identical_is_never_go():
    family, cfg = _config()
    cases = [c for c in family.cases(cfg) if c.key.startswith("qwen35-9b.ffn")]
    rule = cfg.gate
    rows = [r for c in cases for r in (_row(c.key, rule.baseline), _row(c.key, rule.candidate))]
    assert decide_gate(family, cfg, cases, rows, rule)[0] == judge.GateDecision.GO
    rows[-1] = _row(cases[-1].key, rule.candidate, passed=False)  # its bits differ: the check failed
    decision, cells = decide_gate(family, cfg, cases, rows, rule)
    assert decision == judge.GateDecision.NO_GO and cells[-1]["verdict"] == "FAIL"


# ---- the norm: the NumPy model of its summation order ------------------------------------------------------
@pytest.mark.parametrize("n", [1, 37, 256, 300, 4096 + 37, 5376])
def test_the_f32_model_is_the_norm_within_f32_rounding(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((5, n)).astype(np.float32)
    w = (1 + 0.25 * rng.standard_normal(n)).astype(np.float32)
    got = rms_norm_f32_model(x, w, 1e-6)
    ref = rms_norm_f64(x, w, 1e-6)
    assert np.abs(got - ref).max() <= 4e-6 * np.abs(ref).max()
    sums = block_sum_of_squares(x)
    assert np.allclose(sums, (x.astype(np.float64) ** 2).sum(axis=1), rtol=1e-5)


def test_a_different_block_or_load_width_sums_in_another_order():
    """Why the fused kernel keeps the engine's launch shape: float4 loads or a 128-thread block change the
    f32 sum of squares (so the fp16 rows) on some rows at the models' widths; the engine's shape does not."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 4096)).astype(np.float32)
    engine = block_sum_of_squares(x, block=256, load=1)
    assert np.array_equal(block_sum_of_squares(x, block=NORM_BLOCK, load=1).view(np.uint32), engine.view(np.uint32))
    for block, load in ((256, 4), (128, 1), (512, 1)):
        assert (block_sum_of_squares(x, block=block, load=load) != engine).any(), (block, load)


def test_both_norm_kernels_share_the_row_arithmetic():
    """rms_norm and rms_norm_to_f16 compute each element through the same two device functions, so their f32
    values are equal by construction; the fp16 kernel then rounds through the one function f32_to_f16 uses."""
    source = (KERNELS_DIR / "rms_norm_cast.cu").read_text()
    bodies = {
        name: source.split(f'extern "C" __global__ void {name}(', 1)[1].split("\n}\n", 1)[0]
        for name in ("rms_norm", "rms_norm_to_f16")
    }
    for body in bodies.values():
        assert "rms_row_scale(x + base, N, eps)" in body and "rms_value(x[base + i], w[i], scale)" in body
    cast = (KERNELS_DIR / "dequant.cu").read_text().split("void f32_to_f16(", 1)[1].split("\n}\n", 1)[0]
    for body in (bodies["rms_norm_to_f16"], cast):
        assert "zb_float_to_half_rne(" in body
    assert "cvt.rn.f16.f32" in (KERNELS_DIR / "zb_half.cuh").read_text()


def test_fp16_rounding_of_the_model_is_round_to_nearest_even():
    ties = np.array([1 + 2**-11, 1 + 3 * 2**-11], dtype=np.float32)  # halfway between two fp16 values
    assert list(ties.astype(np.float16)) == [np.float16(1.0), np.float16(1 + 2**-9)]


def test_norm_launcher_arguments_match_the_kernels():
    abi = source_abi((KERNELS_DIR / "rms_norm_cast.cu").read_text())
    for name, out in (("rms_norm", "float* y"), ("rms_norm_to_f16", "unsigned short* y")):
        params = [p.strip() for p in abi.kernels[name].split(",")]
        assert params == ["const float* x", "const float* w", out, "unsigned N", "float eps"], name


# ---- the engine's path as declared ---------------------------------------------------------------------------
def _declared(n_gemms: int) -> list[str]:
    pack = declared.load_pack(experiment_path("engine_zinc"))
    params = {"T": 512, "K": 4096, "eps": 1e-6, "n_gemms": n_gemms, "max_M": 8192}
    for i in range(3):
        params[f"M{i}"], params[f"qtype{i}"] = (8192, "q4k") if i < n_gemms else (0, "")
    names = declared._names(pack, declared.Binding({}, params, "y", None))
    plan = declared.expand(pack.variant("t4", "engine"), pack, names)
    return [getattr(step, "kernel", None) or step.op for step, _, _ in plan.steps]


def test_declared_engine_path_launches_norm_then_three_per_gemm():
    for n in (2, 3):
        launched = _declared(n)
        assert launched[0] == "rms_norm" and len(launched) == 1 + 3 * n
        assert launched[1:4] == ["dequant_{qtype0}_to_f16", "f32_to_f16", "gemm_f16"]
        assert launched.count("f32_to_f16") == n and launched.count("gemm_f16") == n


# ---- tables ----------------------------------------------------------------------------------------------------
def _document(tokens=(512, 2048)) -> dict:
    _, cfg = _config()
    rows = []
    medians = {"engine_path": 1000.0, "norm_f16": 960.0, "norm_f16_shared": 950.0, "t1_fused": 1400.0}
    for g in cfg.groups:
        for t in tokens:
            params = {"model": g.model, "group": g.group, "layers": g.layers, "tokens": t}
            for variant, us in medians.items():
                rows.append(
                    {
                        "case": f"{g.name}-T{t}",
                        "variant": variant,
                        "params": params,
                        "summary": {"median_us": us * t / 512},
                        "detail": {"launches": 7, "bits": {"identical": variant != "t1_fused"}},
                    }
                )
    settings = {"llama_cpp_pp_tps": {"H200": {"gemma4-31b": {"2048": 2542.0}}}}
    return {"results": rows, "config": {"settings": settings}, "environment": {"gpu": {"name": "NVIDIA H200"}}}


def test_projection_is_tokens_over_the_models_layers_times_group_time():
    from zincbench.show.t4_view import projection_rows

    rows = {(r[0], r[1]): r for r in projection_rows(_document())}
    # qwen35-9b at T512: (4 + 4 + 32) layers x 1000 us = 40 ms -> 512 / 0.040 = 12800 tok/s; B: 38 ms
    assert rows[("qwen35-9b", "512")][2:7] == ["3", "12800", "13333", "13474", "2.00"]
    # gemma4-31b at T2048: (25 + 25 + 10 + 60) x 4000 us = 480 ms; B 456 ms; llama.cpp recorded at 2048
    assert rows[("gemma4-31b", "2048")][3:] == ["4267", "4444", "4491", "24.00", "2542"]
    assert rows[("qwen36-27b", "512")][-1] == "–"


def test_projection_leaves_out_a_model_with_an_untimed_group():
    from zincbench.show.t4_view import projection_rows

    doc = _document(tokens=(512,))
    for r in doc["results"]:
        if r["case"] == "qwen35-9b.ffn-T512" and r["variant"] == "norm_f16_shared":
            r["summary"] = None
    assert "qwen35-9b" not in {row[0] for row in projection_rows(doc)}


def test_group_table_shows_launches_savings_and_bits():
    from zincbench.show.t4_view import group_rows

    row = next(r for r in group_rows(_document()) if r[:2] == ["qwen35-9b.ffn", "512"])
    assert row == ["qwen35-9b.ffn", "512", "7/7/7", "1000", "960", "950", "1400", "–", "40", "50", "==-"]


def test_tables_fit_80_columns():
    from zincbench.show.t4_view import markdown_view, print_view

    console = Console(width=80, record=True, force_terminal=False)
    print_view(_document(), console)
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "gemma4-31b.attn-sliding-vq6" in text and "2542" in text
    assert re.search(r"\| qwen35-9b \| 512 \|", markdown_view(_document()))


def test_gpu_orchestration_dry_run(tmp_path):
    """Every path, tile and the declared engine built, run, checked and bit-judged with CuPy stood in by NumPy
    and every launch checked against its kernel's parameter list (tests/fixtures/t4_dryrun.py). In a
    subprocess: the stand-in `cupy` must never be seen by other tests."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "fixtures" / "fakecupy"), str(ROOT)])}
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "fixtures" / "t4_dryrun.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=ROOT,
    )
    assert result.returncode == 0 and result.stdout.strip().endswith("dry run ok"), result.stderr[-3000:]
