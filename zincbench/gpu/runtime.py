"""Load bundled CUDA sources (``kernels/*.cu``) for the running device through NVRTC.

Bundled kernels compile through the same path as declared ones (zincbench.gpu.nvrtc): exactly
``--gpu-architecture=sm_<cc> --std=c++17 -I<CUDA include>`` plus the launcher's own options, nothing
appended behind our back. Modules are cached in-process (per source hash, arch and options) and on disk
as CUBINs. Compile errors surface as KernelCompileError carrying the full NVRTC log.
``nvcc_compile_check`` compiles a source ahead of time for a named arch (CI uses it for sm_89, sm_90 and
sm_120 without a GPU).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from zincbench.errors import EnvironmentProblem, KernelCompileError
from zincbench.resources import kernels_dir

KERNELS_DIR = kernels_dir()
ARCHES_CHECKED = ("sm_89", "sm_90", "sm_120")


def kernel_source(name: str) -> str:
    path = KERNELS_DIR / name
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EnvironmentProblem(f"bundled kernel source missing: {path}") from None


def kernel_headers(name: str) -> tuple[tuple[str, str], ...]:
    """(name, text) of the bundled headers (kernels/zb_*.cuh) that ``kernels/<name>`` includes."""
    from zincbench.gpu.nvrtc import source_headers

    return source_headers(kernel_source(name), KERNELS_DIR)


def source_hash(source: str, headers: tuple[tuple[str, str], ...] = ()) -> str:
    return hashlib.sha256("\0".join((source, *(item for header in headers for item in header))).encode()).hexdigest()[
        :16
    ]


def _device_arch() -> str:
    import cupy

    return cupy.cuda.Device().compute_capability


@lru_cache(maxsize=None)
def _load(name: str, digest: str, arch: str, options: tuple[str, ...], name_expressions: tuple[str, ...]):
    from zincbench.gpu.nvrtc import LoadedModule, compile_cubin, engine_options

    compiled = compile_cubin(
        kernel_source(name),
        filename=f"kernels/{name}",
        options=engine_options(arch) + options,
        name_expressions=name_expressions,
        headers=kernel_headers(name),
    )
    return LoadedModule(compiled)


def load_module(
    name: str, options: tuple[str, ...] = (), name_expressions: tuple[str, ...] = (), arch: str | None = None
):
    """The compiled module of ``kernels/<name>`` for the current device (cached per source and headers);
    ``arch`` replaces the device's ``<major><minor>`` (e.g. "90a", the architecture-specific target)."""
    from zincbench.gpu import require_cupy

    require_cupy()
    digest = source_hash(kernel_source(name), kernel_headers(name))
    return _load(name, digest, arch or _device_arch(), tuple(options), tuple(name_expressions))


def get_kernel(
    name: str,
    function: str,
    options: tuple[str, ...] = (),
    name_expressions: tuple[str, ...] = (),
    arch: str | None = None,
):
    """One function of a bundled module; templates are looked up by their name expression."""
    return load_module(name, options, name_expressions, arch).function(function)


def engine_abi_launch(
    name: str, entry: str, grid, block, shared_bytes: int, buffers: Mapping[str, Any], push: Mapping[str, Any]
):
    """A launch of a ``kernels/<name>`` kernel in the engine's ABI, buffers and push fields given by name and
    laid out by the kernel's own signature and struct (zincbench.gpu.kernel_abi): the one definition."""
    from zincbench.gpu.kernel_abi import AbiError, kernel_abi
    from zincbench.gpu.nvrtc import PackedLaunch

    where = f"kernels/{name}: {entry}"
    abi = kernel_abi(kernel_source(name), entry, where)
    if set(buffers) != set(abi.buffers):
        raise AbiError(f"{where} takes buffers {', '.join(abi.buffers)}, got {', '.join(buffers)}")
    arrays = tuple(buffers[b] for b in abi.buffers)
    params = abi.parameters([a.data.ptr for a in arrays], push, where)
    return PackedLaunch(
        load_module(name).function(entry), (*grid, 1, 1)[:3], (*block, 1, 1)[:3], shared_bytes, params, arrays
    )


def find_nvcc() -> str | None:
    return shutil.which("nvcc") or (
        str(Path("/usr/local/cuda/bin/nvcc")) if Path("/usr/local/cuda/bin/nvcc").exists() else None
    )


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
    cmd = [
        nvcc,
        "-std=c++17",
        f"-arch={arch}",
        "-cubin",
        "-o",
        os.devnull,
        "-DZINCBENCH_COMPILE_CHECK",
        *extra,
        str(path),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise KernelCompileError(f"nvcc failed for kernels/{name} ({arch}):\n{proc.stderr.strip()}")
    return proc
