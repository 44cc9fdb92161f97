// Fused-dequant Q4_K Tensor-core GEMM (zincbench candidate for the T1 and T2 gates).
//
//   Y[out_row(n)][m] = sum_k W[m][k] * X[x_row(n)][k]      W: Q4_K blocks, X: fp16, Y: f32
//
// Dense mode: n is a token, x_row = out_row = n.  Grouped (MoE) mode: a block works on one tile of
// one expert's token bucket (built on the GPU by moe_routing.cu); x_row is the token (or the
// token-slot for per-slot activations) and out_row the token-slot, so Y is [T][top_k][M].
//
// Design (why it can beat the matvec and the dequant->fp16->cuBLAS round trip):
// - every weight byte is read from DRAM once per (row tile, token tile) and dequantized straight
//   into mma.sync A fragments in registers: no fp16 weight scratch, no shared-memory round trip
//   of dequantized weights;
// - mma.sync.m16n8k16 puts weight rows on M and tokens on N, so an 8-token tile is a full MMA:
//   skinny expert buckets (N_e = 8..64) stay on Tensor cores;
// - the k order inside one 128-weight half superblock is permuted so that one u32 of Q4_K nibbles
//   yields four fp16x2 A registers with one shift and four LOP3s (the exponent trick: 1024 + q or
//   64 + q is exact in fp16, subtracting the bias is exact, then one fma applies d*sc and dmin*m).
//   X is stored in the same permuted order by x_f32_to_f16_q4k_perm, so each B fragment pair is one 16-byte load;
// - cp.async multi-stage pipeline for both the Q4_K tile (scales header + 64 bytes of nibbles per
//   row and half superblock) and the X tile; the X tile is XOR-swizzled on row parity so the
//   16-byte fragment loads are bank-conflict free.
// Portable to sm_80+ (sm_89, sm_90, sm_120): plain PTX, no headers.

#define ZB_INVALID 0xFFFFFFFFu

__device__ __forceinline__ unsigned zb_smem_addr(const void* p) {
    unsigned long long a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return (unsigned)a;
}

__device__ __forceinline__ void zb_cp_async16(unsigned dst, const void* src, unsigned src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void zb_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void zb_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

// 16-byte shared-memory load through a plain pointer: the compiler folds constant offsets into the
// LDS instruction (an inline-asm address would cost an integer add per load).
__device__ __forceinline__ uint4 zb_lds128(const unsigned char* p) { return *reinterpret_cast<const uint4*>(p); }

__device__ __forceinline__ float zb_half_to_float(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// {v, v} as fp16x2, round to nearest even.
__device__ __forceinline__ unsigned zb_half2_splat(float v) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(v));
    return r;
}

__device__ __forceinline__ unsigned zb_half2_pack(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// (v & mask) | bias in one LOP3 (the compiler splits it in two when both operands are immediates).
__device__ __forceinline__ unsigned zb_and_or(unsigned v, unsigned mask, unsigned bias) {
    unsigned r;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(v), "r"(mask), "r"(bias));
    return r;
}

// Nibble pairs become fp16 without conversions: OR-ing a nibble into the mantissa of 1024.0 (bits
// 0-3, ulp 1) or of 64.0 (bits 4-7, ulp 1/16) gives exactly 1024 + q or 64 + q.
#define ZB_BIAS_LOW 0x64006400u   // 1024.0 in both halves: nibble in bits 0-3 (and 16-19)
#define ZB_BIAS_HIGH 0x54005400u  // 64.0 in both halves: nibble in bits 4-7 (and 20-23)

// (nibble pair as bias + q in fp16x2) -> (q * dsc - dm): exact subtraction, then one rounding fma.
__device__ __forceinline__ unsigned zb_dequant_pair(unsigned biased, unsigned bias, unsigned dsc2, unsigned neg_dm2) {
    unsigned q, r;
    asm("sub.f16x2 %0, %1, %2;" : "=r"(q) : "r"(biased), "r"(bias));
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(q), "r"(dsc2), "r"(neg_dm2));
    return r;
}

__device__ __forceinline__ void zb_mma16816(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                            unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Q4_K scale d*sc and negated min -(dmin*m) of one sub-block, as fp16x2 splats, from the 16-byte block
// header (d, dmin, scales[12]). HIGH selects sub-block j + 4 (6-bit codes split across bytes), else j.
struct ZbScale {
    unsigned dsc, ndm;
};

template <bool HIGH>
__device__ __forceinline__ ZbScale zb_q4k_scale(const uint4& hdr, int j) {
    const int s = 8 * j;  // j in 0..3
    const unsigned yb = hdr.y >> s, zb = hdr.z >> s, wb = hdr.w >> s;  // scales bytes j, 4 + j, 8 + j
    const unsigned sc = HIGH ? (wb & 0xFu) | ((yb >> 6 & 3u) << 4) : yb & 63u;
    const unsigned mn = HIGH ? (wb >> 4 & 0xFu) | ((zb >> 6 & 3u) << 4) : zb & 63u;
    const float d = zb_half_to_float((unsigned short)(hdr.x & 0xFFFFu));
    const float dmin = zb_half_to_float((unsigned short)(hdr.x >> 16));
    return {zb_half2_splat(d * (float)sc), zb_half2_splat(-dmin * (float)mn)};
}

// X f32 [rows][K] -> fp16 [rows][K] in the permuted order the fused kernel reads: per half superblock
// (128 weights, 256 bytes) 16 chunks of 16 bytes; chunk (i, c) holds, for e = 64*j + 16*(c&1) + 4*i
// with j = 2*h + (c>>1), the values x[e], x[e+2], x[e+1], x[e+3], x[e+32], x[e+34], x[e+33], x[e+35].
extern "C" __global__ void x_f32_to_f16_q4k_perm(const float* __restrict__ x, uint4* __restrict__ xp,
                                                 int rows, int K) {
    const long long n_chunks = (long long)rows * (K / 8);
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < n_chunks;
         idx += (long long)gridDim.x * blockDim.x) {
        const long long row = idx / (K / 8);
        const int q_in_row = (int)(idx % (K / 8));
        const int sb = q_in_row >> 5, h = (q_in_row >> 4) & 1, i = (q_in_row >> 2) & 3, c = q_in_row & 3;
        const int e = 64 * (2 * h + (c >> 1)) + 16 * (c & 1) + 4 * i;
        const float* src = x + row * K + sb * 256 + e;
        const float4 lo = *reinterpret_cast<const float4*>(src);
        const float4 hi = *reinterpret_cast<const float4*>(src + 32);
        uint4 out;
        out.x = zb_half2_pack(lo.x, lo.z);
        out.y = zb_half2_pack(lo.y, lo.w);
        out.z = zb_half2_pack(hi.x, hi.z);
        out.w = zb_half2_pack(hi.y, hi.w);
        xp[idx] = out;
    }
}

// Weight types (template parameter QT). Q5_K is Q4_K's block (same d, dmin, 6-bit scales/mins and
// nibble layout, the nibbles 32 bytes further on) plus qh[32] @16: the fifth bit of the weight at
// nibble byte (64-weight chunk j, position l) is bit 2j (low nibble) or 2j + 1 (high nibble) of qh[l].
#define ZB_Q4K 0
#define ZB_Q5K 1

template <int QT>
struct ZbQuant {
    static constexpr int BLOCK_BYTES = QT == ZB_Q5K ? 176 : 144;
    static constexpr int QS_OFFSET = QT == ZB_Q5K ? 48 : 16;  // nibbles
    static constexpr int QH_BYTES = QT == ZB_Q5K ? 32 : 0;   // fifth bits, @16
};

// Shared memory per pipeline stage: X tile [BN][256 B] (swizzled), nibbles [BM][64 B], headers [BM][16 B],
// and for Q5_K the superblock's qh [BM][32 B].
template <int WM, int WN, int WARPS_M, int WARPS_N, int QT = ZB_Q4K>
struct ZbTile {
    static constexpr int BM = 16 * WM * WARPS_M;
    static constexpr int BN = 8 * WN * WARPS_N;
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr int X_BYTES = BN * 256;
    static constexpr int Q_BYTES = BM * 64;
    static constexpr int H_BYTES = BM * 16;
    static constexpr int QH_BYTES = BM * ZbQuant<QT>::QH_BYTES;
    static constexpr int STAGE_BYTES = X_BYTES + Q_BYTES + H_BYTES + QH_BYTES;
};

// One pipeline stage's math: a half superblock (H = 0 or 1) of this warp's rows times its tokens.
// dsc/ndm: fp16x2 scale d*sc and negated min dmin*m of the lane's low- and high-nibble sub-blocks.
// Q5_K: qhv holds the qh bytes of the lane's 16 nibble bytes (same l), qh_shift the bit of its low-nibble
// sub-block (the high nibble's is the next): the fifth bit goes in as 16 ulp above each nibble's bias.
template <int WM, int WN, int QT>
__device__ __forceinline__ void zb_q4k_mma_half(float (&acc)[WM][WN][4], const uint4 (&nib)[WM][2],
                                                const uint4 (&qhv)[WM][2], int qh_shift,
                                                const unsigned (&dsc_lo)[WM][2], const unsigned (&ndm_lo)[WM][2],
                                                const unsigned (&dsc_hi)[WM][2], const unsigned (&ndm_hi)[WM][2],
                                                const unsigned char* x_even, const unsigned char* x_odd) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        unsigned a_lo[WM][4], a_hi[WM][4];
#pragma unroll
        for (int mt = 0; mt < WM; ++mt) {
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
                const unsigned v = i == 0 ? nib[mt][rr].x : i == 1 ? nib[mt][rr].y : i == 2 ? nib[mt][rr].z : nib[mt][rr].w;
                const unsigned v8 = v >> 8;  // bytes 1 and 3 moved under the masks of bytes 0 and 2
                // Q4_K: the bare biases. Q5_K: bias | fifth bit at 16 ulp (bit 4 under the 1024 bias, bit 8
                // under the 64 bias) for bytes 0/2 and, shifted by 8, for bytes 1/3.
                unsigned or_lo = ZB_BIAS_LOW, or_lo8 = ZB_BIAS_LOW, or_hi = ZB_BIAS_HIGH, or_hi8 = ZB_BIAS_HIGH;
                if constexpr (QT == ZB_Q5K) {
                    const unsigned q = i == 0 ? qhv[mt][rr].x : i == 1 ? qhv[mt][rr].y : i == 2 ? qhv[mt][rr].z : qhv[mt][rr].w;
                    const unsigned lo = q >> qh_shift, hi = q >> (qh_shift + 1);
                    or_lo |= (lo & 0x00010001u) << 4;
                    or_lo8 |= (lo >> 8 & 0x00010001u) << 4;
                    or_hi |= (hi & 0x00010001u) << 8;
                    or_hi8 |= (hi >> 8 & 0x00010001u) << 8;
                }
                // a0/a1 hold k-pairs (2c, 2c+1) of rows g / g+8; a2/a3 hold (2c+8, 2c+9).
                a_lo[mt][rr] = zb_dequant_pair(zb_and_or(v, 0x000F000Fu, or_lo), ZB_BIAS_LOW,
                                               dsc_lo[mt][rr], ndm_lo[mt][rr]);
                a_lo[mt][2 + rr] = zb_dequant_pair(zb_and_or(v8, 0x000F000Fu, or_lo8), ZB_BIAS_LOW,
                                                   dsc_lo[mt][rr], ndm_lo[mt][rr]);
                a_hi[mt][rr] = zb_dequant_pair(zb_and_or(v, 0x00F000F0u, or_hi), ZB_BIAS_HIGH,
                                               dsc_hi[mt][rr], ndm_hi[mt][rr]);
                a_hi[mt][2 + rr] = zb_dequant_pair(zb_and_or(v8, 0x00F000F0u, or_hi8), ZB_BIAS_HIGH,
                                                   dsc_hi[mt][rr], ndm_hi[mt][rr]);
            }
        }
        // Chunk (i, c) of token row r sits at ((i ^ (r & 1)) * 4 + c) * 16: x_even/x_odd fold the swizzle in.
        const unsigned char* x_base = ((i & 1) ? x_odd : x_even) + (i & 2) * 64;
#pragma unroll
        for (int nt = 0; nt < WN; ++nt) {
            const uint4 b = zb_lds128(x_base + nt * 8 * 256);
#pragma unroll
            for (int mt = 0; mt < WM; ++mt) {
                zb_mma16816(acc[mt][nt], a_lo[mt][0], a_lo[mt][1], a_lo[mt][2], a_lo[mt][3], b.x, b.y);
                zb_mma16816(acc[mt][nt], a_hi[mt][0], a_hi[mt][1], a_hi[mt][2], a_hi[mt][3], b.z, b.w);
            }
        }
    }
}

// Epilogues. STORE: y[out_row][m] = acc. SWIGLU_F16_PERM / SWIGLU_F16_GROUPED (grouped MoE gate+up): the
// block's first BM/2 weight rows are gate rows of `w`, the last BM/2 the same rows of `w_up`; it writes
// fp16(silu(gate) * up) for BM/2 output rows: PERM at h[out_row] in the permuted order
// x_f32_to_f16_q4k_perm produces (so a fused down GEMM reads it as its X); GROUPED in plain order at row
// expert*capacity + (the token's place in its expert's bucket) of [E][capacity][M] (a batched GEMM's
// padded input; capacity in n_rows, places past it dropped). COMBINE (grouped MoE down):
// y[t][m] += w(t, slot) * acc with the routing weight from the engine's table (f32 bits after the ids),
// by atomicAdd: a token's top_k slots sit in top_k different blocks, and a deterministic reduction would
// need the [T][top_k][M] intermediate this epilogue exists to avoid (f32 addition order varies run to run).
#define ZB_EPI_STORE 0
#define ZB_EPI_SWIGLU_F16_GROUPED 1
#define ZB_EPI_SWIGLU_F16_PERM 2
#define ZB_EPI_COMBINE 3

// Index (in halves) of element k of a row in the order x_f32_to_f16_q4k_perm writes (K a multiple of 256).
__device__ __forceinline__ unsigned zb_q4k_perm_index(unsigned k) {
    const unsigned sb = k >> 8, kk = k & 255u, j = kk >> 6, r = kk & 63u, hi = r >> 5, c_lo = (r >> 4) & 1u;
    const unsigned i = (r >> 2) & 3u, off = r & 3u;
    const unsigned chunk = sb * 32u + (j >> 1) * 16u + i * 4u + 2u * (j & 1u) + c_lo;
    return chunk * 8u + 4u * hi + (((off & 1u) << 1) | (off >> 1));
}

template <int WM, int WN, int WARPS_M, int WARPS_N, int STAGES, int MIN_BLOCKS, bool GROUPED, int EPI = ZB_EPI_STORE,
          int QT = ZB_Q4K>
__global__ void __launch_bounds__(32 * WARPS_M * WARPS_N, MIN_BLOCKS)
gemm_q4k_mma(const unsigned char* __restrict__ w,      // Q4_K rows; expert e at w + e * expert_bytes
             const uint4* __restrict__ xp,             // permuted fp16 activations, K/8 chunks per row
             float* __restrict__ y,                    // [out rows][M]
             int M, int K, int n_rows,                 // n_rows: tokens (dense) or unused (grouped)
             unsigned long long expert_bytes,
             const unsigned* __restrict__ tiles,       // grouped: (expert << 16 | tile) or ZB_INVALID
             const unsigned* __restrict__ offsets,     // grouped: [E + 1] bucket starts
             const unsigned* __restrict__ sorted_ids,  // grouped: token-slot ids t * top_k + slot
             int top_k, int x_per_slot,
             const unsigned char* __restrict__ w_up,   // SWIGLU: the up rows (same layout as w)
             const unsigned* __restrict__ routing,     // COMBINE: [T][routing_stride], weights at +top_k
             int routing_stride) {
    constexpr bool SWIGLU = EPI == ZB_EPI_SWIGLU_F16_GROUPED || EPI == ZB_EPI_SWIGLU_F16_PERM;
    static_assert(!SWIGLU || (WM * WARPS_M) % 2 == 0, "SwiGLU splits the block's rows into gate and up halves");
    static_assert(!SWIGLU || GROUPED, "the SwiGLU epilogue is for grouped MoE gate+up");
    using Tile = ZbTile<WM, WN, WARPS_M, WARPS_N, QT>;
    using Quant = ZbQuant<QT>;
    constexpr int BM = Tile::BM, BN = Tile::BN, THREADS = Tile::THREADS;
    constexpr int X_CHUNKS = BN * 16, Q_CHUNKS = BM * 4;
    constexpr int X_ITERS = (X_CHUNKS + THREADS - 1) / THREADS, Q_ITERS = (Q_CHUNKS + THREADS - 1) / THREADS;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ unsigned s_xoff[BN];  // first 16-byte chunk of the token's X row, ZB_INVALID for padding
    __shared__ int s_orow[BN];

    const int tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int wm = warp % WARPS_M, wn = warp / WARPS_M;
    const int g = lane >> 2, c = lane & 3;
    const int row0 = blockIdx.x * (SWIGLU ? BM / 2 : BM);  // first output row of the block

    unsigned long long w_base = 0;
    unsigned bucket_row0 = 0, place0 = 0;  // SWIGLU_F16_GROUPED: expert*capacity; the tile's first place
    if (GROUPED) {
        const unsigned tile = tiles[blockIdx.y];
        if (tile == ZB_INVALID) return;
        const unsigned expert = tile >> 16;
        const unsigned begin = offsets[expert] + (tile & 0xFFFFu) * BN;
        bucket_row0 = expert * (unsigned)n_rows;
        place0 = (tile & 0xFFFFu) * BN;
        const unsigned end = offsets[expert + 1];
        w_base = expert * expert_bytes;
        for (int r = tid; r < BN; r += THREADS) {
            const unsigned pos = begin + r;
            const unsigned sid = pos < end ? sorted_ids[pos] : ZB_INVALID;
            s_orow[r] = sid == ZB_INVALID ? -1 : (int)sid;
            s_xoff[r] = sid == ZB_INVALID ? ZB_INVALID : (x_per_slot ? sid : sid / top_k) * (unsigned)(K / 8);
        }
    } else {
        for (int r = tid; r < BN; r += THREADS) {
            const int t = blockIdx.y * BN + r;
            s_orow[r] = t < n_rows ? t : -1;
            s_xoff[r] = t < n_rows ? (unsigned)t * (unsigned)(K / 8) : ZB_INVALID;
        }
    }
    __syncthreads();

    const int row_bytes = (K / 256) * Quant::BLOCK_BYTES;
    const int n_sb = K / 256;
    const unsigned smem_base = zb_smem_addr(smem);

    // Per-thread copy assignments, fixed for the whole K loop (no index math inside it).
    // Weight row of the block's local row r (rows past M load a valid row; never stored).
    auto w_row = [&](int r) -> const unsigned char* {
        const bool up = SWIGLU && r >= BM / 2;
        const int row = min(row0 + (up ? r - BM / 2 : r), M - 1);
        return (up ? w_up : w) + w_base + (unsigned long long)row * row_bytes;
    };
    const unsigned char* q_src[Q_ITERS];
    unsigned q_dst[Q_ITERS];
#pragma unroll
    for (int it = 0; it < Q_ITERS; ++it) {
        const int idx = min(tid + it * THREADS, Q_CHUNKS - 1);  // surplus threads repeat the last chunk
        const int r = idx >> 2, q = idx & 3;
        q_src[it] = w_row(r) + Quant::QS_OFFSET + q * 16;
        q_dst[it] = Tile::X_BYTES + r * 64 + q * 16;
    }
    const unsigned char* h_src = w_row(min(tid, BM - 1));

    // Stage s holds half superblock `step` (= 2 * sb + h) and the superblock's 16-byte headers.
    // X copies: thread tid moves chunk q = tid % 16 of rows tid / 16 + it * THREADS / 16; the row
    // parity (hence the swizzle) is the same for all its rows because THREADS / 16 is even.
    static_assert(THREADS % 32 == 0, "row parity of a thread's X chunks must not change across iterations");
    const int x_q = tid & 15, x_r0 = tid >> 4;
    const unsigned x_dst0 = x_r0 * 256 + ((x_q ^ ((x_r0 & 1) << 2)) << 4);
    auto load_stage = [&](int stage, int step) {
        const unsigned xs = smem_base + stage * Tile::STAGE_BYTES;
        const int sb = step >> 1, h = step & 1;
#pragma unroll
        for (int it = 0; it < X_ITERS; ++it) {
            const int r = x_r0 + it * (THREADS / 16);
            if (X_CHUNKS % THREADS == 0 || r < BN) {
                const unsigned xoff = s_xoff[r];
                const bool valid = xoff != ZB_INVALID;
                zb_cp_async16(xs + x_dst0 + it * (THREADS / 16) * 256, xp + (valid ? xoff + step * 16 + x_q : 0u),
                              valid ? 16u : 0u);
            }
        }
        const int w_off = sb * Quant::BLOCK_BYTES + h * 64;
#pragma unroll
        for (int it = 0; it < Q_ITERS; ++it) zb_cp_async16(xs + q_dst[it], q_src[it] + w_off, 16u);
        if (tid < BM) {
            const unsigned hs_dst = xs + Tile::X_BYTES + Tile::Q_BYTES;
            zb_cp_async16(hs_dst + tid * 16, h_src + sb * Quant::BLOCK_BYTES, 16u);
            if constexpr (QT == ZB_Q5K) {  // the superblock's qh (both halves read it)
                zb_cp_async16(hs_dst + Tile::H_BYTES + tid * 32, h_src + sb * Quant::BLOCK_BYTES + 16, 16u);
                zb_cp_async16(hs_dst + Tile::H_BYTES + tid * 32 + 16, h_src + sb * Quant::BLOCK_BYTES + 32, 16u);
            }
        }
    };

    float acc[WM][WN][4];
#pragma unroll
    for (int mt = 0; mt < WM; ++mt)
#pragma unroll
        for (int nt = 0; nt < WN; ++nt)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[mt][nt][v] = 0.f;

    const int n_steps = 2 * n_sb;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < n_steps) load_stage(s, s);
        zb_cp_async_commit();
    }

    // Lane-constant shared-memory offsets: this lane's token row in the X tile and its weight rows.
    const int r_x = wn * 8 * WN + g;
    const unsigned x_even = r_x * 256 + c * 16 + (g & 1) * 64;
    const unsigned x_odd = r_x * 256 + c * 16 + 64 - (g & 1) * 64;
    int stage = 0;
    for (int sb = 0; sb < n_sb; ++sb) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // unrolled: h is a constant in each copy
            const int step = 2 * sb + h;
            zb_cp_async_wait<STAGES - 2>();
            __syncthreads();
            {
                const int next = step + STAGES - 1;
                const int next_stage = stage == 0 ? STAGES - 1 : stage - 1;  // (step + STAGES - 1) % STAGES
                if (next < n_steps) load_stage(next_stage, next);
                zb_cp_async_commit();
            }
            const unsigned char* xs = smem + stage * Tile::STAGE_BYTES;
            const unsigned char* qs = xs + Tile::X_BYTES;
            const unsigned char* hs = qs + Tile::Q_BYTES;
            const unsigned char* qhs = hs + Tile::H_BYTES;  // Q5_K only
            // This lane's nibbles (16 bytes per row) and its two sub-blocks' scales: low and high nibbles
            // of chunk 2h + (c >> 1), i.e. sub-blocks j and j + 1 with j = 2 * (c >> 1) (+ 4 when h = 1).
            uint4 nib[WM][2], qhv[WM][2];
            unsigned dsc_lo[WM][2], ndm_lo[WM][2], dsc_hi[WM][2], ndm_hi[WM][2];
            const int j = 2 * (c >> 1);
#pragma unroll
            for (int mt = 0; mt < WM; ++mt)
#pragma unroll
                for (int rr = 0; rr < 2; ++rr) {
                    const int r = wm * 16 * WM + mt * 16 + g + 8 * rr;
                    nib[mt][rr] = zb_lds128(qs + r * 64 + c * 16);
                    // the qh bytes of the same positions l = 16*(c & 1) + 0..15
                    if constexpr (QT == ZB_Q5K) qhv[mt][rr] = zb_lds128(qhs + r * 32 + (c & 1) * 16);
                    else qhv[mt][rr] = make_uint4(0u, 0u, 0u, 0u);
                    const uint4 hdr = zb_lds128(hs + r * 16);
                    const ZbScale lo = h ? zb_q4k_scale<true>(hdr, j) : zb_q4k_scale<false>(hdr, j);
                    const ZbScale hi = h ? zb_q4k_scale<true>(hdr, j + 1) : zb_q4k_scale<false>(hdr, j + 1);
                    dsc_lo[mt][rr] = lo.dsc, ndm_lo[mt][rr] = lo.ndm;
                    dsc_hi[mt][rr] = hi.dsc, ndm_hi[mt][rr] = hi.ndm;
                }
            // The low nibbles' sub-block is 2 * (2h + (c >> 1)): its qh bit; the high nibbles' is the next.
            zb_q4k_mma_half<WM, WN, QT>(acc, nib, qhv, 4 * h + 2 * (c >> 1), dsc_lo, ndm_lo, dsc_hi, ndm_hi,
                                        xs + x_even, xs + x_odd);
            stage = stage == STAGES - 1 ? 0 : stage + 1;
        }
    }
    zb_cp_async_wait<0>();

    // C fragment: c0,c1 = (row g, tokens 2c, 2c+1); c2,c3 = (row g+8, tokens 2c, 2c+1).
    if constexpr (SWIGLU) {
        // Gate and up rows of one output row sit in different warps: meet in shared memory (the pipeline's).
        constexpr int CS = BN + 1;  // padded row stride
        static_assert(BM * CS * 4 <= STAGES * Tile::STAGE_BYTES, "SwiGLU staging must fit the pipeline's shared memory");
        float* cs = reinterpret_cast<float*>(smem);
        __syncthreads();  // every warp is done with the last stage
#pragma unroll
        for (int mt = 0; mt < WM; ++mt)
#pragma unroll
            for (int nt = 0; nt < WN; ++nt)
#pragma unroll
                for (int v = 0; v < 4; ++v)
                    cs[(wm * 16 * WM + mt * 16 + g + (v >> 1) * 8) * CS + wn * 8 * WN + nt * 8 + 2 * c + (v & 1)] =
                        acc[mt][nt][v];
        __syncthreads();
        unsigned short* h = reinterpret_cast<unsigned short*>(y);
        for (int idx = tid; idx < (BM / 2) * BN; idx += THREADS) {
            const int n = idx / (BM / 2), o = idx - n * (BM / 2), row = row0 + o, orow = s_orow[n];
            if (row >= M || orow < 0) continue;
            const float gate = cs[o * CS + n], up = cs[(o + BM / 2) * CS + n];
            const float value = gate / (1.0f + expf(-gate)) * up;
            unsigned short bits;
            asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(value));
            const unsigned col = EPI == ZB_EPI_SWIGLU_F16_PERM ? zb_q4k_perm_index((unsigned)row) : (unsigned)row;
            if constexpr (EPI == ZB_EPI_SWIGLU_F16_GROUPED) {
                if (place0 + n >= (unsigned)n_rows) continue;  // past the capacity: dropped (the host sizes it)
                h[(long long)(bucket_row0 + place0 + n) * M + col] = bits;
            } else {
                h[(long long)orow * M + col] = bits;
            }
        }
    } else {
#pragma unroll
        for (int mt = 0; mt < WM; ++mt) {
            const int r_lo = row0 + wm * 16 * WM + mt * 16 + g;
#pragma unroll
            for (int nt = 0; nt < WN; ++nt) {
#pragma unroll
                for (int v = 0; v < 4; ++v) {
                    const int row = r_lo + (v >> 1) * 8;
                    const int orow = s_orow[wn * 8 * WN + nt * 8 + 2 * c + (v & 1)];
                    if (row >= M || orow < 0) continue;
                    if constexpr (EPI == ZB_EPI_COMBINE) {
                        const int t = orow / top_k, slot = orow - t * top_k;
                        const float weight = __uint_as_float(routing[(long long)t * routing_stride + top_k + slot]);
                        atomicAdd(y + (long long)t * M + row, weight * acc[mt][nt][v]);
                    } else {
                        y[(long long)orow * M + row] = acc[mt][nt][v];
                    }
                }
            }
        }
    }
}

#ifdef ZINCBENCH_COMPILE_CHECK
// Ahead-of-time compile checks (nvcc, no GPU) instantiate representative tile shapes and every epilogue;
// at run time NVRTC instantiates the shapes an experiment declares through name expressions.
#define ZB_INSTANTIATE(WM, WN, WARPS_M, WARPS_N, STAGES, GROUPED, EPI, QT)                                       \
    template __global__ void gemm_q4k_mma<WM, WN, WARPS_M, WARPS_N, STAGES, 1, GROUPED, EPI, QT>(                 \
        const unsigned char*, const uint4*, float*, int, int, int, unsigned long long, const unsigned*,           \
        const unsigned*, const unsigned*, int, int, const unsigned char*, const unsigned*, int);
ZB_INSTANTIATE(1, 2, 4, 1, 3, true, ZB_EPI_STORE, ZB_Q4K)
ZB_INSTANTIATE(2, 8, 4, 2, 2, false, ZB_EPI_STORE, ZB_Q4K)
ZB_INSTANTIATE(1, 4, 4, 1, 4, true, ZB_EPI_SWIGLU_F16_GROUPED, ZB_Q4K)
ZB_INSTANTIATE(1, 8, 8, 1, 2, true, ZB_EPI_SWIGLU_F16_PERM, ZB_Q4K)
ZB_INSTANTIATE(1, 2, 4, 1, 3, true, ZB_EPI_COMBINE, ZB_Q4K)
ZB_INSTANTIATE(1, 8, 8, 1, 2, true, ZB_EPI_COMBINE, ZB_Q5K)
ZB_INSTANTIATE(2, 8, 4, 2, 2, false, ZB_EPI_STORE, ZB_Q5K)
#endif
