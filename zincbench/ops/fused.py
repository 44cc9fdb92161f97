"""Launchers of the fused-dequant K-quant Tensor-core GEMM (kernels/kquant_fused_mma.cu).

One kernel serves the gates and the layer block: dense (T1: one weight matrix, tokens tiled by BN) and
grouped (T2 and the layer block: one expert per work tile, token buckets built on the GPU by the routing
kernels). The weight format (Q4_K, Q5_K or Q6_K: the format policy), the epilogue (store, SwiGLU of
gate+up rows to fp16, routing-weighted combine into hidden) and the tile shape are template parameters;
experiments declare candidate shapes and the autotuner picks per GPU.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from zincbench.errors import InputError
from zincbench.gpu.launch import launch_dependent, supports_dependent_launch
from zincbench.gpu.nvrtc import prefer_max_shared, registers_per_thread, set_dynamic_shared
from zincbench.gpu.runtime import get_kernel
from zincbench.gpu.tma import TensorMapSpec, device_maps
from zincbench.measure.traffic import Traffic
from zincbench.ops.dequant import check_array
from zincbench.quant import check_row_length, get_format

SOURCE = "kquant_fused_mma.cu"
PERMUTE_THREADS = 256
PERMUTE_MAX_BLOCKS = 65535  # past this, a permute's blocks stride over the chunks
# The kernel's epilogues (ZB_EPI_* in the source): what a block does with its accumulators.
EPILOGUE_STORE, EPILOGUE_SWIGLU_F16_GROUPED, EPILOGUE_SWIGLU_F16_PERM, EPILOGUE_COMBINE = 0, 1, 2, 3
SWIGLU_EPILOGUES = (EPILOGUE_SWIGLU_F16_GROUPED, EPILOGUE_SWIGLU_F16_PERM)


@dataclass(frozen=True)
class WeightPolicy:
    """How the kernel reads one weight format: its policy struct in the source, half superblocks per
    pipeline stage, shared-memory bytes per weight row per stage (the struct's HALVES and
    ROW_STAGE_BYTES) and the widths in bytes of its TMA boxes, in the struct's order (tma_box(i); none: the
    format is read by cp.async only)."""

    policy: str
    halves_per_stage: int
    row_stage_bytes: int
    tma_widths: tuple[int, ...] = ()


POLICIES = {
    # half superblock: 64 nibble bytes + 16-byte header per row (Q5_K: + the block's 32 qh bytes)
    "q4_k": WeightPolicy("ZbQ4K", 1, 80, (64, 16)),
    "q5_k": WeightPolicy("ZbQ5K", 1, 112, (64, 16, 32)),
    # whole superblock: 14 aligned chunks cover 210 bytes at any offset, and a spare one (ZbQ6KFormat::row_stride)
    "q6_k": WeightPolicy("ZbQ6K", 2, 240),
    # Q6_K repacked at load (zincbench.quant.q6k_r): half superblock, its 112 contiguous bytes (ql, qh, fp16 scales)
    "q6_k_r": WeightPolicy("ZbQ6KR", 1, 112, (112,)),
}
# The wgmma path's own: half-superblock Q6_K stages (10 chunks: the half's ql, qh, and the scales), so that its
# 128- and 192-token tiles fit the three stages it needs.
WGMMA_POLICIES = {**POLICIES, "q6_k": WeightPolicy("ZbQ6KHalf", 1, 176)}
# The `whole` tiles' (either path): a stage is a whole superblock, each row's block as it is (one TMA box): fewer
# 32-byte sectors from L2 than the half stages' pieces (ZbNibbleFormat's WHOLE)
WHOLE_POLICIES = {
    "q4_k": WeightPolicy("ZbQ4KWhole", 2, 144, (144,)),
    "q5_k": WeightPolicy("ZbQ5KWhole", 2, 176, (176,)),
}


def weight_policy(weights: str, wgmma: bool = False, whole: bool = False) -> WeightPolicy:
    policy = (WGMMA_POLICIES if wgmma else POLICIES).get(weights)
    if policy is None:
        raise InputError(f"the fused kernel reads {', '.join(POLICIES)} weights, not {weights!r}")
    if whole:
        if weights not in WHOLE_POLICIES:
            # ValueError: the autotuner skips a tile that does not apply to this format
            raise ValueError(f"whole-superblock stages read {', '.join(WHOLE_POLICIES)} weights, not {weights}")
        return WHOLE_POLICIES[weights]
    return policy


# written "flag[+flag...]:" before a tile's numbers
TILE_FLAGS = ("wgmma", "sk", "quarter", "tma", "whole", "allrows", "producer", "persist")
PRODUCER_THREADS = 128  # the kernel's ZB_PRODUCER_THREADS: one more warpgroup, which fills the stage ring
PRODUCER_MMA_WARPS = 16  # its register split (ZB_MMA_REGS, ZB_PRODUCER_REGS) is for 16 MMA warps, one block per SM
PRODUCER_REGS, PRODUCER_MMA_REGS = 32, 112  # the kernel's ZB_PRODUCER_REGS and ZB_MMA_REGS (setmaxnreg's targets)
# Every m64nNk16 width (PTX: N a multiple of 8 up to 256 for f16 inputs); kernels/zb_wgmma.cuh spells out each
WGMMA_WIDTHS = tuple(range(8, 257, 8))
WGMMA_ALIGN_SLACK = 1024  # the kernel starts its stages at the next 1024-byte boundary (the swizzle's period)
TMA_WEIGHTS, TMA_X = 1, 2  # the kernel's ZB_TMA_W, ZB_TMA_X
TMA_X_MAP = 3  # ZB_TMA_X_MAP: X's map follows the weight boxes' (at most 3, ZB_TMA_W_MAPS)
X_ATOM_HALVES = 64  # one 128-byte swizzle atom of X: 64 fp16 of BN rows
MAX_CACHED_MAPS = 64  # per kernel: (arrays, shape) pairs whose maps stay on the device


@dataclass(frozen=True)
class MmaTile:
    """Warp tile (16*wm rows x 8*wn tokens), warps per block, cp.async pipeline depth, the blocks per SM
    the compiler must fit (``__launch_bounds__``: caps registers to raise occupancy), and ``trim_n``: a
    block computes only its real tokens rounded up to 8, not all BN columns (the kernel's TRIM_N).

    ``wgmma``: the Hopper instantiation (sm_90a warpgroup MMA; written ``wgmma:`` before the numbers): whole
    warpgroups along M (wm 1, warps_m a multiple of 4, warps_n 1), BN at most 256 (a wgmma width), X in the wgmma
    order (``x_order``); with trim_n the block's wgmmas are as wide as its tokens rounded up to 8. Other GPUs get
    the mma.sync path.

    ``stream_k`` (``sk``; dense only): the tiles of the grid's last, partial wave are not one block each: their
    superblocks are shared evenly by a wave of blocks, whose partial sums meet in a workspace (StreamKSchedule).

    ``quarter`` (wgmma only): the A fragments are decoded and multiplied a quarter superblock at a time, not a half
    (the kernel's QUARTERS): two 16-register buffers instead of two of 32, a half's lane slices kept for its second
    quarter, one more wgmma wait per half. It lets a 96-token tile (a whole N_e 64 expert bucket) run two blocks per
    SM without spilling.

    ``tma`` (wgmma only): one thread copies a stage's weight rows as TMA boxes (the format's ``tma_widths``) and, on
    a dense GEMM, its X tile as two 2-D boxes with the 128-byte swizzle; the full barrier counts their bytes. A
    grouped tile's X rows, gathered token by token, stay cp.asyncs of every thread.

    ``whole`` (Q4_K and Q5_K): a pipeline stage is a whole superblock, each weight row's block copied as it is (one TMA
    box of the block's bytes), not a half superblock in pieces (the half's nibbles, the header again, Q5_K's qh). The
    pieces straddle 32-byte sectors and the header is read twice: a Q4_K block costs 7 sectors from L2 on average,
    whole 5. A stage then holds twice the X and the weights.

    ``allrows`` (grouped, wgmma and tma; the kernel's ALL_ROWS): a block runs every row block of its token tile in
    turn, not one: its token tables are fetched once, and each next row block's first stages load into the ring
    buffers the one before frees, under its last stages and its epilogue. A one-unit block of one block per SM
    leaves the SM idle while it starts (its tables' dependent loads, its first stage's wait).

    ``producer`` (grouped, wgmma+tma, 16 warps, one block per SM; the kernel's PRODUCER): one more warpgroup fills
    the stage ring: its 128 threads gather X, one issues the TMA weight boxes. It gives up registers (setmaxnreg) to
    the MMA warps, which then only wait for a stage's data and release it: no copies, and no wait for the slowest
    warpgroup's release before a refill.

    ``persist`` (producer and allrows; the kernel's PERSIST): at most one wave of blocks, each running token tiles a
    grid apart. The producer fetches the next tile's tables into a second buffer and fills its first stages while the
    MMA warps finish this tile, so a block's later tiles start without its launch, table loads and first DRAM wait."""

    wm: int
    wn: int
    warps_m: int
    warps_n: int
    stages: int
    min_blocks: int = 1
    trim_n: bool = False
    wgmma: bool = False
    stream_k: bool = False
    quarter: bool = False
    tma: bool = False
    whole: bool = False
    all_rows: bool = False
    producer: bool = False
    persist: bool = False

    @property
    def bm(self) -> int:
        return 16 * self.wm * self.warps_m

    @property
    def bn(self) -> int:
        return 8 * self.wn * self.warps_n

    @property
    def threads(self) -> int:
        """The MMA warps' threads."""
        return 32 * self.warps_m * self.warps_n

    @property
    def launch_threads(self) -> int:
        """A block's threads: the MMA warps and the producer warpgroup."""
        return self.threads + (PRODUCER_THREADS if self.producer else 0)

    def smem_bytes(self, weights: str) -> int:
        policy = weight_policy(weights, self.wgmma, self.whole)
        stages = self.stages * (policy.halves_per_stage * self.bn * 256 + self.bm * policy.row_stage_bytes)
        return stages + (WGMMA_ALIGN_SLACK if self.wgmma else 0)

    @property
    def static_smem_bytes(self) -> int:
        """The kernel's static shared memory: the token tables (s_xoff, s_orow) and, on the wgmma path, the stage
        ring's two barriers per stage; persist doubles the tables and adds their ring."""
        tables = 2 if self.persist else 1  # persist: a second token table, two ZbTokenTiles, two barriers each
        return 8 * self.bn * tables + (16 * self.stages if self.wgmma else 0) + (80 if self.persist else 0)

    @property
    def label(self) -> str:
        occupancy = f"/b{self.min_blocks}" if self.min_blocks > 1 else ""
        trim = "/n8" if self.trim_n else ""
        kind = "/wgmma" if self.wgmma else ""
        schedule = "/sk" if self.stream_k else ""
        pieces = "/qtr" if self.quarter else ""
        copies = "/tma" if self.tma else ""
        whole = "/sb" if self.whole else ""
        rows = "/rows" if self.all_rows else ""
        producer = "/prod" if self.producer else ""
        persist = "/pers" if self.persist else ""
        return (
            f"{self.bm}x{self.bn}/w{self.warps_m}x{self.warps_n}/s{self.stages}{occupancy}{trim}{kind}{schedule}"
            f"{pieces}{copies}{whole}{rows}{producer}{persist}"
        )

    def expression(self, grouped: bool, weights: str, epilogue: int = EPILOGUE_STORE) -> str:
        g = "true" if grouped else "false"
        trim = "true" if self.trim_n else "false"
        # the trailing template arguments WGMMA, STREAM_K, QUARTERS (false), TMA (0), ALL_ROWS, PRODUCER and PERSIST
        # (false) default to off: written up to the last one set. TMA: ZB_TMA_W (1) copies the weights, | ZB_TMA_X (2)
        # a dense tile's X too.
        tma = (TMA_WEIGHTS | (0 if grouped else TMA_X)) if self.tma else 0
        flags = [str(self.wgmma).lower(), str(self.stream_k).lower(), str(self.quarter).lower(), str(tma)]
        flags += [str(self.all_rows).lower(), str(self.producer).lower(), str(self.persist).lower()]
        while flags and flags[-1] in ("false", "0"):
            flags.pop()
        flags = "".join(f",{flag}" for flag in flags)
        policy = weight_policy(weights, self.wgmma, self.whole).policy
        return (
            f"gemm_kquant_mma<{policy},{self.wm},{self.wn},{self.warps_m},{self.warps_n},"
            f"{self.stages},{self.min_blocks},{trim},{g},{epilogue}{flags}>"
        )

    @classmethod
    def parse(cls, text: str) -> "MmaTile":
        """'[flags:]wm,wn,warps_m,warps_n,stages[,min_blocks[,trim_n]]' (the form used in experiment YAML;
        trim_n 0 or 1; flags: TILE_FLAGS, joined by '+')."""
        form = "'[flag[+flag...]:]wm,wn,warps_m,warps_n,stages[,min_blocks[,trim_n]]'"
        body = str(text).strip()
        flags, colon, numbers = body.rpartition(":")
        names = flags.split("+") if colon else []
        if any(name not in TILE_FLAGS for name in names) or len(set(names)) != len(names):
            raise ValueError(f"tile must be {form} (flags {', '.join(TILE_FLAGS)}), got {text!r}")
        try:
            parts = [int(p) for p in numbers.split(",")]
        except ValueError:
            raise ValueError(f"tile must be {form} (integers), got {text!r}") from None
        if len(parts) not in (5, 6, 7) or min(parts[:6]) < 1 or (len(parts) == 7 and parts[6] not in (0, 1)):
            raise ValueError(f"tile must be {form} (trim_n 0 or 1), got {text!r}")
        tile = cls(
            *parts[:6],
            trim_n=len(parts) == 7 and bool(parts[6]),
            wgmma="wgmma" in names,
            stream_k="sk" in names,
            quarter="quarter" in names,
            tma="tma" in names,
            whole="whole" in names,
            all_rows="allrows" in names,
            producer="producer" in names,
            persist="persist" in names,
        )
        if tile.quarter and not tile.wgmma:
            raise ValueError(f"tile {text!r}: quarter pipelines the wgmma path's A fragments: it needs wgmma")
        if tile.tma and not tile.wgmma:
            raise ValueError(f"tile {text!r}: tma fills the wgmma path's stage ring: it needs wgmma")
        if tile.all_rows and not tile.tma:
            raise ValueError(
                f"tile {text!r}: allrows loads the next row block's weights as TMA boxes: it needs wgmma+tma"
            )
        if tile.producer and not tile.tma:
            raise ValueError(f"tile {text!r}: producer fills a grouped tile's ring with TMA boxes: it needs wgmma+tma")
        if tile.persist and not (tile.producer and tile.all_rows):
            raise ValueError(
                f"tile {text!r}: persist runs a block's tiles through its producer, all rows of each: it "
                "needs producer+allrows"
            )
        if (tile.all_rows or tile.producer) and tile.stream_k:
            raise ValueError(f"tile {text!r}: allrows and producer schedule grouped GEMMs, stream-K dense ones")
        if tile.producer and (tile.warps_m * tile.warps_n != PRODUCER_MMA_WARPS or tile.min_blocks != 1):
            raise ValueError(
                f"tile {text!r}: producer splits one block's registers between {PRODUCER_MMA_WARPS} MMA warps and "
                f"its warpgroup: warps_m 16, min_blocks 1"
            )
        if tile.wgmma:
            tile.check_wgmma(text)
        if not tile.bm <= tile.threads <= 1024:
            # the Q4_K/Q5_K loaders copy each row's block header with one thread per row
            raise ValueError(
                f"tile {text!r}: needs rows per block ({tile.bm}) <= threads ({tile.threads}) <= 1024, "
                f"i.e. wm <= 2 * warps_n"
            )
        if tile.stages < 2:  # the pipeline loads stage s + STAGES - 1 while computing stage s
            raise ValueError(f"tile {text!r}: the cp.async pipeline needs stages >= 2")
        return tile

    @property
    def x_order(self) -> str:
        """The order ``permute_activations`` must write X in for this tile."""
        return "wgmma" if self.wgmma else "mma"

    def check_wgmma(self, text: str) -> None:
        if self.wm != 1 or self.warps_n != 1 or self.warps_m % 4:
            raise ValueError(
                f"tile {text!r}: the wgmma path needs wm 1, warps_n 1 and whole warpgroups (warps_m 4, 8, ...)"
            )
        if self.stages < 3:
            raise ValueError(f"tile {text!r}: the wgmma path decodes stage t + 1 while stage t runs: stages >= 3")
        if self.bn not in WGMMA_WIDTHS:
            raise ValueError(
                f"tile {text!r}: the wgmma path takes token tiles of at most {max(WGMMA_WIDTHS)} (8 * wn, one wgmma "
                f"width), not {self.bn}"
            )


def check_tiles(texts: list[str], grouped: bool = False) -> None:
    """ValueError (an experiment's config error) naming the first malformed ``fused_tiles`` entry: a tile that
    parses but does not fit a GPU is the autotuner's to skip, a tile that does not parse (or asks for stream-K in a
    grouped GEMM) is the YAML's mistake."""
    if not texts:
        raise ValueError("fused_tiles must list at least one tile")
    for text in texts:
        try:
            tile = MmaTile.parse(text)
        except ValueError as exc:
            raise ValueError(f"fused_tiles: {exc}") from None
        if grouped and tile.stream_k:
            raise ValueError(f"fused_tiles: tile {text!r}: stream-K (sk) schedules dense GEMMs, not grouped ones")
        if not grouped and (tile.all_rows or tile.producer):
            raise ValueError(f"fused_tiles: tile {text!r}: allrows and producer schedule grouped GEMMs, not dense ones")


# A stream-K block's share is at least this many superblocks: its partial's write and the completing block's reads
# of the others (a 128x256 tile's partial is 128 KB) stay small beside the math they split.
STREAM_K_MIN_SUPERBLOCKS = 4


@dataclass(frozen=True)
class StreamKSchedule:
    """How a dense launch covers its ``tiles`` output tiles of ``n_sb`` superblocks each: the first ``dp_tiles``
    one block each (whole K), then ``ctas`` stream-K blocks sharing the other tiles' ``iters`` superblocks
    evenly (block j: [j * iters // ctas, (j + 1) * iters // ctas), the kernel's zb_sk_begin)."""

    tiles: int
    n_sb: int
    dp_tiles: int
    ctas: int = 0

    @property
    def iters(self) -> int:
        return (self.tiles - self.dp_tiles) * self.n_sb

    @property
    def blocks(self) -> int:
        return self.dp_tiles + self.ctas

    def ranges(self) -> list[tuple[int, int]]:
        """Each stream-K block's [begin, end) in the shared iterations."""
        return [(j * self.iters // self.ctas, (j + 1) * self.iters // self.ctas) for j in range(self.ctas)]


def stream_k_schedule(
    tiles: int, n_sb: int, slots: int, min_superblocks: int = STREAM_K_MIN_SUPERBLOCKS
) -> StreamKSchedule:
    """The grid's whole waves of ``slots`` (resident blocks on the GPU) stay one tile per block; the tiles of the
    last, partial wave are shared by up to ``slots`` blocks of at least ``min_superblocks`` each. No stream-K
    when the waves are whole or sharing would not spread the tail over more blocks than it has tiles (then a
    block's range is at most n_sb long: it touches at most two tiles, the kernel's assumption)."""
    if min(tiles, n_sb, slots, min_superblocks) < 1:
        raise ValueError(f"stream-K needs positive tiles, superblocks and slots, got {tiles}, {n_sb}, {slots}")
    tail = tiles % slots
    ctas = min(slots, tail * n_sb // min_superblocks)
    if tail == 0 or ctas <= tail:
        return StreamKSchedule(tiles, n_sb, tiles)
    return StreamKSchedule(tiles, n_sb, tiles - tail, ctas)


def tma_widths(tile: MmaTile, weights: str) -> tuple[int, ...]:
    """The widths of ``weights``' TMA boxes; ValueError for a format without them (the autotuner skips the tile)."""
    widths = weight_policy(weights, wgmma=True, whole=tile.whole).tma_widths
    if not widths:
        raise ValueError(f"tile {tile.label}: {weights} blocks are not 16-byte aligned: no TMA boxes")
    return widths


def tma_map_specs(
    tile: MmaTile, weights: str, m: int, k: int, experts: int, x_rows: int | None = None
) -> list[TensorMapSpec | None]:
    """The maps a ``tma`` tile's launch reads (the kernel's ``tma_maps``): one per weight box of the format, each a
    [width][BM][1] box over the weights as [experts][M][row bytes]; then, for a dense GEMM (``x_rows`` tokens), X's
    [64][BN] fp16 box over [x_rows][K] with the 128-byte swizzle, in slot TMA_X_MAP. ``encode`` checks each."""
    row_bytes = get_format(weights).row_bytes(k)
    specs: list[TensorMapSpec | None] = [
        TensorMapSpec("u8", (row_bytes, m, experts), (row_bytes, m * row_bytes), (width, tile.bm, 1))
        for width in tma_widths(tile, weights)
    ]
    specs += [None] * (TMA_X_MAP - len(specs))
    if x_rows is not None:
        specs.append(TensorMapSpec("f16", (k, x_rows), (2 * k,), (X_ATOM_HALVES, tile.bn), swizzle=128))
    return specs


def permuted_activations(cupy, rows: int, k: int):
    """Workspace for x_f32_to_f16_kquant_perm's output: rows x K fp16 stored as K/8 16-byte chunks."""
    check_row_length(k)
    return cupy.empty((rows, k // 8, 4), dtype=cupy.uint32)


X_ORDERS = {"mma": "x_f32_to_f16_kquant_perm", "wgmma": "x_f32_to_f16_kquant_perm_wgmma"}  # MmaTile.x_order


def permute_blocks(rows: int, k: int, threads: int) -> int:
    """Blocks of ``threads`` that permute rows x K activations (zb_xperm.cuh): a thread per 16-byte output chunk, at
    most PERMUTE_MAX_BLOCKS (past that they stride)."""
    return max(1, min(-(-rows * (k // 8) // threads), PERMUTE_MAX_BLOCKS))


def check_permute_input(x, xp) -> tuple[int, int]:
    """(rows, K) of x f32 [rows][K] and xp, its permuted_activations; else InputError."""
    rows, k = check_array(x, np.float32, (None, None), "x").shape
    check_array(xp, np.uint32, (rows, k // 8, 4), "xp")
    return rows, k


def permute_activations(x, xp, order: str = "mma") -> None:
    """x f32 [rows][K] -> xp (permuted fp16 in the ``order`` a tile reads, MmaTile.x_order; see the kernel
    source), enqueued on the current stream."""
    rows, k = check_permute_input(x, xp)
    kernel = get_kernel(SOURCE, X_ORDERS[order])
    kernel((permute_blocks(rows, k, PERMUTE_THREADS),), (PERMUTE_THREADS,), (x, xp, np.int32(rows), np.int32(k)))


class FusedKQuantGemm:
    """Y = X W^T with W in Q4_K, Q5_K or Q6_K (``weights``), for one tile shape, dense or grouped, and one
    epilogue (EPILOGUE_*)."""

    def __init__(self, tile: MmaTile, grouped: bool, weights: str, epilogue: int = EPILOGUE_STORE):
        import cupy

        if epilogue != EPILOGUE_STORE and not grouped:
            raise ValueError("the SwiGLU and combine epilogues are for the grouped (MoE) kernel")
        if tile.stream_k and grouped:
            raise ValueError(f"tile {tile.label}: stream-K schedules dense GEMMs, not grouped ones")
        if (tile.all_rows or tile.producer) and not grouped:
            raise ValueError(f"tile {tile.label}: allrows and producer schedule grouped GEMMs, not dense ones")
        self.tile = tile
        self.grouped = grouped
        self.weights = weights
        self.epilogue = epilogue
        self.smem_bytes = tile.smem_bytes(weights)
        rt = cupy.cuda.runtime
        limit = rt.deviceGetAttribute(rt.cudaDevAttrMaxSharedMemoryPerBlockOptin, cupy.cuda.Device().id)
        needed = self.smem_bytes + tile.static_smem_bytes
        if needed > limit:
            # ValueError: the autotuner skips a candidate that does not apply on this GPU
            raise ValueError(
                f"tile {tile.label} with {weights} needs {needed} bytes of shared "
                f"memory per block; this GPU allows {limit}"
            )
        if tile.tma:
            tma_widths(tile, weights)
        if tile.tma and epilogue in SWIGLU_EPILOGUES:
            raise ValueError(f"tile {tile.label}: the SwiGLU epilogues read two weight matrices, the TMA boxes one")
        arch = self.arch = cupy.cuda.Device().compute_capability
        if tile.wgmma and arch != "90":
            raise ValueError(f"tile {tile.label}: the wgmma path runs on sm_90, not sm_{arch}")
        expr = tile.expression(grouped, weights, epilogue)
        # wgmma exists only in the architecture-specific target (sm_90a), the rest compiles for sm_<cc>
        self.kernel = get_kernel(SOURCE, expr, name_expressions=(expr,), arch=f"{arch}a" if tile.wgmma else None)
        if tile.producer:
            # setmaxnreg moves registers within the block's launch allocation: short of the split, the MMA warps'
            # setmaxnreg.inc would wait forever
            needed = tile.threads * PRODUCER_MMA_REGS + PRODUCER_THREADS * PRODUCER_REGS
            if registers_per_thread(self.kernel) * tile.launch_threads < needed:
                raise ValueError(f"tile {tile.label}: the block's registers at launch cannot hold the producer's split")
        set_dynamic_shared(self.kernel, self.smem_bytes)
        prefer_max_shared(self.kernel)  # the small T2 tiles' blocks per SM are set by shared memory and registers
        self._dummy = cupy.zeros(1, dtype=cupy.uint32)
        self._schedules: dict[tuple[int, int, int], StreamKSchedule] = {}  # (M, K, T) -> the launch's schedule
        self._stream_k: dict[StreamKSchedule, tuple] = {}  # schedule -> (partials, counters), kept across calls
        self._maps: dict[tuple, object] = {}  # (addresses, shape) -> the launch's tensor maps on the device

    def tma_maps(self, w, xp, m: int, k: int, x_rows: int | None):
        """The device buffer of tensor maps for a launch on these arrays (the dummy for a tile without TMA), encoded
        once per (addresses, shape): the timer's repeated launches reuse them. A freed array's address reused by one
        of the same shape gets the same map bytes."""
        if not self.tile.tma:
            return self._dummy
        import cupy

        experts = w.shape[0] if w.ndim == 3 else 1
        key = (w.data.ptr, xp.data.ptr if x_rows is not None else 0, m, k, experts, x_rows)
        if key not in self._maps:
            if len(self._maps) >= MAX_CACHED_MAPS:
                self._maps.pop(next(iter(self._maps)))
            specs = tma_map_specs(self.tile, self.weights, m, k, experts, x_rows)
            addresses = [w.data.ptr] * TMA_X_MAP + [xp.data.ptr]
            self._maps[key] = device_maps(
                cupy, [spec.encode(at) if spec is not None else None for spec, at in zip(specs, addresses)]
            )
        return self._maps[key]

    @functools.cached_property
    def resident(self) -> int:
        """Blocks of this kernel the GPU holds at once (SMs x blocks per SM at its registers and shared memory); asked
        once, not on every timed launch."""
        import cupy

        driver, rt = cupy.cuda.driver, cupy.cuda.runtime
        per_sm = driver.occupancyMaxActiveBlocksPerMultiprocessor(
            self.kernel.ptr, self.tile.launch_threads, self.smem_bytes
        )
        sms = rt.deviceGetAttribute(rt.cudaDevAttrMultiProcessorCount, cupy.cuda.Device().id)
        return max(1, per_sm) * sms

    def schedule(self, m: int, k: int, t: int) -> StreamKSchedule:
        """The dense launch's tiles: one block each, or (stream_k tiles) with the last wave shared."""
        key = (m, k, t)
        if key not in self._schedules:  # once per shape: dense() is what the timer calls
            tiles = -(-m // self.tile.bm) * -(-t // self.tile.bn)
            self._schedules[key] = (
                stream_k_schedule(tiles, k // 256, self.resident)
                if self.tile.stream_k
                else StreamKSchedule(tiles, k // 256, tiles)
            )
        return self._schedules[key]

    def stream_k_buffers(self, schedule: StreamKSchedule):
        """Partials (two slots per stream-K block) and zeroed tile counters, allocated once per schedule: the
        kernel leaves the counters zero again."""
        import cupy

        if schedule.ctas == 0:
            return self._dummy, self._dummy
        if schedule not in self._stream_k:
            # a slot holds every thread's accumulators: one float per element of the tile
            partials = cupy.empty(2 * schedule.ctas * self.tile.bm * self.tile.bn, dtype=cupy.float32)
            counters = cupy.zeros(schedule.tiles - schedule.dp_tiles, dtype=cupy.uint32)
            self._stream_k[schedule] = (partials, counters)
        return self._stream_k[schedule]

    def dense(self, w, xp, y, m: int, k: int, t: int, schedule: StreamKSchedule | None = None) -> None:
        """w uint8 [M][row bytes], xp from permute_activations (in tile.x_order), y f32 [T][M]; ``schedule``
        (default ``self.schedule``) lays the tiles out over blocks, any valid one giving the same product."""
        own = self.schedule(m, k, t)
        schedule = schedule or own
        if (schedule.tiles, schedule.n_sb) != (own.tiles, own.n_sb):
            raise ValueError(
                f"a schedule of {schedule.tiles} tiles x {schedule.n_sb} superblocks for a GEMM of "
                f"{own.tiles} x {own.n_sb}"
            )
        partials, counters = self.stream_k_buffers(schedule)
        d = self._dummy
        self.kernel(
            (schedule.blocks,),
            (self.tile.launch_threads,),
            (
                w,
                xp,
                y,
                np.int32(m),
                np.int32(k),
                np.int32(t),
                np.uint64(0),
                d,
                d,
                d,
                np.int32(1),
                np.int32(0),
                d,
                d,
                np.int32(0),
                partials,
                counters,
                np.int32(schedule.dp_tiles),
                np.int32(schedule.ctas),
                np.int32(schedule.iters),
                self.tma_maps(w, xp, m, k, x_rows=t),
                np.int32(0),
            ),
            shared_mem=self.smem_bytes,
        )

    def grouped_call(
        self,
        w,
        xp,
        y,
        m: int,
        k: int,
        tiles,
        offsets,
        sorted_ids,
        top_k: int,
        x_per_slot: bool = False,
        *,
        w_up=None,
        routing=None,
        capacity: int = 0,
        dependent: bool = False,
        blocks: int | None = None,
    ) -> None:
        """w uint8 [E][M][row bytes]; tiles/offsets/sorted_ids from the routing kernels with BN = tile.bn;
        xp rows are tokens (or token-slots when x_per_slot). y by epilogue: STORE f32 [T][top_k][M];
        SWIGLU_F16_PERM fp16 [T][top_k][M] (permuted order), SWIGLU_F16_GROUPED fp16 [E][capacity][M], from
        gate rows ``w`` and up rows ``w_up`` (same shape); COMBINE f32 [T][M] += routing weight x result,
        ``routing`` the engine's u32 table [T][2*top_k].

        ``dependent`` (sm_90 and later): launched as the previous kernel's programmatic dependent
        (zincbench.gpu.launch), its blocks start while that kernel (the routing launch) runs and wait inside for
        its outputs.

        ``blocks`` (persist tiles): the blocks whose token tiles stride over ``tiles``; default the resident blocks
        (tests lower it to give a block many tiles)."""
        swiglu = self.epilogue in SWIGLU_EPILOGUES
        if swiglu != (w_up is not None) or (self.epilogue == EPILOGUE_COMBINE) != (routing is not None):
            raise ValueError("w_up goes with the SwiGLU epilogues, routing with COMBINE")
        if (self.epilogue == EPILOGUE_SWIGLU_F16_GROUPED) != (capacity > 0):
            raise ValueError("capacity goes with the SWIGLU_F16_GROUPED epilogue")
        if dependent and not supports_dependent_launch(self.arch):
            raise ValueError(f"a programmatic dependent launch needs sm_90 or later, not sm_{self.arch}")
        if blocks is not None and not self.tile.persist:
            raise ValueError(f"tile {self.tile.label}: blocks sizes a persist tile's grid")
        if blocks is not None and blocks < 1:
            raise ValueError(f"a persistent launch needs at least one block, not {blocks}")
        expert_bytes = w.shape[1] * w.shape[2]
        rows_per_block = self.tile.bm // 2 if swiglu else self.tile.bm
        row_blocks = 1 if self.tile.all_rows else (m + rows_per_block - 1) // rows_per_block  # all_rows: in turn
        grid = (row_blocks, int(tiles.size))
        if self.tile.persist:  # at most one wave: a block's token tiles are a grid apart
            grid = (1, max(1, min(int(tiles.size), blocks or self.resident)))
        d = self._dummy
        args = (
            w,
            xp,
            y,
            np.int32(m),
            np.int32(k),
            np.int32(capacity),
            np.uint64(expert_bytes),
            tiles,
            offsets,
            sorted_ids,
            np.int32(top_k),
            np.int32(1 if x_per_slot else 0),
            d if w_up is None else w_up,
            d if routing is None else routing,
            np.int32(0 if routing is None else routing.shape[1]),
            d,
            d,
            np.int32(0),
            np.int32(0),
            np.int32(0),
            self.tma_maps(w, xp, m, k, x_rows=None),
            np.int32(tiles.size),
        )
        if dependent:
            launch_dependent(self.kernel, grid, (self.tile.launch_threads,), args, self.smem_bytes)
        else:
            self.kernel(grid, (self.tile.launch_threads,), args, shared_mem=self.smem_bytes)


def dense_traffic(m: int, k: int, t: int, tile: MmaTile, weights: str) -> Traffic:
    """minimum: W, f32 X and Y once; model: W re-read by every token tile, X permuted to fp16
    (read f32, write fp16, read fp16 back per row tile from L2: counted once)."""
    w_bytes = m * get_format(weights).row_bytes(k)
    io = 4 * t * k + 4 * t * m
    token_tiles = -(-t // tile.bn)
    return Traffic(
        w_bytes + io,
        w_bytes * token_tiles + io + 4 * t * k,
        2 * m * k * t,
        f"weights read by each of {token_tiles} {tile.bn}-token tiles; x permuted to fp16",
    )


def grouped_traffic(counts, m: int, k: int, top_k: int, x_rows: int, tile: MmaTile, weights: str) -> Traffic:
    """counts: tokens per expert of the routing. minimum: hit experts' rows, x, y and ids once;
    model: each expert's rows once per token tile of its bucket, plus the permuted fp16 x and routing."""
    counts = np.asarray(counts)
    row_bytes = get_format(weights).row_bytes(k)
    items = int(counts.sum())
    reads = int(np.ceil(counts / tile.bn).sum())
    io = 4 * x_rows * k + 4 * items * m + 4 * items
    return Traffic(
        int((counts > 0).sum()) * m * row_bytes + io,
        reads * m * row_bytes + io + 4 * x_rows * k + 8 * items,
        2 * items * m * k,
        f"weights read once per {tile.bn}-token tile ({reads} tile reads)",
    )
