// fp16 <-> f32 by bit pattern, for zincbench's own kernels (dequant.cu, rms_norm_cast.cu, ssm_scan.cu,
// moe_routing.cu, kquant_fused_mma.cu): plain PTX cvt, no cuda_fp16.h. The engine's faithful copies
// (q4k_matvec.cu, gemm_q4k_tc.cu) keep their own helpers verbatim.
// Included as #include "zb_half.cuh": nvcc finds it beside the including file, NVRTC gets it by name and
// content from zincbench.gpu.nvrtc.source_headers (also part of the CUBIN cache key).
#ifndef ZB_HALF_CUH
#define ZB_HALF_CUH

// The f32 value of the fp16 with bits h (exact).
__device__ __forceinline__ float zb_half_bits_to_float(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// The fp16 bits of f rounded to nearest even (what the engine's __float2half gives).
__device__ __forceinline__ unsigned short zb_float_to_half_rne(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

#endif  // ZB_HALF_CUH
