"""Q6_K repacked at load for the fused GEMM (kernels/kquant_fused_mma.cu, ZbQ6KR): 224-byte blocks, in NumPy.

A GGUF Q6_K block is 210 bytes, so in a row only every eighth block starts 16-byte aligned and the fused kernel
reads each 16-byte slice as five words and funnel shifts. An engine that repacks its Q6_K tensors once, when it
loads them, can give the kernel aligned blocks instead:

- ``ql`` (128 bytes) @0 and ``qh`` (64 bytes) @128, as in the GGUF block;
- the 16 sub-block scales @192 as fp16 ``d·sc`` (32 bytes), in the kernel's lane order: word c of half h (bytes
  192 + 16h + 4c) holds the scales of sub-blocks 8h + 4(c>>1) + (c&1) and that + 2.

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
SCALES_AT = 192
# Sub-block of each fp16 scale slot: slot 4c + 2j of half h (word c, low / high half j) is sub-block
# 8h + 4(c>>1) + (c&1) + 2j.
SCALE_ORDER = np.array([8 * h + 4 * (c >> 1) + (c & 1) + 2 * j for h in (0, 1) for c in range(4) for j in (0, 1)])


def repack(data: np.ndarray) -> np.ndarray:
    """GGUF Q6_K bytes ``(..., nblk*210)`` -> repacked ``(..., nblk*224)``."""
    blocks, grid = byte_blocks(data, q6k.BLOCK_BYTES, "Q6_K")
    out = np.empty((len(blocks), BLOCK_BYTES), dtype=np.uint8)
    out[:, :SCALES_AT] = blocks[:, :SCALES_AT]
    scales = fp16_round(q6k.sub_block_scales(blocks))[:, SCALE_ORDER]
    out[:, SCALES_AT:] = np.ascontiguousarray(scales, dtype="<f2").view(np.uint8)
    return rows_of(out, grid)


def dequantize(data: np.ndarray) -> np.ndarray:
    """Repacked bytes ``(..., nblk*224)`` -> float32 ``(..., nblk*256)``: fp16(d·sc)·(q - 32) per weight."""
    blocks, grid = byte_blocks(data, BLOCK_BYTES, "repacked Q6_K")
    n = len(blocks)
    slots = np.ascontiguousarray(blocks[:, SCALES_AT:]).view("<f2").astype(np.float32)
    scales = np.empty_like(slots)
    scales[:, SCALE_ORDER] = slots
    q = q6k.signed_levels(blocks).astype(np.float32)
    return rows_of((scales[:, :, None] * q).reshape(n, QK_K), grid)


def quantize(x: np.ndarray) -> np.ndarray:
    """Float weights ``(..., n*256)`` -> repacked bytes: ggml's Q6_K quantizer, then ``repack``."""
    return repack(q6k.quantize(x))


def random_blocks(rng: np.random.Generator, rows: int, k: int) -> np.ndarray:
    """``rows`` rows of ``k`` weights as repacked random valid Q6_K blocks (``q6k.random_blocks``, repacked)."""
    return repack(q6k.random_blocks(rng, rows, k))
