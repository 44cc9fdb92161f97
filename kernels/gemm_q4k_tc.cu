// FAITHFUL COPY of the engine's kernel: keep it verbatim. It includes none of zincbench's kernels/zb_*.cuh
// and keeps its own copy of the Q4_K tile loop (zinc_moe_tc.cu's grouped tile, ours, restates it per format),
// so that it stays comparable line by line with the engine's source.
//
// Engine-style Tensor-core Q4_K GEMM, faithful to ZINC's gemm_q4k_tc (zinc-kernels.md §1.5): the
// reference point the fused candidates of the T1 gate are compared with (it reaches ~22% of cuBLAS).
// Y[T][M] = A[T][K] . W[M][K]^T with W in Q4_K (36 u32 words per 256 weights), A f32 token-major.
//   64 (rows) x 64 (tokens) output tile, BK = 32 (one Q4_K sub-block per K step), 256 threads = 8 warps;
//   warp w owns the 16x16 f32 accumulators at M-blocks w/4 and w/4+2, T-block w%4.
//   Per K step: warp-broadcast dequant of the 64x32 weight tile to fp16 (RNE), f32 A staged to fp16
//   (RNE) k-major, two wmma 16x16x16 steps; no cp.async, no double buffering (the engine has none).
//   Static shared memory: Ws 4 KB + As 4 KB + Cs 16 KB = 24 KB.
// Grid (ceil(M/64), ceil(T/64)), block 256. Parameters after the buffers are the engine's GemmPush
// fields M, K, T, a_offset, x_offset, y_offset (bytes), acc_mode (0: y = result, else y += result),
// q8_stride (unused here), so the engine pack can launch it as a stand-in for the engine's own.
// K must be a multiple of 256.
#include <mma.h>

using namespace nvcuda;

extern "C" __global__ void gemm_q4k_tc(const unsigned* a_u32, const float* A, float* Y, unsigned M, unsigned K,
                                       unsigned T, unsigned a_offset, unsigned x_offset, unsigned y_offset,
                                       unsigned acc_mode, unsigned q8_stride) {
    constexpr unsigned BM = 64u, BT = 64u, BK = 32u;
    __shared__ __half Ws[BM * BK];   // weight tile, row-major: (r, k) at r*BK + k
    __shared__ __half As[BK * BT];   // activation tile, k-major: (k, t) at k*BT + t
    __shared__ float Cs[BT * BM];    // output tile, token-major: (t, m) at t*BM + m
    const unsigned m0 = blockIdx.x * BM, t0 = blockIdx.y * BT;
    const unsigned blocks_per_row = K >> 8, n_steps = K >> 5;
    const unsigned tid = threadIdx.x, warp = tid >> 5, lane = tid & 31u;
    const unsigned fm = warp >> 2, ft = warp & 3u;
    const unsigned a_word = a_offset >> 2;
    const float* A_base = A + (x_offset >> 2);

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc0, acc1;
    wmma::fill_fragment(acc0, 0.0f);
    wmma::fill_fragment(acc1, 0.0f);

    for (unsigned c = 0; c < n_steps; c++) {
        const unsigned superblock = c >> 3, sub = c & 7u;
        // Weights: warp w dequantizes rows w, w+8, ...; lane 0 decodes d*sc and dmin*mn for the row and
        // broadcasts them, lane l then takes element l of the 32-weight sub-block.
#pragma unroll
        for (unsigned u = 0; u < 8u; u++) {
            const unsigned r = warp + u * 8u, row = m0 + r;
            float w = 0.0f;
            if (row < M) {
                const unsigned blk = a_word + row * blocks_per_row * 36u + superblock * 36u;
                float d_sc, dmin_mn;
                if (lane == 0) {
                    const unsigned d_dmin = a_u32[blk];
                    const float d = __half2float(__ushort_as_half((unsigned short)(d_dmin & 0xFFFFu)));
                    const float dmin = __half2float(__ushort_as_half((unsigned short)(d_dmin >> 16)));
                    const unsigned char* scales = (const unsigned char*)(a_u32 + blk + 1u);
                    unsigned sc, mn;
                    if (sub < 4u) {
                        sc = scales[sub] & 63u;
                        mn = scales[sub + 4u] & 63u;
                    } else {
                        sc = (scales[sub + 4u] & 0xFu) | ((scales[sub - 4u] >> 6) << 4);
                        mn = (scales[sub + 4u] >> 4) | ((scales[sub] >> 6) << 4);
                    }
                    d_sc = d * (float)sc;
                    dmin_mn = dmin * (float)mn;
                }
                d_sc = __shfl_sync(0xffffffffu, d_sc, 0);
                dmin_mn = __shfl_sync(0xffffffffu, dmin_mn, 0);
                const unsigned char* qs = (const unsigned char*)(a_u32 + blk + 4u);
                const unsigned q_byte = qs[(sub >> 1) * 32u + lane];
                const unsigned q = (sub & 1u) ? (q_byte >> 4) : (q_byte & 0xFu);
                w = d_sc * (float)q - dmin_mn;
            }
            Ws[r * BK + lane] = __float2half_rn(w);
        }
        // Activations: 64 tokens x 32 k, f32 -> fp16 RNE, tokens >= T are zero.
#pragma unroll
        for (unsigned u = 0; u < 8u; u++) {
            const unsigned idx = tid + u * 256u, t = idx >> 5, l = idx & 31u, tok = t0 + t;
            As[l * BT + t] = __float2half_rn(tok < T ? A_base[(size_t)tok * K + c * 32u + l] : 0.0f);
        }
        __syncthreads();
#pragma unroll
        for (unsigned ks = 0; ks < 2u; ks++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> w_frag0, w_frag1;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> a_frag;
            wmma::load_matrix_sync(w_frag0, &Ws[(fm * 16u) * BK + ks * 16u], BK);
            wmma::load_matrix_sync(w_frag1, &Ws[((fm + 2u) * 16u) * BK + ks * 16u], BK);
            wmma::load_matrix_sync(a_frag, &As[(ks * 16u) * BT + ft * 16u], BT);
            wmma::mma_sync(acc0, w_frag0, a_frag, acc0);
            wmma::mma_sync(acc1, w_frag1, a_frag, acc1);
        }
        __syncthreads();
    }
    // Accumulators hold out[m][t]; stored column-major they land token-major in Cs.
    wmma::store_matrix_sync(&Cs[(ft * 16u) * BM + fm * 16u], acc0, BM, wmma::mem_col_major);
    wmma::store_matrix_sync(&Cs[(ft * 16u) * BM + (fm + 2u) * 16u], acc1, BM, wmma::mem_col_major);
    __syncthreads();
#pragma unroll
    for (unsigned u = 0; u < 16u; u++) {
        const unsigned idx = tid + u * 256u, t = idx >> 6, m = idx & 63u, tok = t0 + t, row = m0 + m;
        if (row < M && tok < T) {
            const size_t yi = (y_offset >> 2) + (size_t)tok * M + row;
            if (acc_mode != 0u) Y[yi] += Cs[t * BM + m];
            else Y[yi] = Cs[t * BM + m];
        }
    }
}
