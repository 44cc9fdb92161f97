// The Tensor Memory Accelerator (sm_90): bulk tensor copies from global to shared memory, described by tensor maps
// the host encodes (cuTensorMapEncodeTiled: zincbench/gpu/tma.py) and copies into global memory before the launch.
// One thread issues a whole box (up to 256 x 256 elements); the copy completes on an mbarrier by transaction bytes.
#pragma once

// A CUtensorMap: 128 opaque bytes, 64-byte aligned (the driver's layout; the kernel only passes its address).
struct alignas(64) ZbTensorMap {
    unsigned long long opaque[16];
};

// Expect `bytes` more transaction bytes in the barrier's current phase, without arriving: the phase completes once
// its arrivals are in and that many bytes have landed. Issued before the copies that complete them.
__device__ __forceinline__ void zb_mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// This thread's arrive, with `bytes` transaction bytes expected in the same phase.
__device__ __forceinline__ void zb_mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// The box of `map` at coordinates (c0, c1[, c2]) (c0 the innermost, in elements) into shared memory at dst
// (128-byte aligned; 1024 with the 128-byte swizzle), completing its bytes on barrier bar. Rows and columns past the
// tensor's extent are zero-filled and still counted.
__device__ __forceinline__ void zb_tma_load_2d(unsigned dst, const ZbTensorMap* map, int c0, int c1, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
            dst),
        "l"(map), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

__device__ __forceinline__ void zb_tma_load_3d(unsigned dst, const ZbTensorMap* map, int c0, int c1, int c2,
                                               unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::
            "r"(dst),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
        : "memory");
}

// Fetch a tensor map into the TMA unit's descriptor cache ahead of its first copy.
__device__ __forceinline__ void zb_tma_prefetch(const ZbTensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}
