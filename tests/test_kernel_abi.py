"""The launch ABI read from CUDA sources (zincbench.gpu.kernel_abi), without a GPU: every push struct and
parameter list of the bundled kernels laid out as a real C compiler lays it out, packing by field name
(never by position), and every declared launch of the bundled packs against the kernel it names."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from zincbench.bench import declared
from zincbench.config import experiment_path
from zincbench.errors import InputError
from zincbench.gpu.kernel_abi import COMMENTS, KINDS, QUALIFIERS, STRUCT, AbiError, kernel_abi, source_abi
from zincbench.gpu.runtime import KERNELS_DIR

FIXTURES = Path(__file__).parent / "fixtures" / "engine_abi"
SOURCES = sorted(KERNELS_DIR.glob("*.cu")) + [FIXTURES / "abi_kernels.cu"]
C_SPELLING = {"u32": "unsigned", "i32": "int", "u64": "unsigned long long", "i64": "long long", "f32": "float"}
CTYPES = {
    "u32": ctypes.c_uint32,
    "i32": ctypes.c_int32,
    "u64": ctypes.c_uint64,
    "i64": ctypes.c_int64,
    "f32": ctypes.c_float,
}
SAMPLE = {"u32": 7, "i32": -3, "u64": 2**40 + 5, "i64": -(2**40), "f32": 0.5}


# ---- layouts against a real C compiler ----------------------------------------------------------------
def _layout_program(text: str) -> tuple[str, dict]:
    """A C++ program printing sizeof/offsetof for every push struct and every kernel's parameter list (as a
    struct of the same members: pointers as void*), and what kernel_abi says each line should print."""
    abi, plain = source_abi(text), COMMENTS.sub(" ", text)
    lines, want = ["#include <cstddef>", "#include <cstdint>", "#include <cstdio>"], {}
    for match in STRUCT.finditer(plain):
        name = match.group(1)
        if isinstance(abi.structs.get(name), str):
            continue
        lines.append(match.group(0))
        dtype = abi.struct(name).dtype
        want[f"sizeof {name}"] = dtype.itemsize
        want.update({f"{name}.{f}": dtype.fields[f][1] for f in dtype.names})
    body = []
    for entry, params in abi.kernels.items():
        try:
            kabi = abi.kernel(entry)
        except AbiError:
            continue  # a kernel outside the engine ABI (e.g. a template parameter type): launched by CuPy
        members = []
        for i, param in enumerate(p for p in params.split(",") if p.strip()):
            text_param = QUALIFIERS.sub(" ", param).strip()
            members.append(f"void* b{i};" if "*" in text_param else f"{text_param};")
        lines.append(f"struct P_{entry} {{ {' '.join(members)} }};")
        if kabi.by_value:
            struct_member = QUALIFIERS.sub(" ", params.split(",")[-1]).split()[-1]
            body.append(f'printf("{entry} push %zu\\n", offsetof(P_{entry}, {struct_member}));')
            want[f"{entry} push"] = kabi.push_offset()
        else:
            for field in kabi.push.names:
                body.append(f'printf("{entry}.{field} %zu\\n", offsetof(P_{entry}, {field}));')
                want[f"{entry}.{field}"] = kabi.push_offset() + kabi.push.dtype.fields[field][1]
    for key in want:
        if key.startswith("sizeof "):
            body.append(f'printf("{key} %zu\\n", sizeof({key.split()[1]}));')
        elif "." in key and key.split(".")[0] in abi.structs:
            name, field = key.split(".")
            body.append(f'printf("{key} %zu\\n", offsetof({name}, {field}));')
    lines.append("int main() { " + " ".join(body) + " return 0; }")
    return "\n".join(lines), want


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found: the layouts are checked against its")
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_every_layout_matches_the_c_compiler(source, tmp_path):
    program, want = _layout_program(source.read_text(encoding="utf-8"))
    (tmp_path / "layout.cpp").write_text(program)
    build = subprocess.run(
        ["g++", "-std=c++17", "-o", str(tmp_path / "layout"), str(tmp_path / "layout.cpp")],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr + program
    printed = subprocess.run([str(tmp_path / "layout")], capture_output=True, text=True, check=True).stdout
    got = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in printed.splitlines()}
    assert want and got == want


def test_the_ssm_push_structs_are_read_from_the_source():
    abi = source_abi((KERNELS_DIR / "ssm_scan.cu").read_text())
    warp = abi.kernel("ssm_delta_net_warp")
    assert warp.buffers == ("conv_out", "dt_bias", "alpha", "beta", "ssm_a", "state", "out")
    assert warp.by_value and warp.push.name == "DeltaNetWarpPush" and warp.push.names[:2] == ("dt_rank", "head_v_dim")
    assert abi.kernel("ssm_delta_net_chunked_tc").push == warp.push
    assert abi.kernel("ssm_delta_net").push.names[0] == "d_inner"


def test_a_struct_is_passed_whole_after_the_pointers():
    """The T3 launch bug: the struct's fields passed one by one as kernel arguments. The buffer must hold the
    7 pointers, then all 12 u32 fields of DeltaNetWarpPush, in the struct's order."""
    warp = kernel_abi((KERNELS_DIR / "ssm_scan.cu").read_text(), "ssm_delta_net_warp")
    values = {name: 100 + i for i, name in enumerate(warp.push.names)}
    params = warp.parameters(list(range(1, 8)), values, "test")
    assert len(params) == 7 * 8 + 12 * 4
    assert np.frombuffer(params[:56], "<u8").tolist() == list(range(1, 8))
    assert warp.push.unpack(params[56:]) == values
    assert np.frombuffer(params[56:], "<u4").tolist() == list(range(100, 112))


# ---- generated structs against ctypes -------------------------------------------------------------------
@given(st.lists(st.sampled_from(sorted(C_SPELLING)), min_size=1, max_size=12))
@example(["u32", "u64"])  # 4 bytes of padding before an 8-byte field
@example(["u64", "u32"])  # tail padding to the struct's alignment
@settings(derandomize=True, max_examples=200, deadline=None)
def test_generated_structs_pack_like_ctypes(kinds):
    names = [f"f{i}" for i in range(len(kinds))]
    source = (
        "struct Push {\n"
        + "".join(f"    {C_SPELLING[k]} {n};  // a comment\n" for n, k in zip(names, kinds))
        + '};\nextern "C" __global__ void k(const float* a, float* __restrict__ b, Push p) {}\n'
    )
    abi = kernel_abi(source, "k")

    class Push(ctypes.Structure):
        _fields_ = [(n, CTYPES[k]) for n, k in zip(names, kinds)]

    values = {n: SAMPLE[k] for n, k in zip(names, kinds)}
    assert abi.push.dtype.itemsize == ctypes.sizeof(Push)
    assert abi.push.pack(values, "p") == bytes(Push(**values))
    assert abi.parameters([0x1000, 0x2000], values, "p")[16 + (-16 % abi.push.alignment) :] == bytes(Push(**values))


def test_scalar_parameters_end_at_the_last_one():
    abi = kernel_abi('extern "C" __global__ void k(float* y, unsigned long long n, unsigned m) {}', "k")
    assert not abi.by_value and abi.push.names == ("n", "m")
    assert len(abi.parameters([1], {"n": 2, "m": 3}, "p")) == 8 + 8 + 4  # no struct tail padding


@pytest.mark.parametrize("set_name", ["ENGINE", "VECTORIZED"])
def test_conversion_launchers_pass_what_the_kernels_take(set_name):
    """ops.dequant's scalar arguments, in order and width, against each conversion kernel's parameter list (CuPy
    packs a NumPy scalar by its own dtype: a u32 where the kernel reads a u64 would shift every later field)."""
    from zincbench.ops import dequant

    kernels = getattr(dequant, set_name)
    text = (KERNELS_DIR / kernels.source).read_text()
    launches = [(entry, kernels.dequant_scalars(300, 512)) for entry in kernels.dequant.values()]
    launches.append((kernels.downcast, kernels.downcast_scalars(4 * 256 + 37)))
    for entry, scalars in launches:
        abi = kernel_abi(text, entry)
        assert len(abi.buffers) == 2, entry
        assert [KINDS[kind] for _, kind, _ in abi.push.fields] == [np.asarray(v).dtype for v in scalars], entry
    if kernels.engine_abi:
        with pytest.raises(InputError, match="32-bit"):
            kernels.dequant_scalars(2**16, 2**16)


def test_typedef_structs_arrays_and_launch_bounds():
    source = """typedef struct { uint32_t a, b; float eps; unsigned pad[2]; } P;
    extern "C" __global__ void __launch_bounds__(128) k(const __half* __restrict__ x, __grid_constant__ const P p) {}"""
    abi = kernel_abi(source, "k")
    assert abi.buffers == ("x",) and abi.push.names == ("a", "b", "eps", "pad")
    assert abi.push.unpack(abi.push.pack({"a": 1, "b": 2, "eps": 0.5, "pad": [3, 4]}, "p")) == {
        "a": 1,
        "b": 2,
        "eps": 0.5,
        "pad": [3, 4],
    }


# ---- refusals --------------------------------------------------------------------------------------------
WARP = (KERNELS_DIR / "ssm_scan.cu").read_text()


def _warp_values(**changes):
    values = {name: 1 for name in kernel_abi(WARP, "ssm_delta_net_warp").push.names}
    return {k: v for k, v in {**values, **changes}.items() if v is not None}


@pytest.mark.parametrize(
    "values, message",
    [
        (_warp_values(n_tok=None), "missing n_tok"),
        (_warp_values(n_token=5), "unknown n_token"),
        (_warp_values(n_tok=-1), "n_tok: -1 does not fit u32"),
        (_warp_values(n_tok=2**32), "does not fit u32"),
        (_warp_values(n_tok=1.5), "not a whole number"),
        (_warp_values(n_tok=True), "is not a number"),
        (_warp_values(n_tok="5"), "is not a number"),
    ],
)
def test_push_values_are_refused_by_name(values, message):
    abi = kernel_abi(WARP, "ssm_delta_net_warp")
    with pytest.raises(AbiError, match=re.escape(message)):
        abi.parameters(list(range(7)), values, "launch")


def test_the_buffer_count_is_checked():
    with pytest.raises(AbiError, match="takes 7 buffers"):
        kernel_abi(WARP, "ssm_delta_net_warp").parameters([1, 2], _warp_values(), "launch")


@pytest.mark.parametrize(
    "source, message",
    [
        ('struct P { double x; };\nextern "C" __global__ void k(float* y, P p) {}', "struct P: field 'double x'"),
        ('extern "C" __global__ void k(unsigned n, float* y) {}', "buffer parameter 'float* y' after the push"),
        ('extern "C" __global__ void k(float* y, half h) {}', "neither a buffer"),
        ('extern "C" __global__ void j(float* y) {}', 'no extern "C" __global__ k'),
        ('struct P { unsigned a, a; };\nextern "C" __global__ void k(float* y, P p) {}', "field 'a' is declared twice"),
        ('struct P { };\nextern "C" __global__ void k(float* y, P p) {}', "struct P: it has no fields"),
        ('struct P { int x[0]; };\nextern "C" __global__ void k(float* y, P p) {}', "array length of 0"),
        (
            'extern "C" __global__ void k(float* y, unsigned n, int n) {}',
            "scalar parameters: field 'n' is declared twice",
        ),
    ],
)
def test_unreadable_signatures_are_errors(source, message):
    with pytest.raises(AbiError, match=re.escape(message)):
        kernel_abi(source, "k")


# ---- every declared launch of the bundled packs against the kernel it names ------------------------------
def _launch_steps():
    for path in (
        experiment_path("engine_zinc"),
        Path("experiments/examples/grouped_matvec.yaml"),
        FIXTURES / "pack.yaml",
    ):
        pack = declared.load_pack(Path(path))
        for family in pack.variants.values():
            for variant in family.values():
                for step in variant.steps:
                    if isinstance(step, declared.LaunchStep):
                        yield pack, variant, step


@pytest.mark.parametrize(
    "pack, variant, step",
    list(_launch_steps()),
    ids=lambda v: getattr(getattr(v, "info", None), "name", None) or getattr(v, "kernel", "-"),
)
def test_declared_launches_name_the_kernels_fields_and_buffers(pack, variant, step):
    """Field names and the buffer count agree with the stand-in kernel (or the fixture's source). A kernel
    name with {fields} may match several entries: at least one must agree (the step's `if` picks it)."""
    try:
        _, files = pack.sources[step.source].resolve()  # an engine tree ($ZINC_SRC) when set, else the stand-ins
    except InputError as exc:
        pytest.skip(f"no source to check against: {exc}")
    pattern = re.compile("^" + re.sub(r"\\\{\w+\\\}", r"\\w+", re.escape(step.kernel)) + "$")
    abis = [kernel_abi(f.read_text(), e) for f in files for e in source_abi(f.read_text()).kernels if pattern.match(e)]
    if not abis:
        assert variant.optional, f"{step.where}: no stand-in defines {step.kernel}"
        return
    agree = [a for a in abis if set(a.push.names) == set(step.push) and len(a.buffers) == len(step.buffers)]
    found = [(a.entry, a.push.names) for a in abis]
    assert agree if "{" in step.kernel else len(agree) == len(abis), (step.where, found)


# ---- damaged sources: never anything but an AbiError (an input error, exit 2) ----------------------------
C_PIECES = [
    "struct P {",
    "};",
    "unsigned a, b;",
    "unsigned a;",
    "float x;",
    "double y;",
    "int z[3];",
    "int z[];",
    "int z[0];",
    "typedef struct {",
    "} Q;",
    'extern "C" __global__ void k(',
    "const float* x,",
    "P p",
    "Q q",
    "unsigned n",
    ")",
    "{}",
    "//",
    "/*",
    "*/",
    "__launch_bounds__(128)",
    ",",
    "*",
    "\x00",
    "é",
    "\n",
    "unsigned n, unsigned n",
]


@given(st.lists(st.sampled_from(C_PIECES) | st.text(max_size=8), max_size=40))
@settings(derandomize=True, max_examples=300, deadline=None)
def test_any_source_text_reads_or_is_an_abi_error(pieces):
    text = " ".join(pieces)
    abi = source_abi(text)
    for entry in list(abi.kernels) + ["k"]:
        try:
            kernel = abi.kernel(entry)
        except AbiError:
            continue
        values = {name: [1] * n if n > 1 else 1 for name, _, n in kernel.push.fields}
        assert len(kernel.parameters([0] * len(kernel.buffers), values, "fuzz")) >= 8 * len(kernel.buffers)
