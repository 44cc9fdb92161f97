"""The fused kernel's Q6_K loaders (kernels/kquant_fused_mma.cu, ZbQ6KFormat::Loader) modelled on the CPU: every global
load window of every thread lies inside the weights, the copies still deliver every byte of every block, and the
lanes' shared-memory reads of the stage are free of bank conflicts wherever the rows' misalignments allow it.

compute-sanitizer found the bug this guards against on the GPU (issue 23): the tail chunk of a row's last
superblock was a 16-byte cp.async from an aligned address with src-size o + 2, whose window passes the end of
the weights by 14 - o bytes after the last block of row M - 1. The model mirrors the kernel's address
arithmetic (its constants are read from the source) and runs the sanitizer driver's edge shapes."""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
import pytest

from zincbench.gpu.runtime import kernel_source
from zincbench.ops.fused import POLICIES, WGMMA_POLICIES, MmaTile
from zincbench.testing.sanitize_driver import FUSED_DENSE_SHAPES, FUSED_GROUPED_SHAPES, gate_tiles


def _q6k_chunks() -> tuple[int, int, int]:
    """(BLOCK_BYTES, chunks per row of a whole-superblock stage, of a half-superblock stage), from the source."""
    source = kernel_source("kquant_fused_mma.cu")
    body = source[source.index("struct ZbQ6KFormat : ZbQ6KDecode {") :]
    block = int(re.search(r"BLOCK_BYTES = (\d+);", body).group(1))
    half, whole = (int(v) for v in re.search(r"CHUNKS_PER_ROW = HALF_STAGE \? (\d+) : (\d+);", body).groups())
    return block, whole, half


BLOCK_BYTES, WHOLE_CHUNKS, HALF_CHUNKS = _q6k_chunks()


def chunk_window(half_stage: bool, q: int, h: int) -> int:
    """ZbQ6KFormat::chunk_offset(q) + h * chunk_half_step(q): where chunk q of half h starts, from the block's
    aligned start (a whole-superblock stage has h = 0 and its chunks in a row)."""
    if not half_stage:
        return 16 * q
    if q < 5:
        return 16 * q + 64 * h  # the half's 64 ql bytes
    if q < 8:
        return 128 + 16 * (q - 5) + 32 * h  # its 32 qh bytes
    return 192 + 16 * (q - 8)  # the 16 scales and d, in both halves


def _exact_windows(start: int, n: int) -> list[tuple[int, int]]:
    """zb_copy_exact: an 8-byte and a 4-byte cp.async of exact size, then a 2-byte load (n even, 2..14)."""
    windows, off = [], 0
    for size in (8, 4, 2):
        if n & size:
            windows.append((start + off, size))
            off += size
    return windows


def q6k_loads(tile: MmaTile, m: int, k: int, experts: int, base: int = 0, exact_tail: bool = True):
    """(window start, window bytes, copied bytes) of every global load the Q6_K loader issues over the K loop
    for weights [experts][m][row bytes] at byte offset ``base`` of a 16-byte aligned allocation (dense:
    experts = 1), and the byte ranges of the blocks it must deliver. A wgmma tile stages half superblocks
    (ZbQ6KHalf), a portable one whole ones (ZbQ6K). ``exact_tail=False`` models the kernel before the fix
    (every chunk a 16-byte window)."""
    bm, threads = tile.bm, tile.threads
    half_stage = tile.wgmma
    per_row = HALF_CHUNKS if half_stage else WHOLE_CHUNKS
    chunks = bm * per_row
    iters = (chunks + threads - 1) // threads
    n_sb = k // 256
    row_bytes = n_sb * BLOCK_BYTES
    loads, blocks = [], set()
    for expert in range(experts):
        w = base + expert * m * row_bytes
        for row0 in range(0, m, bm):  # blockIdx.x (a dense STORE / grouped down tile: split = BM)
            for tid in range(threads):
                for it in range(iters):
                    idx = min(tid + it * threads, chunks - 1)  # surplus threads repeat the last chunk
                    r, q = divmod(idx, per_row)
                    row = min(row0 + r, m - 1)
                    tail = q == per_row - 1
                    end_tail = tail and row0 + r >= m - 1
                    for step in range(2 * n_sb if half_stage else n_sb):
                        sb, h = divmod(step, 2) if half_stage else (step, 0)
                        block = w + row * row_bytes + sb * BLOCK_BYTES
                        o, aligned = block & 15, (block & ~15) + chunk_window(half_stage, q, h)
                        blocks.add(block)
                        if exact_tail and end_tail and sb == n_sb - 1 and o != 14:
                            loads += [(s, n, n) for s, n in _exact_windows(aligned, o + 2)]
                        else:
                            loads.append((aligned, 16, o + 2 if tail else 16))
    return loads, sorted(blocks)


def _edge_cases():
    tiles = {tile.label: tile for tile in [*gate_tiles("t1"), *gate_tiles("t2", "t2_moe_down")]}
    cases = [(tile, m, k, 1) for tile in gate_tiles("t1") for m, k, _ in FUSED_DENSE_SHAPES]
    cases += [(tile, m, k, e) for tile in gate_tiles("t2", "t2_moe_down") for e, m, k in FUSED_GROUPED_SHAPES]
    cases += [(tile, m, 768, 1) for tile in tiles.values() for m in (1, 2, 3, 17)]  # one block, few rows
    return cases


def test_the_model_reads_the_kernel_constants():
    assert (BLOCK_BYTES, WHOLE_CHUNKS, HALF_CHUNKS) == (210, 14, 10)
    assert POLICIES["q6_k"].row_stage_bytes == 16 * (WHOLE_CHUNKS + 1)  # the copied chunks and a spare one
    assert WGMMA_POLICIES["q6_k"].row_stage_bytes == 16 * (HALF_CHUNKS + 1)
    assert 14 + BLOCK_BYTES <= 16 * WHOLE_CHUNKS  # the chunks cover a block at any even misalignment


@pytest.mark.parametrize("tile, m, k, experts", _edge_cases(), ids=lambda v: getattr(v, "label", str(v)))
def test_every_q6k_load_stays_inside_the_weights(tile, m, k, experts):
    loads, blocks = q6k_loads(tile, m, k, experts)
    end = experts * m * (k // 256) * BLOCK_BYTES
    outside = [(s, n) for s, n, _ in loads if s < 0 or s + n > end]
    assert not outside, f"{len(outside)} loads pass the weights' {end} bytes, e.g. {outside[:3]}"
    # ... and they still deliver every byte of every block (the bytes a copy reads, not its zero-fill).
    copied = set()
    for s, _, n in loads:
        copied.update(range(s, s + n))
    missing = [b for b in blocks if not copied.issuperset(range(b, b + BLOCK_BYTES))]
    assert not missing, f"blocks at {missing[:3]} not fully copied"


@pytest.mark.parametrize("o", range(0, 16, 2))
def test_a_half_superblock_stage_holds_its_bytes_where_the_lanes_read_them(o):
    """ZbQ6KHalf: in half h, stage byte o + i of the ql region is ql[64h + i], of the qh region (at 80) qh[32h + i],
    and of the scales region (at 128) scales[i], with d 16 bytes further: what ZbQ6KFormat::load reads."""
    block = bytes(range(BLOCK_BYTES))
    memory = bytes(o) + block + bytes(32)  # the block at misalignment o of a 16-byte aligned address
    for h in (0, 1):
        stage = b"".join(memory[chunk_window(True, q, h) : chunk_window(True, q, h) + 16] for q in range(HALF_CHUNKS))
        assert stage[o : o + 64] == block[64 * h : 64 * h + 64]
        assert stage[80 + o : 80 + o + 32] == block[128 + 32 * h : 160 + 32 * h]
        assert stage[128 + o : 128 + o + 18] == block[192:210]


def test_the_model_finds_the_sanitizer_report():
    """Before the fix: <ZbQ6K,2,8,4,1,3,...> at M = 197, K = 256 read 16 bytes past a 41,370-byte allocation."""
    tile = MmaTile(2, 8, 4, 1, 3)
    loads, _ = q6k_loads(tile, 197, 256, 1, exact_tail=False)
    end = 197 * BLOCK_BYTES
    assert end == 41_370
    assert any(s + n > end for s, n, _ in loads)
    fixed, _ = q6k_loads(tile, 197, 256, 1)
    assert all(s + n <= end for s, n, _ in fixed)


def row_stride(half_stage: bool, row_bytes: int) -> int:
    """ZbQ6KFormat::row_stride: the copied chunks where consecutive rows start 2 mod 4 bytes apart, else one more."""
    chunks = HALF_CHUNKS if half_stage else WHOLE_CHUNKS
    return 16 * chunks if row_bytes & 2 else 16 * (chunks + 1)


def lane_load_wavefronts(half_stage: bool, n_sb: int, stride: int) -> list[int]:
    """Shared-memory wavefronts of each 32-bit load a warp issues in ZbQ6KFormat::load (its three 16-byte reads, five
    aligned words each, at ql, ql + 32 and qh of half h, in both of a lane's rows r and r + 8), over a superblock's
    halves and the misalignments the rows' starts take: lanes (g, c) read row g (+ 8) at column 16 (c & 1)."""
    row_bytes = n_sb * BLOCK_BYTES
    ql_step, qh_at, qh_step = (0, 80, 0) if half_stage else (64, 128, 32)
    counts = []
    for sb in range(min(n_sb, 8)):  # 210 sb mod 16 repeats every 8 superblocks
        for h in (0, 1):
            for region in (ql_step * h, ql_step * h + 32, qh_at + qh_step * h):
                for rr in (0, 8):
                    for word in range(5):
                        banks = defaultdict(set)
                        for g in range(8):
                            r = g + rr
                            o = (r * row_bytes + sb * BLOCK_BYTES) & 15
                            for column in (0, 16):
                                address = ((r * stride + o + region + column) & ~3) + 4 * word
                                banks[address // 4 % 32].add(address)
                        counts.append(max(len(a) for a in banks.values()))
    return counts


@pytest.mark.parametrize("half_stage", [True, False], ids=["ZbQ6KHalf", "ZbQ6K"])
@pytest.mark.parametrize("n_sb", range(1, 17))
def test_the_lanes_stage_reads_hit_16_banks_where_the_misalignments_allow(half_stage, n_sb):
    """One wavefront per load with the kernel's stride, unless every row has the same misalignment (row bytes a
    multiple of 16: then no stride of whole chunks avoids two ways). The copied chunks alone as the stride cost two
    ways where consecutive rows start 0 mod 4 bytes apart (gemma4-31b's ffn_down, K 21504: 84 superblocks)."""
    row_bytes = n_sb * BLOCK_BYTES
    got = lane_load_wavefronts(half_stage, n_sb, row_stride(half_stage, row_bytes))
    assert max(got) == (2 if row_bytes % 16 == 0 else 1)
    chunks = HALF_CHUNKS if half_stage else WHOLE_CHUNKS
    if row_bytes % 4 == 0 and row_bytes % 16:
        assert max(lane_load_wavefronts(half_stage, n_sb, 16 * chunks)) == 2


def test_the_model_reads_the_kernel_stride_rule():
    body = kernel_source("kquant_fused_mma.cu")
    assert "return (row_bytes & 2) ? ROW_STAGE_BYTES - 16 : ROW_STAGE_BYTES;" in body
    assert "static constexpr int ROW_STAGE_BYTES = 16 * (CHUNKS_PER_ROW + 1);" in body
    assert row_stride(True, 84 * BLOCK_BYTES) == WGMMA_POLICIES["q6_k"].row_stage_bytes


def _repacked_constants() -> tuple[int, int, int]:
    """ZbQ6KR's (BLOCK_BYTES, CHUNKS_PER_ROW, ROW_STAGE_BYTES), from the source."""
    source = kernel_source("kquant_fused_mma.cu")
    body = source[source.index("struct ZbQ6KR : ZbQ6KDecode {") :]
    block, chunks = (int(re.search(rf"{name} = (\d+);", body).group(1)) for name in ("BLOCK_BYTES", "CHUNKS_PER_ROW"))
    assert "static constexpr int ROW_STAGE_BYTES = 16 * CHUNKS_PER_ROW;" in body
    return block, chunks, 16 * chunks


def repacked_stage(block: bytes, h: int, chunks: int) -> bytes:
    """ZbQ6KR::Loader: a row's stage area for half h of a repacked block, chunk q from 112h + 16q (the half's bytes
    in order), through ZbRowChunks (chunk q of row r from the row's byte offset + 16q to stage byte 16 (r *
    CHUNKS_PER_ROW + q)); ZbQ6KR::tma_box: the same 112 bytes as one box."""
    source = kernel_source("kquant_fused_mma.cu")
    copier = source[source.index("struct ZbRowChunks {") :]
    assert "src[it] = rows.at(r) + 16 * q;" in copier and "dst[it] = (r * CHUNKS_PER_ROW + q) * 16;" in copier
    body = source[source.index("struct ZbQ6KR : ZbQ6KDecode {") :]
    assert "ZbRowChunks<BM, THREADS, CHUNKS_PER_ROW> chunks;" in body
    assert "chunks.issue(ws, (step >> 1) * BLOCK_BYTES + (step & 1) * ROW_STAGE_BYTES);" in body
    assert "ZbTmaBox{0, ROW_STAGE_BYTES, ROW_STAGE_BYTES, 0}" in body
    return b"".join(block[112 * h + 16 * q : 112 * h + 16 * q + 16] for q in range(chunks))


def test_repacked_stage_holds_what_each_lane_reads():
    """ZbQ6KR::load reads ql_lo, ql_hi and qh of half h at stage bytes l0, 32 + l0 and 64 + l0 (l0 = 16 (c & 1)) and
    its scale word at 96 + 4c: the GGUF block's ql[64h + l0 ..], ql[64h + 32 + l0 ..], qh[32h + l0 ..] and the scale
    word c of half h, where the repack (zincbench.quant.q6k_r) and the loader put them. Every copy is a whole, aligned
    16-byte chunk of the block."""
    from zincbench.quant import q6k, q6k_r

    block_bytes, chunks, row_stage = _repacked_constants()
    assert (block_bytes, row_stage) == (224, POLICIES["q6_k_r"].row_stage_bytes) == (224, 112)
    assert POLICIES["q6_k_r"].tma_widths == (row_stage,)
    gguf = np.random.default_rng(5).integers(0, 256, 210, dtype=np.uint8)
    gguf[208:210] = np.frombuffer(np.float16(0.5).tobytes(), dtype=np.uint8)  # d: a finite scale
    block = q6k_r.repack(gguf[None, :])[0].tobytes()
    for h in (0, 1):
        stage = repacked_stage(block, h, chunks)
        assert len(stage) == row_stage
        for c in range(4):
            l0 = 16 * (c & 1)
            assert stage[l0 : l0 + 16] == gguf[64 * h + l0 :][:16].tobytes()
            assert stage[32 + l0 : 48 + l0] == gguf[64 * h + 32 + l0 :][:16].tobytes()
            assert stage[64 + l0 : 80 + l0] == gguf[128 + 32 * h + l0 :][:16].tobytes()
            word = np.frombuffer(stage[96 + 4 * c : 100 + 4 * c], dtype="<f2")
            subs = [8 * h + 4 * (c >> 1) + (c & 1) + 2 * j for j in (0, 1)]
            assert np.array_equal(word, q6k.sub_block_scales(gguf[None, :])[0, subs].astype(np.float16))


def test_repacked_rows_spread_a_warps_reads_over_the_banks():
    """Rows 112 bytes apart (7 chunks, odd): the 8 rows x 2 columns of a warp's 16-byte loads cover each 16-byte bank
    group exactly twice (two wavefronts, the fewest for 256 distinct bytes), and its scale words hit 32 banks."""
    _, _, stride = _repacked_constants()
    for region in (0, 32, 64):
        units = [((g * stride + region + column) // 16) % 8 for g in range(8) for column in (0, 16)]
        assert sorted(units) == sorted(list(range(8)) * 2)
    banks = {(g * stride + 96 + 4 * c) // 4 % 32 for g in range(8) for c in range(4)}
    assert len(banks) == 32
