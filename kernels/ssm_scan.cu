// The gated delta-net SSM block of the qwen35 hybrid models (the T3 gate), written to the semantics
// and launch geometry of the engine's kernels (zinc-kernels.md §1.7-1.9), plus our chunked candidate.
//
// Engine-ABI entries (buffers first, then one push struct by value; all push fields u32):
//   ssm_delta_net       (conv_out, dt_bias, alpha, beta, ssm_a, state, out, DeltaNetPush)
//                       grid (dt_rank, hv), block hv: the semantic reference, 3 block reductions/token
//   ssm_delta_net_warp  (same buffers, DeltaNetWarpPush) grid (dt_rank, ceil(hv/4)), block (32, 4),
//                       dynamic shared 2*T*4 bytes (gate and beta of every token, precomputed)
//   ssm_conv1d_batched  (x, kernel, state, out, ConvBatchPush) grid ceil(C/64), block 64
//   ssm_gated_norm_batched (o, z, norm_weight, out, GatedNormBatchPush) grid (dt_rank, T), block hv
// The reference gives the delta-net buffer order; the conv1d and norm buffer orders are ours.
// Candidate, same buffers and push as the warp kernel:
//   ssm_delta_net_chunked_tc  grid (dt_rank, hv/32), block 128, dynamic shared CHUNKED_SMEM_BYTES
//
// Layouts: conv_out rows [q: n_group*d_state | k: n_group*d_state | v: dt_rank*hv] (stride
// conv_stride_tok); alpha/beta [T][dt_rank] (stride ab_stride_tok); out [T][d_inner] (stride
// y_stride_tok); state f32 [dt_rank][hv][d_state], state[h][v][k], k contiguous (the engine's models
// have d_state == hv). Value head h reads key/query group h if n_group == dt_rank, else h % n_group.
// dt_bias and ssm_a are per-head, f16 or f32 by their flags.
#include <mma.h>

#include "zb_half.cuh"

using namespace nvcuda;

struct DeltaNetPush {
    unsigned d_inner, dt_rank, head_v_dim, d_state, n_group, ssm_a_is_f16, dt_bias_is_f16, has_dt_bias,
        has_ssm_a, n_tok, conv_stride_tok, ab_stride_tok, y_stride_tok, preprocessed;
};

struct DeltaNetWarpPush {
    unsigned dt_rank, head_v_dim, d_state, n_group, ssm_a_is_f16, dt_bias_is_f16, has_dt_bias, has_ssm_a,
        n_tok, conv_stride_tok, ab_stride_tok, y_stride_tok;
};

struct ConvBatchPush {
    unsigned conv_channels, d_conv, kernel_is_f16, n_tok, state_offset;
};

struct GatedNormBatchPush {
    unsigned d_inner, dt_rank, head_v_dim, d_state, norm_per_head, n_tok;
};

__device__ __forceinline__ float load_f16_or_f32(const void* p, unsigned i, unsigned is_f16) {
    return is_f16 ? zb_half_bits_to_float(((const unsigned short*)p)[i]) : ((const float*)p)[i];
}

// log g of the gate: softplus(alpha + dt_bias) * ssm_a, or -softplus(.) without ssm_a.
// softplus is log(1 + exp(a)), as the engine computes it.
__device__ __forceinline__ float gate_log(float alpha, float bias, float ssm_a, unsigned has_ssm_a) {
    const float sp = logf(1.0f + expf(alpha + bias));
    return has_ssm_a ? sp * ssm_a : -sp;
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

__device__ __forceinline__ float warp_sum_all(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return __shfl_sync(0xffffffffu, v, 0);
}

// Block sums of `n` values per thread in the engine's order (warps shfl-down, lane 0 to shared, warp 0
// reduces the partials). `slots` holds 33 floats per value: 32 partials and the broadcast result; one
// array per reduction site keeps consecutive reductions from overwriting partials a slower warp reads.
// With `broadcast` every thread gets the sums, else only thread 0 (the engine's zinc_block_reduce_sum).
template <int n>
__device__ __forceinline__ void block_sums(float (&v)[n], float* slots, bool broadcast) {
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31u) >> 5;
#pragma unroll
    for (int i = 0; i < n; ++i) {
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) v[i] += __shfl_down_sync(0xffffffffu, v[i], offset);
        if (lane == 0) slots[33 * i + warp] = v[i];
    }
    __syncthreads();
    if (warp == 0) {
#pragma unroll
        for (int i = 0; i < n; ++i) {
            v[i] = lane < n_warps ? slots[33 * i + lane] : 0.0f;
#pragma unroll
            for (int offset = 16; offset > 0; offset >>= 1) v[i] += __shfl_down_sync(0xffffffffu, v[i], offset);
            if (broadcast && lane == 0) slots[33 * i + 32] = v[i];
        }
    }
    if (!broadcast) return;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < n; ++i) v[i] = slots[33 * i + 32];
}

__device__ __forceinline__ float block_sum(float v, float* slots, bool broadcast) {
    float one[1] = {v};
    block_sums(one, slots, broadcast);
    return one[0];
}

// ---- ssm_delta_net: the semantic reference ---------------------------------------------------------
// Block (h, col): thread `row` keeps state[h][col][row] in a register over the whole token loop.
// Requires blockDim.x == hv, a multiple of 32, and d_state <= hv. With `preprocessed`, q and k are taken
// as already normalised (and q scaled) and alpha/beta hold g and beta (ssm_delta_net_prepare's output).
extern "C" __global__ void ssm_delta_net(const float* conv_out, const void* dt_bias, const float* alpha,
                                         const float* beta, const void* ssm_a, float* state, float* out,
                                         DeltaNetPush p) {
    __shared__ float norms[66], dot_sk[33], dot_o[33];
    const unsigned h = blockIdx.x, col = blockIdx.y, row = threadIdx.x;
    const unsigned hv = p.head_v_dim, ds = p.d_state, qk_dim = p.n_group * ds;
    const unsigned grp = p.n_group == p.dt_rank ? h : h % p.n_group;
    const bool active = row < ds;
    float* state_at = state + ((size_t)h * hv + col) * ds + row;
    float rs = active ? *state_at : 0.0f;
    const float bias = p.has_dt_bias ? load_f16_or_f32(dt_bias, h, p.dt_bias_is_f16) : 0.0f;
    const float a = p.has_ssm_a ? load_f16_or_f32(ssm_a, h, p.ssm_a_is_f16) : 0.0f;
    const float q_scale = rsqrtf((float)ds);
    for (unsigned t = 0; t < p.n_tok; ++t) {
        const float* x = conv_out + (size_t)t * p.conv_stride_tok;
        float q = active ? x[grp * ds + row] : 0.0f;
        float k = active ? x[qk_dim + grp * ds + row] : 0.0f;
        const float a_t = alpha[(size_t)t * p.ab_stride_tok + h], b_t = beta[(size_t)t * p.ab_stride_tok + h];
        float g, b;
        if (p.preprocessed) {
            g = a_t;
            b = b_t;
        } else {
            float sq[2] = {q * q, k * k};  // reduction 1: both norms
            block_sums(sq, norms, true);
            q *= rsqrtf(fmaxf(sq[0], 1e-12f)) * q_scale;
            k *= rsqrtf(fmaxf(sq[1], 1e-12f));
            g = expf(gate_log(a_t, bias, a, p.has_ssm_a));
            b = sigmoid(b_t);
        }
        rs *= g;
        const float sk = block_sum(rs * k, dot_sk, true);  // reduction 2
        const float d = b * (x[2u * qk_dim + h * hv + col] - sk);
        rs += k * d;
        const float o = block_sum(rs * q, dot_o, false);  // reduction 3, thread 0 only
        if (row == 0) out[(size_t)t * p.y_stride_tok + h * hv + col] = o;
    }
    if (active) *state_at = rs;
}

// ---- ssm_delta_net_warp: the engine's CUDA prefill default -------------------------------------------
// Warp threadIdx.y of block (h, y) owns v index col = 4*y + threadIdx.y (the state row state[h][col][*]);
// lane keeps k indices lane, lane+32, lane+64, lane+96 (d_state <= 128). Only warp reductions in the
// token loop; their order differs from the block kernel's, so results agree to rounding, not bit-exactly.
extern "C" __global__ void ssm_delta_net_warp(const float* conv_out, const void* dt_bias, const float* alpha,
                                              const float* beta, const void* ssm_a, float* state, float* out,
                                              DeltaNetWarpPush p) {
    extern __shared__ float gate_beta[];  // [0, T): g of every token; [T, 2T): sigmoid(beta)
    const unsigned h = blockIdx.x, lane = threadIdx.x, col = blockIdx.y * 4u + threadIdx.y;
    const unsigned hv = p.head_v_dim, ds = p.d_state, qk_dim = p.n_group * ds;
    const unsigned grp = p.n_group == p.dt_rank ? h : h % p.n_group;
    const float bias = p.has_dt_bias ? load_f16_or_f32(dt_bias, h, p.dt_bias_is_f16) : 0.0f;
    const float a = p.has_ssm_a ? load_f16_or_f32(ssm_a, h, p.ssm_a_is_f16) : 0.0f;
    for (unsigned t = threadIdx.y * 32u + lane; t < p.n_tok; t += 128u) {
        const size_t ab = (size_t)t * p.ab_stride_tok + h;
        gate_beta[t] = expf(gate_log(alpha[ab], bias, a, p.has_ssm_a));
        gate_beta[p.n_tok + t] = sigmoid(beta[ab]);
    }
    __syncthreads();
    if (col >= hv) return;
    float* state_row = state + ((size_t)h * hv + col) * ds;
    float rs[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) rs[i] = lane + 32u * i < ds ? state_row[lane + 32u * i] : 0.0f;
    const float q_scale = rsqrtf((float)ds);
    for (unsigned t = 0; t < p.n_tok; ++t) {
        const float* x = conv_out + (size_t)t * p.conv_stride_tok;
        float q[4], k[4], qq = 0.0f, kk = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const unsigned j = lane + 32u * i;
            q[i] = j < ds ? x[grp * ds + j] : 0.0f;
            k[i] = j < ds ? x[qk_dim + grp * ds + j] : 0.0f;
            qq += q[i] * q[i];
            kk += k[i] * k[i];
        }
        const float q_mul = rsqrtf(fmaxf(warp_sum_all(qq), 1e-12f)) * q_scale;
        const float k_mul = rsqrtf(fmaxf(warp_sum_all(kk), 1e-12f));
        const float g = gate_beta[t], b = gate_beta[p.n_tok + t];
        float sk = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            k[i] *= k_mul;
            rs[i] *= g;
            sk += rs[i] * k[i];
        }
        const float d = b * (x[2u * qk_dim + h * hv + col] - warp_sum_all(sk));
        float o = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            rs[i] += k[i] * d;
            o += rs[i] * q[i] * q_mul;
        }
        o = warp_sum_all(o);
        if (lane == 0) out[(size_t)t * p.y_stride_tok + h * hv + col] = o;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
        if (lane + 32u * i < ds) state_row[lane + 32u * i] = rs[i];
}

// ---- ssm_conv1d_batched --------------------------------------------------------------------------
// One thread per channel: depthwise causal conv over d_conv taps (weight [C][d_conv]), SiLU. The state
// is a circular buffer of d_conv-1 slots x C (slot s of channel c at s*C + c), state_offset the oldest
// slot; each token's input replaces the oldest sample and the offset advances by one (mod d_conv-1).
extern "C" __global__ void ssm_conv1d_batched(const float* x, const void* kernel, float* state, float* out,
                                              ConvBatchPush p) {
    const unsigned ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= p.conv_channels) return;
    const unsigned C = p.conv_channels, slots = p.d_conv - 1u;
    unsigned off = p.state_offset % slots;
    for (unsigned t = 0; t < p.n_tok; ++t) {
        const float cur = x[(size_t)t * C + ch];
        float acc = 0.0f;
        for (unsigned i = 0; i < slots; ++i) {
            const unsigned slot = off + i < slots ? off + i : off + i - slots;
            acc += state[(size_t)slot * C + ch] * load_f16_or_f32(kernel, ch * p.d_conv + i, p.kernel_is_f16);
        }
        acc += cur * load_f16_or_f32(kernel, ch * p.d_conv + slots, p.kernel_is_f16);
        out[(size_t)t * C + ch] = silu(acc);
        state[(size_t)off * C + ch] = cur;
        off = off + 1u == slots ? 0u : off + 1u;
    }
}

// ---- ssm_gated_norm_batched ------------------------------------------------------------------------
// Block (h, t), thread i < hv: out = o * rsqrt(mean(o^2) + 1e-6) * w[idx] * silu(z) with the epsilon
// hard-coded (not the model's rms_eps); idx = h*hv + i with norm_per_head, else i % d_state.
extern "C" __global__ void ssm_gated_norm_batched(const float* o, const float* z, const float* weight, float* out,
                                                  GatedNormBatchPush p) {
    __shared__ float sum_sq[33];
    const unsigned h = blockIdx.x, t = blockIdx.y, i = threadIdx.x, hv = p.head_v_dim;
    const size_t at = (size_t)t * p.d_inner + h * hv + i;
    const float v = i < hv ? o[at] : 0.0f;
    const float scale = rsqrtf(block_sum(v * v, sum_sq, true) / (float)hv + 1e-6f);
    if (i < hv) {
        const unsigned w_idx = p.norm_per_head ? h * hv + i : i % p.d_state;
        out[at] = v * scale * weight[w_idx] * silu(z[at]);
    }
}

// ---- ssm_delta_net_chunked_tc: the candidate -----------------------------------------------------
// The WY / UT-transform chunk form of the same recurrence (zincbench/reference/ssm_ref.py,
// delta_net_chunked). Block (h, vt) owns state rows v in [32*vt, 32*vt + 32) of head h (rows evolve
// independently) and walks the tokens 64 at a time, the state S0 (32 x 128) in shared memory. Per chunk,
// with c_r the cumulative log-decay inside the chunk:
//   1. q, k rows L2-normalised into shared memory, the chunk's v columns; log g and beta per token;
//   2. c = prefix sum of log g; on Tensor cores: G = K K^T, P = Q K^T, KS = K S0^T, QS = Q S0^T;
//   3. A_ij = beta_i e^{c_i - c_j} G_ij (j < i), M_ij = e^{c_i - c_j} P_ij (j <= i),
//      R = beta (V - e^{c} KS), QS <- e^{c} QS;
//   4. (I + A) D = R by forward substitution (four lanes per state row, no block barrier), and
//      Dw_i = e^{c_last - c_i} D_i;
//   5. on Tensor cores: O = QS + M D;  S <- e^{c_last} S0 + Dw^T K;  O rows written out.
// Every product is tf32 m16n16k8 with each operand split into a tf32 part and a tf32 remainder (three
// MMAs: fp32-level accuracy, so the chunked state stays compatible with the sequential scans);
// ssm_delta_net_chunked_tc1 is the same kernel with one plain tf32 MMA per product (what the split costs).
// The final state is written in the engine's layout. Requires d_state == 128 and hv % 32 == 0.
namespace chunked {
constexpr int CH = 64;        // tokens per chunk
constexpr int DK = 128;       // d_state
constexpr int VT = 32;        // state rows per block
constexpr int THREADS = 128;  // 4 warps
constexpr int KS = DK + 4;    // K, Q and state row stride (floats): wmma wants a multiple of 4
constexpr int GS = CH + 4;    // G / P row stride
// Shared arrays, each starting on a 32-byte boundary (wmma's pointer alignment): offsets in floats.
constexpr int K_OFF = 0, Q_OFF = K_OFF + CH * KS, G_OFF = Q_OFF + CH * KS, P_OFF = G_OFF + CH * GS,
              S_OFF = P_OFF + CH * GS, R_OFF = S_OFF + VT * KS, QS_OFF = R_OFF + CH * VT, D_OFF = QS_OFF + CH * VT,
              DW_OFF = D_OFF + CH * VT, V_OFF = DW_OFF + CH * VT, C_OFF = V_OFF + CH * VT, B_OFF = C_OFF + CH,
              FLOATS = B_OFF + CH;
static_assert(Q_OFF % 8 == 0 && G_OFF % 8 == 0 && P_OFF % 8 == 0 && S_OFF % 8 == 0 && R_OFF % 8 == 0 &&
              QS_OFF % 8 == 0 && D_OFF % 8 == 0 && DW_OFF % 8 == 0 && V_OFF % 8 == 0, "32-byte aligned arrays");

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragAT = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using Acc = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

template <class Frag>
__device__ __forceinline__ void load_split(Frag& big, Frag& small, const float* p, unsigned ld) {
    wmma::load_matrix_sync(big, p, ld);
#pragma unroll
    for (int e = 0; e < big.num_elements; ++e) {
        const float x = big.x[e];
        big.x[e] = wmma::__float_to_tf32(x);
        small.x[e] = wmma::__float_to_tf32(x - big.x[e]);
    }
}

// acc += A (16 x kdim) . B (kdim x 16). Step kk reads the A tile at a + kk * a_step and the B tile at
// b + kk * b_step: a_step = 1 for a row-major A (lda its row stride), lda for a column-major one; b_step
// = 1 for a column-major B, ldb for a row-major one. PASSES 3: split operands (fp32-level), 1: plain tf32.
template <int PASSES, class FA, class FB>
__device__ __forceinline__ void mma_tf32(Acc& acc, const float* a, unsigned a_step, unsigned lda, const float* b,
                                         unsigned b_step, unsigned ldb, int kdim) {
    FA a_big, a_small;
    FB b_big, b_small;
    for (int kk = 0; kk < kdim; kk += 8) {
        load_split(a_big, a_small, a + kk * a_step, lda);
        load_split(b_big, b_small, b + kk * b_step, ldb);
        if (PASSES == 3) {
            wmma::mma_sync(acc, a_small, b_big, acc);
            wmma::mma_sync(acc, a_big, b_small, acc);
        }
        wmma::mma_sync(acc, a_big, b_big, acc);
    }
}
}  // namespace chunked

// Shared bytes the launcher requests for ssm_delta_net_chunked_tc (zincbench/ops/ssm.py reads it).
extern "C" __device__ const unsigned CHUNKED_SMEM_BYTES = chunked::FLOATS * 4u;

template <int PASSES>
__device__ __forceinline__ void chunked_scan(const float* conv_out, const void* dt_bias, const float* alpha,
                                             const float* beta, const void* ssm_a, float* state, float* out,
                                             const DeltaNetWarpPush& p) {
    using namespace chunked;
    extern __shared__ __align__(128) float smem[];
    float *Ks = smem + K_OFF, *Qs = smem + Q_OFF, *Gs = smem + G_OFF, *Ps = smem + P_OFF, *Ss = smem + S_OFF;
    float *Rs = smem + R_OFF, *QSs = smem + QS_OFF, *Ds = smem + D_OFF, *Dws = smem + DW_OFF, *Vs = smem + V_OFF;
    float *cum = smem + C_OFF, *bs = smem + B_OFF;
    const unsigned h = blockIdx.x, v0 = blockIdx.y * VT, tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const unsigned hv = p.head_v_dim, qk_dim = p.n_group * DK;
    const unsigned grp = p.n_group == p.dt_rank ? h : h % p.n_group;
    const float bias = p.has_dt_bias ? load_f16_or_f32(dt_bias, h, p.dt_bias_is_f16) : 0.0f;
    const float a = p.has_ssm_a ? load_f16_or_f32(ssm_a, h, p.ssm_a_is_f16) : 0.0f;
    const float q_scale = rsqrtf((float)DK);
    float* state_rows = state + ((size_t)h * hv + v0) * DK;
    for (int i = tid; i < VT * DK; i += THREADS) Ss[(i / DK) * KS + i % DK] = state_rows[i];

    for (unsigned c0 = 0; c0 < p.n_tok; c0 += CH) {
        // 1. per-token log g and beta (0 past the end: no decay, no update), the v columns of this block,
        //    then normalised q, k rows, four rows per warp in flight at a time (zero past the end).
        if (tid < CH) {
            const unsigned t = c0 + tid;
            const size_t ab = (size_t)t * p.ab_stride_tok + h;
            cum[tid] = t < p.n_tok ? gate_log(alpha[ab], bias, a, p.has_ssm_a) : 0.0f;
            bs[tid] = t < p.n_tok ? sigmoid(beta[ab]) : 0.0f;
        }
        for (int r = warp; r < CH; r += THREADS / 32) {
            const unsigned t = c0 + r;
            Vs[r * VT + lane] = t < p.n_tok ? conv_out[(size_t)t * p.conv_stride_tok + 2u * qk_dim + h * hv + v0 + lane] : 0.0f;
        }
        for (int r0 = warp * 16; r0 < (int)warp * 16 + 16; r0 += 4) {
            float q[4][4], k[4][4];
#pragma unroll
            for (int rr = 0; rr < 4; ++rr) {
                const unsigned t = c0 + r0 + rr;
                const float* x = conv_out + (size_t)t * p.conv_stride_tok + grp * DK + lane;
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    q[rr][i] = t < p.n_tok ? x[32 * i] : 0.0f;
                    k[rr][i] = t < p.n_tok ? x[qk_dim + 32 * i] : 0.0f;
                }
            }
#pragma unroll
            for (int rr = 0; rr < 4; ++rr) {
                float qq = 0.0f, kk = 0.0f;
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    qq += q[rr][i] * q[rr][i];
                    kk += k[rr][i] * k[rr][i];
                }
                const float q_mul = rsqrtf(fmaxf(warp_sum_all(qq), 1e-12f)) * q_scale;
                const float k_mul = rsqrtf(fmaxf(warp_sum_all(kk), 1e-12f));
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    Qs[(r0 + rr) * KS + lane + 32 * i] = q[rr][i] * q_mul;
                    Ks[(r0 + rr) * KS + lane + 32 * i] = k[rr][i] * k_mul;
                }
            }
        }
        __syncthreads();

        // 2. prefix sum of log g (warp 0, two tokens per lane); G, P (4 tiles per warp), KS, QS (2 each)
        if (warp == 0) {
            const float l0 = cum[2 * lane], l1 = cum[2 * lane + 1];
            float run = l0 + l1;
#pragma unroll
            for (int offset = 1; offset < 32; offset <<= 1) {
                const float up = __shfl_up_sync(0xffffffffu, run, offset);
                if ((int)lane >= offset) run += up;
            }
            const float before = run - (l0 + l1);
            cum[2 * lane] = before + l0;
            cum[2 * lane + 1] = before + l0 + l1;
        }
        {
            const float* k_rows = Ks + warp * 16 * KS;
            const float* q_rows = Qs + warp * 16 * KS;
            for (int tn = 0; tn < CH / 16; ++tn) {
                Acc acc;
                wmma::fill_fragment(acc, 0.0f);
                mma_tf32<PASSES, FragA, FragBT>(acc, k_rows, 1, KS, Ks + tn * 16 * KS, 1, KS, DK);
                wmma::store_matrix_sync(Gs + warp * 16 * GS + tn * 16, acc, GS, wmma::mem_row_major);
                wmma::fill_fragment(acc, 0.0f);
                mma_tf32<PASSES, FragA, FragBT>(acc, q_rows, 1, KS, Ks + tn * 16 * KS, 1, KS, DK);
                wmma::store_matrix_sync(Ps + warp * 16 * GS + tn * 16, acc, GS, wmma::mem_row_major);
            }
            for (int tn = 0; tn < VT / 16; ++tn) {
                Acc acc;
                wmma::fill_fragment(acc, 0.0f);
                mma_tf32<PASSES, FragA, FragBT>(acc, k_rows, 1, KS, Ss + tn * 16 * KS, 1, KS, DK);
                wmma::store_matrix_sync(Rs + warp * 16 * VT + tn * 16, acc, VT, wmma::mem_row_major);
                wmma::fill_fragment(acc, 0.0f);
                mma_tf32<PASSES, FragA, FragBT>(acc, q_rows, 1, KS, Ss + tn * 16 * KS, 1, KS, DK);
                wmma::store_matrix_sync(QSs + warp * 16 * VT + tn * 16, acc, VT, wmma::mem_row_major);
            }
        }
        __syncthreads();

        // 3. decay-weighted A (strictly lower) and M (lower with the diagonal); R = beta (V - e^c KS); e^c QS
        for (int idx = tid; idx < CH * CH; idx += THREADS) {
            const int i = idx / CH, j = idx % CH;
            const float decay = j <= i ? expf(cum[i] - cum[j]) : 0.0f;
            Gs[i * GS + j] = j < i ? bs[i] * decay * Gs[i * GS + j] : 0.0f;
            Ps[i * GS + j] = decay * Ps[i * GS + j];
        }
        for (int idx = tid; idx < CH * VT; idx += THREADS) {
            const int r = idx / VT;
            const float gamma = expf(cum[r]);
            Rs[idx] = bs[r] * (Vs[idx] - gamma * Rs[idx]);
            QSs[idx] *= gamma;
        }
        __syncthreads();

        // 4. forward substitution, column j by the four lanes of a quad: lane `part` holds D[4s + part][j]
        {
            const int j = warp * 8 + (lane >> 2), part = lane & 3;
            const float last = cum[CH - 1];
            float d[CH / 4];
#pragma unroll
            for (int s = 0; s < CH / 4; ++s) d[s] = 0.0f;
#pragma unroll
            for (int i = 0; i < CH; ++i) {
                // A is zero on and above the diagonal and d is zero for rows not solved yet: a full row sum
                float part_sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int s = 0; s < CH / 4; ++s) part_sum[s & 3] += Gs[i * GS + 4 * s + part] * d[s];
                float sum = (part_sum[0] + part_sum[1]) + (part_sum[2] + part_sum[3]);
                sum += __shfl_xor_sync(0xffffffffu, sum, 1);
                sum += __shfl_xor_sync(0xffffffffu, sum, 2);
                if (part == (i & 3)) d[i >> 2] = Rs[i * VT + j] - sum;
            }
#pragma unroll
            for (int s = 0; s < CH / 4; ++s) {
                const int i = 4 * s + part;
                Ds[i * VT + j] = d[s];
                Dws[i * VT + j] = expf(last - cum[i]) * d[s];
            }
        }
        __syncthreads();

        // 5. O = QS + M D (tiles (warp, 0..1), into Vs); S = e^{c_last} S0 + Dw^T K (tiles (warp/2, 4 per warp))
        {
            for (int tn = 0; tn < VT / 16; ++tn) {
                Acc acc;
                wmma::load_matrix_sync(acc, QSs + warp * 16 * VT + tn * 16, VT, wmma::mem_row_major);
                mma_tf32<PASSES, FragA, FragB>(acc, Ps + warp * 16 * GS, 1, GS, Ds + tn * 16, VT, VT, CH);
                wmma::store_matrix_sync(Vs + warp * 16 * VT + tn * 16, acc, VT, wmma::mem_row_major);
            }
            const float gamma_last = expf(cum[CH - 1]);
            const int tm = warp >> 1;
            for (int tn = (warp & 1) * 4; tn < (warp & 1) * 4 + 4; ++tn) {
                Acc acc;
                float* s_tile = Ss + tm * 16 * KS + tn * 16;
                wmma::load_matrix_sync(acc, s_tile, KS, wmma::mem_row_major);
#pragma unroll
                for (int e = 0; e < acc.num_elements; ++e) acc.x[e] *= gamma_last;
                mma_tf32<PASSES, FragAT, FragB>(acc, Dws + tm * 16, VT, VT, Ks + tn * 16, KS, KS, CH);
                wmma::store_matrix_sync(s_tile, acc, KS, wmma::mem_row_major);
            }
        }
        __syncthreads();
        for (int r = warp; r < CH; r += THREADS / 32) {
            const unsigned t = c0 + r;
            if (t < p.n_tok) out[(size_t)t * p.y_stride_tok + h * hv + v0 + lane] = Vs[r * VT + lane];
        }
        __syncthreads();
    }
    for (int i = tid; i < VT * DK; i += THREADS) state_rows[i] = Ss[(i / DK) * KS + i % DK];
}

extern "C" __global__ void __launch_bounds__(128) ssm_delta_net_chunked_tc(
    const float* conv_out, const void* dt_bias, const float* alpha, const float* beta, const void* ssm_a,
    float* state, float* out, DeltaNetWarpPush p) {
    chunked_scan<3>(conv_out, dt_bias, alpha, beta, ssm_a, state, out, p);
}

extern "C" __global__ void __launch_bounds__(128) ssm_delta_net_chunked_tc1(
    const float* conv_out, const void* dt_bias, const float* alpha, const float* beta, const void* ssm_a,
    float* state, float* out, DeltaNetWarpPush p) {
    chunked_scan<1>(conv_out, dt_bias, alpha, beta, ssm_a, state, out, p);
}
