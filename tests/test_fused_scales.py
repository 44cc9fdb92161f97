"""The fused kernel's Q4_K/Q5_K scale decode (kernels/kquant_fused_mma.cu: zb_q4k_high_codes, zb_q4k_scales) modelled
on the CPU, bit for bit: each lane's d*sc and -(dmin*m) splats are fp16(d * sc) and fp16(-(dmin * m)) of the sub-blocks
it decodes, with sc and m as ggml's get_scale_min_k4 unpacks them (``zincbench.quant.q4k.unpack_scale_min``).

The kernel builds the codes four at a time in bytes, picks a lane's two with one PRMT that also writes 0x64 above each
(the fp16 1024 + code), subtracts 1024 and multiplies by d (or -dmin) in fp16. The model runs the same bit
operations (its masks and PRMT selectors are read from the source) and NumPy's fp16 arithmetic, which rounds the
exact product once as the GPU's mul.rn.f16x2 does."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from zincbench.gpu.runtime import kernel_source
from zincbench.quant.q4k import pack_scale_min, unpack_scale_min


def _kernel_constants() -> tuple[int, int]:
    """The PRMT selectors ZbNibbleFormat::load picks sub-blocks (0, 1) and (2, 3) of a half with."""
    source = kernel_source("kquant_fused_mma.cu")
    high, low = re.search(
        r"zb_q4k_scales\(hdr\.x, sc, mn, \(c >> 1\) \? (0x[0-9a-fA-F]+)u : (0x[0-9a-fA-F]+)u\)", source
    ).groups()
    return int(low, 16), int(high, 16)


PICKS = _kernel_constants()


def prmt(a: int, b: int, selector: int) -> int:
    """PTX prmt.b32 (default mode): result byte i is byte (selector >> 4i) & 7 of the 8 bytes b:a."""
    pool = (b << 32 | a).to_bytes(8, "little")
    return int.from_bytes(bytes(pool[selector >> (4 * i) & 7] for i in range(4)), "little")


def halves(v: int) -> np.ndarray:
    return np.array([v & 0xFFFF, v >> 16], dtype=np.uint16).view(np.float16)


def bits(h: np.ndarray) -> int:
    u = h.astype(np.float16).view(np.uint16)
    return int(u[0]) | int(u[1]) << 16


def scale_codes(biased: int, scale2: int) -> int:
    """zb_scale_codes: (1024 + code) - 1024, exact, times scale, one rounding."""
    with np.errstate(over="ignore"):
        return bits((halves(biased) - np.float16(1024)) * halves(scale2))


def lane_scales(header: bytes, h: int, c: int) -> tuple[int, int, int, int]:
    """(dsc_lo, ndm_lo, dsc_hi, ndm_hi) of lane column c in half h, as ZbNibbleFormat::load computes them."""
    x, y, z, w = (int.from_bytes(header[4 * i : 4 * i + 4], "little") for i in range(4))
    if h:
        sc = (w & 0x0F0F0F0F) | (y >> 2 & 0x30303030)
        mn = (w >> 4 & 0x0F0F0F0F) | (z >> 2 & 0x30303030)
    else:
        sc, mn = y & 0x3F3F3F3F, z & 0x3F3F3F3F
    pick = PICKS[c >> 1]
    d2, neg_dmin2 = prmt(x, 0, 0x1010), prmt(x, 0, 0x3232) ^ 0x80008000
    dsc = scale_codes(prmt(sc, 0x64646464, pick), d2)
    ndm = scale_codes(prmt(mn, 0x64646464, pick), neg_dmin2)
    return prmt(dsc, 0, 0x1010), prmt(ndm, 0, 0x1010), prmt(dsc, 0, 0x3232), prmt(ndm, 0, 0x3232)


def splat(v: np.floating) -> int:
    with np.errstate(over="ignore"):  # d * sc past fp16's range is inf on both paths
        return bits(np.array([v, v], dtype=np.float16))


def expected(header: bytes, h: int, c: int) -> tuple[int, int, int, int]:
    """The f32 path the kernel had before: fp16(d * sc) and fp16(-dmin * m) of sub-blocks 4h + 2(c >> 1) + {0, 1}."""
    d, dmin = np.frombuffer(header[:4], dtype=np.float16).astype(np.float32)
    scale, minimum = unpack_scale_min(np.frombuffer(header[4:], dtype=np.uint8)[None, :])
    j = 4 * h + 2 * (c >> 1)
    lo, hi = j, j + 1
    return (
        splat(d * np.float32(scale[0, lo])),
        splat(-dmin * np.float32(minimum[0, lo])),
        splat(d * np.float32(scale[0, hi])),
        splat(-dmin * np.float32(minimum[0, hi])),
    )


def test_the_model_is_the_kernel_code():
    """The bit operations above, as the kernel spells them."""
    source = kernel_source("kquant_fused_mma.cu")
    for expression in (
        "(low & 0x0F0F0F0Fu) | (top >> 2 & 0x30303030u)",
        "h ? zb_q4k_high_codes(hdr.w, hdr.y) : hdr.y & 0x3F3F3F3Fu",
        "h ? zb_q4k_high_codes(hdr.w >> 4, hdr.z) : hdr.z & 0x3F3F3F3Fu",
        "zb_scale_codes(zb_prmt(sc, 0x64646464u, pick), zb_half2_lo(d_dmin))",
        "zb_scale_codes(zb_prmt(mn, 0x64646464u, pick), zb_half2_hi(d_dmin) ^ 0x80008000u)",
        "{zb_half2_lo(dsc), zb_half2_lo(ndm), zb_half2_hi(dsc), zb_half2_hi(ndm)}",
    ):
        assert expression in source, expression


def test_prmt_model():
    assert prmt(0x33221100, 0x77665544, 0x3210) == 0x33221100
    assert prmt(0x33221100, 0x77665544, 0x7654) == 0x77665544
    assert prmt(0x000000AB, 0x64646464, 0x4140) == 0x640064AB


@pytest.mark.parametrize("h", [0, 1])
@pytest.mark.parametrize("c", range(4))
def test_every_code_of_every_sub_block(h, c):
    """Each 6-bit code value in each of the eight scale and eight min slots, with d and dmin of both signs and
    magnitudes from subnormal to large."""
    rng = np.random.default_rng(1000 * h + c)
    for d_bits in (0x3C00, 0x0001, 0x03FF, 0x7BFF, 0xB555, 0x2E66):
        for code in range(64):
            scale = rng.integers(0, 64, size=(1, 8)).astype(np.uint8)
            minimum = rng.integers(0, 64, size=(1, 8)).astype(np.uint8)
            scale[0, 4 * h + 2 * (c >> 1)] = code
            minimum[0, 4 * h + 2 * (c >> 1) + 1] = code
            header = (
                np.array([d_bits, d_bits ^ 0x8001], dtype=np.uint16).tobytes()
                + pack_scale_min(scale, minimum).tobytes()
            )
            assert lane_scales(header, h, c) == expected(header, h, c)


@settings(max_examples=400, deadline=None)
@given(header=st.binary(min_size=16, max_size=16), h=st.integers(0, 1), c=st.integers(0, 3))
def test_any_header(header, h, c):
    """Arbitrary 16 header bytes (finite d and dmin; NaN payloads are not compared): the same splats."""
    assume(np.isfinite(np.frombuffer(header[:4], dtype=np.float16)).all())
    assert lane_scales(header, h, c) == expected(header, h, c)
