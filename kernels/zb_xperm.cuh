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

// The orders (MmaTile.x_order): mma, wgmma, and wgmma with the sub-block sums that a `mins` tile's min wgmma reads.
#define ZB_X_MMA 0
#define ZB_X_WGMMA 1
#define ZB_X_WGMMA_SUMS 2

// 16-byte chunks per row of xp: K/8 of X, then (ZB_X_WGMMA_SUMS) two per superblock of sums.
__host__ __device__ __forceinline__ int zb_x_row_chunks(int K, bool sums) { return K / 8 + (sums ? K / 128 : 0); }

__device__ __forceinline__ float zb_half2_sum(unsigned v) {
    float lo, hi;
    asm("{.reg .f16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;}" : "=f"(lo), "=f"(hi) : "r"(v));
    return lo + hi;
}

// ZB_X_WGMMA_SUMS: one warp holds one superblock of one row (chunk q_in_row = 32 sb + lane: h = lane bit 4, i = bits
// 2-3, word w = bits 0-1), and words[cc] holds x[p], x[p + 2] (as fp16) at p = 64 (2h + (cc >> 1)) + 16 (cc & 1) + 4i
// + 32 (w >> 1) + (w & 1): sub-block 4h + 2 (cc >> 1) + (w >> 1), its first 16 values (cc & 1 = 0) or its last 16.
// The warp sums each (sub-block, 16-value half) of the fp16 values in f32 and writes them as two chunks after the
// row's X: chunk kc holds the halves kc of the sub-blocks in the min order, word c = sub-blocks 4 (c & 1) +
// 2 (c >> 1) + {0, 1}: lane c's pair of the `mins` A fragment (ZbNibbleFormat::Lane::ndm_pair, kept at half c & 1).
__device__ __forceinline__ void zb_write_sums(const unsigned (&words)[4], unsigned* sums) {
    const unsigned lane = threadIdx.x & 31u;
    float total[4];
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) {
        float v = zb_half2_sum(words[cc]);
        v += __shfl_xor_sync(0xffffffffu, v, 1);  // w & 1
        v += __shfl_xor_sync(0xffffffffu, v, 4);  // i
        v += __shfl_xor_sync(0xffffffffu, v, 8);
        total[cc] = v;  // every lane of group (h, w >> 1) holds it
    }
    // Lane L < 8 writes word c = L & 3 of chunk kc = L >> 2: from groups (h = c & 1, b = 0 and 1), total 2 (c >> 1) + kc
    const unsigned c = lane & 3u, kc = (lane >> 2) & 1u, src = (c & 1u) * 16u;
    const unsigned want = 2u * (c >> 1) + kc;
    float lo = 0.f, hi = 0.f;
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) {
        const float a = __shfl_sync(0xffffffffu, total[cc], src), b = __shfl_sync(0xffffffffu, total[cc], src + 2u);
        if (want == (unsigned)cc) lo = a, hi = b;
    }
    if (lane < 8u) sums[lane] = zb_half2_pack(lo, hi);
}

template <int ORDER>
__device__ __forceinline__ void zb_permute_x(const float* __restrict__ x, uint4* __restrict__ xp, int rows, int K,
                                             unsigned block, unsigned n_blocks) {
    constexpr bool SUMS = ORDER == ZB_X_WGMMA_SUMS;
    const int row_chunks = zb_x_row_chunks(K, SUMS);
    // SUMS: a warp's 32 chunks are one superblock of one row (blockDim and K / 8 are multiples of 32), and every lane
    // of a warp runs the same iterations (n_chunks too is a multiple of 32)
    const long long n_chunks = (long long)rows * (K / 8);
    for (long long idx = (long long)block * blockDim.x + threadIdx.x; idx < n_chunks;
         idx += (long long)n_blocks * blockDim.x) {
        const long long row = idx / (K / 8);
        const int q_in_row = (int)(idx % (K / 8));
        const int sb = q_in_row >> 5, h = (q_in_row >> 4) & 1, i = (q_in_row >> 2) & 3, c = q_in_row & 3;
        const float* base = x + row * K + sb * 256;
        uint4* const out_row = xp + row * row_chunks;
        uint4 out;
        if (ORDER != ZB_X_MMA) {  // c is the word w: word w of chunks (i, 0..3)
            unsigned words[4];
#pragma unroll
            for (int cc = 0; cc < 4; ++cc)
                words[cc] = zb_perm_word(base + 64 * (2 * h + (cc >> 1)) + 16 * (cc & 1) + 4 * i, c);
            out = make_uint4(words[0], words[1], words[2], words[3]);
            if (SUMS) zb_write_sums(words, reinterpret_cast<unsigned*>(out_row + K / 8 + 2 * sb));
        } else {
            const float* src = base + 64 * (2 * h + (c >> 1)) + 16 * (c & 1) + 4 * i;
            out = make_uint4(zb_perm_word(src, 0), zb_perm_word(src, 1), zb_perm_word(src, 2), zb_perm_word(src, 3));
        }
        out_row[q_in_row] = out;
    }
}

#endif  // ZB_XPERM_CUH
