"""Shared fixtures and marker skips.

- ``gpu`` tests skip with the reason when CuPy or a CUDA device is missing, so plain ``pytest`` passes on
  a CPU-only machine and ``pytest -m gpu`` runs them on a GPU host.
- ``sanitizer`` tests skip when compute-sanitizer is not on PATH.
- ``rng``: a NumPy generator with a fresh seed per test, for claims that must hold for *any* draw
  (a kernel or parser checked on fresh data); the seed is printed (shown on failure) and
  ZINCBENCH_TEST_SEED=<seed> replays it.
- ``sample_rng``: a generator pinned per test (seeded from the test's id), for statistical claims that
  hold with probability near, not equal to, 1 (a 99% interval misses 1% of the time): CI must give the
  same answer on every run, and a change of the code, not of the draw, is what may turn it red.
- hypothesis profiles: ``ci`` (chosen when CI is set) is derandomized, the same examples on every run,
  so CI cannot turn red on an old bug found by chance (failing examples found locally are kept as
  explicit ``@example`` cases); ``dev`` explores new examples each run. HYPOTHESIS_PROFILE overrides.
- Every test runs in CI's conditions whatever shell starts it (a developer's terminal, FORCE_COLOR,
  zincbench's own variables): see ``_ci_environment``. Subprocesses running ``python -m zincbench``
  import this checkout's zincbench, not whichever one is installed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import zlib
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from zincbench.errors import EnvironmentProblem

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Children started with `python -m zincbench` (and the fake engines' launchers) get this checkout's code
# first on sys.path: without it they run the installed zincbench, or none (an editable install of another
# worktree), and test that instead.
os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])

# Variables CI does not set that change what a run prints or does; a test that needs one sets it itself.
_NOT_IN_CI = (
    "FORCE_COLOR",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "GITHUB_STEP_SUMMARY",
    "ZINCBENCH_RESULTS",
    "ZINCBENCH_PLUGINS",
    "ZINCBENCH_LAUNCH_HIDING",
)


@pytest.fixture(autouse=True)
def _ci_environment(monkeypatch):
    """CI's conditions: none of _NOT_IN_CI, and 80 columns. (rich reads a terminal's width from stdin, so
    a test run from a wide terminal would lay tables out for it, and its children too; CI has no terminal.)"""
    for name in _NOT_IN_CI:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "80")


_HYPOTHESIS_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow], "print_blob": True}
settings.register_profile("ci", derandomize=True, database=None, **_HYPOTHESIS_COMMON)
settings.register_profile("dev", **_HYPOTHESIS_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


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


@pytest.fixture
def sample_rng(request):
    seed = zlib.crc32(request.node.nodeid.encode())
    print(f"sample_rng seed: {seed} (pinned to the test id)")
    return np.random.default_rng(seed)


@pytest.fixture(scope="module")
def ab_document(tmp_path_factory):
    """A real two-arm A/B of the fake engine (B 5% slower), as `zincbench ab` records it."""
    from fake_engine import write_launcher

    from zincbench.catalog import load_catalog
    from zincbench.engines import make_engine
    from zincbench.runs.ab import ABSettings, Arm, run_ab

    root = tmp_path_factory.mktemp("ab")
    gguf = root / "tiny.gguf"
    gguf.touch()
    fake = write_launcher(root)
    model = load_catalog().for_file(gguf)
    arms = [
        Arm("A", make_engine("zinc-main", bin=fake)),
        Arm("B", make_engine("zinc-main", bin=fake), {"FAKE_SPEED": "0.95"}),
    ]
    outcome = run_ab([model], arms, ABSettings(rounds=2), results_dir=root, progress=False)
    return outcome.path
