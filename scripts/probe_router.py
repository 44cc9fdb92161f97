"""Time the layer candidate's router pieces apart (cold L2, the microbench's timer) at qwen36's shape.

    python scripts/probe_router.py [--samples N]
    ncu --section SpeedOfLight --section LaunchStats python scripts/probe_router.py --once


One line per T: median µs of the warp top-k alone, an fp16 cuBLAS GEMM over fp16 copies of x and the
router (what the GEMM would cost on half the bytes; the copies are made outside the timed region), the
TF32 cuBLAS GEMM alone split into S = 1, 2, 4, 8 partial GEMMs over K, and the candidate's whole
"router+top-k" stage at each S. A tool for finding
where the stage's time goes; `zincbench microbench layer` times the stage inside the block. ``--once``
runs each piece once at T = 2048 without the timer: what a profiler should see (the kernels cuBLAS picks).
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import numpy as np

from zincbench.judge import summarize
from zincbench.measure.stopping.count import FixedCountRule
from zincbench.measure.timer import GpuTimer, TimerConfig
from zincbench.ops.moe_cublas import CublasGemm
from zincbench.ops.moe_layer import tensor_core_routing, topk_softmax

EXPERTS, TOP_K, N_EMBD = 256, 8, 2048  # qwen36-35b-a3b (experiments/moe_layer.yaml)
TOKENS = (256, 512, 1024, 2048)


def main() -> None:
    import cupy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--once", action="store_true", help="run each piece once at T = 2048, untimed")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    timer = None if args.once else GpuTimer(TimerConfig(mode="cold"))
    rule = FixedCountRule(args.samples)
    splits = (1, 2, 4, 8)
    names = ("top-k", "fp16 gemm", *(f"gemm/{k}" for k in splits), *(f"stage/{k}" for k in splits))
    print(f"{'T':>5} " + " ".join(f"{n:>9}" for n in names) + "   (median us; /S: split-K into S)", flush=True)
    for t in TOKENS[-1:] if args.once else TOKENS:
        b = SimpleNamespace(
            x=cupy.asarray(rng.standard_normal((t, N_EMBD), dtype=np.float32)),
            router=cupy.asarray(rng.standard_normal((EXPERTS, N_EMBD), dtype=np.float32) / np.float32(45.0)),
            logits=cupy.empty((t, EXPERTS), dtype=cupy.float32),
            table=cupy.empty((t, 2 * TOP_K), dtype=cupy.uint32),
            t=t,
            experts=EXPERTS,
            top_k=TOP_K,
        )
        half = CublasGemm(b.router.astype(cupy.float16), b.x.astype(cupy.float16), b.logits)
        gemms = [
            CublasGemm(b.router, b.x, b.logits if k == 1 else cupy.empty((k, t, EXPERTS), cupy.float32), split_k=k)
            for k in splits
        ]
        stages = [tensor_core_routing(b, k) for k in splits]
        runs = (topk_softmax(b.logits, b.table, TOP_K), half, *gemms, *stages)
        if args.once:
            for fn in runs:
                fn()
            cupy.cuda.Device().synchronize()
            return
        medians = [summarize(timer.measure(fn, name=name, rule=rule).gpu_us).median for name, fn in zip(names, runs)]
        print(f"{t:>5} " + " ".join(f"{m:>9.2f}" for m in medians), flush=True)


if __name__ == "__main__":
    main()
