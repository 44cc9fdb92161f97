// The fused K-quant GEMM's activation layout (kquant_fused_mma.cu reads it; x_f32_to_f16_kquant_perm* there and
// moe_route_permute in moe_routing.cu write it): one thread per 16-byte output chunk, blocks [block, block + n_blocks)
// of the launch striding over the chunks, so a kernel can give the permute part of its grid.
// Included as #include "zb_xperm.cuh" (see zb_half.cuh for how NVRTC finds it).
#ifndef ZB_XPERM_CUH
#define ZB_XPERM_CUH

#include "zb_half.cuh"

__device__ __forceinline__ unsigned zb_half2_pack(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// X f32 [rows][K] -> fp16 [rows][K] in the permuted order the fused kernel reads: per half superblock
// (128 weights, 256 bytes) 16 chunks of 16 bytes; chunk (i, c) holds, for e = 64*j + 16*(c&1) + 4*i
// with j = 2*h + (c>>1), the values x[e], x[e+2], x[e+1], x[e+3], x[e+32], x[e+34], x[e+33], x[e+35]:
// four fp16 pairs (words) w = 0..3 at offsets (0, 2), (1, 3), (32, 34), (33, 35) from e, the k pairs of lane c's
// A registers lo[0], lo[1], hi[0], hi[1] at step i.
// The wgmma order (_wgmma) transposes each group of four chunks (i, c = 0..3): its chunk (i, w) holds word w of
// chunks (i, 0), (i, 1), (i, 2), (i, 3). Then the 32 bytes of k16 step 2i (chunks (i, 0), (i, 1)) and of step
// 2i + 1 (chunks (i, 2), (i, 3)) are the k order of the A fragments of all four lanes: what a wgmma reads as B.
__device__ __forceinline__ unsigned zb_perm_word(const float* src, int w) {
    const int off = (w >> 1) * 32 + (w & 1);
    return zb_half2_pack(src[off], src[off + 2]);
}

template <bool WGMMA_ORDER>
__device__ __forceinline__ void zb_permute_x(const float* __restrict__ x, uint4* __restrict__ xp, int rows, int K,
                                             unsigned block, unsigned n_blocks) {
    const long long n_chunks = (long long)rows * (K / 8);
    for (long long idx = (long long)block * blockDim.x + threadIdx.x; idx < n_chunks;
         idx += (long long)n_blocks * blockDim.x) {
        const long long row = idx / (K / 8);
        const int q_in_row = (int)(idx % (K / 8));
        const int sb = q_in_row >> 5, h = (q_in_row >> 4) & 1, i = (q_in_row >> 2) & 3, c = q_in_row & 3;
        const float* base = x + row * K + sb * 256;
        uint4 out;
        if (WGMMA_ORDER) {  // c is the word w: word w of chunks (i, 0..3)
            unsigned words[4];
#pragma unroll
            for (int cc = 0; cc < 4; ++cc)
                words[cc] = zb_perm_word(base + 64 * (2 * h + (cc >> 1)) + 16 * (cc & 1) + 4 * i, c);
            out = make_uint4(words[0], words[1], words[2], words[3]);
        } else {
            const float* src = base + 64 * (2 * h + (c >> 1)) + 16 * (c & 1) + 4 * i;
            out = make_uint4(zb_perm_word(src, 0), zb_perm_word(src, 1), zb_perm_word(src, 2), zb_perm_word(src, 3));
        }
        xp[idx] = out;
    }
}

#endif  // ZB_XPERM_CUH
