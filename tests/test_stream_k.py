"""The fused kernel's stream-K schedule (zincbench.ops.fused.stream_k_schedule) and a model of how the kernel walks
it (gemm_kquant_mma's work loop, zb_sk_begin / zb_sk_owner / zb_sk_slot / zb_sk_fixup in kernels/kquant_fused_mma.cu),
without a GPU: every (tile, superblock) computed exactly once, every tile stored exactly once with the sum of all
its parts, partial slots never shared, the counters left at zero for the next launch, whatever order the blocks
arrive in. The GPU tests (tests/gpu/test_fused_mma.py) run the same schedules on the kernel itself."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zincbench.ops.fused import STREAM_K_MIN_SUPERBLOCKS, StreamKSchedule, stream_k_schedule


# ---- a model of the kernel's index math (one function per device function) -----------------------------------
def sk_begin(s: StreamKSchedule, j: int) -> int:  # zb_sk_begin
    return j * s.iters // s.ctas


def sk_owner(s: StreamKSchedule, i: int) -> int:  # zb_sk_owner: ceil((i + 1) ctas / iters) - 1
    return ((i + 1) * s.ctas + s.iters - 1) // s.iters - 1


def sk_slot(s: StreamKSchedule, j: int, u: int) -> int:  # zb_sk_slot (in slots, not floats)
    return 2 * j + (sk_begin(s, j) // s.n_sb != u)


def block_units(s: StreamKSchedule, block: int) -> list[tuple[int, int, int, int]]:
    """(tile, sb0, sb1, sk_tile) of each unit the kernel's work loop gives ``block`` (sk_tile -1: a whole tile)."""
    if block < s.dp_tiles:
        return [(block, 0, s.n_sb, -1)]
    j = block - s.dp_tiles
    it, end, units = sk_begin(s, j), sk_begin(s, j + 1), []
    while it < end:
        u = it // s.n_sb
        sb0, sb1 = it - u * s.n_sb, min(s.n_sb, end - u * s.n_sb)
        units.append((s.dp_tiles + u, sb0, sb1, u))
        it = u * s.n_sb + sb1
    return units


def run_model(s: StreamKSchedule, parts: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
    """The launch with blocks finishing in ``order``: parts[tile, sb] is a superblock's contribution. Returns the
    stored tiles (NaN: never stored), the counters after the launch, and how often each tile was stored."""
    out = np.full(s.tiles, np.nan)
    stores = [0] * s.tiles
    counters = np.zeros(s.tiles - s.dp_tiles, dtype=np.int64)
    slots: dict[int, tuple[int, float]] = {}  # slot -> (sk tile, partial)
    for block in order:
        for tile, sb0, sb1, u in block_units(s, block):
            acc = parts[tile, sb0:sb1].sum()
            if u >= 0 and (sb0 > 0 or sb1 < s.n_sb):  # zb_sk_fixup
                slot = sk_slot(s, block - s.dp_tiles, u)
                assert slot not in slots or slots[slot][0] != u, "two contributors of one tile share a slot"
                assert 0 <= slot < 2 * s.ctas
                slots[slot] = (u, acc)
                counters[u] += sb1 - sb0
                if counters[u] != s.n_sb:
                    continue
                counters[u] = 0
                j_lo, j_hi = sk_owner(s, u * s.n_sb), sk_owner(s, (u + 1) * s.n_sb - 1)
                got = [slots[sk_slot(s, jj, u)] for jj in range(j_lo, j_hi + 1)]
                assert all(t == u for t, _ in got), "a contributor's slot holds another tile's partial"
                acc = sum(p for _, p in got)
            out[tile] = acc
            stores[tile] += 1
    return out, counters, stores


schedules = st.builds(
    lambda tiles, n_sb, slots, min_sb: stream_k_schedule(tiles, n_sb, slots, min_sb),
    st.integers(1, 700),
    st.integers(1, 90),
    st.integers(1, 300),
    st.integers(1, 8),
)


@settings(max_examples=300, deadline=None)
@given(schedules)
def test_the_schedule_covers_every_superblock_once(s):
    assert 0 <= s.dp_tiles <= s.tiles and (s.ctas == 0) == (s.dp_tiles == s.tiles)
    covered = np.zeros((s.tiles, s.n_sb), dtype=int)
    for block in range(s.blocks):
        units = block_units(s, block)
        assert 1 <= len(units) <= 2, "a stream-K block touches at most two tiles (two partial slots)"
        for tile, sb0, sb1, _ in units:
            assert 0 <= sb0 < sb1 <= s.n_sb
            covered[tile, sb0:sb1] += 1
    assert (covered == 1).all()
    if s.ctas:
        assert s.ctas > s.tiles - s.dp_tiles, "sharing spreads the tail over more blocks than it has tiles"
        assert all(end - begin <= s.n_sb for begin, end in s.ranges())


@settings(max_examples=200, deadline=None)
@given(schedules, st.integers(0, 2**32 - 1))
def test_every_tile_is_stored_once_with_its_whole_sum_in_any_arrival_order(s, seed):
    rng = np.random.default_rng(seed)
    parts = rng.integers(-1000, 1000, size=(s.tiles, s.n_sb)).astype(np.float64)  # exact sums in any order
    out, counters, stores = run_model(s, parts, rng.permutation(s.blocks))
    assert stores == [1] * s.tiles
    assert np.array_equal(out, parts.sum(axis=1))
    assert not counters.any(), "the counters must be zero again for the next launch"


@settings(max_examples=300, deadline=None)
@given(schedules)
def test_owner_is_the_block_whose_range_holds_the_iteration(s):
    if not s.ctas:
        return
    for j, (begin, end) in enumerate(s.ranges()):
        for i in (begin, end - 1):
            assert sk_owner(s, i) == j


def test_the_last_partial_wave_is_shared_and_whole_waves_are_not():
    # qwen36-27b attn_output at T 2048 on 128x256 tiles: 40 x 8 tiles on an H200's 132 SMs, one block each
    s = stream_k_schedule(320, 24, 132)
    assert (s.dp_tiles, s.ctas, s.iters) == (264, 132, 56 * 24)
    assert stream_k_schedule(264, 24, 132).ctas == 0  # two whole waves
    # a grid smaller than one wave (the 1024-row k/v projections) is shared entirely
    small = stream_k_schedule(32, 16, 132)
    assert (small.dp_tiles, small.ctas) == (0, 32 * 16 // STREAM_K_MIN_SUPERBLOCKS)
    # too few superblocks to split: whole tiles
    assert stream_k_schedule(5, 3, 132).ctas == 0


@pytest.mark.parametrize("bad", [(0, 4, 132), (4, 0, 132), (4, 4, 0)])
def test_schedule_refuses_empty_inputs(bad):
    with pytest.raises(ValueError, match="positive"):
        stream_k_schedule(*bad)


def test_the_sanitizer_group_runs_every_stream_k_tile_of_the_gate_through_shared_ranges():
    """The ``fused`` sanitizer group launches the T1 gate's sk tiles at its largest dense shape as on a GPU of
    FUSED_STREAM_K_SLOTS resident blocks: whole tiles and shared ranges in one grid, some ranges crossing tiles."""
    from zincbench.testing.sanitize_driver import FUSED_DENSE_SHAPES, FUSED_STREAM_K_SLOTS, gate_tiles

    m, k, t = FUSED_DENSE_SHAPES[-1]
    crossing = False
    sk_tiles = [tile for tile in gate_tiles("t1") if tile.stream_k]
    assert sk_tiles, "the T1 gate declares stream-K tiles"
    for tile in sk_tiles:
        tiles = -(-m // tile.bm) * -(-t // tile.bn)
        s = stream_k_schedule(tiles, k // 256, FUSED_STREAM_K_SLOTS, min_superblocks=1)
        assert s.ctas > s.tiles - s.dp_tiles > 0, tile.label
        crossing |= any(begin // s.n_sb != (end - 1) // s.n_sb for begin, end in s.ranges())
    assert crossing
