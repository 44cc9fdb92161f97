"""The programmatic dependent launch's pieces without a GPU (zincbench.gpu.launch): the parameter buffer laid out
as a C compiler lays out the kernel's parameters, and the driver's launch structs as cuda.h declares them."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zincbench.gpu.launch import (
    CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
    LaunchAttribute,
    LaunchConfig,
    pack_arguments,
    supports_dependent_launch,
)
from zincbench.gpu.runtime import find_nvcc


class DeviceArray:
    """What pack_arguments reads of a CuPy array: its address."""

    class Memory:
        def __init__(self, ptr: int):
            self.ptr = ptr

    def __init__(self, ptr: int):
        self.data = self.Memory(ptr)


KINDS = {
    "pointer": (ctypes.c_uint64, lambda v: DeviceArray(v)),
    "i32": (ctypes.c_int32, np.int32),
    "u32": (ctypes.c_uint32, np.uint32),
    "u64": (ctypes.c_uint64, np.uint64),
    "i64": (ctypes.c_int64, np.int64),
    "f32": (ctypes.c_float, np.float32),
}
VALUES = {"pointer": 0x7F00_1234_5600, "i32": -7, "u32": 3, "u64": 2**40 + 9, "i64": -(2**35), "f32": 0.25}


@given(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=24))
def test_the_buffer_is_the_parameters_c_struct(kinds):
    """Every field at its natural alignment (ctypes lays a struct out as the C compiler does); the buffer ends at
    the last parameter, as cuLaunchKernel's parameter size counts it."""
    fields = [(f"p{i}", KINDS[kind][0]) for i, kind in enumerate(kinds)]
    struct = type("Params", (ctypes.Structure,), {"_fields_": fields})(*(VALUES[kind] for kind in kinds))
    last = getattr(type(struct), fields[-1][0])
    packed = pack_arguments([KINDS[kind][1](VALUES[kind]) for kind in kinds])
    assert packed == bytes(struct)[: last.offset + last.size]


def test_the_gemm_signature_packs_as_its_parameter_list():
    """The grouped GEMM's 21 parameters (kquant_fused_mma.cu): the 64-bit expert stride after three ints lands on 8."""
    args = [DeviceArray(1), DeviceArray(2), DeviceArray(3), np.int32(512), np.int32(2048), np.int32(0)]
    args += [np.uint64(589824), DeviceArray(4), DeviceArray(5), DeviceArray(6), np.int32(8), np.int32(0)]
    args += [DeviceArray(7), DeviceArray(8), np.int32(0), DeviceArray(9), DeviceArray(10)]
    args += [np.int32(0), np.int32(0), np.int32(0), DeviceArray(11)]
    packed = pack_arguments(args)
    assert len(packed) == 144  # the tensor maps' address at 136, after the int at 128 and padding
    assert int.from_bytes(packed[40:48], "little") == 589824 and packed[36:40] == bytes(4)


@pytest.mark.parametrize("bad", [3, 1.5, None, "x"])
def test_an_argument_without_a_c_type_is_refused(bad):
    with pytest.raises(TypeError, match="argument 1: a device array or a NumPy scalar"):
        pack_arguments([np.int32(1), bad])


def test_the_launch_structs_match_cuda_h(tmp_path):
    """sizeof / offsetof of CUlaunchConfig and CUlaunchAttribute, and the attribute's id, from cuda.h itself."""
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (install the CUDA toolkit): no cuda.h to compare with")
    program = tmp_path / "layout.cu"
    program.write_text(
        "#include <cuda.h>\n#include <cstdio>\n#include <cstddef>\nint main() {\n"
        '  std::printf("%zu %zu %zu %zu %zu %zu %zu %d\\n", sizeof(CUlaunchConfig),'
        " offsetof(CUlaunchConfig, sharedMemBytes), offsetof(CUlaunchConfig, hStream),"
        " offsetof(CUlaunchConfig, attrs), offsetof(CUlaunchConfig, numAttrs), sizeof(CUlaunchAttribute),"
        " offsetof(CUlaunchAttribute, value), (int)CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);\n}\n"
    )
    subprocess.run([nvcc, "-o", str(tmp_path / "layout"), str(program)], check=True, capture_output=True)
    printed = subprocess.run([str(tmp_path / "layout")], check=True, capture_output=True, text=True).stdout
    ours = (
        ctypes.sizeof(LaunchConfig),
        LaunchConfig.shared_bytes.offset,
        LaunchConfig.stream.offset,
        LaunchConfig.attrs.offset,
        LaunchConfig.n_attrs.offset,
        ctypes.sizeof(LaunchAttribute),
        LaunchAttribute.value.offset,
        CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
    )
    assert tuple(int(v) for v in printed.split()) == ours


@pytest.mark.parametrize("arch, supported", [("80", False), ("89", False), ("90", True), ("100", True), ("120", True)])
def test_dependent_launches_run_as_such_from_sm_90(arch, supported):
    assert supports_dependent_launch(arch) is supported
