"""The baseline kernels (engine matvecs, dequant, routing, engine-style TC GEMM, dequant-once + cuBLAS)
against the float64 NumPy references, on fresh random data at odd and edge shapes.

Every output buffer is poisoned with NaN first, so an element the kernel forgot to write fails.
Error bounds:
- f32 matvecs: each element within 1e-5 of sum_k |w_k x_k| (f32 accumulation error is ~30 roundings deep);
- fp16 paths (wmma GEMM, cuBLAS): relative Frobenius error <= 2e-4 against a reference that rounds
  W and x to fp16 exactly as the kernels do (what remains is f32 accumulation order), and <= 2e-3
  against the unrounded reference (fp16 input rounding itself).
"""

from __future__ import annotations

import numpy as np
import pytest

from zincbench.errors import InputError
from zincbench.ops import fused, routing
from zincbench.ops.dequant import ENGINE, VECTORIZED, DequantToF16, F32ToF16
from zincbench.ops.fused import permute_activations, permuted_activations
from zincbench.ops.gemm_tc import GemmQ4KTC
from zincbench.ops.matvec import ExpertsMatvec
from zincbench.ops.moe_cublas import CapacityExceeded, CublasGemm, DenseDequantCublas, MoeDequantCublas
from zincbench.ops.routing import ROUTING_BUILDS, GatherRows, RoutingWorkspace, ScatterRows, build_routing, max_tiles
from zincbench.quant import get_format
from zincbench.reference import kernels_ref as ref

pytestmark = pytest.mark.gpu

FP32_MATVEC_BOUND = 1e-5
FP16_PATH_BOUND = 2e-4


def quantized_experts(rng, fmt: str, n_experts: int, m: int, k: int):
    """Random valid blocks uint8 [E][M][row bytes] and their float32 values [E][M][K]."""
    quant = get_format(fmt)
    blocks = quant.random_blocks(rng, n_experts * m, k)
    return blocks.reshape(n_experts, m, -1), quant.dequantize(blocks).reshape(n_experts, m, k)


def routing_table(rng, t: int, top_k: int, n_experts: int, stride: int) -> np.ndarray:
    """uint32 [T][stride]: top_k distinct experts per token, then junk the kernels must not read as ids."""
    table = rng.integers(0, 2**32, size=(t, stride), dtype=np.uint32)
    table[:, :top_k] = np.argsort(rng.random((t, n_experts)), axis=1)[:, :top_k]
    return table


def poisoned(cupy, shape, dtype=np.float32):
    return cupy.full(shape, np.nan, dtype=dtype)


def activations(rng, shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def assert_fp16_path_close(actual, w, x, exact_fn):
    """``actual`` against exact_fn(w, x, fp16=True) (tight), and against exact math, exact_fn(w, x), per output within
    what the fp16 rounding of these inputs and the path's fp32 sums explain (ref.fp16_input_error_bound). A fixed
    relative bound there (2e-3) failed a correct path once: 5 outputs of a K 256 matvec that fp16 inputs alone moved by
    0.72% (tests/test_kernels_ref.py replays the draw)."""
    assert np.isfinite(actual).all(), "unwritten (NaN) or non-finite outputs"
    assert ref.rel_frobenius(actual, exact_fn(w, x, fp16=True)) <= FP16_PATH_BOUND
    bound = ref.fp16_input_error_bound(w, x, exact_fn, sum_error=FP16_PATH_BOUND)
    excess = np.abs(actual - exact_fn(w, x)) - bound
    assert excess.max() <= 0, f"an output is {excess.max():.3g} past what fp16 inputs explain"


# ---- dequant / downcast ------------------------------------------------------------------------------


# The engine's conversion kernels and the vectorized ones (kernels/dequant_vec.cu): the same values.
CONVERSIONS = pytest.mark.parametrize("kernels", [ENGINE, VECTORIZED], ids=["engine", "vectorized"])


@CONVERSIONS
@pytest.mark.parametrize("fmt", ["q4_k", "q5_k", "q6_k"])
@pytest.mark.parametrize("shape", [(3, 5, 256), (67, 512), (2, 64, 768)], ids=str)
def test_dequant_to_f16_matches_reference(cupy, rng, fmt, shape, kernels):
    lead, k = shape[:-1], shape[-1]
    blocks, values = quantized_experts(rng, fmt, int(np.prod(lead)), 1, k)
    blocks, values = blocks.reshape(*lead, -1), values.reshape(shape)
    out = poisoned(cupy, shape, np.float16)
    DequantToF16(fmt, cupy.asarray(blocks), out, kernels)()
    got = out.get().astype(np.float32)
    assert np.isfinite(got).all()
    # RNE of the f32 value; the kernel's f32 value may differ from NumPy's by FMA contraction, which
    # is bounded by a few f32 ulps of the largest term (|d*sc*q|, |dmin*m| <= 2 max|w|).
    bound = 2.0**-11 * np.abs(values) + 2.0**-24 + 2.0**-20 * np.abs(values).max()
    assert (np.abs(got - values) <= bound).all()
    assert np.mean(got == values.astype(np.float16).astype(np.float32)) > 0.99


@pytest.mark.parametrize("shape", [(7, 1536), (31, 768)], ids=str)
def test_vectorized_q6k_dequant_is_the_engine_kernel_bit_for_bit(cupy, rng, shape):
    """Q6_K's value d*sc*(q-32) has no sum to contract into an FMA: both kernels round the same f32 product."""
    blocks, _ = quantized_experts(rng, "q6_k", shape[0], 1, shape[1])
    w = cupy.asarray(blocks.reshape(shape[0], -1))
    outs = [poisoned(cupy, shape, np.float16) for _ in range(2)]
    for out, kernels in zip(outs, (ENGINE, VECTORIZED)):
        DequantToF16("q6_k", w, out, kernels)()
    np.testing.assert_array_equal(outs[0].get().view(np.uint16), outs[1].get().view(np.uint16))


@CONVERSIONS
def test_f32_to_f16_rounds_to_nearest_even(cupy, rng, kernels):
    n = 4 * 256 + 37  # a partial last block
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 20, n))).astype(np.float32)
    # Exact ties between fp16 neighbours (both parities), subnormal ties, overflow to inf.
    x[:6] = [1 + 2.0**-11, 1 + 3 * 2.0**-11, 2.0**-25, 3 * 2.0**-25, 70000.0, -65520.0]
    y = poisoned(cupy, n, np.float16)
    F32ToF16(cupy.asarray(x), y, kernels)()
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16)
    np.testing.assert_array_equal(y.get().view(np.uint16), expected.view(np.uint16))


# ---- engine experts matvec ---------------------------------------------------------------------------

MATVEC_CASES = [
    # (T, top_k, E, M, K, routing stride / top_k, x per slot)
    pytest.param(1, 1, 3, 5, 256, 1, False, id="T1-topk1-M5"),
    pytest.param(7, 4, 9, 67, 512, 2, False, id="engine-routing-table-M67"),
    pytest.param(5, 8, 64, 33, 256, 1, True, id="down-form-most-experts-empty"),
    pytest.param(3, 2, 2, 130, 768, 1, False, id="K768-three-superblocks"),
]


@pytest.mark.parametrize("fmt", ["q4_k", "q6_k"])
@pytest.mark.parametrize("t, top_k, n_experts, m, k, stride_factor, x_per_slot", MATVEC_CASES)
def test_experts_matvec_matches_reference(cupy, rng, fmt, t, top_k, n_experts, m, k, stride_factor, x_per_slot):
    blocks, w = quantized_experts(rng, fmt, n_experts, m, k)
    ids = routing_table(rng, t, top_k, n_experts, top_k * stride_factor)
    x = activations(rng, (t, top_k, k) if x_per_slot else (t, k))
    y = poisoned(cupy, (t, top_k, m))
    ExpertsMatvec(
        fmt, cupy.asarray(blocks), cupy.asarray(x), cupy.asarray(ids), y, top_k=top_k, x_per_slot=x_per_slot
    )()
    got = y.get()
    assert np.isfinite(got).all()
    scale = ref.experts_matvec(np.abs(w), np.abs(x), ids, top_k)
    assert (np.abs(got - ref.experts_matvec(w, x, ids, top_k)) <= FP32_MATVEC_BOUND * scale).all()


# ---- routing, gather, scatter ------------------------------------------------------------------------

ROUTING_CASES = [
    # (T, top_k, E, tile_n, routing stride / top_k)
    pytest.param(1, 1, 1, 64, 1, id="single-expert-T1"),
    pytest.param(37, 8, 256, 64, 2, id="engine-table-many-empty-experts"),
    pytest.param(300, 8, 16, 16, 1, id="large-buckets"),
    pytest.param(64, 6, 1024, 8, 1, id="1024-experts"),
    pytest.param(2999, 8, 256, 16, 1, id="many-blocks-P23992"),  # multi-block: 24 chunks, the last one partial
    pytest.param(701, 7, 1000, 8, 2, id="1000-experts-many-blocks"),  # E not a warp multiple, 1024-thread blocks
    # the replicated build's threads keep 4 loads of 4 words (16 K words): past that it reads the table again
    pytest.param(4501, 8, 256, 16, 1, id="P36008-past-the-kept-words"),
]


# Every build, and the one-launch build forced onto each of its two paths at any P: the multi-block protocol
# (single_block_items 0) and one route block running the single-block build (past its 2048-id cache too).
ONE_LAUNCH_PATHS = {"multi_block": 0, "by-size": routing.ONE_LAUNCH_SINGLE_BLOCK_ITEMS, "single_block": 2**32}
# The replicated build with other numbers of route blocks: one (it places every expert), and three (E mod 3 varies).
REPLICATED_BLOCKS = {"one-block": 1, "three-blocks": 3}
ROUTING_VARIANTS = (
    [pytest.param(build, {}, id=build) for build in ROUTING_BUILDS]
    + [
        pytest.param("one_launch", {"single_block_items": ONE_LAUNCH_PATHS[path]}, id=f"one_launch-{path}")
        for path in ("multi_block", "single_block")
    ]
    + [
        pytest.param("replicated", {"max_route_blocks": blocks}, id=f"replicated-{name}")
        for name, blocks in REPLICATED_BLOCKS.items()
    ]
)


def built_routing(
    cupy, ids: np.ndarray, top_k: int, n_experts: int, tile_n: int, build: str = "single_block", **options
) -> RoutingWorkspace:
    ws = RoutingWorkspace(ids.shape[0], top_k, n_experts, tile_n, build=build, **options)
    ws.sorted_ids.fill(0xFFFFFFFF)
    build_routing(cupy.asarray(ids), ws)
    return ws


def assert_scratch_at_rest(ws: RoutingWorkspace) -> None:
    """After a build: the multi-block protocol's counts and four counters are back at zero (its cursors keep the
    bucket ends); a one-launch build that ran the single-block path never touched scratch, all of it still zero."""
    if ws.scratch is None:  # the single-block and replicated builds have none
        return
    scratch, e = ws.scratch.get(), ws.n_experts
    if ws.single_block:
        assert not scratch.any(), "the single-block path wrote scratch"
    else:
        assert not scratch[:e].any() and not scratch[2 * e :].any(), f"scratch counters not reset: {scratch[2 * e :]}"


def assert_routing_matches(ws: RoutingWorkspace, ids: np.ndarray) -> None:
    """offsets, tiles and status exactly; each bucket holds exactly the reference's items (any order); the scratch
    words at rest."""
    t, top_k, n_experts, tile_n = ws.t, ws.top_k, ws.n_experts, ws.tile_n
    counts, offsets, buckets = ref.routing(ids, top_k, n_experts)
    got_offsets, got_sorted = ws.offsets.get(), ws.sorted_ids.get()
    np.testing.assert_array_equal(got_offsets, offsets)
    for e in range(n_experts):
        bucket = got_sorted[offsets[e] : offsets[e + 1]].tolist()
        assert len(bucket) == len(buckets[e]) and set(bucket) == buckets[e], f"bucket of expert {e}"
    expected_tiles = ref.work_tiles(counts, tile_n, max_tiles(t, top_k, n_experts, tile_n))
    np.testing.assert_array_equal(ws.tiles.get(), expected_tiles)
    assert ws.status() == (0, counts.max())
    assert_scratch_at_rest(ws)


@pytest.mark.parametrize("build, options", ROUTING_VARIANTS)
@pytest.mark.parametrize("t, top_k, n_experts, tile_n, stride_factor", ROUTING_CASES)
def test_routing_matches_reference(cupy, rng, t, top_k, n_experts, tile_n, stride_factor, build, options):
    ids = routing_table(rng, t, top_k, n_experts, top_k * stride_factor)
    assert_routing_matches(built_routing(cupy, ids, top_k, n_experts, tile_n, build, **options), ids)


@pytest.mark.parametrize("build, options", ROUTING_VARIANTS)
def test_routing_workspace_is_reusable(cupy, rng, build, options):
    """Builds on one workspace in a row (the timed loop does this): the multi-block build's scratch counters
    must be back at zero after each build (the single-block path never touches them), and a build with bad ids
    must not leak into the next."""
    t, top_k, n_experts = 1500, 8, 128
    ws = RoutingWorkspace(t, top_k, n_experts, 16, build=build, **options)
    for round_ in range(3):
        ids = routing_table(rng, t, top_k, n_experts, top_k)
        if round_ == 1:
            ids[7, 3] = n_experts + 5
            build_routing(cupy.asarray(ids), ws)
            assert ws.status()[0] == 1
            assert_scratch_at_rest(ws)
            continue
        build_routing(cupy.asarray(ids), ws)
        assert_routing_matches(ws, ids)


@pytest.mark.parametrize("build, options", ROUTING_VARIANTS)
def test_routing_reports_ids_out_of_range(cupy, rng, build, options):
    t, top_k, n_experts = 9, 3, 12
    ids = routing_table(rng, t, top_k, n_experts, top_k)
    ids[4, 1] = n_experts
    ws = built_routing(cupy, ids, top_k, n_experts, 4, build, **options)
    assert ws.status()[0] == 1
    assert int(ws.offsets.get()[-1]) == t * top_k - 1
    assert_scratch_at_rest(ws)


@pytest.mark.parametrize(
    "t, top_k, n_experts, tile_n, stride_factor",
    [
        pytest.param(1, 1, 1, 64, 1, id="P1-one-expert"),
        pytest.param(256, 8, 256, 16, 1, id="P2048-at-the-threshold"),
        pytest.param(257, 8, 256, 16, 1, id="P2056-past-the-threshold"),
        pytest.param(2, 7, 1000, 8, 2, id="P14-1000-experts"),  # 1024-thread block, nearly every expert empty
        pytest.param(292, 7, 1000, 8, 2, id="P2044-1000-experts"),
        pytest.param(300, 7, 1000, 8, 2, id="P2100-1000-experts"),
    ],
)
def test_one_launch_build_takes_one_route_block_up_to_the_threshold(
    cupy, rng, t, top_k, n_experts, tile_n, stride_factor
):
    """The default one-launch build: up to ONE_LAUNCH_SINGLE_BLOCK_ITEMS items one route block running the
    single-block build (scratch untouched), past that the multi-block protocol; twice on one workspace."""
    ws = RoutingWorkspace(t, top_k, n_experts, tile_n, build="one_launch")
    single = t * top_k <= routing.ONE_LAUNCH_SINGLE_BLOCK_ITEMS
    assert ws.single_block == single and (ws.blocks == 1 or not single)
    for _ in range(2):
        ids = routing_table(rng, t, top_k, n_experts, top_k * stride_factor)
        ws.sorted_ids.fill(0xFFFFFFFF)
        build_routing(cupy.asarray(ids), ws)
        assert_routing_matches(ws, ids)


@pytest.mark.parametrize(
    "t, top_k, n_experts, tile_n, route_blocks",
    [
        pytest.param(2999, 8, 256, 16, 2, id="P23992-two-blocks-of-12-batches"),
        pytest.param(701, 7, 1000, 8, 1, id="P4907-1000-experts-one-block-of-2-batches"),
    ],
)
def test_one_launch_build_with_several_batches_per_route_block(cupy, rng, t, top_k, n_experts, tile_n, route_blocks):
    """Route blocks that histogram and place several batches each (the cap on route blocks reached); the multi-block
    protocol at any P (single_block_items 0), even with one route block."""
    ws = RoutingWorkspace(
        t, top_k, n_experts, tile_n, build="one_launch", max_route_blocks=route_blocks, single_block_items=0
    )
    assert not ws.single_block
    assert ws.blocks == route_blocks and ws.chunk > ws.block_threads * routing.MULTI_BLOCK_ITEMS
    for _ in range(2):  # the scratch counters and the ready flag are back at zero for the second build
        ids = routing_table(rng, t, top_k, n_experts, 2 * top_k)
        ws.sorted_ids.fill(0xFFFFFFFF)
        build_routing(cupy.asarray(ids), ws)
        assert_routing_matches(ws, ids)


# Every way a one-launch build's route blocks run beside its permute blocks
PERMUTING_VARIANTS = [
    pytest.param("one_launch", {"single_block_items": items}, id=f"one_launch-{path}")
    for path, items in ONE_LAUNCH_PATHS.items()
] + [
    pytest.param("replicated", {}, id="replicated"),
    pytest.param("replicated", {"max_route_blocks": 3}, id="replicated-3"),
]


@pytest.mark.parametrize("build, options", PERMUTING_VARIANTS)
@pytest.mark.parametrize("order", ["mma", "wgmma"])
@pytest.mark.parametrize(
    "t, top_k, n_experts, x_per_slot, permute_cap",
    [
        pytest.param(37, 8, 256, False, None, id="T37-per-token"),
        pytest.param(23, 4, 13, True, None, id="T23-per-slot"),
        pytest.param(300, 8, 16, False, 3, id="T300-three-permute-blocks-stride"),
        pytest.param(2048, 8, 256, False, None, id="T2-Ne64"),
    ],
)
def test_one_launch_builds_permute_activations_as_the_permute_kernel_does(
    cupy, rng, monkeypatch, order, t, top_k, n_experts, x_per_slot, permute_cap, build, options
):
    """The permute blocks of a one-launch build write the bytes permute_activations writes (any grid: a cap of
    three blocks makes them stride), while its route blocks build the same routing, by any path (the multi-block
    protocol, one block running the single-block build, the one the default threshold picks, the replicated build);
    twice on one workspace."""
    if permute_cap:
        monkeypatch.setattr(fused, "PERMUTE_MAX_BLOCKS", permute_cap)
    k = 768
    rows = t * top_k if x_per_slot else t
    ws = RoutingWorkspace(t, top_k, n_experts, 16, build=build, **options)
    if build == "one_launch":
        assert ws.single_block == (t * top_k <= options["single_block_items"])
    for _ in range(2):
        ids = routing_table(rng, t, top_k, n_experts, top_k)
        x = cupy.asarray(activations(rng, (rows, k)))
        expected = permuted_activations(cupy, rows, k)
        permute_activations(x, expected, order)
        got = permuted_activations(cupy, rows, k)
        got.fill(0xFFFFFFFF)
        ws.sorted_ids.fill(0xFFFFFFFF)
        build_routing(cupy.asarray(ids), ws, x, got, order)
        np.testing.assert_array_equal(got.get(), expected.get())
        assert_routing_matches(ws, ids)


def test_the_replicated_build_refuses_a_misaligned_table(cupy, rng):
    """It reads the routing table 16 bytes at a time: a view that starts 4 bytes in is refused, not misread."""
    table = cupy.asarray(routing_table(rng, 9, 4, 12, 4).reshape(-1))
    shifted = cupy.empty(table.size + 1, dtype=cupy.uint32)
    shifted[1:] = table
    ids = shifted[1:].reshape(9, 4)
    with pytest.raises(InputError, match="16-byte aligned"):
        build_routing(ids, RoutingWorkspace(9, 4, 12, 8, build="replicated"))


def test_only_the_one_launch_builds_permute(cupy, rng):
    ids = cupy.asarray(routing_table(rng, 5, 2, 4, 2))
    x, xp = cupy.zeros((5, 256), dtype=cupy.float32), permuted_activations(cupy, 5, 256)
    with pytest.raises(ValueError, match="does not permute"):
        build_routing(ids, RoutingWorkspace(5, 2, 4, 8, build="multi_block"), x, xp)
    with pytest.raises(ValueError, match="go together"):
        build_routing(ids, RoutingWorkspace(5, 2, 4, 8, build="one_launch"), x)
    with pytest.raises(ValueError, match="x order"):
        build_routing(ids, RoutingWorkspace(5, 2, 4, 8, build="one_launch"), x, xp, "mm")


@pytest.mark.parametrize("bad", [-1, 2.0, None])
def test_a_bad_single_block_threshold_is_refused(cupy, bad):
    with pytest.raises(InputError, match="single_block_items must be a non-negative int"):
        RoutingWorkspace(5, 2, 4, 8, build="one_launch", single_block_items=bad)


@pytest.mark.parametrize("x_per_slot", [False, True], ids=["x-per-token", "x-per-slot"])
@pytest.mark.parametrize("padded", [False, True], ids=["contiguous", "padded"])
def test_gather_then_scatter_place_every_item(cupy, rng, padded, x_per_slot):
    t, top_k, n_experts, k, m = 23, 4, 13, 96, 37
    ids = routing_table(rng, t, top_k, n_experts, top_k)
    counts, offsets, _ = ref.routing(ids, top_k, n_experts)
    ws = built_routing(cupy, ids, top_k, n_experts, 16)
    capacity = int(counts.max()) + 2 if padded else 0
    rows = n_experts * capacity if padded else t * top_k
    x = activations(rng, (t, top_k, k) if x_per_slot else (t, k))
    grouped = poisoned(cupy, (n_experts, capacity, k) if padded else (rows, k), np.float16)
    GatherRows(cupy.asarray(x), ws, grouped, capacity=capacity, x_per_slot=x_per_slot)()
    src = activations(rng, (n_experts, capacity, m) if padded else (rows, m))
    y = poisoned(cupy, (t, top_k, m))
    ScatterRows(cupy.asarray(src), ws, y, capacity=capacity)()

    sorted_ids = ws.sorted_ids.get()
    got_rows, src_rows = grouped.get().reshape(rows, k), src.reshape(rows, m)
    x_items = (x if x_per_slot else np.repeat(x[:, None, :], top_k, axis=1)).reshape(t * top_k, k)
    expected_y = np.full((t * top_k, m), np.nan, dtype=np.float32)
    written = np.zeros(rows, dtype=bool)
    for e in range(n_experts):
        for j in range(counts[e]):
            r = e * capacity + j if padded else offsets[e] + j
            item = sorted_ids[offsets[e] + j]
            np.testing.assert_array_equal(got_rows[r], x_items[item].astype(np.float16))
            expected_y[item] = src_rows[r]
            written[r] = True
    assert np.isnan(got_rows[~written]).all(), "padding rows must be left alone"
    np.testing.assert_array_equal(y.get().reshape(t * top_k, m), expected_y)  # NaN anywhere = item missed


# ---- engine-style Tensor-core GEMM -------------------------------------------------------------------


@pytest.mark.parametrize("accumulate", [False, True], ids=["overwrite", "accumulate"])
@pytest.mark.parametrize("m, t, k", [(67, 70, 512), (64, 1, 256), (130, 129, 256)], ids=str)
def test_gemm_q4k_tc_matches_fp16_reference(cupy, rng, m, t, k, accumulate):
    blocks, w = quantized_experts(rng, "q4_k", 1, m, k)
    x = activations(rng, (t, k))
    y0 = activations(rng, (t, m)) * 10 if accumulate else np.full((t, m), np.nan, dtype=np.float32)
    y = cupy.asarray(y0)
    GemmQ4KTC(cupy.asarray(blocks[0]), cupy.asarray(x), y, accumulate=accumulate)()
    got = y.get() - (y0 if accumulate else 0)
    assert_fp16_path_close(got, w[0], x, ref.dense_gemm)


# ---- cuBLAS fp16 GEMM and the dequant-once MoE path --------------------------------------------------


@pytest.mark.parametrize("m, n, k", [(67, 1, 256), (130, 45, 512)], ids=str)
def test_cublas_gemm_f16_matches_reference(cupy, rng, m, n, k):
    w = activations(rng, (m, k)).astype(np.float16)
    x = activations(rng, (n, k)).astype(np.float16)
    y = poisoned(cupy, (n, m))
    CublasGemm(cupy.asarray(w), cupy.asarray(x), y)()
    got = y.get()
    assert np.isfinite(got).all()
    assert ref.rel_frobenius(got, ref.dense_gemm(w, x)) <= FP16_PATH_BOUND


@CONVERSIONS
@pytest.mark.parametrize("fmt", ["q4_k", "q6_k"])
@pytest.mark.parametrize("m, t, k", [(67, 45, 512), (64, 1, 256)], ids=str)
def test_dense_dequant_cublas_matches_fp16_reference(cupy, rng, fmt, m, t, k, kernels):
    blocks, w = quantized_experts(rng, fmt, 1, m, k)
    x = activations(rng, (t, k))
    y = poisoned(cupy, (t, m))
    DenseDequantCublas(fmt, cupy.asarray(blocks[0]), cupy.asarray(x), y, kernels)()
    assert_fp16_path_close(y.get(), w[0], x, ref.dense_gemm)


MOE_CASES = [
    # (T, top_k, E, M, K, x per slot)
    pytest.param(1, 1, 3, 5, 256, False, id="T1-topk1"),
    pytest.param(11, 3, 9, 67, 256, False, id="gate-up-M67"),
    pytest.param(13, 4, 40, 70, 512, True, id="down-form-empty-experts"),
]


@CONVERSIONS
@pytest.mark.parametrize("fmt", ["q4_k", "q6_k"])
@pytest.mark.parametrize("t, top_k, n_experts, m, k, x_per_slot", MOE_CASES)
def test_moe_dequant_cublas_matches_fp16_reference(cupy, rng, fmt, t, top_k, n_experts, m, k, x_per_slot, kernels):
    blocks, w = quantized_experts(rng, fmt, n_experts, m, k)
    ids = routing_table(rng, t, top_k, n_experts, top_k)
    x = activations(rng, (t, top_k, k) if x_per_slot else (t, k))
    capacity = int(ref.routing(ids, top_k, n_experts)[0].max())  # exactly full: the edge of the padding
    y = poisoned(cupy, (t, top_k, m))
    path = MoeDequantCublas(
        fmt,
        cupy.asarray(blocks),
        cupy.asarray(x),
        cupy.asarray(ids),
        y,
        top_k=top_k,
        capacity=capacity,
        x_per_slot=x_per_slot,
        kernels=kernels,
    )
    path()
    path.check()
    assert_fp16_path_close(y.get(), w, x, lambda w_, x_, fp16=False: ref.experts_matvec(w_, x_, ids, top_k, fp16=fp16))


def test_moe_dequant_cublas_reports_capacity_overflow(cupy, rng):
    t, top_k, n_experts, m, k = 40, 4, 6, 8, 256
    blocks, _ = quantized_experts(rng, "q4_k", n_experts, m, k)
    ids = routing_table(rng, t, top_k, n_experts, top_k)
    largest = int(ref.routing(ids, top_k, n_experts)[0].max())
    path = MoeDequantCublas(
        "q4_k",
        cupy.asarray(blocks),
        cupy.asarray(activations(rng, (t, k))),
        cupy.asarray(ids),
        cupy.empty((t, top_k, m), dtype=cupy.float32),
        top_k=top_k,
        capacity=largest - 1,
    )
    path()
    with pytest.raises(CapacityExceeded):
        path.check()
