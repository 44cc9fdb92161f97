"""The fused kernel's wgmma X copies (kernels/kquant_fused_mma.cu, ZbXCopy<true, BN, THREADS>) modelled on the CPU.

A thread moves four 16-byte units of one token row (its slot: row r, quarter a) with one source address and
destinations zb_wgmma_x_offset(r, 4a) ^ (k << 4). The model checks what the GPU tests can only see as a wrong
product: every unit of every row lands exactly once where the wgmma descriptor reads it, the XOR acts on bits the
stage base never sets, and the 8 lanes of each store phase hit 32 different banks."""

from __future__ import annotations

import pytest

from zincbench.ops.fused import WGMMA_WIDTHS


def wgmma_x_offset(bn: int, r: int, q: int) -> int:
    """zb_wgmma_x_offset<BN>(r, q): unit q (0..15) of token row r in a half's K-major 128-byte-swizzle atoms."""
    return (q >> 3) * bn * 128 + r * 128 + (((q & 7) ^ (r & 7)) << 4)


def x_copies(bn: int, threads: int):
    """(thread, pass, k, row, source unit, destination offset) of every cp.async ZbXCopy<true> issues for one half."""
    slots, passes = bn * 4, -(-bn * 4 // threads)
    for tid in range(threads):
        r0, quarter = (tid & 7) | (tid >> 5 << 3), (tid >> 3) & 3
        dst0 = wgmma_x_offset(bn, r0, 4 * quarter)
        for j in range(passes):
            if tid + j * threads >= slots:
                continue
            r, dst = r0 + j * (threads // 4), dst0 + j * (threads // 4) * 128
            for k in range(4):
                yield tid, j, k, r, 4 * quarter + k, dst ^ (k << 4)


TILES = [(bn, threads) for bn in WGMMA_WIDTHS for threads in (128, 256, 512)]


@pytest.mark.parametrize("bn,threads", TILES)
def test_every_unit_of_every_row_lands_once_where_wgmma_reads_it(bn, threads):
    seen = {}
    for _, _, _, r, q, dst in x_copies(bn, threads):
        assert (r, q) not in seen, f"row {r} unit {q} copied twice"
        seen[r, q] = dst
        assert dst == wgmma_x_offset(bn, r, q)
    assert set(seen) == {(r, q) for r in range(bn) for q in range(16)}


@pytest.mark.parametrize("bn,threads", TILES)
def test_the_xor_touches_only_bits_a_stage_base_leaves_clear(bn, threads):
    """dst ^ (k << 4) is applied to xs + offset in the kernel: xs is a multiple of 1024 and the k = 0 offset has
    bits 4-5 equal to r & 3, so flipping them never carries into the base."""
    for _, _, k, r, q, dst in x_copies(bn, threads):
        base = dst ^ (k << 4)
        assert (base >> 4) & 3 == r & 3
        for stage_base in (0, 1024, 7 * 1024):
            assert (stage_base + base) ^ (k << 4) == stage_base + dst


@pytest.mark.parametrize("bn,threads", TILES)
def test_each_store_phase_of_eight_lanes_hits_every_bank(bn, threads):
    """A warp's 16-byte stores go out 8 lanes at a time: conflict-free when those 8 cover 8 distinct 16-byte bank
    groups of 128 bytes."""
    by_phase = {}
    for tid, j, k, _, _, dst in x_copies(bn, threads):
        by_phase.setdefault((tid >> 3, j, k), []).append((dst >> 4) & 7)
    for groups in by_phase.values():
        assert len(groups) == len(set(groups)), "two lanes of a store phase share a bank group"
