"""The wgmma path's stage ring (ZbRing in kernels/kquant_fused_mma.cu), modelled on the CPU.

Each thread runs the kernel's sequence (zb_gemm_unit, WGMMA branch) against a model of mbarrier phases and of
cp.asyncs that land at any later time; the threads are interleaved at random. The model checks what the block
barrier per stage used to guarantee:
- no thread reads a stage buffer before every thread's copies of that stage have landed in it;
- no copy lands in a buffer that a thread still reads for an earlier stage (through a wgmma not yet retired or a
  decode);
- the block never deadlocks, also across the units of a stream-K block, whose ring state carries over, and across
  an ALL_ROWS block's row blocks, whose next unit's first stages fill the buffers the unit frees;
- a thread never arrives twice on a barrier without waiting on it in between (compute-sanitizer synccheck reports
  that as a missing wait: the first version arrived on a full barrier twice, once for its copies, once plainly).
The TMA tiles run the same sequence: thread 0 also copies the stage's weights as TMA boxes (`weights`), whose bytes
the full barrier expects (expect_tx before thread 0's own arrival), or the whole stage (`all`: the full barrier's one
arrival is thread 0's, with the bytes, and no other thread copies).
With a producer warpgroup (PRODUCER) the copiers are its threads alone, the first of them the TMA leader: they fill
every stage in order and never read; the MMA threads never copy. Each role then arrives on one barrier and waits on
the other, so the check becomes: never two arrivals of a thread in one phase of a barrier.
A persistent block (PERSIST) runs several token tiles: the producer writes each tile's tables into one of two table
buffers (a two-buffer ring of its own) before its stages, the MMA threads read them until the tile's last epilogue and
then release the buffer. The model checks that no table buffer is overwritten while a thread reads it, that every
producer thread's part of a tile's tables is written before any producer copies with them, and that the end marker
stops every thread.
"""

import random
import re
from pathlib import Path

import pytest

KERNEL = Path(__file__).resolve().parents[1] / "kernels" / "kquant_fused_mma.cu"


class Barrier:
    """An mbarrier: a phase completes when its pending arrivals and its expected transaction bytes reach zero."""

    def __init__(self, expected: int):
        self.expected = expected
        self.pending = expected
        self.tx = 0  # transaction units expected and not yet landed in the current phase
        self.completed = 0  # phases completed so far

    def _complete(self):
        if self.pending == 0 and self.tx == 0:
            self.completed += 1
            self.pending = self.expected

    def arrive(self):
        self.pending -= 1
        assert self.pending >= 0
        self._complete()

    def expect_tx(self, units: int):
        self.tx += units

    def complete_tx(self, units: int):
        self.tx -= units
        assert self.tx >= 0, "a copy completed bytes its phase did not expect"
        self._complete()

    def done(self, parity: int) -> bool:  # mbarrier.try_wait.parity: the phase of that parity has completed
        return (self.completed & 1) != parity


class Cursor:
    def __init__(self, stages: int):
        self.stages, self.index, self.phase = stages, 0, 0

    def next(self):
        self.index += 1
        if self.index == self.stages:
            self.index, self.phase = 0, self.phase ^ 1


class Block:
    """Shared state: barriers, what each buffer holds, who reads what, copies in flight."""

    def __init__(self, stages: int, threads: int, tma: str | None = None, producers: int = 0):
        self.stages, self.threads, self.tma, self.producers = stages, threads, tma, producers
        copy_threads = range(threads, threads + producers) if producers else range(threads)
        self.leader = copy_threads[0]  # the thread that issues the TMA boxes
        self.full = [Barrier(1 if tma == "all" else len(copy_threads)) for _ in range(stages)]
        # who copies into a stage: the copy threads (cp.async) and the leader's TMA boxes ("tma")
        self.copiers = ({"tma"} if tma else set()) | (set(copy_threads) if tma != "all" else set())
        self.empty = [Barrier(threads) for _ in range(stages)]
        self.landed = [dict() for _ in range(stages)]  # buffer -> {thread: stage its copy holds}
        self.reads = [dict() for _ in range(threads)]  # thread -> {token: (buffer, stage)} being read
        self.in_flight = []  # copies: (thread, buffer, stage)
        self.tracked = []  # cp.async arrives: (thread, barrier, copies of the thread still in flight then)
        # PERSIST's two table buffers: their ring's barriers, each producer's part (the tile it holds), their readers
        self.tables_full = [Barrier(producers) for _ in range(2)]
        self.tables_empty = [Barrier(threads) for _ in range(2)]
        self.tables = [dict() for _ in range(2)]
        self.table_readers = [set() for _ in range(2)]
        self.producer_barrier = [0, 0]  # the producers' named barrier: (arrived, generation)

    def land(self, copy):
        thread, buffer, stage = copy
        self.in_flight.remove(copy)
        for reader, reads in enumerate(self.reads):
            for held_buffer, held_stage in reads.values():
                assert not (held_buffer == buffer and held_stage != stage), (
                    f"thread {thread}'s copy of stage {stage} landed in buffer {buffer} while thread {reader} "
                    f"still reads stage {held_stage} there"
                )
        self.landed[buffer][thread] = stage
        if thread == "tma":  # complete_tx: the boxes' bytes count on the buffer's full barrier
            self.full[buffer].complete_tx(1)

    def fire_tracked(self):
        for entry in list(self.tracked):
            thread, barrier, copies = entry
            if not any(c in self.in_flight for c in copies):
                self.tracked.remove(entry)
                barrier.arrive()


class Thread:
    """One thread's program: the kernel's wgmma branch, unit after unit, with its own ring cursors."""

    def __init__(self, block: Block, tid: int):
        self.block, self.tid = block, tid
        self.write, self.read, self.free = (Cursor(block.stages) for _ in range(3))
        self.wgmmas = []  # reads of issued, unretired wgmma groups (tokens)
        self.next_token = 0
        self.unwaited = set()  # barriers this thread arrived on and has not waited on since

    def arrive_once(self, barrier: Barrier):
        if self.block.producers:  # each role arrives on one barrier and waits on the other: one arrival a phase
            phase = (id(barrier), barrier.completed)
            assert phase not in self.unwaited, f"thread {self.tid} arrives twice in one phase of a barrier"
            self.unwaited.add(phase)
            return
        # synccheck's rule: a thread waits on a barrier between two arrivals on it ("Missing wait" otherwise)
        assert id(barrier) not in self.unwaited, f"thread {self.tid} arrives twice on a barrier without a wait"
        self.unwaited.add(id(barrier))

    def wait(self, barrier: Barrier, parity: int):
        while not barrier.done(parity):
            yield
        self.unwaited.discard(id(barrier))

    def start_read(self, buffer: int, stage: int) -> int:
        holders = self.block.landed[buffer]
        assert set(holders) == self.block.copiers and set(holders.values()) == {stage}, (
            f"thread {self.tid} reads stage {stage} in buffer {buffer}, which holds {holders}"
        )
        self.next_token += 1
        self.block.reads[self.tid][self.next_token] = (buffer, stage)
        return self.next_token

    def end_read(self, token: int):
        del self.block.reads[self.tid][token]

    def produce(self, stage: int):  # ring.acquire(); thread 0's boxes; the thread's cp.asyncs; ring.commit()
        b = self.block
        yield from self.wait(b.empty[self.write.index], self.write.phase ^ 1)
        full = b.full[self.write.index]
        if b.tma and self.tid == b.leader:
            full.expect_tx(1)  # before any arrival of thread 0 in the phase: it cannot complete without the bytes
            if b.tma == "all":  # mbarrier.arrive.expect_tx: the phase's one arrival
                self.arrive_once(full)
                full.arrive()
            b.in_flight.append(("tma", self.write.index, stage))
        if b.tma != "all":
            copy = (self.tid, self.write.index, stage)
            b.in_flight.append(copy)
            mine = [c for c in b.in_flight if c[0] == self.tid]
            # cp.async.mbarrier.arrive.noinc: the thread's one arrival of the phase, made when its copies have landed
            self.arrive_once(full)
            b.tracked.append((self.tid, full, mine))
        self.write.next()
        yield

    def wait_read(self):
        yield from self.wait(self.block.full[self.read.index], self.read.phase)

    def release(self):
        self.arrive_once(self.block.empty[self.free.index])
        self.block.empty[self.free.index].arrive()
        self.free.next()
        yield

    def wgmma_wait(self, keep: int):
        while len(self.wgmmas) > keep:
            self.end_read(self.wgmmas.pop(0))
        yield

    def unit(
        self, u: int, n_steps: int, pieces_per_stage: int, eager: bool, prefetched: int = 0, chained: bool = False
    ):
        """The kernel's unit u (stages labelled (u, s)): all STAGES buffers filled, less the `prefetched` the unit
        before filled; after the wgmma wait retires the last piece of stage v, release v, decode, then fill its buffer
        with stage v + STAGES or, past the unit's stages, when `chained` (ALL_ROWS), with the next unit's next stage.
        Returns how many of the next unit's stages it filled. eager (a mutant) releases a stage as soon as its last
        piece is issued, before that piece's wgmmas retire."""
        stages, per = self.block.stages, pieces_per_stage
        n_pieces = n_steps * per
        next_stages = 0

        produces = not self.block.producers  # with a producer warpgroup the MMA threads never copy

        def produce_next():  # the next unit has this unit's steps (ALL_ROWS: every row block covers the whole K)
            nonlocal next_stages
            if produces and chained and next_stages < min(stages, n_steps):
                yield from self.produce((u + 1, next_stages))
                next_stages += 1

        for s in range(stages):
            if produces and prefetched <= s < n_steps:
                yield from self.produce((u, s))
        yield from self.wait_read()
        self.end_read(self.start_read(self.read.index, (u, 0)))  # zb_wgmma_load + decode of piece 0
        for t in range(n_pieces):
            self.wgmmas.append(self.start_read(self.read.index, (u, t // per)))  # piece t's wgmmas read the stage's X
            yield
            if eager:
                frees, freed = (t + 1) % per == 0, t // per
            else:
                yield from self.wgmma_wait(1)
                frees, freed = t % per == 0 and t > 0, t // per - 1
            if frees:
                yield from self.release()
            if eager:
                yield from self.wgmma_wait(1)
            if t + 1 >= n_pieces:
                if frees:
                    yield from produce_next()
                break
            if (t + 1) % per == 0:
                self.read.next()
                yield from self.wait_read()
            decode = self.start_read(self.read.index, (u, (t + 1) // per))
            yield
            self.end_read(decode)
            if produces and frees:
                if freed + stages < n_steps:
                    yield from self.produce((u, freed + stages))
                else:
                    yield from produce_next()
        yield from self.wgmma_wait(0)
        if not (eager and n_pieces % per == 0 and n_pieces > 0):  # the eager mutant released the last stage already
            yield from self.release()
        self.read.next()
        yield from produce_next()
        return next_stages

    def producer_program(self, units):
        """zb_produce_units: every stage of every unit in order, each once its buffer is released."""
        for u, n_steps in enumerate(units):
            for s in range(n_steps):
                yield from self.produce((u, s))

    def producer_sync(self):  # bar.sync 1, producers
        b = self.block
        generation = b.producer_barrier[1]
        b.producer_barrier[0] += 1
        if b.producer_barrier[0] == b.producers:
            b.producer_barrier[:] = [0, generation + 1]
        while b.producer_barrier[1] == generation:
            yield

    def holds_tables(self, buffer: int, tile: int) -> bool:
        parts = self.block.tables[buffer]
        return len(parts) == self.block.producers and set(parts.values()) == {tile}

    def persistent_producer(self, tiles, n_steps: int, synced: bool = True):
        """zb_produce_tiles: per tile, acquire a table buffer, write this thread's part, publish, sync with the other
        producers, then every stage of the tile's row blocks; past the last tile, the end marker. synced False (a
        mutant) skips the producers' barrier."""
        b, write, u = self.block, Cursor(2), 0
        for tile, row_blocks in enumerate([*tiles, None]):
            buffer = write.index
            yield from self.wait(b.tables_empty[buffer], write.phase ^ 1)
            assert not b.table_readers[buffer], f"tile {tile}'s tables overwrite a buffer a thread still reads"
            b.tables[buffer][self.tid] = tile
            yield
            self.arrive_once(b.tables_full[buffer])  # mbarrier.arrive: releases the part it wrote
            b.tables_full[buffer].arrive()
            write.next()
            if row_blocks is None:
                return
            if synced:
                yield from self.producer_sync()
            for _ in range(row_blocks):
                for s in range(n_steps):
                    assert self.holds_tables(buffer, tile), f"a producer copies tile {tile} before its tables are whole"
                    yield from self.produce((u, s))
                u += 1

    def persistent_program(self, tiles, n_steps: int, pieces_per_stage: int):
        """The MMA warps of a persistent block: per tile, wait for its tables, run its row blocks, release them."""
        b, read, free, u = self.block, Cursor(2), Cursor(2), 0
        for tile, row_blocks in enumerate([*tiles, None]):
            buffer = read.index
            yield from self.wait(b.tables_full[buffer], read.phase)
            assert self.holds_tables(buffer, tile), (
                f"thread {self.tid} reads tile {tile}'s tables before they are whole"
            )
            if row_blocks is None:  # the end marker
                return
            b.table_readers[buffer].add(self.tid)
            for _ in range(row_blocks):
                yield from self.unit(u, n_steps, pieces_per_stage, eager=False)
                u += 1
            b.table_readers[buffer].discard(self.tid)  # the last epilogue's reads of s_orow are done
            read.next()
            self.arrive_once(b.tables_empty[free.index])
            b.tables_empty[free.index].arrive()
            free.next()
            yield

    def program(self, units, pieces_per_stage: int, eager: bool, chained: bool):
        prefetched = 0
        for u, n_steps in enumerate(units):
            last = u + 1 == len(units)
            prefetched = yield from self.unit(u, n_steps, pieces_per_stage, eager, prefetched, chained and not last)


def run_block(
    stages: int,
    threads: int,
    units,
    pieces_per_stage: int,
    seed: int,
    eager: bool = False,
    tma: str | None = None,
    chained: bool = False,
    producers: int = 0,
    tiles=None,
    synced: bool = True,
):
    """tiles (PERSIST, with producers): the row blocks of each of the block's token tiles, each a unit of units[0]
    stages; synced False drops the producers' barrier (a mutant)."""
    rng = random.Random(seed)
    block = Block(stages, threads, tma, producers)
    if tiles is not None:
        programs = {
            tid: Thread(block, tid).persistent_program(tiles, units[0], pieces_per_stage) for tid in range(threads)
        }
        producer_tids = range(threads, threads + producers)
        programs.update({tid: Thread(block, tid).persistent_producer(tiles, units[0], synced) for tid in producer_tids})
    else:
        programs = {tid: Thread(block, tid).program(units, pieces_per_stage, eager, chained) for tid in range(threads)}
        producer_tids = range(threads, threads + producers)
        programs.update({tid: Thread(block, tid).producer_program(units) for tid in producer_tids})
    steps = 0
    while programs or block.in_flight:
        steps += 1
        assert steps < 200_000, "the block deadlocked"
        if block.in_flight and (not programs or rng.random() < 0.3):
            block.land(rng.choice(block.in_flight))
        elif programs:
            tid = rng.choice(list(programs))
            try:
                next(programs[tid])
            except StopIteration:
                del programs[tid]
        block.fire_tracked()
    block.fire_tracked()
    assert not block.tracked
    for barrier in block.full + block.empty + block.tables_full + block.tables_empty:  # every opened phase completed
        assert barrier.pending == barrier.expected and barrier.tx == 0


@pytest.mark.parametrize("stages", [3, 4])
@pytest.mark.parametrize("pieces_per_stage", [1, 2, 4])  # PIECES * HALVES: a half or a whole superblock per stage
@pytest.mark.parametrize(
    "units",
    [[1], [2], [3], [16], [5, 3], [1, 7], [2, 2, 2]],  # a whole tile, and a stream-K block's partial ranges
)
@pytest.mark.parametrize("tma", [None, "weights", "all"])
def test_the_ring_keeps_every_read_and_write_apart(stages, pieces_per_stage, units, tma):
    for seed in range(12):
        run_block(stages, threads=3, units=units, pieces_per_stage=pieces_per_stage, seed=seed, tma=tma)


@pytest.mark.parametrize("stages", [3, 4])
@pytest.mark.parametrize("pieces_per_stage", [1, 2, 4])
@pytest.mark.parametrize("units", [[1, 1], [2, 2, 2], [3, 3], [16, 16]])  # an ALL_ROWS block's row blocks: one K
def test_the_ring_keeps_every_read_and_write_apart_across_row_blocks(stages, pieces_per_stage, units):
    """ALL_ROWS (TMA weights): the buffers a row block frees take the next row block's first stages."""
    for seed in range(12):
        run_block(stages, 3, units, pieces_per_stage, seed, tma="weights", chained=True)


@pytest.mark.parametrize("stages", [3, 4])
@pytest.mark.parametrize("pieces_per_stage", [1, 2, 4])
@pytest.mark.parametrize("units", [[1], [3], [16], [2, 2, 2], [16, 16]])
def test_a_producer_warpgroup_keeps_every_read_and_write_apart(stages, pieces_per_stage, units):
    """PRODUCER (TMA weights, X by the producer's threads): the MMA threads only wait, read and release."""
    for seed in range(12):
        run_block(stages, 3, units, pieces_per_stage, seed, tma="weights", producers=2)


@pytest.mark.parametrize("stages", [3, 4])
@pytest.mark.parametrize("pieces_per_stage", [1, 2, 4])
@pytest.mark.parametrize(
    "tiles,n_steps", [([1], 3), ([2, 2, 2], 2), ([1, 1, 1, 1, 1], 1), ([3, 3, 3], 4), ([2, 2], 16)]
)
def test_a_persistent_block_keeps_its_tables_and_stages_apart(stages, pieces_per_stage, tiles, n_steps):
    """PERSIST: token tiles in turn, their tables through a two-buffer ring, their stages through the stage ring."""
    for seed in range(12):
        run_block(stages, 3, [n_steps], pieces_per_stage, seed, tma="weights", producers=2, tiles=tiles)


def test_the_model_catches_tables_copied_before_every_producer_wrote_them():
    caught = 0
    for seed in range(40):
        try:
            run_block(3, 3, [2], 2, seed, tma="weights", producers=3, tiles=[1, 1, 1], synced=False)
        except AssertionError as error:
            assert "before its tables are whole" in str(error)
            caught += 1
    assert caught > 0


def test_the_model_follows_the_kernels_persistent_block():
    """The kernel's table ring: the producer acquires, writes, publishes, syncs, then fills; the MMA warps wait, read,
    run the tile's row blocks, then release; the two barriers count the producers and the MMA threads."""
    source = KERNEL.read_text()
    assert "if (threadIdx.x == 0) tables.init(ZB_PRODUCER_THREADS, Tile::THREADS);" in source
    producer = source[source.index("__device__ __forceinline__ void zb_produce_tiles(") :]
    producer = producer[: producer.index("\n}\n")]
    order = ["tables.acquire();", "zb_token_tile<", "s_tt[buf] = tt;", "tables.publish();", "if (!used) break;"]
    order += ["zb_producer_sync();", "zb_produce_stage<"]
    places = [producer.index(text) for text in order]
    assert places == sorted(places)
    mma = source[source.index("zb_setmaxnreg_mma();\n        for (int tile_n") :]
    order = ["tables.template wait_read<false>();", "if (tt.n_tokens < 0) return;", "run_unit(", "tables.read.next();"]
    order += ["tables.release();"]
    places = [mma.index(text) for text in order]
    assert places == sorted(places)


def test_the_model_catches_a_release_before_the_wgmma_wait_with_a_producer():
    caught = 0
    for seed in range(40):
        try:
            run_block(3, threads=3, units=[6], pieces_per_stage=2, seed=seed, eager=True, tma="weights", producers=2)
        except AssertionError as error:
            assert "still reads" in str(error)
            caught += 1
    assert caught > 0


def test_the_model_follows_the_kernels_producer():
    """zb_produce_units fills the units' stages in order through zb_produce_stage, the MMA threads' copies are off,
    and the full barrier counts the producer's threads."""
    source = KERNEL.read_text()
    assert "ring.init((TMA & ZB_TMA_X) ? 1 : PRODUCER ? ZB_PRODUCER_THREADS : Tile::THREADS, Tile::THREADS);" in source
    body = source[source.index("__device__ __forceinline__ void zb_produce_units(") :]
    body = body[: body.index("\n}\n")]
    assert "for (int u = 0; u < units; ++u)\n        for (int step = 0; step < n_steps; ++step)" in body
    for call in ("if (!PRODUCER && s >= prefetched && s < n_steps) produce(s);", "if (!PRODUCER && frees) {"):
        assert call in source


def test_the_model_catches_a_next_unit_stage_filled_too_early(monkeypatch):
    """A next-unit stage produced before the wgmma wait retires the buffer's last reads must be caught."""
    caught = 0
    for seed in range(40):
        try:
            run_block(
                3, threads=3, units=[4, 4], pieces_per_stage=2, seed=seed, eager=True, tma="weights", chained=True
            )
        except AssertionError as error:
            assert "still reads" in str(error)
            caught += 1
    assert caught > 0


@pytest.mark.parametrize("tma", ["weights", "all"])
def test_the_model_catches_a_phase_that_does_not_wait_for_the_boxes(tma, monkeypatch):
    """A full barrier that completes on its arrivals alone (no expect_tx) lets a reader in before thread 0's boxes
    land: the model must say so."""
    monkeypatch.setattr(Barrier, "expect_tx", lambda self, units: None)
    monkeypatch.setattr(Barrier, "complete_tx", lambda self, units: None)
    caught = 0
    for seed in range(40):
        try:
            run_block(3, threads=3, units=[6], pieces_per_stage=1, seed=seed, tma=tma)
        except AssertionError as error:
            assert "reads stage" in str(error)
            caught += 1
    assert caught > 0


def test_the_model_follows_the_kernels_tma_protocol():
    """Thread 0's boxes: after every thread's wait for the buffer, expect_tx before its arrival (or its one arrival
    with the bytes), and one full-barrier arrival per phase when nothing else copies."""
    source = KERNEL.read_text()
    assert "ring.init((TMA & ZB_TMA_X) ? 1 : PRODUCER ? ZB_PRODUCER_THREADS : Tile::THREADS, Tile::THREADS);" in source
    produce = source[source.index("__device__ __forceinline__ void zb_produce_stage(") :]
    produce = produce[: produce.index("\n}\n")]
    order = [
        "ring.acquire();",
        "if (leader)",
        "zb_mbar_arrive_expect_tx(full, Tile::STAGE_BYTES)",
        "zb_mbar_expect_tx(full, Tile::W_BYTES)",
        "zb_tma_weights<Q, Tile::BM>",
        "zb_tma_x<Tile::BN>",
        "ring.write.next();",
        "x_copy.issue",
        "ring.commit();",
    ]
    places = [produce.index(text) for text in order]
    assert places == sorted(places)


@pytest.mark.parametrize("pieces_per_stage", [1, 2])
def test_the_model_catches_a_release_before_the_wgmma_wait(pieces_per_stage):
    """Releasing a stage when its last piece is issued, not when the wgmma wait has retired it, lets a refill land
    where that piece's wgmmas may still read: the model must say so, or it checks nothing."""
    caught = 0
    for seed in range(40):
        try:
            run_block(3, threads=3, units=[6], pieces_per_stage=pieces_per_stage, seed=seed, eager=True)
        except AssertionError as error:
            assert "still reads" in str(error)
            caught += 1
    assert caught > 0


def test_the_model_follows_the_kernel():
    """The model's parities, fill depth and order (wait, release, open, decode, then refill) are the kernel's."""
    source = KERNEL.read_text()
    assert "zb_mbar_wait(empty(write.index), write.phase ^ 1u)" in source
    assert "zb_mbar_wait(full(read.index), read.phase)" in source
    branch = source[source.index("auto produce = [&](int s) {") :]
    assert (
        "for (int s = 0; s < STAGES; ++s)\n            if (!PRODUCER && s >= prefetched && s < n_steps) produce(s);"
        in branch
    )
    assert "if (next_row0 >= 0 && next_stages < min(STAGES, n_steps)) produce_for(next_stages++, next_row0);" in branch
    advance = branch[branch.index("auto advance = [&](int t, int j") :]
    advance = advance[: advance.index("};")]
    pattern = (
        r"zb_wgmma_wait<1>|ring\.release\(\)|ring\.read\.next\(\)|ring\.template wait_read<!TMA_X>\(\)|zb_wgmma_decode"
        r"|produce\(refill\)|produce_next\(\)|return;"
    )
    assert [m.group(0) for m in re.finditer(pattern, advance)] == [
        "zb_wgmma_wait<1>",
        "ring.release()",
        "produce_next()",
        "return;",
        "ring.read.next()",
        "ring.template wait_read<!TMA_X>()",
        "zb_wgmma_decode",
        "produce(refill)",
        "produce_next()",
    ]
    assert "const bool frees = j % STAGE_PIECES == 0 && t > 0;" in advance
    assert "const int refill = t / STAGE_PIECES - 1 + STAGES;" in advance
    tail = branch[branch.index("zb_wgmma_wait<0>();") :]
    assert tail.index("ring.release();") < tail.index("ring.read.next();") < tail.index("produce_next();")
    assert tail.index("produce_next();") < tail.index("} else {")
