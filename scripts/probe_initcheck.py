"""Does initcheck see every element cuBLAS writes? Run under compute-sanitizer --tool initcheck.

    compute-sanitizer --tool initcheck --print-limit 4 python scripts/probe_initcheck.py

With CuPy's pool off (every array its own cudaMalloc, as the sanitize driver), for the layer group's
shared-expert shapes (M = 256, K = 256, N = 1 and 23): a TF32 GEMM first, then fp16 GEMMs whose outputs
the `swiglu` kernel reads; then the same with CublasGemm.zero_output_first (the sanitizer driver's
setting: reports there would be ours). A line before each step: an initcheck report below a line is
that step's. On the H200 (2026-12-01) every read of a GEMM's output was reported without the setting.
"""

from __future__ import annotations

import numpy as np


def main() -> None:
    import cupy

    from zincbench.ops.moe_cublas import CublasGemm
    from zincbench.ops.moe_layer import swiglu

    cupy.cuda.set_allocator(None)
    rng = np.random.default_rng(0)

    def step(label, fn) -> None:
        print(f"probe_initcheck: {label}", flush=True)
        fn()
        cupy.cuda.Device().synchronize()

    router = cupy.asarray(rng.standard_normal((12, 256), dtype=np.float32))
    x = cupy.asarray(rng.standard_normal((1, 256), dtype=np.float32))
    logits = cupy.empty((1, 12), dtype=cupy.float32)
    step("tf32 gemm M=12 N=1 K=256", CublasGemm(router, x, logits))
    for zero_first in (False, True):
        CublasGemm.zero_output_first = zero_first
        for n in (1, 23):
            w16 = cupy.asarray(rng.standard_normal((256, 256)).astype(np.float16))
            x16 = cupy.asarray(rng.standard_normal((n, 256)).astype(np.float16))
            g, u = cupy.empty((n, 256), dtype=cupy.float32), cupy.empty((n, 256), dtype=cupy.float32)
            act = cupy.empty_like(g)
            label = f"M=256 N={n} K=256 zero_output_first={zero_first}"
            step(f"fp16 gemm {label} -> g", CublasGemm(w16, x16, g))
            step(f"fp16 gemm {label} -> u", CublasGemm(w16, x16, u))
            step(f"swiglu reads g, u ({label})", swiglu(g, u, act))
            step(f"sum reads g ({label})", g.sum)
    print("probe_initcheck: done", flush=True)


if __name__ == "__main__":
    main()
