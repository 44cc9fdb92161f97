// Programmatic dependent launch (sm_90 and later): a kernel launched with the programmatic stream serialization
// attribute (zincbench.gpu.launch) may start while the previous kernel in its stream still runs, once every block of
// that kernel has called zb_pdl_launch_dependents or exited. It must call zb_pdl_wait before it reads what the previous
// kernel writes. Without the attribute, or compiled for an earlier GPU, both do nothing.
// Included as #include "zb_pdl.cuh" (see zb_half.cuh for how NVRTC finds it).
#ifndef ZB_PDL_CUH
#define ZB_PDL_CUH

// Waits until the previous kernel in the stream has completed and its writes are visible.
__device__ __forceinline__ void zb_pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// A word the previous kernel wrote, read after zb_pdl_wait: a strong load from L2. Through the read-only path (what a
// const __restrict__ pointer compiles to) it may be served from before the wait: that data changes during the
// dependent kernel's lifetime.
__device__ __forceinline__ unsigned zb_pdl_load(const unsigned* p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// This block lets the next kernel in the stream launch (what it reads is still ordered by its zb_pdl_wait).
__device__ __forceinline__ void zb_pdl_launch_dependents() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

#endif  // ZB_PDL_CUH
