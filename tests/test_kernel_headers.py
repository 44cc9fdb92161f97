"""Shared CUDA headers (kernels/zb_*.cuh): found beside the source, handed to NVRTC by name and content, part of
the CUBIN cache key, shipped with the kernels; the engine's faithful copies include none of them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from zincbench.gpu import nvrtc
from zincbench.gpu.nvrtc import QUOTED_INCLUDE, cache_key, compile_cubin, source_headers
from zincbench.gpu.runtime import KERNELS_DIR, kernel_headers, kernel_source
from zincbench.ops.fused import WGMMA_WIDTHS

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted(KERNELS_DIR.glob("*.cu"))
HEADERS = sorted(KERNELS_DIR.glob("*.cuh"))


def test_source_headers_resolves_quoted_includes_beside_the_source(tmp_path):
    (tmp_path / "a.cuh").write_text('#include "b.cuh"\n#include "a.cuh"\n__device__ int a();\n')
    (tmp_path / "b.cuh").write_text("__device__ int b();\n")
    source = '#include <mma.h>\n  #  include "a.cuh"\n// #include "c.cuh"\n#include "missing.cuh"\n#include "b.cuh"\n'
    assert source_headers(source, tmp_path) == (
        ("a.cuh", (tmp_path / "a.cuh").read_text()),
        ("b.cuh", (tmp_path / "b.cuh").read_text()),
    )
    assert source_headers("#include <mma.h>\n", tmp_path) == ()


def test_every_bundled_include_is_a_bundled_header():
    """A quoted include NVRTC could not resolve would fail only on the GPU host: each names a kernels/*.cuh."""
    assert HEADERS, "no kernels/*.cuh"
    for path in SOURCES + HEADERS:
        for name in QUOTED_INCLUDE.findall(path.read_text()):
            assert (KERNELS_DIR / name).is_file() and name.endswith(".cuh"), f"{path.name} includes {name}"
    used = {name for path in SOURCES for name, _ in kernel_headers(path.name)}
    assert used == {path.name for path in HEADERS}, "a header no kernel includes"


def test_the_engine_faithful_copies_include_no_header_of_ours():
    faithful = [path for path in SOURCES if path.read_text().startswith("// FAITHFUL COPY")]
    assert {path.name for path in faithful} >= {"q4k_matvec.cu", "gemm_q4k_tc.cu"}
    for path in faithful:
        assert not QUOTED_INCLUDE.findall(path.read_text()), path.name


def test_setup_ships_the_headers():
    """setup.py's package data for zincbench.kernels covers the headers (the slow wheel test builds one)."""
    setup = (REPO / "setup.py").read_text()
    patterns = re.search(r'"zincbench\.kernels": \[([^\]]*)\]', setup).group(1)
    assert '"**/*.cuh"' in patterns and '"**/*.cu"' in patterns


def test_the_cache_key_covers_the_headers():
    base = cache_key("src", ("-a",), ("e",), "13.0")
    assert base == cache_key("src", ("-a",), ("e",), "13.0", ())  # header-less keys as before
    one = cache_key("src", ("-a",), ("e",), "13.0", (("zb.cuh", "int x;"),))
    assert one != base
    assert one != cache_key("src", ("-a",), ("e",), "13.0", (("zb.cuh", "int y;"),))
    assert one != cache_key("src", ("-a",), ("e",), "13.0", (("zc.cuh", "int x;"),))


class FakeNvrtc:
    """The calls compile_cubin makes, recorded; the CUBIN is the source and headers it was given."""

    class NVRTCError(Exception):
        pass

    def __init__(self):
        self.programs = []

    def getVersion(self):
        return (13, 0)

    def createProgram(self, source, name, headers, include_names):
        if not all(isinstance(item, bytes) for item in (*headers, *include_names)):
            raise TypeError("expected bytes, str found")  # what CuPy's binding says
        headers = tuple(item.decode() for item in headers)
        self.programs.append((source, name, headers, tuple(item.decode() for item in include_names)))
        return len(self.programs)

    def addNameExpression(self, prog, expr):
        pass

    def compileProgram(self, prog, options):
        pass

    def getProgramLog(self, prog):
        return ""

    def getCUBIN(self, prog):
        source, _, headers, _ = self.programs[prog - 1]
        return "\0".join((source, *headers)).encode()

    def getLoweredName(self, prog, expr):
        return expr

    def destroyProgram(self, prog):
        pass


def test_a_changed_header_recompiles(tmp_path, monkeypatch):
    fake = FakeNvrtc()
    monkeypatch.setattr(nvrtc, "_nvrtc", lambda: fake)
    monkeypatch.setenv("ZINCBENCH_CACHE", str(tmp_path / "cache"))
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    source = '#include "zb_x.cuh"\nextern "C" __global__ void k() {}\n'

    def compile_with(header_text: str):
        (kernels / "zb_x.cuh").write_text(header_text)
        headers = source_headers(source, kernels)
        return compile_cubin(source, filename="kernels/k.cu", options=("--std=c++17",), headers=headers)

    first = compile_with("// v1\n")
    assert fake.programs == [(source, "kernels/k.cu", ("// v1\n",), ("zb_x.cuh",))]
    assert compile_with("// v1\n").cubin == first.cubin and len(fake.programs) == 1  # the disk cache
    second = compile_with("// v2\n")
    assert len(fake.programs) == 2 and second.cubin != first.cubin


def test_the_runtime_hands_a_kernel_its_headers(monkeypatch):
    """runtime._load compiles kernels/<name> with kernel_headers(name); load_module's in-process key covers
    them too (source_hash)."""
    from zincbench.gpu import runtime

    seen = {}

    def fake_compile(source, *, filename, options, name_expressions=(), headers=()):
        seen.update(filename=filename, headers=headers)
        raise RuntimeError("stop")

    monkeypatch.setattr(nvrtc, "compile_cubin", fake_compile)
    runtime._load.cache_clear()
    with pytest.raises(RuntimeError, match="stop"):
        runtime._load("dequant.cu", "digest", "90", (), ())
    runtime._load.cache_clear()
    assert seen["filename"] == "kernels/dequant.cu"
    assert [name for name, _ in seen["headers"]] == ["zb_half.cuh", "zb_kquant.cuh"]
    source = runtime.kernel_source("dequant.cu")
    assert runtime.source_hash(source, seen["headers"]) != runtime.source_hash(source)


def test_the_wgmma_widths_agree_everywhere():
    """The m64nNk16 widths: the specializations zb_wgmma.cuh spells out and the list MmaTile checks tiles against
    are every multiple of 8 up to 256, which the fused kernel's trim (widths 8 * LO .. 8 * HI, halved) assumes."""
    spelled = sorted(int(n) for n in re.findall(r"struct ZbWgmma<(\d+)>", kernel_source("zb_wgmma.cuh")))
    assert spelled == list(WGMMA_WIDTHS) == list(range(8, 257, 8))
    assert "zb_wgmma_piece<8 * LO, BN, STEPS>" in kernel_source("kquant_fused_mma.cu")


def test_the_wgmma_specializations_are_the_generators_output():
    """zb_wgmma.cuh's ZbWgmma<N> block is what scripts/gen_wgmma_shapes.py writes: each spells out N/2 accumulator
    operands, and a hand edit of one would go unnoticed until a GPU test of that width."""
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_wgmma_shapes.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
