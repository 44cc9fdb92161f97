"""GPU access: CuPy import guard, device/NVML information, kernel loading, tool discovery."""

from __future__ import annotations

from zincbench.errors import EnvironmentProblem


def require_cupy():
    """Import CuPy or fail with an environment error that says how to get it."""
    try:
        import cupy  # noqa: F401
    except ImportError:
        raise EnvironmentProblem(
            "CuPy is not installed: pip install -e '.[cuda12]' (CUDA 12) or -e '.[cuda13]' (CUDA 13)"
        ) from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        raise EnvironmentProblem(f"no CUDA device: {exc}") from None
    if n == 0:
        raise EnvironmentProblem("no CUDA device")
    return cupy
