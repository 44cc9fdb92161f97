// The small kernels of the engine's MoE FFN block (zinc-kernels.md §1.11 and §2.1 "MoE FFN"), written
// here to the reference semantics in the engine's launch ABI: buffers first, then the push fields as
// u32 scalars (the same parameter bytes as the engine's push struct passed by value). With --engine-src
// the engine's own kernels of these names replace them (experiments/engine_zinc.yaml). The buffer order
// of each kernel is ours: the reference lists the push fields, not the buffers.
//
// dmmv_f32_batched          router logits / shared-expert gate scalar: y[t][row] = W[row] . x[t]
// softmax_topk_batched      k rounds of arg-max, softmax over the k selected logits -> [ids k | weights k]
// swiglu                    y = silu(g) * u, element-wise
// moe_weighted_acc_batched  hidden[t][i] += sum_j w_j * src[t][j][i]
// sigmoid_scale_acc_batched a[t][i] += sigmoid(c[t]) * b[t][i]

#define ZL_NEG_INF __int_as_float(0xff800000)  // NVRTC has no math.h INFINITY

// Sum over the block, valid in every thread (blockDim a multiple of 32, at most 1024).
__device__ __forceinline__ float zl_block_sum_all(float v) {
    __shared__ float partial[32];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31u) >> 5;
    __syncthreads();  // partial[] may still be read by a previous call
    if (lane == 0u) partial[warp] = v;
    __syncthreads();
    v = lane < n_warps ? partial[lane] : 0.0f;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return __shfl_sync(0xffffffffu, v, 0);
}

// MatvecBatchPush{M, K, x_tok_stride, y_tok_stride}. Grid (M, T), block 256: y[t*y_tok_stride + row] =
// sum_k W[row*K + k] * x[t*x_tok_stride + k], each thread striding over k, f32 throughout.
extern "C" __global__ void dmmv_f32_batched(const float* W, const float* x, float* y, unsigned M, unsigned K,
                                            unsigned x_tok_stride, unsigned y_tok_stride) {
    const unsigned row = blockIdx.x, t = blockIdx.y;
    if (row >= M) return;
    const float* w = W + (size_t)row * K;
    const float* xt = x + (size_t)t * x_tok_stride;
    float sum = 0.0f;
    for (unsigned k = threadIdx.x; k < K; k += blockDim.x) sum += w[k] * xt[k];
    sum = zl_block_sum_all(sum);
    if (threadIdx.x == 0u) y[(size_t)t * y_tok_stride + row] = sum;
}

// TopkPush{n_experts, k}. Grid T, block 64, n_experts <= 256, k <= 32. Row t of `table` (stride 2k) gets
// the k chosen expert ids, then their softmax weights (over the k chosen logits) as f32 bits.
// Ties (the engine's rule): within a thread the lowest index wins (strict >, ascending scan); across
// threads the lowest thread id (index mod 64) wins. So equal logits at 65 and 2 pick 65 (thread 1) first.
extern "C" __global__ void softmax_topk_batched(const float* logits, unsigned* table, unsigned n_experts,
                                                unsigned k) {
    __shared__ float values[256];
    __shared__ float best_v[64];
    __shared__ unsigned best_i[64];
    __shared__ unsigned chosen[32];
    const unsigned t = blockIdx.x, tid = threadIdx.x;
    const float* row = logits + (size_t)t * n_experts;
    for (unsigned i = tid; i < n_experts; i += blockDim.x) values[i] = row[i];
    __syncthreads();
    for (unsigned round = 0; round < k; round++) {
        float v = ZL_NEG_INF;  // finite logits only: a chosen one is set to -inf and never wins again
        unsigned at = 0xFFFFFFFFu;
        for (unsigned i = tid; i < n_experts; i += blockDim.x)
            if (values[i] > v) { v = values[i]; at = i; }
        best_v[tid] = v;
        best_i[tid] = at;
        __syncthreads();
        if (tid == 0u) {
            float bv = ZL_NEG_INF;
            unsigned bi = 0xFFFFFFFFu;
            for (unsigned j = 0; j < blockDim.x; j++)
                if (best_v[j] > bv) { bv = best_v[j]; bi = best_i[j]; }
            chosen[round] = bi;  // 0xFFFFFFFF only if fewer than k finite logits: an id the routing build rejects
            if (bi != 0xFFFFFFFFu) values[bi] = ZL_NEG_INF;  // out of later rounds
        }
        __syncthreads();
    }
    if (tid == 0u) {
        // Softmax over the chosen logits (read back from the input: values[] was overwritten).
        float top = ZL_NEG_INF;
        for (unsigned j = 0; j < k; j++) top = fmaxf(top, row[chosen[j]]);
        float e[32], total = 0.0f;
        for (unsigned j = 0; j < k; j++) { e[j] = expf(row[chosen[j]] - top); total += e[j]; }
        const float inv = total > 0.0f ? 1.0f / total : 0.0f;  // the engine's: times the inverse, not e / total
        unsigned* out = table + (size_t)t * 2u * k;
        for (unsigned j = 0; j < k; j++) {
            out[j] = chosen[j];
            out[k + j] = __float_as_uint(e[j] * inv);
        }
    }
}

// SwigluPush{N}. Grid ceil(N/64), block 64: y[i] = g[i] / (1 + exp(-g[i])) * u[i].
extern "C" __global__ void swiglu(const float* g, const float* u, float* y, unsigned N) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    const float gi = g[i];
    y[i] = gi / (1.0f + expf(-gi)) * u[i];
}

// MoeAccBatchPush{N, n_used, src_stride, a_tok_stride, b_tok_stride, routing_stride}. Grid (ceil(N/64), T),
// block 64: acc = sum over slots j in order of w_j * src[t*b_tok_stride + j*src_stride + i], then
// hidden[t*a_tok_stride + i] += acc; w_j is the f32 at routing[t*routing_stride + n_used + j].
extern "C" __global__ void moe_weighted_acc_batched(float* hidden, const float* src, const unsigned* routing,
                                                    unsigned N, unsigned n_used, unsigned src_stride,
                                                    unsigned a_tok_stride, unsigned b_tok_stride,
                                                    unsigned routing_stride) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (i >= N) return;
    const unsigned* weights = routing + (size_t)t * routing_stride + n_used;
    const float* s = src + (size_t)t * b_tok_stride + i;
    float acc = 0.0f;
    for (unsigned j = 0; j < n_used; j++) acc += __uint_as_float(weights[j]) * s[(size_t)j * src_stride];
    hidden[(size_t)t * a_tok_stride + i] += acc;
}

// The engine's MoeAccBatchPush; sigmoid_scale_acc_batched reads N and the two token strides of it.
struct MoeAccBatchPush {
    unsigned N, n_used, src_stride, a_tok_stride, b_tok_stride, routing_stride;
};

// Grid (ceil(N/64), T), block 64: a[t][i] += b[t][i] / (1 + exp(-c[t])), rows at the push's token strides.
extern "C" __global__ void sigmoid_scale_acc_batched(float* a, const float* b, const float* c, MoeAccBatchPush pc) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (i >= pc.N) return;
    a[(size_t)t * pc.a_tok_stride + i] += b[(size_t)t * pc.b_tok_stride + i] / (1.0f + expf(-c[t]));
}

// zincbench's combine for a down projection computed in padded expert-grouped rows [E][capacity][N] (a
// batched GEMM's output), deterministic: position[t*top_k + slot] = the item's place in sorted order
// (moe_item_positions, grid ceil(P/256), block 256), then per token the engine's sum over slots in order,
// added once (moe_weighted_acc_grouped, grid (ceil(N/64), T), block 64).
extern "C" __global__ void moe_item_positions(const unsigned* sorted_ids, const unsigned* offsets, unsigned* position,
                                              unsigned n_experts) {
    const unsigned p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p < offsets[n_experts]) position[sorted_ids[p]] = p;
}

extern "C" __global__ void moe_weighted_acc_grouped(float* hidden, const float* y, const unsigned* routing,
                                                    const unsigned* position, const unsigned* offsets, unsigned N,
                                                    unsigned top_k, unsigned routing_stride, unsigned capacity) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (i >= N) return;
    const unsigned* ids = routing + (size_t)t * routing_stride;
    float acc = 0.0f;
    for (unsigned j = 0; j < top_k; j++) {
        const unsigned e = ids[j], place = position[t * top_k + j] - offsets[e];
        acc += __uint_as_float(ids[top_k + j]) * y[((size_t)e * capacity + place) * N + i];
    }
    hidden[(size_t)t * N + i] += acc;
}
