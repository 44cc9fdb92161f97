// RMSNorm in front of a group of prefill GEMMs (T4: launch and recast fusion, zinc-kernels.md §1.4, §1.10).
//
// rms_norm: the engine's kernel in its ABI (push RmsPush{N, eps}; one block per token row, block 256),
//   y[t][i] = w[i] * (x[t][i] * rsqrt(sum_i x[t][i]^2 / N + eps)), f32 out. The buffer order (x, w, y) is
//   inferred: the reference notes give the push fields only. A stand-in for experiments/engine_zinc.yaml.
// rms_norm_to_f16 (ours): the same row, stored as fp16 rounded to nearest even: one launch instead of
//   rms_norm + f32_to_f16, and the fp16 row every GEMM of the group reads.
//
// Bit-identity is by construction: both kernels call rms_row_scale and rms_value, so the sum of squares
// is reduced in the engine's order (thread i accumulates elements i, i + blockDim, ... in one f32
// register, then zinc_block_reduce_sum: shfl-down 16..1 per warp, the warp sums through shared memory,
// warp 0 shfl-down again) and every element is the same f32 value; rms_norm_to_f16 then rounds it with
// zb_float_to_half_rne, the function f32_to_f16 (dequant.cu) applies to rms_norm's output. The launch shape
// (block 256, one row per block) is part of the order: zincbench/reference/rms_norm_ref.py models it.

#include "zb_half.cuh"

// zinc_block_reduce_sum: the sum in thread 0 only.
__device__ __forceinline__ float rms_block_reduce_sum(float v) {
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

// rsqrt(sum(x^2) / N + eps) of one row, broadcast to every thread of the block.
__device__ __forceinline__ float rms_row_scale(const float* row, unsigned N, float eps) {
    __shared__ float scale;
    float sum = 0.0f;
    for (unsigned i = threadIdx.x; i < N; i += blockDim.x) sum += row[i] * row[i];
    sum = rms_block_reduce_sum(sum);
    if (threadIdx.x == 0) scale = rsqrtf(sum / (float)N + eps);
    __syncthreads();
    return scale;
}

__device__ __forceinline__ float rms_value(float x, float w, float scale) { return w * (x * scale); }

extern "C" __global__ void rms_norm(const float* x, const float* w, float* y, unsigned N, float eps) {
    const size_t base = (size_t)blockIdx.x * N;
    const float scale = rms_row_scale(x + base, N, eps);
    for (unsigned i = threadIdx.x; i < N; i += blockDim.x) y[base + i] = rms_value(x[base + i], w[i], scale);
}

extern "C" __global__ void rms_norm_to_f16(const float* x, const float* w, unsigned short* y, unsigned N, float eps) {
    const size_t base = (size_t)blockIdx.x * N;
    const float scale = rms_row_scale(x + base, N, eps);
    for (unsigned i = threadIdx.x; i < N; i += blockDim.x)
        y[base + i] = zb_float_to_half_rne(rms_value(x[base + i], w[i], scale));
}
