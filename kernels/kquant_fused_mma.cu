// Fused-dequant K-quant (Q4_K, Q5_K, Q6_K) Tensor-core GEMM (zincbench candidate for the T1 and T2 gates).
//
//   Y[out_row(n)][m] = sum_k W[m][k] * X[x_row(n)][k]      W: Q4_K, Q5_K or Q6_K blocks, X: fp16, Y: f32
//
// Dense mode: n is a token, x_row = out_row = n.  Grouped (MoE) mode: a block works on one tile of
// one expert's token bucket (built on the GPU by moe_routing.cu); x_row is the token (or the
// token-slot for per-slot activations) and out_row the token-slot, so Y is [T][top_k][M].
// What a block does with its accumulators is the epilogue (EPI, ZB_EPI_* below): store Y as above, SwiGLU
// of gate and up rows to fp16 (the MoE gate+up GEMM), or the routing-weighted combine into the hidden
// state (the MoE down GEMM). Format policy and epilogue are independent template parameters.
//
// Design (why it can beat the matvec and the dequant->fp16->cuBLAS round trip):
// - every weight byte is read from DRAM once per (row tile, token tile) and dequantized straight
//   into mma.sync A fragments in registers: no fp16 weight scratch, no shared-memory round trip
//   of dequantized weights;
// - mma.sync.m16n8k16 puts weight rows on M and tokens on N, so an 8-token tile is a full MMA:
//   skinny expert buckets (N_e = 8..64) stay on Tensor cores;
// - the k order inside one 128-weight half superblock is permuted so that one u32 of quant bytes
//   yields four fp16x2 A registers with shifts and LOP3s (the exponent trick: 1024 + q or 64 + q is
//   exact in fp16, subtracting the bias is exact, then one fma applies the scale and the offset).
//   X is stored in the same permuted order by x_f32_to_f16_kquant_perm, so each B fragment pair is one
//   16-byte load; the permutation is the same for every weight format;
// - the weight format is a policy (ZbQ4K, ZbQ5K, ZbQ6K, ZbQ6KHalf): how a pipeline stage of weight rows is copied to
//   shared memory and how one lane decodes its slice of a half superblock into A fragments. The
//   pipeline, the X tile, the MMA loop and the epilogues are shared;
// - cp.async multi-stage pipeline for both the weight tile and the X tile; the X tile is XOR-swizzled
//   on row parity so the 16-byte fragment loads are bank-conflict free. The wgmma path's stages pass through
//   async barriers (ZbRing), not a block barrier per stage.
// Portable to sm_80+ (sm_89, sm_90, sm_120): plain PTX, no CUDA headers (only ours: zb_half.cuh, zb_pdl.cuh,
// zb_tma.cuh, zb_wgmma.cuh, zb_xperm.cuh).
// On sm_90 a Hopper instantiation (template parameter WGMMA, compiled for sm_90a) keeps the weight decode and
// replaces the mma.sync loop with warpgroup wgmma reading X from shared memory (see "The Hopper path" below).

#include "zb_half.cuh"
#include "zb_pdl.cuh"
#include "zb_tma.cuh"
#include "zb_wgmma.cuh"
#include "zb_xperm.cuh"

#define ZB_INVALID 0xFFFFFFFFu

__device__ __forceinline__ unsigned zb_smem_addr(const void* p) {
    unsigned long long a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return (unsigned)a;
}

__device__ __forceinline__ void zb_cp_async16(unsigned dst, const void* src, unsigned src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes));
}

// Exact-size copies for the one chunk whose 16-byte window would pass the end of the weights (the Q6_K Loader).
__device__ __forceinline__ void zb_cp_async8(unsigned dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" :: "r"(dst), "l"(src));
}

__device__ __forceinline__ void zb_cp_async4(unsigned dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(dst), "l"(src));
}

// The n bytes (n even, 2..14) at the 16-byte aligned global address src into shared memory at dst (16-byte
// aligned), touching no byte at or past src + n: 8- and 4-byte cp.asyncs of exact size, then the last two
// bytes (n % 4 == 2) by a plain load and store, since cp.async has no 2-byte form. The plain store is
// ordered before the stage's readers by the __syncthreads that follows the cp.async wait (mma.sync path); on the
// wgmma path (RELEASE) by a fence before the thread's arrive on the stage's full barrier (ZbRing::commit), an
// arrive-on of its cp.asyncs, which orders those but not a plain store.
template <bool RELEASE>
__device__ __forceinline__ void zb_copy_exact(unsigned dst, const unsigned char* src, unsigned n) {
    unsigned off = 0u;
    if (n & 8u) {
        zb_cp_async8(dst, src);
        off = 8u;
    }
    if (n & 4u) {
        zb_cp_async4(dst + off, src + off);
        off += 4u;
    }
    if (n & 2u) {
        const unsigned short v = *reinterpret_cast<const unsigned short*>(src + off);
        asm volatile("st.shared.u16 [%0], %1;\n" :: "r"(dst + off), "h"(v) : "memory");
        if constexpr (RELEASE) asm volatile("fence.acq_rel.cta;\n" ::: "memory");
    }
}

__device__ __forceinline__ void zb_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// ---- The wgmma path's stage ring: async barriers (mbarrier, sm_80+) in place of a block barrier per stage ----------
// Stage buffer i has two barriers: full[i] completes a phase when every thread's copies into it have landed, empty[i]
// when every thread is done reading it (its wgmmas retired). A thread arrives on each once per phase and waits for
// that phase before it arrives again (the pattern compute-sanitizer's synccheck holds mbarriers to). A thread that has written a stage waits only for the data
// of the stage it opens next and for the release of the buffer it fills next, not for the slowest warp at every stage.
// The three cursors (write, read, free) step through the buffers in the same order, one use per stage; every thread
// runs the same sequence, so each one's cursors match the others'. They persist across a stream-K block's units.
__device__ __forceinline__ void zb_mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// A plain arrive (release: this thread's earlier shared-memory reads and writes come before it).
__device__ __forceinline__ void zb_mbar_arrive(unsigned bar) {
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar) : "memory");
}

// This thread's arrive, made once its cp.asyncs so far have landed (noinc: it is one of the arrivals the barrier
// expects).
__device__ __forceinline__ void zb_mbar_arrive_cp_async(unsigned bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// Wait until the barrier's phase of the given parity has completed (acquire).
__device__ __forceinline__ void zb_mbar_wait(unsigned bar, unsigned parity) {
    asm volatile(
        "{\n.reg .pred done;\nZB_MBAR_WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra ZB_MBAR_WAIT;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}

template <int STAGES>
struct ZbRing {
    struct Cursor {  // a buffer and the parity of its current use
        int index = 0;
        unsigned phase = 0u;
        __device__ __forceinline__ void next() {
            if (++index == STAGES) index = 0, phase ^= 1u;
        }
    };
    unsigned bars;  // shared address of full[0 .. STAGES - 1], then empty[0 .. STAGES - 1]
    Cursor write, read, free;

    __device__ __forceinline__ unsigned full(int i) const { return bars + 8u * i; }
    __device__ __forceinline__ unsigned empty(int i) const { return bars + 8u * (STAGES + i); }
    // One thread, before the block's first barrier: a full barrier expects full_count arrivals (every thread's
    // cp.asyncs, or the one thread that issues a stage's TMA boxes), an empty barrier every thread.
    __device__ __forceinline__ void init(int full_count, int threads) const {
        for (int i = 0; i < STAGES; ++i) zb_mbar_init(full(i), full_count), zb_mbar_init(empty(i), threads);
    }
    // Before writing buffer write.index: its previous use has been released (a buffer's first use passes at once:
    // parity 1 names the phase before a fresh barrier's first).
    __device__ __forceinline__ void acquire() const { zb_mbar_wait(empty(write.index), write.phase ^ 1u); }
    // After this thread's copies into it: the phase completes once every thread's copies have landed.
    __device__ __forceinline__ void commit() {
        zb_mbar_arrive_cp_async(full(write.index));
        write.next();
    }
    // After this thread's plain shared-memory writes into it (the arrive releases them to the buffer's readers).
    __device__ __forceinline__ void publish() {
        zb_mbar_arrive(full(write.index));
        write.next();
    }
    // Before reading buffer read.index: every copy into it has landed. The fence orders X's cp.asyncs, written in
    // the generic proxy, before this thread's wgmmas read X through the async proxy (X by TMA is already async).
    template <bool GENERIC_X>
    __device__ __forceinline__ void wait_read() const {
        zb_mbar_wait(full(read.index), read.phase);
        if constexpr (GENERIC_X) zb_fence_proxy_async();
    }
    // This thread is done with buffer free.index (its wgmmas on it retired).
    __device__ __forceinline__ void release() {
        zb_mbar_arrive(empty(free.index));
        free.next();
    }
};

template <int N>
__device__ __forceinline__ void zb_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

// 16-byte shared-memory load through a plain pointer: the compiler folds constant offsets into the
// LDS instruction (an inline-asm address would cost an integer add per load).
__device__ __forceinline__ uint4 zb_lds128(const unsigned char* p) { return *reinterpret_cast<const uint4*>(p); }

// {v, v} as fp16x2, round to nearest even.
__device__ __forceinline__ unsigned zb_half2_splat(float v) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(v));
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


// {(v & mask) | bias} where v's selected bits are a quant's low bits and `high` supplies its top bits
// under `high_mask`: two LOP3s.
__device__ __forceinline__ unsigned zb_merge_bits(unsigned v, unsigned mask, unsigned high, unsigned high_mask,
                                                  unsigned bias) {
    return zb_and_or(high, high_mask, zb_and_or(v, mask, bias));
}

__device__ __forceinline__ unsigned zb_funnel_right(unsigned lo, unsigned hi, unsigned shift) {
    unsigned r;
    asm("shf.r.clamp.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(shift));
    return r;
}

// 16 bytes from a shared-memory address that is only 2-byte aligned (Q6_K blocks are 210 bytes):
// five aligned words and a funnel shift by 0 or 16 bits.
__device__ __forceinline__ uint4 zb_lds128_unaligned(const unsigned char* p) {
    const unsigned* w = reinterpret_cast<const unsigned*>(reinterpret_cast<unsigned long long>(p) & ~3ull);
    const unsigned shift = (unsigned)(reinterpret_cast<unsigned long long>(p) & 3ull) * 8u;
    const unsigned w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4];
    return make_uint4(zb_funnel_right(w0, w1, shift), zb_funnel_right(w1, w2, shift), zb_funnel_right(w2, w3, shift),
                      zb_funnel_right(w3, w4, shift));
}

__device__ __forceinline__ unsigned zb_word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The block's BM weight rows in global memory: local row r is row row0 + r of w, except that with a
// gate/up split (the SwiGLU epilogues: split = BM/2) rows r >= split are rows row0 + r - split of w_up.
// Rows past M read row M - 1 (loaded, never stored).
struct ZbRows {
    const unsigned char* w;
    const unsigned char* w_up;
    int row0, M, row_bytes, split;

    __device__ __forceinline__ const unsigned char* at(int r) const {
        const bool up = r >= split;
        return (up ? w_up : w) + (unsigned long long)min(row0 + (up ? r - split : r), M - 1) * row_bytes;
    }

    // Local row r reads row M - 1, the last of its matrix: no byte of the weights need follow its last block.
    __device__ __forceinline__ bool last_row(int r) const { return row0 + (r >= split ? r - split : r) >= M - 1; }
};

// ---- Weight-format policies --------------------------------------------------------------------
// A policy Q says, for one weight format:
//   BLOCK_BYTES         superblock size in the row (the GGUF block's, or a repacked one's);
//   HALVES              half superblocks (128 weights) per pipeline stage (1 or 2);
//   ROW_STAGE_BYTES     shared memory per weight row per stage (at most);
//   Loader<BM, THREADS> per-thread cp.async assignments of a stage's BM weight rows (ZbRows; fixed for the
//                       K loop);
//   Lane                one lane's registers for one weight row of one half superblock;
//   row_place(rows, r)  a constant of local row r for the K loop that load takes (Q6_K: where the row sits in the
//                       stage, and the misalignment of its start in global memory);
//   load<BM>(ws, r, c, h, sb, place)  fill a Lane from the stage's weight area ws (row r, its row_place, MMA
//                       lane column c = lane & 3, half h of superblock sb; h is a constant after unrolling);
//   decode(lane, i, lo, hi) the A registers of k step i (0..3): lo[0] = k pair (2c, 2c+1), lo[1] =
//                       (2c+8, 2c+9) of the first MMA, hi[] those of the second.
//   TMA_BOXES, tma_box(i) a stage's weight area as TMA boxes of BM rows (ZbTmaBox; none: the format is read by
//                       cp.async only), each the same bytes in the same place as Loader's copies.
// In every format lane c at step i covers weights e + {0, 2} (lo[0]) and e + {1, 3} (lo[1]), hi[] the
// same at e + 32, where e = 64*j + 16*(c&1) + 4*i and j = 2*h + (c>>1) is the 64-weight chunk: the
// order x_f32_to_f16_kquant_perm writes X in.

// Box i of a stage's weights: `width` bytes of each of BM rows, from byte offset + h * half_step of the row's
// superblock (half h of the stage), into the stage's weight area at BM * column (a [BM][width] region). The host
// encodes one tensor map per box (its width; zincbench.ops.fused.WeightPolicy.tma_widths).
struct ZbTmaBox {
    int offset, half_step, width, column;
};

__device__ __forceinline__ unsigned zb_prmt(unsigned a, unsigned b, unsigned selector) {
    unsigned r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(selector));
    return r;
}

// {lo, lo} and {hi, hi} of an fp16x2.
__device__ __forceinline__ unsigned zb_half2_lo(unsigned v) { return zb_prmt(v, 0u, 0x1010u); }
__device__ __forceinline__ unsigned zb_half2_hi(unsigned v) { return zb_prmt(v, 0u, 0x3232u); }

// Q4_K/Q5_K 6-bit scale (or min) codes of sub-blocks 4..7, one per byte, from the block header's scales bytes
// 8-11 (low four bits: `low`, already shifted to bits 0-3 of each byte) and bytes 0-3 (or 4-7: `top`, whose bits
// 6-7 are the codes' bits 4-5).
__device__ __forceinline__ unsigned zb_q4k_high_codes(unsigned low, unsigned top) {
    return (low & 0x0F0F0F0Fu) | (top >> 2 & 0x30303030u);
}

// Q4_K/Q5_K scales of one lane's two sub-blocks (codes bytes j and j + 1 of sc and mn, picked by `pick`, a PRMT
// selector that also writes 0x64 above each code: the fp16 1024 + code). Both products are exact fp16 x small
// integer, so one mul.rn rounds them exactly as the f32 product converted to fp16 would.
struct ZbScale {
    unsigned dsc_lo, ndm_lo, dsc_hi, ndm_hi;  // d*sc and -(dmin*m) of sub-blocks j (lo) and j + 1 (hi), as splats
};

// (1024 + code pair) -> code pair * scale2: an exact subtraction, then one rounding.
__device__ __forceinline__ unsigned zb_scale_codes(unsigned biased_codes, unsigned scale2) {
    unsigned q, r;
    asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(q) : "r"(biased_codes), "r"(ZB_BIAS_LOW));
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(q), "r"(scale2));
    return r;
}

__device__ __forceinline__ ZbScale zb_q4k_scales(unsigned d_dmin, unsigned sc, unsigned mn, unsigned pick) {
    const unsigned dsc = zb_scale_codes(zb_prmt(sc, 0x64646464u, pick), zb_half2_lo(d_dmin));
    const unsigned ndm = zb_scale_codes(zb_prmt(mn, 0x64646464u, pick), zb_half2_hi(d_dmin) ^ 0x80008000u);
    return {zb_half2_lo(dsc), zb_half2_lo(ndm), zb_half2_hi(dsc), zb_half2_hi(ndm)};
}

// A stage's CHUNKS 16-byte copies dealt out to a block's THREADS threads: thread tid copies chunk tid + it * THREADS in
// pass it. Where THREADS does not divide CHUNKS the last pass is partial, and a thread past the end copies nothing: a
// second copy of a chunk, even of the same bytes, races with its owner's (compute-sanitizer racecheck reports it).
template <int CHUNKS, int THREADS>
struct ZbChunkPasses {
    static constexpr int ITERS = (CHUNKS + THREADS - 1) / THREADS;
    bool in_last;  // this thread has a chunk in the last pass

    __device__ __forceinline__ explicit ZbChunkPasses(int tid) : in_last(tid + (ITERS - 1) * THREADS < CHUNKS) {}

    // The chunk of pass it, clamped: a thread past the end gets a valid address it never copies from
    __device__ __forceinline__ static int chunk(int tid, int it) { return min(tid + it * THREADS, CHUNKS - 1); }
    __device__ __forceinline__ bool copies(int it) const { return CHUNKS % THREADS == 0 || it < ITERS - 1 || in_last; }
};

// std::conditional without the standard headers (NVRTC compiles this file alone)
template <bool B, class T, class F>
struct ZbIf {
    using type = T;
};
template <class T, class F>
struct ZbIf<false, T, F> {
    using type = F;
};

// A stage's copies of CHUNKS_PER_ROW contiguous 16-byte chunks of each of BM rows, to [BM][CHUNKS_PER_ROW * 16]:
// issue(ws, offset) copies the chunks that start `offset` bytes into each row (the formats whose stage is one piece
// of a row: ZbQ6KR's half blocks, ZbNibbleFormat's WHOLE blocks).
template <int BM, int THREADS, int CHUNKS_PER_ROW>
struct ZbRowChunks {
    using Passes = ZbChunkPasses<BM * CHUNKS_PER_ROW, THREADS>;
    static constexpr int ITERS = Passes::ITERS;
    Passes passes;
    const unsigned char* src[ITERS];
    unsigned dst[ITERS];

    __device__ __forceinline__ ZbRowChunks(const ZbRows& rows, int tid) : passes(tid) {
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            const int idx = Passes::chunk(tid, it);
            const int r = idx / CHUNKS_PER_ROW, q = idx - r * CHUNKS_PER_ROW;
            src[it] = rows.at(r) + 16 * q;
            dst[it] = (r * CHUNKS_PER_ROW + q) * 16;
        }
    }

    __device__ __forceinline__ void issue(unsigned ws, int offset) const {
#pragma unroll
        for (int it = 0; it < ITERS; ++it)
            if (passes.copies(it)) zb_cp_async16(ws + dst[it], src[it] + offset, 16u);
    }
};

// Q4_K and Q5_K (144- and 176-byte blocks, 16-byte aligned; the same 16-byte header d, dmin, 6-bit
// scale/min codes): a stage is one half superblock, per row its 64 nibble bytes ([BM][64], lane c reads
// bytes 16c..16c+15: conflict-free), the block header ([BM][16]) and, for Q5_K, the 32 qh bytes
// ([BM][32]; bit 2j of qh[l] is the fifth bit of the low nibble of chunk j, bit 2j + 1 of the high one).
// WHOLE (ZbQ4KWhole, ZbQ5KWhole): a stage is a whole superblock, each row's block as it is ([BM][BLOCK_BYTES], one TMA
// box or BLOCK_BYTES / 16 copies). A half stage reads a block's header twice and its bytes in 16- and 64-byte pieces
// that straddle 32-byte sectors: 7 sectors (224 bytes) a Q4_K block on average from L2, against 5 whole.
template <int BLOCK_BYTES_, int QS_OFFSET, bool FIFTH_BIT, bool WHOLE_ = false>
struct ZbNibbleFormat {
    static constexpr bool WHOLE = WHOLE_;
    static constexpr int BLOCK_BYTES = BLOCK_BYTES_;
    static constexpr int HALVES = WHOLE ? 2 : 1;
    static constexpr int ROW_STAGE_BYTES = WHOLE ? BLOCK_BYTES : 80 + (FIFTH_BIT ? 32 : 0);
    // Half stages: the half's nibbles ([BM][64]), the header ([BM][16]) and Q5_K's qh ([BM][32]): Loader's regions
    static constexpr int TMA_BOXES = WHOLE ? 1 : FIFTH_BIT ? 3 : 2;
    __host__ __device__ static constexpr ZbTmaBox tma_box(int i) {
        return WHOLE    ? ZbTmaBox{0, 0, BLOCK_BYTES, 0}
               : i == 0 ? ZbTmaBox{QS_OFFSET, 64, 64, 0}
               : i == 1 ? ZbTmaBox{0, 0, 16, 64}
                        : ZbTmaBox{16, 0, 32, 80};
    }

    // WHOLE: each row's block; stage `step` is superblock `step`
    template <int BM, int THREADS>
    struct WholeLoader {
        ZbRowChunks<BM, THREADS, BLOCK_BYTES / 16> chunks;
        __device__ __forceinline__ WholeLoader(const ZbRows& rows, int tid) : chunks(rows, tid) {}
        __device__ __forceinline__ void issue(unsigned ws, int step) const { chunks.issue(ws, step * BLOCK_BYTES); }
    };

    template <int BM, int THREADS>
    struct HalfLoader {
        static constexpr int CHUNKS = BM * 4, QH_CHUNKS = FIFTH_BIT ? BM * 2 : 0;
        using Passes = ZbChunkPasses<CHUNKS, THREADS>;
        using QhPasses = ZbChunkPasses<QH_CHUNKS, THREADS>;
        static constexpr int ITERS = Passes::ITERS, QH_ITERS = QhPasses::ITERS;
        Passes passes;
        QhPasses qh_passes;
        static_assert(BM <= THREADS, "one thread per row copies the block headers");
        const unsigned char* src[ITERS];
        unsigned dst[ITERS];
        const unsigned char* header_src;
        unsigned header_dst;
        bool copies_header;
        const unsigned char* qh_src[QH_ITERS > 0 ? QH_ITERS : 1];
        unsigned qh_dst[QH_ITERS > 0 ? QH_ITERS : 1];

        __device__ __forceinline__ HalfLoader(const ZbRows& rows, int tid) : passes(tid), qh_passes(tid) {
#pragma unroll
            for (int it = 0; it < ITERS; ++it) {
                const int idx = Passes::chunk(tid, it);
                const int r = idx >> 2, q = idx & 3;
                src[it] = rows.at(r) + QS_OFFSET + q * 16;
                dst[it] = r * 64 + q * 16;
            }
            header_src = rows.at(min(tid, BM - 1));
            header_dst = BM * 64 + tid * 16;
            copies_header = tid < BM;
#pragma unroll
            for (int it = 0; it < QH_ITERS; ++it) {
                const int idx = QhPasses::chunk(tid, it);
                const int r = idx >> 1, q = idx & 1;
                qh_src[it] = rows.at(r) + 16 + q * 16;
                qh_dst[it] = BM * 80 + r * 32 + q * 16;
            }
        }

        // Stage `step` = half superblock 2 * sb + h, into the stage's weight area at shared address ws.
        __device__ __forceinline__ void issue(unsigned ws, int step) const {
            const int sb = step >> 1, h = step & 1;
            const int w_off = sb * BLOCK_BYTES + h * 64;
#pragma unroll
            for (int it = 0; it < ITERS; ++it)
                if (passes.copies(it)) zb_cp_async16(ws + dst[it], src[it] + w_off, 16u);
            if (copies_header) zb_cp_async16(ws + header_dst, header_src + sb * BLOCK_BYTES, 16u);
#pragma unroll
            for (int it = 0; it < QH_ITERS; ++it)
                if (qh_passes.copies(it)) zb_cp_async16(ws + qh_dst[it], qh_src[it] + sb * BLOCK_BYTES, 16u);
        }
    };

    template <int BM, int THREADS>
    using Loader = typename ZbIf<WHOLE, WholeLoader<BM, THREADS>, HalfLoader<BM, THREADS>>::type;

    struct Lane {
        uint4 nib;  // bytes 16c..16c+15 of the half's 64 nibble bytes
        uint4 qh;   // Q5_K: qh[16(c&1) ..] shifted right by 2j (chunk j = 2h + (c>>1)): fifth bits at bits 0 and 1
        unsigned dsc_lo, ndm_lo, dsc_hi, ndm_hi;  // low nibbles: sub-block 2j, high nibbles: 2j + 1
    };

    __device__ __forceinline__ static unsigned row_place(const ZbRows&, int) { return 0u; }  // rows are 16-byte aligned

    template <int BM>
    __device__ __forceinline__ static Lane load(const unsigned char* ws, int r, int c, int h, int, unsigned) {
        // Half stages: nibbles [BM][64], then headers [BM][16], then qh [BM][32]; WHOLE: block r at r * BLOCK_BYTES
        const unsigned char* const row = ws + r * (WHOLE ? BLOCK_BYTES : 0);
        const unsigned char* const header = WHOLE ? row : ws + BM * 64 + r * 16;
        Lane l;
        l.nib = zb_lds128(WHOLE ? row + QS_OFFSET + 64 * h + c * 16 : ws + r * 64 + c * 16);
        // Header: d, dmin, then scales[12]: bytes 0-3 (hdr.y) and 4-7 (hdr.z) hold the scale and min codes of
        // sub-blocks 0-3, bytes 8-11 (hdr.w) the low bits of 4-7's. This lane's sub-blocks are j, j + 1 of the half's
        // four, j = 2 * (c >> 1) (+ 4 in the second half).
        const uint4 hdr = zb_lds128(header);
        const unsigned sc = h ? zb_q4k_high_codes(hdr.w, hdr.y) : hdr.y & 0x3F3F3F3Fu;
        const unsigned mn = h ? zb_q4k_high_codes(hdr.w >> 4, hdr.z) : hdr.z & 0x3F3F3F3Fu;
        const ZbScale s = zb_q4k_scales(hdr.x, sc, mn, (c >> 1) ? 0x4342u : 0x4140u);
        l.dsc_lo = s.dsc_lo, l.ndm_lo = s.ndm_lo, l.dsc_hi = s.dsc_hi, l.ndm_hi = s.ndm_hi;
        if (FIFTH_BIT) {
            const uint4 qh = zb_lds128((WHOLE ? row + 16 : ws + BM * 80 + r * 32) + 16 * (c & 1));
            const int shift = 2 * (2 * h + (c >> 1));
            l.qh = make_uint4(qh.x >> shift, qh.y >> shift, qh.z >> shift, qh.w >> shift);
        }
        return l;
    }

    // Q5_K puts the fifth bit above the nibble: bit 4 (1024 + q, q < 32) or bit 8 (64 + q).
    __device__ __forceinline__ static void decode(const Lane& l, int i, unsigned (&lo)[2], unsigned (&hi)[2]) {
        const unsigned v = zb_word(l.nib, i);
        const unsigned v8 = v >> 8;  // bytes 1 and 3 moved under the masks of bytes 0 and 2
        unsigned b_lo0 = zb_and_or(v, 0x000F000Fu, ZB_BIAS_LOW), b_lo1 = zb_and_or(v8, 0x000F000Fu, ZB_BIAS_LOW);
        unsigned b_hi0 = zb_and_or(v, 0x00F000F0u, ZB_BIAS_HIGH), b_hi1 = zb_and_or(v8, 0x00F000F0u, ZB_BIAS_HIGH);
        if (FIFTH_BIT) {
            const unsigned q = zb_word(l.qh, i);
            b_lo0 = zb_and_or(q << 4, 0x00100010u, b_lo0);
            b_lo1 = zb_and_or(q >> 4, 0x00100010u, b_lo1);
            b_hi0 = zb_and_or(q << 7, 0x01000100u, b_hi0);
            b_hi1 = zb_and_or(q >> 1, 0x01000100u, b_hi1);
        }
        lo[0] = zb_dequant_pair(b_lo0, ZB_BIAS_LOW, l.dsc_lo, l.ndm_lo);
        lo[1] = zb_dequant_pair(b_lo1, ZB_BIAS_LOW, l.dsc_lo, l.ndm_lo);
        hi[0] = zb_dequant_pair(b_hi0, ZB_BIAS_HIGH, l.dsc_hi, l.ndm_hi);
        hi[1] = zb_dequant_pair(b_hi1, ZB_BIAS_HIGH, l.dsc_hi, l.ndm_hi);
    }
};

struct ZbQ4K : ZbNibbleFormat<144, 16, false> {};
struct ZbQ5K : ZbNibbleFormat<176, 48, true> {};
struct ZbQ4KWhole : ZbNibbleFormat<144, 16, false, true> {};
struct ZbQ5KWhole : ZbNibbleFormat<176, 48, true, true> {};

// Q6_K's lanes and their decode, shared by the GGUF-layout policies (ZbQ6KFormat) and the repacked one (ZbQ6KR): in
// half h, lane c holds the low nibbles (c < 2) or high nibbles (c >= 2) of ql[64h + 16(c&1) + ...] and
// ql[64h + 32 + ...], two bits of each weight from qh[32h + 16(c&1) + ...], and the fp16 scales d * sc of its two
// 16-weight sub-blocks 8h + 4(c>>1) + (c&1) and that + 2.
struct ZbQ6KDecode {
    static constexpr bool WHOLE = false;  // (ZbNibbleFormat's whole-superblock stages)
    struct Lane {
        uint4 ql_lo, ql_hi, qh;  // quarters 2n (ql_lo) and 2n + 1 (ql_hi) of the half, n = c >> 1
        unsigned dsc_lo, dsc_hi;
        unsigned nib_mask, high_mask, bias, offset;  // lane constants: nibble n, qh bits under it
    };

    // Low nibble: 1024 + q with q's 6 bits at 0-5. High nibble: 64 + q (ulp 1/16) with q at bits 4-9.
    // Subtracting bias + 32 leaves q - 32 exactly.
    __device__ __forceinline__ static void set_lane_constants(Lane& l, int c) {
        const bool high = c >> 1;
        l.nib_mask = high ? 0x00F000F0u : 0x000F000Fu;
        l.high_mask = high ? 0x03000300u : 0x00300030u;
        l.bias = high ? ZB_BIAS_HIGH : ZB_BIAS_LOW;
        l.offset = high ? 0x56005600u : 0x64206420u;  // 96 = 64 + 32, 1056 = 1024 + 32
    }

    // qh bits 2k, 2k+1 of byte 0 (quarter k = 2n or 2n + 1) land on bits 4-5 (n = 0) or 8-9 (n = 1)
    // by the same shift for both n: << 4 for quarter 2n, << 2 for 2n + 1; byte 1's by >> 4 and >> 6.
    __device__ __forceinline__ static unsigned pair(unsigned ql, unsigned qh, unsigned dsc, const Lane& l) {
        unsigned q, r;
        const unsigned biased = zb_merge_bits(ql, l.nib_mask, qh, l.high_mask, l.bias);
        asm("sub.f16x2 %0, %1, %2;" : "=r"(q) : "r"(biased), "r"(l.offset));
        asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(q), "r"(dsc));
        return r;
    }

    __device__ __forceinline__ static void decode(const Lane& l, int i, unsigned (&lo)[2], unsigned (&hi)[2]) {
        const unsigned a = zb_word(l.ql_lo, i), b = zb_word(l.ql_hi, i), h = zb_word(l.qh, i);
        lo[0] = pair(a, h << 4, l.dsc_lo, l);
        lo[1] = pair(a >> 8, h >> 4, l.dsc_lo, l);
        hi[0] = pair(b, h << 2, l.dsc_hi, l);
        hi[1] = pair(b >> 8, h >> 6, l.dsc_hi, l);
    }
};

// Q6_K (210-byte blocks: ql[128], qh[64], scales[16], d; only 2-byte aligned in a row, so no 16-byte copy can start
// at a block). A stage holds, per row, aligned 16-byte chunks that cover the stage's bytes of the block at any even
// misalignment o (the block's bytes start at byte o of each region):
// - HALF_STAGE false (ZbQ6K, the mma.sync path): a whole superblock, 14 chunks, the block at [o, o + 210) of 224 bytes;
// - HALF_STAGE true (ZbQ6KHalf, the wgmma path, whose 128- and 192-token tiles then fit three stages): half
//   superblock h, 10 chunks in three regions: ql[64h ..] (5 chunks, stage bytes [0, 80)), qh[32h ..] (3, [80, 128))
//   and scales + d (2, [128, 160)), each region's chunks starting at the block's aligned start (block - o) plus the
//   region's offset.
// Only the last chunk passes the block's end (by 14 - o bytes): the next block's or row's bytes (in bounds,
// zero-filled: src-size o + 2), except after the last block of row M - 1, where the weights may end: that one chunk
// is copied at its exact size (zb_copy_exact; compute-sanitizer reported the 16-byte window as an out-of-bounds
// read). In half h, lane c reads the low nibbles (c < 2) or high nibbles (c >= 2) of ql[64h + 16(c&1) + ...] and
// ql[64h + 32 + ...] and two bits of qh[32h + 16(c&1) + ...]; its two 16-weight sub-blocks are 8h + 4(c>>1) + (c&1)
// and that + 2.
// Rows sit row_stride(row_bytes) bytes apart in the stage: each of those lane reads is five 32-bit loads, and the 8 rows
// x 2 columns (16(c&1)) of a warp's load hit 16 different banks only if the rows' starts spread over the banks. Where
// consecutive rows start 2 mod 4 bytes apart in global memory (row_bytes & 2) the copied chunks' stride does that;
// elsewhere one chunk more (an odd number of 16-byte units) does, except where every row has the same misalignment
// (row_bytes a multiple of 16: two ways, whatever the stride). gemma4-31b's ffn_down (K 21504) went from two to one.
template <bool HALF_STAGE>
struct ZbQ6KFormat : ZbQ6KDecode {
    static constexpr int BLOCK_BYTES = 210;
    static constexpr int HALVES = HALF_STAGE ? 1 : 2;
    static constexpr int CHUNKS_PER_ROW = HALF_STAGE ? 10 : 14;  // o + 210 <= 224; o + 64 <= 80, o + 32 <= 48, o + 18 <= 32
    static constexpr int ROW_STAGE_BYTES = 16 * (CHUNKS_PER_ROW + 1);  // the copied chunks and one spare
    static constexpr int TMA_BOXES = 0;  // 210-byte blocks: no 16-byte aligned box

    __device__ __forceinline__ static int row_stride(int row_bytes) {
        return (row_bytes & 2) ? ROW_STAGE_BYTES - 16 : ROW_STAGE_BYTES;
    }

    // (row r's stage offset) << 4 | (its start's misalignment: block sb of the row is at (that + 210 sb) & 15)
    __device__ __forceinline__ static unsigned row_place(const ZbRows& rows, int r) {
        const unsigned misalign = (unsigned)(reinterpret_cast<unsigned long long>(rows.at(r)) & 15ull);
        return (unsigned)(r * row_stride(rows.row_bytes)) << 4 | misalign;
    }
    // Where half h's ql (at h * QL_HALF_STEP), qh and scales sit in a row's stage area, before the block's
    // misalignment o; d is 16 bytes past the scales.
    static constexpr int QH_AT = HALF_STAGE ? 80 : 128, SC_AT = HALF_STAGE ? 128 : 192;
    static constexpr int QL_HALF_STEP = HALF_STAGE ? 0 : 64, QH_HALF_STEP = HALF_STAGE ? 0 : 32;

    // Chunk q of a row: its offset from the block's aligned start in the first half, and how far the second half
    // moves it (HALF_STAGE: the ql chunks by 64, the qh chunks by 32, the scales not).
    __device__ __forceinline__ static int chunk_offset(int q) {
        return !HALF_STAGE ? 16 * q : q < 5 ? 16 * q : q < 8 ? 128 + 16 * (q - 5) : 192 + 16 * (q - 8);
    }
    __device__ __forceinline__ static unsigned chunk_half_step(int q) {
        return !HALF_STAGE ? 0u : q < 5 ? 64u : q < 8 ? 32u : 0u;
    }

    template <int BM, int THREADS>
    struct Loader {
        using Passes = ZbChunkPasses<BM * CHUNKS_PER_ROW, THREADS>;
        static constexpr int ITERS = Passes::ITERS;
        Passes passes;
        const unsigned char* src[ITERS];  // the row + chunk_offset(q), relative to superblock 0 (before alignment)
        unsigned dst[ITERS];
        static_assert(ITERS <= 16, "two bits per chunk in half_steps");
        unsigned half_steps;  // bits 2it, 2it + 1: chunk it's chunk_half_step / 32 (0, 1 or 2)
        unsigned tails;       // bit it: chunk it holds the block's tail: copy only the block's bytes (o + 2)
        unsigned end_tails;   // ... and is of row M - 1, whose last block may end the weights
        int last_sb;          // a row's last superblock

        __device__ __forceinline__ Loader(const ZbRows& rows, int tid)
            : passes(tid), half_steps(0u), tails(0u), end_tails(0u) {
#pragma unroll
            for (int it = 0; it < ITERS; ++it) {
                const int idx = Passes::chunk(tid, it);
                const int r = idx / CHUNKS_PER_ROW, q = idx - r * CHUNKS_PER_ROW;
                src[it] = rows.at(r) + chunk_offset(q);
                dst[it] = r * row_stride(rows.row_bytes) + 16 * q;
                half_steps |= chunk_half_step(q) / 32u << (2 * it);
                if (q == CHUNKS_PER_ROW - 1) tails |= 1u << it;
                if (q == CHUNKS_PER_ROW - 1 && rows.last_row(r)) end_tails |= 1u << it;
            }
            last_sb = rows.row_bytes / BLOCK_BYTES - 1;
        }

        // Stage `step` (superblock sb = step, or HALF_STAGE: half step & 1 of superblock step >> 1), into the stage's
        // weight area at shared address ws.
        __device__ __forceinline__ void issue(unsigned ws, int step) const {
            const int sb = HALF_STAGE ? step >> 1 : step;
            const unsigned h = HALF_STAGE ? (unsigned)step & 1u : 0u;
            const unsigned exact = sb == last_sb ? end_tails : 0u;
#pragma unroll
            for (int it = 0; it < ITERS; ++it) {
                if (!passes.copies(it)) continue;
                const unsigned long long block = reinterpret_cast<unsigned long long>(src[it]) + sb * BLOCK_BYTES;
                const unsigned o = (unsigned)(block & 15ull);
                const unsigned half_step = HALF_STAGE ? (half_steps >> (2 * it) & 3u) * 32u * h : 0u;
                const unsigned char* aligned = reinterpret_cast<const unsigned char*>((block & ~15ull) + half_step);
                if ((exact >> it & 1u) && o != 14u) zb_copy_exact<HALF_STAGE>(ws + dst[it], aligned, o + 2u);
                else zb_cp_async16(ws + dst[it], aligned, (tails >> it & 1u) ? o + 2u : 16u);
            }
        }
    };

    template <int BM>
    __device__ __forceinline__ static Lane load(const unsigned char* ws, int, int c, int h, int sb, unsigned place) {
        const unsigned o = ((place & 15u) + (unsigned)sb * BLOCK_BYTES) & 15u;
        const unsigned char* blk = ws + (place >> 4) + o;
        const int l0 = 16 * (c & 1);
        Lane l;
        l.ql_lo = zb_lds128_unaligned(blk + QL_HALF_STEP * h + l0);
        l.ql_hi = zb_lds128_unaligned(blk + QL_HALF_STEP * h + 32 + l0);
        l.qh = zb_lds128_unaligned(blk + QH_AT + QH_HALF_STEP * h + l0);
        const float d = zb_half_bits_to_float(*reinterpret_cast<const unsigned short*>(blk + SC_AT + 16));
        const signed char* sc = reinterpret_cast<const signed char*>(blk + SC_AT + 8 * h + 4 * (c >> 1) + (c & 1));
        l.dsc_lo = zb_half2_splat(d * (float)sc[0]);
        l.dsc_hi = zb_half2_splat(d * (float)sc[2]);
        set_lane_constants(l, c);
        return l;
    }

};

struct ZbQ6K : ZbQ6KFormat<false> {};
struct ZbQ6KHalf : ZbQ6KFormat<true> {};

// Q6_K repacked at load (zincbench.quant.q6k_r): 224-byte blocks, so every block is 16-byte aligned, laid out as two
// 112-byte halves, each what a stage holds of a row: ql[64h ..] (64 bytes), qh[32h ..] (32), then the half's 8
// sub-block scales as the fp16 products d * sc that ZbQ6KFormat::load computes (the same values: d * sc is exact in
// f32 and rounds once either way), in lane order: word c (at 96 + 4c of the half) holds those of sub-blocks
// 8h + 4(c>>1) + (c&1) (low half) and that + 2. A stage is a half superblock: 7 whole, aligned chunks per row, or one
// TMA box of 112 bytes; a lane's slices are three 16-byte loads and its scales one word. Rows are 112 bytes apart,
// an odd number of 16-byte units: the 8 rows x 2 columns of a warp's 16-byte loads hit each bank twice, the fewest
// wavefronts.
struct ZbQ6KR : ZbQ6KDecode {
    static constexpr int BLOCK_BYTES = 224;
    static constexpr int HALVES = 1;
    static constexpr int CHUNKS_PER_ROW = 7;
    static constexpr int ROW_STAGE_BYTES = 16 * CHUNKS_PER_ROW;
    static constexpr int TMA_BOXES = 1;
    __host__ __device__ static constexpr ZbTmaBox tma_box(int) {
        return ZbTmaBox{0, ROW_STAGE_BYTES, ROW_STAGE_BYTES, 0};
    }

    template <int BM, int THREADS>
    struct Loader {
        // 7 chunks a row: the last pass is partial with one 16-row slice per warp (BM * 7 / THREADS = 3.5)
        ZbRowChunks<BM, THREADS, CHUNKS_PER_ROW> chunks;
        __device__ __forceinline__ Loader(const ZbRows& rows, int tid) : chunks(rows, tid) {}

        // Stage `step` = half step & 1 of superblock step >> 1, into the stage's weight area at shared address ws.
        __device__ __forceinline__ void issue(unsigned ws, int step) const {
            chunks.issue(ws, (step >> 1) * BLOCK_BYTES + (step & 1) * ROW_STAGE_BYTES);
        }
    };

    __device__ __forceinline__ static unsigned row_place(const ZbRows&, int) { return 0u; }  // rows are 16-byte aligned

    template <int BM>
    __device__ __forceinline__ static Lane load(const unsigned char* ws, int r, int c, int, int, unsigned) {
        const unsigned char* row = ws + r * ROW_STAGE_BYTES;
        const int l0 = 16 * (c & 1);
        Lane l;
        l.ql_lo = zb_lds128(row + l0);
        l.ql_hi = zb_lds128(row + 32 + l0);
        l.qh = zb_lds128(row + 64 + l0);
        const unsigned dsc = *reinterpret_cast<const unsigned*>(row + 96 + 4 * c);
        l.dsc_lo = zb_half2_lo(dsc);
        l.dsc_hi = zb_half2_hi(dsc);
        set_lane_constants(l, c);
        return l;
    }
};

extern "C" __global__ void x_f32_to_f16_kquant_perm(const float* __restrict__ x, uint4* __restrict__ xp, int rows,
                                                    int K) {
    zb_permute_x<false>(x, xp, rows, K, blockIdx.x, gridDim.x);
}

extern "C" __global__ void x_f32_to_f16_kquant_perm_wgmma(const float* __restrict__ x, uint4* __restrict__ xp,
                                                          int rows, int K) {
    zb_permute_x<true>(x, xp, rows, K, blockIdx.x, gridDim.x);
}

// Shared memory per pipeline stage: X tile [HALVES][BN][256 B] (swizzled; WGMMA: per half the 128-byte-swizzle
// atoms of zb_wgmma_x_offset), then the format's weight area [BM][ROW_STAGE_BYTES].
template <class Q, int WM, int WN, int WARPS_M, int WARPS_N>
struct ZbTile {
    static constexpr int BM = 16 * WM * WARPS_M;
    static constexpr int BN = 8 * WN * WARPS_N;
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr int X_HALF_BYTES = BN * 256;
    static constexpr int X_BYTES = Q::HALVES * X_HALF_BYTES;
    static constexpr int W_BYTES = BM * Q::ROW_STAGE_BYTES;
    static constexpr int STAGE_BYTES = X_BYTES + W_BYTES;
};

// One half superblock's math: this warp's rows (decoded lane slices) times its first n_tiles 8-token
// columns (n_tiles = WN unless the tile trims empty columns).
template <class Q, int WM, int WN>
__device__ __forceinline__ void zb_mma_half(float (&acc)[WM][WN][4], const typename Q::Lane (&lanes)[WM][2],
                                            const unsigned char* x_even, const unsigned char* x_odd, int n_tiles) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        unsigned a_lo[WM][4], a_hi[WM][4];
#pragma unroll
        for (int mt = 0; mt < WM; ++mt) {
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
                // a0/a1 hold k-pairs (2c, 2c+1) of rows g / g+8; a2/a3 hold (2c+8, 2c+9).
                unsigned lo[2], hi[2];
                Q::decode(lanes[mt][rr], i, lo, hi);
                a_lo[mt][rr] = lo[0], a_lo[mt][2 + rr] = lo[1];
                a_hi[mt][rr] = hi[0], a_hi[mt][2 + rr] = hi[1];
            }
        }
        // Chunk (i, c) of token row r sits at ((i ^ (r & 1)) * 4 + c) * 16: x_even/x_odd fold the swizzle in.
        const unsigned char* x_base = ((i & 1) ? x_odd : x_even) + (i & 2) * 64;
#pragma unroll
        for (int nt = 0; nt < WN; ++nt) {
            if (nt >= n_tiles) break;  // warp-uniform
            const uint4 b = zb_lds128(x_base + nt * 8 * 256);
#pragma unroll
            for (int mt = 0; mt < WM; ++mt) {
                zb_mma16816(acc[mt][nt], a_lo[mt][0], a_lo[mt][1], a_lo[mt][2], a_lo[mt][3], b.x, b.y);
                zb_mma16816(acc[mt][nt], a_hi[mt][0], a_hi[mt][1], a_hi[mt][2], a_hi[mt][3], b.z, b.w);
            }
        }
    }
}

// The Hopper path (WGMMA): one warpgroup instruction m64nNk16 per 16 k, A (this warp's 16 weight rows)
// decoded into registers by the format policy exactly as for mma.sync, B (the stage's X, in the wgmma order of
// x_f32_to_f16_kquant_perm_wgmma) read by the Tensor cores straight from shared memory: a half superblock is 8
// steps; step 2i + 1 (2i) takes A from decode(i)'s hi (lo) pairs and B from the token's bytes 32 * step.
// Any format policy works: the X order, not the weights, is what wgmma needs. With TMA (template parameter TMA) one
// thread copies a stage as boxes instead of every thread's cp.asyncs: the weights of any format with aligned blocks,
// and a dense tile's X, whose k atoms are what a 2-D box with the 128-byte swizzle writes.

// Where 16-byte unit q (0..15) of token row r of a half goes in the stage's X area: K-major atoms of 8 rows x
// 128 bytes, [k atom (steps 0-3, 4-7)][token][128 B], with the 128-byte swizzle (unit u of row r at u ^ (r & 7)).
template <int BN>
__device__ __forceinline__ unsigned zb_wgmma_x_offset(int r, int q) {
    return (unsigned)((q >> 3) * BN * 128 + r * 128 + (((q & 7) ^ (r & 7)) << 4));
}

// Descriptor of a K-major operand in 128-byte-swizzle atoms of 8 rows (SBO 1024 bytes between atoms along N) as two
// words: the low one holds the start address (addr: the first byte in row 0 of its atom, in 16-byte units; the
// hardware applies the swizzle) and LBO, the high one SBO and the swizzle mode, a constant.
__device__ __forceinline__ unsigned zb_wgmma_desc_sw128_lo(unsigned addr) {
    return (unsigned)zb_wgmma_desc(addr, 16u, 1024u);
}
constexpr unsigned ZB_WGMMA_DESC_SW128_HI = (1024u >> 4) | 1u << 30;

// Lane (g, c)'s slices of half h of superblock sb, rows r = 16 * warp + g and r + 8 (places: their Q::row_place), from
// the stage's weight area ws_w.
template <class Q, int BM>
__device__ __forceinline__ void zb_wgmma_load(typename Q::Lane (&lanes)[2], const unsigned char* ws_w, int r, int c,
                                              int h, int sb, const unsigned (&places)[2]) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) lanes[rr] = Q::template load<BM>(ws_w, r + 8 * rr, c, h, sb, places[rr]);
}

// The A registers of the STEPS k-steps of piece `piece` of the loaded half (a half is 8 steps: one piece of 8, or two
// of 4 with QUARTERS).
template <class Q, int STEPS>
__device__ __forceinline__ void zb_wgmma_decode(unsigned (&a)[STEPS][4], const typename Q::Lane (&lanes)[2],
                                                int piece) {
#pragma unroll
    for (int i = 0; i < STEPS / 2; ++i)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
            unsigned lo[2], hi[2];
            Q::decode(lanes[rr], piece * STEPS / 2 + i, lo, hi);
            a[2 * i][rr] = lo[0], a[2 * i][2 + rr] = lo[1];
            a[2 * i + 1][rr] = hi[0], a[2 * i + 1][2 + rr] = hi[1];
        }
}

// The STEPS wgmmas of one piece (steps step0 .. step0 + STEPS - 1 of the half whose X descriptor's low word is
// x_desc), committed as one group, into the first N columns of acc.
template <int N, int BN, int STEPS>
__device__ __forceinline__ void zb_wgmma_piece(float (&acc)[BN / 2], const unsigned (&a)[STEPS][4], unsigned x_desc,
                                               int step0) {
    zb_wgmma_fence();
    // A descriptor's start address is its low 14 bits in 16-byte units. A shared address (under 2^18 bytes) and an
    // offset inside the stage never carry out of them, so each step adds its offset to the half's descriptor, as a
    // 64-bit add or to the low word alone. ptxas makes the first one UIADD3.64 at a tile's full width; behind the
    // trimmed widths' branches it becomes UIADD3 + UIADD3.X + UMOVs, where the low word's add is UIADD3 + UMOV
    // (results/h200/prefetch-20261203/, desc-lo-20261204/).
    const unsigned long long high = (unsigned long long)ZB_WGMMA_DESC_SW128_HI << 32;
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
        const int step = step0 + s;
        const unsigned offset = ((step >> 2) * BN * 128u + (step & 3) * 32u) >> 4;
        ZbWgmma<N>::mma(acc, a[s], N == BN ? (high | x_desc) + offset : high | (x_desc + offset));
    }
    zb_wgmma_commit();
}

// With TRIM_N a block multiplies only its first 8 * n_cols columns, its tokens rounded up to 8 (zb_wgmma.cuh spells
// out every m64nNk16 width, N a multiple of 8): the widths 8 * LO .. 8 * HI halved down to one, block-uniform, so all of
// the block's wgmmas have one shape.
template <int BN, int STEPS, int LO = 1, int HI = BN / 8>
__device__ __forceinline__ void zb_wgmma_issue_trimmed(float (&acc)[BN / 2], const unsigned (&a)[STEPS][4],
                                                       unsigned x_desc, int step0, int n_cols) {
    if constexpr (LO == HI) {
        zb_wgmma_piece<8 * LO, BN, STEPS>(acc, a, x_desc, step0);
    } else {
        constexpr int MID = (LO + HI) / 2;
        if (n_cols <= MID) zb_wgmma_issue_trimmed<BN, STEPS, LO, MID>(acc, a, x_desc, step0, n_cols);
        else zb_wgmma_issue_trimmed<BN, STEPS, MID + 1, HI>(acc, a, x_desc, step0, n_cols);
    }
}

template <int BN, bool TRIM_N, int STEPS>
__device__ __forceinline__ void zb_wgmma_issue_piece(float (&acc)[BN / 2], const unsigned (&a)[STEPS][4],
                                                     unsigned x_desc, int step0, int n_tokens) {
    if constexpr (TRIM_N) zb_wgmma_issue_trimmed<BN, STEPS>(acc, a, x_desc, step0, (n_tokens + 7) >> 3);
    else zb_wgmma_piece<BN, BN, STEPS>(acc, a, x_desc, step0);
}

// ---- Epilogues (template parameter EPI) ---------------------------------------------------------
// STORE: y[out_row][m] = acc. SWIGLU_F16_PERM / SWIGLU_F16_GROUPED (grouped MoE gate+up): the block's first
// BM/2 weight rows are gate rows of `w`, the last BM/2 the same rows of `w_up` (ZbRows' split); it writes
// fp16(silu(gate) * up) for BM/2 output rows: PERM at h[out_row] in the permuted order
// x_f32_to_f16_kquant_perm produces (so a fused down GEMM reads it as its X); GROUPED in plain order at row
// expert*capacity + (the token's place in its expert's bucket) of [E][capacity][M] (a batched GEMM's
// padded input; capacity in n_rows, places past it dropped). COMBINE (grouped MoE down):
// y[t][m] += w(t, slot) * acc with the routing weight from the engine's table (f32 bits after the ids),
// by atomicAdd: a token's top_k slots sit in top_k different blocks, and a deterministic reduction would
// need the [T][top_k][M] intermediate this epilogue exists to avoid (f32 addition order varies run to run).
// The epilogue only changes which rows a block loads (ZbRows) and what it writes: any format policy works
// with any epilogue.
#define ZB_EPI_STORE 0
#define ZB_EPI_SWIGLU_F16_GROUPED 1
#define ZB_EPI_SWIGLU_F16_PERM 2
#define ZB_EPI_COMBINE 3

// Index (in halves) of element k of a row in the order x_f32_to_f16_kquant_perm writes (K a multiple of 256).
__device__ __forceinline__ unsigned zb_kquant_perm_index(unsigned k) {
    const unsigned sb = k >> 8, kk = k & 255u, j = kk >> 6, r = kk & 63u, hi = r >> 5, c_lo = (r >> 4) & 1u;
    const unsigned i = (r >> 2) & 3u, off = r & 3u;
    const unsigned chunk = sb * 32u + (j >> 1) * 16u + i * 4u + 2u * (j & 1u) + c_lo;
    return chunk * 8u + 4u * hi + (((off & 1u) << 1) | (off >> 1));
}

// ---- X tile copies -------------------------------------------------------------------------------------------------
// ZbXCopy<WGMMA, BN, THREADS>: one thread's cp.asyncs of one half superblock of the block's BN token rows (256 bytes
// each, from the permuted X) into the X area of a stage, in the layout its MMA path reads. issue(xs, xp, s_xoff, half):
// xs the half's X area (shared address), half the half superblock's index in the row; s_xoff the token tile's rows
// (ZB_INVALID: a padding row, zero-filled).
template <bool WGMMA, int BN, int THREADS>
struct ZbXCopy;

// mma.sync layout (row parity swizzle, x_even/x_odd): thread tid moves chunk q = tid % 16 of rows tid / 16 +
// it * THREADS / 16; the row parity (hence the swizzle) is the same for all its rows because THREADS / 16 is even.
template <int BN, int THREADS>
struct ZbXCopy<false, BN, THREADS> {
    static constexpr int CHUNKS = BN * 16, ITERS = (CHUNKS + THREADS - 1) / THREADS, ROW_STEP = THREADS / 16;
    static_assert(THREADS % 32 == 0, "row parity of a thread's X chunks must not change across iterations");
    int q, r0;
    unsigned dst0;

    __device__ __forceinline__ explicit ZbXCopy(int tid) : q(tid & 15), r0(tid >> 4) {
        dst0 = r0 * 256 + ((q ^ ((r0 & 1) << 2)) << 4);
    }

    __device__ __forceinline__ void issue(unsigned xs, const uint4* xp, const unsigned* s_xoff, int half) const {
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            const int r = r0 + it * ROW_STEP;
            if (CHUNKS % THREADS == 0 || r < BN) {
                const unsigned xoff = s_xoff[r];
                const bool valid = xoff != ZB_INVALID;
                zb_cp_async16(xs + dst0 + it * ROW_STEP * 256, xp + (valid ? xoff + half * 16 + q : 0u), valid ? 16u : 0u);
            }
        }
    }
};

// wgmma layout (zb_wgmma_x_offset): a thread moves units a, a + 4, a + 8, a + 12 of one token row r (its slot: row r,
// column a): one s_xoff read and one source address per row, the other three at immediate offsets. Each cp.async of a
// warp reads units 4k..4k+3 of 8 rows (whole 32-byte sectors: 4 lanes per row); lanes 0-7 take 8 rows of one column,
// so the 128-byte swizzle spreads their 16-byte stores over all 32 banks. Unit a + 4k of row r goes to
// zb_wgmma_x_offset(r, a) ^ ((k & 1) << 6) plus k atom k >> 1: its unit in the row is (a + 4 (k & 1)) ^ (r & 7) =
// (a ^ (r & 7)) ^ 4 (k & 1); xs (a stage or half base) is a multiple of 1024, so the XOR may act on the whole address.
template <int BN, int THREADS>
struct ZbXCopy<true, BN, THREADS> {
    static constexpr int SLOTS = BN * 4, PASSES = (SLOTS + THREADS - 1) / THREADS;  // slot: (row, column)
    static_assert(THREADS % 32 == 0, "a thread's rows keep their column and their swizzle phase across passes");
    int tid, r0, column;
    unsigned dst0;

    __device__ __forceinline__ explicit ZbXCopy(int tid_) : tid(tid_) {
        r0 = (tid & 7) | (tid >> 5 << 3);
        column = (tid >> 3) & 3;
        dst0 = zb_wgmma_x_offset<BN>(r0, column);
    }

    __device__ __forceinline__ void issue(unsigned xs, const uint4* xp, const unsigned* s_xoff, int half) const {
#pragma unroll
        for (int j = 0; j < PASSES; ++j) {
            if (SLOTS % THREADS == 0 || tid + j * THREADS < SLOTS) {
                const int r = r0 + j * (THREADS / 4);  // the same row phase (r & 7) and column in every pass
                const unsigned xoff = s_xoff[r];
                const bool valid = xoff != ZB_INVALID;
                const uint4* src = xp + (valid ? xoff + half * 16 + column : 0u);
                const unsigned dst = xs + dst0 + j * (THREADS / 4) * 128;
#pragma unroll
                for (int k = 0; k < 4; ++k)
                    zb_cp_async16((dst ^ ((k & 1) << 6)) + (k >> 1) * BN * 128, src + 4 * k, valid ? 16u : 0u);
            }
        }
    }
};

// ---- Steps of gemm_kquant_mma --------------------------------------------------------------------

// The block's token tile tile_n: for each of its BN columns r, s_orow[r] = the output row (token, or
// token-slot when grouped; -1 for padding) and s_xoff[r] = the first 16-byte chunk of its X row (ZB_INVALID
// for padding). Grouped: tile entry (expert << 16 | j) of `tiles` is the j-th BN-wide slice of the expert's
// bucket; false for an unused entry (the block has nothing to do).
struct ZbTokenTile {
    unsigned long long w_base;  // byte offset of the tile's weights (the expert's) in w
    int expert;                 // their expert (grouped; 0 dense)
    int n_tokens;               // tokens in this block's tile (<= BN)
    unsigned bucket_row0;       // SWIGLU_F16_GROUPED: expert * capacity
    unsigned place0;            // the tile's first place in its expert's bucket
};

template <int BN, int THREADS, bool GROUPED>
__device__ __forceinline__ bool zb_token_tile(ZbTokenTile& tt, unsigned* s_xoff, int* s_orow, int tid, int tile_n,
                                              int K, int n_rows,
                                              unsigned long long expert_bytes, const unsigned* tiles,
                                              const unsigned* offsets,
                                              const unsigned* sorted_ids, int top_k, int x_per_slot) {
    tt.w_base = 0, tt.expert = 0;
    tt.bucket_row0 = 0, tt.place0 = 0;
    if (GROUPED) {  // the routing launch's outputs: zb_pdl_load (T2 launches the GEMM as its dependent)
        const unsigned tile = zb_pdl_load(tiles + tile_n);
        if (tile == ZB_INVALID) return false;
        const unsigned expert = tile >> 16;
        const unsigned begin = zb_pdl_load(offsets + expert) + (tile & 0xFFFFu) * BN;
        const unsigned end = zb_pdl_load(offsets + expert + 1);
        tt.bucket_row0 = expert * (unsigned)n_rows;
        tt.place0 = (tile & 0xFFFFu) * BN;
        tt.n_tokens = (int)min(end - begin, (unsigned)BN);
        tt.w_base = expert * expert_bytes;
        tt.expert = (int)expert;
        for (int r = tid; r < BN; r += THREADS) {
            const unsigned pos = begin + r;
            const unsigned sid = pos < end ? zb_pdl_load(sorted_ids + pos) : ZB_INVALID;
            s_orow[r] = sid == ZB_INVALID ? -1 : (int)sid;
            s_xoff[r] = sid == ZB_INVALID ? ZB_INVALID : (x_per_slot ? sid : sid / top_k) * (unsigned)(K / 8);
        }
    } else {
        tt.n_tokens = min(n_rows - tile_n * BN, BN);
        for (int r = tid; r < BN; r += THREADS) {
            const int t = tile_n * BN + r;
            s_orow[r] = t < n_rows ? t : -1;
            s_xoff[r] = t < n_rows ? (unsigned)t * (unsigned)(K / 8) : ZB_INVALID;
        }
    }
    return true;
}

// SWIGLU_F16_PERM / SWIGLU_F16_GROUPED epilogue (see the epilogue notes above): the accumulators of gate rows and
// up rows meet in the pipeline's shared memory, then fp16(silu(gate) * up) goes out per output row.
template <class Tile, int STAGES, int EPI, int WM, int WN>
__device__ __forceinline__ void zb_epilogue_swiglu(const float (&acc)[WM][WN][4], unsigned char* smem, const int* s_orow,
                                                   const ZbTokenTile& tt, float* y, int M, int n_rows,
                                                   int row0, int tid, int wm, int wn, int g, int c) {
    constexpr int BM = Tile::BM, BN = Tile::BN, THREADS = Tile::THREADS, OUT_ROWS = BM / 2;
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
    for (int idx = tid; idx < OUT_ROWS * BN; idx += THREADS) {
        const int n = idx / OUT_ROWS, o = idx - n * OUT_ROWS, row = row0 + o, orow = s_orow[n];
        if (row >= M || orow < 0) continue;
        const float gate = cs[o * CS + n], up = cs[(o + OUT_ROWS) * CS + n];
        const float value = gate / (1.0f + expf(-gate)) * up;
        const unsigned short bits = zb_float_to_half_rne(value);
        if constexpr (EPI == ZB_EPI_SWIGLU_F16_GROUPED) {
            if (tt.place0 + n >= (unsigned)n_rows) continue;  // past the capacity: dropped (the host sizes it)
            h[(long long)(tt.bucket_row0 + tt.place0 + n) * M + row] = bits;
        } else {
            h[(long long)orow * M + zb_kquant_perm_index((unsigned)row)] = bits;
        }
    }
}

// STORE and COMBINE epilogues, straight from the C fragments: y[out_row][m] = acc, or the routing-weighted
// atomicAdd into y[t][m].
template <int EPI, int WM, int WN>
__device__ __forceinline__ void zb_epilogue_rows(const float (&acc)[WM][WN][4], const int* s_orow, float* y,
                                                 int M, int row0, int wm, int wn, int g, int c, int top_k,
                                                 const unsigned* routing, int routing_stride) {
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

// ---- Stream-K (dense) ---------------------------------------------------------------------------------
// A grid of whole tiles leaves SMs idle in its last, partial wave (320 tiles of 128x256 on 132 SMs: the third wave
// runs 42% full). With stream-K the first dp_tiles tiles are one block each, as before, and the remaining tiles'
// superblocks (iters = their count * n_sb) are shared evenly by `ctas` more blocks: block j of them takes iterations
// [zb_sk_begin(j), zb_sk_begin(j + 1)), at most two tiles' worth of partial K ranges (the host keeps ctas >= the
// tiles shared, so a range is at most n_sb long). A partial tile's contributors each write their accumulators to
// their own slot of `partials` and add the superblocks they covered to the tile's counter; the one that completes
// it sums every contributor's slot in block order (deterministic: the same bits whichever arrives last), runs the
// epilogue and resets the counter for the next launch.
struct ZbStreamK {
    float* partials;     // [2 * ctas][ACC / 4][THREADS] float4: slot 2j + (0: block j's first tile, 1: its second)
    unsigned* counters;  // [tiles - dp_tiles], zero between launches
    int dp_tiles, ctas, iters;
};

// Partials go through L2 only (st/ld .cg): another SM's block reads them.
__device__ __forceinline__ void zb_stcg4(float4* p, float x, float y, float z, float w) {
    asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
}

__device__ __forceinline__ float4 zb_ldcg4(const float4* p) {
    float4 v;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p)
                 : "memory");
    return v;
}

__device__ __forceinline__ int zb_sk_begin(const ZbStreamK& sk, int j) {
    return (int)((long long)j * sk.iters / sk.ctas);
}

// The block whose range holds iteration i: the largest j with zb_sk_begin(j) <= i, i.e. ceil((i + 1) ctas / iters) - 1.
__device__ __forceinline__ int zb_sk_owner(const ZbStreamK& sk, int i) {
    return (int)(((long long)(i + 1) * sk.ctas + sk.iters - 1) / sk.iters) - 1;
}

// Block j's partial of stream-K tile u (u is its first or its second tile).
template <int GROUPS, int THREADS>
__device__ __forceinline__ float4* zb_sk_slot(const ZbStreamK& sk, int j, int u, int n_sb, int tid) {
    const int second = zb_sk_begin(sk, j) / n_sb != u;
    return reinterpret_cast<float4*>(sk.partials) + (long long)(2 * j + second) * GROUPS * THREADS + tid;
}

// The largest divisor of n that is at most cap (n >= 1).
__host__ __device__ constexpr int zb_largest_divisor_upto(int n, int cap) { return n % cap == 0 ? cap : zb_largest_divisor_upto(n, cap - 1); }

// Block j covered `covered` superblocks of stream-K tile u in acc: publish them; true when this block completed the
// tile, acc then holding the whole sum (every thread the same registers of every contributor: one layout).
template <int ACC, int THREADS>
__device__ __forceinline__ bool zb_sk_fixup(float (&acc)[ACC], const ZbStreamK& sk, int j, int u, int covered, int n_sb,
                                            int tid, int* s_last) {
    static_assert(ACC % 4 == 0, "accumulators move as float4");
    constexpr int GROUPS = ACC / 4;
    float4* mine = zb_sk_slot<GROUPS, THREADS>(sk, j, u, n_sb, tid);
#pragma unroll
    for (int q = 0; q < GROUPS; ++q) zb_stcg4(mine + q * THREADS, acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]);
    __syncthreads();  // the block's slot is written before its thread 0 publishes it
    if (tid == 0) {
        __threadfence();
        const unsigned before = atomicAdd(sk.counters + u, (unsigned)covered);
        const bool last = before + (unsigned)covered == (unsigned)n_sb;
        if (last) sk.counters[u] = 0u;  // every contributor has arrived: ready for the next launch
        __threadfence();
        *s_last = last;
    }
    __syncthreads();
    if (!*s_last) return false;
    // Every slot, this block's too, from L2 (acc is free to take the sum: no second set of registers), one
    // contributor at a time in block order; CHUNK loads at a time are in flight together.
    constexpr int CHUNK = zb_largest_divisor_upto(GROUPS, 8);
    const int j_lo = zb_sk_owner(sk, u * n_sb), j_hi = zb_sk_owner(sk, (u + 1) * n_sb - 1);
#pragma unroll
    for (int e = 0; e < ACC; ++e) acc[e] = 0.f;
    for (int jj = j_lo; jj <= j_hi; ++jj) {
        const float4* slot = zb_sk_slot<GROUPS, THREADS>(sk, jj, u, n_sb, tid);
#pragma unroll
        for (int q0 = 0; q0 < GROUPS; q0 += CHUNK) {
            float4 v[CHUNK];
#pragma unroll
            for (int q = 0; q < CHUNK; ++q) v[q] = zb_ldcg4(slot + (q0 + q) * THREADS);
#pragma unroll
            for (int q = 0; q < CHUNK; ++q) {
                float* sum = acc + 4 * (q0 + q);
                sum[0] += v[q].x, sum[1] += v[q].y, sum[2] += v[q].z, sum[3] += v[q].w;
            }
        }
    }
    return true;
}

// One block's unit of work: output tile (tile_m, tile_n) over superblocks [sb0, sb1); sk_tile >= 0 for a stream-K
// tile (its index past dp_tiles), whose partial ranges meet in zb_sk_fixup.
struct ZbWork {
    int tile_m, tile_n, sb0, sb1, sk_tile;
};

// The kernel's arguments, as one value for zb_gemm_unit.
struct ZbGemmArgs {
    const unsigned char* w;
    const uint4* xp;
    float* y;
    int M, K, n_rows;
    unsigned long long expert_bytes;
    const unsigned *tiles, *offsets, *sorted_ids;
    int top_k, x_per_slot;
    int tile_entries;  // grouped: the entries of `tiles` (PERSIST's blocks stride over them)
    const unsigned char* w_up;
    const unsigned* routing;
    int routing_stride;
    ZbStreamK sk;
    const ZbTensorMap* maps;  // TMA: the weight boxes' maps (ZB_TMA_W_MAPS), then X's (ZB_TMA_X_MAP)
};

// ---- TMA stages (template parameter TMA: ZB_TMA_W, ZB_TMA_W | ZB_TMA_X) ----------------------------------------------
// The weights of a stage come as Q's TMA boxes of the block's BM rows (one 3-D map per box: bytes of a row, rows,
// experts; rows past M zero-filled), and, on a dense GEMM, X as two 2-D boxes of 64 fp16 x BN tokens with the
// 128-byte swizzle: exactly the k atoms zb_wgmma_x_offset lays out (tokens past T zero-filled). Maps: the weight
// boxes' at maps[0 ..], X's at maps[ZB_TMA_X_MAP].
#define ZB_TMA_W 1
#define ZB_TMA_X 2
#define ZB_TMA_W_MAPS 3
#define ZB_TMA_X_MAP 3

// A row's bytes in Q's boxes: its stage bytes, each once
template <class Q>
__host__ __device__ constexpr int zb_tma_row_bytes() {
    int bytes = 0;
    if constexpr (Q::TMA_BOXES > 0)
        for (int i = 0; i < Q::TMA_BOXES; ++i) bytes += Q::tma_box(i).width;
    return bytes;
}

template <class Q, int BM>
__device__ __forceinline__ void zb_tma_weights(const ZbTensorMap* maps, unsigned ws, unsigned bar, int step, int row0,
                                               int expert) {
    const int half = step * Q::HALVES, sb = half >> 1, h = half & 1;  // a stage is a half, or (WHOLE) a superblock
#pragma unroll
    for (int i = 0; i < Q::TMA_BOXES; ++i) {
        const ZbTmaBox box = Q::tma_box(i);
        zb_tma_load_3d(ws + BM * box.column, maps + i, sb * Q::BLOCK_BYTES + box.offset + h * box.half_step, row0,
                       expert, bar);
    }
}

// Half superblock `step` of tokens token0 .. token0 + BN - 1 into the stage's X area xs (1024-aligned): k atom a is
// fp16 columns 128 step + 64 a of the (permuted) rows.
template <int BN>
__device__ __forceinline__ void zb_tma_x(const ZbTensorMap* map, unsigned xs, unsigned bar, int step, int token0) {
#pragma unroll
    for (int atom = 0; atom < 2; ++atom) zb_tma_load_2d(xs + atom * BN * 128, map, 128 * step + 64 * atom, token0, bar);
}

// The shared memory a unit works in: the pipeline's stages (dynamic) and the token tables.
struct ZbShared {
    unsigned char* smem;  // dynamic shared memory (the SwiGLU epilogue stages its rows here)
    unsigned char* stages;  // the pipeline's first stage (1024-aligned for WGMMA)
    unsigned smem_base;     // its shared-space address
    unsigned* s_xoff;       // [BN] first 16-byte chunk of the token's X row, ZB_INVALID for padding
    int* s_orow;            // [BN] output row, -1 for padding
    int* s_last;            // stream-K: this block completed the tile
};

// One stage into the ring's next buffer: step `step` (a half superblock, or with Q::WHOLE a superblock) of the weight
// rows from w_row0 of `expert`, and X's rows by the token table s_xoff (or with ZB_TMA_X as boxes from token0). Every
// copier waits for the buffer's release, also where the leader alone copies (TMA): a thread waits on the empty barrier
// between two of its arrivals on it, as compute-sanitizer's synccheck requires. The leader issues the TMA boxes.
template <class Q, class Tile, int TMA, int STAGES, class XCopy, class Loader>
__device__ __forceinline__ void zb_produce_stage(ZbRing<STAGES>& ring, unsigned smem_base, const ZbTensorMap* maps,
                                                 bool leader, int step, int w_row0, int expert, int token0,
                                                 const XCopy& x_copy, const uint4* xp, const unsigned* s_xoff,
                                                 const Loader& loader) {
    constexpr bool TMA_W = (TMA & ZB_TMA_W) != 0, TMA_X = (TMA & ZB_TMA_X) != 0;
    constexpr int HALVES = Q::HALVES;
    const unsigned xs = smem_base + ring.write.index * Tile::STAGE_BYTES;
    ring.acquire();
    if constexpr (TMA_W) {
        if (leader) {
            const unsigned full = ring.full(ring.write.index);
            if constexpr (TMA_X) zb_mbar_arrive_expect_tx(full, Tile::STAGE_BYTES);  // the phase's one arrival
            else zb_mbar_expect_tx(full, Tile::W_BYTES);  // before its own arrive, with its X copies
            zb_tma_weights<Q, Tile::BM>(maps, xs + Tile::X_BYTES, full, step, w_row0, expert);
            if constexpr (TMA_X)
#pragma unroll
                for (int hh = 0; hh < HALVES; ++hh)
                    zb_tma_x<Tile::BN>(maps + ZB_TMA_X_MAP, xs + hh * Tile::X_HALF_BYTES, full, step * HALVES + hh,
                                       token0);
        }
    }
    if constexpr (TMA_X) {
        ring.write.next();
    } else {
#pragma unroll
        for (int hh = 0; hh < HALVES; ++hh) x_copy.issue(xs + hh * Tile::X_HALF_BYTES, xp, s_xoff, step * HALVES + hh);
        if constexpr (!TMA_W) loader.issue(xs + Tile::X_BYTES, step);
        ring.commit();
    }
}

// PRODUCER's warpgroup (setmaxnreg: few registers, the MMA warps take the rest): every stage of the block's units in
// order, each into the ring as soon as the MMA warps free a buffer; its 128 threads gather X, thread 0 issues the TMA
// weight boxes. The MMA warps never wait for each other to refill a buffer, only for its data.
#define ZB_PRODUCER_THREADS 128
#define ZB_PRODUCER_REGS 32
#define ZB_MMA_REGS 112  // 512 MMA threads x 112 + 128 x 32 = 640 x 96, the block's registers at launch

__device__ __forceinline__ void zb_setmaxnreg_producer() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(ZB_PRODUCER_REGS));
}

__device__ __forceinline__ void zb_setmaxnreg_mma() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(ZB_MMA_REGS));
}

// The producer warpgroup's own barrier (named barrier 1; 0 is __syncthreads)
__device__ __forceinline__ void zb_producer_sync() {
    asm volatile("bar.sync 1, %0;\n" ::"n"(ZB_PRODUCER_THREADS) : "memory");
}

template <class Q, class Tile, int TMA, int STAGES>
__device__ __forceinline__ void zb_produce_units(ZbRing<STAGES>& ring, unsigned smem_base, const ZbGemmArgs& a,
                                                 const ZbTokenTile& tt, const unsigned* s_xoff, int tid, int row0,
                                                 int units, int row_step) {
    const ZbXCopy<true, Tile::BN, ZB_PRODUCER_THREADS> x_copy(tid);
    const int n_steps = 2 * (a.K / 256) / Q::HALVES;
    for (int u = 0; u < units; ++u)
        for (int step = 0; step < n_steps; ++step)
            zb_produce_stage<Q, Tile, TMA>(ring, smem_base, a.maps, tid == 0, step, row0 + u * row_step, tt.expert, 0,
                                           x_copy, a.xp, s_xoff, 0);
    zb_cp_async_wait<0>();  // its copies have landed before it exits
}

// PERSIST: the producer of a persistent block. Its token tiles are blockIdx.y, + gridDim.y, ... up to the first unused
// entry of `tiles`. Each tile's tables go into one of two table buffers (`tables`, a two-buffer ring: the MMA warps
// release a buffer after the epilogue of the tile's last row block), then every stage of its row blocks into the
// stage ring. So the next tile's tables and first stages load under this tile's last stages and its epilogue. A
// published n_tokens of -1 ends the MMA warps' loop.
template <class Q, class Tile, int TMA, int STAGES>
__device__ __forceinline__ void zb_produce_tiles(ZbRing<STAGES>& ring, ZbRing<2>& tables, unsigned smem_base,
                                                 const ZbGemmArgs& a, ZbTokenTile* s_tt, unsigned* s_xoff, int* s_orow,
                                                 int tid, int row_blocks, int row_step) {
    constexpr int BN = Tile::BN;
    const ZbXCopy<true, BN, ZB_PRODUCER_THREADS> x_copy(tid);
    const int n_steps = 2 * (a.K / 256) / Q::HALVES;
    for (int tile_n = (int)blockIdx.y;; tile_n += (int)gridDim.y) {
        const int buf = tables.write.index;
        unsigned* const xoff = s_xoff + buf * BN;
        tables.acquire();
        ZbTokenTile tt{};
        const bool used = tile_n < a.tile_entries &&
                          zb_token_tile<BN, ZB_PRODUCER_THREADS, true>(tt, xoff, s_orow + buf * BN, tid, tile_n, a.K,
                                                                       a.n_rows, a.expert_bytes, a.tiles, a.offsets,
                                                                       a.sorted_ids, a.top_k, a.x_per_slot);
        if (tid == 0) {
            if (!used) tt.n_tokens = -1;
            s_tt[buf] = tt;
        }
        tables.publish();
        if (!used) break;
        zb_producer_sync();  // every producer thread's s_xoff entries, before the copies read them
        for (int u = 0; u < row_blocks; ++u)
            for (int step = 0; step < n_steps; ++step)
                zb_produce_stage<Q, Tile, TMA>(ring, smem_base, a.maps, tid == 0, step, u * row_step, tt.expert, 0,
                                               x_copy, a.xp, xoff, 0);
    }
    zb_cp_async_wait<0>();  // its copies have landed before it exits
}

// One unit of work of a block, on token tile tt (its tables in sh, visible to every thread): the pipeline over
// [sb0, sb1) into registers, then (a stream-K partial range) the meeting of partials, and the epilogue. ring: the
// wgmma path's stage ring, which holds `prefetched` of the unit's first stages already. next_row0 >= 0 (ALL_ROWS: the
// block's next unit, the same token tile at that row block): the ring buffers this unit frees take the next unit's
// first stages, so they load under this unit's last stages and its epilogue. Returns how many the ring holds.
// PRODUCER: a producer warpgroup fills the ring (zb_produce_units); these warps only wait for stages and release them.
template <class Q, int WM, int WN, int WARPS_M, int WARPS_N, int STAGES, bool TRIM_N, bool GROUPED, int EPI, bool WGMMA,
          bool QUARTERS, int TMA, bool PRODUCER>
__device__ __forceinline__ int zb_gemm_unit(const ZbGemmArgs& a, const ZbWork& unit, int sk_block, const ZbShared& sh,
                                            const ZbTokenTile& tt, ZbRing<STAGES>& ring, int prefetched = 0,
                                            int next_row0 = -1) {
    constexpr bool SWIGLU = EPI == ZB_EPI_SWIGLU_F16_GROUPED || EPI == ZB_EPI_SWIGLU_F16_PERM;
    using Tile = ZbTile<Q, WM, WN, WARPS_M, WARPS_N>;
    constexpr int BM = Tile::BM, BN = Tile::BN, THREADS = Tile::THREADS, HALVES = Q::HALVES;
    constexpr int OUT_ROWS = SWIGLU ? BM / 2 : BM;  // output rows per block
    const int tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int wm = warp % WARPS_M, wn = warp / WARPS_M;
    const int g = lane >> 2, c = lane & 3;
    const int M = a.M, K = a.K;
    const int row_bytes = (K / 256) * Q::BLOCK_BYTES;
    const int n_sb = K / 256;
    const int row0 = unit.tile_m * OUT_ROWS;
    unsigned* const s_xoff = sh.s_xoff;
    int* const s_orow = sh.s_orow;
    unsigned char* const stages = sh.stages;
    const unsigned smem_base = sh.smem_base;

    const unsigned long long w_base = tt.w_base;
    const int n_tokens = tt.n_tokens;

    const ZbRows rows{a.w + w_base, SWIGLU ? a.w_up + w_base : a.w + w_base, row0, M, row_bytes, OUT_ROWS};
    const typename Q::template Loader<BM, THREADS> loader(rows, tid);

    // Stage s holds `HALVES` half superblocks starting at half 2 * sb + h (step = (2 * sb + h) / HALVES); the
    // unit's steps are step0 + 0 .. n_steps - 1.
    const ZbXCopy<WGMMA, BN, THREADS> x_copy(tid);
    const uint4* const xp = a.xp;
    auto load_stage = [&](int stage, int step) {
        const unsigned xs = smem_base + stage * Tile::STAGE_BYTES;
#pragma unroll
        for (int hh = 0; hh < HALVES; ++hh) x_copy.issue(xs + hh * Tile::X_HALF_BYTES, xp, s_xoff, step * HALVES + hh);
        loader.issue(xs + Tile::X_BYTES, step);
    };

    float acc[WM][WN][4];
#pragma unroll
    for (int mt = 0; mt < WM; ++mt)
#pragma unroll
        for (int nt = 0; nt < WN; ++nt)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[mt][nt][v] = 0.f;

    const int step0 = 2 * unit.sb0 / HALVES, n_steps = 2 * (unit.sb1 - unit.sb0) / HALVES;
    int next_stages = 0;  // the next unit's stages in the ring (ALL_ROWS)
    if constexpr (!WGMMA) {  // the mma.sync pipeline's first STAGES - 1 stages (the wgmma path's go through its ring)
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < n_steps) load_stage(s, step0 + s);
            zb_cp_async_commit();
        }
    }

    // Lane-constant offsets: this lane's token row in the X tile; its weight rows' places (Q::row_place).
    const int r_x = wn * 8 * WN + g;
    const int n_tiles = TRIM_N ? min(max((n_tokens - wn * 8 * WN + 7) / 8, 0), WN) : WN;  // this warp's columns
    const unsigned x_even = r_x * 256 + c * 16 + (g & 1) * 64;
    const unsigned x_odd = r_x * 256 + c * 16 + 64 - (g & 1) * 64;
    unsigned row_place[WM][2];
#pragma unroll
    for (int mt = 0; mt < WM; ++mt)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) row_place[mt][rr] = Q::row_place(rows, wm * 16 * WM + mt * 16 + g + 8 * rr);
    if constexpr (WGMMA) {
        // Software-pipelined by piece (a half superblock, or with QUARTERS a quarter: 8 or 4 k-steps): the wgmmas of
        // piece t run while the lanes decode piece t + 1 into the other of two A buffers. QUARTERS halves those
        // buffers: 32 registers fewer, less the half's lane slices it keeps for its second quarter (what a 96-token
        // tile at two blocks per SM needs), at the cost of a wgmma wait per quarter.
        // The stages go through the ring (ZbRing), all STAGES buffers in use: once the wgmma wait retires the last
        // piece of stage u (after the first piece of stage u + 1 is issued), a thread releases stage u, decodes its next
        // piece, and then fills u's buffer with stage u + STAGES, once every thread has released it. A warp waits
        // for the others only where it would overwrite what they still read, and a stage of two or more pieces
        // frees its buffer a piece before the next stage ends.
        static_assert(STAGES >= 3, "the wgmma pipeline decodes stage s + 1 while stage s's wgmmas run");
        constexpr int PIECES = QUARTERS ? 2 : 1, STEPS = 8 / PIECES;  // pieces per half, k-steps per piece
        constexpr int STAGE_PIECES = PIECES * HALVES;                  // divides 2 * PIECES, a superblock's pieces
        float(&acc_flat)[BN / 2] = reinterpret_cast<float(&)[BN / 2]>(acc);
        const int r_w = wm * 16 + g;
        unsigned a_frag[2][STEPS][4];  // piece t's A fragments in a_frag[t & 1]
        typename Q::Lane lanes[2];     // the current half's slices (its pieces decode from them)
        constexpr bool TMA_W = (TMA & ZB_TMA_W) != 0, TMA_X = (TMA & ZB_TMA_X) != 0;
        auto produce_for = [&](int step, int w_row0) {  // step `step` of weight rows w_row0.. into the ring's next buffer
            zb_produce_stage<Q, Tile, TMA>(ring, smem_base, a.maps, tid == 0, step, w_row0, tt.expert, unit.tile_n * BN,
                                           x_copy, xp, s_xoff, loader);
        };
        auto produce = [&](int s) { produce_for(step0 + s, row0); };  // the unit's stage s
        // A freed buffer: the next unit's next stage (it covers the whole K range: its steps start at 0). Only TMA
        // weights take another row block's coordinates; the cp.async loader holds this unit's row addresses.
        auto produce_next = [&]() {
            if constexpr (TMA_W)
                if (next_row0 >= 0 && next_stages < min(STAGES, n_steps)) produce_for(next_stages++, next_row0);
        };
        auto stage_bytes = [&]() { return ring.read.index * Tile::STAGE_BYTES; };  // the stage being read
#pragma unroll
        for (int s = 0; s < STAGES; ++s)
            if (!PRODUCER && s >= prefetched && s < n_steps) produce(s);
        ring.template wait_read<!TMA_X>();
        zb_wgmma_load<Q, BM>(lanes, stages + stage_bytes() + Tile::X_BYTES, r_w, c, 0, unit.sb0, row_place[0]);
        zb_wgmma_decode<Q, STEPS>(a_frag[0], lanes, 0);
        const int n_pieces = 2 * PIECES * (unit.sb1 - unit.sb0);
        // After piece t's wgmmas are issued; j: its place in its superblock (a constant once unrolled).
        auto advance = [&](int t, int j, unsigned (&a_next)[STEPS][4]) {
            const int j_next = (j + 1) % (2 * PIECES);
            zb_wgmma_wait<1>();  // piece t - 1 retired
            const bool frees = j % STAGE_PIECES == 0 && t > 0;  // ... and it was the last of stage t / STAGE_PIECES - 1
            if (frees) ring.release();
            if (t + 1 >= n_pieces) {
                if (!PRODUCER && frees) produce_next();
                return;
            }
            if ((j + 1) % STAGE_PIECES == 0) {  // piece t + 1 opens the next stage
                ring.read.next();
                ring.template wait_read<!TMA_X>();
            }
            if (j_next % PIECES == 0)  // piece t + 1 opens a half (stages hold whole halves: its stage is resident)
                zb_wgmma_load<Q, BM>(lanes, stages + stage_bytes() + Tile::X_BYTES, r_w, c, j_next / PIECES,
                                     unit.sb0 + (t + 1) / (2 * PIECES), row_place[0]);
            zb_wgmma_decode<Q, STEPS>(a_next, lanes, j_next % PIECES);
            const int refill = t / STAGE_PIECES - 1 + STAGES;  // the stage that goes where the freed one was
            if (!PRODUCER && frees) {
                if (refill < n_steps) produce(refill);
                else produce_next();
            }
        };
        // The low descriptor word of half h's X in the stage being read: the stages' word plus the offset / 16
        const unsigned x_desc0 = zb_wgmma_desc_sw128_lo(smem_base);
        auto x_desc = [&](int h) { return x_desc0 + (stage_bytes() + (h % HALVES) * Tile::X_HALF_BYTES) / 16; };
        for (int t = 0; t < n_pieces; t += 2 * PIECES) {  // one superblock: its pieces j alternate between the buffers
#pragma unroll
            for (int j = 0; j < 2 * PIECES; ++j) {
                zb_wgmma_issue_piece<BN, TRIM_N, STEPS>(acc_flat, a_frag[j & 1], x_desc(j / PIECES),
                                                        (j % PIECES) * STEPS, n_tokens);
                advance(t + j, j, a_frag[(j + 1) & 1]);
            }
        }
        zb_wgmma_wait<0>();
        ring.release();  // the unit's last stage: the ring is whole again for the block's next unit
        ring.read.next();
        if constexpr (!PRODUCER) produce_next();
    } else {
        int stage = 0;
        const unsigned char* ws = stages;  // the current stage's base
        for (int sb = unit.sb0; sb < unit.sb1; ++sb) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // unrolled: h is a constant in each copy
                if (h % HALVES == 0) {
                    const int step = (2 * (sb - unit.sb0) + h) / HALVES;
                    zb_cp_async_wait<STAGES - 2>();
                    __syncthreads();
                    const int next = step + STAGES - 1;
                    const int next_stage = stage == 0 ? STAGES - 1 : stage - 1;  // (step + STAGES - 1) % STAGES
                    if (next < n_steps) load_stage(next_stage, step0 + next);
                    zb_cp_async_commit();
                    ws = stages + stage * Tile::STAGE_BYTES;
                }
                if (n_tiles > 0) {  // warp-uniform: a trimmed warp without tokens only helps with the copies
                    typename Q::Lane lanes[WM][2];
#pragma unroll
                    for (int mt = 0; mt < WM; ++mt)
#pragma unroll
                        for (int rr = 0; rr < 2; ++rr)
                            lanes[mt][rr] = Q::template load<BM>(ws + Tile::X_BYTES, wm * 16 * WM + mt * 16 + g + 8 * rr,
                                                                 c, h, sb, row_place[mt][rr]);
                    const unsigned char* xh = ws + (h % HALVES) * Tile::X_HALF_BYTES;
                    zb_mma_half<Q, WM, WN>(acc, lanes, xh + x_even, xh + x_odd, n_tiles);
                }
                if (h % HALVES == HALVES - 1) stage = stage == STAGES - 1 ? 0 : stage + 1;
            }
        }
    }
    zb_cp_async_wait<0>();

    if (unit.sk_tile >= 0 && (unit.sb0 > 0 || unit.sb1 < n_sb)) {  // a partial K range: meet the others
        float(&acc_all)[WM * WN * 4] = reinterpret_cast<float(&)[WM * WN * 4]>(acc);
        if (!zb_sk_fixup<WM * WN * 4, THREADS>(acc_all, a.sk, sk_block, unit.sk_tile, unit.sb1 - unit.sb0, n_sb, tid,
                                               sh.s_last))
            return 0;
    }
    // C fragment: c0,c1 = (row g, tokens 2c, 2c+1); c2,c3 = (row g+8, tokens 2c, 2c+1).
    if constexpr (SWIGLU) {
        zb_epilogue_swiglu<Tile, STAGES, EPI, WM, WN>(acc, sh.smem, s_orow, tt, a.y, M, a.n_rows, row0, tid, wm, wn, g,
                                                      c);
    } else {
        zb_epilogue_rows<EPI, WM, WN>(acc, s_orow, a.y, M, row0, wm, wn, g, c, a.top_k, a.routing, a.routing_stride);
    }
    return next_stages;
}

// TRIM_N: the block's token extent is its real token count rounded up to 8, not BN: a warp skips the
// dequant and MMAs of 8-token columns that hold no token (with a BN at least the largest expert bucket,
// the work unit is (expert, row block) with the whole bucket as N, every weight read and decoded once).
// Without it every block computes all BN columns, padding included (the original schedule).
// WGMMA: the math of a half is zb_wgmma_issue_piece (sm_90a only; any format; WM = 1, WARPS_N = 1, whole
// warpgroups along M) instead of mma.sync, and X (in the wgmma order) is stored as wgmma reads it. QUARTERS (wgmma
// only): its A fragments are decoded and multiplied a quarter superblock at a time (32 registers fewer).
// Grid: dense, one dimension: tile b < sk_dp_tiles (row block b % row blocks, token tile b / row blocks) per block,
// then sk_ctas stream-K blocks (ZbStreamK; none when sk_ctas is 0). Grouped: (row block, tile entry).
// STREAM_K compiles the stream-K blocks in (dense only): a whole tile and a stream-K block's units are separate
// inlined copies of zb_gemm_unit, the whole tile's K range a compile-time fact in its copy; without STREAM_K the kernel
// is the whole-tile copy alone (a second copy in the same kernel changes its register allocation: 8% on Q6_K).
// ALL_ROWS (grouped, TMA weights): grid (1, tile entries); a block runs every row block of its token tile in turn, its
// token tables fetched once and each next row block's first stages loaded under the last stages and the epilogue of
// the one before (T2's GEMM alone 2-4% faster: results/h200/allrows-20261204/).
// PRODUCER (grouped, TMA weights, 16 MMA warps): one more warpgroup fills the ring (zb_produce_units) with few
// registers, the MMA warps only wait for stages and release them (results/h200/producer-20261204/).
// PERSIST (PRODUCER and ALL_ROWS): grid (1, at most the resident blocks); a block runs token tiles blockIdx.y,
// + gridDim.y, ... (zb_produce_tiles), each tile's tables and first stages loaded under the one before.
template <class Q, int WM, int WN, int WARPS_M, int WARPS_N, int STAGES, int MIN_BLOCKS, bool TRIM_N, bool GROUPED,
          int EPI, bool WGMMA = false, bool STREAM_K = false, bool QUARTERS = false, int TMA = 0, bool ALL_ROWS = false,
          bool PRODUCER = false, bool PERSIST = false>
__global__ void __launch_bounds__(32 * WARPS_M * WARPS_N + (PRODUCER ? ZB_PRODUCER_THREADS : 0), MIN_BLOCKS)
gemm_kquant_mma(const unsigned char* __restrict__ w,   // Q rows; expert e at w + e * expert_bytes
                const uint4* __restrict__ xp,          // permuted fp16 activations, K/8 chunks per row
                float* __restrict__ y,                 // [out rows][M] (the epilogue's output)
                int M, int K, int n_rows,              // n_rows: tokens (dense), capacity (SWIGLU_F16_GROUPED)
                unsigned long long expert_bytes,
                const unsigned* __restrict__ tiles,       // grouped: (expert << 16 | tile) or ZB_INVALID
                const unsigned* __restrict__ offsets,     // grouped: [E + 1] bucket starts
                const unsigned* __restrict__ sorted_ids,  // grouped: token-slot ids t * top_k + slot
                int top_k, int x_per_slot,
                const unsigned char* __restrict__ w_up,   // SWIGLU: the up rows (same layout as w)
                const unsigned* __restrict__ routing,     // COMBINE: [T][routing_stride], weights at +top_k
                int routing_stride,
                float* __restrict__ sk_partials,          // dense stream-K (ZbStreamK)
                unsigned* __restrict__ sk_counters,
                int sk_dp_tiles, int sk_ctas, int sk_iters,
                const ZbTensorMap* __restrict__ tma_maps,  // TMA: the maps of zb_tma_weights and zb_tma_x
                int tile_entries) {                        // grouped: the entries of `tiles`
    constexpr bool SWIGLU = EPI == ZB_EPI_SWIGLU_F16_GROUPED || EPI == ZB_EPI_SWIGLU_F16_PERM;
    static_assert(EPI >= ZB_EPI_STORE && EPI <= ZB_EPI_COMBINE, "unknown epilogue");
    static_assert(STAGES >= 2, "the pipeline loads stage s + STAGES - 1 while computing stage s");
    static_assert(!SWIGLU || (WM * WARPS_M) % 2 == 0, "SwiGLU splits the block's rows into gate and up halves");
    static_assert((!SWIGLU && EPI != ZB_EPI_COMBINE) || GROUPED, "the SwiGLU and combine epilogues are for grouped MoE");
    static_assert(!WGMMA || (WM == 1 && WARPS_N == 1 && WARPS_M % 4 == 0),
                  "the wgmma path: one 16-row slice per warp, whole warpgroups along M");
    static_assert(!(STREAM_K && GROUPED), "stream-K schedules dense GEMMs");
    static_assert(!QUARTERS || WGMMA, "QUARTERS pipelines the wgmma path's A fragments");
    // ZbRing's full barrier orders a stage's cp.asyncs, not ZbQ6K's plain tail store, which only ZbQ6KHalf fences
    static_assert(!WGMMA || Q::HALVES == 1 || Q::WHOLE,
                  "the wgmma path stages half superblocks (Q6_K: ZbQ6KHalf), or whole Q4_K / Q5_K blocks");
    static_assert(TMA == 0 || TMA == ZB_TMA_W || TMA == (ZB_TMA_W | ZB_TMA_X), "TMA: the weights, or weights and X");
    static_assert(!TMA || (WGMMA && Q::TMA_BOXES > 0 && Q::TMA_BOXES <= ZB_TMA_W_MAPS && !SWIGLU),
                  "TMA stages: the wgmma path's ring, a format of aligned boxes, one weight matrix");
    static_assert(!TMA || zb_tma_row_bytes<Q>() == Q::ROW_STAGE_BYTES, "the boxes fill a row's stage bytes");
    static_assert(!(TMA & ZB_TMA_X) || !GROUPED, "a grouped tile's X rows are gathered token by token (cp.async)");
    static_assert(!ALL_ROWS || (GROUPED && (TMA & ZB_TMA_W)), "ALL_ROWS: grouped, the next row block's weights by TMA");
    static_assert(!PRODUCER || (GROUPED && TMA == ZB_TMA_W && MIN_BLOCKS == 1 && WARPS_M * WARPS_N == 16),
                  "PRODUCER: grouped, TMA weights and gathered X rows, 16 MMA warps (ZB_MMA_REGS's budget)");
    static_assert(!PERSIST || (PRODUCER && ALL_ROWS), "PERSIST: the producer runs the block's tiles, all rows of each");
    using Tile = ZbTile<Q, WM, WN, WARPS_M, WARPS_N>;
    constexpr int BN = Tile::BN;
    constexpr int OUT_ROWS = SWIGLU ? Tile::BM / 2 : Tile::BM;
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int TABLES = PERSIST ? 2 : 1;  // PERSIST: the tables of a tile and of the next
    __shared__ unsigned s_xoff[TABLES * BN];
    __shared__ int s_orow[TABLES * BN];
    __shared__ int s_last;
    __shared__ __align__(8) unsigned long long s_ring[WGMMA ? 2 * STAGES : 1];  // ZbRing's barriers (wgmma path)
    // WGMMA: the 128-byte swizzle repeats every 1024 bytes of address: stages start 1024-aligned (the host adds
    // the slack) and are multiples of 1024 bytes (BM a multiple of 64)
    static_assert(!WGMMA || Tile::STAGE_BYTES % 1024 == 0, "wgmma X atoms must stay 1024-byte aligned");
    const unsigned smem_pad = WGMMA ? (1024u - (zb_smem_addr(smem) & 1023u)) & 1023u : 0u;
    const ZbShared sh{smem, smem + smem_pad, zb_smem_addr(smem + smem_pad), s_xoff, s_orow, &s_last};
    const ZbGemmArgs args{w,      xp,   y,     M,         K,          n_rows, expert_bytes, tiles, offsets, sorted_ids,
                          top_k, x_per_slot, tile_entries, w_up, routing, routing_stride,
                          ZbStreamK{sk_partials, sk_counters, sk_dp_tiles, sk_ctas, sk_iters}, tma_maps};
    const int n_sb = K / 256;
    const int row_blocks = (M + OUT_ROWS - 1) / OUT_ROWS;
    ZbRing<STAGES> ring{zb_smem_addr(s_ring)};
    if constexpr (WGMMA)  // ready before first use: token_tile's __syncthreads comes before it
        if (threadIdx.x == 0) {
            ring.init((TMA & ZB_TMA_X) ? 1 : PRODUCER ? ZB_PRODUCER_THREADS : Tile::THREADS, Tile::THREADS);
            if constexpr (TMA != 0)
#pragma unroll
                for (int i = 0; i < ZB_TMA_W_MAPS + 1; ++i)
                    if (i < Q::TMA_BOXES || (i == ZB_TMA_X_MAP && (TMA & ZB_TMA_X))) zb_tma_prefetch(tma_maps + i);
        }
    // Launched as the routing launch's programmatic dependent (T2), the block may be here before the tiles, buckets and
    // permuted X exist: nothing above reads what a previous kernel writes, everything below may.
    zb_pdl_wait();

    // A unit's token tile, its tables visible to every thread; false for an unused grouped tile entry (block-uniform)
    auto token_tile = [&](ZbTokenTile& tt, int tile_n) {
        // the MMA warps fill the tables (a producer warp's columns would repeat theirs)
        const int filler = (int)threadIdx.x < Tile::THREADS ? (int)threadIdx.x : BN;
        if (!zb_token_tile<BN, Tile::THREADS, GROUPED>(tt, s_xoff, s_orow, filler, tile_n, K, n_rows, expert_bytes,
                                                       tiles, offsets, sorted_ids, top_k, x_per_slot))
            return false;
        __syncthreads();
        return true;
    };
    auto run_unit = [&](const ZbWork& unit, int sk_block, const ZbTokenTile& tt, int prefetched = 0, int next_row0 = -1,
                        const ZbShared* tables = nullptr) {  // tables: the unit's token tables, if not sh's
        return zb_gemm_unit<Q, WM, WN, WARPS_M, WARPS_N, STAGES, TRIM_N, GROUPED, EPI, WGMMA, QUARTERS, TMA, PRODUCER>(
            args, unit, sk_block, tables ? *tables : sh, tt, ring, prefetched, next_row0);
    };
    if constexpr (PERSIST) {  // the producer fetches every tile's tables; the MMA warps read them from s_tt
        __shared__ ZbTokenTile s_tt[2];
        __shared__ __align__(8) unsigned long long s_tables[4];
        ZbRing<2> tables{zb_smem_addr(s_tables)};
        if (threadIdx.x == 0) tables.init(ZB_PRODUCER_THREADS, Tile::THREADS);
        __syncthreads();  // the rings' barriers are ready
        if ((int)threadIdx.x >= Tile::THREADS) {
            zb_setmaxnreg_producer();
            zb_produce_tiles<Q, Tile, TMA>(ring, tables, sh.smem_base, args, s_tt, s_xoff, s_orow,
                                           (int)threadIdx.x - Tile::THREADS, row_blocks, OUT_ROWS);
            return;
        }
        zb_setmaxnreg_mma();
        for (int tile_n = (int)blockIdx.y;; tile_n += (int)gridDim.y) {
            const int buf = tables.read.index;
            tables.template wait_read<false>();
            const ZbTokenTile tt = s_tt[buf];
            if (tt.n_tokens < 0) return;
            const ZbShared tile_sh{sh.smem, sh.stages, sh.smem_base, s_xoff + buf * BN, s_orow + buf * BN, sh.s_last};
            for (int rb = 0; rb < row_blocks; ++rb) run_unit(ZbWork{rb, tile_n, 0, n_sb, -1}, -1, tt, 0, -1, &tile_sh);
            tables.read.next();
            tables.release();  // the epilogues are done with its s_orow
        }
    }
    if constexpr (PRODUCER) {  // the producer warpgroup and the MMA warps part after the token tables
        ZbTokenTile tt;
        if (!token_tile(tt, (int)blockIdx.y)) return;
        if ((int)threadIdx.x >= Tile::THREADS) {
            zb_setmaxnreg_producer();
            zb_produce_units<Q, Tile, TMA>(ring, sh.smem_base, args, tt, s_xoff, (int)threadIdx.x - Tile::THREADS,
                                           ALL_ROWS ? 0 : (int)blockIdx.x * OUT_ROWS, ALL_ROWS ? row_blocks : 1, OUT_ROWS);
            return;
        }
        zb_setmaxnreg_mma();
        for (int rb = ALL_ROWS ? 0 : (int)blockIdx.x; rb < (ALL_ROWS ? row_blocks : (int)blockIdx.x + 1); ++rb)
            run_unit(ZbWork{rb, (int)blockIdx.y, 0, n_sb, -1}, -1, tt);
        return;
    }
    if constexpr (ALL_ROWS) {  // row blocks 0, 1, ... of token tile blockIdx.y
        ZbTokenTile tt;
        if (!token_tile(tt, (int)blockIdx.y)) return;
        for (int rb = 0, prefetched = 0; rb < row_blocks; ++rb)
            prefetched = run_unit(ZbWork{rb, (int)blockIdx.y, 0, n_sb, -1}, -1, tt, prefetched,
                                  rb + 1 < row_blocks ? (rb + 1) * OUT_ROWS : -1);
        return;
    }
    if (!STREAM_K || (int)blockIdx.x < args.sk.dp_tiles) {  // a whole tile
        const int tile = (int)blockIdx.x;
        const ZbWork unit = GROUPED ? ZbWork{(int)blockIdx.x, (int)blockIdx.y, 0, n_sb, -1}
                                    : ZbWork{tile % row_blocks, tile / row_blocks, 0, n_sb, -1};
        ZbTokenTile tt;
        if (token_tile(tt, unit.tile_n)) run_unit(unit, -1, tt);
        return;
    }
    // A stream-K block: its range's one or two tiles
    const int j = (int)blockIdx.x - args.sk.dp_tiles;
    const int begin = zb_sk_begin(args.sk, j), end = zb_sk_begin(args.sk, j + 1);
    for (int it = begin; it < end;) {
        const int u = it / n_sb, tile = args.sk.dp_tiles + u;
        const ZbWork unit{tile % row_blocks, tile / row_blocks, it - u * n_sb, min(n_sb, end - u * n_sb), u};
        if (it > begin) __syncthreads();  // the previous unit's epilogue is done with s_orow and the stages
        ZbTokenTile tt;
        token_tile(tt, unit.tile_n);  // a dense tile: always used
        run_unit(unit, j, tt);
        it = u * n_sb + unit.sb1;
    }
}

#ifdef ZINCBENCH_COMPILE_CHECK
// Ahead-of-time compile checks (nvcc, no GPU) instantiate representative tile shapes of each format and
// every epilogue; at run time NVRTC instantiates the shapes an experiment declares through name expressions.
#define ZB_INSTANTIATE(Q, WM, WN, WARPS_M, WARPS_N, STAGES, MIN_BLOCKS, TRIM_N, GROUPED, ...)                      \
    template __global__ void gemm_kquant_mma<Q, WM, WN, WARPS_M, WARPS_N, STAGES, MIN_BLOCKS, TRIM_N, GROUPED, __VA_ARGS__>( \
        const unsigned char*, const uint4*, float*, int, int, int, unsigned long long, const unsigned*,            \
        const unsigned*, const unsigned*, int, int, const unsigned char*, const unsigned*, int, float*, unsigned*, int, \
        int, int, const ZbTensorMap*, int);
ZB_INSTANTIATE(ZbQ4K, 1, 2, 4, 1, 3, 1, false, true, ZB_EPI_STORE)
ZB_INSTANTIATE(ZbQ4K, 2, 8, 4, 2, 2, 1, false, false, ZB_EPI_STORE)
ZB_INSTANTIATE(ZbQ4K, 1, 8, 4, 1, 3, 1, true, true, ZB_EPI_STORE)
ZB_INSTANTIATE(ZbQ4K, 1, 4, 4, 1, 4, 1, false, true, ZB_EPI_SWIGLU_F16_GROUPED)
ZB_INSTANTIATE(ZbQ4K, 1, 8, 8, 1, 2, 1, true, true, ZB_EPI_SWIGLU_F16_PERM)
ZB_INSTANTIATE(ZbQ4K, 1, 2, 4, 1, 3, 1, false, true, ZB_EPI_COMBINE)
ZB_INSTANTIATE(ZbQ6K, 1, 2, 4, 1, 2, 1, false, true, ZB_EPI_STORE)
ZB_INSTANTIATE(ZbQ6K, 1, 8, 8, 1, 2, 2, false, true, ZB_EPI_STORE)
ZB_INSTANTIATE(ZbQ6K, 2, 8, 4, 1, 2, 1, false, false, ZB_EPI_STORE)
ZB_INSTANTIATE(ZbQ6K, 1, 8, 4, 1, 2, 1, true, true, ZB_EPI_STORE)
ZB_INSTANTIATE(ZbQ6K, 1, 8, 8, 1, 2, 1, false, true, ZB_EPI_COMBINE)
ZB_INSTANTIATE(ZbQ5K, 1, 2, 4, 1, 3, 1, false, true, ZB_EPI_STORE)
ZB_INSTANTIATE(ZbQ6KR, 2, 8, 4, 1, 3, 1, false, false, ZB_EPI_STORE)
ZB_INSTANTIATE(ZbQ6KR, 1, 8, 8, 1, 2, 1, false, true, ZB_EPI_COMBINE)
ZB_INSTANTIATE(ZbQ5K, 2, 8, 4, 1, 2, 1, false, false, ZB_EPI_STORE)
ZB_INSTANTIATE(ZbQ5K, 1, 8, 8, 1, 2, 1, false, true, ZB_EPI_COMBINE)
ZB_INSTANTIATE(ZbQ4KWhole, 1, 2, 4, 1, 3, 1, false, true, ZB_EPI_STORE)
ZB_INSTANTIATE(ZbQ5KWhole, 2, 8, 4, 1, 2, 1, false, false, ZB_EPI_STORE)
ZB_INSTANTIATE(ZbQ4K, 2, 8, 4, 1, 3, 1, false, false, ZB_EPI_STORE, false, true)
ZB_INSTANTIATE(ZbQ6K, 1, 16, 8, 1, 2, 1, false, false, ZB_EPI_STORE, false, true)
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // the wgmma path (sm_90a): dense, trimmed grouped, and the SwiGLU epilogue
#define ZB_INSTANTIATE_WGMMA(WN, WARPS_M, STAGES, MIN_BLOCKS, TRIM_N, GROUPED, EPI) \
    ZB_INSTANTIATE(ZbQ4K, 1, WN, WARPS_M, 1, STAGES, MIN_BLOCKS, TRIM_N, GROUPED, EPI, true)
ZB_INSTANTIATE_WGMMA(16, 8, 4, 1, false, false, ZB_EPI_STORE)
ZB_INSTANTIATE_WGMMA(8, 16, 3, 1, false, false, ZB_EPI_STORE)
ZB_INSTANTIATE_WGMMA(32, 8, 3, 1, false, false, ZB_EPI_STORE)
ZB_INSTANTIATE(ZbQ4K, 1, 32, 8, 1, 3, 1, false, false, ZB_EPI_STORE, true, true)
ZB_INSTANTIATE_WGMMA(2, 4, 4, 1, false, true, ZB_EPI_STORE)
ZB_INSTANTIATE_WGMMA(16, 8, 3, 1, true, true, ZB_EPI_STORE)
ZB_INSTANTIATE_WGMMA(12, 8, 3, 1, true, true, ZB_EPI_STORE)
ZB_INSTANTIATE_WGMMA(8, 8, 4, 2, true, true, ZB_EPI_STORE)
ZB_INSTANTIATE_WGMMA(8, 4, 3, 1, true, true, ZB_EPI_SWIGLU_F16_PERM)
ZB_INSTANTIATE(ZbQ6KHalf, 1, 16, 8, 1, 4, 1, false, false, ZB_EPI_STORE, true)
ZB_INSTANTIATE(ZbQ6KHalf, 1, 24, 8, 1, 3, 1, false, false, ZB_EPI_STORE, true, true)
ZB_INSTANTIATE(ZbQ6KHalf, 1, 32, 4, 1, 3, 1, false, false, ZB_EPI_STORE, true, true)
ZB_INSTANTIATE(ZbQ6KHalf, 1, 8, 8, 1, 3, 1, true, true, ZB_EPI_COMBINE, true)
// QUARTERS: the 96- and 80-token grouped tiles at two blocks per SM, and a stream-K Q6_K one
ZB_INSTANTIATE(ZbQ4K, 1, 12, 8, 1, 3, 2, true, true, ZB_EPI_STORE, true, false, true)
ZB_INSTANTIATE(ZbQ4K, 1, 10, 8, 1, 3, 2, true, true, ZB_EPI_STORE, true, false, true)
ZB_INSTANTIATE(ZbQ6KHalf, 1, 24, 8, 1, 3, 1, false, false, ZB_EPI_STORE, true, true, true)
ZB_INSTANTIATE(ZbQ6KR, 1, 24, 8, 1, 3, 1, false, false, ZB_EPI_STORE, true, true, true)
ZB_INSTANTIATE(ZbQ6KR, 1, 16, 8, 1, 4, 1, false, false, ZB_EPI_STORE, true)
// TMA stages: dense with X (stream-K, quarters), grouped with the weights alone, every format with boxes
ZB_INSTANTIATE(ZbQ6KR, 1, 16, 8, 1, 4, 1, false, false, ZB_EPI_STORE, true, true, false, ZB_TMA_W | ZB_TMA_X)
ZB_INSTANTIATE(ZbQ4K, 1, 24, 8, 1, 3, 1, false, false, ZB_EPI_STORE, true, true, true, ZB_TMA_W | ZB_TMA_X)
ZB_INSTANTIATE(ZbQ5K, 1, 8, 4, 1, 3, 1, false, false, ZB_EPI_STORE, true, false, false, ZB_TMA_W)
ZB_INSTANTIATE(ZbQ4K, 1, 4, 8, 1, 4, 2, true, true, ZB_EPI_STORE, true, false, false, ZB_TMA_W)
ZB_INSTANTIATE(ZbQ4K, 1, 10, 8, 1, 3, 2, true, true, ZB_EPI_STORE, true, false, true, ZB_TMA_W)
ZB_INSTANTIATE(ZbQ6KR, 1, 8, 8, 1, 3, 1, true, true, ZB_EPI_COMBINE, true, false, false, ZB_TMA_W)
// whole-superblock stages: grouped and dense, TMA or cp.async, halves or quarters, SwiGLU and combine epilogues
ZB_INSTANTIATE(ZbQ4KWhole, 1, 2, 8, 1, 4, 1, false, true, ZB_EPI_STORE, true, false, false, ZB_TMA_W)
ZB_INSTANTIATE(ZbQ4KWhole, 1, 12, 8, 1, 3, 2, true, true, ZB_EPI_STORE, true, false, true, ZB_TMA_W)
ZB_INSTANTIATE(ZbQ4KWhole, 1, 16, 8, 1, 3, 1, false, false, ZB_EPI_STORE, true, true, true, ZB_TMA_W | ZB_TMA_X)
ZB_INSTANTIATE(ZbQ5KWhole, 1, 8, 4, 1, 3, 1, true, true, ZB_EPI_COMBINE, true)
ZB_INSTANTIATE(ZbQ4KWhole, 1, 8, 4, 1, 3, 1, true, true, ZB_EPI_SWIGLU_F16_PERM, true)
// ALL_ROWS: T2's 256-row tiles at N_e 32 and 64, and the combine epilogue
ZB_INSTANTIATE(ZbQ4KWhole, 1, 8, 16, 1, 3, 1, true, true, ZB_EPI_STORE, true, false, false, ZB_TMA_W, true)
ZB_INSTANTIATE(ZbQ4K, 1, 12, 16, 1, 4, 1, true, true, ZB_EPI_STORE, true, false, true, ZB_TMA_W, true)
ZB_INSTANTIATE(ZbQ6KR, 1, 8, 8, 1, 3, 1, true, true, ZB_EPI_COMBINE, true, false, false, ZB_TMA_W, true)
// PRODUCER (quarters: the MMA warps' 112 registers): 256x64 and 256x96 tiles, with allrows and without, and the combine
// epilogue
ZB_INSTANTIATE(ZbQ4KWhole, 1, 8, 16, 1, 3, 1, true, true, ZB_EPI_STORE, true, false, true, ZB_TMA_W, false, true)
ZB_INSTANTIATE(ZbQ4K, 1, 12, 16, 1, 4, 1, true, true, ZB_EPI_STORE, true, false, true, ZB_TMA_W, true, true)
ZB_INSTANTIATE(ZbQ6KR, 1, 8, 16, 1, 3, 1, true, true, ZB_EPI_COMBINE, true, false, true, ZB_TMA_W, true, true)
// PERSIST: the same producer tiles, each block running several token tiles
ZB_INSTANTIATE(ZbQ4KWhole, 1, 8, 16, 1, 3, 1, true, true, ZB_EPI_STORE, true, false, true, ZB_TMA_W, true, true, true)
ZB_INSTANTIATE(ZbQ4K, 1, 12, 16, 1, 4, 1, true, true, ZB_EPI_STORE, true, false, true, ZB_TMA_W, true, true, true)
ZB_INSTANTIATE(ZbQ6KR, 1, 8, 16, 1, 3, 1, true, true, ZB_EPI_COMBINE, true, false, true, ZB_TMA_W, true, true, true)
#endif
#endif
