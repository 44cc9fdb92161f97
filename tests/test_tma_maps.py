"""The TMA tensor maps the fused kernel's tma tiles read (zincbench.gpu.tma, zincbench.ops.fused.tma_map_specs): the
driver's rules checked before any driver call, and the boxes laid out as the kernel's stage expects them."""

from __future__ import annotations

import pytest

from zincbench.gpu.tma import TensorMapSpec
from zincbench.ops.fused import POLICIES, TMA_X_MAP, WHOLE_POLICIES, MmaTile, tma_map_specs
from zincbench.quant import get_format


@pytest.mark.parametrize(
    "spec,message",
    [
        (TensorMapSpec("u8", (1152, 512), (1152,), (64, 128, 1)), "one box extent per dimension"),
        (TensorMapSpec("u8", (1152, 512, 1), (1152,), (64, 128, 1)), "one stride per outer dimension"),
        (TensorMapSpec("u8", (210 * 4, 64), (840,), (64, 64)), "multiples of 16"),  # GGUF Q6_K rows
        (TensorMapSpec("u8", (1152, 512), (1152,), (64, 512)), "box extents must be 1..256"),
        (TensorMapSpec("u8", (1152, 512), (1152,), (24, 128)), "multiple of 16 bytes"),
        (TensorMapSpec("f16", (2048, 64), (4096,), (128, 64), swizzle=128), "at most that many bytes"),
        (TensorMapSpec("f16", (2048, 64), (4096,), (64, 64), swizzle=96), "swizzle span"),
        (TensorMapSpec("f32", (2048, 64), (8192,), (32, 64)), "element type"),
        (TensorMapSpec("u8", (0, 64), (16,), (16, 64)), r"extents must be 1\.\.2\^32"),
    ],
)
def test_a_map_the_driver_would_refuse_is_one_clear_error(spec, message):
    with pytest.raises(ValueError, match=message):
        spec.check()


def test_an_unaligned_tensor_is_refused_before_the_driver():
    with pytest.raises(ValueError, match="16-byte aligned"):
        TensorMapSpec("u8", (1152, 512), (1152,), (64, 128)).encode(0x1008)


@pytest.mark.parametrize("weights", [w for w, p in POLICIES.items() if p.tma_widths])
def test_weight_boxes_cover_a_stage_of_bm_rows(weights):
    """One 3-D map per box of the format: [row bytes][M][experts], a box of `width` bytes x BM rows of one expert; the
    boxes together write the stage's weight area (BM x row stage bytes)."""
    tile = MmaTile.parse("wgmma+tma:1,8,8,1,4,2,1")
    m, k, experts = 512, 2048, 256
    specs = tma_map_specs(tile, weights, m, k, experts)
    row_bytes = get_format(weights).row_bytes(k)
    boxes = [s for s in specs if s is not None]
    assert len(specs) == TMA_X_MAP and [s.box[0] for s in boxes] == list(POLICIES[weights].tma_widths)
    for spec in boxes:
        assert spec.dims == (row_bytes, m, experts) and spec.strides == (row_bytes, m * row_bytes)
        assert spec.box[1:] == (tile.bm, 1) and spec.swizzle == 0
    assert sum(s.box_bytes for s in boxes) == tile.bm * POLICIES[weights].row_stage_bytes


@pytest.mark.parametrize("weights", list(WHOLE_POLICIES))
def test_a_whole_stage_is_one_box_of_each_rows_block(weights):
    """``whole`` tiles: one box of the block's bytes per row and stage (a superblock), at the block's start."""
    tile = MmaTile.parse("wgmma+tma+whole:1,2,8,1,4")
    block = get_format(weights).row_bytes(256)
    (box,) = [s for s in tma_map_specs(tile, weights, 512, 2048, 256) if s is not None]
    assert box.box == (block, tile.bm, 1) and box.box_bytes == tile.bm * WHOLE_POLICIES[weights].row_stage_bytes


def sectors(start: int, length: int) -> int:
    """32-byte L2 sectors that bytes [start, start + length) touch."""
    return (start + length - 1) // 32 - start // 32 + 1


# ZbNibbleFormat::tma_box of Q4_K's half stages, (offset, half step, width): the half's nibbles, the header
HALF_Q4K_BOXES = [(16, 64, 64), (0, 0, 16)]


def test_whole_stages_read_fewer_sectors_than_half_stages():
    """A Q4_K block (144 bytes, 16-byte aligned: its start is 0 or 16 mod 32) by half stages is each half's 64 nibble
    bytes and the 16-byte header again: 8 or 6 sectors, 7 on average; whole, its 144 bytes once: 5."""
    half = [
        sum(sectors(start + offset + h * step, width) for h in (0, 1) for offset, step, width in HALF_Q4K_BOXES)
        for start in (0, 16)
    ]
    assert half == [8, 6] and [sectors(start, 144) for start in (0, 16)] == [5, 5]


def test_dense_x_box_is_one_swizzle_atom_of_the_token_tile():
    """X as [tokens][K] fp16: a box of 64 fp16 (128 bytes, the swizzle's span) x BN tokens, with the 128-byte swizzle
    (zb_wgmma_x_offset's k atoms); two boxes fill a stage's X half (BN x 256 bytes)."""
    tile = MmaTile.parse("wgmma+sk+tma:1,16,8,1,4")
    specs = tma_map_specs(tile, "q6_k_r", 5376, 21504, 1, x_rows=512)
    x = specs[TMA_X_MAP]
    assert x.dims == (21504, 512) and x.strides == (2 * 21504,) and x.box == (64, tile.bn) and x.swizzle == 128
    assert 2 * x.box_bytes == tile.bn * 256


def test_formats_without_aligned_blocks_have_no_boxes():
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        tma_map_specs(MmaTile.parse("wgmma+tma:1,16,8,1,3"), "q6_k", 5376, 21504, 1, x_rows=512)


def test_tma_needs_the_wgmma_path():
    with pytest.raises(ValueError, match="needs wgmma"):
        MmaTile.parse("tma:1,8,8,1,3")
    tile = MmaTile.parse("wgmma+sk+tma:1,16,8,1,4")
    assert tile.label.endswith("/tma")
    assert tile.expression(False, "q6_k_r").endswith(",true,true,false,3>")  # dense: weights and X
    grouped = MmaTile.parse("wgmma+tma:1,8,8,1,4,2,1")
    assert grouped.expression(True, "q4_k").endswith(",true,false,false,1>")  # grouped: the weights
