"""Time the two GPU routing builds side by side (cold L2) at the T2 shapes.

    python scripts/probe_routing.py

One line per (E, top_k, N_e): median µs of the single-block build and of the multi-block build
(zincbench.ops.routing), each on its own workspace with the same routing table. A tool for choosing
the default build; the gates time the whole path with `zincbench microbench`.
"""

from __future__ import annotations

import numpy as np

from zincbench.bench.t2_moe import route
from zincbench.judge import summarize
from zincbench.measure.stopping.count import FixedCountRule
from zincbench.measure.timer import GpuTimer, TimerConfig
from zincbench.ops.routing import ROUTING_BUILDS, RoutingWorkspace, build_routing

SHAPES = [(256, 8, n_e) for n_e in (8, 16, 32, 64)] + [(128, 8, 16), (128, 8, 64)]
TILE_N = 16
SAMPLES = 200


def main() -> None:
    import cupy

    rng = np.random.default_rng(0)
    timer = GpuTimer(TimerConfig(mode="cold"))
    print(f"{'E':>5} {'top_k':>5} {'N_e':>4} {'P':>6} " + " ".join(f"{b + ' us':>16}" for b in ROUTING_BUILDS))
    for e, top_k, n_e in SHAPES:
        t = n_e * e // top_k
        ids = cupy.asarray(route(rng, t, e, top_k, "uniform", 1.0))
        medians = []
        for build in ROUTING_BUILDS:
            ws = RoutingWorkspace(t, top_k, e, TILE_N, build=build)
            m = timer.measure(lambda: build_routing(ids, ws), name=f"routing/{build}", rule=FixedCountRule(SAMPLES))
            medians.append(summarize(m.gpu_us).median)
        print(f"{e:>5} {top_k:>5} {n_e:>4} {t * top_k:>6} " + " ".join(f"{v:>16.2f}" for v in medians), flush=True)


if __name__ == "__main__":
    main()
