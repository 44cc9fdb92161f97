// FAITHFUL COPY of the engine's kernel: keep it verbatim. It includes none of zincbench's kernels/zb_*.cuh
// and keeps its own copies of ideas our kernels share (half_bits_to_float; the routing prologue repeated in
// each dmmv_q*k kernel, as in the engine), so that it stays comparable line by line with the engine's source.
//
// Routed-expert matvecs, faithful to ZINC's dmmv_q{4,5,6}k_experts_batched
// (see the reference notes, zinc-kernels.md §1.2-1.3). These are the BASELINES of the T2 gate: the
// engine's algorithm, not a better one. One block per (token, expert slot, output row):
//   grid (n_used*M, T), block 64 (any multiple of 32 works), 16 threads per 256-weight superblock,
//   f32 accumulation, warp shfl-down + shared[32] block reduction, thread 0 overwrites y.
// Every block streams its expert's weight row on its own, so an expert hit by N tokens is read N times.
//
// Parameters after the buffers are the engine's ExpertsBatchPush fields, in order, passed as scalars:
//   M, K, slice (bytes per expert), x_stride (floats per slot), n_used, base (byte offset inside an
//   expert), routing_stride (u32 per token in expert_ids), x_tok_stride, y_tok_stride (floats).
// Output element (t, e, row) is y[t*y_tok_stride + e*M + row]; expert id = expert_ids[t*routing_stride + e].
// x rows are read as float4 and must be 16-byte aligned.

__device__ __forceinline__ float half_bits_to_float(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// The engine's zinc_block_reduce_sum: the result is valid in thread 0 only.
__device__ __forceinline__ float block_reduce_sum(float v) {
    __shared__ float warp_sums[32];
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    const unsigned n_warps = (blockDim.x + 31u) >> 5;
    v = (threadIdx.x < n_warps) ? warp_sums[lane] : 0.0f;
    if (warp == 0) {
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    return v;
}

// Four weights of one Q4_K sub-block times four activations: the nibbles sit at bits 0, 8, 16, 24 of
// `nibbles`. The products are summed left to right and then added to acc, the engine's order.
__device__ __forceinline__ float q4k_four_products(float acc, float scale, float min, unsigned nibbles, float4 x) {
    const float p0 = (scale * (float)(nibbles & 0xFu) - min) * x.x;
    const float p1 = (scale * (float)((nibbles >> 8) & 0xFu) - min) * x.y;
    const float p2 = (scale * (float)((nibbles >> 16) & 0xFu) - min) * x.z;
    const float p3 = (scale * (float)((nibbles >> 24) & 0xFu) - min) * x.w;
    return acc + (((p0 + p1) + p2) + p3);
}

// Scale and min of the thread's four sub-blocks (2v_im, 2v_im+1, 2v_im+4, 2v_im+5) from the packed
// 6-bit fields (Q4_K and Q5_K share them): s0, s1, s2 are header words 1..3 shifted by 16*v_im.
struct SubScales {
    float scale[4], min[4];
};

__device__ __forceinline__ SubScales sub_scales(float d, float dmin, unsigned s0, unsigned s1, unsigned s2) {
    SubScales r;
    r.scale[0] = d * (float)(s0 & 0x3Fu);
    r.min[0] = dmin * (float)(s1 & 0x3Fu);
    r.scale[1] = d * (float)((s0 >> 8) & 0x3Fu);
    r.min[1] = dmin * (float)((s1 >> 8) & 0x3Fu);
    r.scale[2] = d * (float)((s2 & 0xFu) | ((s0 & 0xC0u) >> 2));
    r.min[2] = dmin * (float)(((s2 & 0xF0u) >> 4) | ((s1 & 0xC0u) >> 2));
    r.scale[3] = d * (float)(((s2 >> 8) & 0xFu) | (((s0 >> 8) & 0xC0u) >> 2));
    r.min[3] = dmin * (float)((((s2 >> 8) & 0xF0u) >> 4) | (((s1 >> 8) & 0xC0u) >> 2));
    return r;
}

// Q4_K superblock = 36 u32 words: [0] d | dmin << 16, [1..3] packed 6-bit scales/mins, [4..35] quants.
extern "C" __global__ void dmmv_q4k_experts_batched(
    const unsigned* a_u32, const float* x, float* y, const unsigned* expert_ids,
    unsigned M, unsigned K, unsigned slice, unsigned x_stride, unsigned n_used, unsigned base,
    unsigned routing_stride, unsigned x_tok_stride, unsigned y_tok_stride) {
    const unsigned t = blockIdx.y;
    const unsigned e = blockIdx.x / M;
    if (e >= n_used) return;
    const unsigned row = blockIdx.x - e * M;
    const unsigned blocks_per_row = K >> 8;
    // 32-bit word arithmetic as in the engine: id*slice + base must stay below 4 GiB.
    const unsigned expert = expert_ids[(size_t)t * routing_stride + e];
    const unsigned row_word = ((expert * slice + base) >> 2) + row * blocks_per_row * 36u;
    const float4* xv = (const float4*)(x + (size_t)t * x_tok_stride + (size_t)e * x_stride);

    // Thread mapping: 16 threads per superblock; each covers 4 consecutive weights (offset l0) in
    // sub-blocks 2*v_im, 2*v_im+1, 2*v_im+4, 2*v_im+5.
    const unsigned itid = threadIdx.x & 15u, group = threadIdx.x >> 4, n_groups = blockDim.x >> 4;
    const unsigned il = itid >> 2, ir = itid & 3u, v_im = il >> 1, v_in = il & 1u;
    const unsigned l0 = 4u * (2u * ir + v_in);
    const unsigned quant_byte = 32u * v_im + l0, x_first = 64u * v_im + l0, scale_shift = 16u * v_im;

    float sum = 0.0f;
    for (unsigned i = group; i < blocks_per_row; i += n_groups) {
        const unsigned blk = row_word + i * 36u;
        const unsigned d_dmin = a_u32[blk];
        const float d = half_bits_to_float((unsigned short)(d_dmin & 0xFFFFu));
        const float dmin = half_bits_to_float((unsigned short)(d_dmin >> 16));
        const unsigned s0 = a_u32[blk + 1u] >> scale_shift;  // scales of sub-blocks 0..3 (low 6 bits)
        const unsigned s1 = a_u32[blk + 2u] >> scale_shift;  // mins of sub-blocks 0..3
        const unsigned s2 = a_u32[blk + 3u] >> scale_shift;  // low nibbles of scales/mins 4..7
        const unsigned q_lo = a_u32[blk + 4u + (quant_byte >> 2)];        // sub-blocks 2v_im, 2v_im+1
        const unsigned q_hi = a_u32[blk + 4u + (quant_byte >> 2) + 16u];  // sub-blocks 2v_im+4, 2v_im+5
        const unsigned xi = (i * 256u + x_first) >> 2, xi_hi = (i * 256u + x_first + 128u) >> 2;
        const float4 x0 = xv[xi], x1 = xv[xi + 8u], x2 = xv[xi_hi], x3 = xv[xi_hi + 8u];
        const SubScales sm = sub_scales(d, dmin, s0, s1, s2);
        sum = q4k_four_products(sum, sm.scale[0], sm.min[0], q_lo, x0);
        sum = q4k_four_products(sum, sm.scale[1], sm.min[1], q_lo >> 4, x1);
        sum = q4k_four_products(sum, sm.scale[2], sm.min[2], q_hi, x2);
        sum = q4k_four_products(sum, sm.scale[3], sm.min[3], q_hi >> 4, x3);
    }
    sum = block_reduce_sum(sum);
    if (threadIdx.x == 0) y[(size_t)t * y_tok_stride + (size_t)e * M + row] = sum;
}

// Q5_K superblock = 44 u32 words: [0] d | dmin << 16, [1..3] scales/mins as Q4_K, [4..11] qh, [12..43] qs.
// The same 16-thread mapping as Q4_K: the thread's four l values l0..l0+3 are the same in its four
// sub-blocks, so one qh word (bytes l0..l0+3) holds all its fifth bits: bit s of byte i for sub-block s.
__device__ __forceinline__ float q5k_four_products(float acc, float scale, float min, unsigned nibbles,
                                                   unsigned qh, unsigned sub, float4 x) {
    const unsigned q = (nibbles & 0x0F0F0F0Fu) | (((qh >> sub) & 0x01010101u) << 4);
    const float p0 = (scale * (float)(q & 0xFFu) - min) * x.x;
    const float p1 = (scale * (float)((q >> 8) & 0xFFu) - min) * x.y;
    const float p2 = (scale * (float)((q >> 16) & 0xFFu) - min) * x.z;
    const float p3 = (scale * (float)(q >> 24) - min) * x.w;
    return acc + (((p0 + p1) + p2) + p3);
}

extern "C" __global__ void dmmv_q5k_experts_batched(
    const unsigned* a_u32, const float* x, float* y, const unsigned* expert_ids,
    unsigned M, unsigned K, unsigned slice, unsigned x_stride, unsigned n_used, unsigned base,
    unsigned routing_stride, unsigned x_tok_stride, unsigned y_tok_stride) {
    const unsigned t = blockIdx.y;
    const unsigned e = blockIdx.x / M;
    if (e >= n_used) return;
    const unsigned row = blockIdx.x - e * M;
    const unsigned blocks_per_row = K >> 8;
    const unsigned expert = expert_ids[(size_t)t * routing_stride + e];
    const unsigned row_word = ((expert * slice + base) >> 2) + row * blocks_per_row * 44u;
    const float4* xv = (const float4*)(x + (size_t)t * x_tok_stride + (size_t)e * x_stride);

    const unsigned itid = threadIdx.x & 15u, group = threadIdx.x >> 4, n_groups = blockDim.x >> 4;
    const unsigned il = itid >> 2, ir = itid & 3u, v_im = il >> 1, v_in = il & 1u;
    const unsigned l0 = 4u * (2u * ir + v_in);
    const unsigned quant_byte = 32u * v_im + l0, x_first = 64u * v_im + l0, scale_shift = 16u * v_im;
    const unsigned sub0 = 2u * v_im;  // the thread's sub-blocks: sub0, sub0 + 1, sub0 + 4, sub0 + 5

    float sum = 0.0f;
    for (unsigned i = group; i < blocks_per_row; i += n_groups) {
        const unsigned blk = row_word + i * 44u;
        const unsigned d_dmin = a_u32[blk];
        const float d = half_bits_to_float((unsigned short)(d_dmin & 0xFFFFu));
        const float dmin = half_bits_to_float((unsigned short)(d_dmin >> 16));
        const unsigned s0 = a_u32[blk + 1u] >> scale_shift;
        const unsigned s1 = a_u32[blk + 2u] >> scale_shift;
        const unsigned s2 = a_u32[blk + 3u] >> scale_shift;
        const unsigned qh = a_u32[blk + 4u + (l0 >> 2)];
        const unsigned q_lo = a_u32[blk + 12u + (quant_byte >> 2)];
        const unsigned q_hi = a_u32[blk + 12u + (quant_byte >> 2) + 16u];
        const unsigned xi = (i * 256u + x_first) >> 2, xi_hi = (i * 256u + x_first + 128u) >> 2;
        const float4 x0 = xv[xi], x1 = xv[xi + 8u], x2 = xv[xi_hi], x3 = xv[xi_hi + 8u];
        const SubScales sm = sub_scales(d, dmin, s0, s1, s2);
        sum = q5k_four_products(sum, sm.scale[0], sm.min[0], q_lo, qh, sub0, x0);
        sum = q5k_four_products(sum, sm.scale[1], sm.min[1], q_lo >> 4, qh, sub0 + 1u, x1);
        sum = q5k_four_products(sum, sm.scale[2], sm.min[2], q_hi, qh, sub0 + 4u, x2);
        sum = q5k_four_products(sum, sm.scale[3], sm.min[3], q_hi >> 4, qh, sub0 + 5u, x3);
    }
    sum = block_reduce_sum(sum);
    if (threadIdx.x == 0) y[(size_t)t * y_tok_stride + (size_t)e * M + row] = sum;
}

// Q6_K superblock = 210 bytes: ql[128], qh[64], int8 scales[16], f16 d at byte 208. Byte-addressed
// with size_t arithmetic as in the engine. 16 threads per superblock: half_id picks the 128-weight
// half, each thread takes 4 consecutive l values in each of the half's four 32-weight quarters.
extern "C" __global__ void dmmv_q6k_experts_batched(
    const unsigned char* a, const float* x, float* y, const unsigned* expert_ids,
    unsigned M, unsigned K, unsigned slice, unsigned x_stride, unsigned n_used, unsigned base,
    unsigned routing_stride, unsigned x_tok_stride, unsigned y_tok_stride) {
    const unsigned t = blockIdx.y;
    const unsigned e = blockIdx.x / M;
    if (e >= n_used) return;
    const unsigned row = blockIdx.x - e * M;
    const unsigned blocks_per_row = K >> 8;
    const unsigned char* a_row = a + ((size_t)expert_ids[(size_t)t * routing_stride + e] * slice + base)
                                 + (size_t)row * blocks_per_row * 210u;
    const float4* xv = (const float4*)(x + (size_t)t * x_tok_stride + (size_t)e * x_stride);

    const unsigned itid = threadIdx.x & 15u, group = threadIdx.x >> 4, n_groups = blockDim.x >> 4;
    const unsigned half_id = itid >> 3, l_first = 4u * (itid & 7u), sub = l_first >> 4;
    const unsigned x_first = (half_id * 128u + l_first) >> 2;

    float sum = 0.0f;
    for (unsigned b = group; b < blocks_per_row; b += n_groups) {
        const unsigned char* blk = a_row + (size_t)b * 210u;
        const float d = half_bits_to_float((unsigned short)((unsigned)blk[208] | ((unsigned)blk[209] << 8)));
        const unsigned char* ql = blk + half_id * 64u;
        const unsigned char* qh = blk + 128u + half_id * 32u;
        const signed char* sc = (const signed char*)(blk + 192u + half_id * 8u);
        const float ds0 = d * (float)sc[sub], ds2 = d * (float)sc[sub + 2u];
        const float ds4 = d * (float)sc[sub + 4u], ds6 = d * (float)sc[sub + 6u];
        const unsigned xi = (b * 256u) / 4u + x_first;
        const float4 x0 = xv[xi], x32 = xv[xi + 8u], x64 = xv[xi + 16u], x96 = xv[xi + 24u];
        const float x0s[4] = {x0.x, x0.y, x0.z, x0.w}, x32s[4] = {x32.x, x32.y, x32.z, x32.w};
        const float x64s[4] = {x64.x, x64.y, x64.z, x64.w}, x96s[4] = {x96.x, x96.y, x96.z, x96.w};
#pragma unroll
        for (unsigned li = 0; li < 4u; li++) {
            const unsigned l = l_first + li, lo = ql[l], hi = ql[l + 32u], h = qh[l];
            const float q1 = (float)((lo & 0xFu) | ((h & 3u) << 4)) - 32.0f;
            const float q2 = (float)((hi & 0xFu) | (((h >> 2) & 3u) << 4)) - 32.0f;
            const float q3 = (float)((lo >> 4) | (((h >> 4) & 3u) << 4)) - 32.0f;
            const float q4 = (float)((hi >> 4) | (((h >> 6) & 3u) << 4)) - 32.0f;
            sum += ds0 * q1 * x0s[li] + ds2 * q2 * x32s[li] + ds4 * q3 * x64s[li] + ds6 * q4 * x96s[li];
        }
    }
    sum = block_reduce_sum(sum);
    if (threadIdx.x == 0) y[(size_t)t * y_tok_stride + (size_t)e * M + row] = sum;
}
