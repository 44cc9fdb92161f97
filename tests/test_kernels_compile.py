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
