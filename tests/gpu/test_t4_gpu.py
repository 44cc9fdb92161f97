"""T4 on the GPU: the fused norm-and-cast kernel against the engine's rms_norm + f32_to_f16 bit for bit, the
norm against float64 and the f32 model of its summation order, every path of a GEMM group (odd token
counts, odd row counts, a Q6_K V after Q4_K Q and K) bit for bit against the engine path and within
tolerance of float64, each path's launch count, and one whole microbench run (the declared engine
included) through the runner.

Tolerance for the GEMMs (the variants' own, 2e-3 relative Frobenius error): weights and the normed rows
are rounded to fp16, accumulation is f32; a wrong row, token or scale gives errors of order 1.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from zincbench.bench import load_family
from zincbench.bench.autotune import Tuning
from zincbench.config import experiment_path
from zincbench.quant import get_format
from zincbench.reference import kernels_ref
from zincbench.reference.rms_norm_ref import rms_norm_f32_model, rms_norm_f64

pytestmark = pytest.mark.gpu
EPS = 1e-6
TOLERANCE = 2e-3


def _norm_inputs(cupy, rng, t, n):
    x = rng.standard_normal((t, n)).astype(np.float32)
    w = (1 + 0.25 * rng.standard_normal(n)).astype(np.float32)
    return x, w, cupy.asarray(x), cupy.asarray(w)


@pytest.mark.parametrize("t, n", [(1, 1), (37, 300), (5, 4096 + 37), (67, 5376), (3, 257)])
def test_fused_norm_is_rms_norm_then_f32_to_f16_bit_for_bit(cupy, rng, t, n):
    from zincbench.ops.dequant import F32ToF16
    from zincbench.ops.norm_cast import RmsNorm

    x, w, xd, wd = _norm_inputs(cupy, rng, t, n)
    f32 = cupy.full((t, n), cupy.nan, dtype=cupy.float32)
    cast = cupy.full((t, n), cupy.nan, dtype=cupy.float16)
    fused = cupy.full((t, n), cupy.nan, dtype=cupy.float16)
    RmsNorm(xd, wd, f32, EPS)()
    F32ToF16(f32, cast)()
    RmsNorm(xd, wd, fused, EPS)()
    np.testing.assert_array_equal(fused.get().view(np.uint16), cast.get().view(np.uint16))
    got = f32.get()
    ref = rms_norm_f64(x, w, EPS)
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()  # rsqrtf is within a few ulp
    model = rms_norm_f32_model(x, w, EPS)
    assert np.abs(got - model).max() <= 4e-6 * np.abs(model).max()


def small_experiment(tmp_path, tokens, gemms, n_embd=512, variants=None) -> object:
    data = yaml.safe_load(experiment_path("t4_fusion").read_text())
    data["groups"] = [{"model": "small", "group": "g", "n_embd": n_embd, "layers": 3, "gemms": gemms}]
    data["tokens"] = list(tokens)
    data["check_rows"], data["check_tokens"] = 4096, 4096  # every row and token
    data["kernel_packs"] = [str(experiment_path("engine_zinc"))]
    if variants:
        data["variants"] = variants
    path = tmp_path / "t4.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


ATTN = [{"name": "q", "rows": 67}, {"name": "k", "rows": 130}, {"name": "v", "rows": 45, "weights": "q6_k"}]
FFN = [{"name": "gate", "rows": 200}, {"name": "up", "rows": 200}]


def fixed_tile(tile):
    return lambda key, candidates, make_run: Tuning(tile, {tile: 0.0}, cached=True)


@pytest.mark.parametrize("gemms", [ATTN, FFN], ids=["attn-q6v", "ffn"])
@pytest.mark.parametrize("t", [1, 37, 300])
def test_every_path_matches_float64_and_the_candidates_the_engine_bits(cupy, rng, tmp_path, gemms, t):
    from zincbench.bench.runner import _check
    from zincbench.measure.timer import GpuTimer, TimerConfig
    from zincbench.ops.norm_cast import PATHS, launch_count

    family = load_family("t4")
    cfg = family.load(small_experiment(tmp_path, [t], gemms))
    case = family.cases(cfg)[0]
    inputs = family.build_inputs(cfg, case, rng)
    formats = [g.get("weights", "q4_k") for g in gemms]
    timer = GpuTimer(TimerConfig(mode="hot", warmup=0))
    for variant in cfg.variants:
        info = next(v for v in family.variants(cfg) if v.name == variant)
        prepared = family.prepare(cfg, case, inputs, variant, fixed_tile(cfg.fused_tiles[0]))
        result = _check(family, cfg, case, inputs, prepared, info.tolerance, timer)
        assert result.passed, (variant, result)
        detail, failure = family.judge_output(cfg, case, inputs, info, prepared.output)
        path = {"engine_path": "engine"}.get(variant, variant)
        assert path in PATHS and prepared.detail["launches"] == launch_count(path, formats)
        if variant in ("engine_path", "norm_f16", "norm_f16_shared"):
            assert failure is None and detail["bits"]["identical"], (variant, detail)
        else:  # T1's kernel accumulates in its own order: checked against float64 only
            assert failure is None


def test_the_reference_is_float64_of_the_dequantized_weights(cupy, rng, tmp_path):
    """The family's check on an output built here from NumPy (independent of every path) passes, and one
    wrong row fails it: the check itself is sound."""
    family = load_family("t4")
    cfg = family.load(small_experiment(tmp_path, [37], FFN))
    case = family.cases(cfg)[0]
    inputs = family.build_inputs(cfg, case, rng)
    norm = rms_norm_f64(inputs.x_host, inputs.norm_w_host, EPS)
    run = inputs.runs_host[0][1]
    ys = [kernels_ref.dense_gemm(get_format("q4_k").dequantize(run[i * 200 : (i + 1) * 200]), norm) for i in (0, 1)]
    output = cupy.asarray(np.concatenate([y.ravel() for y in ys]).astype(np.float32))
    rel, written = family.check(cfg, case, inputs, output)
    assert written and rel < 1e-6
    output[37 * 200 + 5] += 100.0
    assert family.check(cfg, case, inputs, output)[0] > TOLERANCE


def test_microbench_run_records_bits_launches_and_the_projection(cupy, tmp_path):
    """One quick run through the runner: the declared engine (bundled stand-ins here) and every path,
    the candidates bit-identical, each row's launch count, the group and projection tables."""
    from rich.console import Console

    from zincbench import records
    from zincbench.bench.runner import run_microbench
    from zincbench.show.microbench_table import print_microbench
    from zincbench.show.t4_view import group_rows, projection_rows

    path = small_experiment(tmp_path, [512], ATTN, n_embd=1024)
    doc, decision, _ = run_microbench("t4", str(path), results_dir=tmp_path, quick=True, progress=False, seed=1)
    rows = {r.variant: r for r in doc.results}
    assert set(rows) == {"engine_path", "norm_f16", "norm_f16_shared", "t1_fused", "engine"}
    for name in ("engine_path", "norm_f16", "norm_f16_shared", "engine"):
        assert rows[name].check.passed and rows[name].detail["bits"]["identical"], name
    assert [rows[n].detail["launches"] for n in ("engine_path", "norm_f16", "norm_f16_shared")] == [10, 7, 6]
    assert decision.value in ("GO", "NO-GO", "INCONCLUSIVE")
    recorded = records.to_jsonable(doc)
    assert group_rows(recorded)[0][-1] == "==="  # A, B and the declared engine against engine_path
    assert projection_rows(recorded)[0][:3] == ["small", "512", "1"]
    console = Console(width=80, record=True)
    print_microbench(recorded, console)
    assert all(len(line) <= 80 for line in console.export_text().splitlines())
