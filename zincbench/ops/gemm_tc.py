"""Launcher of kernels/gemm_q4k_tc.cu: the engine-style 64x64 wmma Q4_K GEMM (T1 gate reference).

Grid (ceil(M/64), ceil(T/64)), block 256, 24 KB static shared memory, as ZINC launches gemm_q4k_tc.
"""

from __future__ import annotations

import numpy as np

from zincbench.errors import InputError
from zincbench.gpu.runtime import get_kernel
from zincbench.measure.traffic import Traffic
from zincbench.ops.dequant import check_array, row_weights
from zincbench.quant import get_format

SOURCE = "gemm_q4k_tc.cu"
THREADS = 256
TILE = 64  # BM = BT = 64


def _tiles(n: int) -> int:
    return -(-n // TILE)


class GemmQ4KTC:
    """Y[T][M] = X[T][K] . W[M][K]^T (or Y += ... with ``accumulate``): fp16 inputs (RNE), f32 accumulate.

    weights: uint8 [M][row bytes] Q4_K; x: f32 [T][K]; y: f32 [T][M].
    """

    def __init__(self, weights, x, y, *, accumulate: bool = False):
        check_array(weights, np.uint8, (None, None), "weights")
        m, row_bytes = weights.shape
        k = row_weights("q4_k", row_bytes)
        check_array(x, np.float32, (None, k), "x")
        t = x.shape[0]
        check_array(y, np.float32, (t, m), "y")
        if weights.nbytes >= 2**32 or t * m >= 2**32:
            raise InputError("the engine's kernel indexes weights in 32-bit words and offsets in 32 bits")
        self.m, self.k, self.t, self.accumulate = m, k, t, accumulate
        self.kernel = get_kernel(SOURCE, "gemm_q4k_tc")
        self.grid = (_tiles(m), _tiles(t))
        u32 = np.uint32
        self.args = (weights, x, y, u32(m), u32(k), u32(t), u32(0), u32(0), u32(0), u32(1 if accumulate else 0), u32(0))

    def __call__(self) -> None:
        self.kernel(self.grid, (THREADS,), self.args)

    def traffic(self) -> Traffic:
        return gemm_q4k_tc_traffic(self.m, self.k, self.t, self.accumulate)

    def flops(self) -> int:
        return 2 * self.m * self.k * self.t


def gemm_q4k_tc_traffic(m: int, k: int, t: int, accumulate: bool = False) -> Traffic:
    """minimum: W, X and Y once; actual: W re-read per 64-token tile, X per 64-row tile (no cross-block reuse)."""
    w_bytes = m * get_format("q4_k").row_bytes(k)
    x_bytes, y_bytes = 4 * t * k, 4 * t * m * (2 if accumulate else 1)
    return Traffic(w_bytes + x_bytes + y_bytes, w_bytes * _tiles(t) + x_bytes * _tiles(m) + y_bytes)
