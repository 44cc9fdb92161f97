"""Kernel-development probe: the sm_90a wgmma building blocks of kernels/zb_wgmma.cuh against NumPy.

    python scripts/probe_wgmma.py

One warpgroup multiplies a random 64 x K fp16 A (registers, m16n8k16 fragment layout per warp) by an
N x K fp16 B (shared memory, K-major, no swizzle) over K/16 chained wgmmas, for both readings of the
descriptor's two byte offsets (LBO along K / SBO along N, and swapped). Prints the error of each: the
reading that matches is the one the fused kernel's wgmma path uses. Exits 1 when neither matches.
"""

from __future__ import annotations

import sys

import numpy as np

SOURCE = r"""
#include "zb_wgmma.cuh"
template <int N>
__device__ void probe(const unsigned short* a, const unsigned short* b, float* d, int K, int swap) {
    __shared__ __align__(128) unsigned short bs[2 * N * 8];  // one k16 step: [k half][token][8 halves]
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
    float acc[N / 2];
    for (int i = 0; i < N / 2; ++i) acc[i] = 0.f;
    const unsigned base = (unsigned)__cvta_generic_to_shared(bs);
    const unsigned lbo = swap ? 128u : (unsigned)(N * 16), sbo = swap ? (unsigned)(N * 16) : 128u;
    const unsigned long long desc = zb_wgmma_desc(base, lbo, sbo);
    const int r0 = 16 * warp + g;
    for (int k0 = 0; k0 < K; k0 += 16) {
        __syncthreads();
        for (int i = tid; i < 2 * N * 8; i += 128) {
            const int kb = i / (N * 8), n = (i / 8) % N, kk = i % 8;
            bs[i] = b[n * K + k0 + 8 * kb + kk];
        }
        zb_fence_proxy_async();
        __syncthreads();
        const unsigned* ra = reinterpret_cast<const unsigned*>(a);
        unsigned frag[4];
        frag[0] = ra[(r0 * K + k0 + 2 * c) / 2];
        frag[1] = ra[((r0 + 8) * K + k0 + 2 * c) / 2];
        frag[2] = ra[(r0 * K + k0 + 2 * c + 8) / 2];
        frag[3] = ra[((r0 + 8) * K + k0 + 2 * c + 8) / 2];
        zb_wgmma_fence();
        ZbWgmma<N>::mma(acc, frag, desc);
        zb_wgmma_commit();
        zb_wgmma_wait<0>();
    }
    for (int j = 0; j < N / 8; ++j)
        for (int v = 0; v < 4; ++v) d[(r0 + 8 * (v >> 1)) * N + 8 * j + 2 * c + (v & 1)] = acc[4 * j + v];
}
extern "C" __global__ void probe_n16(const unsigned short* a, const unsigned short* b, float* d, int K, int s) {
    probe<16>(a, b, d, K, s);
}
extern "C" __global__ void probe_n64(const unsigned short* a, const unsigned short* b, float* d, int K, int s) {
    probe<64>(a, b, d, K, s);
}
extern "C" __global__ void probe_n128(const unsigned short* a, const unsigned short* b, float* d, int K, int s) {
    probe<128>(a, b, d, K, s);
}
"""


def main() -> int:
    import cupy

    from zincbench.gpu.nvrtc import LoadedModule, compile_cubin, source_headers
    from zincbench.resources import kernels_dir

    cc = cupy.cuda.Device().compute_capability
    if cc != "90":
        print(f"probe_wgmma: needs sm_90 (this GPU is sm_{cc})")
        return 2
    compiled = compile_cubin(
        SOURCE,
        filename="probe_wgmma.cu",
        options=("--gpu-architecture=sm_90a", "--std=c++17"),
        headers=source_headers(SOURCE, kernels_dir()),
    )
    module = LoadedModule(compiled)
    rng = np.random.default_rng(7)
    k = 64
    ok = False
    for n in (16, 64, 128):
        a = rng.standard_normal((64, k)).astype(np.float16)
        b = rng.standard_normal((n, k)).astype(np.float16)
        want = a.astype(np.float64) @ b.astype(np.float64).T
        for swap in (0, 1):
            d = cupy.full((64, n), np.nan, dtype=cupy.float32)
            fn = module.function(f"probe_n{n}")
            fn((1,), (128,), (cupy.asarray(a), cupy.asarray(b), d, np.int32(k), np.int32(swap)))
            got = cupy.asnumpy(d)
            err = float(np.nanmax(np.abs(got - want))) if np.isfinite(got).any() else float("inf")
            good = bool(np.isfinite(got).all() and err < 1e-2)
            ok |= good and n == 128
            label = "LBO=128 (N), SBO=N*16 (K)" if swap else "LBO=N*16 (K), SBO=128 (N)"
            print(f"wgmma m64n{n}k16 x{k // 16}: {label}: max |err| {err:.3g} {'MATCH' if good else 'no'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
