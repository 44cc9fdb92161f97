"""The whole MoE FFN block on the GPU against float64 NumPy: the candidate (every down type, every
epilogue, the fused Q5_K down and the dequant + cuBLAS down) and the engine's block as declared in engine_zinc.yaml (matvec path below moe_tc_min_t, the
grouped-TC path from it), at odd token counts, uniform and Zipf routing, every token checked.

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
    data["shapes"] = [{"name": "small", "experts": 24, "top_k": 4, "n_embd": 512, "expert_width": 256,
                       "down_types": list(down_types), "shared_width": shared_width, "shared_type": "q6_k"}]
    data["tokens"], data["routing"] = list(tokens), list(routing)
    data["correctness_tokens"] = max(tokens)  # every token
    data["kernel_packs"] = [str(experiment_path("engine_zinc"))]
    path = tmp_path / "layer.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def fixed_tile(tile):
    return lambda key, candidates, make_run: Tuning(tile, {tile: 0.0}, cached=True)


def check_variant(cupy, family, cfg, case, inputs, prepared, tolerance):
    from zincbench.bench.runner import _check

    stream = cupy.cuda.Stream(non_blocking=True)
    result = _check(family, cfg, case, inputs, prepared, tolerance, stream)
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
            check_variant(cupy, family, cfg, case, inputs, prepared, infos[name].tolerance)
            checked.append((case.key, name, prepared))
    return checked


@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("routing", ["uniform", "zipf"])
def test_candidate_block_matches_float64(cupy, rng, tmp_path, tile, routing):
    path = small_experiment(tmp_path, tokens=[77, 5], routing=[routing])
    checked = run_cases(cupy, rng, path, ["fused_block", "fused_block_cublas_down"], tile)
    assert {key.split("-")[1] for key, _, _ in checked} == {"q4k", "q5k", "q6k"}
    assert {(key.split("-")[1], name) for key, name, _ in checked} == {
        (down, name) for down in ("q4k", "q5k", "q6k") for name in ("fused_block", "fused_block_cublas_down")}


@pytest.mark.parametrize("t", [33, 77])  # below and above moe_tc_min_t = 64
def test_engine_blocks_match_float64(cupy, rng, tmp_path, t):
    path = small_experiment(tmp_path, tokens=[t])
    run_cases(cupy, rng, path, ["engine", "engine_block_matvec", "engine_block_tc"])


def test_block_without_shared_expert(cupy, rng, tmp_path):
    path = small_experiment(tmp_path, tokens=[77], down_types=("q4_k",), shared_width=0)
    run_cases(cupy, rng, path, ["fused_block", "engine"])


def test_each_stage_runs_alone_and_the_stages_make_the_block(cupy, rng, tmp_path):
    """The runner times every stage on its own: running them in order must give the block's output."""
    path = small_experiment(tmp_path, tokens=[77], down_types=("q5_k",))
    for key, name, prepared in run_cases(cupy, rng, path, ["fused_block", "engine"]):
        whole = prepared.output.get()
        prepared.output.fill(cupy.nan)
        for _, stage in prepared.stages:
            stage()
        cupy.cuda.Device().synchronize()
        if name == "engine":
            np.testing.assert_array_equal(prepared.output.get(), whole)
        else:  # the fused down's atomicAdd order varies from run to run
            np.testing.assert_allclose(prepared.output.get(), whole, rtol=1e-5, atol=1e-5)


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
