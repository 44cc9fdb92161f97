"""Compile CUDA C++ with NVRTC using exactly the options given, and launch with a packed parameter buffer.

Why not ``cupy.RawModule``: CuPy's compile path appends options of its own (``-ftz=true`` among them),
and a gate that compares the engine's kernels must compile them the way the engine does
(``--gpu-architecture=sm_<cc> --std=c++17 -I<CUDA include>``, nothing else). This module talks to NVRTC
directly, caches the CUBIN on disk keyed by source, the headers it includes, options, name expressions and
NVRTC version, and records the options it used.

Headers: a source's ``#include "name"`` of a file beside it (kernels/zb_*.cuh for the bundled kernels) is
handed to NVRTC by name and content (``source_headers``), so the compile needs no include path of ours
(the options stay the engine's) and a changed header changes the cache key.

Launches go through ``cuLaunchKernel``'s ``extra`` form (``CU_LAUNCH_PARAM_BUFFER_POINTER``): the
caller packs the whole parameter buffer as the C ABI lays it out (pointers first, then a push struct
passed by value, or scalars; zincbench.gpu.kernel_abi reads that layout from the kernel's source).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from zincbench.errors import EnvironmentProblem, KernelCompileError

CU_LAUNCH_PARAM_END = 0x00
CU_LAUNCH_PARAM_BUFFER_POINTER = 0x01
CU_LAUNCH_PARAM_BUFFER_SIZE = 0x02
CU_FUNC_ATTRIBUTE_NUM_REGS = 4
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9
CU_SHAREDMEM_CARVEOUT_MAX_SHARED = 100  # percent of the unified L1/shared memory given to shared memory


class KernelNotFound(LookupError):
    """The compiled module has no function of that name (an entry missing from this source version)."""


def cuda_include_dir() -> Path | None:
    """The CUDA toolkit's include folder (what the engine passes as -I), if a toolkit is installed."""
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and Path(root, "include", "cuda_fp16.h").exists():
            return Path(root, "include")
    return None


def engine_options(compute_capability: str) -> tuple[str, ...]:
    """The engine's NVRTC options: --gpu-architecture=sm_<cc>, --std=c++17, -I<CUDA include>; nothing else."""
    include = cuda_include_dir()
    return (f"--gpu-architecture=sm_{compute_capability}", "--std=c++17") + ((f"-I{include}",) if include else ())


def _nvrtc():
    try:
        from cupy_backends.cuda.libs import nvrtc
    except ImportError as exc:  # pragma: no cover - depends on the host
        raise EnvironmentProblem(f"NVRTC is not available through CuPy ({exc})") from None
    return nvrtc


def nvrtc_version() -> str:
    major, minor = _nvrtc().getVersion()
    return f"{major}.{minor}"


def cache_dir() -> Path:
    root = Path(os.environ.get("ZINCBENCH_CACHE") or Path.home() / ".cache" / "zincbench")
    return root / "cubin"


@dataclass(frozen=True)
class Compiled:
    """A CUBIN and what produced it: the options are recorded beside every measurement."""

    cubin: bytes
    options: tuple[str, ...]
    lowered_names: dict = field(default_factory=dict)  # name expression -> mangled name
    nvrtc: str = ""
    log: str = ""


def _write_atomically(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        pass  # the cache is an optimisation: a read-only or full disk only costs a recompile


QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.MULTILINE)


def source_headers(source: str, folder: Path) -> tuple[tuple[str, str], ...]:
    """(name, text) of every file ``source`` includes by ``#include "name"`` that exists under ``folder``,
    and of the files those include, each once, in first-include order. Other includes (``<mma.h>``, a name
    not beside the source) are left to NVRTC's own search."""
    found: dict[str, str] = {}

    def visit(text: str) -> None:
        for name in QUOTED_INCLUDE.findall(text):
            path = folder / name
            if name in found or not path.is_file():
                continue
            found[name] = path.read_text(encoding="utf-8")
            visit(found[name])

    visit(source)
    return tuple(found.items())


def cache_key(
    source: str,
    options: tuple[str, ...],
    name_expressions: tuple[str, ...],
    version: str,
    headers: tuple[tuple[str, str], ...] = (),
) -> str:
    """The disk cache's key: everything that decides the CUBIN (the headers' names and contents too)."""
    parts = [source, *options, "|", *name_expressions, version]
    if headers:  # keys of header-less sources are unchanged: their cached CUBINs stay valid
        parts += ["|headers", *(item for header in headers for item in header)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def compile_cubin(
    source: str,
    *,
    filename: str,
    options: tuple[str, ...],
    name_expressions: tuple[str, ...] = (),
    headers: tuple[tuple[str, str], ...] = (),
) -> Compiled:
    """Compile ``source`` with exactly ``options``; KernelCompileError carries NVRTC's log. ``headers``:
    (include name, text) pairs NVRTC resolves ``#include "name"`` with (``source_headers``)."""
    nvrtc = _nvrtc()
    version = nvrtc_version()
    digest = cache_key(source, options, name_expressions, version, headers)
    cubin_path = cache_dir() / f"{digest}.cubin"
    meta_path = cache_dir() / f"{digest}.json"
    try:
        meta = json.loads(meta_path.read_text())
        return Compiled(cubin_path.read_bytes(), options, dict(meta["lowered_names"]), version, meta.get("log", ""))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    # CuPy's binding takes the headers and their names as bytes (the source as str).
    header_texts = tuple(text.encode() for _, text in headers)
    prog = nvrtc.createProgram(source, filename, header_texts, tuple(name.encode() for name, _ in headers))
    try:
        for expr in name_expressions:
            nvrtc.addNameExpression(prog, expr)
        try:
            nvrtc.compileProgram(prog, list(options))
        except nvrtc.NVRTCError:
            log = nvrtc.getProgramLog(prog).strip()
            raise KernelCompileError(f"NVRTC failed to compile {filename} with {' '.join(options)}:\n{log}") from None
        log = nvrtc.getProgramLog(prog).strip()
        cubin = nvrtc.getCUBIN(prog)
        lowered = {expr: nvrtc.getLoweredName(prog, expr) for expr in name_expressions}
    finally:
        nvrtc.destroyProgram(prog)
    _write_atomically(cubin_path, cubin)
    _write_atomically(meta_path, json.dumps({"lowered_names": lowered, "options": list(options), "log": log}).encode())
    return Compiled(cubin, options, lowered, version, log)


class LoadedModule:
    """A CUBIN loaded into the current context; ``function`` looks entries up (name expressions too)."""

    def __init__(self, compiled: Compiled):
        import cupy

        self.compiled = compiled
        self.module = cupy.cuda.function.Module()
        self.module.load(compiled.cubin)
        self._functions: dict = {}

    def function(self, entry: str):
        if entry not in self._functions:
            import cupy

            name = self.compiled.lowered_names.get(entry, entry)
            try:
                self._functions[entry] = self.module.get_function(name)
            except cupy.cuda.driver.CUDADriverError:
                raise KernelNotFound(entry) from None
        return self._functions[entry]


@lru_cache(maxsize=None)
def load_cached(
    source: str,
    filename: str,
    options: tuple[str, ...],
    name_expressions: tuple[str, ...] = (),
    device_id: int = 0,
    headers: tuple[tuple[str, str], ...] = (),
) -> LoadedModule:
    """Compile (or fetch from the disk cache) and load once per process and device."""
    return LoadedModule(
        compile_cubin(source, filename=filename, options=options, name_expressions=name_expressions, headers=headers)
    )


def set_dynamic_shared(function, nbytes: int) -> None:
    """Let ``function`` launch with ``nbytes`` of dynamic shared memory. A kernel's default limit is 48 KB
    minus its static shared memory (not 48 KB), and the driver refuses a launch over it: raise the limit
    when ``nbytes`` exceeds it, never lower it (launchers of different sizes share one function)."""
    if nbytes <= 0:
        return
    import cupy

    driver = cupy.cuda.driver
    if nbytes > driver.funcGetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, function.ptr):
        driver.funcSetAttribute(function.ptr, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)


def registers_per_thread(function) -> int:
    """The registers each thread of ``function`` gets at launch (what ptxas allocated)."""
    import cupy

    return cupy.cuda.driver.funcGetAttribute(CU_FUNC_ATTRIBUTE_NUM_REGS, function.ptr)


def prefer_max_shared(function) -> None:
    """Ask for the largest shared-memory carveout when ``function`` runs. Otherwise the driver sizes the SM's
    shared memory by the kernel's own need: a block of 28 KB got a 168 KB carveout on an H200, five blocks per SM
    where 228 KB holds eight (the rest stays L1, which cp.async.cg copies bypass)."""
    import cupy

    cupy.cuda.driver.funcSetAttribute(
        function.ptr, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, CU_SHAREDMEM_CARVEOUT_MAX_SHARED
    )


class ParameterBuffer:
    """A packed parameter buffer in ``cuLaunchKernel``'s ``extra`` form (also ``cuLaunchKernelEx``'s): ``extra`` and
    the ctypes objects it points to, which the driver reads at launch time, live as long as this object."""

    def __init__(self, params: bytes):
        self._buffer = ctypes.create_string_buffer(params, max(len(params), 1))
        self._size = ctypes.c_size_t(len(params))
        self.extra = (ctypes.c_void_p * 5)(
            CU_LAUNCH_PARAM_BUFFER_POINTER,
            ctypes.addressof(self._buffer),
            CU_LAUNCH_PARAM_BUFFER_SIZE,
            ctypes.addressof(self._size),
            CU_LAUNCH_PARAM_END,
        )


class PackedLaunch:
    """One kernel launch with its parameter buffer packed once; calling it enqueues on the current stream.

    ``buffers`` are the device arrays whose addresses ``params`` holds: the launch keeps them alive, so a
    caller that keeps only the launch cannot free them under it (a freed workspace is reused by the next
    allocation: the kernel would write into someone else's array)."""

    def __init__(
        self,
        function,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared_bytes: int,
        params: bytes,
        buffers: tuple,
    ):
        self.function, self.grid, self.block, self.shared_bytes = function, grid, block, shared_bytes
        self.params = bytes(params)
        self.buffers = tuple(buffers)
        self._packed = ParameterBuffer(self.params)  # kept alive with the launch
        set_dynamic_shared(function, shared_bytes)

    def __call__(self) -> None:
        import cupy

        stream = cupy.cuda.get_current_stream().ptr
        cupy.cuda.driver.launchKernel(
            self.function.ptr,
            *self.grid,
            *self.block,
            self.shared_bytes,
            stream,
            0,
            ctypes.addressof(self._packed.extra),
        )
