"""The fused-dequant K-quant (Q4_K, Q5_K, Q6_K) Tensor-core kernel against float64 references, at odd shapes.

Tolerance: both operands are rounded to fp16 (the weights through fp16 scales: d*sc and dmin*m, one
fma, for Q4_K and Q5_K; d*sc times q - 32 for Q6_K), accumulation is f32: 2e-3 relative Frobenius error vs the
exact float64 product is a loose bound for correct code and orders of magnitude below what an indexing
bug produces. Weights are fresh random valid blocks (signed Q6_K scales, subnormal d included). K = 768
makes Q6_K rows 630 bytes long, so blocks start at every even misalignment (the kernel's unaligned path); K = 512
(420-byte rows, 0 mod 4) takes the stage's padded row stride (ZbQ6KFormat::row_stride). Q6_K repacked at load
(q6_k_r, 16-byte aligned blocks with fp16 scales) must give the GGUF layout's outputs bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from zincbench.quant import get_format
from zincbench.reference import kernels_ref as ref

pytestmark = pytest.mark.gpu
TOL = 2e-3
# Tile shapes per weight format: the gates' choices plus WM = 2, a trimmed 64-token tile (trim_n: warps
# skip empty 8-token columns) and a 128-token tile (the last, dense only).
# Every format also runs the Hopper (wgmma) path on sm_90: one and two warpgroups, 16- to 256-token tiles (72 and 80
# too), trimmed to a multiple of 8 (skipped on other GPUs; Q6_K's there stages half superblocks, ZbQ6KHalf: up to 192
# tokens with one or two warpgroups, 64x256 no longer fitting beside its padded rows); the quarter tiles pipeline the
# wgmma A fragments a quarter superblock at a time. Two warps along N ("1,2,4,2,*": 64 rows, 256 threads) leave the
# Q5_K qh, Q6_K and repacked Q6_K loaders a partial last pass (ZbChunkPasses). The tma tiles copy their weights (and a
# dense tile its X) as TMA boxes: rows and tokens past the tensor's end come zero-filled.
WGMMA_TILES = ["wgmma:1,2,4,1,4", "wgmma:1,8,4,1,3,1,1", "wgmma:1,16,8,1,3,1,1", "wgmma:1,32,8,1,3"]
TILES = {
    "q4_k": [
        "1,2,4,1,3",
        "1,8,8,1,3,2",
        "2,8,4,1,2,3",
        "1,8,8,1,3,2,1",
        *WGMMA_TILES,
        "wgmma+quarter:1,12,8,1,3,2,1",
        "wgmma+quarter:1,10,8,1,3,2,1",
        "wgmma+tma:1,2,4,1,4",
        "wgmma+tma:1,8,8,1,4,2,1",
        "wgmma+quarter+tma:1,10,8,1,3,2,1",
        "1,16,8,1,2",
    ],
    "q6_k": [
        "1,2,4,1,2",
        "1,8,8,1,2,2",
        "2,8,4,1,2",
        "1,8,4,1,2,1,1",
        "wgmma:1,2,4,1,3",
        "wgmma:1,8,8,1,3,1,1",
        "wgmma:1,16,8,1,4,1,1",
        "wgmma:1,24,8,1,3",
        "wgmma:1,24,4,1,3",
        "wgmma+quarter:1,24,8,1,3",
        "wgmma:1,9,4,1,3",
        "1,2,4,2,2",
        "1,16,8,1,2",
    ],
    "q5_k": [
        "1,2,4,1,3",
        "2,8,4,1,2,3",
        "1,8,4,1,3,1,1",
        "1,2,4,2,3",
        "wgmma:1,4,8,1,3",
        "wgmma+quarter:1,4,8,1,3",
        "wgmma+tma:1,4,8,1,3",
        "1,16,8,1,2",
    ],
    # Q6_K repacked at load (ZbQ6KR): the T1 tiles on both paths, 64x256 (one warpgroup) and a trimmed one
    "q6_k_r": [
        "1,2,4,1,3",
        "2,8,4,1,3",
        "1,8,4,1,3,1,1",
        "wgmma:1,2,4,1,4",
        "wgmma:1,16,8,1,4,1,1",
        "wgmma:1,24,8,1,3",
        "wgmma+quarter:1,24,8,1,3",
        "wgmma+quarter:1,32,4,1,3",
        "wgmma+tma:1,16,8,1,4,1,1",
        "1,2,4,2,3",
        "1,16,8,1,2",
    ],
}
CASES = [(weights, tile) for weights, tiles in TILES.items() for tile in tiles]


def gemm_for(cupy, tile: str, **kwargs):
    """The kernel for ``tile``; skips a wgmma tile on a GPU other than sm_90."""
    from zincbench.ops.fused import FusedKQuantGemm, MmaTile

    tile_obj = MmaTile.parse(tile)
    if tile_obj.wgmma and cupy.cuda.Device().compute_capability != "90":
        pytest.skip("the wgmma path is sm_90 only")
    return FusedKQuantGemm(tile_obj, **kwargs)


@pytest.mark.parametrize(
    "rows, k, max_blocks",
    [(3, 512, None), (37, 2304, None), (37, 2304, 2)],  # 2 blocks: each thread strides over several chunks
    ids=["3x512", "37x2304", "37x2304-two-blocks"],
)
def test_permuted_activation_layout(cupy, rng, monkeypatch, rows, k, max_blocks):
    from zincbench.ops import fused
    from zincbench.ops.fused import permute_activations, permuted_activations

    if max_blocks:
        monkeypatch.setattr(fused, "PERMUTE_MAX_BLOCKS", max_blocks)
    x = rng.standard_normal((rows, k), dtype=np.float32)
    xp = permuted_activations(cupy, rows, k)
    xp.fill(0xFFFFFFFF)
    permute_activations(cupy.asarray(x), xp)
    got = xp.get().view(np.float16).reshape(rows, k)
    want = np.empty((rows, k), dtype=np.float16)
    for sb in range(k // 256):
        for h in range(2):
            for i in range(4):
                for c in range(4):
                    e = 64 * (2 * h + (c >> 1)) + 16 * (c & 1) + 4 * i
                    base = sb * 256 + 128 * h + 32 * i + 8 * c
                    src = sb * 256 + e + np.array([0, 2, 1, 3, 32, 34, 33, 35])
                    want[:, base : base + 8] = x[:, src].astype(np.float16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def test_wgmma_activation_order_transposes_each_group_of_four_chunks(cupy, rng):
    """x_f32_to_f16_kquant_perm_wgmma: chunk (i, w) of a half holds word w (fp16 pair) of chunks (i, 0..3) of the
    mma order, so step 2i (2i + 1) of a wgmma reads the lo (hi) pairs of all four lanes."""
    from zincbench.ops.fused import permute_activations, permuted_activations

    rows, k = 3, 768
    x = cupy.asarray(rng.standard_normal((rows, k), dtype=np.float32))
    mma, wgmma = permuted_activations(cupy, rows, k), permuted_activations(cupy, rows, k)
    permute_activations(x, mma, "mma")
    permute_activations(x, wgmma, "wgmma")
    words = mma.get().reshape(rows, k // 32, 4, 4)  # [row][group of 4 chunks (i)][chunk c][word w]
    assert np.array_equal(wgmma.get().reshape(rows, k // 32, 4, 4), words.transpose(0, 1, 3, 2))


@pytest.mark.parametrize("weights,tile", CASES)
@pytest.mark.parametrize("m,k,t", [(197, 256, 1), (64, 768, 37), (300, 512, 130), (131, 1280, 9)])
def test_dense_matches_reference(cupy, rng, weights, tile, m, k, t):
    from zincbench.ops.fused import MmaTile, permute_activations, permuted_activations

    fmt = get_format(weights)
    w_host = fmt.random_blocks(rng, m, k)
    x_host = rng.standard_normal((t, k), dtype=np.float32)
    xp = permuted_activations(cupy, t, k)
    y = cupy.full((t, m), cupy.nan, dtype=cupy.float32)
    permute_activations(cupy.asarray(x_host), xp, MmaTile.parse(tile).x_order)
    gemm_for(cupy, tile, grouped=False, weights=weights).dense(cupy.asarray(w_host), xp, y, m, k, t)
    got = y.get()
    assert not np.isnan(got).any(), "unwritten outputs"
    assert ref.rel_frobenius(got, ref.dense_gemm(fmt.dequantize(w_host), x_host)) < TOL


# Stream-K on both paths and every format (the same kernel instances as TILES: sk only changes the launch).
SK_CASES = [
    *(("q4_k", t) for t in ("sk:1,2,4,1,3", "sk:2,8,4,1,2,3", "wgmma+sk:1,2,4,1,4", "wgmma+sk:1,32,8,1,3")),
    ("q4_k", "wgmma+sk:1,16,8,1,3,1,1"),
    *(("q4_k", t) for t in ("wgmma+sk+quarter:1,32,8,1,3", "wgmma+sk+quarter:1,8,4,1,3")),
    ("q6_k", "wgmma+sk+quarter:1,24,8,1,3"),
    *(("q6_k", t) for t in ("sk:2,8,4,1,2", "wgmma+sk:1,2,4,1,3", "wgmma+sk:1,24,8,1,3", "wgmma+sk:1,24,4,1,3")),
    *(("q5_k", t) for t in ("sk:2,8,4,1,2,3", "wgmma+sk:1,4,8,1,3")),
    *(("q6_k_r", t) for t in ("sk:2,8,4,1,3", "wgmma+sk+quarter:1,24,8,1,3", "wgmma+sk:1,16,8,1,4")),
    *(("q6_k_r", t) for t in ("wgmma+sk+tma:1,16,8,1,4", "wgmma+sk+quarter+tma:1,24,8,1,3")),
    ("q4_k", "wgmma+sk+quarter+tma:1,24,8,1,3"),
]


@pytest.mark.parametrize("weights,tile", SK_CASES)
@pytest.mark.parametrize("m,k,t", [(300, 1280, 130), (197, 2304, 37), (64, 768, 9)])
@pytest.mark.parametrize("slots", [None, 2, 5, 7])
def test_stream_k_matches_reference_bit_for_bit_across_runs(cupy, rng, weights, tile, m, k, t, slots):
    """The GPU's own schedule, and schedules of a GPU with 2, 5 or 7 resident blocks (whole tiles, then the last
    wave's superblocks shared in ranges that cross tiles): the reference product, the same bits on a second
    launch (partials are summed in block order, whoever completes a tile), and the tile counters back at zero."""
    from zincbench.ops.fused import MmaTile, permute_activations, permuted_activations, stream_k_schedule

    fmt = get_format(weights)
    w_host = fmt.random_blocks(rng, m, k)
    x_host = rng.standard_normal((t, k), dtype=np.float32)
    xp = permuted_activations(cupy, t, k)
    permute_activations(cupy.asarray(x_host), xp, MmaTile.parse(tile).x_order)
    gemm = gemm_for(cupy, tile, grouped=False, weights=weights)
    whole = gemm.schedule(m, k, t)
    schedule = whole if slots is None else stream_k_schedule(whole.tiles, k // 256, slots, min_superblocks=1)
    if slots is not None and whole.tiles % slots:
        assert schedule.ctas > schedule.tiles - schedule.dp_tiles > 0, "the case must exercise stream-K"
    w = cupy.asarray(w_host)
    runs = []
    for _ in range(2):
        y = cupy.full((t, m), cupy.nan, dtype=cupy.float32)
        gemm.dense(w, xp, y, m, k, t, schedule=schedule)
        runs.append(y.get())
    assert not np.isnan(runs[0]).any(), "unwritten outputs"
    assert ref.rel_frobenius(runs[0], ref.dense_gemm(fmt.dequantize(w_host), x_host)) < TOL
    assert np.array_equal(runs[0].view(np.uint32), runs[1].view(np.uint32))
    assert not gemm.stream_k_buffers(schedule)[1].get().any(), "tile counters left non-zero"


# The TMA tiles beside their cp.async twins (the same tile without tma): the same stage bytes in the same places, the
# same sums in the same order
TMA_TWINS = [
    ("q4_k", "wgmma:1,16,8,1,3,1,1"),
    ("q4_k", "wgmma+sk+quarter:1,24,8,1,3"),
    ("q5_k", "wgmma:1,4,8,1,3"),
    ("q6_k_r", "wgmma+sk:1,16,8,1,4"),
    ("q6_k_r", "wgmma+quarter:1,24,8,1,3"),
]


def assert_dense_twins_agree_bit_for_bit(cupy, rng, weights, tile, twin, m, k, t):
    """``tile`` and ``twin`` (the same X order) on the same fresh weights and X: the same f32 bits."""
    from zincbench.ops.fused import MmaTile, permute_activations, permuted_activations

    w = cupy.asarray(get_format(weights).random_blocks(rng, m, k))
    xp = permuted_activations(cupy, t, k)
    permute_activations(cupy.asarray(rng.standard_normal((t, k), dtype=np.float32)), xp, MmaTile.parse(tile).x_order)
    outputs = []
    for spec in (tile, twin):
        y = cupy.full((t, m), cupy.nan, dtype=cupy.float32)
        gemm_for(cupy, spec, grouped=False, weights=weights).dense(w, xp, y, m, k, t)
        outputs.append(y.get())
    assert not np.isnan(outputs[1]).any(), "unwritten outputs"
    assert np.array_equal(outputs[0].view(np.uint32), outputs[1].view(np.uint32))


@pytest.mark.parametrize("weights,tile", TMA_TWINS)
@pytest.mark.parametrize("m,k,t", [(197, 256, 1), (300, 768, 130), (131, 1280, 37)])
def test_tma_tiles_give_their_twins_bits(cupy, rng, weights, tile, m, k, t):
    from zincbench.ops.fused import MmaTile

    twin = tile.replace(":", "+tma:", 1)
    assert MmaTile.parse(twin).tma and not MmaTile.parse(tile).tma
    assert_dense_twins_agree_bit_for_bit(cupy, rng, weights, tile, twin, m, k, t)


# Whole-superblock stages beside their half-stage twins (the same tile without whole): the same lanes decode the same
# bytes, and the wgmmas (mma.syncs) sum in the same order, so the outputs are equal bit for bit. Both paths, cp.async
# and TMA weights (and a dense tile's X by TMA), halves and quarters, trimmed, Q4_K and Q5_K.
WHOLE_TWINS = [
    ("q4_k", "1,2,4,1,3"),
    ("q4_k", "wgmma:1,2,8,1,4"),
    ("q4_k", "wgmma+tma:1,2,8,1,4"),
    ("q4_k", "wgmma+quarter+tma:1,2,8,1,3"),
    ("q4_k", "wgmma+tma:1,4,8,1,3,2,1"),
    ("q4_k", "wgmma+sk+tma:1,8,8,1,3"),
    ("q5_k", "2,8,4,1,2"),
    ("q5_k", "wgmma+tma:1,4,8,1,3"),
    ("q5_k", "wgmma+quarter:1,8,4,1,3,1,1"),
]


def whole_twin(tile: str) -> str:
    return tile.replace(":", "+whole:", 1) if ":" in tile else f"whole:{tile}"


@pytest.mark.parametrize("weights,tile", WHOLE_TWINS)
@pytest.mark.parametrize("m,k,t", [(197, 256, 1), (300, 768, 130), (131, 1280, 37)])
def test_whole_stage_tiles_give_their_twins_bits_dense(cupy, rng, weights, tile, m, k, t):
    from zincbench.ops.fused import MmaTile

    twin = whole_twin(tile)
    assert MmaTile.parse(twin).whole and not MmaTile.parse(tile).whole
    assert_dense_twins_agree_bit_for_bit(cupy, rng, weights, tile, twin, m, k, t)


@pytest.mark.parametrize("weights,tile", [c for c in WHOLE_TWINS if "sk" not in c[1]])
@pytest.mark.parametrize("k", [512, 768])
def test_whole_stage_tiles_give_their_twins_bits_grouped(cupy, rng, weights, tile, k):
    """E=7 (expert 6 never routed), T=23, M=100, and the float64 reference as well."""
    from zincbench.ops.fused import MmaTile, permute_activations, permuted_activations
    from zincbench.ops.routing import RoutingWorkspace, build_routing

    fmt = get_format(weights)
    e, m, t, top_k = 7, 100, 23, 2
    ids = np.stack([rng.choice(e - 1, size=top_k, replace=False) for _ in range(t)]).astype(np.uint32)
    w_host = fmt.random_blocks(rng, e * m, k).reshape(e, m, -1)
    x_host = rng.standard_normal((t, k), dtype=np.float32)
    tile_obj = MmaTile.parse(tile)
    ws = RoutingWorkspace(t, top_k, e, tile_obj.bn)
    build_routing(cupy.asarray(ids), ws)
    xp = permuted_activations(cupy, t, k)
    permute_activations(cupy.asarray(x_host), xp, tile_obj.x_order)
    outputs = []
    for spec in (tile, whole_twin(tile)):
        y = cupy.full((t, top_k, m), cupy.nan, dtype=cupy.float32)
        gemm_for(cupy, spec, grouped=True, weights=weights).grouped_call(
            cupy.asarray(w_host), xp, y, m, k, ws.tiles, ws.offsets, ws.sorted_ids, top_k
        )
        outputs.append(y.get())
    assert not np.isnan(outputs[1]).any(), "unwritten outputs"
    assert np.array_equal(outputs[0].view(np.uint32), outputs[1].view(np.uint32))
    assert ref.rel_frobenius(outputs[1], ref.experts_matvec(fmt.dequantize(w_host), x_host, ids, top_k)) < TOL


# Schedules beside their twins without them: the same units, the same sums in the same order, so the same bits.
# allrows: a block runs every row block of its token tile. producer: a producer warpgroup fills the stage ring (16 MMA
# warps, quarters), alone or with allrows. M = 300 and 704: a partial last row block, 2 to 6 row blocks a block.
# K = 256: one or two stages a unit, fewer than the ring's, so the next row block takes all of them; 768 and 2048:
# refills before the next one's.
SCHEDULE_TWINS = [
    ("allrows", "q4_k", "wgmma+tma:1,2,8,1,4"),
    ("allrows", "q4_k", "wgmma+tma+whole:1,8,16,1,3,1,1"),
    ("allrows", "q4_k", "wgmma+quarter+tma:1,12,16,1,4,1,1"),
    ("allrows", "q4_k", "wgmma+quarter+tma:1,10,8,1,3,2,1"),
    ("allrows", "q5_k", "wgmma+tma+whole:1,4,8,1,3"),
    ("allrows", "q6_k_r", "wgmma+tma:1,2,4,1,4"),
    ("producer", "q4_k", "wgmma+quarter+tma:1,12,16,1,4,1,1"),
    ("producer", "q4_k", "wgmma+quarter+tma+allrows:1,12,16,1,4,1,1"),
    ("producer", "q4_k", "wgmma+quarter+tma+whole:1,8,16,1,3,1,1"),
    ("producer", "q5_k", "wgmma+quarter+tma+whole+allrows:1,4,16,1,3"),
    ("producer", "q6_k_r", "wgmma+quarter+tma:1,8,16,1,3,1,1"),
]


def grouped_outputs(cupy, rng, weights, tiles, e, m, k, t, top_k, *, per_slot=False, routing=False, blocks=None):
    """The grouped GEMM of each tile in `tiles` on one routing and one set of inputs (E experts, the last never routed),
    and the float64 reference. routing: the engine's [ids | weights] table, and the combine epilogue into a hidden
    state (the outputs are what each tile added to it). blocks: a persist tile's grid (default the resident blocks)."""
    from zincbench.ops import fused
    from zincbench.ops.routing import RoutingWorkspace, build_routing

    fmt = get_format(weights)
    ids = np.stack([rng.choice(e - 1, size=top_k, replace=False) for _ in range(t)]).astype(np.uint32)
    slot_weights = rng.random((t, top_k), dtype=np.float32)
    table = np.concatenate([ids, slot_weights.view(np.uint32)], axis=1) if routing else ids
    w_host = fmt.random_blocks(rng, e * m, k).reshape(e, m, -1)
    x_host = rng.standard_normal((t, top_k, k) if per_slot else (t, k), dtype=np.float32)
    bn = {fused.MmaTile.parse(tile).bn for tile in tiles}.pop()
    ws = RoutingWorkspace(t, top_k, e, bn)
    build_routing(cupy.asarray(table), ws)
    xp = fused.permuted_activations(cupy, x_host.size // k, k)
    fused.permute_activations(cupy.asarray(x_host.reshape(-1, k)), xp, "wgmma")
    products = ref.experts_matvec(fmt.dequantize(w_host), x_host, ids, top_k)
    hidden = rng.standard_normal((t, m), dtype=np.float32)
    outputs = []
    for tile in tiles:
        epilogue = fused.EPILOGUE_COMBINE if routing else fused.EPILOGUE_STORE
        gemm = gemm_for(cupy, tile, grouped=True, weights=weights, epilogue=epilogue)
        args = (cupy.asarray(w_host), xp)
        grid = {"blocks": blocks} if gemm.tile.persist else {}
        if routing:
            y = cupy.asarray(hidden)
            gemm.grouped_call(
                *args,
                y,
                m,
                k,
                ws.tiles,
                ws.offsets,
                ws.sorted_ids,
                top_k,
                x_per_slot=per_slot,
                routing=cupy.asarray(table),
                **grid,
            )
            outputs.append(y.get() - hidden)
        else:
            y = cupy.full((t, top_k, m), cupy.nan, dtype=cupy.float32)
            gemm.grouped_call(*args, y, m, k, ws.tiles, ws.offsets, ws.sorted_ids, top_k, x_per_slot=per_slot, **grid)
            outputs.append(y.get())
    want = np.einsum("ts,tsm->tm", slot_weights, products) if routing else products
    return outputs, want


@pytest.mark.parametrize("flag,weights,tile", SCHEDULE_TWINS)
@pytest.mark.parametrize("m,k", [(300, 256), (704, 768), (300, 2048)])
@pytest.mark.parametrize("per_slot", [False, True])
def test_schedule_flags_give_their_twins_bits(cupy, rng, flag, weights, tile, m, k, per_slot):
    twin = tile.replace(":", f"+{flag}:", 1)
    (plain, scheduled), want = grouped_outputs(cupy, rng, weights, [tile, twin], 7, m, k, 23, 2, per_slot=per_slot)
    assert not np.isnan(scheduled).any(), "unwritten outputs"
    assert np.array_equal(plain.view(np.uint32), scheduled.view(np.uint32))
    assert ref.rel_frobenius(scheduled, want) < TOL


# persist: a block runs token tiles a grid apart, on 1, 2 or 3 blocks (each several tiles, both table buffers in turn,
# an odd count of tiles on some) or the resident blocks (a tile each).
PERSIST_TWINS = [
    ("q4_k", "wgmma+quarter+tma+allrows+producer:1,12,16,1,4,1,1"),
    ("q4_k", "wgmma+quarter+tma+whole+allrows+producer:1,8,16,1,3,1,1"),
    ("q5_k", "wgmma+quarter+tma+whole+allrows+producer:1,4,16,1,3"),
    ("q6_k_r", "wgmma+quarter+tma+allrows+producer:1,8,16,1,3,1,1"),
]


@pytest.mark.parametrize("weights,tile", PERSIST_TWINS)
@pytest.mark.parametrize("m,k", [(300, 256), (704, 768), (300, 2048)])
@pytest.mark.parametrize("blocks,per_slot", [(1, False), (2, True), (3, False), (None, True)])
def test_persistent_blocks_give_their_twins_bits(cupy, rng, weights, tile, m, k, blocks, per_slot):
    twin = tile.replace(":", "+persist:", 1)
    (plain, persistent), want = grouped_outputs(
        cupy, rng, weights, [tile, twin], 7, m, k, 23, 2, per_slot=per_slot, blocks=blocks
    )
    assert not np.isnan(persistent).any(), "unwritten outputs"
    assert np.array_equal(plain.view(np.uint32), persistent.view(np.uint32))
    assert ref.rel_frobenius(persistent, want) < TOL


def test_only_persistent_tiles_take_a_block_count(cupy):
    from zincbench.ops.routing import RoutingWorkspace

    ws = RoutingWorkspace(4, 2, 4, 64)
    x = cupy.zeros(1)
    for tile, blocks, error in [
        ("wgmma+quarter+tma+whole+allrows+producer:1,8,16,1,3,1,1", 2, "blocks sizes a persist tile's grid"),
        ("wgmma+quarter+tma+whole+allrows+producer+persist:1,8,16,1,3,1,1", 0, "at least one block"),
    ]:
        gemm = gemm_for(cupy, tile, grouped=True, weights="q4_k")
        with pytest.raises(ValueError, match=error):
            gemm.grouped_call(x, x, x, 512, 256, ws.tiles, ws.offsets, ws.sorted_ids, 2, blocks=blocks)


@pytest.mark.parametrize(
    "tile,blocks",
    [
        ("wgmma+tma+allrows:1,8,8,1,3,1,1", None),
        ("wgmma+quarter+tma+allrows+producer:1,8,16,1,3,1,1", None),
        ("wgmma+quarter+tma+allrows+producer+persist:1,8,16,1,3,1,1", 2),
    ],
)
def test_schedule_flags_combine_into_the_hidden_state(cupy, rng, tile, blocks):
    """The combine epilogue (the layer's down GEMM) on a block that runs every row block in turn, with a producer
    warpgroup, and on persistent blocks."""
    (added,), want = grouped_outputs(
        cupy, rng, "q6_k_r", [tile], 7, 512, 768, 23, 2, per_slot=True, routing=True, blocks=blocks
    )
    assert ref.rel_frobenius(added, want) < TOL


@pytest.mark.parametrize("tile", ["wgmma+tma+allrows:1,2,8,1,4", "wgmma+quarter+tma+producer:1,12,16,1,4,1,1"])
def test_schedule_flags_refuse_dense_gemms(cupy, tile):
    with pytest.raises(ValueError, match="allrows and producer schedule grouped GEMMs"):
        gemm_for(cupy, tile, grouped=False, weights="q4_k")


def test_whole_stages_are_for_q4k_and_q5k(cupy):
    with pytest.raises(ValueError, match="whole-superblock stages read"):
        gemm_for(cupy, "wgmma+whole:1,2,8,1,4", grouped=True, weights="q6_k")


def test_tma_tiles_refuse_what_they_cannot_map(cupy):
    """GGUF Q6_K blocks (210 bytes) have no 16-byte aligned box, and the SwiGLU epilogues read two weight matrices:
    a ValueError, which the autotuner takes as a candidate that does not apply."""
    from zincbench.ops.fused import EPILOGUE_SWIGLU_F16_PERM

    with pytest.raises(ValueError, match="not 16-byte aligned"):
        gemm_for(cupy, "wgmma+tma:1,16,8,1,3", grouped=False, weights="q6_k")
    with pytest.raises(ValueError, match="two weight matrices"):
        gemm_for(cupy, "wgmma+tma:1,8,4,1,3,1,1", grouped=True, weights="q4_k", epilogue=EPILOGUE_SWIGLU_F16_PERM)


@pytest.mark.parametrize("tile", ["1,8,8,1,2", "2,8,4,1,3", "wgmma:1,24,8,1,3", "wgmma+quarter:1,24,8,1,3"])
@pytest.mark.parametrize("m,k,t", [(197, 768, 37), (300, 512, 130)])
def test_repacked_q6k_gives_the_gguf_layouts_bits(cupy, rng, tile, m, k, t):
    """The same Q6_K weights as GGUF blocks and repacked at load (zincbench.quant.q6k_r): the kernel decodes the same
    fp16 weights and sums in the same order, so the outputs are equal bit for bit. K = 768 puts GGUF blocks at every
    even misalignment; 130 tokens leave a partial token tile."""
    from zincbench.ops.fused import MmaTile, permute_activations, permuted_activations
    from zincbench.quant import q6k_r

    w_host = get_format("q6_k").random_blocks(rng, m, k)
    xp = permuted_activations(cupy, t, k)
    permute_activations(cupy.asarray(rng.standard_normal((t, k), dtype=np.float32)), xp, MmaTile.parse(tile).x_order)
    outputs = []
    for weights, w in (("q6_k", w_host), ("q6_k_r", q6k_r.repack(w_host))):
        y = cupy.full((t, m), cupy.nan, dtype=cupy.float32)
        gemm_for(cupy, tile, grouped=False, weights=weights).dense(cupy.asarray(w), xp, y, m, k, t)
        outputs.append(y.get())
    assert not np.isnan(outputs[1]).any(), "unwritten outputs"
    assert np.array_equal(outputs[0].view(np.uint32), outputs[1].view(np.uint32))


@pytest.mark.parametrize("weights,tile", [c for c in CASES if c[1] != TILES[c[0]][-1]])
@pytest.mark.parametrize("x_per_slot", [False, True])
@pytest.mark.parametrize("k", [512, 768])
def test_grouped_matches_reference(cupy, rng, weights, tile, x_per_slot, k):
    """E=7 experts with expert 6 never routed (empty bucket), T=23 (no tile multiple), M=100."""
    from zincbench.ops.fused import MmaTile, permute_activations, permuted_activations
    from zincbench.ops.routing import RoutingWorkspace, build_routing

    fmt = get_format(weights)
    e, m, t, top_k = 7, 100, 23, 2
    ids = np.stack([rng.choice(e - 1, size=top_k, replace=False) for _ in range(t)]).astype(np.uint32)
    w_host = fmt.random_blocks(rng, e * m, k).reshape(e, m, -1)
    x_host = rng.standard_normal((t, top_k, k) if x_per_slot else (t, k), dtype=np.float32)
    x_rows = t * top_k if x_per_slot else t
    tile_obj = MmaTile.parse(tile)
    ws = RoutingWorkspace(t, top_k, e, tile_obj.bn)
    build_routing(cupy.asarray(ids), ws)
    xp = permuted_activations(cupy, x_rows, k)
    permute_activations(cupy.asarray(x_host.reshape(x_rows, k)), xp, tile_obj.x_order)
    y = cupy.full((t, top_k, m), cupy.nan, dtype=cupy.float32)
    gemm_for(cupy, tile, grouped=True, weights=weights).grouped_call(
        cupy.asarray(w_host), xp, y, m, k, ws.tiles, ws.offsets, ws.sorted_ids, top_k, x_per_slot=x_per_slot
    )
    got = y.get()
    assert not np.isnan(got).any(), "unwritten outputs"
    assert ref.rel_frobenius(got, ref.experts_matvec(fmt.dequantize(w_host), x_host, ids, top_k)) < TOL


# Bucket sizes that round up to every trimmed width (8, 16, ..., 128: each leaf of the kernel's halving), on both
# sides of the tiles' BN (an expert with a second, short tile), one never-routed expert.
TRIM_BUCKETS = [
    1,
    8,
    9,
    17,
    24,
    25,
    33,
    40,
    41,
    49,
    56,
    57,
    64,
    65,
    72,
    73,
    80,
    81,
    0,
    88,
    89,
    96,
    97,
    104,
    105,
    113,
    121,
    130,
]


@pytest.mark.parametrize(
    "weights,tile",
    [
        ("q4_k", "wgmma:1,8,8,1,4,2,1"),
        ("q4_k", "wgmma+quarter:1,8,8,1,4,2,1"),
        ("q4_k", "wgmma:1,12,8,1,3,1,1"),
        ("q4_k", "wgmma+quarter:1,12,8,1,3,2,1"),
        ("q4_k", "wgmma+quarter:1,10,8,1,3,2,1"),
        ("q4_k", "wgmma+quarter:1,12,16,1,4,1,1"),
        ("q6_k", "wgmma+quarter:1,8,8,1,3,1,1"),
        ("q4_k", "wgmma:1,16,8,1,3,1,1"),
        ("q6_k", "wgmma:1,16,8,1,4,1,1"),
        ("q4_k", "1,8,4,1,3,1,1"),
        ("q4_k", "wgmma+quarter+tma+whole:1,12,8,1,3,1,1"),
        ("q4_k", "wgmma+tma+whole:1,8,8,1,3,1,1"),
    ],
)
def test_trimmed_tiles_match_reference_at_every_width(cupy, rng, weights, tile):
    """A trimmed tile multiplies its tokens rounded up to 8 (one wgmma of that width, or 8-token mma.sync columns): one
    token (top_k 1) per item, buckets of TRIM_BUCKETS sizes, so every width's branch runs, and a tile past the
    bucket's end never writes."""
    from zincbench.ops.fused import MmaTile, permute_activations, permuted_activations
    from zincbench.ops.routing import RoutingWorkspace, build_routing

    fmt = get_format(weights)
    e, m, k, top_k = len(TRIM_BUCKETS), 130, 512, 1
    ids = rng.permutation(np.repeat(np.arange(e), TRIM_BUCKETS)).astype(np.uint32)[:, None]
    t = ids.shape[0]
    w_host = fmt.random_blocks(rng, e * m, k).reshape(e, m, -1)
    x_host = rng.standard_normal((t, k), dtype=np.float32)
    tile_obj = MmaTile.parse(tile)
    ws = RoutingWorkspace(t, top_k, e, tile_obj.bn)
    build_routing(cupy.asarray(ids), ws)
    assert np.array_equal(np.diff(ws.offsets.get()), TRIM_BUCKETS)
    xp = permuted_activations(cupy, t, k)
    permute_activations(cupy.asarray(x_host), xp, tile_obj.x_order)
    y = cupy.full((t, top_k, m), cupy.nan, dtype=cupy.float32)
    gemm_for(cupy, tile, grouped=True, weights=weights).grouped_call(
        cupy.asarray(w_host), xp, y, m, k, ws.tiles, ws.offsets, ws.sorted_ids, top_k
    )
    got = y.get()
    assert not np.isnan(got).any(), "unwritten outputs"
    assert ref.rel_frobenius(got, ref.experts_matvec(fmt.dequantize(w_host), x_host, ids, top_k)) < TOL


@pytest.mark.parametrize(
    "weights,tile",
    [(w, t) for w in ("q4_k", "q5_k", "q6_k") for t in ("1,2,4,1,3", "1,8,8,1,2", "1,8,4,1,2,1,1")]
    + [("q4_k", "wgmma:1,8,4,1,3,1,1"), ("q4_k", "wgmma:1,4,8,1,3"), ("q6_k", "wgmma:1,8,8,1,3,1,1")]
    + [("q4_k", "wgmma+quarter:1,8,4,1,3,1,1"), ("q5_k", "wgmma+quarter:1,4,8,1,3")],
)
@pytest.mark.parametrize("epilogue", ["swiglu_perm", "swiglu_grouped", "combine"])
def test_grouped_epilogues_match_reference(cupy, rng, weights, tile, epilogue):
    """Each epilogue on each format (the layer block's gate+up and down launches, in isolation): E=7 with
    expert 6 never routed, T=23, K=768 (Q6_K blocks at every even misalignment), M=512 output rows (a
    multiple of 256: the permuted SwiGLU output is the next GEMM's K), on weights of this format."""
    from zincbench.bench.moe_layer import silu
    from zincbench.ops import fused
    from zincbench.ops.routing import RoutingWorkspace, build_routing

    fmt = get_format(weights)
    e, m, k, t, top_k = 7, 512, 768, 23, 2
    ids = np.stack([rng.choice(e - 1, size=top_k, replace=False) for _ in range(t)]).astype(np.uint32)
    slot_weights = rng.random((t, top_k), dtype=np.float32)
    table = np.concatenate([ids, slot_weights.view(np.uint32)], axis=1)  # the engine's [ids | weights]
    tile_obj = fused.MmaTile.parse(tile)
    ws = RoutingWorkspace(t, top_k, e, tile_obj.bn)
    build_routing(cupy.asarray(table), ws)
    w_host = fmt.random_blocks(rng, e * m, k).reshape(e, m, -1)
    w = fmt.dequantize(w_host)
    per_slot = epilogue == "combine"  # the down GEMM reads one row per token-slot
    x_host = rng.standard_normal((t, top_k, k) if per_slot else (t, k), dtype=np.float32)
    if not per_slot:
        x_host *= 0.01  # gate and up of order 1-10: silu(gate) * up stays far inside fp16's range
    xp = fused.permuted_activations(cupy, x_host.size // k, k)
    fused.permute_activations(cupy.asarray(x_host.reshape(-1, k)), xp, tile_obj.x_order)
    gemm = gemm_for(
        cupy,
        tile,
        grouped=True,
        weights=weights,
        epilogue={
            "swiglu_perm": fused.EPILOGUE_SWIGLU_F16_PERM,
            "swiglu_grouped": fused.EPILOGUE_SWIGLU_F16_GROUPED,
            "combine": fused.EPILOGUE_COMBINE,
        }[epilogue],
    )
    args = (m, k, ws.tiles, ws.offsets, ws.sorted_ids, top_k)
    if epilogue == "combine":
        hidden = rng.standard_normal((t, m), dtype=np.float32)
        y = cupy.asarray(hidden)
        gemm.grouped_call(cupy.asarray(w_host), xp, y, *args, x_per_slot=True, routing=cupy.asarray(table))
        added = np.einsum("ts,tsm->tm", slot_weights, ref.experts_matvec(w, x_host, ids, top_k))
        assert ref.rel_frobenius(y.get() - hidden, added) < TOL
        return
    up_host = fmt.random_blocks(rng, e * m, k).reshape(e, m, -1)
    gate_out = ref.experts_matvec(w, x_host, ids, top_k)
    act = silu(gate_out) * ref.experts_matvec(fmt.dequantize(up_host), x_host, ids, top_k)  # [T][top_k][M]
    if epilogue == "swiglu_perm":
        h = cupy.full((t, top_k, m), cupy.nan, dtype=cupy.float16)
        gemm.grouped_call(cupy.asarray(w_host), xp, h, *args, w_up=cupy.asarray(up_host))
        want = fused.permuted_activations(cupy, t * top_k, m)  # the reference in the same permuted order
        fused.permute_activations(cupy.asarray(act.reshape(t * top_k, m).astype(np.float32)), want)
        got = h.get().reshape(t * top_k, m)
        assert not np.isnan(got).any(), "unwritten outputs"
        assert ref.rel_frobenius(got.astype(np.float64), want.get().view(np.float16).reshape(t * top_k, m)) < TOL
        return
    counts = np.bincount(ids.ravel(), minlength=e)
    capacity = int(counts.max())
    h = cupy.full((e, capacity, m), cupy.nan, dtype=cupy.float16)
    gemm.grouped_call(cupy.asarray(w_host), xp, h, *args, w_up=cupy.asarray(up_host), capacity=capacity)
    offsets, sorted_ids, got = ws.offsets.get(), ws.sorted_ids.get(), h.get()
    assert offsets[-1] == t * top_k
    # place p of expert e's bucket holds item sorted_ids[offsets[e] + p]; places past the bucket stay unwritten
    got_rows = np.concatenate([got[ex, : offsets[ex + 1] - offsets[ex]] for ex in range(e)])
    assert not np.isnan(got_rows).any(), "unwritten outputs"
    assert ref.rel_frobenius(got_rows.astype(np.float64), act.reshape(t * top_k, m)[sorted_ids]) < TOL


# Programmatic dependent launch (T2's GEMM after a one-launch routing build): the GEMM's blocks may start while the
# routing runs, and each waits inside (zb_pdl_wait) before it reads the tiles, the buckets and the permuted X. Each
# round brings a fresh routing and fresh activations into the same workspace (a block that read early would find the
# last round's), at P = 2048 (one_launch: one route block runs the single-block build) and P = 4096 (one_launch: the
# multi-block protocol, its route blocks wait on each other), at T2's N_e 8 shape too; the replicated build at each.
# Each pair is enqueued as the timer enqueues a sample (GpuTimer.run_held: behind a spin kernel released once both are
# in), so that the launches meet on the GPU; launched one after the other on an idle GPU, the routing is done before
# the GEMM is enqueued and nothing overlaps. The portable path's kernel waits too.
@pytest.mark.parametrize(
    "tile",
    ["wgmma+tma+whole:1,2,8,1,4", "wgmma+tma+whole:1,4,8,1,3", "wgmma+quarter+tma:1,12,8,1,3,2,1", "1,2,4,1,3"],
)
@pytest.mark.parametrize("own_stream", [True, False], ids=["own-stream", "default-stream"])
@pytest.mark.parametrize(
    "m,k,t", [(256, 512, 256), (256, 512, 512), (512, 2048, 256)], ids=["P2048", "P4096", "T2-Ne8"]
)
@pytest.mark.parametrize("build", ["one_launch", "replicated"])
def test_a_gemm_launched_as_the_routings_dependent_gives_an_ordinary_launchs_bits(
    cupy, rng, tile, own_stream, m, k, t, build
):
    from zincbench.gpu.launch import supports_dependent_launch
    from zincbench.measure.timer import GpuTimer, TimerConfig
    from zincbench.ops.fused import permuted_activations
    from zincbench.ops.routing import RoutingWorkspace, route_and_permute

    if not supports_dependent_launch(cupy.cuda.Device().compute_capability):
        pytest.skip("programmatic dependent launch is sm_90 and later")
    fmt = get_format("q4_k")
    e, top_k = 256, 8
    gemm = gemm_for(cupy, tile, grouped=True, weights="q4_k")
    order, bn = gemm.tile.x_order, gemm.tile.bn
    w = cupy.asarray(fmt.random_blocks(rng, e * m, k).reshape(e, m, -1))
    spaces = [RoutingWorkspace(t, top_k, e, bn, build=build) for _ in range(2)]
    xps = [permuted_activations(cupy, t, k) for _ in range(2)]
    timer = GpuTimer(TimerConfig(mode="hot", warmup=0), stream=None if own_stream else cupy.cuda.Stream.null)
    assert timer.config.launch_hiding, "ZINCBENCH_LAUNCH_HIDING=0: the pair would not meet on the GPU"
    for _ in range(3):
        ids = cupy.asarray(np.stack([rng.choice(e, size=top_k, replace=False) for _ in range(t)]).astype(np.uint32))
        x = cupy.asarray(rng.standard_normal((t, k), dtype=np.float32))
        outputs = []
        for ws, xp, dependent in zip(spaces, xps, (False, True)):
            y = cupy.full((t, top_k, m), cupy.nan, dtype=cupy.float32)
            cupy.cuda.Device().synchronize()  # inputs from the default stream, before the timer's stream reads them

            def pair():
                route_and_permute(ids, ws, x, xp, order)
                gemm.grouped_call(w, xp, y, m, k, ws.tiles, ws.offsets, ws.sorted_ids, top_k, dependent=dependent)

            timer.run_held(pair)
            outputs.append(y)
        ordinary, as_dependent = (y.get() for y in outputs)
        assert not np.isnan(ordinary).any(), "unwritten outputs"
        assert np.array_equal(ordinary.view(np.uint32), as_dependent.view(np.uint32))


def test_a_dependent_launch_is_refused_below_sm_90(cupy):
    from zincbench.ops.routing import RoutingWorkspace

    gemm = gemm_for(cupy, "1,2,4,1,3", grouped=True, weights="q4_k")
    gemm.arch = "89"
    ws = RoutingWorkspace(1, 1, 2, gemm.tile.bn)
    with pytest.raises(ValueError, match="needs sm_90 or later, not sm_89"):
        gemm.grouped_call(
            gemm._dummy, gemm._dummy, gemm._dummy, 1, 256, ws.tiles, ws.offsets, ws.sorted_ids, 1, dependent=True
        )
