"""GPU access: CuPy import guard, device/NVML information, kernel loading, tool discovery."""

from __future__ import annotations

import re

from zincbench.errors import EnvironmentProblem
from zincbench.install import cupy_hint


def require_cupy(what: str = "this command"):
    """CuPy with a CUDA device, or an EnvironmentProblem (exit 4) saying in one line which is missing:
    CuPy (and how to get it), or a GPU it can reach (never CuPy's own multi-line errors)."""
    try:
        import cupy
    except ImportError:
        raise EnvironmentProblem(f"{what} needs CuPy and a CUDA GPU; CuPy is not installed ({cupy_hint()})") from None
    except Exception as exc:  # CuPy installed but broken for this machine (its CUDA libraries)
        raise EnvironmentProblem(
            f"{what} needs a CUDA GPU; CuPy is installed but cannot load its CUDA libraries ({_cuda_words(exc)})"
        ) from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError (no device) or CuPy's own error (no driver)
        raise EnvironmentProblem(
            f"{what} needs a CUDA GPU; CuPy finds none on this machine ({_cuda_words(exc)})"
        ) from None
    if n == 0:
        raise EnvironmentProblem(f"{what} needs a CUDA GPU; CuPy finds none on this machine")
    return cupy


def _cuda_words(exc: BaseException) -> str:
    """The CUDA error's name when there is one (cudaErrorNoDevice), else the exception's type: a few words."""
    found = re.search(r"cudaError\w+|CUDA_ERROR_\w+", str(exc))
    return found.group(0) if found else f"{type(exc).__name__}: no NVIDIA driver or device"
