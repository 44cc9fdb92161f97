"""The fused kernel's wgmma X copies (kernels/kquant_fused_mma.cu, ZbXCopy<true, BN, THREADS>) modelled on the CPU.

A thread moves units a, a + 4, a + 8, a + 12 of one token row r (its slot: row r, column a) from one source address,
to zb_wgmma_x_offset(r, a) ^ ((k & 1) << 6) plus k atom k >> 1. The model checks what the GPU tests can only see as a
wrong product, and what they cannot see at all: every unit of every row lands exactly once where the wgmma descriptor
reads it, the XOR acts on a bit the stage base never sets, the 8 lanes of each store phase hit 32 different banks, and
each cp.async of a warp reads whole 32-byte sectors (a first version read half sectors, twice as many L2 requests:
2.5-7.5% slower on the H200)."""

from __future__ import annotations

import re

import pytest

from zincbench.gpu.runtime import KERNELS_DIR
from zincbench.ops.fused import WGMMA_WIDTHS


def wgmma_x_offset(bn: int, r: int, q: int) -> int:
    """zb_wgmma_x_offset<BN>(r, q): unit q (0..15) of token row r in a half's K-major 128-byte-swizzle atoms."""
    return (q >> 3) * bn * 128 + r * 128 + (((q & 7) ^ (r & 7)) << 4)


def x_copies(bn: int, threads: int):
    """(thread, pass, k, row, source unit, destination offset) of every cp.async ZbXCopy<true> issues for one half."""
    slots, passes = bn * 4, -(-bn * 4 // threads)
    for tid in range(threads):
        r0, column = (tid & 7) | (tid >> 5 << 3), (tid >> 3) & 3
        dst0 = wgmma_x_offset(bn, r0, column)
        for j in range(passes):
            if tid + j * threads >= slots:
                continue
            r, dst = r0 + j * (threads // 4), dst0 + j * (threads // 4) * 128
            for k in range(4):
                yield tid, j, k, r, column + 4 * k, (dst ^ ((k & 1) << 6)) + (k >> 1) * bn * 128


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
def test_the_xor_touches_only_a_bit_a_stage_base_leaves_clear(bn, threads):
    """The kernel XORs xs + offset, xs a multiple of 1024: flipping bit 6 of the sum is flipping it in the offset."""
    for _, _, k, _, _, dst in x_copies(bn, threads):
        base = dst - (k >> 1) * bn * 128
        for stage_base in (0, 1024, 7 * 1024):
            assert (stage_base + (base ^ ((k & 1) << 6))) == stage_base + base ^ ((k & 1) << 6)


def _by_instruction(bn: int, threads: int):
    """The copies of each warp-wide cp.async: keyed by (warp, pass, k)."""
    groups = {}
    for tid, j, k, r, q, dst in x_copies(bn, threads):
        groups.setdefault((tid >> 5, j, k), []).append((tid & 31, r, q, dst))
    return groups


@pytest.mark.parametrize("bn,threads", TILES)
def test_each_store_phase_of_eight_lanes_hits_every_bank(bn, threads):
    """A warp's 16-byte stores go out 8 lanes at a time: conflict-free when those 8 cover 8 distinct 16-byte bank
    groups of 128 bytes."""
    for copies in _by_instruction(bn, threads).values():
        phases = {}
        for lane, _, _, dst in copies:
            phases.setdefault(lane >> 3, []).append((dst >> 4) & 7)
        for groups in phases.values():
            assert len(groups) == len(set(groups)), "two lanes of a store phase share a bank group"


@pytest.mark.parametrize("bn,threads", TILES)
def test_each_warp_copy_reads_whole_sectors(bn, threads):
    """Per row, one warp-wide cp.async reads 64 contiguous bytes (units 4k..4k+3): two whole 32-byte sectors."""
    for copies in _by_instruction(bn, threads).values():
        units = {}
        for _, r, q, _ in copies:
            units.setdefault(r, []).append(q)
        for r, qs in units.items():
            assert sorted(qs) == list(range(min(qs), min(qs) + 4)) and min(qs) % 4 == 0, f"row {r} reads units {qs}"


def wgmma_desc_sw128(addr: int) -> int:
    """A K-major 128-byte-swizzle descriptor: start address (14 bits, 16-byte units), LBO 16, SBO 1024 bytes."""
    return ((addr >> 4) & 0x3FFF) | ((16 >> 4) << 16) | ((1024 >> 4) << 32) | 1 << 62


DESC_SW128_HI = (1024 >> 4) | 1 << 30  # SBO and the swizzle mode: the high word


def test_the_kernels_high_word_is_sbo_and_the_swizzle():
    """ZB_WGMMA_DESC_SW128_HI, the constant the kernel puts above every descriptor's low word."""
    source = (KERNELS_DIR / "kquant_fused_mma.cu").read_text()
    expr = re.search(r"constexpr unsigned ZB_WGMMA_DESC_SW128_HI = ([^;]+);", source).group(1)
    assert eval(expr.replace("u", ""), {}) == DESC_SW128_HI == wgmma_desc_sw128(0) >> 32


@pytest.mark.parametrize("bn", WGMMA_WIDTHS)
def test_a_steps_descriptor_is_the_stages_low_word_plus_its_offset(bn):
    """zb_gemm_unit builds the low word of one descriptor, at the stages' base, and adds every stage's and half's byte
    offset / 16 to it; zb_wgmma_piece adds each step's to that low word, or to the whole descriptor (64-bit) under
    the constant high word. Either is the descriptor of the step's own address wherever the address is a shared
    address (under 2^18 bytes: no carry out of the 14-bit start field), for any 1024-byte aligned base and stage."""
    steps = [(step >> 2) * bn * 128 + (step & 3) * 32 for step in range(8)]
    for base in range(0, 2**18, 1024):
        low0 = wgmma_desc_sw128(base) & 0xFFFFFFFF
        for stage in range(0, 2**18 - base, 3072):  # stage + half offsets, 1024-byte aligned
            for offset in steps:
                if base + stage + offset + 32 <= 2**18:
                    half = DESC_SW128_HI << 32 | (low0 + stage // 16)
                    expected = wgmma_desc_sw128(base + stage + offset)
                    assert DESC_SW128_HI << 32 | ((half & 0xFFFFFFFF) + offset // 16) == expected
                    assert half + offset // 16 == expected
