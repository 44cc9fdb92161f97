"""Programmatic dependent launch (PDL, sm_90 and later), which CuPy does not bind: ``cuLaunchKernelEx`` through ctypes.

A kernel launched by ``launch_dependent`` may start while the previous kernel in its stream still runs, once every
block of that kernel has allowed it (kernels/zb_pdl.cuh). It then waits inside, before it reads what that kernel
wrote, instead of waiting for the launch gap. The arguments are given the way a CuPy kernel call takes them (device
arrays, NumPy scalars) and packed into one parameter buffer, ``cuLaunchKernel``'s ``extra`` form.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

import numpy as np

from zincbench.gpu.nvrtc import ParameterBuffer

CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6  # cuda.h's CUlaunchAttributeID
DEPENDENT_LAUNCH_MIN_ARCH = 90  # griddepcontrol, and the attribute's effect


def supports_dependent_launch(compute_capability: str) -> bool:
    """Whether a GPU of ``compute_capability`` ("90", "89", "120") runs a dependent launch as one."""
    return int(compute_capability) >= DEPENDENT_LAUNCH_MIN_ARCH


class LaunchAttribute(ctypes.Structure):
    """cuda.h's CUlaunchAttribute: the id, padding to 8 bytes, then a 64-byte union of values."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint64 * 8)]


class LaunchConfig(ctypes.Structure):
    """cuda.h's CUlaunchConfig."""

    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared_bytes", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("attrs", ctypes.POINTER(LaunchAttribute)),
        ("n_attrs", ctypes.c_uint),
    ]


def pack_arguments(args) -> bytes:
    """One parameter buffer of ``args``: a device array as its address (8 bytes), a NumPy scalar as its bytes,
    each at its natural alignment, as a C compiler lays out a struct of the kernel's parameters."""
    packed = bytearray()
    for i, arg in enumerate(args):
        if isinstance(arg, np.generic):
            raw = arg.tobytes()
        elif hasattr(arg, "data") and hasattr(arg.data, "ptr"):
            raw = np.uint64(arg.data.ptr).tobytes()
        else:
            # a Python int or float has no C type: the kernel's parameter decides it, and the caller must say it
            raise TypeError(f"argument {i}: a device array or a NumPy scalar, not {type(arg).__name__}")
        packed += bytes(-len(packed) % len(raw)) + raw
    return bytes(packed)


@lru_cache(maxsize=1)
def _launch_kernel_ex():
    fn = ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx
    fn.restype = ctypes.c_int
    void_pp = ctypes.POINTER(ctypes.c_void_p)
    fn.argtypes = [ctypes.POINTER(LaunchConfig), ctypes.c_void_p, void_pp, void_pp]
    return fn


def launch_dependent(function, grid: tuple, block: tuple, args, shared_bytes: int = 0) -> None:
    """Enqueue ``function`` (a CuPy kernel) on the current stream as a programmatic dependent of the kernel before
    it. The kernel must wait (zb_pdl_wait) before it reads that kernel's outputs."""
    import cupy

    params = ParameterBuffer(pack_arguments(args))
    attribute = LaunchAttribute(id=CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
    attribute.value[0] = 1  # programmaticStreamSerializationAllowed, the union's first int
    config = LaunchConfig(
        (ctypes.c_uint * 3)(*(*grid, 1, 1)[:3]),
        (ctypes.c_uint * 3)(*(*block, 1, 1)[:3]),
        shared_bytes,
        cupy.cuda.get_current_stream().ptr,
        ctypes.pointer(attribute),
        1,
    )
    status = _launch_kernel_ex()(ctypes.byref(config), function.ptr, None, params.extra)
    if status:
        raise cupy.cuda.driver.CUDADriverError(status)
