// L2 prefetch of a global byte range: a hint to the memory system that nothing waits for, so a kernel can start
// DRAM reads it will need later (the fused GEMM a tile's weight rows; the routing launch the GEMM's first wave).
// Included as #include "zb_prefetch.cuh" (see zb_half.cuh for how NVRTC finds it).
#ifndef ZB_PREFETCH_CUH
#define ZB_PREFETCH_CUH

// The largest range one bulk prefetch is given (its size operand is 32-bit).
#define ZB_PREFETCH_BULK_MAX (1u << 30)

// Prefetch the 16-byte-aligned part of [p, p + n) into L2; called by threads tid = 0 .. n_threads - 1 alike.
// sm_90: thread 0 issues bulk prefetches (cp.async.bulk.prefetch, whole range per instruction); older GPUs: one
// prefetch per 128-byte line, the lines strided over the threads. The range's unaligned ends (under 16 bytes each)
// are left out, so no prefetch touches a byte outside it.
__device__ __forceinline__ void zb_prefetch_l2(const void* p, unsigned long long n, unsigned tid, unsigned n_threads) {
    const unsigned long long begin = ((unsigned long long)p + 15ull) & ~15ull;
    const unsigned long long end = ((unsigned long long)p + n) & ~15ull;
    if (end <= begin) return;
#if __CUDA_ARCH__ >= 900
    if (tid != 0) return;
    for (unsigned long long at = begin; at < end; at += ZB_PREFETCH_BULK_MAX) {
        const unsigned size = (unsigned)min(end - at, (unsigned long long)ZB_PREFETCH_BULK_MAX);
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(at), "r"(size) : "memory");
    }
#else
    for (unsigned long long at = begin + 128ull * tid; at < end; at += 128ull * n_threads)
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(at) : "memory");
#endif
}

#endif  // ZB_PREFETCH_CUH
