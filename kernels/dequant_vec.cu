// The round trip's two conversions at memory bandwidth: dequant.cu's values (the same f32 expressions, rounded to
// nearest even), 16 weights or 8 activations per thread, stored as two or one 16-byte writes.
// The engine's kernels (dequant.cu) write one fp16 per thread and load every byte of a block header per element:
// zincbench's own launchers time both, so a run shows what the engine's path costs once its conversions are
// bandwidth-bound (the T1 variant round_trip_vec).
// Weights: thread i converts group g = i % (K / 16) of row i / (K / 16), i.e. weights 16g .. 16g + 15 of the row (a
// run of 16 within one 16-weight sub-block: one scale); consecutive threads write consecutive 32 bytes. Element
// counts are 64-bit (E*M*K may exceed 2^31).

#include "zb_half.cuh"
#include "zb_kquant.cuh"

// 16 fp16 bits, two per word, to their 32 bytes at w16 (16-byte aligned: K is a multiple of 256).
__device__ __forceinline__ void zb_store16_halves(unsigned short* w16, const unsigned short (&h)[16]) {
    uint4* out = reinterpret_cast<uint4*>(w16);
    out[0] = make_uint4(h[0] | (unsigned)h[1] << 16, h[2] | (unsigned)h[3] << 16, h[4] | (unsigned)h[5] << 16,
                        h[6] | (unsigned)h[7] << 16);
    out[1] = make_uint4(h[8] | (unsigned)h[9] << 16, h[10] | (unsigned)h[11] << 16, h[12] | (unsigned)h[13] << 16,
                        h[14] | (unsigned)h[15] << 16);
}

// Group g of a row: superblock g / 16 and, within it, weights 16 (g % 16) .. + 15.
struct ZbGroup {
    unsigned long long row, sb;
    unsigned k;  // the group's first weight within its superblock (a multiple of 16)
};

__device__ __forceinline__ bool zb_group(ZbGroup& grp, unsigned long long M, unsigned K) {
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned groups = K >> 4;
    if (i >= M * groups) return false;
    grp.row = i / groups;
    const unsigned g = (unsigned)(i - grp.row * groups);
    grp.sb = g >> 4;
    grp.k = (g & 15u) << 4;
    return true;
}

// Q4_K / Q5_K: value = d*sc*q - dmin*mn (dequant.cu's expression); the group lies in sub-block k / 32, bytes l0 ..
// l0 + 15 of its 32.
template <bool FIFTH_BIT>
__device__ __forceinline__ void zb_dequant_nibbles16(const unsigned char* blk, unsigned k, unsigned short (&h)[16]) {
    constexpr unsigned QS = FIFTH_BIT ? 48u : 16u;
    const unsigned sub = k >> 5, l0 = k & 31u;
    const float d = zb_half_bits_to_float((unsigned short)(blk[0] | (blk[1] << 8)));
    const float dmin = zb_half_bits_to_float((unsigned short)(blk[2] | (blk[3] << 8)));
    unsigned sc, mn;
    zb_scale_min_k4(blk + 4, sub, sc, mn);
    const uint4 qs = *reinterpret_cast<const uint4*>(blk + QS + (sub >> 1) * 32u + l0);  // 144/176-byte blocks: aligned
    const unsigned words[4] = {qs.x, qs.y, qs.z, qs.w};
    uint4 qh = make_uint4(0u, 0u, 0u, 0u);
    if (FIFTH_BIT) qh = *reinterpret_cast<const uint4*>(blk + 16u + l0);
    const unsigned high[4] = {qh.x, qh.y, qh.z, qh.w};
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        const unsigned byte = words[j >> 2] >> (8 * (j & 3)) & 0xFFu;
        unsigned q = (sub & 1u) ? byte >> 4 : byte & 0xFu;
        if (FIFTH_BIT) q |= (high[j >> 2] >> (8 * (j & 3)) >> sub & 1u) << 4;
        h[j] = zb_float_to_half_rne(d * (float)sc * (float)q - dmin * (float)mn);
    }
}

// Q6_K: value = d*sc*(q-32) (dequant.cu's expression). 210-byte blocks are 2-byte aligned: ql and qh come as 16-bit
// words. The group is half k / 128, quarter (k / 32) % 4, bytes l0 .. l0 + 15 of the quarter's 32.
__device__ __forceinline__ void zb_dequant_q6k16(const unsigned char* blk, unsigned k, unsigned short (&h)[16]) {
    const unsigned half_id = k >> 7, quarter = (k >> 5) & 3u, l0 = k & 31u;
    const unsigned short* ql = reinterpret_cast<const unsigned short*>(blk + half_id * 64u + (quarter & 1u) * 32u + l0);
    const unsigned short* qh = reinterpret_cast<const unsigned short*>(blk + 128u + half_id * 32u + l0);
    const float d = zb_half_bits_to_float(*reinterpret_cast<const unsigned short*>(blk + 208));
    const signed char* scales = reinterpret_cast<const signed char*>(blk + 192u + half_id * 8u);
    const float scale = d * (float)scales[(l0 >> 4) + 2u * quarter];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const unsigned low = ql[j], high = qh[j];
#pragma unroll
        for (int b = 0; b < 2; ++b) {
            const unsigned byte = low >> (8 * b) & 0xFFu;
            const unsigned low4 = quarter < 2u ? byte & 0xFu : byte >> 4;
            const unsigned q = low4 | ((high >> (8 * b) >> (2u * quarter)) & 3u) << 4;
            h[2 * j + b] = zb_float_to_half_rne(scale * ((float)q - 32.0f));
        }
    }
}

// A thread's group: its block (BLOCK_BYTES a superblock), DECODE's 16 values, one 32-byte store.
template <unsigned BLOCK_BYTES, void (*DECODE)(const unsigned char*, unsigned, unsigned short (&)[16])>
__device__ __forceinline__ void zb_dequant_x16(const unsigned char* a, unsigned short* w16, unsigned long long M,
                                               unsigned K) {
    ZbGroup grp;
    if (!zb_group(grp, M, K)) return;
    unsigned short h[16];
    DECODE(a + (grp.row * (K >> 8) + grp.sb) * BLOCK_BYTES, grp.k, h);
    zb_store16_halves(w16 + grp.row * K + grp.sb * 256u + grp.k, h);
}

extern "C" __global__ void dequant_q4k_to_f16_x16(const unsigned char* a, unsigned short* w16, unsigned long long M,
                                                  unsigned K) {
    zb_dequant_x16<144u, zb_dequant_nibbles16<false>>(a, w16, M, K);
}

extern "C" __global__ void dequant_q5k_to_f16_x16(const unsigned char* a, unsigned short* w16, unsigned long long M,
                                                  unsigned K) {
    zb_dequant_x16<176u, zb_dequant_nibbles16<true>>(a, w16, M, K);
}

extern "C" __global__ void dequant_q6k_to_f16_x16(const unsigned char* a, unsigned short* w16, unsigned long long M,
                                                  unsigned K) {
    zb_dequant_x16<210u, zb_dequant_q6k16>(a, w16, M, K);
}

// y[i] = fp16(x[i]), round to nearest even; thread i converts elements 8i .. 8i + 7 (the last thread the tail).
extern "C" __global__ void f32_to_f16_x8(const float* x, unsigned short* y, unsigned long long n) {
    const unsigned long long i = ((unsigned long long)blockIdx.x * blockDim.x + threadIdx.x) * 8u;
    if (i >= n) return;
    if (i + 8u <= n) {
        const float4 a = reinterpret_cast<const float4*>(x + i)[0], b = reinterpret_cast<const float4*>(x + i)[1];
        const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        unsigned w[4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
            w[j] = zb_float_to_half_rne(v[2 * j]) | (unsigned)zb_float_to_half_rne(v[2 * j + 1]) << 16;
        *reinterpret_cast<uint4*>(y + i) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
        for (unsigned long long j = i; j < n; ++j) y[j] = zb_float_to_half_rne(x[j]);
    }
}
