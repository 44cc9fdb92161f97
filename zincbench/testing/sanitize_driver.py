"""Launch one group of bundled kernels once at edge shapes, for compute-sanitizer; or the fused kernel
once per gate at the gate's own shape, for ncu (``--shapes gate``). The one place that builds kernel
inputs and launches them outside a microbench: scripts/probe_fused.py times the same inputs.

    compute-sanitizer --tool memcheck python -m zincbench.testing.sanitize_driver fused [--seed N]
    ncu -k regex:gemm_kquant_mma python -m zincbench.testing.sanitize_driver fused --shapes gate

Edge shapes: tiles cut by the shape (M not a multiple of 64, T not a multiple of the token tile),
experts that receive no token, one token per expert (N_e = 1), a single token (T = 1), K = 256 (one
super-block), routing tables wider than top_k whose extra entries are junk; the fused kernel in every
tile shape the T1 and T2 gates tune over (their experiment YAMLs). Inputs are fresh random
data (the seed is printed; --seed replays it); every output the kernels should write is left
uninitialised, so initcheck reports a kernel that reads what it did not write. cuBLAS's outputs are
zeroed first: initcheck does not see what cuBLAS's kernels write (CublasGemm.zero_output_first).

CuPy's memory pool is switched off: every array is its own cudaMalloc, so memcheck sees each
buffer's exact bounds (inside a pool chunk an overrun would land in a neighbouring array unseen).
Exit codes: 0 after the group ran and synchronised, 2 unknown group (or one without gate shapes), 4 no
GPU/CuPy.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Callable

import numpy as np

from zincbench.errors import ExitCode, ZincbenchError
from zincbench.quant import get_format

FORMATS = ("q4_k", "q6_k")


def routing_table(rng, t: int, top_k: int, n_experts: int, stride: int | None = None, skip_last: int = 0) -> np.ndarray:
    """uint32 [T][stride]: top_k distinct experts per token among the first E - skip_last (the rest never
    routed), then junk ids that the kernels must not read; ``stride`` defaults to top_k (no junk)."""
    table = rng.integers(0, 2**32, size=(t, stride or top_k), dtype=np.uint32)
    table[:, :top_k] = np.argsort(rng.random((t, n_experts - skip_last)), axis=1)[:, :top_k]
    return table


def one_token_per_expert(rng, n_experts: int, top_k: int) -> np.ndarray:
    """N_e = 1: T = E / top_k tokens, every expert routed exactly once."""
    return rng.permutation(n_experts).astype(np.uint32).reshape(n_experts // top_k, top_k)


def bucket_sizes(ids: np.ndarray, top_k: int, n_experts: int) -> np.ndarray:
    return np.bincount(ids[:, :top_k].ravel(), minlength=n_experts)


def quantized(cupy, rng, fmt: str, lead: tuple, k: int):
    """Random valid blocks uint8 [*lead][row bytes] for rows of K weights."""
    return cupy.asarray(get_format(fmt).random_blocks(rng, int(np.prod(lead)), k).reshape(*lead, -1))


def activations(cupy, rng, shape):
    return cupy.asarray(rng.standard_normal(shape, dtype=np.float32))


def permuted(cupy, x, order: str = "mma"):
    """f32 activations [rows][K] in the fused kernel's permuted fp16 layout (``order``: MmaTile.x_order)."""
    from zincbench.ops.fused import permute_activations, permuted_activations

    xp = permuted_activations(cupy, x.shape[0], x.shape[1])
    permute_activations(x, xp, order)
    return xp


def permute_job(cupy, rng, rows: int, k: int):
    """(x, xp) for a one-launch routing build's X permute: f32 activations and their fp16 workspace."""
    from zincbench.ops.fused import permuted_activations

    return activations(cupy, rng, (rows, k)), permuted_activations(cupy, rows, k)


def run_matvec(cupy, rng) -> None:
    from zincbench.ops.matvec import ExpertsMatvec

    cases = [  # (T, top_k, E, M, K, routing stride / top_k, x per slot)
        (1, 1, 3, 5, 256, 1, False),  # T = 1, top_k = 1
        (7, 4, 9, 67, 512, 2, False),  # the engine's 2*top_k routing table, M = 67
        (5, 8, 64, 33, 256, 1, True),  # down form, most experts empty
        (3, 2, 2, 130, 768, 1, False),  # three super-blocks, M = 130
    ]
    for fmt in FORMATS:
        for t, top_k, e, m, k, stride, per_slot in cases:
            ids = cupy.asarray(routing_table(rng, t, top_k, e, top_k * stride))
            x = activations(cupy, rng, (t, top_k, k) if per_slot else (t, k))
            y = cupy.empty((t, top_k, m), dtype=cupy.float32)
            ExpertsMatvec(fmt, quantized(cupy, rng, fmt, (e, m), k), x, ids, y, top_k=top_k, x_per_slot=per_slot)()


def run_dequant(cupy, rng) -> None:
    from zincbench.ops.dequant import ENGINE, VECTORIZED, DequantToF16, F32ToF16

    shapes = [(3, 5, 256), (67, 512), (1, 256)]
    for kernels in (ENGINE, VECTORIZED):
        for fmt in FORMATS:
            for shape in shapes:
                w = quantized(cupy, rng, fmt, shape[:-1], shape[-1])
                DequantToF16(fmt, w, cupy.empty(shape, dtype=cupy.float16), kernels)()
        for n in (1, 4 * 256 + 37):  # one element; a partial last block (and vector)
            F32ToF16(activations(cupy, rng, (n,)), cupy.empty(n, dtype=cupy.float16), kernels)()


def run_routing(cupy, rng) -> None:
    from zincbench.ops.routing import (
        ONE_LAUNCH_SINGLE_BLOCK_ITEMS,
        ROUTING_BUILDS,
        GatherRows,
        RoutingWorkspace,
        ScatterRows,
        build_routing,
    )

    def built(
        ids: np.ndarray, top_k: int, n_experts: int, tile_n: int, build: str = "single_block"
    ) -> RoutingWorkspace:
        ws = RoutingWorkspace(ids.shape[0], top_k, n_experts, tile_n, build=build)
        build_routing(cupy.asarray(ids), ws)
        return ws

    for build in ROUTING_BUILDS:
        for t, top_k, e, tile_n, stride in [
            (1, 1, 1, 64, 1),
            (37, 8, 256, 64, 2),
            (300, 8, 16, 16, 1),
            (64, 6, 1024, 8, 1),
            (2999, 8, 256, 16, 1),
            (701, 7, 1000, 8, 2),
        ]:
            built(routing_table(rng, t, top_k, e, top_k * stride), top_k, e, tile_n, build)
        bad = routing_table(rng, 9, 3, 12, 3)
        bad[4, 1] = 12  # an id >= E: counted in the status word, never followed
        built(bad, 3, 12, 4, build)
    # the one-launch builds with several batches per route block, and with the fused GEMM's X permute beside them: the
    # multi-block protocol (single_block_items 0), one route block running the single-block build (P = 296, and
    # P = 2400 past its id cache; E = 1000: 1024-thread blocks) and the replicated build
    ws = RoutingWorkspace(2999, 8, 256, 16, build="one_launch", max_route_blocks=2, single_block_items=0)
    build_routing(cupy.asarray(routing_table(rng, 2999, 8, 256, 8)), ws)
    for rows, e, order, options in (
        (37, 256, "mma", {"single_block_items": 0}),
        (300, 256, "wgmma", {"single_block_items": 0}),
        (37, 256, "wgmma", {"single_block_items": ONE_LAUNCH_SINGLE_BLOCK_ITEMS}),
        (300, 1000, "mma", {"single_block_items": 300 * 8}),
        (37, 256, "wgmma", {"build": "replicated"}),
        (300, 1000, "mma", {"build": "replicated", "max_route_blocks": 3}),
    ):
        ws = RoutingWorkspace(rows, 8, e, 16, **{"build": "one_launch", **options})
        x, xp = permute_job(cupy, rng, rows, 512)
        build_routing(cupy.asarray(routing_table(rng, rows, 8, e, 8)), ws, x, xp, order)
    # the replicated build past the words its threads keep (16 K): it reads the rest of the table again
    ws = RoutingWorkspace(4501, 8, 256, 16, build="replicated")
    build_routing(cupy.asarray(routing_table(rng, 4501, 8, 256, 8)), ws)

    top_k, k, m = 4, 96, 37
    for ids, n_experts in (
        (routing_table(rng, 23, top_k, 13, top_k, skip_last=3), 13),  # 3 experts never routed
        (one_token_per_expert(rng, 12, top_k), 12),
    ):  # N_e = 1
        t = ids.shape[0]
        ws = built(ids, top_k, n_experts, 16)
        capacity = int(bucket_sizes(ids, top_k, n_experts).max()) + 2  # padding rows the kernels must skip
        for per_slot in (False, True):
            x = activations(cupy, rng, (t, top_k, k) if per_slot else (t, k))
            for cap in (0, capacity):  # contiguous [P][*] and padded [E][capacity][*]
                lead = (n_experts, cap) if cap else (t * top_k,)
                GatherRows(x, ws, cupy.empty((*lead, k), dtype=cupy.float16), capacity=cap, x_per_slot=per_slot)()
                ScatterRows(
                    activations(cupy, rng, (*lead, m)), ws, cupy.empty((t, top_k, m), dtype=cupy.float32), capacity=cap
                )()


def run_gemm_tc(cupy, rng) -> None:
    from zincbench.ops.gemm_tc import GemmQ4KTC

    shapes = [(67, 70, 512), (64, 1, 256), (130, 129, 256)]  # (M, T, K): tiles cut in M and T, T = 1
    for m, t, k in shapes:
        w = quantized(cupy, rng, "q4_k", (m,), k)
        x = activations(cupy, rng, (t, k))
        GemmQ4KTC(w, x, cupy.empty((t, m), dtype=cupy.float32))()
        GemmQ4KTC(w, x, activations(cupy, rng, (t, m)), accumulate=True)()


def run_moe_cublas(cupy, rng) -> None:
    from zincbench.ops.moe_cublas import CublasGemm, DenseDequantCublas, MoeDequantCublas

    # Each GEMM's output is read back by a kernel (a sum). initcheck cannot say whether cuBLAS wrote every
    # element (it does not see cuBLAS's writes: CublasGemm.zero_output_first); the GPU tests do.
    for dtype, (m, n, k) in [
        (np.float16, (67, 1, 256)),
        (np.float16, (130, 45, 512)),
        (np.float32, (12, 1, 256)),
        (np.float32, (256, 23, 2048)),
    ]:  # f32: the router's TF32 GEMM
        w = cupy.asarray(rng.standard_normal((m, k)).astype(dtype))
        x = cupy.asarray(rng.standard_normal((n, k)).astype(dtype))
        y = cupy.empty((n, m), dtype=cupy.float32)
        CublasGemm(w, x, y)()
        y.sum()
    for fmt in FORMATS:
        for m, t, k in [(67, 45, 512), (64, 1, 256), (256, 1, 256)]:
            y = cupy.empty((t, m), dtype=cupy.float32)
            DenseDequantCublas(fmt, quantized(cupy, rng, fmt, (m,), k), activations(cupy, rng, (t, k)), y)()
            y.sum()
    cases = [  # (routing table, top_k, E, M, K, x per slot)
        (routing_table(rng, 1, 1, 3, 1), 1, 3, 5, 256, False),  # T = 1, top_k = 1
        (routing_table(rng, 11, 3, 9, 3), 3, 9, 67, 256, False),  # M = 67
        (routing_table(rng, 13, 4, 40, 4, skip_last=8), 4, 40, 70, 512, True),  # down form, empty experts
        (one_token_per_expert(rng, 8, 2), 2, 8, 100, 256, False),  # N_e = 1
    ]
    for fmt in FORMATS:
        for ids, top_k, e, m, k, per_slot in cases:
            t = ids.shape[0]
            capacity = int(bucket_sizes(ids, top_k, e).max())  # exactly full: the edge of the padding
            path = MoeDequantCublas(
                fmt,
                quantized(cupy, rng, fmt, (e, m), k),
                activations(cupy, rng, (t, top_k, k) if per_slot else (t, k)),
                cupy.asarray(ids),
                cupy.empty((t, top_k, m), dtype=cupy.float32),
                top_k=top_k,
                capacity=capacity,
                x_per_slot=per_slot,
            )
            path()
            path.check()


def run_t4(cupy, rng) -> None:
    """The norm kernels at widths below, at and past one block (1, 37, 256, 300) and every T4 path on groups
    at edge shapes: one token, odd rows, a Q6_K run after a Q4_K run; outputs read back by a sum."""
    from zincbench.ops.norm_cast import PATHS, GroupBuffers, RmsNorm, group_steps

    for t, n in [(1, 1), (3, 37), (2, 256), (5, 300)]:
        x, w = activations(cupy, rng, (t, n)), activations(cupy, rng, (n,))
        for dtype in (cupy.float32, cupy.float16):
            y = cupy.empty((t, n), dtype=dtype)
            RmsNorm(x, w, y, 1e-6)()
            y.sum()
    tile = gate_tiles("t4")[0]
    for t, k, gemms in [
        (1, 256, [("q", "q4_k", 1), ("k", "q4_k", 3), ("v", "q6_k", 2)]),
        (37, 512, [("gate", "q4_k", 67), ("up", "q4_k", 67)]),
        (5, 256, [("q", "q6_k", 70)]),
    ]:
        runs = []
        for name, fmt, rows in gemms:
            if runs and runs[-1][0] == fmt:
                runs[-1][1] += rows
            else:
                runs.append([fmt, rows])
        weights = [(fmt, quantized(cupy, rng, fmt, (rows,), k)) for fmt, rows in runs]
        total = sum(rows for _, _, rows in gemms)
        for path in PATHS:
            b = GroupBuffers(
                activations(cupy, rng, (t, k)),
                activations(cupy, rng, (k,)),
                1e-6,
                weights,
                gemms,
                cupy.empty(t * total, dtype=cupy.float32),
            )
            for _, step in group_steps(path, b, tile):
                step()
            b.y.sum()


def gate_tiles(family: str, experiment: str | None = None) -> list:
    """The fused kernel's tile shapes that a gate tunes over: ``fused_tiles`` of its experiment YAML
    (the family's default experiment unless named)."""
    from zincbench.bench import load_family
    from zincbench.config import experiment_path
    from zincbench.ops.fused import MmaTile

    fam = load_family(family)
    config = fam.load(experiment_path(experiment or fam.default_experiment))
    return [MmaTile.parse(tile) for tile in config.fused_tiles]


# The fused kernel's edge shapes (run_fused; tests/test_fused_loader.py models the Q6_K loads at the same).
# Dense (M, K, T): M and T cut the tile, T = 1; K = 768: Q6_K rows of 630 bytes, so blocks start at every even
# misalignment; K = 2304: enough superblocks (9) for the stream-K tiles to share a partial wave. Grouped (E, M, K)
# of the routing cases in run_fused.
FUSED_DENSE_SHAPES = ((197, 256, 1), (64, 768, 37), (300, 512, 130), (300, 2304, 130))
# Stream-K tiles also run as on a GPU of 4 resident blocks: whole tiles, then shared ranges that cross tiles.
FUSED_STREAM_K_SLOTS = 4
FUSED_GROUPED_SHAPES = ((7, 100, 512), (8, 100, 256), (4, 33, 256))
# allrows and producer tiles also run the first routing at (E, M, K) = (7, 300, 768): 2 or 3 row blocks, the last one
# partial; allrows: each next one's first stages loaded into the buffers the one before frees, after refills (K 768)
FUSED_ALL_ROWS_SHAPE = (7, 300, 768)
# persist tiles also run on this many blocks: each block several token tiles, both table buffers in turn
FUSED_PERSIST_BLOCKS = 2


def fused_kernels(tiles: list, grouped: bool, weights: str) -> list:
    """(tile, kernel) for each tile that applies on this GPU with ``weights`` (as the autotuner skips the
    others: a wgmma tile off sm_90, a tile whose stages do not fit in shared memory)."""
    from zincbench.ops.fused import FusedKQuantGemm

    kernels = []
    for tile in tiles:
        try:
            kernels.append((tile, FusedKQuantGemm(tile, grouped=grouped, weights=weights)))
        except ValueError:
            continue
    return kernels


def run_fused(cupy, rng) -> None:
    from zincbench.gpu.launch import supports_dependent_launch
    from zincbench.ops.fused import POLICIES, stream_k_schedule
    from zincbench.ops.routing import RoutingWorkspace, build_routing, route_and_permute

    for weights in POLICIES:  # every format the kernel reads
        for tile, gemm in fused_kernels(gate_tiles("t1"), False, weights):  # the dense T1 gate's tiles
            for m, k, t in FUSED_DENSE_SHAPES:
                w = quantized(cupy, rng, weights, (m,), k)
                xp = permuted(cupy, activations(cupy, rng, (t, k)), tile.x_order)
                y = cupy.empty((t, m), dtype=cupy.float32)
                own = gemm.schedule(m, k, t)
                schedules = [own]
                if tile.stream_k:
                    schedules.append(stream_k_schedule(own.tiles, own.n_sb, FUSED_STREAM_K_SLOTS, min_superblocks=1))
                for schedule in schedules:
                    gemm.dense(w, xp, y, m, k, t, schedule=schedule)
    routings = [  # (routing table, top_k) of FUSED_GROUPED_SHAPES
        (routing_table(rng, 23, 2, 7, 2, skip_last=1), 2),  # expert 6 never routed, T = 23
        (one_token_per_expert(rng, 8, 2), 2),  # N_e = 1, K = 256
        (routing_table(rng, 1, 1, 4, 1), 1),  # T = 1, three empty experts
    ]
    grouped_cases = [(ids, top_k, e, m, k) for (ids, top_k), (e, m, k) in zip(routings, FUSED_GROUPED_SHAPES)]
    grouped_kernels = fused_kernels(gate_tiles("t2"), True, "q4_k") + fused_kernels(  # the T2 gates' tiles
        gate_tiles("t2", "t2_moe_down"),
        True,
        "q6_k",  # (gate/up, down)
    )
    all_rows_case = (*routings[0], *FUSED_ALL_ROWS_SHAPE)
    for tile, gemm in grouped_kernels:
        for ids, top_k, e, m, k in grouped_cases + ([all_rows_case] if tile.all_rows or tile.producer else []):
            t = ids.shape[0]
            ws = RoutingWorkspace(t, top_k, e, tile.bn)
            build_routing(cupy.asarray(ids), ws)
            w = quantized(cupy, rng, gemm.weights, (e, m), k)
            launches = [(False, None), (True, None)] + ([(False, FUSED_PERSIST_BLOCKS)] if tile.persist else [])
            for per_slot, blocks in launches:  # (X per token-slot, a persist tile's blocks)
                rows = t * top_k if per_slot else t
                y = cupy.empty((t, top_k, m), dtype=cupy.float32)
                gemm.grouped_call(
                    w,
                    permuted(cupy, activations(cupy, rng, (rows, k)), tile.x_order),
                    y,
                    m,
                    k,
                    ws.tiles,
                    ws.offsets,
                    ws.sorted_ids,
                    top_k,
                    x_per_slot=per_slot,
                    blocks=blocks,
                )
    # T2's launch pair on sm_90 and later: the GEMM as the replicated routing build's programmatic dependent
    if supports_dependent_launch(cupy.cuda.Device().compute_capability):
        ids, top_k, e, m, k = grouped_cases[0]
        t = ids.shape[0]
        x = activations(cupy, rng, (t, k))
        for tile, gemm in grouped_kernels:
            if gemm.weights != "q4_k":
                continue
            ws = RoutingWorkspace(t, top_k, e, tile.bn, build="replicated")
            xp = permuted(cupy, x, tile.x_order)
            route_and_permute(cupy.asarray(ids), ws, x, xp, tile.x_order)
            y = cupy.empty((t, top_k, m), dtype=cupy.float32)
            w = quantized(cupy, rng, "q4_k", (e, m), k)
            gemm.grouped_call(w, xp, y, m, k, ws.tiles, ws.offsets, ws.sorted_ids, top_k, dependent=True)


def run_layer(cupy, rng) -> None:
    """The MoE block (`layer` family) at edge shapes: every down type, T = 1 (most experts empty), T = 23
    (the engine's matvec path), T = 77 (its TC path, tiles cut); the engine's declared blocks with the
    stand-in kernels everywhere; our blocks in every tile the experiment tunes over at T = 77 and in its
    first tile elsewhere (the tiles differ in the GEMMs, whose edges T = 77 cuts; fewer runs keep initcheck
    inside its time limit)."""
    from zincbench.bench import load_family
    from zincbench.bench.autotune import Tuning
    from zincbench.bench.base import NotApplicable
    from zincbench.bench.declared import declared_for
    from zincbench.bench.moe_layer import LayerShape
    from zincbench.config import experiment_path

    family = load_family("layer")
    path = experiment_path(family.default_experiment)
    cfg = family.load(path)
    cfg.shapes = [
        LayerShape(
            "edge",
            experts=12,
            top_k=3,
            n_embd=256,
            expert_width=256,
            down_types=["q4_k", "q5_k", "q6_k"],
            shared_width=256,
            shared_type="q6_k",
        )
    ]
    cfg.shapes[0].check()
    cfg.tokens, cfg.routing = [1, 23, 77], ["uniform"]
    declared = declared_for("layer", path, cfg)
    for case in family.cases(cfg):
        inputs = family.build_inputs(cfg, case, rng)
        runs = [
            (name, declared.prepare(name, family.declared_binding(cfg, case, inputs)))
            for name in ("engine_block_matvec", "engine_block_tc")
        ]
        every_tile = case.params["tokens"] == max(cfg.tokens)
        for variant in ("fused_block", "fused_block_cublas_down"):
            for tile in cfg.fused_tiles if every_tile and variant == "fused_block" else cfg.fused_tiles[:1]:
                try:
                    runs.append(
                        (
                            f"{variant} {tile}",
                            family.prepare(
                                cfg,
                                case,
                                inputs,
                                variant,
                                lambda key, tiles, make_run, tile=tile: Tuning(tile, {tile: 0.0}),
                            ),
                        )
                    )
                except NotApplicable:
                    pass
        for name, prepared in runs:
            # The block stage by stage (in launch order the stages are the block), one line each and each
            # synchronised: a sanitizer report printed below a line is that stage's.
            for stage, run in prepared.stages or [("block", prepared.run)]:
                print(f"sanitize_driver layer: {case.key} {name} / {stage}", flush=True)
                run()
                cupy.cuda.Device().synchronize()


def run_ssm(cupy, rng) -> None:
    """The T3 kernels (`t3` family: scans, conv1d, gated norm) at edge shapes: T = 1, a partial chunk
    (T = 37), two chunks and a tail (T = 130); two value heads per key group; a narrow head (hv = d_state =
    32, 160 conv channels: not a multiple of the conv block) for the sequential scans. Our launchers and
    the engine pack's declared launches (stand-ins) of the same kernels."""
    from zincbench.bench import load_family
    from zincbench.bench.base import NotApplicable
    from zincbench.bench.declared import declared_for
    from zincbench.bench.t3_ssm import SSM_STAGES, SsmModel
    from zincbench.config import experiment_path

    family = load_family("t3")
    path = experiment_path(family.default_experiment)
    cfg = family.load(path)
    cfg.models = [
        SsmModel("edge", n_embd=256, dt_rank=6, head_v_dim=128, d_state=128, n_group=3),
        SsmModel("narrow", n_embd=256, dt_rank=3, head_v_dim=32, d_state=32, n_group=1),
    ]
    cfg.tokens, cfg.stages = [1, 37, 130], list(SSM_STAGES)
    declared = declared_for("t3", path, cfg)
    for case in family.cases(cfg):
        inputs = family.build_inputs(cfg, case, rng)
        runs = []
        for name in declared.variants:
            try:
                runs.append(declared.prepare(name, family.declared_binding(cfg, case, inputs)).run)
            except NotApplicable:
                pass
        for variant in ("engine", "block", "chunked"):
            try:
                runs.append(family.prepare(cfg, case, inputs, variant, None).run)
            except NotApplicable:
                pass
        for run in runs:
            inputs.reset()
            run()


# The gates' shapes (ncu wants the kernel as the gate runs it): T1's dense prefill GEMM and T2's expert
# GEMM at N_e = 8, each with its gate's first tile.
T1_SHAPE = {"m": 4096, "k": 4096, "t": 2048}
T2_SHAPE = {"e": 256, "m": 512, "k": 2048, "t": 256, "top_k": 8}


def run_fused_at_gate_shapes(cupy, rng) -> None:
    from zincbench.ops.fused import FusedKQuantGemm
    from zincbench.ops.routing import RoutingWorkspace, build_routing

    m, k, t = T1_SHAPE["m"], T1_SHAPE["k"], T1_SHAPE["t"]
    tile = gate_tiles("t1")[0]
    FusedKQuantGemm(tile, grouped=False, weights="q4_k").dense(
        quantized(cupy, rng, "q4_k", (m,), k),
        permuted(cupy, activations(cupy, rng, (t, k)), tile.x_order),
        cupy.empty((t, m), dtype=cupy.float32),
        m,
        k,
        t,
    )
    e, m, k, t, top_k = (T2_SHAPE[key] for key in ("e", "m", "k", "t", "top_k"))
    tile = gate_tiles("t2")[0]
    ws = RoutingWorkspace(t, top_k, e, tile.bn)
    build_routing(cupy.asarray(routing_table(rng, t, top_k, e)), ws)
    FusedKQuantGemm(tile, grouped=True, weights="q4_k").grouped_call(
        quantized(cupy, rng, "q4_k", (e, m), k),
        permuted(cupy, activations(cupy, rng, (t, k)), tile.x_order),
        cupy.empty((t, top_k, m), dtype=cupy.float32),
        m,
        k,
        ws.tiles,
        ws.offsets,
        ws.sorted_ids,
        top_k,
    )


GROUPS: dict[str, Callable[[object, np.random.Generator], None]] = {
    "matvec": run_matvec,
    "dequant": run_dequant,
    "routing": run_routing,
    "gemm_tc": run_gemm_tc,
    "moe_cublas": run_moe_cublas,
    "fused": run_fused,
    "layer": run_layer,
    "ssm": run_ssm,
    "t4": run_t4,
}
GATE_SHAPES: dict[str, Callable[[object, np.random.Generator], None]] = {"fused": run_fused_at_gate_shapes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m zincbench.testing.sanitize_driver",
        description="Launch one group of bundled kernels once at edge shapes.",
    )
    parser.add_argument("group", choices=sorted(GROUPS))
    parser.add_argument(
        "--shapes",
        choices=("edge", "gate"),
        default="edge",
        help=f"edge shapes (compute-sanitizer) or the gates' shapes (ncu; groups: {', '.join(sorted(GATE_SHAPES))})",
    )
    parser.add_argument("--seed", type=int, default=None, help="replay the inputs of an earlier run")
    args = parser.parse_args(argv)
    launch = (GROUPS if args.shapes == "edge" else GATE_SHAPES).get(args.group)
    if launch is None:
        parser.error(f"group {args.group} has no gate shapes (those that have: {', '.join(sorted(GATE_SHAPES))})")
    seed = args.seed if args.seed is not None else secrets.randbits(63)
    try:
        from zincbench.gpu import require_cupy

        cupy = require_cupy()
        cupy.cuda.set_allocator(None)
        from zincbench.ops.moe_cublas import CublasGemm

        CublasGemm.zero_output_first = True  # what cuBLAS writes, initcheck does not see
        launch(cupy, np.random.default_rng(seed))
        cupy.cuda.Device().synchronize()
    except ZincbenchError as exc:
        print(f"sanitize_driver: error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    print(f"sanitize_driver {args.group}: all launches completed and synchronised (seed {seed}, {args.shapes} shapes)")
    return int(ExitCode.OK)


if __name__ == "__main__":
    sys.exit(main())
