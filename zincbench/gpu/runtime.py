"""Load bundled CUDA sources (``kernels/*.cu``) for the running device through NVRTC.

Compiled modules are cached twice: in-process (one RawModule per source hash, arch and options)
and on disk by CuPy's kernel cache, which we point at ``~/.cache/zincbench/nvrtc`` so the key is
source + arch + options + NVRTC version. Compile errors surface as KernelCompileError carrying the
full NVRTC log. ``nvcc_compile_check`` compiles a source ahead of time for a named arch (CI uses
it for sm_89, sm_90 and sm_120 without a GPU).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from zincbench.errors import EnvironmentProblem, KernelCompileError

KERNELS_DIR = Path(__file__).resolve().parents[2] / "kernels"
ARCHES_CHECKED = ("sm_89", "sm_90", "sm_120")
BASE_OPTIONS = ("--std=c++17",)


def kernel_source(name: str) -> str:
    path = KERNELS_DIR / name
    try:
        return path.read_text()
    except FileNotFoundError:
        raise EnvironmentProblem(f"bundled kernel source missing: {path}") from None


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def _cuda_include_options() -> tuple[str, ...]:
    """CUDA headers for NVRTC (mma.h, cuda_fp16.h) when a toolkit is installed."""
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and Path(root, "include", "cuda_fp16.h").exists():
            return (f"-I{Path(root, 'include')}",)
    return ()


def _device_arch() -> str:
    import cupy

    return f"sm_{cupy.cuda.Device().compute_capability}"


@lru_cache(maxsize=None)
def _load(name: str, digest: str, arch: str, options: tuple[str, ...], name_expressions: tuple[str, ...]):
    import cupy

    os.environ.setdefault("CUPY_CACHE_DIR", str(Path.home() / ".cache" / "zincbench" / "nvrtc"))
    source = kernel_source(name)
    module = cupy.RawModule(
        code=source,
        options=BASE_OPTIONS + _cuda_include_options() + options,
        name_expressions=name_expressions or None,
        backend="nvrtc",
    )
    try:
        module.compile()
    except cupy.cuda.compiler.CompileException as exc:
        raise KernelCompileError(f"NVRTC failed to compile kernels/{name} for {arch}:\n{exc.get_message()}") from None
    return module


def load_module(name: str, options: tuple[str, ...] = (), name_expressions: tuple[str, ...] = ()):
    """The compiled module of ``kernels/<name>`` for the current device (cached)."""
    from zincbench.gpu import require_cupy

    require_cupy()
    return _load(name, source_hash(kernel_source(name)), _device_arch(), tuple(options), tuple(name_expressions))


def get_kernel(name: str, function: str, options: tuple[str, ...] = (), name_expressions: tuple[str, ...] = ()):
    """One function of a bundled module; templates are looked up by their name expression."""
    module = load_module(name, options, name_expressions)
    return module.get_function(function)


def find_nvcc() -> str | None:
    return shutil.which("nvcc") or (str(Path("/usr/local/cuda/bin/nvcc")) if Path("/usr/local/cuda/bin/nvcc").exists() else None)


def nvcc_compile_check(name: str, arch: str, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Compile ``kernels/<name>`` to a cubin for ``arch`` with nvcc (no GPU needed).

    Raises KernelCompileError with nvcc's output on failure, EnvironmentProblem without nvcc.
    """
    nvcc = find_nvcc()
    if nvcc is None:
        raise EnvironmentProblem("nvcc not found (install the CUDA toolkit to compile-check kernels)")
    path = KERNELS_DIR / name
    # ZINCBENCH_COMPILE_CHECK makes template kernels instantiate representative shapes (NVRTC
    # instantiates the declared ones at run time through name expressions).
    cmd = [nvcc, "-std=c++17", f"-arch={arch}", "-cubin", "-o", os.devnull, "-DZINCBENCH_COMPILE_CHECK", *extra, str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise KernelCompileError(f"nvcc failed for kernels/{name} ({arch}):\n{proc.stderr.strip()}")
    return proc
