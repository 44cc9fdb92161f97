"""The one-launch routing build's split of items over route blocks (zincbench.ops.routing.route_partition and
one_launch_route_blocks), on the CPU: the kernel's wait for the scan is safe only with few route blocks, every item
must fall in exactly one block's chunk of whole batches, and up to single_block_items items one block runs the
single-block build instead (the kernel's route path ROUTE_PATH_SINGLE_BLOCK: n_route must then be 1). The names the
launcher, the kernel and the T2 experiment give the builds and route paths agree."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zincbench.errors import InputError
from zincbench.ops.routing import (
    MULTI_BLOCK_ITEMS,
    ONE_LAUNCH_MAX_ROUTE_BLOCKS,
    ONE_LAUNCH_SINGLE_BLOCK_ITEMS,
    ROUTE_PATHS,
    ROUTING_BUILDS,
    SOURCE,
    one_launch_route_blocks,
    route_partition,
)


@given(
    items=st.integers(1, 2**24),
    threads=st.sampled_from([256, 288, 512, 1024]),
    max_blocks=st.integers(1, 2 * ONE_LAUNCH_MAX_ROUTE_BLOCKS),
)
def test_chunks_of_whole_batches_cover_every_item_once_with_no_empty_block(items, threads, max_blocks):
    blocks, chunk = route_partition(items, threads, max_blocks)
    assert 1 <= blocks <= max_blocks
    assert chunk % (threads * MULTI_BLOCK_ITEMS) == 0
    assert (blocks - 1) * chunk < items <= blocks * chunk  # the kernel's [b * chunk, min((b + 1) * chunk, P))


def test_one_batch_per_block_until_the_cap_then_several():
    batch = 256 * MULTI_BLOCK_ITEMS
    assert route_partition(16384, 256, 32) == (16, batch)  # T2 at N_e 64: 16 blocks of one batch
    assert route_partition(1, 256, 32) == (1, batch)
    assert route_partition(100 * batch, 256, 32) == (25, 4 * batch)  # ceil(100 / 32) = 4 batches a block


@pytest.mark.parametrize("bad", [(0, 256, 4), (5, 0, 4), (5, 256, 0)])
def test_nothing_to_split_is_refused(bad):
    with pytest.raises(ValueError):
        route_partition(*bad)


@given(
    items=st.integers(1, 2**24),
    threads=st.sampled_from([256, 288, 512, 1024]),
    max_blocks=st.integers(1, 2 * ONE_LAUNCH_MAX_ROUTE_BLOCKS),
    single_block_items=st.one_of(
        st.just(0), st.just(ONE_LAUNCH_SINGLE_BLOCK_ITEMS), st.integers(0, 2**25), st.integers(0, 2**64)
    ),
)
def test_one_block_runs_the_single_block_build_exactly_up_to_the_threshold(
    items, threads, max_blocks, single_block_items
):
    blocks, chunk, single = one_launch_route_blocks(items, threads, max_blocks, single_block_items)
    assert single == (items <= single_block_items)
    if single:
        assert (blocks, chunk) == (1, items)  # every item in block 0's chunk; the kernel ignores chunk_len then
    else:
        assert (blocks, chunk) == route_partition(items, threads, max_blocks)


def test_the_default_threshold_is_inclusive_and_zero_means_never():
    batch = 256 * MULTI_BLOCK_ITEMS
    default = ONE_LAUNCH_SINGLE_BLOCK_ITEMS
    assert one_launch_route_blocks(default, 256, 32, default) == (1, default, True)
    assert one_launch_route_blocks(default + 1, 256, 32, default) == (*route_partition(default + 1, 256, 32), False)
    assert one_launch_route_blocks(16384, 256, 32, default) == (16, batch, False)  # T2 at N_e 64
    assert one_launch_route_blocks(1, 256, 32, 0) == (1, batch, False)  # 0: always the multi-block protocol


@pytest.mark.parametrize("bad", [-1, 1.5, 2048.0, "2048", None, True])
def test_a_threshold_that_is_not_a_non_negative_int_is_refused(bad):
    with pytest.raises(InputError, match="single_block_items must be a non-negative int"):
        one_launch_route_blocks(100, 256, 32, bad)


def test_a_numpy_integer_threshold_is_accepted():
    assert one_launch_route_blocks(100, 256, 32, np.int64(100)) == (1, 100, True)
    assert one_launch_route_blocks(101, 256, 32, np.uint32(100))[2] is False


def test_the_route_paths_are_the_kernels():
    """moe_route_permute's route_path values (ROUTE_PATH_* in the kernel) are the launcher's ROUTE_PATHS."""
    source = (Path(__file__).resolve().parent.parent / "kernels" / SOURCE).read_text()
    defined = {name.lower(): int(value) for name, value in re.findall(r"#define ROUTE_PATH_(\w+) (\d+)u", source)}
    assert defined == ROUTE_PATHS


def test_a_t2_experiment_names_every_routing_build():
    from zincbench.bench.t2_moe import T2Config

    assert typing.get_args(typing.get_type_hints(T2Config)["routing_build"]) == ROUTING_BUILDS
