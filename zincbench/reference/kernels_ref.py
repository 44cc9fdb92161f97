"""Float64 NumPy references for the kernels in kernels/, computed from dequantized weights: the one
reference the microbench families check their variants against and the GPU tests check the kernels with.

Weights come in as floats (``zincbench.quant.get_format(fmt).dequantize(blocks)``), so the quantized
formats are checked once, by the quant module's tests, and every kernel here is checked against plain
linear algebra. ``fp16=True`` rounds weights and activations to fp16 first (round to nearest even),
which is what the Tensor-core and cuBLAS paths multiply; accumulation is float64 either way.
"""

from __future__ import annotations

import math

import numpy as np


def as_f64(a: np.ndarray, fp16: bool = False) -> np.ndarray:
    """``a`` in float64, rounded through fp16 first when ``fp16``."""
    a = np.asarray(a)
    if fp16:
        with np.errstate(over="ignore"):
            a = a.astype(np.float32).astype(np.float16)
    return a.astype(np.float64)


def experts_matvec(
    w: np.ndarray, x: np.ndarray, expert_ids: np.ndarray, top_k: int, *, fp16: bool = False
) -> np.ndarray:
    """y[t][slot] = w[ids[t][slot]] . x[t] (x [T][K]) or . x[t][slot] (x [T][top_k][K]), float64 [T][top_k][M].

    w: [E][M][K]; expert_ids: [T][>= top_k], only the first top_k columns are read. Experts are
    converted one at a time so the reference stays within memory at the gate's shapes.
    """
    ids = np.asarray(expert_ids)[:, :top_k]
    t = ids.shape[0]
    x_rows = x if x.ndim == 3 else np.broadcast_to(x[:, None, :], (t, top_k, x.shape[-1]))
    y = np.empty((t, top_k, w.shape[1]), dtype=np.float64)
    for e in np.unique(ids):
        tok, slot = np.nonzero(ids == e)
        y[tok, slot] = as_f64(x_rows[tok, slot], fp16) @ as_f64(w[e], fp16).T
    return y


def dense_gemm(w: np.ndarray, x: np.ndarray, *, fp16: bool = False) -> np.ndarray:
    """Y[T][M] = X[T][K] . W[M][K]^T in float64."""
    return as_f64(x, fp16) @ as_f64(w, fp16).T


def routing(expert_ids: np.ndarray, top_k: int, n_experts: int):
    """(counts[E], offsets[E+1], buckets): buckets[e] is the set of items p = t*top_k + slot routed to e."""
    ids = np.asarray(expert_ids)[:, :top_k].astype(np.int64).ravel()
    counts = np.bincount(ids, minlength=n_experts)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    buckets = [set(np.flatnonzero(ids == e).tolist()) for e in range(n_experts)]
    return counts, offsets, buckets


def work_tiles(counts: np.ndarray, tile_n: int, max_tiles: int) -> np.ndarray:
    """The grouped GEMM's tile list: e << 16 | j for each expert in order, then 0xFFFFFFFF."""
    entries = [(e << 16) | j for e, c in enumerate(np.asarray(counts).tolist()) for j in range(-(-c // tile_n))]
    tiles = np.full(max_tiles, 0xFFFFFFFF, dtype=np.uint32)
    tiles[: len(entries)] = entries
    return tiles


def fp16_input_error_bound(w: np.ndarray, x: np.ndarray, product, sum_error: float = 0.0) -> np.ndarray:
    """Per output of ``product`` (bilinear in w and x: experts_matvec, dense_gemm), how far rounding w and x to fp16
    can move it: every term's |w + dw| |x + dx| - |w| |x| added with one sign (dw, dx: the roundings' sizes), plus
    ``sum_error`` times the sum of the terms' sizes (what the path's own sums may add). What an fp16 path may differ
    from exact math by, however its outputs' norms compare with its terms'."""
    w64, x64 = as_f64(w), as_f64(x)
    dw, dx = np.abs(as_f64(w, True) - w64), np.abs(as_f64(x, True) - x64)
    sizes = product(np.abs(w64), np.abs(x64))
    return product(np.abs(w64) + dw, np.abs(x64) + dx) - (1.0 - sum_error) * sizes


def rel_frobenius(actual: np.ndarray, reference: np.ndarray) -> float:
    """||actual - reference||_F / ||reference||_F (float64); against a zero reference 0 when equal, else inf.
    A non-finite value anywhere gives inf, never NaN (max() over NaN would depend on argument order)."""
    reference = np.asarray(reference, dtype=np.float64)
    error, norm = np.linalg.norm(np.asarray(actual, dtype=np.float64) - reference), np.linalg.norm(reference)
    if not (math.isfinite(error) and math.isfinite(norm)):
        return math.inf
    if norm == 0:
        return 0.0 if error == 0 else math.inf
    return float(error / norm)
