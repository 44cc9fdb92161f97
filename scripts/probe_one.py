"""Launch the fused kernel once per configuration of interest (for ncu / compute-sanitizer runs).

    python scripts/probe_one.py
"""

from __future__ import annotations

import numpy as np

from zincbench.ops.fused import FusedKQuantGemm, MmaTile, permute_activations, permuted_activations
from zincbench.ops.routing import RoutingWorkspace, build_routing
from zincbench.quant import get_format

Q4K = get_format("q4_k")


def main():
    import cupy

    rng = np.random.default_rng(0)
    m = k = 4096
    t = 2048
    w = cupy.asarray(Q4K.random_blocks(rng, m, k))
    x = cupy.asarray(rng.standard_normal((t, k), dtype=np.float32))
    xp = permuted_activations(cupy, t, k)
    y = cupy.empty((t, m), dtype=cupy.float32)
    permute_activations(x, xp)
    FusedKQuantGemm(MmaTile.parse("2,8,4,1,3"), grouped=False, weights="q4_k").dense(w, xp, y, m, k, t)

    e, m2, t2, top_k = 256, 512, 256, 8
    w2 = cupy.asarray(Q4K.random_blocks(rng, e * m2, 2048).reshape(e, m2, -1))
    ids = cupy.asarray(np.argpartition(-rng.random((t2, e)), top_k - 1, axis=1)[:, :top_k].astype(np.uint32))
    tile = MmaTile.parse("1,2,4,1,3")
    ws = RoutingWorkspace(t2, top_k, e, tile.bn)
    build_routing(ids, ws)
    x2 = cupy.asarray(rng.standard_normal((t2, 2048), dtype=np.float32))
    xp2 = permuted_activations(cupy, t2, 2048)
    permute_activations(x2, xp2)
    y2 = cupy.empty((t2, top_k, m2), dtype=cupy.float32)
    FusedKQuantGemm(tile, grouped=True, weights="q4_k").grouped_call(w2, xp2, y2, m2, 2048, ws.tiles, ws.offsets, ws.sorted_ids, top_k)
    cupy.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
