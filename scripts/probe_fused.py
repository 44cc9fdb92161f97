"""Kernel-development probe: time the pieces of the fused paths separately (cold L2), per tile shape.

    python scripts/probe_fused.py [MODE] [--once]

MODE: t2, t2chosen, chosen, t1, t1q6, t1q6wide, t1small, t1sk, quarter, widths, widths80, t1wide, q6stride,
q6r, q6rwide, ring, tma, occupancy, whole, whole256, pdl, prologue, t2now, allrows, producer, persist or all (the
default).

--once launches every (case, piece, tile) once, untimed: the form to run under ncu. --power: after each T2 GEMM's
timing, that GEMM back to back for 1.5 s with NVML read meanwhile (board power, SM clock, clock event reasons).

Prints one line per (case, piece, tile): median µs and the implied rate. A tool for tuning the fused
kernel over more tiles than the gates try; the gates themselves are `zincbench microbench`. Inputs are
built by zincbench.testing.sanitize_driver (the kernels' launch driver).
"""

from __future__ import annotations

import sys

import numpy as np

from zincbench.judge import summarize
from zincbench.measure.stopping.count import FixedCountRule
from zincbench.measure.timer import GpuTimer, TimerConfig
from zincbench.ops.fused import FusedKQuantGemm, MmaTile, permute_activations
from zincbench.ops.routing import (
    PERMUTING_BUILDS,
    ROUTING_BUILDS,
    RoutingWorkspace,
    build_routing,
    route_and_permute,
)
from zincbench.testing.sanitize_driver import activations, permuted, quantized, routing_table

T2_TILES = [
    "1,2,4,1,3",
    "1,4,4,1,4",
    "1,8,8,1,2",
    "wgmma:1,2,4,1,4",
    "wgmma:1,2,8,1,4",
    "wgmma:1,4,8,1,3",
    "wgmma:1,4,8,1,4",
    "wgmma:1,8,8,1,3,1,1",
    "wgmma:1,8,8,1,4,2,1",
    "wgmma:1,16,8,1,3,1,1",
    # more blocks per SM (the registers capped by min_blocks; the shared-memory carveout at its largest)
    "1,2,4,1,3,6",
    "1,2,4,1,3,8",
    "1,2,4,1,4,6",
    "1,4,4,1,4,4",
    "1,4,4,1,3,5",
    "wgmma:1,4,4,1,4,4",
    "wgmma:1,8,4,1,3,3,1",
    # 256 rows: X (16 KB a half at 64 tokens) fetched from L2 once per 256 weight rows, not per 128
    "wgmma:1,8,16,1,4,1,1",
    # 128 rows on the mma.sync path: X read from L2 once per 128 weight rows at N_e 8
    "1,2,8,1,3",
    "1,2,8,1,4,3",
    "1,4,8,1,3,2",
    # 96 tokens: a whole N_e 64 bucket (64 +- 8) in one tile, trimmed to the next wgmma width
    "wgmma:1,12,8,1,3,1,1",
    "wgmma:1,12,8,1,3,2,1",
    # 64x16 trimmed: a warp skips its second 8-token column where the bucket holds at most 8 tokens (N_e 8); slower
    # than untrimmed at every N_e on 2026-12-02 (78.7 against 74.8 us at N_e 8)
    "1,2,4,1,3,1,1",
    # two blocks per SM of the 128x32 tile (N_e 16); three stages of the 128x64 b2 tile
    "wgmma:1,4,8,1,4,2",
    "wgmma:1,4,8,1,4,2,1",
    "wgmma:1,8,8,1,3,2,1",
]
# The tile T2 chose at each N_e at E256-M512 (2026-12-02, b6c0148): what ncu profiles and kernel-source A/Bs
# (scripts/ab_kernels.sh) time
T2_CHOSEN_TILES = {
    8: ["1,2,4,1,3"],
    16: ["wgmma:1,4,8,1,4,2,1"],
    32: ["wgmma:1,8,8,1,4,2,1"],
    64: ["wgmma+quarter:1,12,8,1,3,2,1"],
}
# Trimmed wgmma tiles that both kernel sources of the A/B across 8-token trim widths compile (mode `widths`, run by
# scripts/ab_kernels.sh): the same tile, its tokens rounded up to 16, 32, 48, 64, 96 before and to a multiple of 8 after
T2_TRIM_TILES = [
    "wgmma:1,4,8,1,4,2,1",
    "wgmma:1,8,8,1,4,2,1",
    "wgmma+quarter:1,12,8,1,3,2,1",
    "wgmma+quarter:1,12,16,1,4,1,1",
]
# The tiles T2 chose at E256-M512 on 2026-12-03 (a99207c, TMA stages), timed first by mode `chosen` (so ncu_t2src's
# NCU_SKIP 0-3 picks the N_e)
T2_TMA_CHOSEN_TILES = {
    8: ["wgmma+tma:1,2,8,1,4"],
    16: ["wgmma+tma:1,4,8,1,4"],
    32: ["wgmma+tma:1,8,8,1,4,2,1"],
    64: ["wgmma+quarter+tma:1,12,8,1,3,2,1"],
}
# ... and T1's on Q4_K (128x256 stream-K quarter: 33 of the 45 cells) and repacked Q6_K (mode `chosen`, with T2's)
T1_TMA_CHOSEN_TILES = ["wgmma+sk+quarter+tma:1,32,8,1,3", "wgmma+sk+quarter+tma:1,24,8,1,3"]
# Tiles only the 8-token widths allow (mode `widths80`): 80 tokens (an N_e 64 bucket, 64 +- 8, in one tile of fewer
# accumulators), a trimmed 64x32 (the M704 N_e 16 choice, untrimmed, beside it), and the 96-token choice for reference
T2_WIDTH_TILES = [
    "wgmma+quarter:1,10,8,1,3,2,1",
    "wgmma+quarter:1,10,16,1,4,1,1",
    "wgmma+quarter:1,12,8,1,3,2,1",
    "wgmma:1,4,4,1,4,4",
    "wgmma:1,4,4,1,4,4,1",
]
# QUARTERS (A fragments a quarter superblock at a time, 32 registers fewer): the 96-token tile without spills at two
# blocks per SM (one tile per N_e 64 bucket), and 256 rows x 96 tokens at one, against the chosen tiles. On 2026-12-02
# (b6c0148) the N_e 64 GEMM went 142.5 -> 124.5 / 120.0 us; at N_e <= 32 the chosen tiles stayed fastest.
T2_QUARTER_TILES = [
    "1,2,4,1,3",
    "wgmma:1,4,8,1,4,2,1",
    "wgmma+quarter:1,4,8,1,4,2,1",
    "wgmma:1,8,8,1,4,2,1",
    "wgmma+quarter:1,8,8,1,4,2,1",
    "wgmma:1,12,8,1,3,2,1",
    "wgmma+quarter:1,12,8,1,3,2,1",
    "wgmma+quarter:1,12,16,1,4,1,1",
]
T1_TILES = [
    "2,8,4,1,2,3",
    "wgmma:1,16,8,1,3",
    "wgmma:1,16,8,1,4",
    "wgmma:1,32,8,1,3",
    "wgmma:1,8,16,1,3",
    "wgmma:1,16,4,1,3,2",
    "wgmma:1,8,8,1,4,2",
    "wgmma:1,8,4,1,4,3",
    # three warpgroups (192x128): 2% faster than 128x256 at 21504x5376 T 1024, 22% slower at 4096x4096 T 2048
    # (2026-12-02); not in the T1 YAML
    "wgmma+sk:1,16,12,1,3",
]
# Q6_K: the portable 128x128 tile the gate chose, against the wgmma tiles its half-superblock stages (ZbQ6KHalf) fit
T1_Q6K_TILES = [
    "1,16,8,1,2",
    "wgmma:1,8,8,1,4,2",
    "wgmma:1,16,8,1,3",
    "wgmma:1,16,8,1,4",
    "wgmma+sk:1,16,8,1,4",
    "wgmma:1,24,8,1,3",
    "wgmma+sk:1,24,8,1,3",
    # one warpgroup, 256 tokens: each decoded weight serves 256 tokens (one block per SM); with stream-K within 2% of
    # 128x192 at T 512 / 1024, 5-6% slower at T 2048 on 2026-12-02
    "wgmma:1,32,4,1,3",
    "wgmma+sk:1,32,4,1,3",
    # three warpgroups, 128 tokens: X fetched from L2 once per 192 weight rows, 12 warps per SM; with Q6_K 14-44%
    # slower than 128x192 on 2026-12-02 (it spills 20-104 bytes at 168 registers)
    "wgmma:1,16,12,1,3",
    "wgmma+sk:1,16,12,1,3",
]


ONCE = "--once" in sys.argv
POWER = "--power" in sys.argv


def kernel_or_none(spec: str, grouped: bool, weights: str):
    """The kernel for tile ``spec``, or None (and one line saying why) where it does not apply on this GPU:
    a wgmma tile off sm_90, stages that do not fit in shared memory."""
    try:
        return FusedKQuantGemm(MmaTile.parse(spec), grouped=grouped, weights=weights)
    except ValueError as exc:
        print(f"  gemm {spec:12s} skipped: {exc}", flush=True)
        return None


def timed(timer, fn, samples=25):
    if ONCE:
        fn()
        return float("nan")
    return summarize(timer.measure(fn, rule=FixedCountRule(samples)).gpu_us).median


def sustained(cupy, fn, seconds=1.5):
    """--power: fn back to back for `seconds` (no L2 flush between) while NVML is read every 2 ms: the board power,
    the SM clock and the clock event reasons any reading named. Is the clock a GEMM runs at set by its power?"""
    import threading
    import time

    from zincbench.gpu.nvml import Nvml, reason_names

    nvml = Nvml()
    readings, stop = [], threading.Event()

    def read():
        while not stop.is_set():
            clock = nvml.clock_sample()
            readings.append((nvml.power_mw(), clock.sm_mhz, clock.reasons))
            time.sleep(0.002)

    reader = threading.Thread(target=read)
    reader.start()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(16):
            fn()
        cupy.cuda.get_current_stream().synchronize()
    stop.set()
    reader.join()
    watts = [p / 1e3 for p, _, _ in readings if p is not None] or [float("nan")]
    clocks = sorted(c for _, c, _ in readings if c is not None) or [0]
    reasons = 0
    for _, _, bits in readings:
        reasons |= bits
    return (
        f"sustained {seconds} s: {np.mean(watts):.0f} W (max {max(watts):.0f}), SM clock median "
        f"{clocks[len(clocks) // 2]} MHz (min {clocks[0]}), reasons: {', '.join(reason_names(reasons)) or 'none'}"
    )


def probe_t2(timer, cupy, rng, e=256, m=512, k=2048, top_k=8, tiles_by_n_e=None):
    w = quantized(cupy, rng, "q4_k", (e, m), k)
    for n_e in tiles_by_n_e or (8, 16, 32, 64):
        t = n_e * e // top_k
        ids_d = cupy.asarray(routing_table(rng, t, top_k, e))
        x = activations(cupy, rng, (t, k))
        xps = {order: permuted(cupy, x, order) for order in ("mma", "wgmma")}
        xp = xps["mma"]
        y = cupy.empty((t, top_k, m), dtype=cupy.float32)
        flops = 2 * t * top_k * m * k
        if not tiles_by_n_e:  # the GEMM's inputs: the routing build alone, the permute alone, both as T2 runs them
            spaces = {build: RoutingWorkspace(t, top_k, e, 16, build=build) for build in ROUTING_BUILDS}
            # the one-launch build's two route paths, each forced (the default picks by ONE_LAUNCH_SINGLE_BLOCK_ITEMS)
            for path, items in (("multi", 0), ("single", t * top_k)):
                spaces[f"one_launch/{path}"] = RoutingWorkspace(
                    t, top_k, e, 16, build="one_launch", single_block_items=items
                )
            alone = ", ".join(f"{b} {timed(timer, lambda: build_routing(ids_d, ws)):.1f}" for b, ws in spaces.items())
            both = ", ".join(
                f"{b} {timed(timer, lambda: route_and_permute(ids_d, ws, x, xp)):.1f}" for b, ws in spaces.items()
            )
            permute = timed(timer, lambda: permute_activations(x, xp))
            print(f"T2 E{e} M{m} Ne{n_e}: route ({alone}) us, permute {permute:.1f} us; both ({both}) us", flush=True)
        else:
            print(f"T2 E{e} M{m} Ne{n_e}: the GEMM alone", flush=True)
        for spec in tiles_by_n_e[n_e] if tiles_by_n_e else T2_TILES:
            gemm = kernel_or_none(spec, True, "q4_k")
            if gemm is None:
                continue
            tile = gemm.tile
            ws = RoutingWorkspace(t, top_k, e, tile.bn)
            build_routing(ids_d, ws)
            xt = xps[tile.x_order]

            def run(gemm=gemm, xt=xt, ws=ws):
                gemm.grouped_call(w, xt, y, m, k, ws.tiles, ws.offsets, ws.sorted_ids, top_k)

            us = timed(timer, run)
            per_sm = gemm.resident // cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
            print(
                f"  gemm {spec:12s} {tile.label:18s} {us:8.1f} us  {flops / us / 1e6:6.1f} TFLOP/s  "
                f"{w.nbytes / us / 1e3:6.0f} GB/s(w)  {per_sm} blocks/SM",
                flush=True,
            )
            if POWER and not ONCE:
                print(f"    {sustained(cupy, run)}", flush=True)


T1_SHAPES = ((4096, 4096, 512, "q4_k"), (4096, 4096, 2048, "q4_k"), (21504, 5376, 1024, "q4_k"))
T1_Q6K_SHAPES = tuple((5376, 21504, t, "q6_k") for t in (512, 1024, 2048))  # gemma4-31b ffn_down
# The widest Q6_K tiles of two warpgroups and of one, at T 2048 (where the decode binds): the form to run under ncu
T1_Q6K_WIDE_SHAPES = T1_Q6K_SHAPES[-1:]
T1_Q6K_WIDE_TILES = [
    "wgmma+sk:1,24,8,1,3",
    "wgmma+sk+quarter:1,24,8,1,3",
    "wgmma+sk:1,32,4,1,3",
    "wgmma+sk:1,16,12,1,3",
]
# The same register relief on the T1 tiles that run at 255 registers (Q6_K's widest, Q4_K's 128x256): Q6_K T 2048
# 128x192 1363.8 -> 1261.9 us, Q4_K 128x256 445.1 -> 433.1 us; 64x256 (one warpgroup) gains only at T <= 1024
T1_QUARTER_SHAPES = T1_Q6K_SHAPES + ((21504, 5376, 1024, "q4_k"),)
T1_QUARTER_TILES = [
    "wgmma+sk:1,24,8,1,3",
    "wgmma+sk+quarter:1,24,8,1,3",
    "wgmma+sk:1,32,4,1,3",
    "wgmma+sk+quarter:1,32,4,1,3",
    "wgmma+sk:1,32,8,1,3",
    "wgmma+sk+quarter:1,32,8,1,3",
]

# The Q6_K stage's row stride (ZbQ6KFormat::row_stride), A/B across kernel sources (mode `q6stride`, run by
# scripts/ab_kernels.sh): the T1 choice, a 128-token wgmma tile and the portable 128x128
T1_Q6K_STRIDE_TILES = ["wgmma+sk+quarter:1,24,8,1,3", "wgmma:1,16,8,1,4", "1,16,8,1,2"]
# More warps per SM through the quarter pipeline's register relief (ptxas, 809ff52): Q6_K 192x128 (three warpgroups)
# fits 168 registers without spilling (it spilled 20-104 bytes half-pipelined), so 12 warps per SM instead of 128x192's
# 8; Q4_K 256x128 (four warpgroups) fits 128 registers, 16 warps per SM. Q6_K 256x128 spills 304 bytes at 128.
# On 2026-12-02 every one lost to the widest token tile (results/h200/trim-widths-q6k-stride-20261202/).
T1_WIDE_SHAPES = T1_Q6K_SHAPES + ((21504, 5376, 1024, "q4_k"), (4096, 4096, 2048, "q4_k"))
T1_WIDE_TILES = [
    "wgmma+sk+quarter:1,24,8,1,3",
    "wgmma+sk+quarter:1,16,12,1,3",
    "wgmma+sk+quarter:1,32,8,1,3",
    "wgmma+sk+quarter:1,16,16,1,3",
]

# Q6_K repacked at load (q6_k_r: 224-byte aligned blocks, fp16 scales; ZbQ6KR) beside the GGUF layout, the same
# shapes and tiles in one run (mode `q6r`): the T1 choice, the half-pipelined 128x192, 128x128 at three and four
# stages, the widest tile of one warpgroup and the portable 128x128 (what sm_89 / sm_120 users get)
T1_Q6K_REPACK_SHAPES = tuple((m, k, t, w) for m, k, t, _ in T1_Q6K_SHAPES for w in ("q6_k", "q6_k_r"))
T1_Q6K_REPACK_TILES = [
    "wgmma+sk+quarter:1,24,8,1,3",
    "wgmma+sk:1,24,8,1,3",
    "wgmma:1,16,8,1,3",
    "wgmma+sk:1,16,8,1,4",
    "wgmma+sk+quarter:1,32,4,1,3",
    "1,16,8,1,2",
]
# Under ncu (mode `q6rwide`): the T1 choice on both layouts at T 2048
T1_Q6K_REPACK_WIDE_SHAPES = T1_Q6K_REPACK_SHAPES[-2:]
T1_Q6K_REPACK_WIDE_TILES = T1_Q6K_REPACK_TILES[:1]

# The wgmma pipeline's synchronization (mode `ring`, for scripts/ab_kernels.sh): the tiles the gates chose on both
# families, T2's by N_e (N_e 64: both 96-token tiles the autotuner has picked) with its mma.sync tile at N_e 8 as the
# control, whose code the wgmma path's changes leave alone; T1's on Q4_K and repacked Q6_K
T2_RING_TILES = {**T2_CHOSEN_TILES, 64: ["wgmma+quarter:1,12,8,1,3,2,1", "wgmma+quarter:1,12,16,1,4,1,1"]}
T1_RING_SHAPES = T1_SHAPES[1:] + tuple(shape for shape in T1_Q6K_REPACK_SHAPES if shape[3] == "q6_k_r")
T1_RING_TILES = ["wgmma+sk+quarter:1,24,8,1,3", "wgmma+sk:1,16,8,1,4"]


# TMA stages against cp.async ones (mode `tma`), in one process: each tile and its tma twin in the order A B B A, on
# the tiles the gates chose (T2 by N_e; T1's on Q4_K and repacked Q6_K)
def abba_twins(tiles: list[str], flag: str = "tma") -> list[str]:
    twins = [(tile, tile.replace(":", f"+{flag}:", 1)) for tile in tiles]
    return [spec for tile, twin in twins for spec in (tile, twin, twin, tile)]


# T2: the wgmma tiles picked at N_e >= 16 in the last runs (the mma.sync tile picked at N_e 8 has no TMA twin: two
# wgmma 64x16 tiles instead, and it as the control, unchanged code)
T2_TMA_TILES = {
    8: ["1,2,4,1,3", *abba_twins(["wgmma:1,2,4,1,4", "wgmma:1,2,8,1,4"])],
    16: abba_twins(["wgmma:1,4,8,1,4", "wgmma:1,4,8,1,4,2,1"]),
    32: abba_twins(["wgmma:1,8,8,1,4,2,1"]),
    64: abba_twins(["wgmma+quarter:1,10,8,1,3,2,1", "wgmma+quarter:1,12,8,1,3,2,1"]),
}
T1_TMA_TILES = abba_twins(T1_RING_TILES)
# More warps per SM at N_e <= 32 (mode `occupancy`): the quarter pipeline's registers (ptxas: 68 at 128x16, 76 at
# 128x32, 72 at 64x16, against 98 / 106 / 101) let three 256-thread blocks, or seven 128-thread ones, share an SM;
# each tile beside its quarter twin, A B B A (results/h200/whole-20261204/: within 1.5%)
T2_OCCUPANCY_TILES = {
    8: abba_twins(["wgmma+tma:1,2,8,1,4", "wgmma+tma:1,2,4,1,3", "wgmma+tma:1,2,8,1,3"], "quarter"),
    16: abba_twins(["wgmma+tma:1,4,8,1,4", "wgmma+tma:1,4,8,1,3", "wgmma+tma:1,4,4,1,4"], "quarter"),
    32: abba_twins(["wgmma+tma:1,8,8,1,4,2,1", "wgmma+tma:1,8,8,1,3,2,1", "wgmma+tma:1,4,8,1,4,2,1"], "quarter"),
}
# Whole-superblock stages (mode `whole`): each tile beside its whole twin, A B B A. A whole stage holds twice a half
# stage's bytes, so some twins fit fewer blocks per SM (the probe prints them)
T2_WHOLE_TILES = {
    8: abba_twins(["wgmma+tma:1,2,8,1,4", "wgmma+quarter+tma:1,2,8,1,3", "wgmma+tma:1,2,4,1,4"], "whole"),
    16: abba_twins(["wgmma+tma:1,4,8,1,4", "wgmma+tma:1,4,8,1,3", "wgmma+quarter+tma:1,4,8,1,3"], "whole"),
    32: abba_twins(["wgmma+tma:1,8,8,1,4,2,1", "wgmma+quarter+tma:1,8,8,1,3,2,1"], "whole"),
    64: abba_twins(["wgmma+quarter+tma:1,12,8,1,3,2,1"], "whole"),
}


def abba(a: str, b: str) -> list[str]:
    return [a, b, b, a]


# 256 weight rows a block (mode `whole256`): X, gathered per token tile, is read from L2 once per 256 rows instead of
# per 128; one 16-warp block per SM. Each beside the whole tile T2 chose (N_e 8, 16) or the TMA choice (N_e 32)
T2_WHOLE_256_TILES = {
    8: abba("wgmma+tma+whole:1,2,8,1,4", "wgmma+tma+whole:1,2,16,1,4"),
    16: abba("wgmma+tma+whole:1,4,8,1,3", "wgmma+tma+whole:1,4,16,1,3")
    + abba("wgmma+tma+whole:1,4,8,1,3", "wgmma+tma+whole:1,4,16,1,4"),
    32: abba("wgmma+tma:1,8,8,1,4,2,1", "wgmma+tma+whole:1,8,16,1,3,1,1")
    + abba("wgmma+tma:1,8,8,1,4,2,1", "wgmma+tma:1,8,16,1,4,1,1"),
}

# The tiles T2 chose at E256-M512 in its newest record (2026-12-04, 984e9d9, results/h200/persist-producer-20261204/),
# one per N_e in that order (mode `t2now`; its --once launches are what ncu_t2now profiles)
T2_NOW_TILES = {
    8: ["wgmma+tma+whole+allrows:1,2,8,1,4"],
    16: ["wgmma+tma+whole+allrows:1,4,8,1,3"],
    32: ["wgmma+quarter+tma+whole+allrows+producer+persist:1,8,16,1,3,1,1"],
    64: ["wgmma+quarter+tma+allrows+producer:1,12,16,1,4,1,1"],
}

# A block running every row block of its token tile in turn (mode `allrows`), A B B A beside its one-unit twin: T2's
# choices of 2864e71, and the 128-row tiles of two blocks per SM at N_e 32 and 64
T2_ALL_ROWS_TILES = {
    n_e: abba_twins(tiles, "allrows")
    for n_e, tiles in {
        8: ["wgmma+tma+whole:1,2,8,1,4"],
        16: ["wgmma+tma+whole:1,4,8,1,3"],
        32: ["wgmma+tma+whole:1,8,16,1,3,1,1", "wgmma+tma:1,8,8,1,4,2,1"],
        64: ["wgmma+quarter+tma:1,12,16,1,4,1,1", "wgmma+quarter+tma:1,12,8,1,3,2,1"],
    }.items()
}

# A producer warpgroup filling the ring (mode `producer`), A B B A beside T2's choice at N_e 32 and 64: its quarter
# twin (the producer's MMA warps have 112 registers: quarters), then the producer, alone and with allrows
T2_PRODUCER_TILES = {
    32: abba("wgmma+tma+whole:1,8,16,1,3,1,1", "wgmma+quarter+tma+whole:1,8,16,1,3,1,1")
    + abba("wgmma+tma+whole:1,8,16,1,3,1,1", "wgmma+quarter+tma+whole+producer:1,8,16,1,3,1,1")
    + abba("wgmma+tma+whole:1,8,16,1,3,1,1", "wgmma+quarter+tma+whole+allrows+producer:1,8,16,1,3,1,1"),
    64: abba("wgmma+quarter+tma:1,12,16,1,4,1,1", "wgmma+quarter+tma+producer:1,12,16,1,4,1,1")
    + abba("wgmma+quarter+tma:1,12,16,1,4,1,1", "wgmma+quarter+tma+allrows+producer:1,12,16,1,4,1,1"),
}

# Persistent blocks (mode `persist`; `ab_persist` against an older kernels/ folder), A B B A beside their twins at N_e
# 32 and 64: a block's later token tiles start under its earlier ones (results/h200/persist-producer-20261204/)
T2_PERSIST_TILES = {
    32: abba("wgmma+quarter+tma+whole+allrows+producer:1,8,16,1,3,1,1", T2_NOW_TILES[32][0]),
    64: abba(T2_NOW_TILES[64][0], T2_NOW_TILES[64][0].replace(":", "+persist:")),
}

# The GEMM as the routing launch's programmatic dependent (mode `pdl`): the whole op T2 times (one-launch route +
# permute, then the GEMM), launched as usual and as a dependent, A B B A, on the tiles T2 chose at E256-M512 on
# 2026-12-04 (c1599df, results/h200/whole-20261204/), and the 256x96 quarter TMA tile at N_e 64 (X read from L2 once per
# 256 weight rows)
T2_PDL_TILES = {
    8: ["wgmma+tma+whole:1,2,8,1,4"],
    16: ["wgmma+tma+whole:1,4,8,1,3", "wgmma+tma:1,4,8,1,4"],
    32: ["wgmma+tma+whole:1,8,16,1,3,1,1", "wgmma+tma:1,8,8,1,4,2,1"],
    64: ["wgmma+quarter+tma:1,12,8,1,3,2,1", "wgmma+quarter+tma:1,12,16,1,4,1,1"],
}


def t2_case(cupy, rng, n_e, e, m, k, top_k):
    """A T2 case's tokens, routing table (on the GPU), activations and output buffer."""
    t = n_e * e // top_k
    ids_d = cupy.asarray(routing_table(rng, t, top_k, e))
    return t, ids_d, activations(cupy, rng, (t, k)), cupy.empty((t, top_k, m), dtype=cupy.float32)


def probe_pdl(timer, cupy, rng, e=256, m=512, k=2048, top_k=8):
    w = quantized(cupy, rng, "q4_k", (e, m), k)
    for n_e, specs in T2_PDL_TILES.items():
        t, ids_d, x, y = t2_case(cupy, rng, n_e, e, m, k, top_k)
        print(
            f"T2 E{e} M{m} Ne{n_e}: route + permute + GEMM, launched as usual / as the routing's dependent", flush=True
        )
        for spec in specs:
            gemm = kernel_or_none(spec, True, "q4_k")
            if gemm is None:
                continue
            tile = gemm.tile
            ws = RoutingWorkspace(t, top_k, e, tile.bn, build="one_launch")
            xp = permuted(cupy, x, tile.x_order)

            def op(dependent):
                route_and_permute(ids_d, ws, x, xp, tile.x_order)
                gemm.grouped_call(w, xp, y, m, k, ws.tiles, ws.offsets, ws.sorted_ids, top_k, dependent=dependent)

            times = [timed(timer, lambda: op(dependent)) for dependent in (False, True, True, False)]
            print(
                f"  {spec:34s} {tile.label:36s} usual {times[0]:6.1f} / {times[3]:6.1f} us, "
                f"dependent {times[1]:6.1f} / {times[2]:6.1f} us",
                flush=True,
            )


# The GEMM's inputs (mode `prologue`), E256-M512: each routing build alone, the permute alone in both orders, route +
# permute in each one-launch build; then the whole op as T2 runs it (the GEMM as the routing launch's dependent) on
# the tiles T2 chose on 4891415 (results/h200/pdl-20261204/), one_launch against replicated, A B B A
T2_PROLOGUE_TILES = {
    8: "wgmma+tma+whole:1,2,8,1,4",
    16: "wgmma+tma+whole:1,4,8,1,3",
    32: "wgmma+tma+whole:1,8,16,1,3,1,1",
    64: "wgmma+quarter+tma:1,12,16,1,4,1,1",
}


def probe_prologue(timer, cupy, rng, e=256, m=512, k=2048, top_k=8):
    w = quantized(cupy, rng, "q4_k", (e, m), k)
    for n_e, spec in T2_PROLOGUE_TILES.items():
        t, ids_d, x, y = t2_case(cupy, rng, n_e, e, m, k, top_k)
        spaces = {build: RoutingWorkspace(t, top_k, e, 16, build=build) for build in ROUTING_BUILDS}
        alone = ", ".join(f"{b} {timed(timer, lambda: build_routing(ids_d, ws), 50):.1f}" for b, ws in spaces.items())
        xps = {order: permuted(cupy, x, order) for order in ("mma", "wgmma")}
        permute = ", ".join(f"{o} {timed(timer, lambda: permute_activations(x, xp), 50):.1f}" for o, xp in xps.items())
        both = ", ".join(
            f"{b} {timed(timer, lambda: route_and_permute(ids_d, spaces[b], x, xps['wgmma'], 'wgmma'), 50):.1f}"
            for b in PERMUTING_BUILDS
        )
        print(f"T2 E{e} M{m} Ne{n_e}: route ({alone}) us; permute ({permute}) us; route + permute ({both}) us")
        gemm = kernel_or_none(spec, True, "q4_k")
        if gemm is None:
            continue
        tile = gemm.tile
        xp = permuted(cupy, x, tile.x_order)
        built = RoutingWorkspace(t, top_k, e, tile.bn)
        route_and_permute(ids_d, built, x, xp, tile.x_order)
        gemm_alone = timed(
            timer, lambda: gemm.grouped_call(w, xp, y, m, k, built.tiles, built.offsets, built.sorted_ids, top_k)
        )
        ops = {}
        for build in PERMUTING_BUILDS:
            ws = RoutingWorkspace(t, top_k, e, tile.bn, build=build)

            def op(ws=ws):
                route_and_permute(ids_d, ws, x, xp, tile.x_order)
                gemm.grouped_call(w, xp, y, m, k, ws.tiles, ws.offsets, ws.sorted_ids, top_k, dependent=True)

            ops[build] = op
        a, b = PERMUTING_BUILDS
        times = {build: [] for build in PERMUTING_BUILDS}
        for build in (a, b, b, a):
            times[build].append(timed(timer, ops[build]))
        print(
            f"  {spec:34s} {tile.label:36s} GEMM alone {gemm_alone:6.1f} us; whole op, dependent: "
            + ", ".join(f"{build} {v[0]:6.1f} / {v[1]:6.1f} us" for build, v in times.items()),
            flush=True,
        )


# The 1024-row k/v projections, where the big wgmma tiles leave most SMs idle: smaller tiles
T1_SMALL_SHAPES = ((1024, 4096, 512, "q4_k"), (1024, 5120, 512, "q4_k"), (1024, 5120, 1024, "q4_k"))
T1_SMALL_TILES = [
    "2,8,4,1,2,3",
    "1,8,8,1,3,2",
    "wgmma:1,8,4,1,4,3",
    "wgmma:1,16,4,1,3,2",
    "wgmma:1,4,4,1,4,4",
    "wgmma:1,8,8,1,4,2",
]


# Stream-K against whole tiles where the grid's last wave is partial (the T 2048 cells the gate missed: 320 tiles
# of 128x256 on 132 SMs) and where one wave is mostly empty (the 1024-row k/v projections)
T1_SK_SHAPES = ((5120, 6144, 2048, "q4_k"), (5120, 17408, 2048, "q4_k"), (5376, 8192, 2048, "q4_k"))
T1_SK_SHAPES += T1_SMALL_SHAPES
T1_SK_TILES = [
    "wgmma:1,16,8,1,4",
    "wgmma+sk:1,16,8,1,4",
    "wgmma:1,32,8,1,3",
    "wgmma+sk:1,32,8,1,3",
    "wgmma:1,8,4,1,4,3",
    "wgmma+sk:1,8,4,1,4,3",
    "2,8,4,1,3",
    "sk:2,8,4,1,3",
]


def probe_t1(timer, cupy, rng, shapes=T1_SHAPES + T1_Q6K_SHAPES, tiles=None):
    for m, k, t, weights in shapes:
        w = quantized(cupy, rng, weights, (m,), k)
        x = activations(cupy, rng, (t, k))
        xps = {order: permuted(cupy, x, order) for order in ("mma", "wgmma")}
        xp = xps["mma"]
        y = cupy.empty((t, m), dtype=cupy.float32)
        print(
            f"T1 {weights} M{m} K{k} T{t}: permute {timed(timer, lambda: permute_activations(x, xp)):.1f} us",
            flush=True,
        )
        for spec in tiles or (T1_Q6K_TILES if weights.startswith("q6_k") else T1_TILES):
            gemm = kernel_or_none(spec, False, weights)
            if gemm is None:
                continue
            tile = gemm.tile
            xt = xps[tile.x_order]
            us = timed(timer, lambda: gemm.dense(w, xt, y, m, k, t))
            s = gemm.schedule(m, k, t)
            print(
                f"  gemm {spec:20s} {tile.label:24s} {us:8.1f} us  {2 * m * k * t / us / 1e6:6.1f} TFLOP/s  "
                f"blocks {s.dp_tiles}+{s.ctas} sk",
                flush=True,
            )


if __name__ == "__main__":
    import cupy

    which = next((a for a in sys.argv[1:] if not a.startswith("--")), "all")  # one of the docstring's modes
    timer = GpuTimer(TimerConfig(mode="cold", warmup=2))
    rng = np.random.default_rng(0)
    if which in ("t2", "all"):
        probe_t2(timer, cupy, rng)
    if which == "t2chosen":
        probe_t2(timer, cupy, rng, tiles_by_n_e=T2_CHOSEN_TILES)
    if which == "chosen":
        probe_t2(timer, cupy, rng, tiles_by_n_e=T2_TMA_CHOSEN_TILES)
        probe_t1(timer, cupy, rng, T1_RING_SHAPES, T1_TMA_CHOSEN_TILES)
    if which == "quarter":
        probe_t2(timer, cupy, rng, tiles_by_n_e={n_e: T2_QUARTER_TILES for n_e in (8, 16, 32, 64)})
        probe_t1(timer, cupy, rng, T1_QUARTER_SHAPES, T1_QUARTER_TILES)
    if which == "widths":
        probe_t2(timer, cupy, rng, tiles_by_n_e={n_e: T2_TRIM_TILES for n_e in (8, 16, 32, 64)})
    if which == "widths80":
        probe_t2(timer, cupy, rng, tiles_by_n_e={n_e: T2_WIDTH_TILES for n_e in (8, 16, 32, 64)})
    if which in ("t1", "all"):
        probe_t1(timer, cupy, rng)
    if which == "q6stride":
        probe_t1(timer, cupy, rng, T1_Q6K_SHAPES, T1_Q6K_STRIDE_TILES)
    if which == "t1wide":
        probe_t1(timer, cupy, rng, T1_WIDE_SHAPES, T1_WIDE_TILES)
    if which == "t1q6":
        probe_t1(timer, cupy, rng, T1_Q6K_SHAPES)
    if which == "q6r":
        probe_t1(timer, cupy, rng, T1_Q6K_REPACK_SHAPES, T1_Q6K_REPACK_TILES)
    if which == "q6rwide":
        probe_t1(timer, cupy, rng, T1_Q6K_REPACK_WIDE_SHAPES, T1_Q6K_REPACK_WIDE_TILES)
    if which == "ring":
        probe_t2(timer, cupy, rng, tiles_by_n_e=T2_RING_TILES)
        probe_t1(timer, cupy, rng, T1_RING_SHAPES, T1_RING_TILES)
    if which == "occupancy":
        probe_t2(timer, cupy, rng, tiles_by_n_e=T2_OCCUPANCY_TILES)
    if which == "whole":
        probe_t2(timer, cupy, rng, tiles_by_n_e=T2_WHOLE_TILES)
    if which == "pdl":
        probe_pdl(timer, cupy, rng)
    if which == "prologue":
        probe_prologue(timer, cupy, rng)
    if which == "t2now":
        probe_t2(timer, cupy, rng, tiles_by_n_e=T2_NOW_TILES)
    if which == "allrows":
        probe_t2(timer, cupy, rng, tiles_by_n_e=T2_ALL_ROWS_TILES)
    if which == "producer":
        probe_t2(timer, cupy, rng, tiles_by_n_e=T2_PRODUCER_TILES)
    if which == "persist":
        probe_t2(timer, cupy, rng, tiles_by_n_e=T2_PERSIST_TILES)
    if which == "whole256":
        probe_t2(timer, cupy, rng, tiles_by_n_e=T2_WHOLE_256_TILES)
    if which == "tma":
        probe_t2(timer, cupy, rng, tiles_by_n_e=T2_TMA_TILES)
        probe_t1(timer, cupy, rng, T1_RING_SHAPES, T1_TMA_TILES)
    if which == "t1q6wide":
        probe_t1(timer, cupy, rng, T1_Q6K_WIDE_SHAPES, T1_Q6K_WIDE_TILES)
    if which in ("t1small", "all"):
        probe_t1(timer, cupy, rng, T1_SMALL_SHAPES, T1_SMALL_TILES)
    if which in ("t1sk", "all"):
        probe_t1(timer, cupy, rng, T1_SK_SHAPES, T1_SK_TILES)
