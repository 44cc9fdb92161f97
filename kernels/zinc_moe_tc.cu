// The engine's grouped Tensor-core path for prefill MoE experts, re-implemented from the reference notes
// (zinc-kernels.md §1.3 "Expert-order builders" and §1.6) in the engine's launch ABI: buffers first, then
// ONE push struct passed by value. These are stand-ins that `experiments/engine_zinc.yaml` uses when no
// engine source tree is given (--engine-src / $ZINC_SRC); with one, the engine's own kernels replace them.
//
// build_expert_order_padded: grid 1, block 256. Counts the (token, slot) items routed to each expert,
//   pads each expert's run to a multiple of 64 positions, writes order[pos] = (t << 16) | slot (INV =
//   0xFFFFFFFF in padding) and tile_expert[tile] = the expert of each 64-position tile (INV when unused).
//   Item order inside one expert follows the atomic race, as in the engine.
// gemm_q4k_experts_grouped_tc: grid (ceil(M/64), max_pos/64), block 256, 24 KB static shared memory.
//   gemm_q5k_/gemm_q6k_experts_grouped_tc are its down form (§1.6: A row t*n_used + slot, weights at
//   a + expert*slice), the same tile code over the type's dequant.
//   Tile y computes 64 rows x 64 positions of its expert with wmma 16x16x16 (fp16 in, f32 accumulate),
//   BK = 32 (one Q4_K sub-block per step), per-thread dequant to fp16 (RNE), f32 activations of the
//   tokens in order staged to fp16, and scatters dst[t*dst_tok_stride + slot*M + row].
//   The tile loop restates gemm_q4k_tc.cu's per format (that file is a faithful copy of the engine's kernel,
//   kept verbatim, so the two do not share code); get_scale_min_k4 comes from zb_kquant.cuh.
#include <mma.h>

#include "zb_kquant.cuh"

using namespace nvcuda;

#define ZINC_INV 0xFFFFFFFFu
#define ZINC_POS_TILE 64u

struct BuildOrderPadPush {
    unsigned T, n_used, n_experts, routing_stride, max_pos;
};

struct GroupedTCPush {
    unsigned M, K, base, gu_full, dst_tok_stride;
};

extern "C" __global__ void build_expert_order_padded(const unsigned* routing, unsigned* order, unsigned* tile_expert,
                                                     BuildOrderPadPush p) {
    __shared__ unsigned counts[256];
    __shared__ unsigned cursor[256];
    const unsigned tid = threadIdx.x, items = p.T * p.n_used;
    for (unsigned e = tid; e < p.n_experts; e += blockDim.x) counts[e] = 0u;
    for (unsigned i = tid; i < p.max_pos; i += blockDim.x) order[i] = ZINC_INV;
    for (unsigned i = tid; i < p.max_pos / ZINC_POS_TILE; i += blockDim.x) tile_expert[i] = ZINC_INV;
    __syncthreads();
    for (unsigned i = tid; i < items; i += blockDim.x) {
        const unsigned t = i / p.n_used, slot = i - t * p.n_used;
        atomicAdd(&counts[routing[t * p.routing_stride + slot]], 1u);
    }
    __syncthreads();
    if (tid == 0) {  // exclusive scan of the padded run lengths
        unsigned run = 0u;
        for (unsigned e = 0; e < p.n_experts; e++) {
            cursor[e] = run;
            run += (counts[e] + ZINC_POS_TILE - 1u) / ZINC_POS_TILE * ZINC_POS_TILE;
        }
    }
    __syncthreads();
    for (unsigned e = tid; e < p.n_experts; e += blockDim.x) {
        const unsigned tiles = (counts[e] + ZINC_POS_TILE - 1u) / ZINC_POS_TILE;
        for (unsigned j = 0; j < tiles; j++) tile_expert[cursor[e] / ZINC_POS_TILE + j] = e;
    }
    __syncthreads();
    for (unsigned i = tid; i < items; i += blockDim.x) {
        const unsigned t = i / p.n_used, slot = i - t * p.n_used;
        const unsigned pos = atomicAdd(&cursor[routing[t * p.routing_stride + slot]], 1u);
        order[pos] = (t << 16) | slot;
    }
}

// Element (sub-block sub, position l) of one superblock, dequantized in f32 by the engine's formula.
// Q4_K / Q5_K: (d*sc)*q - dmin*mn (get_scale_min_k4); Q6_K: d*sc*(q - 32).
// d*sc and dmin*mn of sub-block sub from a Q4_K / Q5_K header (f16 d, f16 dmin, 12 scale bytes).
__device__ __forceinline__ float2 zinc_k4_scale_min(const unsigned char* blk, unsigned sub) {
    const unsigned d_dmin = *(const unsigned*)blk;
    const float d = __half2float(__ushort_as_half((unsigned short)(d_dmin & 0xFFFFu)));
    const float dmin = __half2float(__ushort_as_half((unsigned short)(d_dmin >> 16)));
    unsigned sc, mn;
    zb_scale_min_k4(blk + 4, sub, sc, mn);
    return make_float2(d * (float)sc, dmin * (float)mn);
}

struct ZincQ4K {
    static constexpr unsigned BLOCK_BYTES = 144u;
    __device__ static float at(const unsigned char* blk, unsigned sub, unsigned l) {
        const float2 scale_min = zinc_k4_scale_min(blk, sub);
        const unsigned q_byte = blk[16u + (sub >> 1) * 32u + l];
        const unsigned q = (sub & 1u) ? (q_byte >> 4) : (q_byte & 0xFu);
        return scale_min.x * (float)q - scale_min.y;
    }
};

struct ZincQ5K {  // d, dmin, scales[12], qh[32] @16, qs[128] @48; fifth bit of sub-block s is bit s of qh[l]
    static constexpr unsigned BLOCK_BYTES = 176u;
    __device__ static float at(const unsigned char* blk, unsigned sub, unsigned l) {
        const float2 scale_min = zinc_k4_scale_min(blk, sub);
        const unsigned q_byte = blk[48u + (sub >> 1) * 32u + l];
        const unsigned q = ((sub & 1u) ? (q_byte >> 4) : (q_byte & 0xFu)) | (((unsigned)blk[16u + l] >> sub & 1u) << 4);
        return scale_min.x * (float)q - scale_min.y;
    }
};

struct ZincQ6K {  // ql[128], qh[64] @128, int8 scales[16] @192, f16 d @208
    static constexpr unsigned BLOCK_BYTES = 210u;
    __device__ static float at(const unsigned char* blk, unsigned sub, unsigned l) {
        const unsigned half_id = sub >> 2, quarter = sub & 3u;
        const float d = __half2float(__ushort_as_half(*(const unsigned short*)(blk + 208)));
        const unsigned char ql = blk[half_id * 64u + (quarter & 1u) * 32u + l];
        const unsigned low4 = quarter < 2u ? (ql & 0xFu) : (unsigned)(ql >> 4);
        const unsigned q = low4 | (((unsigned)blk[128u + half_id * 32u + l] >> (2u * quarter) & 3u) << 4);
        const signed char sc = (signed char)blk[192u + half_id * 8u + (l >> 4) + 2u * quarter];
        return d * (float)sc * ((float)q - 32.0f);
    }
};

// One 64-row x 64-position tile of one expert (the body of every grouped TC kernel here). The activation
// row of item (t, slot) is t (gate/up form, a_slots == 0) or t*a_slots + slot (down form).
template <class Q>
__device__ __forceinline__ void zinc_grouped_tc_tile(const unsigned char* w_expert, const float* A, const unsigned* order,
                                                     float* dst, unsigned M, unsigned K, unsigned a_slots,
                                                     unsigned dst_tok_stride) {
    constexpr unsigned BM = 64u, BT = 64u, BK = 32u;
    __shared__ __half Ws[BM * BK];  // (r, k) at r*BK + k
    __shared__ __half As[BK * BT];  // (k, position) at k*BT + position
    __shared__ float Cs[BT * BM];   // (position, m) at position*BM + m
    const unsigned m0 = blockIdx.x * BM, pos0 = blockIdx.y * BT;
    const unsigned blocks_per_row = K >> 8, n_steps = K >> 5;
    const unsigned tid = threadIdx.x, warp = tid >> 5;
    const unsigned fm = warp >> 2, ft = warp & 3u;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc0, acc1;
    wmma::fill_fragment(acc0, 0.0f);
    wmma::fill_fragment(acc1, 0.0f);

    for (unsigned c = 0; c < n_steps; c++) {
        const unsigned superblock = c >> 3, sub = c & 7u;
#pragma unroll
        for (unsigned u = 0; u < 8u; u++) {  // per-thread dequant of the 64 x 32 weight tile
            const unsigned idx = tid + u * 256u, r = idx >> 5, l = idx & 31u, row = m0 + r;
            float w = 0.0f;
            if (row < M) w = Q::at(w_expert + ((size_t)row * blocks_per_row + superblock) * Q::BLOCK_BYTES, sub, l);
            Ws[r * BK + l] = __float2half_rn(w);
        }
#pragma unroll
        for (unsigned u = 0; u < 8u; u++) {  // activations of the tile's 64 positions, INV -> 0
            const unsigned idx = tid + u * 256u, pos = idx >> 5, l = idx & 31u;
            const unsigned item = order[pos0 + pos];
            const unsigned a_row = a_slots ? (item >> 16) * a_slots + (item & 0xFFFFu) : item >> 16;
            const float v = item == ZINC_INV ? 0.0f : A[(size_t)a_row * K + c * BK + l];
            As[l * BT + pos] = __float2half_rn(v);
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
    wmma::store_matrix_sync(&Cs[(ft * 16u) * BM + fm * 16u], acc0, BM, wmma::mem_col_major);
    wmma::store_matrix_sync(&Cs[(ft * 16u) * BM + (fm + 2u) * 16u], acc1, BM, wmma::mem_col_major);
    __syncthreads();
#pragma unroll
    for (unsigned u = 0; u < 16u; u++) {
        const unsigned idx = tid + u * 256u, pos = idx >> 6, m = idx & 63u, row = m0 + m;
        const unsigned item = order[pos0 + pos];
        if (item != ZINC_INV && row < M) {
            const unsigned t = item >> 16, slot = item & 0xFFFFu;
            dst[(size_t)t * dst_tok_stride + (size_t)slot * M + row] = Cs[pos * BM + m];
        }
    }
}

// Gate / up form (qwen gate and up, gemma's fused gate_up halves via base): A is f32 [T][K].
extern "C" __global__ void gemm_q4k_experts_grouped_tc(const unsigned char* a, const float* A, const unsigned* order,
                                                       const unsigned* tile_expert, float* dst, GroupedTCPush p) {
    const unsigned expert = tile_expert[blockIdx.y];
    if (expert == ZINC_INV) return;
    zinc_grouped_tc_tile<ZincQ4K>(a + (size_t)expert * p.gu_full + p.base, A, order, dst, p.M, p.K, 0u,
                                         p.dst_tok_stride);
}

// Down form (qwen36's Q5_K / Q6_K down): A is the [T][n_used][K] SwiGLU output, expert weights at a + e*slice.
struct GroupedTCDownPush {
    unsigned M, K, slice, n_used, dst_tok_stride;
};

template <class Q>
__device__ __forceinline__ void zinc_grouped_tc_down(const unsigned char* a, const float* A, const unsigned* order,
                                                     const unsigned* tile_expert, float* dst,
                                                     const GroupedTCDownPush& p) {
    const unsigned expert = tile_expert[blockIdx.y];
    if (expert == ZINC_INV) return;
    zinc_grouped_tc_tile<Q>(a + (size_t)expert * p.slice, A, order, dst, p.M, p.K, p.n_used, p.dst_tok_stride);
}

extern "C" __global__ void gemm_q5k_experts_grouped_tc(const unsigned char* a, const float* A, const unsigned* order,
                                                       const unsigned* tile_expert, float* dst, GroupedTCDownPush p) {
    zinc_grouped_tc_down<ZincQ5K>(a, A, order, tile_expert, dst, p);
}

extern "C" __global__ void gemm_q6k_experts_grouped_tc(const unsigned char* a, const float* A, const unsigned* order,
                                                       const unsigned* tile_expert, float* dst, GroupedTCDownPush p) {
    zinc_grouped_tc_down<ZincQ6K>(a, A, order, tile_expert, dst, p);
}
