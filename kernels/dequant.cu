// Dequantize-to-fp16 and activation downcast: the engine's cuBLAS prefill path (zinc-kernels.md §1.4).
// One thread per output element, grid ceil(M*K/256) x 256, row-major [M][K] fp16 stores rounded to
// nearest even (the engine's __float2half). M = rows of one matrix, or E*rows for a whole [E][rows][K] expert
// tensor in one launch; element indices are 64-bit because E*M*K may exceed 2^31.
// a_offset is in bytes (a multiple of 4 for the word-addressed Q4_K kernel). Parameters after the
// buffers are the engine's push fields (DequantQ4KPush / DequantQ5KPush / DequantQ6KPush {M, K, a_offset}, F32ToF16Push {N}),
// all u32, so experiments/engine_zinc.yaml can launch these as stand-ins for the engine's own.

#include "zb_half.cuh"
#include "zb_kquant.cuh"

// Q4_K: value = (d*sc)*q - dmin*mn in f32 (ggml's get_scale_min_k4 for sc, mn).
extern "C" __global__ void dequant_q4k_to_f16(const unsigned* a_u32, unsigned short* w16,
                                              unsigned M, unsigned K, unsigned a_offset) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * K) return;
    const size_t row = i / K;
    const unsigned k = (unsigned)(i - row * K);
    const unsigned sub = (k & 255u) >> 5, l = k & 31u;
    const unsigned* blk = a_u32 + (a_offset >> 2) + (row * (K >> 8) + (k >> 8)) * 36u;
    const unsigned d_dmin = blk[0];
    const float d = zb_half_bits_to_float((unsigned short)(d_dmin & 0xFFFFu));
    const float dmin = zb_half_bits_to_float((unsigned short)(d_dmin >> 16));
    const unsigned char* scales = (const unsigned char*)(blk + 1);
    const unsigned char* qs = (const unsigned char*)(blk + 4);
    unsigned sc, mn;
    zb_scale_min_k4(scales, sub, sc, mn);
    const unsigned q_byte = qs[(sub >> 1) * 32u + l];
    const unsigned q = (sub & 1u) ? (q_byte >> 4) : (q_byte & 0xFu);
    w16[i] = zb_float_to_half_rne(d * (float)sc * (float)q - dmin * (float)mn);
}

// Q6_K: value = d*sc*(q-32) with q = 4 bits of ql + 2 bits of qh (ggml ordering, 210-byte blocks).
extern "C" __global__ void dequant_q6k_to_f16(const unsigned char* a, unsigned short* w16,
                                              unsigned M, unsigned K, unsigned a_offset) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * K) return;
    const size_t row = i / K;
    const unsigned k = (unsigned)(i - row * K);
    const unsigned char* blk = a + a_offset + (row * (K >> 8) + (k >> 8)) * 210u;
    const float d = zb_half_bits_to_float((unsigned short)((unsigned)blk[208] | ((unsigned)blk[209] << 8)));
    // Within a 128-weight half, quarter g (32 weights) takes ql[l] or ql[l+32], low or high nibble,
    // and qh bits 2g..2g+1; its scale index is l/16 + 2g.
    const unsigned within = k & 255u, half_id = within >> 7, quarter = (within >> 5) & 3u, l = within & 31u;
    const unsigned char* ql = blk + half_id * 64u + (quarter & 1u) * 32u;
    const unsigned char* qh = blk + 128u + half_id * 32u;
    const signed char* sc = (const signed char*)(blk + 192u + half_id * 8u);
    const unsigned low4 = (quarter < 2u) ? (ql[l] & 0xFu) : (unsigned)(ql[l] >> 4);
    const unsigned q = low4 | (((qh[l] >> (2u * quarter)) & 3u) << 4);
    w16[i] = zb_float_to_half_rne(d * (float)sc[(l >> 4) + 2u * quarter] * ((float)q - 32.0f));
}

// Q5_K: Q4_K's value with a 5-bit q: nibble of qs[(sub/2)*32 + l] @48 plus bit `sub` of qh[l] @16 (176-byte blocks).
extern "C" __global__ void dequant_q5k_to_f16(const unsigned char* a, unsigned short* w16,
                                              unsigned M, unsigned K, unsigned a_offset) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * K) return;
    const size_t row = i / K;
    const unsigned k = (unsigned)(i - row * K);
    const unsigned sub = (k & 255u) >> 5, l = k & 31u;
    const unsigned char* blk = a + a_offset + (row * (K >> 8) + (k >> 8)) * 176u;
    const float d = zb_half_bits_to_float((unsigned short)(blk[0] | (blk[1] << 8)));
    const float dmin = zb_half_bits_to_float((unsigned short)(blk[2] | (blk[3] << 8)));
    const unsigned char* scales = blk + 4;
    unsigned sc, mn;
    zb_scale_min_k4(scales, sub, sc, mn);
    const unsigned q_byte = blk[48u + (sub >> 1) * 32u + l];
    const unsigned q = ((sub & 1u) ? (q_byte >> 4) : (q_byte & 0xFu)) | (((unsigned)blk[16u + l] >> sub & 1u) << 4);
    w16[i] = zb_float_to_half_rne(d * (float)sc * (float)q - dmin * (float)mn);
}

// y[i] = fp16(x[i]), round to nearest even.
extern "C" __global__ void f32_to_f16(const float* x, unsigned short* y, unsigned N) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) y[i] = zb_float_to_half_rne(x[i]);
}
