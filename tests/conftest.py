"""Shared fixtures and marker skips.

- ``gpu`` tests skip with the reason when CuPy or a CUDA device is missing, so plain ``pytest`` passes on
  a CPU-only machine and ``pytest -m gpu`` runs them on a GPU host.
- ``sanitizer`` tests skip when compute-sanitizer is not on PATH.
- ``rng``: a NumPy generator with a fresh seed per test; the seed is printed (shown on failure) and
  ZINCBENCH_TEST_SEED=<seed> replays it.
"""

from __future__ import annotations

import os
import secrets
import shutil
from functools import lru_cache

import numpy as np
import pytest

from zincbench.errors import EnvironmentProblem


@lru_cache(maxsize=1)
def _gpu_missing() -> str | None:
    """Why GPU tests cannot run here, or None when they can."""
    from zincbench.gpu import require_cupy

    try:
        require_cupy()
    except EnvironmentProblem as exc:
        return str(exc)
    return None


def pytest_runtest_setup(item):
    if item.get_closest_marker("gpu") is not None and (reason := _gpu_missing()):
        pytest.skip(f"GPU test: {reason}")
    if item.get_closest_marker("sanitizer") is not None and shutil.which("compute-sanitizer") is None:
        pytest.skip("compute-sanitizer is not on PATH")


@pytest.fixture
def cupy():
    """The CuPy module (skips the test when CuPy or a device is missing)."""
    if reason := _gpu_missing():
        pytest.skip(reason)
    import cupy as cp

    return cp


@pytest.fixture
def rng():
    seed = int(os.environ.get("ZINCBENCH_TEST_SEED") or secrets.randbits(63))
    print(f"rng seed: {seed} (replay with ZINCBENCH_TEST_SEED={seed})")
    return np.random.default_rng(seed)
