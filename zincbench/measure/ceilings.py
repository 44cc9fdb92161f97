"""Measure the two ceilings a roofline needs, on this GPU, in this run.

- copy bandwidth: device-to-device copy of a buffer far larger than L2, counting bytes read plus
  bytes written (the convention of the team's anchors: 4.24 TB/s on an H200);
- fp16 Tensor-core peak: an 8192^3 cuBLAS fp16 GEMM on random data (never zeros: they run faster).
"""

from __future__ import annotations

from dataclasses import dataclass

from zincbench.judge import summarize
from zincbench.measure.stopping.count import FixedCountRule
from zincbench.measure.timer import GpuTimer, Measurement
from zincbench.measure.traffic import Ceilings

COPY_BYTES = 1 << 30
GEMM_N = 8192
SAMPLES = 15


@dataclass
class CeilingRecord:
    ceilings: Ceilings
    copy: Measurement
    gemm: Measurement


def measure_ceilings(timer: GpuTimer) -> CeilingRecord:
    cupy = timer.cupy
    rule = FixedCountRule(SAMPLES)
    with timer.stream:
        src = cupy.random.randint(0, 255, COPY_BYTES, dtype=cupy.uint8)
        dst = cupy.empty_like(src)
        a = cupy.random.standard_normal((GEMM_N, GEMM_N), dtype=cupy.float32).astype(cupy.float16)
        b = cupy.random.standard_normal((GEMM_N, GEMM_N), dtype=cupy.float32).astype(cupy.float16)
        c = cupy.empty((GEMM_N, GEMM_N), dtype=cupy.float16)
    copy = timer.measure(
        lambda: cupy.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, COPY_BYTES, 3, timer.stream.ptr),
        name="ceiling/copy",
        rule=rule,
    )
    gemm = timer.measure(lambda: cupy.matmul(a, b, out=c), name="ceiling/cublas_fp16", rule=rule)
    copy_us = summarize(copy.gpu_us).median
    gemm_us = summarize(gemm.gpu_us).median
    ceilings = Ceilings(copy_gbps=2 * COPY_BYTES / (copy_us * 1e3), fp16_tflops=2 * GEMM_N**3 / (gemm_us * 1e6))
    return CeilingRecord(ceilings, copy, gemm)
