"""Launchers of kernels/q4k_matvec.cu: the engine's routed-expert matvecs (the T2 gate's baseline).

Grid (top_k*M, T), block 64, exactly as ZINC launches ``dmmv_q{4,5,6}k_experts_batched``: one block per
(token, expert slot, output row), each reading its expert's weight row on its own.
"""

from __future__ import annotations

import numpy as np

from zincbench.errors import InputError
from zincbench.gpu.runtime import get_kernel
from zincbench.measure.traffic import Traffic
from zincbench.ops.dequant import check_array, row_weights
from zincbench.quant import get_format

SOURCE = "q4k_matvec.cu"
BLOCK = 64  # the engine's dmmv_fast_block: two warps, four 16-thread superblock groups
KERNELS = {"q4_k": "dmmv_q4k_experts_batched", "q5_k": "dmmv_q5k_experts_batched", "q6_k": "dmmv_q6k_experts_batched"}
MAX_GRID_Y = 65535


class ExpertsMatvec:
    """y[t][slot][m] = W[ids[t][slot]][m] . x[t] (or x[t][slot] when ``x_per_slot``), bound to buffers.

    weights: uint8 [E][M][row bytes]; x: f32 [T][K] (gate/up: all slots share the token's row) or
    [T][top_k][K] (down: one input row per slot); expert_ids: uint32 [T][routing_stride], the first
    top_k entries of a row are the token's experts (routing_stride = 2*top_k for the engine's table);
    y: f32 [T][top_k][M], overwritten.
    """

    def __init__(self, fmt: str, weights, x, expert_ids, y, *, top_k: int, x_per_slot: bool = False):
        if fmt not in KERNELS:
            raise InputError(f"no experts matvec kernel for {fmt!r}; have {', '.join(KERNELS)}")
        check_array(weights, np.uint8, (None, None, None), "weights")
        n_experts, m, row_bytes = weights.shape
        k = row_weights(fmt, row_bytes)
        check_array(expert_ids, np.uint32, (None, None), "expert_ids")
        t, routing_stride = expert_ids.shape
        if not 1 <= top_k <= routing_stride:
            raise InputError(f"top_k={top_k} must be in 1..{routing_stride} (the routing table's row length)")
        check_array(x, np.float32, (t, top_k, k) if x_per_slot else (t, k), "x")
        check_array(y, np.float32, (t, top_k, m), "y")
        if not 1 <= t <= MAX_GRID_Y:
            raise InputError(f"T={t} tokens: the engine's grid puts tokens on grid.y (1..{MAX_GRID_Y})")
        slice_bytes = m * row_bytes
        if fmt in ("q4_k", "q5_k") and n_experts * slice_bytes > 2**32:
            raise InputError("expert tensor over 4 GiB: the engine's Q4_K/Q5_K kernels index experts in 32-bit words")
        self.fmt, self.n_experts, self.m, self.k, self.t, self.top_k = fmt, n_experts, m, k, t, top_k
        self.x_per_slot = x_per_slot
        self.kernel = get_kernel(SOURCE, KERNELS[fmt])
        self.grid = (top_k * m, t)
        u32 = np.uint32
        self.args = (
            weights,
            x,
            y,
            expert_ids,
            u32(m),
            u32(k),
            u32(slice_bytes),
            u32(k if x_per_slot else 0),
            u32(top_k),
            u32(0),
            u32(routing_stride),
            u32(x[0].size),
            u32(top_k * m),
        )

    def __call__(self) -> None:
        self.kernel(self.grid, (BLOCK,), self.args)

    def traffic(self, experts_hit: int) -> Traffic:
        return experts_matvec_traffic(self.fmt, self.t, self.top_k, self.m, self.k, experts_hit, self.x_per_slot)

    def flops(self) -> int:
        return 2 * self.t * self.top_k * self.m * self.k


def experts_matvec_traffic(
    fmt: str, t: int, top_k: int, m: int, k: int, experts_hit: int, x_per_slot: bool = False
) -> Traffic:
    """minimum: each hit expert's weights once; actual: every (token, slot) re-reads its expert's M rows.

    Both count x once per input row, y once and the routing ids once; the x re-reads by every row block
    are assumed to hit L1/L2 (the rows are small), as are the weight re-reads' headers.
    """
    row_bytes = get_format(fmt).row_bytes(k)
    x_bytes = 4 * t * (top_k if x_per_slot else 1) * k
    other = x_bytes + 4 * t * top_k * m + 4 * t * top_k
    return Traffic(experts_hit * m * row_bytes + other, t * top_k * m * row_bytes + other)
