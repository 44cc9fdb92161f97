"""Tensor maps for the Tensor Memory Accelerator (sm_90): what a kernel's bulk tensor copies read.

A tensor map (the driver's ``CUtensorMap``: 128 opaque bytes) is a tiled view of a global tensor: its address,
extents and byte strides, the box one copy moves into shared memory and the swizzle it writes the box with.
``TensorMapSpec`` holds those and checks them against the rules of ``cuTensorMapEncodeTiled`` before the driver sees
them, so a shape the kernel cannot take is one clear error on any machine; ``encode`` asks the driver (libcuda,
through ctypes: CuPy does not bind it) for the map's bytes, and ``device_maps`` puts maps where a kernel reads them.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

MAP_BYTES = 128  # sizeof(CUtensorMap)
MAP_ALIGN = 64  # its alignment, on the host as in the kernel's global memory
ADDRESS_ALIGN = 16  # the tensor's base address
STRIDE_ALIGN = 16  # every byte stride past the innermost dimension
MAX_RANK = 5
MAX_BOX = 256  # per dimension
# CUtensorMapDataType of the element types we map
DATA_TYPES = {"u8": (0, 1), "f16": (6, 2)}  # name -> (enum, bytes)
# CUtensorMapSwizzle by the swizzle's span in bytes; the box's inner extent must fit in the span
SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
INTERLEAVE_NONE = 0
L2_PROMOTION_128B = 2  # a miss fills 128 bytes of L2: whole sectors of the rows a box reads
OOB_FILL_ZEROS = 0  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: elements past an extent read as zero


@dataclass(frozen=True)
class TensorMapSpec:
    """A tiled view: ``dims`` extents in elements and ``box`` the box's, innermost first; ``strides`` the byte strides
    of dims[1:]; ``swizzle`` the shared-memory swizzle span in bytes (0: none)."""

    dtype: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: int = 0

    @property
    def element_bytes(self) -> int:
        return DATA_TYPES[self.dtype][1]

    @property
    def box_bytes(self) -> int:
        """What one copy of the box writes to shared memory (elements past an extent included, zero-filled)."""
        n = self.element_bytes
        for extent in self.box:
            n *= extent
        return n

    def check(self) -> None:
        """ValueError naming the first rule of cuTensorMapEncodeTiled this view breaks."""
        if self.dtype not in DATA_TYPES:
            raise ValueError(f"tensor map: element type {self.dtype!r} is not one of {', '.join(DATA_TYPES)}")
        rank = len(self.dims)
        if not 1 <= rank <= MAX_RANK or len(self.box) != rank or len(self.strides) != rank - 1:
            raise ValueError(
                f"tensor map: rank 1..{MAX_RANK} with one box extent per dimension and one stride per outer "
                f"dimension, got dims {self.dims}, box {self.box}, strides {self.strides}"
            )
        if any(not 1 <= d <= 2**32 for d in self.dims):
            raise ValueError(f"tensor map: extents must be 1..2^32, got {self.dims}")
        if any(s <= 0 or s % STRIDE_ALIGN or s >= 2**40 for s in self.strides):
            raise ValueError(
                f"tensor map: byte strides must be positive multiples of {STRIDE_ALIGN}, got {self.strides}"
            )
        if any(not 1 <= b <= MAX_BOX for b in self.box):
            raise ValueError(f"tensor map: box extents must be 1..{MAX_BOX}, got {self.box}")
        inner = self.box[0] * self.element_bytes
        if inner % 16:
            raise ValueError(f"tensor map: the box's inner extent must be a multiple of 16 bytes, got {inner}")
        if self.swizzle not in SWIZZLES:
            raise ValueError(f"tensor map: swizzle span must be one of {sorted(SWIZZLES)} bytes, got {self.swizzle}")
        if self.swizzle and inner > self.swizzle:
            raise ValueError(
                f"tensor map: a {self.swizzle}-byte swizzle takes boxes of at most that many bytes per row, got {inner}"
            )

    def encode(self, address: int) -> bytes:
        """The map's 128 bytes for the tensor at device ``address``, from the driver."""
        self.check()
        if address % ADDRESS_ALIGN:
            raise ValueError(f"tensor map: the tensor's address must be {ADDRESS_ALIGN}-byte aligned, got {address:#x}")
        rank = len(self.dims)
        # the driver writes a CUtensorMap, 64-byte aligned: an aligned window of a larger buffer
        raw = ctypes.create_string_buffer(MAP_BYTES + MAP_ALIGN)
        at = -ctypes.addressof(raw) % MAP_ALIGN
        status = _encode_tiled()(
            ctypes.c_void_p(ctypes.addressof(raw) + at),
            DATA_TYPES[self.dtype][0],
            rank,
            ctypes.c_void_p(address),
            (ctypes.c_uint64 * rank)(*self.dims),
            (ctypes.c_uint64 * max(rank - 1, 1))(*self.strides),
            (ctypes.c_uint32 * rank)(*self.box),
            (ctypes.c_uint32 * rank)(*([1] * rank)),
            INTERLEAVE_NONE,
            SWIZZLES[self.swizzle],
            L2_PROMOTION_128B,
            OOB_FILL_ZEROS,
        )
        if status != 0:
            raise RuntimeError(f"cuTensorMapEncodeTiled returned CUresult {status} for {self}")
        return raw.raw[at : at + MAP_BYTES]


@lru_cache(maxsize=1)
def _encode_tiled():
    fn = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    fn.restype = ctypes.c_int
    u64p, u32p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p, u32p, u32p]
    fn.argtypes += [ctypes.c_int] * 4
    return fn


def device_maps(cupy, maps: list[bytes | None]):
    """The maps in one device buffer, slot i at byte 128 i (an empty slot zero): a kernel's ``const ZbTensorMap*``.
    CuPy's allocations are 256-byte aligned, more than a map needs."""
    blob = b"".join(m if m is not None else bytes(MAP_BYTES) for m in maps)
    return cupy.asarray(np.frombuffer(blob, dtype=np.uint8))
