"""Launchers of kernels/moe_routing.cu: group routed (token, slot) items by expert on the GPU.

``RoutingWorkspace`` owns the buffers (allocated once); ``build_routing`` fills them (histogram,
prefix-sum offsets, scatter of item ids p = t*top_k + slot into expert order, and the work-tile list
of a grouped GEMM) with one single-block launch (``build="single_block"``), two launches over many
blocks (``build="multi_block"``: count + scan by the last block, then scatter) or one launch
(``build="one_launch"``: up to ``single_block_items`` items one route block running the single-block build,
past that many route blocks running the multi-block build, waiting in the kernel for the scan;
``build="replicated"``: route blocks that each histogram every item and place a share of the experts, so none
waits for another). The one-launch builds can also permute the fused GEMM's activations in their other blocks.
All give the same offsets, tiles, status and bucket contents; the order inside a bucket is arbitrary in all.
``GatherRows`` / ``ScatterRows`` move activations into and results out of expert-grouped rows, either
contiguous ``[P][*]`` or padded to a fixed capacity per expert ``[E][capacity][*]``. Nothing here
synchronises except ``RoutingWorkspace.status``.
"""

from __future__ import annotations

import numpy as np

from zincbench.errors import InputError
from zincbench.gpu.runtime import get_kernel
from zincbench.measure.traffic import Traffic
from zincbench.ops.dequant import check_array
from zincbench.ops.fused import X_ORDERS, check_permute_input, permute_activations, permute_blocks

SOURCE = "moe_routing.cu"
ROUTE_THREADS = 1024  # one expert per thread in the block scans
MAX_EXPERTS = 1024  # ROUTE_MAX_EXPERTS in the kernel (shared counters)
ROW_THREADS = 256
MULTI_BLOCK_MIN_THREADS = 256
MULTI_BLOCK_ITEMS = 4  # ROUTE_MB_ITEMS in the kernel: items per thread and batch
# One launch: the route blocks wait for each other inside the kernel, so there must be far fewer of them than
# the blocks a GPU holds at once (132 SMs x 2 on an H200 at 1024 threads); past this a block takes several batches.
ONE_LAUNCH_MAX_ROUTE_BLOCKS = 32
# One launch, up to this many items (P = T*top_k): one route block runs the single-block build beside the permute
# blocks, skipping the multi-block protocol's ~7 dependent L2 round trips. Route + permute in one launch on an H200
# (results/h200/fp16-scales-20261202/probe-t2.log, E 256): 8.4 us against the protocol's 10.2 at P = 2048, 13.6
# against 10.8 at P = 4096. The kernel's id cache on this path (ROUTE_ONE_LAUNCH_CACHE) holds 2048 ids; later ids
# are read from global memory twice.
ONE_LAUNCH_SINGLE_BLOCK_ITEMS = 2048
# The replicated build's route blocks (1024 threads, one per SM at its registers): each reads the whole table, so more
# of them only split the placing of the items; the other SMs permute.
REPLICATED_ROUTE_BLOCKS = 16
ROUTING_BUILDS = ("single_block", "multi_block", "one_launch", "replicated")
PERMUTING_BUILDS = ("one_launch", "replicated")  # one launch: route blocks, and permute blocks beside them
# moe_route_permute's route_path: what its route blocks run (ROUTE_PATH_* in the kernel)
ROUTE_PATHS = {"protocol": 0, "single_block": 1, "replicated": 2}


def route_partition(items: int, threads: int, max_blocks: int) -> tuple[int, int]:
    """(route blocks, items per block) of a one-launch build: chunks of whole batches (threads x
    MULTI_BLOCK_ITEMS items), at most ``max_blocks`` of them, none empty; the last may be partial."""
    if min(items, threads, max_blocks) < 1:
        raise ValueError(f"route_partition needs positive items, threads and blocks: {items}, {threads}, {max_blocks}")
    batch = threads * MULTI_BLOCK_ITEMS
    batches = -(-items // batch)
    chunk = -(-batches // min(batches, max_blocks)) * batch
    return -(-items // chunk), chunk


def one_launch_route_blocks(
    items: int, threads: int, max_blocks: int, single_block_items: int
) -> tuple[int, int, bool]:
    """(route blocks, items per block, single) of a one-launch build: one block of all the items running the
    single-block build when ``items <= single_block_items`` (a non-negative int, else InputError), else
    route_partition's blocks for the multi-block protocol."""
    is_int = isinstance(single_block_items, (int, np.integer)) and not isinstance(single_block_items, bool)
    if not is_int or single_block_items < 0:
        raise InputError(
            f"single_block_items must be a non-negative int (0: the one-launch build always runs the multi-block "
            f"protocol), got {single_block_items!r}"
        )
    blocks, chunk = route_partition(items, threads, max_blocks)  # also checks the split is possible
    if items <= single_block_items:
        return 1, items, True
    return blocks, chunk, False


def max_tiles(t: int, top_k: int, n_experts: int, tile_n: int) -> int:
    """Upper bound on the grouped GEMM's work tiles: sum_e ceil(count_e/tile_n) <= ceil(P/tile_n) + E."""
    return -(-t * top_k // tile_n) + n_experts


class RoutingWorkspace:
    """offsets uint32[E+1], sorted_ids uint32[T*top_k], tiles uint32[max_tiles], status uint32[2]; the
    multi-block and one-launch builds also keep scratch uint32[2E+4] (counts, cursors, four counters), zero
    between builds (else scratch is None).

    For the one-launch build: ``max_route_blocks`` caps its route blocks (tests lower it to give a block several
    batches); up to ``single_block_items`` items (0: never) its one route block runs the single-block build, which
    leaves scratch alone. For the replicated build: ``max_route_blocks`` (default REPLICATED_ROUTE_BLOCKS) is its
    route blocks, at most E. ``single_block``: the routing is built by one block running the single-block build (the
    single-block build, or a one-launch build at that size); ``blocks``: the route blocks."""

    def __init__(
        self,
        t: int,
        top_k: int,
        n_experts: int,
        tile_n: int,
        build: str = "single_block",
        max_route_blocks: int | None = None,
        single_block_items: int = ONE_LAUNCH_SINGLE_BLOCK_ITEMS,
    ):
        import cupy

        if not 1 <= n_experts <= MAX_EXPERTS:
            raise InputError(f"{n_experts} experts: the routing kernel handles 1..{MAX_EXPERTS}")
        if t < 1 or top_k < 1 or tile_n < 1:
            raise InputError(f"bad routing shape T={t}, top_k={top_k}, tile_n={tile_n}")
        if -(-t * top_k // tile_n) >= 2**16 or t * top_k >= 2**32:
            raise InputError(f"T*top_k={t * top_k} with tile_n={tile_n}: tile entries pack the tile index in 16 bits")
        if build not in ROUTING_BUILDS:
            raise InputError(f"routing build {build!r}: expected one of {', '.join(ROUTING_BUILDS)}")
        self.t, self.top_k, self.n_experts, self.tile_n, self.build = t, top_k, n_experts, tile_n, build
        self.single_block, self.blocks = build == "single_block", 1
        self.offsets = cupy.empty(n_experts + 1, dtype=cupy.uint32)
        self.sorted_ids = cupy.empty(t * top_k, dtype=cupy.uint32)
        self.tiles = cupy.empty(max_tiles(t, top_k, n_experts, tile_n), dtype=cupy.uint32)
        self.status_words = cupy.zeros(2, dtype=cupy.uint32)
        self.scratch, self.chunk = None, 0  # the multi-block protocol's (scratch words, items per route block)
        if build == "single_block":
            self.kernels = (get_kernel(SOURCE, "moe_route_build"),)
            return
        if build == "replicated":
            self.kernels = (get_kernel(SOURCE, "moe_route_permute"),)
            self.block_threads = ROUTE_THREADS  # every block reads the table: 4 words per load, 4 K loads in flight
            self.blocks = min(REPLICATED_ROUTE_BLOCKS if max_route_blocks is None else max_route_blocks, n_experts)
            if self.blocks < 1:
                raise InputError(f"the replicated build needs at least one route block, got {max_route_blocks}")
            return
        self.scratch = cupy.zeros(2 * n_experts + 4, dtype=cupy.uint32)
        # one expert per thread in the last block's scan: blockDim >= E, a whole number of warps
        self.block_threads = max(MULTI_BLOCK_MIN_THREADS, -(-n_experts // 32) * 32)
        if build == "multi_block":
            self.kernels = (get_kernel(SOURCE, "moe_route_count"), get_kernel(SOURCE, "moe_route_scatter"))
            self.blocks = -(-self.items // (self.block_threads * MULTI_BLOCK_ITEMS))
        else:
            self.kernels = (get_kernel(SOURCE, "moe_route_permute"),)
            self.blocks, self.chunk, self.single_block = one_launch_route_blocks(
                self.items,
                self.block_threads,
                ONE_LAUNCH_MAX_ROUTE_BLOCKS if max_route_blocks is None else max_route_blocks,
                single_block_items,
            )

    @property
    def items(self) -> int:
        return self.t * self.top_k

    def status(self) -> tuple[int, int]:
        """(ids out of range, largest bucket) of the last build: synchronises, call it after timing."""
        bad, largest = (int(v) for v in self.status_words.get())
        return bad, largest


def build_routing(expert_ids, ws: RoutingWorkspace, x=None, xp=None, order: str = "mma") -> None:
    """Fill ``ws`` from expert_ids uint32 [T][routing_stride] (first top_k entries per row), by ws.build.

    With ``x`` f32 [rows][K] and ``xp`` (zincbench.ops.fused.permuted_activations), a one-launch build also
    permutes x into xp in the ``order`` of zincbench.ops.fused.permute_activations, in the same launch."""
    check_array(expert_ids, np.uint32, (ws.t, None), "expert_ids")
    if (x is None) != (xp is None):
        raise ValueError("x and xp go together")
    if order not in X_ORDERS:
        raise ValueError(f"x order {order!r}: expected one of {', '.join(X_ORDERS)}")
    if x is not None and ws.build not in PERMUTING_BUILDS:
        raise ValueError(f"the {ws.build} build does not permute activations; permute_activations does")
    if expert_ids.shape[1] < ws.top_k:
        raise InputError(f"routing rows of {expert_ids.shape[1]} ids are shorter than top_k={ws.top_k}")
    u32 = np.uint32
    shape = (u32(ws.t), u32(ws.top_k), u32(expert_ids.shape[1]), u32(ws.n_experts))
    if ws.build == "single_block":
        ws.kernels[0](
            (1,),
            (ROUTE_THREADS,),
            (
                expert_ids,
                ws.offsets,
                ws.sorted_ids,
                ws.tiles,
                ws.status_words,
                *shape,
                u32(ws.tile_n),
                u32(ws.tiles.size),
            ),
        )
        return
    if ws.build in PERMUTING_BUILDS:
        _route_permute(expert_ids, ws, shape, x, xp, order)
        return
    count, scatter = ws.kernels
    count(
        (ws.blocks,),
        (ws.block_threads,),
        (expert_ids, ws.offsets, ws.tiles, ws.status_words, ws.scratch, *shape, u32(ws.tile_n), u32(ws.tiles.size)),
    )
    scatter((ws.blocks,), (ws.block_threads,), (expert_ids, ws.sorted_ids, ws.scratch, *shape))


def _route_path(ws: RoutingWorkspace, expert_ids) -> int:
    if ws.build != "replicated":
        return ROUTE_PATHS["single_block" if ws.single_block else "protocol"]
    if expert_ids.data.ptr % 16:
        raise InputError("the replicated routing build reads the table 16 bytes at a time: it must be 16-byte aligned")
    if expert_ids.size >= 2**32:
        raise InputError(f"a routing table of {expert_ids.size} words: the replicated build indexes words in 32 bits")
    return ROUTE_PATHS["replicated"]


def _route_permute(expert_ids, ws: RoutingWorkspace, shape: tuple, x, xp, order: str) -> None:
    u32 = np.uint32
    rows, k, blocks = 0, 0, 0
    if x is not None:
        rows, k = check_permute_input(x, xp)
        blocks = permute_blocks(rows, k, ws.block_threads)
    route_path = _route_path(ws, expert_ids)
    ws.kernels[0](
        (ws.blocks + blocks,),
        (ws.block_threads,),
        (
            expert_ids,
            ws.offsets,
            ws.sorted_ids,
            ws.tiles,
            ws.status_words,
            ws.offsets if ws.scratch is None else ws.scratch,  # the protocol's; the other paths never read it
            *shape,
            u32(ws.tile_n),
            u32(ws.tiles.size),
            u32(ws.blocks),
            u32(ws.chunk),  # the protocol's items per route block
            ws.offsets if x is None else x,  # unread when rows is 0
            ws.offsets if xp is None else xp,
            np.int32(rows),
            np.int32(k),
            np.int32(1 if order == "wgmma" else 0),
            u32(route_path),
        ),
    )


def route_and_permute(expert_ids, ws: RoutingWorkspace, x, xp, order: str = "mma") -> None:
    """A grouped fused GEMM's two inputs: the routing in ``ws`` and x permuted into xp in ``order``. A one-launch
    build does both in one launch; another build is followed by permute_activations."""
    if ws.build in PERMUTING_BUILDS:
        build_routing(expert_ids, ws, x, xp, order)
    else:
        build_routing(expert_ids, ws)
        permute_activations(x, xp, order)


def routing_traffic(t: int, top_k: int, n_experts: int, tile_n: int) -> Traffic:
    """minimum: ids once, offsets and sorted ids once; actual: ids twice (histogram, scatter) plus the tile list
    (either build; the multi-block one adds per-block atomics on E counters, not counted)."""
    p = t * top_k
    minimum = 4 * (p + (n_experts + 1) + p)
    return Traffic(minimum, minimum + 4 * p + 4 * max_tiles(t, top_k, n_experts, tile_n) + 8)


def _grouped_rows(ws: RoutingWorkspace, capacity: int) -> int:
    if capacity < 0:
        raise InputError(f"capacity must be >= 0, got {capacity}")
    return ws.n_experts * capacity if capacity else ws.items


class GatherRows:
    """out[r] = fp16_rne(x row of the item at grouped row r); x f32 [T][K] or [T][top_k][K] (``x_per_slot``).

    out: fp16 [P][K] (capacity 0) or [E][capacity][K]. Padding rows are not written.
    """

    def __init__(self, x, ws: RoutingWorkspace, out, *, capacity: int = 0, x_per_slot: bool = False):
        k = x.shape[-1]
        check_array(x, np.float32, (ws.t, ws.top_k, k) if x_per_slot else (ws.t, k), "x")
        self.rows = _grouped_rows(ws, capacity)
        check_array(out, np.float16, (ws.n_experts, capacity, k) if capacity else (ws.items, k), "out")
        self.k, self.items, self.x_per_slot = k, ws.items, x_per_slot
        u32 = np.uint32
        self.kernel = get_kernel(SOURCE, "moe_gather_rows_f16")
        self.args = (
            x,
            ws.sorted_ids,
            ws.offsets,
            out,
            u32(k),
            u32(ws.top_k),
            u32(x[0].size),
            u32(k if x_per_slot else 0),
            u32(ws.n_experts),
            u32(capacity),
        )

    def __call__(self) -> None:
        self.kernel((self.rows,), (ROW_THREADS,), self.args)

    def traffic(self) -> Traffic:
        moved = self.items * self.k * (4 + 2) + 4 * self.items
        return Traffic(moved, moved)


class ScatterRows:
    """y[t][slot] = src[r] for the item (t, slot) at grouped row r; y f32 [T][top_k][M], every item once.

    src: f32 [P][M] (capacity 0) or [E][capacity][M]; padding rows are skipped.
    """

    def __init__(self, src, ws: RoutingWorkspace, y, *, capacity: int = 0):
        m = src.shape[-1]
        self.rows = _grouped_rows(ws, capacity)
        check_array(src, np.float32, (ws.n_experts, capacity, m) if capacity else (ws.items, m), "src")
        check_array(y, np.float32, (ws.t, ws.top_k, m), "y")
        self.m, self.items = m, ws.items
        u32 = np.uint32
        self.kernel = get_kernel(SOURCE, "moe_scatter_rows")
        self.args = (
            src,
            ws.sorted_ids,
            ws.offsets,
            y,
            u32(m),
            u32(ws.top_k),
            u32(ws.top_k * m),
            u32(m),
            u32(ws.n_experts),
            u32(capacity),
        )

    def __call__(self) -> None:
        self.kernel((self.rows,), (ROW_THREADS,), self.args)

    def traffic(self) -> Traffic:
        moved = self.items * self.m * 8 + 4 * self.items
        return Traffic(moved, moved)
