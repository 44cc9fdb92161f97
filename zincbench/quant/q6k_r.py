"""Q6_K repacked at load for the fused GEMM (kernels/kquant_fused_mma.cu, ZbQ6KR): 224-byte blocks, in NumPy.

A GGUF Q6_K block is 210 bytes, so in a row only every eighth block starts 16-byte aligned and the fused kernel
reads each 16-byte slice as five words and funnel shifts. An engine that repacks its Q6_K tensors once, when it
loads them, can give the kernel aligned blocks instead, as two 112-byte halves, each what one pipeline stage of the
kernel holds of a row (so that one TMA box, or 7 aligned 16-byte copies, moves it). Half h (at 112h):

- ``ql[64h : 64h + 64]`` (64 bytes), then ``qh[32h : 32h + 32]`` (32 bytes), as in the GGUF block;
- its 8 sub-block scales as fp16 ``d·sc`` (16 bytes), in the kernel's lane order: word c (bytes 96 + 4c of the half)
  holds the scales of sub-blocks 8h + 4(c>>1) + (c&1) and that + 2.

``d·sc`` is an fp16 times an int8: exact in float32, so its one rounding to fp16 here is the rounding the kernel
applied to the GGUF block: the fused GEMM multiplies bit for bit the same fp16 weights on either layout. The cost is
14 bytes per 256 weights (+6.7% memory: 7 bits per weight instead of 6.5625).
"""

from __future__ import annotations

import numpy as np

from zincbench.quant import q6k
from zincbench.quant.blocks import QK_K, byte_blocks, fp16_round, rows_of

NAME = "q6_k_r"
BLOCK_BYTES = 224
HALF_BYTES = 112
QL_HALF, QH_HALF, SCALES_HALF = 64, 32, 16  # a half's bytes of each, in this order
GGUF_QH_AT = 128  # qh in the GGUF block
# Sub-block of each fp16 scale slot: slot 4c + 2j of half h (word c, low / high half j) is sub-block
# 8h + 4(c>>1) + (c&1) + 2j.
SCALE_ORDER = np.array([8 * h + 4 * (c >> 1) + (c & 1) + 2 * j for h in (0, 1) for c in range(4) for j in (0, 1)])
# Repacked byte i of ql and qh (the halves' first 96 bytes) holds GGUF byte QUANT_SOURCE[i]
QUANT_SOURCE = np.concatenate(
    [np.r_[QL_HALF * h : QL_HALF * (h + 1), GGUF_QH_AT + QH_HALF * h : GGUF_QH_AT + QH_HALF * (h + 1)] for h in (0, 1)]
)
QUANT_AT = np.concatenate([np.arange(HALF_BYTES * h, HALF_BYTES * h + QL_HALF + QH_HALF) for h in (0, 1)])
SCALES_AT = np.concatenate([np.arange(HALF_BYTES * h + QL_HALF + QH_HALF, HALF_BYTES * (h + 1)) for h in (0, 1)])


def repack(data: np.ndarray) -> np.ndarray:
    """GGUF Q6_K bytes ``(..., nblk*210)`` -> repacked ``(..., nblk*224)``."""
    blocks, grid = byte_blocks(data, q6k.BLOCK_BYTES, "Q6_K")
    out = np.empty((len(blocks), BLOCK_BYTES), dtype=np.uint8)
    out[:, QUANT_AT] = blocks[:, QUANT_SOURCE]
    scales = fp16_round(q6k.sub_block_scales(blocks))[:, SCALE_ORDER]
    out[:, SCALES_AT] = np.ascontiguousarray(scales, dtype="<f2").view(np.uint8)
    return rows_of(out, grid)


def dequantize(data: np.ndarray) -> np.ndarray:
    """Repacked bytes ``(..., nblk*224)`` -> float32 ``(..., nblk*256)``: fp16(d·sc)·(q - 32) per weight."""
    blocks, grid = byte_blocks(data, BLOCK_BYTES, "repacked Q6_K")
    n = len(blocks)
    slots = np.ascontiguousarray(blocks[:, SCALES_AT]).view("<f2").astype(np.float32)
    scales = np.empty_like(slots)
    scales[:, SCALE_ORDER] = slots
    gguf = np.zeros((n, q6k.BLOCK_BYTES), dtype=np.uint8)  # the quants back in GGUF places (scales and d unread)
    gguf[:, QUANT_SOURCE] = blocks[:, QUANT_AT]
    q = q6k.signed_levels(gguf).astype(np.float32)
    return rows_of((scales[:, :, None] * q).reshape(n, QK_K), grid)


def quantize(x: np.ndarray) -> np.ndarray:
    """Float weights ``(..., n*256)`` -> repacked bytes: ggml's Q6_K quantizer, then ``repack``."""
    return repack(q6k.quantize(x))


def random_blocks(rng: np.random.Generator, rows: int, k: int) -> np.ndarray:
    """``rows`` rows of ``k`` weights as repacked random valid Q6_K blocks (``q6k.random_blocks``, repacked)."""
    return repack(q6k.random_blocks(rng, rows, k))
