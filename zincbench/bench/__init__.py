"""Microbenchmark families (one module each: t2_moe.py, t1_dense.py) and the gate runner.

A family turns an experiment YAML into cases, builds inputs, offers variants (baseline, candidates,
ceilings) that enqueue GPU work, and checks outputs against a float64 NumPy reference. The runner
(runner.py) does the rest the same way for every family: check, time, compare, decide.
"""

from __future__ import annotations

import importlib

from zincbench.errors import InputError

FAMILIES = {"t2": "zincbench.bench.t2_moe", "t1": "zincbench.bench.t1_dense"}
DEFAULT_EXPERIMENTS = {"t2": "t2_moe_expert", "t1": "t1_dense_gemm"}


def load_family(name: str):
    try:
        return importlib.import_module(FAMILIES[name]).FAMILY
    except KeyError:
        raise InputError(f"unknown microbench family {name!r} (known: {', '.join(sorted(FAMILIES))})") from None
