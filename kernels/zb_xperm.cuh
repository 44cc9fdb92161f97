// The fused K-quant GEMM's activation layout (kquant_fused_mma.cu reads it; x_f32_to_f16_kquant_perm* there and
// moe_route_permute in moe_routing.cu write it): one thread per 64 bytes of output (four 16-byte chunks:
// zincbench.ops.fused.PERMUTE_CHUNKS_PER_THREAD),
// blocks [block, block + n_blocks) of the launch striding over them, so a kernel can give the permute part of its grid.
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
// One thread per group of four chunks (i, c = 0..3) of a half superblock: the 32 values those chunks hold are the
// eight float4 at e0 + 16 m (m = 0..7, e0 = 128 h + 4 i), so the thread loads each value once, as 16-byte loads, and
// stores its 64 bytes of output as four 16-byte stores. Chunk c takes its lo words from float4 m = (c & 1) + 4 (c >> 1)
// and its hi words from m + 2. Needs x 16-byte aligned (K is a multiple of 256).
template <bool WGMMA_ORDER>
__device__ __forceinline__ void zb_permute_x(const float* __restrict__ x, uint4* __restrict__ xp, int rows, int K,
                                             unsigned block, unsigned n_blocks) {
    const int groups_per_row = K / 32;
    const long long n_groups = (long long)rows * groups_per_row;
    for (long long idx = (long long)block * blockDim.x + threadIdx.x; idx < n_groups;
         idx += (long long)n_blocks * blockDim.x) {
        const long long row = idx / groups_per_row;
        const int g = (int)(idx % groups_per_row);  // sb = g >> 3, h = (g >> 2) & 1, i = g & 3
        const float4* src = reinterpret_cast<const float4*>(x + row * K + (g >> 3) * 256 + ((g >> 2) & 1) * 128 +
                                                            (g & 3) * 4);
        float4 v[8];
#pragma unroll
        for (int m = 0; m < 8; ++m) v[m] = src[4 * m];
        unsigned words[4][4];  // [chunk c][word w]: w = 0, 1 from lo = x[e..e+3], w = 2, 3 from hi = x[e+32..e+35]
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const float4 lo = v[(c & 1) + 4 * (c >> 1)], hi = v[(c & 1) + 4 * (c >> 1) + 2];
            words[c][0] = zb_half2_pack(lo.x, lo.z);
            words[c][1] = zb_half2_pack(lo.y, lo.w);
            words[c][2] = zb_half2_pack(hi.x, hi.z);
            words[c][3] = zb_half2_pack(hi.y, hi.w);
        }
        uint4* dst = xp + idx * 4;
#pragma unroll
        for (int j = 0; j < 4; ++j)  // the wgmma order's chunk w = j holds word j of chunks c = 0..3
            dst[j] = WGMMA_ORDER ? make_uint4(words[0][j], words[1][j], words[2][j], words[3][j])
                                 : make_uint4(words[j][0], words[j][1], words[j][2], words[j][3]);
    }
}

#endif  // ZB_XPERM_CUH
