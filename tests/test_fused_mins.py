"""The `mins` tiles (kernels/kquant_fused_mma.cu, ZbNibbleFormat<..., MINS>; kernels/zb_xperm.cuh, zb_write_sums)
modelled on the CPU: the permute's warp writes each sub-block's sums where the min wgmma's B expects them, the lanes'
A fragment pairs meet those sums once each, and the decode without the mins is exact.

The models follow the kernel's bit arithmetic (lane bits, selectors, descriptor strides); the source checks below
tie each model to the expressions the kernel spells."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zincbench.gpu.runtime import kernel_source
from zincbench.ops.fused import MmaTile, check_tiles, x_row_chunks
from zincbench.reference.kernels_ref import MINS_WORD_SUBBLOCKS, x_sub_block_sums


def test_the_models_are_the_kernel_code():
    gemm, xperm = kernel_source("kquant_fused_mma.cu"), kernel_source("zb_xperm.cuh")
    for expression in (
        "const unsigned odd_lane = (c & 1) ? ~0u : 0u;",
        "if (h == 0) mins_h0[rr] = lanes[rr].ndm_pair;",
        "else mins[rr] = (lanes[rr].ndm_pair & odd_lane) | (mins_h0[rr] & ~odd_lane);",
        "return {{ndm[0], ndm[1], ndm[0], ndm[1]}, zb_wgmma_desc(sums, BN * 16u, 128u)};",
        'asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(bias_dsc) : "r"(s.dsc), "r"(0xD400E400u));',
        "sums_copy.issue(xs + Tile::X_BYTES + Tile::W_BYTES, xp, s_xoff, K / 8, (step0 + s) >> 1);",
    ):
        assert expression in gemm, expression
    for expression in (
        "words[cc] = zb_perm_word(base + 64 * (2 * h + (cc >> 1)) + 16 * (cc & 1) + 4 * i, c);",
        "v += __shfl_xor_sync(0xffffffffu, v, 1);",
        "v += __shfl_xor_sync(0xffffffffu, v, 4);",
        "v += __shfl_xor_sync(0xffffffffu, v, 8);",
        "const unsigned c = lane & 3u, kc = (lane >> 2) & 1u, src = (c & 1u) * 16u;",
        "const unsigned want = 2u * (c >> 1) + kc;",
        "b = __shfl_sync(0xffffffffu, total[cc], src + 2u);",
        "if (lane < 8u) sums[lane] = zb_half2_pack(lo, hi);",
        "zb_write_sums(words, reinterpret_cast<unsigned*>(out_row + K / 8 + 2 * sb));",
    ):
        assert expression in xperm, expression


def warp_sums(x_sb: np.ndarray) -> np.ndarray:
    """zb_write_sums for one superblock of one row (256 fp16 values as float64): the 16 values its lanes 0-7 write,
    [chunk kc][word c][e]."""
    lanes = range(32)

    def position(lane: int, cc: int, pair: int) -> int:
        w, i, h = lane & 3, (lane >> 2) & 3, lane >> 4
        return 64 * (2 * h + (cc >> 1)) + 16 * (cc & 1) + 4 * i + 32 * (w >> 1) + (w & 1) + 2 * pair

    total = {lane: [x_sb[position(lane, cc, 0)] + x_sb[position(lane, cc, 1)] for cc in range(4)] for lane in lanes}
    for mask in (1, 4, 8):  # the butterfly: every lane gets the sum over the lanes that differ in these bits
        total = {lane: [total[lane][cc] + total[lane ^ mask][cc] for cc in range(4)] for lane in lanes}
    out = np.empty((2, 4, 2))
    for lane in range(8):
        c, kc = lane & 3, (lane >> 2) & 1
        src, want = (c & 1) * 16, 2 * (c >> 1) + kc
        out[kc, c] = total[src][want], total[src + 2][want]
    return out


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_warp_writes_every_sub_blocks_halves_in_the_min_order(seed):
    x = np.random.default_rng(seed).standard_normal((1, 256)).astype(np.float32)
    want = x_sub_block_sums(x)[0, 0]  # [kc][8]
    got = warp_sums(x.astype(np.float16).astype(np.float64)[0]).reshape(2, 8)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def lane_pairs(ndm: np.ndarray, c: int) -> np.ndarray:
    """keep_mins for lane column c: its ndm pair of half 0 (every lane), then of half 1 where c is odd."""
    pair = [ndm[4 * h + 2 * (c >> 1) : 4 * h + 2 * (c >> 1) + 2] for h in (0, 1)]
    return pair[1] if c & 1 else pair[0]


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_min_wgmma_meets_each_sub_blocks_min_and_sum_once(seed):
    """A (a0 = a2: k pairs 2c, 2c + 1 and 2c + 8, 2c + 9 of lane c) times B (the two sums chunks, K-major: k < 8 from
    chunk 0, k >= 8 from chunk 1) is sum over sub-blocks of -(dmin*m) times the sub-block's X sum."""
    rng = np.random.default_rng(seed)
    ndm = rng.standard_normal(8)
    x = rng.standard_normal((1, 256)).astype(np.float32)
    b = x_sub_block_sums(x)[0, 0].reshape(16)
    a = np.empty(16)
    for c in range(4):
        a[2 * c : 2 * c + 2] = a[2 * c + 8 : 2 * c + 10] = lane_pairs(ndm, c)
    exact = ndm @ x.astype(np.float16).astype(np.float64).reshape(8, 32).sum(axis=1)
    assert a @ b == pytest.approx(exact, rel=1e-12, abs=1e-12)
    assert [4 * (c & 1) + 2 * (c >> 1) for c in range(4)] == list(MINS_WORD_SUBBLOCKS)


def halves(v: int) -> np.ndarray:
    return np.array([v & 0xFFFF, v >> 16], dtype=np.uint16).view(np.float16)


def test_the_bias_scale_constant_is_minus_1024_and_minus_64():
    """Low nibbles sit on 1024 (ulp 1), high nibbles on 64 (ulp 1/16): their addends are -1024 d*sc and -64 d*sc."""
    assert list(halves(0xD400E400)) == [-1024.0, -64.0]


finite_small = (
    st.integers(0, 0xFFFF)
    .map(lambda b: np.uint16(b).view(np.float16))
    .filter(lambda v: np.isfinite(v) and abs(float(v)) < 64)
)


@settings(max_examples=500, deadline=None)
@given(dsc=finite_small, q=st.integers(0, 31), bias=st.sampled_from([1024, 64]))
def test_the_decode_without_mins_rounds_q_times_dsc_once(dsc, q, bias):
    """fma(bias + q, dsc, fp16(-bias * dsc)) is fp16(q * dsc): for |d*sc| < 64 the addend is exact (a power-of-two
    multiple), and the fma rounds the exact (bias + q) * dsc - bias * dsc once. Q5_K's q reaches 31."""
    with np.errstate(over="ignore"):
        addend = np.float16(-bias * np.float32(dsc))
    assert float(addend) == -bias * float(dsc)
    fma = np.float16(float(bias + q) * float(dsc) + float(addend))  # float64 holds the exact value
    assert float(fma) == float(np.float16(q * float(dsc)))  # equal values (a zero's sign aside)


def test_past_the_limit_the_addend_overflows():
    """|d*sc| >= 64 makes -1024 d*sc infinite in fp16: the documented limit of the mins decode."""
    with np.errstate(over="ignore"):
        assert np.isinf(np.float16(-1024 * np.float32(64.0)))


@pytest.mark.parametrize("bn,threads", [(8, 128), (16, 256), (96, 256), (200, 256), (256, 128)])
def test_every_sums_chunk_is_copied_once(bn, threads):
    """ZbSumsCopy: thread tid copies chunk (row r0 + it * THREADS / 2, kc) = ((tid >> 1) + ..., tid & 1) in the
    passes ZbChunkPasses<2 * BN, THREADS> gives it."""
    chunks = 2 * bn
    iters = -(-chunks // threads)
    copied = []
    for tid in range(threads):
        for it in range(iters):
            if chunks % threads == 0 or it < iters - 1 or tid + (iters - 1) * threads < chunks:
                copied.append(((tid >> 1) + it * (threads // 2), tid & 1))
    assert sorted(copied) == [(r, kc) for r in range(bn) for kc in (0, 1)]


def test_a_mins_tile_reads_its_own_x_order():
    tile = MmaTile.parse("wgmma+tma+mins:1,4,8,1,4,2,1")
    assert tile.mins and tile.x_order == "wgmma_sums" and tile.label.endswith("/tma/mins")
    assert "gemm_kquant_mma<ZbQ4KMins," in tile.expression(True, "q4_k")
    assert "gemm_kquant_mma<ZbQ5KMins," in tile.expression(True, "q5_k")
    twin = MmaTile.parse("wgmma+tma:1,4,8,1,4,2,1")
    # each of 4 stages gains [2][32 tokens][16 B] = 1024 bytes
    assert tile.smem_bytes("q4_k") - twin.smem_bytes("q4_k") == 4 * 1024
    assert x_row_chunks(2048, "wgmma_sums") == 256 + 16 and x_row_chunks(2048, "wgmma") == 256


def test_mins_needs_the_wgmma_path_a_format_with_mins_and_a_grouped_gemm():
    with pytest.raises(ValueError, match="needs wgmma"):
        MmaTile.parse("mins:1,2,4,1,3")
    with pytest.raises(ValueError, match="no sub-block mins"):
        MmaTile.parse("wgmma+mins:1,2,4,1,4").expression(True, "q6_k")
    with pytest.raises(ValueError, match="grouped"):
        check_tiles(["wgmma+mins:1,2,4,1,4"], grouped=False)
    check_tiles(["wgmma+mins:1,2,4,1,4"], grouped=True)
