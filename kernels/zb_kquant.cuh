// K-quant block decoding shared by zincbench's own kernels (dequant.cu, zinc_moe_tc.cu). The engine's faithful
// copies (q4k_matvec.cu, gemm_q4k_tc.cu) keep their own code verbatim.
// Included as #include "zb_kquant.cuh" (see zb_half.cuh for how nvcc and NVRTC find it).
#ifndef ZB_KQUANT_CUH
#define ZB_KQUANT_CUH

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block `sub` (0..7) from the 12 scale bytes of a
// Q4_K or Q5_K block header.
__device__ __forceinline__ void zb_scale_min_k4(const unsigned char* scales, unsigned sub, unsigned& sc, unsigned& mn) {
    if (sub < 4u) {
        sc = scales[sub] & 63u;
        mn = scales[sub + 4u] & 63u;
    } else {
        sc = (scales[sub + 4u] & 0xFu) | ((scales[sub - 4u] >> 6) << 4);
        mn = (scales[sub + 4u] >> 4) | ((scales[sub] >> 6) << 4);
    }
}

#endif  // ZB_KQUANT_CUH
