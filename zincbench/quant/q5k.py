"""Q5_K: ggml's 5.5-bit super-block, x = d·sc·q - dmin·m with 5-bit q, in NumPy.

Block layout (176 bytes, 256 weights as 8 sub-blocks of 32): fp16 ``d`` @0, fp16 ``dmin`` @2, the 12
bytes of packed 6-bit (scale, min) codes Q4_K uses @4, 32 bytes ``qh`` @16, 128 bytes ``qs`` @48. In
64-weight chunk c, ``qs[32c + l]`` holds the low 4 bits of weight ``64c + l`` (low nibble) and
``64c + 32 + l`` (high nibble); bit ``2c`` of ``qh[l]`` is the fifth bit of the first, bit ``2c + 1``
of the second. ``quantize`` is ggml's ``quantize_row_q5_K_ref`` (no importance matrix), bit for bit.
"""

from __future__ import annotations

import numpy as np

from zincbench.quant import q4k
from zincbench.quant.blocks import QK_K, byte_blocks, fp16_bytes, quantize_in_chunks, rows_of, weight_blocks
from zincbench.quant.q4k import SUB_BLOCK_WEIGHTS, SUB_BLOCKS, pack_scale_min, scaled_levels, sub_block_affine

NAME = "q5_k"
GGML_TYPE = 13
BLOCK_BYTES = 176

f32 = np.float32
CHUNK_BITS = (np.arange(8, dtype=np.uint8)).reshape(4, 2)  # qh bit of (64-weight chunk, low/high half)


def dequantize(data: np.ndarray) -> np.ndarray:
    """Q5_K bytes ``(..., nblk*176)`` -> float32 ``(..., nblk*256)``, bit-identical to dequantize_row_q5_K."""
    blocks, grid = byte_blocks(data, BLOCK_BYTES, "Q5_K")
    n = len(blocks)
    sub_scale, sub_min = sub_block_affine(blocks)
    qh = blocks[:, 16:48].reshape(n, 1, 1, 32)
    low = (blocks[:, 48:].reshape(n, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8)[:, None]) & 0xF
    high = (qh >> CHUNK_BITS[None, :, :, None]) & 1
    q = (low | (high << 4)).reshape(n, SUB_BLOCKS, SUB_BLOCK_WEIGHTS).astype(f32)
    return rows_of((sub_scale * q - sub_min).reshape(n, QK_K), grid)


def quantize_blocks(x_blocks: np.ndarray) -> np.ndarray:
    """quantize_row_q5_K_ref on float32 super-blocks ``(n, 256)`` -> ``(n, 176)`` bytes."""
    n = len(x_blocks)
    d, dmin, scale_codes, min_codes, levels = scaled_levels(x_blocks, nmax=31, rmin=-0.5, nstep=15)
    halves = levels.reshape(n, 4, 2, 32)  # (64-weight chunk, first/second 32, l)
    qs = ((halves[:, :, 0] & 0xF) | ((halves[:, :, 1] & 0xF) << 4)).reshape(n, 128)
    qh = np.bitwise_or.reduce((halves >> 4) << CHUNK_BITS[None, :, :, None], axis=(1, 2)).astype(np.uint8)
    return np.concatenate([fp16_bytes(d), fp16_bytes(dmin), pack_scale_min(scale_codes, min_codes), qh, qs], axis=1)


def quantize(x: np.ndarray) -> np.ndarray:
    """Float weights ``(..., n*256)`` -> Q5_K bytes ``(..., n*176)``, bit-exact with quantize_row_q5_K_ref."""
    x_blocks, grid = weight_blocks(x)
    return rows_of(quantize_in_chunks(x_blocks, quantize_blocks, BLOCK_BYTES), grid)


def random_blocks(rng: np.random.Generator, rows: int, k: int) -> np.ndarray:
    """``rows`` rows of ``k`` weights as random valid Q5_K blocks: Q4_K's distribution (every code and
    bit uniform; ``d`` log-uniform in [1e-4, 3e-2], ``dmin = d·2^u``), 176 bytes a block."""
    return q4k.random_blocks(rng, rows, k, BLOCK_BYTES)
