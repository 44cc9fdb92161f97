"""Time the layer candidate's router pieces apart (cold L2, the microbench's timer) at qwen36's shape.

    python scripts/probe_router.py [--samples N]
    ncu --section SpeedOfLight --section LaunchStats python scripts/probe_router.py --once

One line per T, median µs of: x to fp16 (the permute the fused GEMMs read, which the router reads too),
the router's fp16 cuBLAS GEMM on it, the warp top-k, the two together (the candidate's "router+top-k"
stage), and for comparison the TF32 cuBLAS GEMM on f32 x (the router before). A tool for finding where
the stage's time goes; `zincbench microbench layer` times the stages inside the block. ``--once`` runs
each piece once at T = 2048 without the timer: what a profiler should see.
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import numpy as np

from zincbench.judge import summarize
from zincbench.measure.stopping.count import FixedCountRule
from zincbench.measure.timer import GpuTimer, TimerConfig
from zincbench.ops.fused import permute_activations, permuted_activations
from zincbench.ops.moe_cublas import CublasGemm
from zincbench.ops.moe_layer import tensor_core_routing, topk_softmax

EXPERTS, TOP_K, N_EMBD = 256, 8, 2048  # qwen36-35b-a3b (experiments/moe_layer.yaml)
TOKENS = (256, 512, 1024, 2048)
NAMES = ("x to fp16", "fp16 gemm", "top-k", "router+top-k", "tf32 gemm")


def main() -> None:
    import cupy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--once", action="store_true", help="run each piece once at T = 2048, untimed")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    timer = None if args.once else GpuTimer(TimerConfig(mode="cold"))
    rule = FixedCountRule(args.samples)
    print(f"{'T':>5} " + " ".join(f"{n:>12}" for n in NAMES) + "   (median us, cold L2)", flush=True)
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
        xp = permuted_activations(cupy, t, N_EMBD)
        permute_activations(b.x, xp)
        stage = tensor_core_routing(b, xp)
        router16 = permuted_activations(cupy, EXPERTS, N_EMBD)
        permute_activations(b.router, router16)
        half = [a.view(cupy.float16).reshape(a.shape[0], N_EMBD) for a in (router16, xp)]
        runs = (
            lambda: permute_activations(b.x, xp),
            CublasGemm(*half, b.logits),
            topk_softmax(b.logits, b.table, TOP_K),
            stage,
            CublasGemm(b.router, b.x, b.logits),
        )
        if args.once:
            for fn in runs:
                fn()
            cupy.cuda.Device().synchronize()
            return
        medians = [summarize(timer.measure(fn, name=name, rule=rule).gpu_us).median for name, fn in zip(NAMES, runs)]
        print(f"{t:>5} " + " ".join(f"{m:>12.2f}" for m in medians), flush=True)


if __name__ == "__main__":
    main()
