"""The kernels' launch driver (zincbench.testing.sanitize_driver) on the CPU: its routing tables and its
command line; its launches run under ``pytest -m sanitizer`` and ncu on a GPU host."""

import numpy as np
import pytest

from zincbench.testing.sanitize_driver import GATE_SHAPES, main, routing_table


@pytest.mark.parametrize("stride, skip_last", [(None, 0), (6, 0), (3, 2)])
def test_routing_table_routes_top_k_distinct_experts_among_those_allowed(rng, stride, skip_last):
    t, top_k, n_experts = 17, 3, 9
    table = routing_table(rng, t, top_k, n_experts, stride, skip_last)
    assert table.shape == (t, stride or top_k) and table.dtype == np.uint32
    routed = table[:, :top_k]
    assert (routed < n_experts - skip_last).all()
    assert all(len(set(row)) == top_k for row in routed.tolist())


def test_a_group_without_gate_shapes_is_refused_with_exit_2(capsys):
    assert "routing" not in GATE_SHAPES
    with pytest.raises(SystemExit) as exc:
        main(["routing", "--shapes", "gate"])
    assert exc.value.code == 2
    assert "group routing has no gate shapes (those that have: fused)" in capsys.readouterr().err
