"""What Q4_K and Q6_K share: the 256-weight super-block, input checks, and ggml's float32 numerics.

The quantizers here must reproduce ggml's C reference bit for bit. Three facts make that possible
(see shared/reference/llamacpp.md §4.6):

- ggml-base is built without fast-math or FMA contraction, so every C float expression is a chain
  of correctly rounded float32 operations, which NumPy float32 arithmetic reproduces exactly as long
  as the operation order is the same;
- C sums are sequential loops, ``s = 0; s += t[0]; s += t[1]; ...``; ``np.sum`` sums pairwise and
  rounds differently, so sums are written as the same loop (over whole arrays of groups);
- ``nearest_int`` (the 1.5·2^23 trick) rounds half to even, like ``np.rint``.
"""

from __future__ import annotations

import numpy as np

from zincbench.errors import InputError

QK_K = 256  # weights per super-block, for every K-quant
GROUP_MAX_EPS = np.float32(1e-15)  # ggml-quants.c: a group with a smaller max |x| counts as all zero


def check_row_length(k: int) -> None:
    """A quantized row must hold whole super-blocks."""
    if k <= 0 or k % QK_K:
        raise InputError(f"K={k} is not a multiple of {QK_K}: Q4_K/Q6_K rows are made of {QK_K}-weight super-blocks")


def weight_blocks(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """Float weights ``(..., n*256)`` as float32 super-blocks ``(blocks, 256)`` plus the block grid
    shape ``(..., n)`` that ``rows_of`` turns back into rows."""
    x = np.asarray(x)
    if x.ndim == 0 or not np.issubdtype(x.dtype, np.floating):
        raise InputError(f"expected a float array of weights, got {x.dtype} with shape {x.shape}")
    check_row_length(x.shape[-1])
    if not np.isfinite(x).all():
        raise InputError("cannot quantize weights that contain NaN or infinity")
    return np.ascontiguousarray(x, dtype=np.float32).reshape(-1, QK_K), (*x.shape[:-1], x.shape[-1] // QK_K)


def byte_blocks(data: np.ndarray, block_bytes: int, type_name: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """Quantized bytes ``(..., nblk*block_bytes)`` as ``(blocks, block_bytes)`` plus the block grid
    shape ``(..., nblk)``."""
    data = np.asarray(data)
    if data.dtype != np.uint8 or data.ndim == 0:
        raise InputError(f"expected uint8 {type_name} blocks, got {data.dtype} with shape {data.shape}")
    if data.shape[-1] % block_bytes:
        raise InputError(
            f"a {type_name} row of {data.shape[-1]} bytes is not a whole number of {block_bytes}-byte blocks"
        )
    return np.ascontiguousarray(data).reshape(-1, block_bytes), (*data.shape[:-1], data.shape[-1] // block_bytes)


def nearest_int(f: np.ndarray) -> np.ndarray:
    """ggml's nearest_int: round half to even (exact for |f| <= 4194303, the range ggml asserts)."""
    return np.rint(f).astype(np.int32)


def sequential_sum(terms: np.ndarray) -> np.ndarray:
    """Sum over the first axis in loop order, as C's ``float s = 0; for (...) s += t[i];`` does.

    The quantizers keep the in-group element axis first so that each step adds whole contiguous
    arrays, which is also far faster than accumulating along the last axis.
    """
    total = np.zeros(terms.shape[1:], dtype=np.float32)
    for term in terms:
        total += term
    return total


def element_major(x_blocks: np.ndarray, group_size: int) -> np.ndarray:
    """Super-blocks ``(n, 256)`` as ``(group_size, n, 256/group_size)``: element i of every group
    in one contiguous array, the layout ``sequential_sum`` wants."""
    n = len(x_blocks)
    return np.ascontiguousarray(x_blocks.reshape(n, QK_K // group_size, group_size).transpose(2, 0, 1))


def block_major(levels: np.ndarray) -> np.ndarray:
    """The inverse of ``element_major``: ``(group_size, n, groups)`` -> ``(n, 256)`` in weight order."""
    return levels.transpose(1, 2, 0).reshape(levels.shape[1], QK_K)


def fp16_round(x: np.ndarray) -> np.ndarray:
    """GGML_FP32_TO_FP16: round to nearest even, overflow to inf, exactly as numpy's cast does."""
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float32).astype(np.float16)


def fp16_bytes(h: np.ndarray) -> np.ndarray:
    """float16 values ``(blocks,)`` as their little-endian bytes ``(blocks, 2)``."""
    return np.ascontiguousarray(h, dtype="<f2").view(np.uint8).reshape(-1, 2)


def fp16_at(blocks: np.ndarray, offset: int) -> np.ndarray:
    """The float16 stored at byte ``offset`` of each block, widened to float32."""
    return np.ascontiguousarray(blocks[:, offset : offset + 2]).view("<f2")[:, 0].astype(np.float32)


def log_uniform_fp16(rng: np.random.Generator, n: int, low: float, high: float) -> np.ndarray:
    """``n`` float16 magnitudes spread evenly in log scale over [low, high]."""
    return np.exp(rng.uniform(np.log(low), np.log(high), n)).astype(np.float16)


def random_block_bytes(rng: np.random.Generator, rows: int, k: int, block_bytes: int):
    """Uniform random bytes for ``rows`` rows of ``k`` weights: blocks ``(rows*k/256, block_bytes)``
    and their grid ``(rows, k/256)`` for ``rows_of``."""
    check_row_length(k)
    if rows < 0:
        raise InputError(f"rows must be >= 0, got {rows}")
    n_blocks = rows * (k // QK_K)
    # Drawn as uint64 words and viewed as bytes: several times faster than drawing bytes.
    words = rng.integers(0, 2**64, -(-n_blocks * block_bytes // 8), dtype=np.uint64)
    return words.view(np.uint8)[: n_blocks * block_bytes].reshape(n_blocks, block_bytes), (rows, k // QK_K)


def rows_of(blocks: np.ndarray, grid: tuple[int, ...]) -> np.ndarray:
    """Blocks ``(blocks, n)`` laid out on a block grid ``(..., blocks_per_row)`` as rows
    ``(..., blocks_per_row*n)``."""
    return blocks.reshape(*grid[:-1], grid[-1] * blocks.shape[1])


# Blocks per quantizer step: keeps each temporary (1 MB) cache-sized; measured fastest of 512..4096.
QUANTIZE_CHUNK_BLOCKS = 1024


def quantize_in_chunks(x_blocks: np.ndarray, quantize_blocks, block_bytes: int) -> np.ndarray:
    """Apply ``quantize_blocks`` ((n, 256) float32 -> (n, block_bytes) uint8) chunk by chunk."""
    out = np.empty((len(x_blocks), block_bytes), dtype=np.uint8)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for start in range(0, len(x_blocks), QUANTIZE_CHUNK_BLOCKS):
            stop = start + QUANTIZE_CHUNK_BLOCKS
            out[start:stop] = quantize_blocks(x_blocks[start:stop])
    return out
