"""Launchers of the MoE FFN block's pieces (kernels/moe_layer.cu, the grouped kernels) and the candidate block.

Buffers of one block (``LayerBuffers``): the FFN-normed activations ``x`` f32 [T][n_embd], the residual
stream ``hidden`` f32 [T][n_embd] the block adds into, the router (f32 [E][n_embd]), routed expert
weights (gate/up [E][ef][row bytes], down [E][n_embd][row bytes]) and the shared expert (gate/up
[ef_sh][row bytes], down [n_embd][row bytes], the f32 gate-input row [n_embd]).

``candidate_stages`` builds the candidate block as named stages (each enqueues only): x to fp16 once (in
the order the fused GEMMs read), the router as one fp16 Tensor-core GEMM over it and a warp-per-token
top-k, routing built once on the GPU, gate and up as ONE
grouped fused-dequant Q4_K GEMM with SwiGLU in its epilogue (fp16 intermediate), the down projection by
the entry of ``DOWN_PATHS`` for its type (the same fused kernel with the weighted combine in its
epilogue on Q4_K, Q5_K and Q6_K, or dequant + batched cuBLAS), the shared expert on the engine's dense
path (dequant + cuBLAS fp16).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from zincbench.gpu.runtime import engine_abi_launch, get_kernel
from zincbench.ops.dequant import DequantToF16
from zincbench.ops.fused import (
    EPILOGUE_COMBINE,
    EPILOGUE_SWIGLU_F16_GROUPED,
    EPILOGUE_SWIGLU_F16_PERM,
    FusedKQuantGemm,
    MmaTile,
    permute_activations,
    permuted_activations,
)
from zincbench.ops.moe_cublas import CublasGemm, DenseDequantCublas
from zincbench.ops.routing import SOURCE as ROUTING_SOURCE
from zincbench.ops.routing import RoutingWorkspace, build_routing

SOURCE = "moe_layer.cu"
u32 = np.uint32


@dataclass
class LayerBuffers:
    x: object
    hidden: object
    residual: object
    router: object
    gate: object
    up: object
    down: object
    down_type: str
    shared_gate: object
    shared_up: object
    shared_down: object
    shared_type: str
    shared_gate_inp: object
    logits: object  # f32 [T][E], written by the router stage
    table: object  # u32 [T][2*top_k], the engine's routing table
    top_k: int

    @property
    def t(self) -> int:
        return self.x.shape[0]

    @property
    def n_embd(self) -> int:
        return self.x.shape[1]

    @property
    def experts(self) -> int:
        return self.router.shape[0]

    @property
    def ef(self) -> int:
        return self.gate.shape[1]


Stage = tuple[str, Callable[[], None]]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


TOPK_WARPS = 4  # tokens per block of moe_topk_softmax (one warp each)


def topk_softmax(logits, table, top_k: int) -> Callable[[], None]:
    """moe_topk_softmax: the engine's routing table u32 [T][2 top_k] (ids | weights) from logits f32 [T][E],
    one warp per token (for the same logits, the same choice and weight bits as the engine's
    softmax_topk_batched)."""
    t, experts = logits.shape
    if experts > 256:
        raise ValueError(f"moe_topk_softmax keeps at most 256 logits per token, got {experts} experts")
    kernel = get_kernel(ROUTING_SOURCE, "moe_topk_softmax")
    args = (logits, table, u32(t), u32(experts), u32(top_k))
    grid = (_ceil(t, TOPK_WARPS),)
    return lambda: kernel(grid, (32 * TOPK_WARPS,), args)


def tensor_core_routing(b: LayerBuffers, xp) -> Callable[[], None]:
    """The candidate's router + top-k: logits = x . router^T as ONE cuBLAS fp16 GEMM over all T tokens (the
    engine: one f32 block per (expert, token)), then ``topk_softmax``.

    x is read as the fused GEMMs read it: ``xp``, fp16 in the kernel's permuted K order (written by
    ``permute_activations`` before this runs); the router is converted once, here, to fp16 in the same K
    order (a dot product does not depend on the order of its terms). fp16 keeps 11 significant bits, as
    TF32 does: logits within about 1e-3 relative of f32, so a token whose k-th and (k+1)-th logits are
    that close may pick another expert than an f32 router would. Measured on the H200 at T = 2048: the
    TF32 GEMM on f32 x takes 15-19 us (cuBLAS's sm90 TF32 kernels), the fp16 one 8-10 us."""
    import cupy

    experts, k = b.router.shape
    router16 = permuted_activations(cupy, experts, k)
    permute_activations(b.router, router16)  # once, when the block is built: the router is a constant
    half = cupy.float16
    gemm = CublasGemm(router16.view(half).reshape(experts, k), xp.view(half).reshape(b.t, k), b.logits)
    topk = topk_softmax(b.logits, b.table, b.top_k)

    def run() -> None:
        gemm()
        topk()

    return run


def swiglu(g, u, y) -> Callable[[], None]:
    kernel = get_kernel(SOURCE, "swiglu")
    n = int(y.size)
    return lambda: kernel((_ceil(n, 64),), (64,), (g, u, y, u32(n)))


def weighted_acc(b: LayerBuffers, down_e) -> Callable[[], None]:
    """moe_weighted_acc_batched: hidden[t] += sum_j w_j down_e[t][j], grid (ceil(n_embd/64), T), block 64."""
    kernel = get_kernel(SOURCE, "moe_weighted_acc_batched")
    n = b.n_embd
    args = (b.hidden, down_e, b.table, u32(n), u32(b.top_k), u32(n), u32(n), u32(b.top_k * n), u32(2 * b.top_k))
    return lambda: kernel((_ceil(n, 64), b.t), (64,), args)


def residual_copy(b: LayerBuffers) -> Callable[[], None]:
    """hidden = residual: the block adds into the residual stream, so every run starts from it."""
    import cupy

    return lambda: cupy.copyto(b.hidden, b.residual)


def shared_expert_stages(b: LayerBuffers) -> list[Stage]:
    """The qwen shared expert the engine's way at T >= cublas_min_t: gate and up GEMMs by dequant + cuBLAS
    fp16, swiglu, the f32 gate scalar, down GEMM, hidden += sigmoid(scalar) * o."""
    import cupy

    ef_sh = b.shared_gate.shape[0]
    g = cupy.empty((b.t, ef_sh), dtype=cupy.float32)
    u, act = cupy.empty_like(g), cupy.empty_like(g)
    o = cupy.empty((b.t, b.n_embd), dtype=cupy.float32)
    scalar = cupy.empty((b.t, 1), dtype=cupy.float32)
    gate_gemm = DenseDequantCublas(b.shared_type, b.shared_gate, b.x, g)
    up_gemm = DenseDequantCublas(b.shared_type, b.shared_up, b.x, u)
    down_gemm = DenseDequantCublas(b.shared_type, b.shared_down, act, o)
    act_step = swiglu(g, u, act)
    matvec = get_kernel(SOURCE, "dmmv_f32_batched")
    scalar_args = (b.shared_gate_inp, b.x, scalar, u32(1), u32(b.n_embd), u32(b.n_embd), u32(1))
    acc = engine_abi_launch(
        SOURCE,
        "sigmoid_scale_acc_batched",
        (_ceil(b.n_embd, 64), b.t),
        (64,),
        0,
        {"a": b.hidden, "b": o, "c": scalar},
        {
            "N": b.n_embd,
            "n_used": 0,
            "src_stride": 0,
            "a_tok_stride": b.n_embd,
            "b_tok_stride": b.n_embd,
            "routing_stride": 0,
        },
    )

    def run() -> None:
        gate_gemm()
        up_gemm()
        act_step()
        matvec((1, b.t), (256,), scalar_args)
        down_gemm()
        acc()

    return [("shared expert", run)]


# ---- the candidate's down projection: one entry per weight type ----------------------------------------
# Each entry owns the fp16 SwiGLU output in the layout it reads (``h``), names the gate+up epilogue that
# writes it (``intermediate``, with ``capacity`` for a padded one) and gives its stages.
class FusedDownCombine:
    """Q4_K / Q5_K / Q6_K down as a grouped fused-dequant GEMM (the format's policy) whose epilogue adds
    w(t, slot) * result into hidden (atomicAdd; see the kernel). Reads the SwiGLU output [T][top_k][ef] in
    the permuted fp16 order."""

    intermediate = EPILOGUE_SWIGLU_F16_PERM
    capacity = 0

    def __init__(self, b: LayerBuffers, ws: RoutingWorkspace, tile: MmaTile, capacity: int):
        import cupy

        self.h = cupy.empty((b.t, b.top_k, b.ef), dtype=cupy.float16)
        self.gemm = FusedKQuantGemm(tile, grouped=True, weights=b.down_type, epilogue=EPILOGUE_COMBINE)
        self.b, self.ws, self.xp = b, ws, self.h.view(np.uint32).reshape(b.t * b.top_k, b.ef // 8, 4)

    def stages(self) -> list[Stage]:
        b, ws = self.b, self.ws

        def run() -> None:
            self.gemm.grouped_call(
                b.down,
                self.xp,
                b.hidden,
                b.n_embd,
                b.ef,
                ws.tiles,
                ws.offsets,
                ws.sorted_ids,
                b.top_k,
                x_per_slot=True,
                routing=b.table,
            )

        return [("down+combine", run)]


class DequantCublasDown:
    """Down by dequant-once + ONE batched cuBLAS fp16 GEMM over the experts (2.5-3.6x faster than the
    engine's grouped TC down on the H200's T2 down run; what the fused down is measured against). The
    SwiGLU epilogue writes its input straight into the padded [E][capacity][ef] rows (no gather); the
    combine reads the [E][capacity][n_embd] result per token, slots in order (deterministic)."""

    intermediate = EPILOGUE_SWIGLU_F16_GROUPED

    def __init__(self, b: LayerBuffers, ws: RoutingWorkspace, tile: MmaTile, capacity: int):
        import cupy

        e = b.experts
        self.capacity = capacity
        self.h = cupy.zeros((e, capacity, b.ef), dtype=cupy.float16)  # padding rows stay finite zeros
        w16 = cupy.empty((e, b.n_embd, b.ef), dtype=cupy.float16)
        self.y = cupy.empty((e, capacity, b.n_embd), dtype=cupy.float32)
        self.position = cupy.empty(b.t * b.top_k, dtype=cupy.uint32)
        self.dequant = DequantToF16(b.down_type, b.down, w16)
        self.gemm = CublasGemm(w16, self.h, self.y)
        places = get_kernel(SOURCE, "moe_item_positions")
        acc = get_kernel(SOURCE, "moe_weighted_acc_grouped")
        items = b.t * b.top_k

        def combine() -> None:
            places((_ceil(items, 256),), (256,), (ws.sorted_ids, ws.offsets, self.position, u32(e)))
            acc(
                (_ceil(b.n_embd, 64), b.t),
                (64,),
                (
                    b.hidden,
                    self.y,
                    b.table,
                    self.position,
                    ws.offsets,
                    u32(b.n_embd),
                    u32(b.top_k),
                    u32(2 * b.top_k),
                    u32(capacity),
                ),
            )

        self.combine = combine

    def stages(self) -> list[Stage]:
        def down() -> None:
            self.dequant()
            self.gemm()

        return [("down", down), ("combine", self.combine)]


# The candidate's down projection by weight type: "fused" the fused kernel with the combine epilogue (its
# format policy reads every down type), "cublas" the dequant + cuBLAS path (how much the fused down is
# worth, and a fallback).
DOWN_PATHS = {
    "fused": {"q4_k": FusedDownCombine, "q5_k": FusedDownCombine, "q6_k": FusedDownCombine},
    "cublas": {"q4_k": DequantCublasDown, "q5_k": DequantCublasDown, "q6_k": DequantCublasDown},
}


def candidate_stages(
    b: LayerBuffers, tile: MmaTile, *, shared: bool, down: str = "fused", capacity: int = 0
) -> list[Stage]:
    """The candidate block as named stages, in launch order; ``down`` picks the DOWN_PATHS family,
    ``capacity`` (tokens per expert, at least the largest bucket) sizes a padded down path."""
    import cupy

    if b.gate.dtype != np.uint8 or b.ef % 256:
        raise ValueError("the fused gate/up kernel reads Q4_K rows of a multiple of 256 weights")
    ws = RoutingWorkspace(b.t, b.top_k, b.experts, tile.bn)
    xp = permuted_activations(cupy, b.t, b.n_embd)
    down_path = DOWN_PATHS[down][b.down_type](b, ws, tile, capacity)
    gate_up = FusedKQuantGemm(tile, grouped=True, weights="q4_k", epilogue=down_path.intermediate)
    route = tensor_core_routing(b, xp)

    def gate_up_swiglu() -> None:
        gate_up.grouped_call(
            b.gate,
            xp,
            down_path.h,
            b.ef,
            b.n_embd,
            ws.tiles,
            ws.offsets,
            ws.sorted_ids,
            b.top_k,
            w_up=b.up,
            capacity=down_path.capacity,
        )

    stages = [
        ("residual", residual_copy(b)),
        ("x to fp16", lambda: permute_activations(b.x, xp)),
        ("router+top-k", route),
        ("routing build", lambda: build_routing(b.table, ws)),
        ("gate+up+swiglu", gate_up_swiglu),
        *down_path.stages(),
    ]
    return stages + (shared_expert_stages(b) if shared else [])
