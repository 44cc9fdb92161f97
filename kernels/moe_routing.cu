// GPU-side grouping of routed tokens by expert (no host round-trip), for the grouped MoE paths.
//
// Routing table: ids[t*routing_stride + slot] (u32), slot < top_k, distinct experts per token;
// routing_stride = top_k for a plain [T][top_k] table, 2*top_k for the engine's [T][2*n_used] table.
// A work item is p = t*top_k + slot. Outputs of moe_route_build:
//   offsets[E+1]    exclusive prefix sum of the per-expert counts (offsets[E] = routed items)
//   sorted_ids[P]   work items in expert order: expert e owns sorted_ids[offsets[e] .. offsets[e+1])
//                   (order inside one expert follows the atomics and is arbitrary)
//   tiles[max_tiles] work tiles of a grouped GEMM with token-tile width tile_n: entry = e << 16 | j for
//                   the j-th tile of expert e, 0xFFFFFFFF for unused slots; max_tiles = ceil(P/tile_n) + E
//   status[2]       [0] ids >= E (skipped), [1] largest bucket: read by the caller after timing
#include "zb_half.cuh"
#include "zb_pdl.cuh"
#include "zb_xperm.cuh"

#define INVALID_ENTRY 0xFFFFFFFFu
#define ROUTE_MAX_EXPERTS 1024u
#define ROUTE_CACHE 12288u  // moe_route_build's ids kept in shared memory between the two passes (24 KB as u16)
#define ROUTE_BATCH 4u      // global loads in flight per thread in the histogram pass

// One routed id into a shared histogram: hist[id] += 1, or *bad += 1 for an id >= E (counted in the status, never
// followed).
__device__ __forceinline__ void route_count(unsigned id, unsigned n_experts, unsigned* hist, unsigned* bad) {
    if (id < n_experts) atomicAdd(&hist[id], 1u);
    else atomicAdd(bad, 1u);
}

// Exclusive scan of one value per thread across the block (blockDim <= 1024); *total gets the sum.
__device__ unsigned block_exclusive_scan(unsigned v, unsigned* total) {
    __shared__ unsigned warp_prefix[32];
    __shared__ unsigned block_total;
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31u) >> 5;
    unsigned inclusive = v;
#pragma unroll
    for (unsigned offset = 1; offset < 32u; offset <<= 1) {
        const unsigned below = __shfl_up_sync(0xffffffffu, inclusive, offset);
        if (lane >= offset) inclusive += below;
    }
    if (lane == 31u) warp_prefix[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        const unsigned warp_sum = lane < n_warps ? warp_prefix[lane] : 0u;
        unsigned warp_inclusive = warp_sum;
#pragma unroll
        for (unsigned offset = 1; offset < 32u; offset <<= 1) {
            const unsigned below = __shfl_up_sync(0xffffffffu, warp_inclusive, offset);
            if (lane >= offset) warp_inclusive += below;
        }
        if (lane < n_warps) warp_prefix[lane] = warp_inclusive - warp_sum;
        if (lane == 31u) block_total = warp_inclusive;
    }
    __syncthreads();
    const unsigned exclusive = inclusive - v + warp_prefix[warp];
    *total = block_total;
    __syncthreads();  // warp_prefix and block_total are reused by the next call
    return exclusive;
}

// From each expert's item count (thread e holds expert e's): its bucket's offset (also its scatter
// cursor's start), its tiles (expert << 16 | tile) at the scan of tile counts, and the largest bucket.
// Returns the routed total; *tiles_used is the number of tiles (may exceed max_tiles: status says so).
// Only a thread whose `publish` is true writes its expert's offset and tiles to global memory (the replicated build
// splits the experts over its blocks); every one sets its cursor and counts toward the largest bucket.
__device__ __forceinline__ unsigned publish_buckets(unsigned count, unsigned n_experts, unsigned tile_n,
                                                    unsigned max_tiles, unsigned* offsets, unsigned* cursor,
                                                    unsigned* tiles, unsigned* largest, unsigned* tiles_used,
                                                    bool publish = true) {
    const unsigned tid = threadIdx.x, n_tiles = (count + tile_n - 1u) / tile_n;
    unsigned routed;
    const unsigned start = block_exclusive_scan(count, &routed);
    const unsigned first_tile = block_exclusive_scan(n_tiles, tiles_used);
    if (tid < n_experts) {
        cursor[tid] = start;
        atomicMax(largest, count);
        if (publish) {
            offsets[tid] = start;
            for (unsigned j = 0; j < n_tiles && first_tile + j < max_tiles; j++)
                tiles[first_tile + j] = (tid << 16) | j;
        }
    }
    return routed;
}

// The single-block build: one block of blockDim >= E threads, a multiple of 32 (one expert per thread in the scans;
// E <= 1024, T*top_k < 2^32). bins: shared [E], the counts, then (each thread reads its expert's count before it
// writes the expert's cursor) the scatter cursors. id_cache: shared [CACHE], the ids of the first CACHE items
// kept between the two passes; later items are read from global memory again.
// Cost: two passes over the P = T*top_k ids (histogram, scatter) with shared-memory atomics on a single SM, plus the
// max_tiles fill, and no global round trip between the passes. Measured on an H200 before the batching/caching of
// pass 1: 7.4 us at P = 2K and 28 us at P = 16K (latency-bound global loads). In moe_route_build the rest of the GPU
// idles meanwhile, like the engine's build_expert_order; in moe_route_permute the permute blocks run beside it.
template <unsigned CACHE>
__device__ __forceinline__ void route_build_one_block(const unsigned* ids, unsigned* offsets, unsigned* sorted_ids,
                                                      unsigned* tiles, unsigned* status, unsigned T, unsigned top_k,
                                                      unsigned routing_stride, unsigned n_experts, unsigned tile_n,
                                                      unsigned max_tiles, unsigned* bins, unsigned short* id_cache) {
    __shared__ unsigned n_bad, largest;
    const unsigned tid = threadIdx.x, n_threads = blockDim.x, n_items = T * top_k;
    for (unsigned e = tid; e < n_experts; e += n_threads) bins[e] = 0u;
    for (unsigned j = tid; j < max_tiles; j += n_threads) tiles[j] = INVALID_ENTRY;
    if (tid == 0) { n_bad = 0u; largest = 0u; }
    __syncthreads();

    // Pass 1: histogram. Loads are batched (ROUTE_BATCH in flight per thread) and the ids kept in
    // shared memory (first CACHE items) so the scatter pass does not wait on global memory again.
    for (unsigned base = tid; base < n_items; base += ROUTE_BATCH * n_threads) {
        unsigned batch[ROUTE_BATCH];
#pragma unroll
        for (unsigned b = 0; b < ROUTE_BATCH; ++b) {
            const unsigned p = base + b * n_threads;
            const unsigned t = p / top_k, slot = p - t * top_k;
            batch[b] = p < n_items ? ids[(size_t)t * routing_stride + slot] : INVALID_ENTRY;
        }
#pragma unroll
        for (unsigned b = 0; b < ROUTE_BATCH; ++b) {
            const unsigned p = base + b * n_threads;
            if (p >= n_items) continue;
            const unsigned id = batch[b];
            if (p < CACHE) id_cache[p] = id < n_experts ? (unsigned short)id : (unsigned short)0xFFFFu;
            route_count(id, n_experts, bins, &n_bad);
        }
    }
    __syncthreads();

    const unsigned count = tid < n_experts ? bins[tid] : 0u;
    unsigned tiles_used;
    const unsigned routed = publish_buckets(count, n_experts, tile_n, max_tiles, offsets, bins, tiles, &largest,
                                            &tiles_used);
    if (tid == 0) offsets[n_experts] = routed;
    __syncthreads();

    for (unsigned p = tid; p < n_items; p += n_threads) {
        unsigned id;
        if (p < CACHE) {
            const unsigned short cached = id_cache[p];
            id = cached == 0xFFFFu ? INVALID_ENTRY : cached;
        } else {
            const unsigned t = p / top_k, slot = p - t * top_k;
            id = ids[(size_t)t * routing_stride + slot];
        }
        if (id < n_experts) sorted_ids[atomicAdd(&bins[id], 1u)] = p;
    }
    if (tid == 0) { status[0] = n_bad; status[1] = largest; }
}

// One block of 1024 threads (the launcher's choice).
extern "C" __global__ void moe_route_build(const unsigned* ids, unsigned* offsets, unsigned* sorted_ids,
                                           unsigned* tiles, unsigned* status, unsigned T, unsigned top_k,
                                           unsigned routing_stride, unsigned n_experts, unsigned tile_n,
                                           unsigned max_tiles) {
    __shared__ unsigned bins[ROUTE_MAX_EXPERTS];
    __shared__ unsigned short id_cache[ROUTE_CACHE];
    route_build_one_block<ROUTE_CACHE>(ids, offsets, sorted_ids, tiles, status, T, top_k, routing_stride, n_experts,
                                       tile_n, max_tiles, bins, id_cache);
}

// ---- Multi-block builds: the same outputs from many blocks ----------------------------------------------
// Route block b of n_route histograms its chunk of items [b * chunk_len, (b + 1) * chunk_len) in shared memory and adds
// the non-zero bins to global counts; the last to finish (a done-counter after a fence) scans the counts into
// offsets, sets each expert's scatter cursor to its offset, writes the tile list and the status, and leaves the
// scratch words it used at zero for the next build. Then each block reserves one range per expert with a global
// atomicAdd on the cursor and places its chunk's items inside it with shared atomics.
// The buckets hold the same items as moe_route_build's; the order inside a bucket is arbitrary in both
// (atomics), which every consumer accepts: an item carries its own token and slot.
// Two launches: moe_route_count, then moe_route_scatter (which histograms its chunk again); grid n_route, a chunk
// one batch (blockDim * ROUTE_MB_ITEMS items). One launch: moe_route_permute, whose route blocks wait for the scan
// between the two phases (see there; at small P its one route block runs the single-block build instead).
// blockDim >= E, a multiple of 32, <= 1024 (one expert per thread in the last block's scan).
// scratch[2E + 4]: counts [0, E), cursors [E, 2E), ids out of range [2E], blocks done [2E + 1], and for the one-launch
// build the scan's ready flag [2E + 2] and the blocks past the wait [2E + 3]; zero before the first build (the
// launcher allocates it zeroed), zero again after each.
#define ROUTE_MB_ITEMS 4u  // items per thread and batch

struct RouteScratch {
    unsigned *counts, *cursor, *n_bad, *blocks_done, *ready, *departed;

    __device__ __forceinline__ RouteScratch(unsigned* scratch, unsigned n_experts)
        : counts(scratch), cursor(scratch + n_experts), n_bad(scratch + 2u * n_experts),
          blocks_done(scratch + 2u * n_experts + 1u), ready(scratch + 2u * n_experts + 2u),
          departed(scratch + 2u * n_experts + 3u) {}
};

__device__ __forceinline__ unsigned route_id(const unsigned* ids, unsigned p, unsigned top_k, unsigned routing_stride) {
    const unsigned t = p / top_k, slot = p - t * top_k;
    return ids[(size_t)t * routing_stride + slot];
}

// This thread's ids of the batch at `base`: items base + b*blockDim + tid for b < ROUTE_MB_ITEMS, all loads issued
// before any is used; items at or past `end` read as INVALID_ENTRY.
__device__ __forceinline__ void load_batch(const unsigned* ids, unsigned base, unsigned end, unsigned top_k,
                                           unsigned routing_stride, unsigned (&batch)[ROUTE_MB_ITEMS]) {
#pragma unroll
    for (unsigned b = 0; b < ROUTE_MB_ITEMS; ++b) {
        const unsigned p = base + b * blockDim.x + threadIdx.x;
        batch[b] = p < end ? route_id(ids, p, top_k, routing_stride) : INVALID_ENTRY;
    }
}

// hist[e] (shared, zeroed by the caller) += the chunk's items routed to e; *bad (shared) += its ids out of range.
__device__ __forceinline__ void route_histogram(const unsigned* ids, unsigned begin, unsigned end, unsigned top_k,
                                                unsigned routing_stride, unsigned n_experts, unsigned* hist,
                                                unsigned* bad) {
    for (unsigned base = begin; base < end; base += ROUTE_MB_ITEMS * blockDim.x) {
        unsigned batch[ROUTE_MB_ITEMS];
        load_batch(ids, base, end, top_k, routing_stride, batch);
#pragma unroll
        for (unsigned b = 0; b < ROUTE_MB_ITEMS; ++b) {
            if (base + b * blockDim.x + threadIdx.x < end) route_count(batch[b], n_experts, hist, bad);
        }
    }
}

// The block's chunk of items [*begin, *end) (chunk_len items from blockIdx.x * chunk_len) histogrammed into hist and
// *bad (shared; zeroed here), ready for every thread to read.
__device__ __forceinline__ void route_chunk_histogram(const unsigned* ids, unsigned chunk_len, unsigned n_items,
                                                      unsigned top_k, unsigned routing_stride, unsigned n_experts,
                                                      unsigned* hist, unsigned* bad, unsigned* begin, unsigned* end) {
    for (unsigned e = threadIdx.x; e < n_experts; e += blockDim.x) hist[e] = 0u;
    if (threadIdx.x == 0) *bad = 0u;
    __syncthreads();
    *begin = min(blockIdx.x * chunk_len, n_items);
    *end = min(*begin + chunk_len, n_items);
    route_histogram(ids, *begin, *end, top_k, routing_stride, n_experts, hist, bad);
    __syncthreads();
}

// After route_histogram: the block's counts go to the global ones; true in the last of n_route blocks to arrive,
// which then publishes offsets, cursors, tiles and status and resets the counts, the bad-id count and the
// done-counter.
__device__ __forceinline__ bool route_count_arrive(const unsigned* hist, unsigned block_bad, const RouteScratch& s,
                                                   unsigned n_route, unsigned* offsets, unsigned* tiles,
                                                   unsigned* status, unsigned n_experts, unsigned tile_n,
                                                   unsigned max_tiles) {
    __shared__ unsigned largest;
    __shared__ bool is_last;
    const unsigned tid = threadIdx.x;
    for (unsigned e = tid; e < n_experts; e += blockDim.x)
        if (hist[e]) atomicAdd(&s.counts[e], hist[e]);
    if (tid == 0 && block_bad) atomicAdd(s.n_bad, block_bad);
    __threadfence();  // this block's counts are visible before it counts itself done
    __syncthreads();
    if (tid == 0) {
        is_last = atomicAdd(s.blocks_done, 1u) == n_route - 1u;
        largest = 0u;
    }
    __syncthreads();
    if (!is_last) return false;

    // The last block: every other block's counts are in. atomicExch reads them at L2 and resets them.
    const unsigned count = tid < n_experts ? atomicExch(&s.counts[tid], 0u) : 0u;
    unsigned tiles_used;
    const unsigned routed = publish_buckets(count, n_experts, tile_n, max_tiles, offsets, s.cursor, tiles, &largest,
                                            &tiles_used);
    for (unsigned j = tiles_used + tid; j < max_tiles; j += blockDim.x) tiles[j] = INVALID_ENTRY;
    __syncthreads();
    if (tid == 0) {
        offsets[n_experts] = routed;
        status[0] = atomicExch(s.n_bad, 0u);
        status[1] = largest;
        *s.blocks_done = 0u;
    }
    return true;
}

// After the scan: the block reserves its range of each expert's bucket (hist: its chunk's counts) and places the
// chunk's items there (place: shared [E], the block's next position in each range).
__device__ __forceinline__ void route_place(const unsigned* ids, unsigned begin, unsigned end, unsigned top_k,
                                            unsigned routing_stride, unsigned n_experts, const unsigned* hist,
                                            unsigned* cursor, unsigned* sorted_ids, unsigned* place) {
    for (unsigned e = threadIdx.x; e < n_experts; e += blockDim.x)
        if (hist[e]) place[e] = atomicAdd(&cursor[e], hist[e]);  // this block's range of expert e
    __syncthreads();
    for (unsigned base = begin; base < end; base += ROUTE_MB_ITEMS * blockDim.x) {
        unsigned batch[ROUTE_MB_ITEMS];
        load_batch(ids, base, end, top_k, routing_stride, batch);
#pragma unroll
        for (unsigned b = 0; b < ROUTE_MB_ITEMS; ++b)
            if (batch[b] < n_experts) sorted_ids[atomicAdd(&place[batch[b]], 1u)] = base + b * blockDim.x + threadIdx.x;
    }
}

extern "C" __global__ void moe_route_count(const unsigned* ids, unsigned* offsets, unsigned* tiles, unsigned* status,
                                           unsigned* scratch, unsigned T, unsigned top_k, unsigned routing_stride,
                                           unsigned n_experts, unsigned tile_n, unsigned max_tiles) {
    __shared__ unsigned hist[ROUTE_MAX_EXPERTS];
    __shared__ unsigned block_bad;
    unsigned begin, end;
    route_chunk_histogram(ids, blockDim.x * ROUTE_MB_ITEMS, T * top_k, top_k, routing_stride, n_experts, hist,
                          &block_bad, &begin, &end);
    route_count_arrive(hist, block_bad, RouteScratch(scratch, n_experts), gridDim.x, offsets, tiles, status,
                       n_experts, tile_n, max_tiles);
}

extern "C" __global__ void moe_route_scatter(const unsigned* ids, unsigned* sorted_ids, unsigned* scratch, unsigned T,
                                             unsigned top_k, unsigned routing_stride, unsigned n_experts) {
    __shared__ unsigned hist[ROUTE_MAX_EXPERTS], place[ROUTE_MAX_EXPERTS];
    __shared__ unsigned block_bad;  // counted by moe_route_count
    unsigned begin, end;
    route_chunk_histogram(ids, blockDim.x * ROUTE_MB_ITEMS, T * top_k, top_k, routing_stride, n_experts, hist,
                          &block_bad, &begin, &end);
    route_place(ids, begin, end, top_k, routing_stride, n_experts, hist, RouteScratch(scratch, n_experts).cursor,
                sorted_ids, place);
}

__device__ __forceinline__ unsigned route_load_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void route_store_release(unsigned* p, unsigned v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// ---- Replicated build: every route block histograms all the items, so no block waits for another ----------------
// Route block b of n_route (blockDim >= E) reads the whole routing table, 16 bytes at a time, histograms it in shared
// memory and scans the counts: every block knows every offset and tile. It publishes the experts e with
// e % n_route == b (offsets, tiles) and places their items; block 0 also writes offsets[E] and the status. No global
// round trip sits between the passes: the table (ROUTE_REP_KEEP 16-byte loads per thread, 16 K words at 1024 threads)
// stays in registers; words past that are read again. ids must be 16-byte aligned and T * routing_stride < 2^32 (the
// launcher checks).
#define ROUTE_REP_KEEP 4u

// f(item, id) for each of the 4 words of q (table words w0 .. w0 + 3) that is a routed slot (column < top_k). One
// division per 4 words, none for a plain [T][top_k] table (word w is item w): a division per word was most of the
// route blocks' time at 16 K items.
template <class F>
__device__ __forceinline__ void route_words(const uint4& q, unsigned w0, unsigned top_k,
                                            unsigned routing_stride, F f) {
    const unsigned v[4] = {q.x, q.y, q.z, q.w};
    if (routing_stride == top_k) {
#pragma unroll
        for (unsigned j = 0; j < 4u; ++j) f(w0 + j, v[j]);
        return;
    }
    unsigned t = w0 / routing_stride, slot = w0 - t * routing_stride;
#pragma unroll
    for (unsigned j = 0; j < 4u; ++j) {
        if (slot < top_k) f(t * top_k + slot, v[j]);
        if (++slot == routing_stride) {
            slot = 0u;
            ++t;
        }
    }
}

// f(item, id) for every routed slot of the table: the kept chunks, the chunks past them (loaded again) and the
// tail of fewer than 4 words.
template <class F>
__device__ __forceinline__ void route_table_items(const unsigned* ids, const uint4 (&keep)[ROUTE_REP_KEEP],
                                                  unsigned n_words, unsigned top_k, unsigned routing_stride,
                                                  F f) {
    const unsigned n_vec = n_words / 4u, tid = threadIdx.x, stride = blockDim.x;
#pragma unroll
    for (unsigned r = 0; r < ROUTE_REP_KEEP; ++r)
        if (tid + r * stride < n_vec) route_words(keep[r], 4u * (tid + r * stride), top_k, routing_stride, f);
    const uint4* ids4 = reinterpret_cast<const uint4*>(ids);
    for (unsigned c = tid + ROUTE_REP_KEEP * stride; c < n_vec; c += stride)
        route_words(ids4[c], 4u * c, top_k, routing_stride, f);
    const unsigned w = 4u * n_vec + tid;
    if (w < n_words) {
        const unsigned t = w / routing_stride;
        const unsigned slot = w - t * routing_stride;
        if (slot < top_k) f(t * top_k + slot, ids[w]);
    }
}

__device__ __forceinline__ void route_build_replicated(const unsigned* ids, unsigned* offsets, unsigned* sorted_ids,
                                                       unsigned* tiles, unsigned* status, unsigned T, unsigned top_k,
                                                       unsigned routing_stride, unsigned n_experts, unsigned tile_n,
                                                       unsigned max_tiles, unsigned n_route, unsigned* bins) {
    __shared__ unsigned n_bad, largest;
    const unsigned tid = threadIdx.x, block = blockIdx.x;
    const unsigned n_words = T * routing_stride, n_vec = n_words / 4u;
    uint4 keep[ROUTE_REP_KEEP];
    const uint4* ids4 = reinterpret_cast<const uint4*>(ids);
#pragma unroll
    for (unsigned r = 0; r < ROUTE_REP_KEEP; ++r)  // every load in flight before the first is used
        if (tid + r * blockDim.x < n_vec) keep[r] = ids4[tid + r * blockDim.x];
    for (unsigned e = tid; e < n_experts; e += blockDim.x) bins[e] = 0u;
    if (tid == 0) { n_bad = 0u; largest = 0u; }
    __syncthreads();

    route_table_items(ids, keep, n_words, top_k, routing_stride,
                      [&](unsigned, unsigned id) { route_count(id, n_experts, bins, &n_bad); });
    __syncthreads();

    const unsigned count = tid < n_experts ? bins[tid] : 0u;
    unsigned tiles_used;
    const unsigned routed = publish_buckets(count, n_experts, tile_n, max_tiles, offsets, bins, tiles, &largest,
                                            &tiles_used, tid % n_route == block);
    for (unsigned j = tiles_used + block * blockDim.x + tid; j < max_tiles; j += n_route * blockDim.x)
        tiles[j] = INVALID_ENTRY;
    __syncthreads();  // the cursors, n_bad and largest are final

    route_table_items(ids, keep, n_words, top_k, routing_stride, [&](unsigned p, unsigned id) {
        if (id < n_experts && id % n_route == block) sorted_ids[atomicAdd(&bins[id], 1u)] = p;
    });
    if (block == 0 && tid == 0) {
        offsets[n_experts] = routed;
        status[0] = n_bad;
        status[1] = largest;
    }
}

// The one-launch single-block build's id cache: P up to ONE_LAUNCH_SINGLE_BLOCK_ITEMS (ops/routing.py) in the 4 KB
// the multi-block protocol's place array takes, so the permute blocks (which pay for the route blocks' static shared
// memory too) pay nothing more for it.
#define ROUTE_ONE_LAUNCH_CACHE 2048u
// moe_route_permute's route_path (zincbench.ops.routing.ROUTE_PATHS)
#define ROUTE_PATH_PROTOCOL 0u
#define ROUTE_PATH_SINGLE_BLOCK 1u
#define ROUTE_PATH_REPLICATED 2u

// A one-launch route block's shared memory: the multi-block protocol's or the single-block build's (never both).
union RouteOneLaunchShared {
    struct {
        unsigned hist[ROUTE_MAX_EXPERTS], place[ROUTE_MAX_EXPERTS];
    } multi;
    struct {
        unsigned bins[ROUTE_MAX_EXPERTS];
        unsigned short id_cache[ROUTE_ONE_LAUNCH_CACHE];
    } single;
};

// The routing build in one launch, with the fused GEMM's X permute (zb_xperm.cuh) beside it: blocks [0, n_route)
// build the routing as above, each keeping its chunk's histogram in shared memory across a wait for the last
// block's scan (its ready flag, release/acquire); blocks [n_route, gridDim) permute x_rows rows of x into xp
// (wgmma_order: MmaTile.x_order "wgmma"), or nothing when x_rows is 0. The permute runs while the routing waits on
// its global round trips; the GEMM that reads both is the next launch. Every block lets that launch start at once
// (zb_pdl_launch_dependents): a GEMM launched as its programmatic dependent waits in the kernel (zb_pdl_wait) instead
// of behind the launch gap.
// route_path (ROUTE_PATH_*) picks what the route blocks run: the multi-block protocol; the single-block build (n_route
// is then 1; it never touches scratch); or the replicated build (no waits, no scratch). At small P the protocol's ~7
// dependent L2 round trips (counts, done-counter, scan, ready flag, cursors) cost more than one block's two passes: on
// an H200 at P = 2048, route + permute take 8.4 us with the single block and 10.2 us with the protocol.
// The wait cannot deadlock: route blocks wait only for route blocks, the launcher keeps n_route far below the blocks
// an H200 (or any GPU) holds at once, and permute blocks never wait, so every route block gets an SM.
// At most 32 registers (__launch_bounds__(1024, 2)): the permute blocks are most of the grid, and at the replicated
// path's 62 registers they ran at half the threads per SM, 9-16% slower at 8-34 MB of x (H200, 2026-12-04).
extern "C" __global__ void __launch_bounds__(1024, 2)
    moe_route_permute(const unsigned* ids, unsigned* offsets, unsigned* sorted_ids, unsigned* tiles, unsigned* status,
                      unsigned* scratch, unsigned T, unsigned top_k, unsigned routing_stride, unsigned n_experts,
                      unsigned tile_n, unsigned max_tiles, unsigned n_route, unsigned chunk_len,
                      const float* __restrict__ x, uint4* __restrict__ xp, int x_rows, int K, int wgmma_order,
                      unsigned route_path) {
    zb_pdl_launch_dependents();
    if (blockIdx.x >= n_route) {
        if (wgmma_order) zb_permute_x<true>(x, xp, x_rows, K, blockIdx.x - n_route, gridDim.x - n_route);
        else zb_permute_x<false>(x, xp, x_rows, K, blockIdx.x - n_route, gridDim.x - n_route);
        return;
    }
    __shared__ RouteOneLaunchShared sh;
    if (route_path == ROUTE_PATH_SINGLE_BLOCK) {
        route_build_one_block<ROUTE_ONE_LAUNCH_CACHE>(ids, offsets, sorted_ids, tiles, status, T, top_k,
                                                      routing_stride, n_experts, tile_n, max_tiles, sh.single.bins,
                                                      sh.single.id_cache);
        return;
    }
    if (route_path == ROUTE_PATH_REPLICATED) {
        route_build_replicated(ids, offsets, sorted_ids, tiles, status, T, top_k, routing_stride, n_experts, tile_n,
                               max_tiles, n_route, sh.single.bins);
        return;
    }
    __shared__ unsigned block_bad;
    const RouteScratch s(scratch, n_experts);
    unsigned begin, end;
    route_chunk_histogram(ids, chunk_len, T * top_k, top_k, routing_stride, n_experts, sh.multi.hist, &block_bad,
                          &begin, &end);
    const bool last = route_count_arrive(sh.multi.hist, block_bad, s, n_route, offsets, tiles, status, n_experts,
                                         tile_n, max_tiles);
    if (threadIdx.x == 0) {
        if (last) {
            __threadfence();  // the scan's offsets, cursors and tiles before the flag
            route_store_release(s.ready, 1u);
        } else {
            for (unsigned ns = 32u; route_load_acquire(s.ready) == 0u; ns = min(2u * ns, 256u))
                asm volatile("nanosleep.u32 %0;" ::"r"(ns));
        }
    }
    __syncthreads();
    route_place(ids, begin, end, top_k, routing_stride, n_experts, sh.multi.hist, s.cursor, sorted_ids,
                sh.multi.place);
    if (threadIdx.x == 0 && atomicAdd(s.departed, 1u) == n_route - 1u) {  // every block is past the wait
        *s.ready = 0u;
        *s.departed = 0u;
    }
}

// Row r of a grouped buffer -> its position in sorted_ids. capacity == 0: contiguous rows [P][*]
// (row r is position r). capacity > 0: each expert padded to `capacity` rows, [E][capacity][*]
// (row r is the (r % capacity)-th item of expert r / capacity). False for padding or unrouted rows.
__device__ __forceinline__ bool grouped_row_position(unsigned r, const unsigned* offsets, unsigned n_experts,
                                                     unsigned capacity, unsigned* position) {
    if (capacity == 0u) {
        *position = r;
        return r < offsets[n_experts];
    }
    const unsigned e = r / capacity;
    *position = offsets[e] + (r - e * capacity);
    return *position < offsets[e + 1u];
}

// out[r][k] = fp16_rne(x[t*x_tok_stride + slot*x_slot_stride + k]) for the item (t, slot) of row r.
// Grid (n_rows), any block size. Padding rows are left as they are: their GEMM outputs are never read.
extern "C" __global__ void moe_gather_rows_f16(const float* x, const unsigned* sorted_ids, const unsigned* offsets,
                                               unsigned short* out, unsigned K, unsigned top_k, unsigned x_tok_stride,
                                               unsigned x_slot_stride, unsigned n_experts, unsigned capacity) {
    const unsigned r = blockIdx.x;
    unsigned position;
    if (!grouped_row_position(r, offsets, n_experts, capacity, &position)) return;
    const unsigned item = sorted_ids[position], t = item / top_k, slot = item - t * top_k;
    const float* src = x + (size_t)t * x_tok_stride + (size_t)slot * x_slot_stride;
    unsigned short* dst = out + (size_t)r * K;
    for (unsigned k = threadIdx.x; k < K; k += blockDim.x) dst[k] = zb_float_to_half_rne(src[k]);
}

// y[t*y_tok_stride + slot*y_slot_stride + m] = src[r*M + m] for the item (t, slot) of row r.
// Grid (n_rows), any block size. Every routed item is written exactly once.
extern "C" __global__ void moe_scatter_rows(const float* src, const unsigned* sorted_ids, const unsigned* offsets,
                                            float* y, unsigned M, unsigned top_k, unsigned y_tok_stride,
                                            unsigned y_slot_stride, unsigned n_experts, unsigned capacity) {
    const unsigned r = blockIdx.x;
    unsigned position;
    if (!grouped_row_position(r, offsets, n_experts, capacity, &position)) return;
    const unsigned item = sorted_ids[position], t = item / top_k, slot = item - t * top_k;
    float* dst = y + (size_t)t * y_tok_stride + (size_t)slot * y_slot_stride;
    const float* row = src + (size_t)r * M;
    for (unsigned m = threadIdx.x; m < M; m += blockDim.x) dst[m] = row[m];
}

// ---- top-k + softmax of the router logits, one warp per token ------------------------------------------
// The candidate block's routing table from logits f32 [T][n_experts]: table row t (stride 2k) gets the k
// chosen expert ids, then their softmax weights over the k chosen logits as f32 bits: the engine's
// softmax_topk_batched (one 64-thread block per token, k rounds of block-wide arg-max and barriers) as k
// warp-wide arg-max rounds over logits held in registers.
// Same choice as the engine: larger logit first; among equal logits the lower index mod 64 (the engine's
// thread), then the lower index; a -inf or NaN logit is never chosen (the id is then 0xFFFFFFFF). Same
// weights, bit for bit: exp(l - max) per slot, summed in slot order, times 1/sum.
// Each logit becomes one 64-bit key whose order is that choice: high word the logit's order as an
// unsigned (-0 as +0: they compare equal), low word the complement of the engine's rank (i % 64) *
// per_thread + i / 64; 0 for a logit that is never chosen. A round is then a per-lane max over the
// lane's keys and two warp reductions (redux.sync, sm_80+): the high word's max, then the low word's max
// among the lanes that hold it.
// Grid ceil(T / warps per block), block a whole number of warps; n_experts <= TOPK_MAX_EXPERTS, k <= 32.
#define TOPK_MAX_EXPERTS 256u
#define TOPK_PER_LANE (TOPK_MAX_EXPERTS / 32u)
#define TOPK_NEG_INF __int_as_float(0xff800000)  // NVRTC has no math.h INFINITY

__device__ __forceinline__ unsigned topk_order(float v) {
    unsigned u = __float_as_uint(v);
    if (u == 0x80000000u) u = 0u;  // -0 == +0
    return u ^ ((u >> 31) ? 0xFFFFFFFFu : 0x80000000u);
}

__device__ __forceinline__ float topk_value(unsigned order) {
    return __uint_as_float((order & 0x80000000u) ? order ^ 0x80000000u : ~order);
}

extern "C" __global__ void moe_topk_softmax(const float* logits, unsigned* table, unsigned T, unsigned n_experts,
                                            unsigned k) {
    const unsigned lane = threadIdx.x & 31u, t = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (t >= T) return;  // a whole warp leaves together: the warp reductions below stay full-warp
    const float* row = logits + (size_t)t * n_experts;
    const unsigned per_thread = (n_experts + 63u) >> 6;  // the engine's thread i % 64 scans per_thread logits
    unsigned long long key[TOPK_PER_LANE];
#pragma unroll
    for (unsigned j = 0; j < TOPK_PER_LANE; j++) {
        const unsigned i = lane + 32u * j, rank = (i & 63u) * per_thread + (i >> 6);
        const float v = i < n_experts ? row[i] : TOPK_NEG_INF;
        key[j] = v > TOPK_NEG_INF ? ((unsigned long long)topk_order(v) << 32) | (0xFFFFFFFFu - rank) : 0ull;
    }
    unsigned slot_id = INVALID_ENTRY;  // lane s < k keeps slot s
    float slot_logit = TOPK_NEG_INF;
    for (unsigned s = 0; s < k; s++) {
        unsigned long long best = key[0];
#pragma unroll
        for (unsigned j = 1; j < TOPK_PER_LANE; j++) best = key[j] > best ? key[j] : best;
        const unsigned hi = __reduce_max_sync(0xffffffffu, (unsigned)(best >> 32));
        const unsigned lo = __reduce_max_sync(0xffffffffu, (unsigned)(best >> 32) == hi ? (unsigned)best : 0u);
        const unsigned long long chosen = ((unsigned long long)hi << 32) | lo;
#pragma unroll
        for (unsigned j = 0; j < TOPK_PER_LANE; j++)
            if (key[j] == chosen) key[j] = 0ull;  // out of later rounds (keys are unique, or 0)
        if (lane == s && chosen != 0ull) {
            const unsigned rank = 0xFFFFFFFFu - lo;
            slot_id = (rank % per_thread) * 64u + rank / per_thread;
            slot_logit = topk_value(hi);
        }
    }
    const float top = __shfl_sync(0xffffffffu, slot_logit, 0);  // slot 0 holds the largest
    const float e = lane < k && slot_logit > TOPK_NEG_INF ? expf(slot_logit - top) : 0.0f;
    float total = 0.0f;
    for (unsigned s = 0; s < k; s++) total += __shfl_sync(0xffffffffu, e, s);  // slot order, as the engine
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    if (lane < k) {
        unsigned* out = table + (size_t)t * 2u * k;
        out[lane] = slot_id;
        out[k + lane] = __float_as_uint(e * inv);
    }
}
