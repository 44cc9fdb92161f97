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
    """ops.fused sizes the dynamic shared memory from POLICIES and names epilogues by EPILOGUE_*; the kernel
    lays stages out from its policy structs and switches on ZB_EPI_*. A static_assert per format and per
    epilogue makes nvcc refuse a drift between the two."""
    import subprocess

    from zincbench.ops import fused
    from zincbench.ops.fused import POLICIES, SOURCE

    checks = "".join(f"static_assert({p.policy}::HALVES == {p.halves_per_stage} && "
                     f"{p.policy}::ROW_STAGE_BYTES == {p.row_stage_bytes}, \"{name}\");\n"
                     for name, p in POLICIES.items())
    epilogues = ("STORE", "SWIGLU_F16_GROUPED", "SWIGLU_F16_PERM", "COMBINE")
    checks += "".join(f"static_assert(ZB_EPI_{e} == {getattr(fused, f'EPILOGUE_{e}')}, \"{e}\");\n" for e in epilogues)
    unit = tmp_path / "policies.cu"
    unit.write_text(f'#include "{KERNELS_DIR / SOURCE}"\n{checks}')
    proc = subprocess.run([find_nvcc(), "-std=c++17", "-arch=sm_90", "-cubin", "-o", str(tmp_path / "p.cubin"), str(unit)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr

