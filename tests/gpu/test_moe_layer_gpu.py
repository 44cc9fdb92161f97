"""The whole MoE FFN block on the GPU against float64 NumPy: the candidate (every down type, every
epilogue, the fused Q5_K down and the dequant + cuBLAS down) and the engine's block as declared in
engine_zinc.yaml (matvec path below moe_tc_min_t, the grouped-TC path from it), at odd token counts,
uniform and Zipf routing, every token checked.

Tolerance (the variants' own, 5e-3 relative Frobenius error of the block's contribution): the TC paths
round weights and activations (and the candidate its SwiGLU intermediate) to fp16 with f32
accumulation; an indexing or routing bug gives errors of order 1.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import yaml

from zincbench.bench import load_family
from zincbench.bench.autotune import Tuning
from zincbench.bench.declared import declared_for
from zincbench.config import experiment_path

pytestmark = pytest.mark.gpu
TILES = ["1,8,8,1,2", "1,2,4,1,3"]


def small_experiment(tmp_path, tokens, down_types=("q4_k", "q5_k", "q6_k"), shared_width=256, routing=("uniform",)):
    data = yaml.safe_load(experiment_path("moe_layer").read_text())
    data["shapes"] = [
        {
            "name": "small",
            "experts": 24,
            "top_k": 4,
            "n_embd": 512,
            "expert_width": 256,
            "down_types": list(down_types),
            "shared_width": shared_width,
            "shared_type": "q6_k",
        }
    ]
    data["tokens"], data["routing"] = list(tokens), list(routing)
    data["correctness_tokens"] = max(tokens)  # every token
    data["kernel_packs"] = [str(experiment_path("engine_zinc"))]
    path = tmp_path / "layer.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def fixed_tile(tile):
    return lambda key, candidates, make_run: Tuning(tile, {tile: 0.0}, cached=True)


def check_variant(family, cfg, case, inputs, prepared, tolerance):
    """The runner's check, on a timer of its own: its launches held and released as a timed sample's are."""
    from zincbench.bench.runner import _check
    from zincbench.measure.timer import GpuTimer, TimerConfig

    result = _check(family, cfg, case, inputs, prepared, tolerance, GpuTimer(TimerConfig(mode="hot", warmup=0)))
    assert result.passed, (case.key, result)
    return result


def run_cases(cupy, rng, path, variants, tile=TILES[0]):
    family = load_family("layer")
    cfg = family.load(path)
    declared = declared_for("layer", path, cfg)
    infos = {v.name: v for v in family.variants(cfg) + declared.infos()}
    checked = []
    for case in family.cases(cfg):
        inputs = family.build_inputs(cfg, case, rng)
        for name in variants:
            if name in declared.variants:
                prepared = declared.prepare(name, family.declared_binding(cfg, case, inputs))
            else:
                prepared = family.prepare(cfg, case, inputs, name, fixed_tile(tile))
            check_variant(family, cfg, case, inputs, prepared, infos[name].tolerance)
            checked.append((case.key, name, prepared))
    return checked


@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("routing", ["uniform", "zipf"])
def test_candidate_block_matches_float64(cupy, rng, tmp_path, tile, routing):
    path = small_experiment(tmp_path, tokens=[77, 5], routing=[routing])
    checked = run_cases(cupy, rng, path, ["fused_block", "fused_block_cublas_down"], tile)
    assert {key.split("-")[1] for key, _, _ in checked} == {"q4k", "q5k", "q6k"}
    assert {(key.split("-")[1], name) for key, name, _ in checked} == {
        (down, name) for down in ("q4k", "q5k", "q6k") for name in ("fused_block", "fused_block_cublas_down")
    }


@pytest.mark.parametrize("t", [33, 77])  # below and above moe_tc_min_t = 64
def test_engine_blocks_match_float64(cupy, rng, tmp_path, t):
    path = small_experiment(tmp_path, tokens=[t])
    run_cases(cupy, rng, path, ["engine", "engine_block_matvec", "engine_block_tc"])


def test_block_without_shared_expert(cupy, rng, tmp_path):
    path = small_experiment(tmp_path, tokens=[77], down_types=("q4_k",), shared_width=0)
    run_cases(cupy, rng, path, ["fused_block", "engine"])


def test_each_stage_runs_alone_and_the_stages_make_the_block(cupy, rng, tmp_path):
    """The runner times every stage on its own: running them in order must give the block's output.
    The variants share the case's buffers (hidden, logits, table): each runs its whole block again first."""
    path = small_experiment(tmp_path, tokens=[77], down_types=("q5_k",))
    for key, name, prepared in run_cases(cupy, rng, path, ["fused_block", "engine"]):
        prepared.run()
        whole = prepared.output.get()
        prepared.output.fill(cupy.nan)
        for _, stage in prepared.stages:
            stage()
        cupy.cuda.Device().synchronize()
        if name == "engine":
            np.testing.assert_array_equal(prepared.output.get(), whole)
        else:  # the fused down adds its top_k slots by atomicAdd, in an order that varies from run to run: a sum's
            # rounding then moves at the scale of its largest terms, not of the (possibly cancelled) result
            scale = float(np.abs(whole).max())
            np.testing.assert_allclose(prepared.output.get(), whole, rtol=0, atol=8 * np.finfo(np.float32).eps * scale)


def test_a_broken_router_fails_the_check(cupy, rng, tmp_path):
    """The check reads the GPU's logits for the top-k: it must still catch wrong logits."""
    path = small_experiment(tmp_path, tokens=[77], down_types=("q5_k",))
    family = load_family("layer")
    cfg = family.load(path)
    case = family.cases(cfg)[0]
    inputs = family.build_inputs(cfg, case, rng)
    prepared = family.prepare(cfg, case, inputs, "fused_block", fixed_tile(TILES[0]))
    run = prepared.run

    def broken():
        run()
        inputs.buffers.logits[:, 0] += 1.0  # after the block: the output is right, the logits are not

    rel, _ = family.check(cfg, case, inputs, _ran(cupy, dataclasses.replace(prepared, run=broken)))
    assert rel > 1e-2


def _ran(cupy, prepared):
    prepared.run()
    cupy.cuda.Device().synchronize()
    return prepared.output


@pytest.mark.parametrize("experts,top_k", [(24, 4), (130, 8), (256, 8), (256, 1), (64, 32)])
def test_warp_topk_is_the_engines_topk_bit_for_bit(cupy, rng, experts, top_k):
    """moe_topk_softmax (one warp per token) against the engine's softmax_topk_batched (the stand-in, one
    64-thread block per token) on logits full of exact ties: the same ids in the same order, the same weight
    bits; both against the float64 rule of the reference."""
    from types import SimpleNamespace

    from zincbench.bench.moe_layer import engine_topk
    from zincbench.gpu.runtime import get_kernel
    from zincbench.ops.moe_layer import topk_softmax

    t = 77
    logits = rng.integers(-3, 4, size=(t, experts)).astype(np.float32)  # small integers: many exact ties
    logits[:5] += rng.standard_normal((5, experts), dtype=np.float32)  # and a few rows without ties
    logits[5] = 0.0  # every logit tied
    b = SimpleNamespace(
        logits=cupy.asarray(logits),
        table=cupy.full((t, 2 * top_k), 7, dtype=cupy.uint32),
        t=t,
        experts=experts,
        top_k=top_k,
    )
    topk_softmax(b.logits, b.table, top_k)()
    engine_table = cupy.zeros_like(b.table)
    get_kernel("moe_layer.cu", "softmax_topk_batched")(
        (t,), (64,), (b.logits, engine_table, np.uint32(experts), np.uint32(top_k))
    )
    ours = b.table.get()
    np.testing.assert_array_equal(ours, engine_table.get())
    ids, weights = engine_topk(logits, top_k)
    np.testing.assert_array_equal(ours[:, :top_k], ids)
    np.testing.assert_allclose(ours[:, top_k:].view(np.float32), weights, rtol=1e-6)


def test_tensor_core_router_logits_are_fp16_close_and_route_by_them(cupy, rng):
    """The candidate's router GEMM (fp16 x and router, both in the fused kernel's permuted K order) against
    float64 logits, and its table is the engine's top-k of the logits it wrote."""
    from types import SimpleNamespace

    from zincbench.bench.moe_layer import engine_topk
    from zincbench.ops.fused import permute_activations, permuted_activations
    from zincbench.ops.moe_layer import tensor_core_routing

    t, experts, n_embd, top_k = 301, 256, 2048, 8
    x = rng.standard_normal((t, n_embd), dtype=np.float32) * np.float32(0.05)
    router = rng.standard_normal((experts, n_embd), dtype=np.float32) / np.float32(np.sqrt(n_embd) * 0.05)
    b = SimpleNamespace(
        x=cupy.asarray(x),
        router=cupy.asarray(router),
        t=t,
        experts=experts,
        top_k=top_k,
        logits=cupy.full((t, experts), np.nan, dtype=cupy.float32),
        table=cupy.zeros((t, 2 * top_k), dtype=cupy.uint32),
    )
    xp = permuted_activations(cupy, t, n_embd)
    permute_activations(b.x, xp)
    tensor_core_routing(b, xp)()
    got = b.logits.get()
    ref = x.astype(np.float64) @ router.astype(np.float64).T
    rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert rel < 2e-3, rel  # fp16 operands (11 significant bits), f32 accumulation
    ids, _ = engine_topk(got, top_k)
    np.testing.assert_array_equal(b.table.get()[:, :top_k], ids)
