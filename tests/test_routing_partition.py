"""The one-launch routing build's split of items over route blocks (zincbench.ops.routing.route_partition), on
the CPU: the kernel's wait for the scan is safe only with few route blocks, and every item must fall in exactly
one block's chunk of whole batches."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zincbench.ops.routing import MULTI_BLOCK_ITEMS, ONE_LAUNCH_MAX_ROUTE_BLOCKS, route_partition


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
