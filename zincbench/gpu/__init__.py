"""GPU access: CuPy import guard, device/NVML information, kernel loading, tool discovery."""

from __future__ import annotations

import re

from zincbench.errors import EnvironmentProblem
from zincbench.install import cupy_hint


def require_cupy():
    """Import CuPy or fail with an environment error that says how to get it."""
    try:
        import cupy  # noqa: F401
    except ImportError:
        raise EnvironmentProblem(f"CuPy is not installed: {cupy_hint()}") from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        raise EnvironmentProblem(f"no CUDA device: {exc}") from None
    if n == 0:
        raise EnvironmentProblem("no CUDA device")
    return cupy


def require_cupy_gpu(what: str = "microbench"):
    """CuPy with a CUDA device, or an EnvironmentProblem (exit 4) saying in one line which is missing:
    CuPy, or a GPU it can reach (never CuPy's own multi-line errors)."""
    try:
        import cupy  # noqa: F401
    except ImportError:
        raise EnvironmentProblem(f"{what} needs CuPy and a CUDA GPU; CuPy is not installed ({cupy_hint()})") from None
    except Exception as exc:  # CuPy installed but broken for this machine (its CUDA libraries)
        raise EnvironmentProblem(f"{what} needs a CUDA GPU; CuPy is installed but cannot load its CUDA libraries "
                                 f"({_cuda_words(exc)})") from None
    try:
        return require_cupy()
    except Exception as exc:  # EnvironmentProblem (no device) or CuPy's own error (no driver)
        raise EnvironmentProblem(f"{what} needs a CUDA GPU; CuPy finds none on this machine "
                                 f"({_cuda_words(exc)})") from None


def _cuda_words(exc: BaseException) -> str:
    """The CUDA error's name when there is one (cudaErrorNoDevice), else the exception's type: a few words."""
    found = re.search(r"cudaError\w+|CUDA_ERROR_\w+", str(exc))
    return found.group(0) if found else f"{type(exc).__name__}: no NVIDIA driver or device"
