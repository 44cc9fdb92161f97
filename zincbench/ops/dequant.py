"""Launchers of the round trip's conversions: Q4_K / Q5_K / Q6_K weights to fp16, f32 activations to fp16.

Two kernel sets (``ConversionKernels``): ``ENGINE``, the engine's cuBLAS round trip (kernels/dequant.cu:
``dequant_q*_to_f16`` + ``f32_to_f16``, one element per thread), and ``VECTORIZED`` (kernels/dequant_vec.cu: the
same values, 16 weights or 8 activations per thread, at memory bandwidth). A whole expert tensor
``[E][M][row bytes]`` dequantizes in one launch. This module also holds what every launcher module
shares: the buffer checks done when a launch is prepared. Traffic models use zincbench.measure.traffic.Traffic
(bytes_min: what the operation must move; bytes_model: what this implementation moves by design).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from zincbench.errors import InputError
from zincbench.gpu.runtime import get_kernel
from zincbench.measure.traffic import Traffic
from zincbench.quant import get_format

THREADS = 256  # threads per block; the engine's grid: ceil(n/256) blocks of 256, one thread per element


@dataclass(frozen=True)
class ConversionKernels:
    """A source's weight dequant kernel per format and activation downcast kernel, with the elements each thread
    converts (the grid is ceil(n / per_thread / 256) blocks of 256). ``engine_abi``: the engine's push fields (u32
    counts, then the weights' byte offset a_offset); else u64 row and element counts, no offset."""

    source: str
    dequant: dict[str, str]
    downcast: str
    weights_per_thread: int
    activations_per_thread: int
    engine_abi: bool

    def count(self, n: int):
        """``n`` as the kernels' count argument, or InputError where the engine's 32 bits cannot hold it."""
        if not self.engine_abi:
            return np.uint64(n)
        if n >= 2**32:
            raise InputError(f"{n} elements exceed the engine's 32-bit element count")
        return np.uint32(n)

    def grid(self, n: int, per_thread: int) -> tuple[int]:
        return ((n + per_thread * THREADS - 1) // (per_thread * THREADS),)

    def dequant_scalars(self, rows: int, k: int) -> tuple:
        """The dequant kernels' parameters after the two buffers (the engine's: M, K, a_offset = 0)."""
        self.count(rows * k)  # the element count must fit the kernels' type
        offset = (np.uint32(0),) if self.engine_abi else ()  # the weights start at the buffer's start
        return (self.count(rows), np.uint32(k), *offset)

    def downcast_scalars(self, n: int) -> tuple:
        """The downcast kernel's parameters after its two buffers."""
        return (self.count(n),)


ENGINE = ConversionKernels(
    "dequant.cu",
    {"q4_k": "dequant_q4k_to_f16", "q5_k": "dequant_q5k_to_f16", "q6_k": "dequant_q6k_to_f16"},
    "f32_to_f16",
    1,
    1,
    engine_abi=True,
)
VECTORIZED = ConversionKernels(
    "dequant_vec.cu",
    {"q4_k": "dequant_q4k_to_f16_x16", "q5_k": "dequant_q5k_to_f16_x16", "q6_k": "dequant_q6k_to_f16_x16"},
    "f32_to_f16_x8",
    16,
    8,
    engine_abi=False,
)


def check_array(array, dtype, shape: tuple | None, name: str):
    """A C-contiguous CuPy array of ``dtype`` and ``shape`` (None entries match any size), else InputError."""
    import cupy

    if not isinstance(array, cupy.ndarray):
        raise InputError(f"{name} must be a CuPy array, got {type(array).__name__}")
    if array.dtype != np.dtype(dtype):
        raise InputError(f"{name} must be {np.dtype(dtype)}, got {array.dtype}")
    if shape is not None and (
        array.ndim != len(shape) or any(want is not None and got != want for got, want in zip(array.shape, shape))
    ):
        raise InputError(f"{name} has shape {array.shape}, expected {tuple('*' if s is None else s for s in shape)}")
    if not array.flags.c_contiguous:
        raise InputError(f"{name} must be C-contiguous")
    return array


def row_weights(fmt: str, row_bytes: int) -> int:
    """K, the weights in a quantized row of ``row_bytes``."""
    quant = get_format(fmt)
    if row_bytes <= 0 or row_bytes % quant.block_bytes:
        raise InputError(f"a {fmt} row of {row_bytes} bytes is not a whole number of {quant.block_bytes}-byte blocks")
    return row_bytes // quant.block_bytes * quant.block_weights


class DequantToF16:
    """Quantized weights uint8 ``[..., row bytes]`` -> fp16 ``[..., K]`` row-major, RNE, one launch."""

    def __init__(self, fmt: str, weights, out, kernels: ConversionKernels = ENGINE):
        if fmt not in kernels.dequant:
            raise InputError(f"no dequant kernel for {fmt!r}; have {', '.join(kernels.dequant)}")
        check_array(weights, np.uint8, None, "weights")
        self.fmt = fmt
        self.rows = prod(weights.shape[:-1])
        self.k = row_weights(fmt, weights.shape[-1])
        check_array(out, np.float16, (*weights.shape[:-1], self.k), "out")
        scalars = kernels.dequant_scalars(self.rows, self.k)
        self.kernel = get_kernel(kernels.source, kernels.dequant[fmt])
        self.grid = kernels.grid(self.rows * self.k, kernels.weights_per_thread)
        self.args = (weights, out, *scalars)

    def __call__(self) -> None:
        self.kernel(self.grid, (THREADS,), self.args)

    def traffic(self) -> Traffic:
        return dequant_traffic(self.fmt, self.rows, self.k)


class F32ToF16:
    """y = fp16(x) elementwise, RNE (the engine's activation downcast)."""

    def __init__(self, x, y, kernels: ConversionKernels = ENGINE):
        check_array(x, np.float32, None, "x")
        check_array(y, np.float16, x.shape, "y")
        self.n = x.size
        self.kernel = get_kernel(kernels.source, kernels.downcast)
        self.grid = kernels.grid(self.n, kernels.activations_per_thread)
        self.args = (x, y, *kernels.downcast_scalars(self.n))

    def __call__(self) -> None:
        self.kernel(self.grid, (THREADS,), self.args)

    def traffic(self) -> Traffic:
        return Traffic(6 * self.n, 6 * self.n)


def dequant_traffic(fmt: str, rows: int, k: int) -> Traffic:
    """Read the quantized rows once, write fp16 once (block headers re-read per element hit the cache)."""
    moved = rows * get_format(fmt).row_bytes(k) + 2 * rows * k
    return Traffic(moved, moved)
