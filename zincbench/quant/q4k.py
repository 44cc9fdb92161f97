"""Q4_K: ggml's 4.5-bit super-block, x = d·sc·q - dmin·m, in NumPy.

Block layout (144 bytes, 256 weights as 8 sub-blocks of 32): fp16 ``d`` @0, fp16 ``dmin`` @2,
12 bytes of packed 6-bit (scale, min) codes @4, 128 bytes of 4-bit quants @16. In each 64-weight
chunk c, byte ``qs[32c + l]`` holds weight ``64c + l`` in its low nibble and ``64c + 32 + l`` in its
high nibble. ``quantize`` is ggml's ``quantize_row_q4_K_ref`` (no importance matrix), bit for bit.
"""

from __future__ import annotations

import numpy as np

from zincbench.quant.blocks import (
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

NAME = "q4_k"
GGML_TYPE = 12
BLOCK_BYTES = 144
SUB_BLOCKS = 8
SUB_BLOCK_WEIGHTS = 32

f32 = np.float32


def unpack_scale_min(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ggml's get_scale_min_k4 for all 8 sub-blocks: 12 bytes ``(n, 12)`` -> scale and min codes ``(n, 8)``.

    Bytes 0-3 hold scales 0-3 (low 6 bits) and the top 2 bits of scales 4-7; bytes 4-7 the same for
    the mins; bytes 8-11 the low 4 bits of scale 4+i (low nibble) and min 4+i (high nibble).
    """
    lo, mid, hi = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    scale = np.concatenate([lo & 63, (hi & 0xF) | ((lo >> 6) << 4)], axis=1)
    minimum = np.concatenate([mid & 63, (hi >> 4) | ((mid >> 6) << 4)], axis=1)
    return scale, minimum


def pack_scale_min(scale: np.ndarray, minimum: np.ndarray) -> np.ndarray:
    """The inverse of ``unpack_scale_min`` for codes in 0..63."""
    lo = scale[:, :4] | ((scale[:, 4:] >> 4) << 6)
    mid = minimum[:, :4] | ((minimum[:, 4:] >> 4) << 6)
    hi = (scale[:, 4:] & 0xF) | ((minimum[:, 4:] & 0xF) << 4)
    return np.concatenate([lo, mid, hi], axis=1)


def sub_block_affine(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """d·sc and dmin·m of each 32-weight sub-block ``(n, 8, 1)`` from the header Q4_K and Q5_K share
    (fp16 d, fp16 dmin, 12 bytes of packed 6-bit codes)."""
    d, dmin = fp16_at(blocks, 0), fp16_at(blocks, 2)
    scale, minimum = unpack_scale_min(blocks[:, 4:16])
    return (d[:, None] * scale.astype(f32))[:, :, None], (dmin[:, None] * minimum.astype(f32))[:, :, None]


def dequantize(data: np.ndarray) -> np.ndarray:
    """Q4_K bytes ``(..., nblk*144)`` -> float32 ``(..., nblk*256)``, bit-identical to dequantize_row_q4_K."""
    blocks, grid = byte_blocks(data, BLOCK_BYTES, "Q4_K")
    n = len(blocks)
    sub_scale, sub_min = sub_block_affine(blocks)
    nibbles = (blocks[:, 16:].reshape(n, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8)[:, None]) & 0xF
    q = nibbles.reshape(n, SUB_BLOCKS, SUB_BLOCK_WEIGHTS).astype(f32)
    return rows_of((sub_scale * q - sub_min).reshape(n, QK_K), grid)


def make_qkx2_quants(x, weights, nmax: int, rmin: float, rdelta: float, nstep: int):
    """ggml's make_qkx2_quants over groups ``(n, ...)`` (element axis first): the (scale, min) pair
    minimizing Σw·err².

    Returns (scale, the_min, L): x ≈ scale·L - the_min with L in 0..nmax. As in C, an accepted
    candidate replaces ``min`` for the rest of the search, so later steps use the new range.
    """
    sum_w = sequential_sum(weights)
    sum_x = sequential_sum(weights * x)
    vmax = x.max(axis=0)
    vmin = np.minimum(x.min(axis=0), f32(0))
    flat = vmax == vmin
    levels, weighted, work = np.empty_like(x), np.empty_like(x), np.empty_like(x)

    def quantize_levels(iscale, shift):  # L = clamp(nearest_int(iscale*(x - min)), 0, nmax), into levels
        np.subtract(x, shift, out=levels)
        np.multiply(levels, iscale, out=levels)
        np.rint(levels, out=levels)
        return np.clip(levels, 0, nmax, out=levels)

    def weighted_error(scale, offset):  # Σ w·(scale·L + min - x)², summed in C's order
        np.multiply(levels, scale, out=work)
        np.add(work, offset, out=work)
        np.subtract(work, x, out=work)
        np.multiply(work, work, out=work)
        return sequential_sum(np.multiply(work, weights, out=work))

    # Candidates are remembered by (iscale, min) and their levels recomputed at the end: cheaper
    # than copying the levels of every accepted candidate.
    best_iscale = f32(nmax) / (vmax - vmin)
    best_shift = vmin
    scale = f32(1) / best_iscale
    quantize_levels(best_iscale, best_shift)
    best_error = weighted_error(scale, vmin)

    for step in range(nstep + 1):
        iscale = (f32(rmin) + f32(rdelta) * f32(step) + f32(nmax)) / (vmax - vmin)
        quantize_levels(iscale, vmin)
        np.multiply(weights, levels, out=weighted)
        sum_l = sequential_sum(weighted)
        sum_l2 = sequential_sum(np.multiply(weighted, levels, out=work))
        sum_xl = sequential_sum(np.multiply(weighted, x, out=work))
        det = sum_w * sum_l2 - sum_l * sum_l
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / det
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det
        positive_min = this_min > 0  # the fit wants an offset above zero: refit the scale alone
        this_scale = np.where(positive_min, sum_xl / sum_l2, this_scale)
        this_min = np.where(positive_min, f32(0), this_min)
        error = weighted_error(this_scale, this_min)
        better = (det > 0) & (error < best_error)
        best_iscale = np.where(better, iscale, best_iscale)
        best_shift = np.where(better, vmin, best_shift)
        best_error = np.where(better, error, best_error)
        scale = np.where(better, this_scale, scale)
        vmin = np.where(better, this_min, vmin)

    best_levels = quantize_levels(best_iscale, best_shift).astype(np.uint8)
    best_levels[:, flat] = 0
    return np.where(flat, f32(0), scale), -vmin, best_levels


def positive_max(v: np.ndarray) -> np.ndarray:
    """C's ``m = 0; if (v > m) m = v;`` over the last axis (so +0, never -0, when nothing is positive)."""
    top = v.max(axis=-1)
    return np.where(top > 0, top, f32(0))


def six_bit_codes(values: np.ndarray, top: np.ndarray) -> np.ndarray:
    """``MIN(63, (uint8_t)nearest_int(63/top·v))``, with 0 codes where top is 0."""
    inverse = np.where(top > 0, f32(63) / top, f32(0))
    return np.minimum(nearest_int(inverse[:, None] * values).astype(np.uint8), 63)


def scaled_levels(x_blocks: np.ndarray, nmax: int, rmin: float, nstep: int):
    """What quantize_row_q4_K_ref and quantize_row_q5_K_ref share: per 32-weight sub-block, the
    (scale, min) fit of make_qkx2_quants (levels 0..nmax), 6-bit codes against the block's largest
    scale and min, fp16 ``d`` / ``dmin``, and the levels re-quantized against the rounded scales.

    Returns (d, dmin, scale codes, min codes, levels block-major ``(n, 256)``).
    """
    x = element_major(x_blocks, SUB_BLOCK_WEIGHTS)
    av_x = np.sqrt(sequential_sum(x * x) / f32(SUB_BLOCK_WEIGHTS))
    weights = av_x + np.abs(x)
    scales, mins, levels = make_qkx2_quants(x, weights, nmax=nmax, rmin=rmin, rdelta=0.1, nstep=nstep)

    max_scale, max_min = positive_max(scales), positive_max(mins)
    scale_codes, min_codes = six_bit_codes(scales, max_scale), six_bit_codes(mins, max_min)
    d = fp16_round(max_scale / f32(63))
    dmin = fp16_round(max_min / f32(63))

    # Re-quantize against the rounded scales; a sub-block whose scale rounded to 0 keeps its levels.
    sub_scale = d.astype(f32)[:, None] * scale_codes.astype(f32)
    sub_min = dmin.astype(f32)[:, None] * min_codes.astype(f32)
    requantized = np.clip(np.rint((x + sub_min) / sub_scale), 0, nmax).astype(np.uint8)
    return d, dmin, scale_codes, min_codes, block_major(np.where(sub_scale != 0, requantized, levels))


def quantize_blocks(x_blocks: np.ndarray) -> np.ndarray:
    """quantize_row_q4_K_ref on float32 super-blocks ``(n, 256)`` -> ``(n, 144)`` bytes."""
    n = len(x_blocks)
    d, dmin, scale_codes, min_codes, levels = scaled_levels(x_blocks, nmax=15, rmin=-1.0, nstep=20)
    pairs = levels.reshape(n, 4, 2, 32)  # (64-weight chunk, low/high nibble, l)
    qs = (pairs[:, :, 0] | (pairs[:, :, 1] << 4)).reshape(n, 128)
    return np.concatenate([fp16_bytes(d), fp16_bytes(dmin), pack_scale_min(scale_codes, min_codes), qs], axis=1)


def quantize(x: np.ndarray) -> np.ndarray:
    """Float weights ``(..., n*256)`` -> Q4_K bytes ``(..., n*144)``, bit-exact with quantize_row_q4_K_ref."""
    x_blocks, grid = weight_blocks(x)
    return rows_of(quantize_in_chunks(x_blocks, quantize_blocks, BLOCK_BYTES), grid)


def random_blocks(rng: np.random.Generator, rows: int, k: int, block_bytes: int = BLOCK_BYTES) -> np.ndarray:
    """``rows`` rows of ``k`` weights as random valid Q4_K blocks ``(rows, k/256*144)``, made as bytes
    (Q5_K's, with its ``block_bytes``: the same header, every other byte uniform too).

    Distribution: every scale/min code and every quant nibble uniform over its full range (0..63,
    0..15); ``d`` log-uniform in [1e-4, 3e-2] and ``dmin = d·2^u``, u uniform in [-2, 2], both stored
    as fp16, so always finite and positive. Weights then lie within about ±30.
    """
    blocks, grid = random_block_bytes(rng, rows, k, block_bytes)
    d = log_uniform_fp16(rng, len(blocks), 1e-4, 3e-2)
    dmin = (d.astype(np.float64) * np.exp2(rng.uniform(-2.0, 2.0, len(blocks)))).astype(np.float16)
    blocks[:, 0:2] = fp16_bytes(d)
    blocks[:, 2:4] = fp16_bytes(dmin)
    return rows_of(blocks, grid)
