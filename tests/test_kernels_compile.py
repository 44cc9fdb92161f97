"""Every bundled kernel source compiles with nvcc for the architectures CI checks (no GPU needed)."""

from __future__ import annotations

import pytest

from zincbench.gpu.runtime import ARCHES_CHECKED, KERNELS_DIR, find_nvcc, nvcc_compile_check

SOURCES = sorted(path.name for path in KERNELS_DIR.glob("*.cu"))


def test_kernel_sources_are_bundled():
    assert SOURCES, f"no kernels/*.cu under {KERNELS_DIR}"


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found (install the CUDA toolkit)")
@pytest.mark.parametrize("arch", ARCHES_CHECKED)
@pytest.mark.parametrize("source", SOURCES)
def test_kernel_compiles(source, arch):
    nvcc_compile_check(source, arch)


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found (install the CUDA toolkit)")
def test_fused_launcher_constants_match_the_kernel(tmp_path):
    """ops.fused sizes the dynamic shared memory from POLICIES, WGMMA_POLICIES and WHOLE_POLICIES (and encodes a
    tensor map per TMA box width) and names epilogues by EPILOGUE_*;
    the kernel lays stages out from its policy structs and switches on ZB_EPI_*. A static_assert per format and per
    epilogue makes nvcc refuse a drift between the two."""
    import subprocess

    from zincbench.ops import fused
    from zincbench.ops.fused import POLICIES, SOURCE, WGMMA_POLICIES, WHOLE_POLICIES

    checks = "".join(
        f"static_assert({p.policy}::HALVES == {p.halves_per_stage} && "
        f"{p.policy}::ROW_STAGE_BYTES == {p.row_stage_bytes} && {p.policy}::TMA_BOXES == {len(p.tma_widths)}"
        + "".join(f" && {p.policy}::tma_box({i}).width == {w}" for i, w in enumerate(p.tma_widths))
        + f', "{name}");\n'
        for name, p in [*POLICIES.items(), *WGMMA_POLICIES.items(), *WHOLE_POLICIES.items()]
    )
    epilogues = ("STORE", "SWIGLU_F16_GROUPED", "SWIGLU_F16_PERM", "COMBINE")
    checks += "".join(f'static_assert(ZB_EPI_{e} == {getattr(fused, f"EPILOGUE_{e}")}, "{e}");\n' for e in epilogues)
    unit = tmp_path / "policies.cu"
    unit.write_text(f'#include "{KERNELS_DIR / SOURCE}"\n{checks}')
    proc = subprocess.run(
        [find_nvcc(), "-std=c++17", "-arch=sm_90", "-cubin", "-o", str(tmp_path / "p.cubin"), str(unit)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def fused_name_expressions() -> dict[str, set[str]]:
    """Every instantiation of the fused kernel the launchers request, by the architecture they compile for (the
    wgmma tiles: sm_90a): the tiles each experiment tunes over (sanitize_driver launches the same), with the
    formats and epilogues each family launches them with."""
    from zincbench.ops.fused import EPILOGUE_COMBINE, POLICIES
    from zincbench.ops.moe_layer import DOWN_PATHS, FusedDownCombine
    from zincbench.testing.sanitize_driver import gate_tiles

    requested = [
        (tile, tile.expression(False, weights))
        for family in ("t1", "t4")
        for tile in gate_tiles(family)
        for weights in POLICIES
    ]
    requested += [(tile, tile.expression(True, "q4_k")) for tile in gate_tiles("t2")]
    requested += [(tile, tile.expression(True, "q6_k")) for tile in gate_tiles("t2", "t2_moe_down")]
    for tile in gate_tiles("layer"):
        for paths in DOWN_PATHS.values():
            for down_type, path in paths.items():
                requested.append((tile, tile.expression(True, "q4_k", path.intermediate)))  # gate+up with SwiGLU
                if path is FusedDownCombine:
                    requested.append((tile, tile.expression(True, down_type, EPILOGUE_COMBINE)))
    by_arch: dict[str, set[str]] = {}
    for tile, expression in requested:
        by_arch.setdefault("90a" if tile.wgmma else "90", set()).add(expression)
    return by_arch


def test_every_requested_fused_instantiation_compiles_with_nvrtc(tmp_path, monkeypatch):
    """The name expressions above through NVRTC, the way the launchers compile them (sm_90 and sm_90a, no GPU):
    a template argument the kernel rejects (a static_assert on the epilogue, a shape that does not fit)
    fails here, not on the GPU host. Needs CuPy's NVRTC bindings (e.g. cupy-cuda13x)."""
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    from zincbench.gpu.nvrtc import compile_cubin, engine_options
    from zincbench.gpu.runtime import kernel_headers, kernel_source
    from zincbench.ops.fused import SOURCE

    monkeypatch.setenv("ZINCBENCH_CACHE", str(tmp_path))  # compile, do not read a cached CUBIN
    for arch, requested in fused_name_expressions().items():
        expressions = tuple(sorted(requested))
        compiled = compile_cubin(
            kernel_source(SOURCE),
            filename=f"kernels/{SOURCE}",
            options=engine_options(arch),
            name_expressions=expressions,
            headers=kernel_headers(SOURCE),
        )
        assert set(compiled.lowered_names) == set(expressions)
