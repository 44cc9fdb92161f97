"""The launch ABI on a GPU: for every kernel that takes a push struct by value, an *echo twin* (the same
parameter list, a body that copies the struct's bytes to the first buffer) is compiled from the same
source and launched with the parameter buffer our launchers build. What the kernel received must be
what we meant, field by field; a layout mistake (fields passed one by one, a wrong order or padding)
shows here as wrong bytes, where the real kernel would only show NaN."""

from __future__ import annotations

from pathlib import Path

import pytest

from zincbench.gpu.kernel_abi import QUALIFIERS, KernelAbi, source_abi
from zincbench.gpu.runtime import KERNELS_DIR
from zincbench.reference.ssm_ref import SsmDims

pytestmark = pytest.mark.gpu
FIXTURES = Path(__file__).parent.parent / "fixtures" / "engine_abi"
STRUCT_SOURCES = [KERNELS_DIR / "ssm_scan.cu", KERNELS_DIR / "zinc_moe_tc.cu", FIXTURES / "abi_kernels.cu"]


def _by_value(path: Path) -> list[KernelAbi]:
    abi = source_abi(path.read_text(encoding="utf-8"))
    return [k for k in map(abi.kernel, abi.kernels) if k.by_value]


def _echo_module(path: Path):
    """The source plus one echo twin per struct kernel, compiled with the engine's options."""
    import cupy

    from zincbench.gpu.nvrtc import LoadedModule, compile_cubin, engine_options, source_headers

    text = path.read_text(encoding="utf-8")
    abi = source_abi(text)
    twins = []
    for kernel in _by_value(path):
        params = abi.kernels[kernel.entry]
        struct_param = QUALIFIERS.sub(" ", params.split(",")[-1]).split()[-1]
        twins.append(
            f'extern "C" __global__ void zb_echo_{kernel.entry}({params}) {{\n'
            f"    const unsigned char* zb_src = (const unsigned char*)&{struct_param};\n"
            f"    unsigned char* zb_dst = (unsigned char*)(void*){kernel.buffers[0]};\n"
            f"    for (unsigned i = 0; i < sizeof({struct_param}); ++i) zb_dst[i] = zb_src[i];\n}}\n"
        )
    source = text + "\n" + "\n".join(twins)
    options = engine_options(cupy.cuda.Device().compute_capability)
    headers = source_headers(text, path.parent)  # the kernels' zb_*.cuh
    return LoadedModule(compile_cubin(source, filename=f"echo-{path.name}", options=options, headers=headers))


def _received(module, kernel: KernelAbi, params: bytes, first_buffer) -> dict:
    import cupy

    from zincbench.gpu.nvrtc import PackedLaunch

    PackedLaunch(module.function(f"zb_echo_{kernel.entry}"), (1, 1, 1), (1, 1, 1), 0, params, (first_buffer,))()
    cupy.cuda.Device().synchronize()
    raw = cupy.asnumpy(first_buffer.view(cupy.uint8).ravel()[: kernel.push.dtype.itemsize]).tobytes()
    return kernel.push.unpack(raw)


@pytest.mark.parametrize("path", STRUCT_SOURCES, ids=lambda p: p.name)
def test_every_struct_kernel_receives_the_fields_we_pack(path, rng):
    import cupy

    module = _echo_module(path)
    kernels = _by_value(path)
    assert kernels
    for kernel in kernels:
        buffers = [cupy.full(64, 0xA5, dtype=cupy.uint8) for _ in kernel.buffers]
        values = {}
        for name, kind, length in kernel.push.fields:  # distinct, non-zero, full-width values
            draw = (
                rng.uniform(-1e3, 1e3, length)
                if kind == "f32"
                else rng.integers(1, 2**31 - 1, length) * (-1 if kind.startswith("i") else 1)
            )
            values[name] = draw.tolist() if length > 1 else draw.item()
        params = kernel.parameters([b.data.ptr for b in buffers], values, kernel.entry)
        got = _received(module, kernel, params, buffers[0])
        want = kernel.push.unpack(kernel.push.pack(values, kernel.entry))  # f32 values rounded as packed
        assert got == want, (kernel.entry, got, want)


@pytest.mark.parametrize("kind", ["block", "warp", "chunked", "conv1d", "norm"])
def test_the_ssm_launchers_deliver_their_push(kind, rng):
    """ops/ssm.py's real launch objects, their kernel swapped for the echo twin: the bytes the T3 kernels
    receive are the push the launcher meant."""
    import cupy

    from zincbench.gpu.kernel_abi import kernel_abi
    from zincbench.ops import ssm

    dims, t = SsmDims(6, 128, 128, 3), 37
    f32 = cupy.float32
    if kind == "conv1d":
        x = cupy.asarray(rng.standard_normal((t, dims.conv_channels)), f32)
        op = ssm.Conv1dBatched(
            x,
            cupy.ones((dims.conv_channels, 4), f32),
            cupy.zeros((3, dims.conv_channels), f32),
            cupy.empty_like(x),
            state_offset=2,
        )
        entry, first = "ssm_conv1d_batched", x
    elif kind == "norm":
        o = cupy.asarray(rng.standard_normal((t, dims.d_inner)), f32)
        op = ssm.GatedNorm(dims, o, o.copy(), cupy.ones(dims.d_inner, f32), cupy.empty_like(o), norm_per_head=True)
        entry, first = "ssm_gated_norm_batched", o
    else:
        conv_out = cupy.asarray(rng.standard_normal((t, dims.conv_channels)), f32)
        heads = cupy.ones(dims.dt_rank, f32)
        ab = cupy.zeros((t, dims.dt_rank), f32)
        op = ssm.DeltaNetScan(
            kind,
            dims,
            conv_out,
            heads,
            ab,
            ab.copy(),
            -heads,
            cupy.zeros((dims.dt_rank, dims.head_v_dim, dims.d_state), f32),
            cupy.empty((t, dims.d_inner), f32),
        )
        entry, first = ssm.SCANS[kind], conv_out
    module = _echo_module(KERNELS_DIR / "ssm_scan.cu")
    kernel = kernel_abi((KERNELS_DIR / "ssm_scan.cu").read_text(encoding="utf-8"), entry)
    assert _received(module, kernel, op.launch.params, first) == op.push
