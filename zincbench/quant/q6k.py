"""Q6_K: ggml's 6.5625-bit super-block, x = d·sc·q, in NumPy.

Block layout (210 bytes, 256 weights as 16 sub-blocks of 16): 128 bytes ``ql`` (low 4 bits) @0,
64 bytes ``qh`` (high 2 bits) @128, 16 int8 sub-block scales @192, fp16 ``d`` @208 (last, unlike
Q4_K). Quants are stored as q+32 in 0..63. In each 128-weight half, weight ``32k + l`` (k = 0..3)
takes its low bits from nibble k//2 of ``ql[32·(k%2) + l]`` and its high bits from bits 2k..2k+1 of
``qh[l]``. ``quantize`` is ggml's ``quantize_row_q6_K_ref`` (no importance matrix), bit for bit.
"""

from __future__ import annotations

import numpy as np

from zincbench.quant.blocks import (
    GROUP_MAX_EPS,
    QK_K,
    block_major,
    byte_blocks,
    element_major,
    fp16_at,
    fp16_bytes,
    fp16_round,
    log_uniform_fp16,
    nearest_int,
    quantize_in_chunks,
    random_block_bytes,
    rows_of,
    sequential_sum,
    weight_blocks,
)

NAME = "q6_k"
GGML_TYPE = 14
BLOCK_BYTES = 210
SUB_BLOCKS = 16
SUB_BLOCK_WEIGHTS = 16

f32 = np.float32
_QUARTER_SHIFTS = np.array([0, 2, 4, 6], dtype=np.uint8)


def signed_levels(blocks: np.ndarray) -> np.ndarray:
    """The quants q - 32 (int8, -32..31) of blocks ``(n, >= 192)`` whose first 192 bytes are ``ql`` and ``qh``, as
    ``(n, 16 sub-blocks, 16 weights)``."""
    n = len(blocks)
    ql = blocks[:, 0:128].reshape(n, 2, 1, 64) >> np.array([0, 4], dtype=np.uint8)[:, None]
    low = (ql & 0xF).reshape(n, 2, 4, 32)  # (half, quarter k, l): nibble k//2 of ql[32·(k%2) + l]
    high = (blocks[:, 128:192].reshape(n, 2, 1, 32) >> _QUARTER_SHIFTS[:, None]) & 3
    return ((low | (high << 4)).astype(np.int8) - np.int8(32)).reshape(n, SUB_BLOCKS, SUB_BLOCK_WEIGHTS)


def sub_block_scales(blocks: np.ndarray) -> np.ndarray:
    """d·sc of each sub-block, float32 ``(n, 16)`` (exact: an fp16 times an int8)."""
    return fp16_at(blocks, 208)[:, None] * blocks[:, 192:208].view(np.int8).astype(f32)


def dequantize(data: np.ndarray) -> np.ndarray:
    """Q6_K bytes ``(..., nblk*210)`` -> float32 ``(..., nblk*256)``, bit-identical to dequantize_row_q6_K."""
    blocks, grid = byte_blocks(data, BLOCK_BYTES, "Q6_K")
    q = signed_levels(blocks)
    return rows_of((sub_block_scales(blocks)[:, :, None] * q.astype(f32)).reshape(len(blocks), QK_K), grid)


def signed_absmax(v: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """The signed value with the largest magnitude along ``axis`` (first wins) and its magnitude."""
    at = np.expand_dims(np.abs(v).argmax(axis=axis), axis)
    top = np.take_along_axis(v, at, axis=axis).squeeze(axis)
    return top, np.abs(top)


def make_qx_quants(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """ggml's make_qx_quants with rmse_type=1 (weights x²) over groups ``(n, ...)`` (element axis first).

    Returns (scale, L): x ≈ scale·(L - nmax) with L in 0..2·nmax-1; an all-(near-)zero group gives
    scale 0 and L = 0.
    """
    top, amax = signed_absmax(x, axis=0)
    zero = amax < GROUP_MAX_EPS
    x2 = x * x
    x3 = x2 * x

    def fit(iscale):
        q = np.clip(np.rint(iscale * x), -nmax, nmax - 1)
        return sequential_sum(x3 * q), sequential_sum((x2 * q) * q)

    best_iscale = f32(-nmax) / top
    sumlx, suml2 = fit(best_iscale)
    scale = np.where(suml2 != 0, sumlx / suml2, f32(0))
    best = scale * sumlx
    for step in (*range(-9, 0), *range(1, 10)):
        iscale = -(f32(nmax) + f32(0.1) * f32(step)) / top
        sumlx, suml2 = fit(iscale)
        better = (suml2 > 0) & (sumlx * sumlx > best * suml2)
        best_iscale = np.where(better, iscale, best_iscale)
        scale = np.where(better, sumlx / suml2, scale)
        best = np.where(better, scale * sumlx, best)

    levels = np.clip(nearest_int(best_iscale * x), -nmax, nmax - 1) + nmax
    return np.where(zero, f32(0), scale), np.where(zero, 0, levels)


def quantize_blocks(x_blocks: np.ndarray) -> np.ndarray:
    """quantize_row_q6_K_ref on float32 super-blocks ``(n, 256)`` -> ``(n, 210)`` bytes."""
    n = len(x_blocks)
    x = element_major(x_blocks, SUB_BLOCK_WEIGHTS)
    scales, levels = make_qx_quants(x, nmax=32)
    max_scale, max_abs_scale = signed_absmax(scales, axis=-1)
    all_zero = max_abs_scale < GROUP_MAX_EPS  # ggml zeroes the whole block, d included

    iscale = f32(-128) / max_scale
    d = fp16_round(f32(1) / iscale)
    # (int8_t)MIN(127, nearest_int(...)): the int8 store wraps, as C's conversion does.
    scale_codes = np.minimum(nearest_int(iscale[:, None] * scales), 127).astype(np.int8)

    # Re-quantize against the rounded scales; a sub-block whose scale rounded to 0 keeps its levels.
    sub_scale = d.astype(f32)[:, None] * scale_codes.astype(f32)
    requantized = np.clip(nearest_int(x / sub_scale), -32, 31) + 32
    levels = block_major(np.where(sub_scale != 0, requantized, levels).astype(np.uint8))

    quarters = levels.reshape(n, 2, 4, 32)  # (half, quarter k, l)
    ql = (quarters[:, :, 0:2] & 0xF) | ((quarters[:, :, 2:4] & 0xF) << 4)
    qh = np.bitwise_or.reduce((quarters >> 4) << _QUARTER_SHIFTS[:, None], axis=2)
    out = np.concatenate([ql.reshape(n, 128), qh.reshape(n, 64), scale_codes.view(np.uint8), fp16_bytes(d)], axis=1)
    out[all_zero] = 0
    return out


def quantize(x: np.ndarray) -> np.ndarray:
    """Float weights ``(..., n*256)`` -> Q6_K bytes ``(..., n*210)``, bit-exact with quantize_row_q6_K_ref."""
    x_blocks, grid = weight_blocks(x)
    return rows_of(quantize_in_chunks(x_blocks, quantize_blocks, BLOCK_BYTES), grid)


def random_blocks(rng: np.random.Generator, rows: int, k: int) -> np.ndarray:
    """``rows`` rows of ``k`` weights as random valid Q6_K blocks ``(rows, k/256*210)``, made as bytes.

    Distribution: every 6-bit quant uniform over 0..63 (q in -32..31); the 16 int8 sub-block scales
    uniform over the whole int8 range -128..127 (quantize_row_q6_K_ref itself emits -128..127);
    ``d`` of random sign with |d| log-uniform in [1e-5, 1e-3] as fp16 (finite; fp16 subnormal below
    6.1e-5, as in real files). Weights then lie within about ±4.
    """
    blocks, grid = random_block_bytes(rng, rows, k, BLOCK_BYTES)
    d = log_uniform_fp16(rng, len(blocks), 1e-5, 1e-3)
    d = np.where(rng.random(len(blocks)) < 0.5, -d, d)
    blocks[:, 208:210] = fp16_bytes(d)
    return rows_of(blocks, grid)
