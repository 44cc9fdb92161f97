"""Q6_K repacked at load (zincbench.quant.q6k_r, the fused kernel's ZbQ6KR): the layout byte for byte, the scales in
the kernel's lane order, the same fp16 weights the kernel decodes from GGUF blocks, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zincbench.errors import InputError
from zincbench.quant import FORMATS, Q6K, Q6KR, REPACKS, get_format, gguf_io, q6k, q6k_r


def expected_block(block: np.ndarray) -> np.ndarray:
    """One repacked block, written out weight group by weight group from the format contract of the fused kernel
    (kquant_fused_mma.cu, ZbQ6KR): half h at 112h is ql[64h ..] (64 bytes), qh[32h ..] (32), then its scales; lane c
    at step i of half h covers weights 64j + 16(c&1) + 4i + {0..3} (its low scale) and those + 32 (its high scale),
    j = 2h + (c>>1); its scale word c sits at 96 + 4c of the half."""
    d = np.float32(block[208:210].view("<f2")[0])
    codes = block[192:208].view(np.int8)
    out = np.zeros(224, dtype=np.uint8)
    for h in range(2):
        out[112 * h : 112 * h + 64] = block[64 * h : 64 * h + 64]
        out[112 * h + 64 : 112 * h + 96] = block[128 + 32 * h : 128 + 32 * h + 32]
        for c in range(4):
            first = 64 * (2 * h + (c >> 1)) + 16 * (c & 1)  # the lane's first weight in the superblock
            for part, weight in enumerate((first, first + 32)):
                scale = np.float16(d * np.float32(codes[weight // 16]))
                at = 112 * h + 96 + 4 * c + 2 * part
                out[at : at + 2] = np.frombuffer(scale.tobytes(), dtype=np.uint8)
    return out


def test_repack_writes_the_layout_the_kernel_reads(rng):
    blocks = q6k.random_blocks(rng, 3, 1024)  # 12 blocks, d of either sign, subnormal to 1e-3
    repacked = q6k_r.repack(blocks)
    assert repacked.shape == (3, 4 * 224) and repacked.dtype == np.uint8
    for got, block in zip(repacked.reshape(-1, 224), blocks.reshape(-1, 210)):
        assert np.array_equal(got, expected_block(block))


def test_repacked_weights_are_the_gguf_weights_with_fp16_scales(rng):
    """dequantize of the repacked block = fp16(d·sc)·(q - 32): the GGUF block's weights with each sub-block scale
    rounded once to fp16 (the rounding the fused kernel applies to the GGUF layout too)."""
    blocks = q6k.random_blocks(rng, 8, 2048)
    flat = blocks.reshape(-1, 210)
    scales16 = q6k.sub_block_scales(flat).astype(np.float16).astype(np.float32)
    want = (scales16[:, :, None] * q6k.signed_levels(flat).astype(np.float32)).reshape(8, 2048)
    got = q6k_r.dequantize(q6k_r.repack(blocks))
    assert got.dtype == np.float32 and np.array_equal(got, want)
    gguf = q6k.dequantize(blocks)
    assert np.abs(got - gguf).max() <= np.abs(gguf).max() * 2.0**-11  # one fp16 rounding of the scale


def test_scale_order_is_a_permutation_of_the_sub_blocks():
    assert sorted(q6k_r.SCALE_ORDER.tolist()) == list(range(16))
    assert q6k_r.SCALE_ORDER[:8].max() < 8 <= q6k_r.SCALE_ORDER[8:].min()  # each half's scales in its own 16 bytes


def test_registry_knows_the_repacked_layout_but_gguf_does_not(rng):
    assert get_format("Q6_K_R") is Q6KR and Q6KR.ggml_type is None
    assert Q6KR.row_bytes(4096) == 16 * 224
    assert "q6_k_r" not in FORMATS and "q6_k_r" not in gguf_io.READABLE_TYPES
    layout, repack = REPACKS["q6_k"]
    assert layout == Q6KR.name and repack is q6k_r.repack
    blocks = Q6KR.random_blocks(rng, 2, 512)
    assert blocks.shape == (2, 2 * 224)
    x = rng.standard_normal((2, 512)).astype(np.float32)
    assert np.array_equal(Q6KR.quantize(x), q6k_r.repack(Q6K.quantize(x)))


@pytest.mark.parametrize(
    "call, data",
    [
        (q6k_r.repack, np.zeros((2, 211), dtype=np.uint8)),  # not whole 210-byte blocks
        (q6k_r.repack, np.zeros((2, 210), dtype=np.float32)),  # not bytes
        (q6k_r.dequantize, np.zeros((2, 210), dtype=np.uint8)),  # GGUF bytes given as repacked
        (q6k_r.dequantize, np.zeros((), dtype=np.uint8)),
    ],
)
def test_bad_input_is_one_clear_error(call, data):
    with pytest.raises(InputError):
        call(data)


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(min_size=210, max_size=210 * 4).filter(lambda b: len(b) % 210 == 0))
def test_any_bytes_repack_to_the_contract(raw):
    """Arbitrary blocks (d NaN, infinite or subnormal, every code): the layout still follows the contract, and the
    repacked weights are the GGUF ones with fp16 scales, NaN where those are NaN."""
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 210)
    with np.errstate(invalid="ignore", over="ignore"):
        repacked = q6k_r.repack(blocks)
        for got, block in zip(repacked, blocks):
            assert np.array_equal(got, expected_block(block))
        scales16 = q6k.sub_block_scales(blocks).astype(np.float16).astype(np.float32)
        want = scales16[:, :, None] * q6k.signed_levels(blocks).astype(np.float32)
        got = q6k_r.dequantize(repacked).reshape(want.shape)
    assert np.array_equal(got, want, equal_nan=True)
