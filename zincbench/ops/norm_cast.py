"""Launchers of kernels/rms_norm_cast.cu, and the T4 paths of a GEMM group: one RMSNorm, then the GEMMs
that read its output (Q, K, V after the attention norm; gate and up after the FFN norm).

Every path is a list of named steps, each ONE host-issued launch (a kernel or a cuBLAS call), enqueued on
the current stream; the number of steps is the path's launch count.

- ``engine``: rms_norm (f32), then per GEMM dequant_*_to_f16 into the one fp16 weight scratch, f32_to_f16
  of the normed rows, cuBLAS fp16 GEMM (the engine's gemmDispatchPrefill at T >= cublas_min_t).
- ``norm_f16``: rms_norm_to_f16 writes the fp16 rows once; per GEMM dequant + cuBLAS.
- ``norm_f16_shared``: norm_f16, with the group's weights of one type dequantized by ONE launch into one
  scratch holding them all (the group's tensors of a type sit in one buffer, row after row); per GEMM cuBLAS
  on its rows of it, the same call as the engine's.
- ``t1_fused``: rms_norm (f32), ONE permute of the normed rows to T1's fp16 layout, the fused-dequant GEMM
  per GEMM (T1's kernel; its own accumulation order, so not bit-identical to cuBLAS).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zincbench.errors import InputError
from zincbench.gpu.runtime import get_kernel
from zincbench.measure.traffic import Traffic
from zincbench.ops.dequant import DequantToF16, F32ToF16, check_array, dequant_traffic, row_weights
from zincbench.ops.moe_cublas import CublasGemm
from zincbench.quant import get_format

SOURCE = "rms_norm_cast.cu"
NORM_BLOCK = 256  # the engine's rms_norm block: part of the summation order (reference/rms_norm_ref.py)
PATHS = ("engine", "norm_f16", "norm_f16_shared", "t1_fused")


class RmsNorm:
    """y = w * (x * rsqrt(mean(x^2) + eps)) per row of x f32 [T][N]; y f32 (``rms_norm``, the engine's) or
    fp16 (``rms_norm_to_f16``, ours: the same f32 values rounded to nearest even)."""

    def __init__(self, x, w, y, eps: float):
        check_array(x, np.float32, (None, None), "x")
        t, n = x.shape
        check_array(w, np.float32, (n,), "norm weight")
        if y.dtype not in (np.float32, np.float16):
            raise InputError(f"norm output must be float32 or float16, got {y.dtype}")
        check_array(y, y.dtype, (t, n), "norm output")
        self.t, self.n, self.half = t, n, y.dtype == np.float16
        self.kernel = get_kernel(SOURCE, "rms_norm_to_f16" if self.half else "rms_norm")
        self.args = (x, w, y, np.uint32(n), np.float32(eps))

    def __call__(self) -> None:
        self.kernel((self.t,), (NORM_BLOCK,), self.args)

    def traffic(self) -> Traffic:
        moved = 4 * self.t * self.n + 4 * self.n + (2 if self.half else 4) * self.t * self.n
        return Traffic(moved, moved)


@dataclass
class GroupBuffers:
    """One layer group on the device. ``runs``: (format, uint8 [rows][row bytes]) per run of consecutive
    GEMMs of one type, their weights row after row; ``gemms``: (name, format, rows) in launch order;
    ``y``: the checked output, f32, each GEMM's [T][M] one after the other (``outputs`` are those views)."""

    x: object  # f32 [T][K], the residual stream rows in front of the norm
    norm_w: object  # f32 [K]
    eps: float
    runs: list
    gemms: list
    y: object  # f32 flat [T * sum(M)]

    def __post_init__(self):
        check_array(self.x, np.float32, (None, None), "x")
        self.t, self.k = self.x.shape
        run_rows = [(fmt, w.shape[0]) for fmt, w in self.runs]
        gemm_rows = []
        for fmt, rows in run_rows:  # the GEMMs must walk the runs in order
            while rows > 0 and len(gemm_rows) < len(self.gemms):
                name, g_fmt, m = self.gemms[len(gemm_rows)]
                if g_fmt != fmt or m > rows:
                    raise InputError(f"gemm {name}: its {g_fmt} rows are not the next {m} rows of a {fmt} run")
                gemm_rows.append(m)
                rows -= m
            if rows:
                raise InputError(f"a {fmt} run has {rows} rows no GEMM reads")
        for fmt, w in self.runs:
            if row_weights(fmt, w.shape[1]) != self.k:
                raise InputError(f"a {fmt} run has rows of K = {row_weights(fmt, w.shape[1])}, x has K = {self.k}")
        total = sum(m for _, _, m in self.gemms)
        check_array(self.y, np.float32, (self.t * total,), "y")
        self.rows = [m for _, _, m in self.gemms]

    def weights(self) -> list:
        """Each GEMM's uint8 [M][row bytes] view into its run."""
        out = []
        for fmt, w in self.runs:
            start = 0
            while start < w.shape[0]:
                m = self.rows[len(out)]
                out.append(w[start : start + m])
                start += m
        return out

    def outputs(self) -> list:
        out, start = [], 0
        for m in self.rows:
            out.append(self.y[start : start + self.t * m].reshape(self.t, m))
            start += self.t * m
        return out


def group_steps(path: str, b: GroupBuffers, tile=None) -> list[tuple[str, object]]:
    """The path's launches on group ``b`` as (name, callable); ``tile`` (ops.fused.MmaTile) for t1_fused."""
    import cupy

    t, k = b.t, b.k
    names = [name for name, _, _ in b.gemms]
    formats = [fmt for _, fmt, _ in b.gemms]
    weights, outputs = b.weights(), b.outputs()
    if path in ("engine", "t1_fused"):
        norm = cupy.empty((t, k), dtype=cupy.float32)
        steps = [("rms_norm", RmsNorm(b.x, b.norm_w, norm, b.eps))]
    elif path in ("norm_f16", "norm_f16_shared"):
        norm = cupy.empty((t, k), dtype=cupy.float16)
        steps = [("rms_norm_to_f16", RmsNorm(b.x, b.norm_w, norm, b.eps))]
    else:
        raise ValueError(f"unknown path {path!r} (known: {', '.join(PATHS)})")
    if path == "t1_fused":
        from zincbench.ops.fused import FusedKQuantGemm, permute_activations, permuted_activations

        xp = permuted_activations(cupy, t, k)
        steps.append(("permute", lambda: permute_activations(norm, xp)))
        for name, fmt, w, y in zip(names, formats, weights, outputs):
            gemm = FusedKQuantGemm(tile, grouped=False, weights=fmt)
            steps.append((f"{name} fused", lambda g=gemm, w=w, y=y: g.dense(w, xp, y, y.shape[1], k, t)))
        return steps
    if path == "norm_f16_shared":
        scratch = cupy.empty((sum(b.rows), k), dtype=cupy.float16)
        start = 0
        for fmt, w in b.runs:
            steps.append((f"dequant {fmt}", DequantToF16(fmt, w, scratch[start : start + w.shape[0]])))
            start += w.shape[0]
        start = 0
        for name, y in zip(names, outputs):
            m = y.shape[1]
            steps.append((f"{name} cuBLAS", CublasGemm(scratch[start : start + m], norm, y)))
            start += m
        return steps
    scratch = cupy.empty((max(b.rows), k), dtype=cupy.float16)  # the engine's one w_f16 scratch
    x16 = cupy.empty((t, k), dtype=cupy.float16) if path == "engine" else norm
    for name, fmt, w, y in zip(names, formats, weights, outputs):
        w16 = scratch[: y.shape[1]]
        steps.append((f"{name} dequant", DequantToF16(fmt, w, w16)))
        if path == "engine":
            steps.append((f"{name} f32_to_f16", F32ToF16(norm, x16)))
        steps.append((f"{name} cuBLAS", CublasGemm(w16, x16, y)))
    return steps


def launch_count(path: str, formats: list[str]) -> int:
    """Host-issued launches of ``path`` on a group whose GEMMs have these weight types, in order (cuBLAS
    counts one per call, whatever it runs inside)."""
    n = len(formats)
    runs = sum(1 for i, fmt in enumerate(formats) if i == 0 or formats[i - 1] != fmt)
    return {"engine": 1 + 3 * n, "norm_f16": 1 + 2 * n, "norm_f16_shared": 1 + runs + n, "t1_fused": 2 + n}[path]


def group_traffic(path: str, b: GroupBuffers) -> Traffic:
    """minimum: x, the norm weight, the quantized weights and y once; model: what the path's launches move
    (fp16 scratch written and read, the activation written and re-read per GEMM)."""
    t, k = b.t, b.k
    quantized = sum(m * get_format(fmt).row_bytes(k) for _, fmt, m in b.gemms)
    total_m = sum(b.rows)
    minimum = 4 * t * k + 4 * k + quantized + 4 * t * total_m
    flops = 2 * t * k * total_m
    n = len(b.gemms)
    half_norm = path in ("norm_f16", "norm_f16_shared")
    model = 4 * t * k + 4 * k + (2 if half_norm else 4) * t * k  # the norm
    if path == "engine":
        model += n * 6 * t * k  # f32_to_f16 per GEMM: read f32, write fp16
    if path == "t1_fused":
        model += 6 * t * k + quantized + n * 2 * t * k + 4 * t * total_m
        return Traffic(minimum, model, flops)
    model += sum(dequant_traffic(fmt, m, k).bytes_model for _, fmt, m in b.gemms)
    model += sum(2 * m * k + 2 * t * k + 4 * t * m for m in b.rows)  # cuBLAS reads W16 and X16, writes Y
    return Traffic(minimum, model, flops)
