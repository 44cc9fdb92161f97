"""RMSNorm references: float64 (what the GEMM group is checked against) and a float32 model of the order a
block-per-row kernel sums the squares in (kernels/rms_norm_cast.cu; the engine's rms_norm).

The model is what makes T4's bit-identity designed rather than hoped for: the fused norm-and-cast kernel
reproduces the engine's rms_norm bit for bit only if it sums the squares in the same order (the same block
size, the same element-to-thread mapping, the same two-level shuffle reduction). ``block_sum_of_squares``
computes that order in float32 for any block size and load width, so a test can show that the launch
shape the fused kernel uses gives the engine's sums, and that a plausible "faster" one (float4 loads, a
smaller block) does not. The squares accumulate as f32 fused multiply-adds (NVRTC contracts
``sum += x * x`` by default), modelled in float64 and rounded once to float32 (x * x is exact in float64;
the final rounding can differ from a true fma only on a double-rounding tie).
"""

from __future__ import annotations

import numpy as np

WARP = 32


def rms_norm_f64(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """w * x / sqrt(mean(x^2) + eps) per row of x [T][N], float64."""
    x = np.asarray(x, dtype=np.float64)
    return np.asarray(w, dtype=np.float64) * x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)


def _warp_shuffle_down_sum(v: np.ndarray) -> np.ndarray:
    """__shfl_down_sync with offsets 16, 8, 4, 2, 1 over the last axis (32 lanes), float32: lane l adds lane
    l + offset, or its own value where l + offset is past the warp (CUDA returns the caller's value)."""
    lanes = np.arange(WARP)
    for offset in (16, 8, 4, 2, 1):
        source = np.where(lanes + offset < WARP, lanes + offset, lanes)
        v = (v + v[..., source]).astype(np.float32)
    return v


def block_sum_of_squares(x: np.ndarray, block: int = 256, load: int = 1) -> np.ndarray:
    """The float32 sum of squares of every row of x [T][N] as a block of ``block`` threads reduces it:
    thread j accumulates elements in chunks of ``load`` consecutive elements (1: j, j + block, ...; 4: a
    float4 per thread and step), then zinc_block_reduce_sum (per-warp shuffle, warp sums through shared
    memory, warp 0 shuffles again). Returns float32 [T]."""
    if block % WARP or not 0 < block <= 1024:
        raise ValueError(f"block must be a multiple of {WARP} up to 1024, got {block}")
    x = np.asarray(x, dtype=np.float32)
    t, n = x.shape
    step = block * load
    padded = np.zeros((t, -(-n // step) * step), dtype=np.float32)  # zeros add nothing: s + 0 * 0 == s
    padded[:, :n] = x
    # [T][rounds][thread][load]: the element thread j reads at round r, position p is r*step + j*load + p
    chunks = padded.reshape(t, -1, block, load).astype(np.float64)
    partial = np.zeros((t, block), dtype=np.float32)
    for r in range(chunks.shape[1]):
        for p in range(load):
            v = chunks[:, r, :, p]
            partial = (partial.astype(np.float64) + v * v).astype(np.float32)
    warps = _warp_shuffle_down_sum(partial.reshape(t, block // WARP, WARP))[..., 0]
    first = np.zeros((t, WARP), dtype=np.float32)
    first[:, : block // WARP] = warps
    return _warp_shuffle_down_sum(first)[:, 0]


def rms_norm_f32_model(x: np.ndarray, w: np.ndarray, eps: float, block: int = 256, load: int = 1) -> np.ndarray:
    """The kernel's f32 row: w * (x * scale), scale = 1 / sqrt(sum / N + eps) in float32 (the GPU's rsqrtf is
    an approximation of it, the same one in both kernels), the sum in ``block_sum_of_squares``'s order."""
    x = np.asarray(x, dtype=np.float32)
    n = np.float32(x.shape[-1])
    mean = block_sum_of_squares(x, block, load) / n + np.float32(eps)
    scale = (np.float32(1.0) / np.sqrt(mean, dtype=np.float32)).astype(np.float32)
    return (np.asarray(w, dtype=np.float32) * (x * scale[:, None])).astype(np.float32)
