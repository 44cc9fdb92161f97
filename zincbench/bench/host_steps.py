"""Host operations a declared variant can put between its kernel launches (``host: NAME`` steps).

Each entry takes the step's ``args`` (buffers by name, numbers by expression) and returns a callable
that only enqueues work on the current stream. New ones are one function here.
"""

from __future__ import annotations


def gemm_f16(w16, x16, y):
    """y[N][M] = x16[N][K] . w16[M][K]^T through cuBLAS: fp16 operands, fp32 accumulate and output
    (the engine's cublasGemmEx call on its prefill path)."""
    from zincbench.ops.moe_cublas import CublasGemm

    return CublasGemm(w16, x16, y)


def copy(src, dst):
    """dst = src (same shape and dtype), a device-to-device copy on the current stream: e.g. a block that
    adds into the residual stream starts each run from it."""
    import cupy

    if src.shape != dst.shape or src.dtype != dst.dtype:
        raise TypeError(f"copy: src {src.dtype}{list(src.shape)} and dst {dst.dtype}{list(dst.shape)} differ")
    return lambda: cupy.copyto(dst, src)


HOST_OPS = {"gemm_f16": gemm_f16, "copy": copy}
