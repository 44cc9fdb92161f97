"""The fused kernel's Q6_K loader (kernels/kquant_fused_mma.cu, ZbQ6K::Loader) modelled on the CPU: every global
load window of every thread lies inside the weights, and the copies still deliver every byte of every block.

compute-sanitizer found the bug this guards against on the GPU (issue 23): the tail chunk of a row's last
superblock was a 16-byte cp.async from an aligned address with src-size o + 2, whose window passes the end of
the weights by 14 - o bytes after the last block of row M - 1. The model mirrors the kernel's address
arithmetic (its constants are read from the source) and runs the sanitizer driver's edge shapes."""

from __future__ import annotations

import re

import pytest

from zincbench.gpu.runtime import kernel_source
from zincbench.ops.fused import POLICIES, MmaTile
from zincbench.testing.sanitize_driver import FUSED_DENSE_SHAPES, FUSED_GROUPED_SHAPES, gate_tiles


def _q6k_constants() -> tuple[int, int]:
    source = kernel_source("kquant_fused_mma.cu")
    body = source[source.index("struct ZbQ6K {") :]
    block = int(re.search(r"BLOCK_BYTES = (\d+);", body).group(1))
    chunks = int(re.search(r"CHUNKS_PER_ROW = (\d+);", body).group(1))
    return block, chunks


BLOCK_BYTES, CHUNKS_PER_ROW = _q6k_constants()


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
    experts = 1), and the byte ranges of the blocks it must deliver. ``exact_tail=False`` models the kernel
    before the fix (every chunk a 16-byte window)."""
    bm, threads = tile.bm, tile.threads
    chunks = bm * CHUNKS_PER_ROW
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
                    r, q = divmod(idx, CHUNKS_PER_ROW)
                    row = min(row0 + r, m - 1)
                    tail = q == CHUNKS_PER_ROW - 1
                    end_tail = tail and row0 + r >= m - 1
                    for sb in range(n_sb):
                        p = w + row * row_bytes + 16 * q + sb * BLOCK_BYTES
                        o, aligned = p & 15, p & ~15
                        blocks.add(p - 16 * q)
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
    assert (BLOCK_BYTES, CHUNKS_PER_ROW) == (210, 14)
    assert POLICIES["q6_k"].row_stage_bytes == 16 * CHUNKS_PER_ROW
    assert 14 + BLOCK_BYTES <= 16 * CHUNKS_PER_ROW  # the chunks cover a block at any even misalignment


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


def test_the_model_finds_the_sanitizer_report():
    """Before the fix: <ZbQ6K,2,8,4,1,3,...> at M = 197, K = 256 read 16 bytes past a 41,370-byte allocation."""
    tile = MmaTile(2, 8, 4, 1, 3)
    loads, _ = q6k_loads(tile, 197, 256, 1, exact_tail=False)
    end = 197 * BLOCK_BYTES
    assert end == 41_370
    assert any(s + n > end for s, n, _ in loads)
    fixed, _ = q6k_loads(tile, 197, 256, 1)
    assert all(s + n <= end for s, n, _ in fixed)
