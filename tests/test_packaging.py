"""A wheel is a complete zincbench: built offline, installed into a fresh venv and run from outside
the repository, it finds its kernels and experiments in site-packages."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "zincbench", "kernels", "experiments")
# The import names of the dependencies the installed entry point needs (pyproject's [project] dependencies).
RUNTIME_MODULES = ("click", "rich", "pandas", "yaml", "nvtx", "numpy", "pynvml", "scipy", "gguf")


def _run(cmd, cwd, **kw):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ZINCBENCH_RESULTS")}
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, **kw)


STALE_MODULE = "zincbench/engines/stale_removed_module.py"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, venv zincbench script, wheel path) for a wheel built from a copy of the sources
    (the build never writes into the checkout)."""
    for backend in ("setuptools", "wheel"):  # the build runs offline, without isolation, on what is installed here
        if importlib.util.find_spec(backend) is None:
            pytest.skip(f"building the wheel offline needs {backend} (pip install -e '.[test]' brings it)")
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    # A module left in build/ by an earlier build of a source tree that no longer has it must not ship.
    stale = src / "build" / "lib" / STALE_MODULE
    stale.parent.mkdir(parents=True)
    stale.write_text("raise ImportError('a module removed from the sources')\n")
    wheels = root / "dist"
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", wheels, src],
        cwd=root,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = wheels.glob("zincbench-*.whl")
    venv = root / "venv"
    made = _run([sys.executable, "-m", "venv", venv], cwd=root)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    # The dependencies come from the environment running this test (what the README's install put there:
    # a fresh virtualenv, or the system's site-packages): its site-packages folders are listed in a .pth
    # file, after the venv's own. Folders named in a .pth file are not scanned for .pth files themselves,
    # so an editable zincbench there (the checkout under test, or another one) cannot stand in for the wheel.
    # Offline and reproducible: nothing is downloaded.
    own = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    (site_dir,) = (venv / "lib").glob("python*/site-packages")
    (site_dir / "zincbench-test-dependencies.pth").write_text("".join(f"{p}\n" for p in own))
    missing = _run(
        [
            python,
            "-c",
            "import importlib.util, sys; names = sys.argv[1:]; "
            "print(' '.join(n for n in names if importlib.util.find_spec(n) is None))",
            *RUNTIME_MODULES,
        ],
        cwd=root,
    )
    assert missing.returncode == 0, missing.stderr
    if missing.stdout.strip():
        pytest.skip(
            f"this environment lacks zincbench's dependencies {missing.stdout.strip()} "
            "(install them first: pip install '.[test]'); the wheel's own install is offline"
        )
    # --ignore-installed: a zincbench of the same version among those folders would make pip skip the wheel.
    pip = _run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", wheel], cwd=root)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return python, venv / "bin" / "zincbench", wheel, root


@pytest.mark.slow
def test_a_stale_build_folder_does_not_ship_removed_modules(installed):
    _, _, wheel, _ = installed
    assert STALE_MODULE not in zipfile.ZipFile(wheel).namelist()


def test_the_wheel_holds_every_kernel_and_experiment(installed):
    _, _, wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("kernels", "experiments"):  # subfolders too (experiments/examples/)
        bundled = sorted(
            p.relative_to(REPO / folder).as_posix()
            for p in (REPO / folder).rglob("*")
            if p.suffix in (".cu", ".cuh", ".yaml")
        )
        assert bundled
        missing = [n for n in bundled if f"zincbench/{folder}/{n}" not in names]
        assert not missing, f"{folder}: {missing} not in {wheel.name}"


@pytest.mark.slow
def test_the_installed_tool_reads_its_files_from_site_packages(installed):
    python, _, _, root = installed
    probe = _run(
        [
            python,
            "-c",
            "import json, zincbench, zincbench.resources as r, zincbench.gpu.runtime as g, "
            "zincbench.config as c; print(json.dumps([zincbench.__file__, str(r.kernels_dir()), "
            "str(r.experiments_dir()), str(g.KERNELS_DIR), str(c.EXPERIMENTS_DIR)]))",
        ],
        cwd=root,
    )
    assert probe.returncode == 0, probe.stderr
    package, kernels, experiments, kernels_const, experiments_const = map(Path, json.loads(probe.stdout))
    site = package.parent
    assert site.parent.name == "site-packages" and str(site).startswith(str(root / "venv"))
    assert kernels == kernels_const == site / "kernels" and (kernels / "kquant_fused_mma.cu").is_file()
    assert experiments == experiments_const == site / "experiments" and (experiments / "t2_moe_expert.yaml").is_file()


@pytest.mark.slow
def test_the_installed_entry_point_runs_outside_the_repository(installed, tmp_path):
    _, zincbench, _, _ = installed
    help_ = _run([zincbench, "microbench", "--help"], cwd=tmp_path)
    assert help_.returncode == 0 and "--retune" in help_.stdout, help_.stderr
    env = _run([zincbench, "env", "--json"], cwd=tmp_path)
    assert env.returncode == 0, env.stderr
    json.loads(env.stdout)
    # The CPU-only CI gate: recorded H200 results re-judged with the experiment files the wheel carries.
    gate = _run(
        [zincbench, "gate", REPO / "experiments" / "gates_ci.yaml", "--json", "--results-dir", tmp_path / "res"],
        cwd=tmp_path,
    )
    assert gate.returncode == 0, gate.stdout[-2000:] + gate.stderr[-2000:]
    # The same gate named by its bundled name: the wheel carries no recorded results, so every check is
    # skipped, and a gate that checked nothing says so (exit 6), never PASS.
    bundled = _run([zincbench, "gate", "--bundled", "gates_ci", "--results-dir", tmp_path / "res"], cwd=tmp_path)
    assert bundled.returncode == 6, bundled.stdout[-2000:] + bundled.stderr[-2000:]
    assert "NOTHING CHECKED" in bundled.stdout


def test_the_runtime_modules_are_the_declared_dependencies():
    """RUNTIME_MODULES above (what the installed venv must see) follows pyproject's dependency list."""
    tomllib = pytest.importorskip("tomllib")

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    import_name = {"pyyaml": "yaml", "nvidia-ml-py": "pynvml"}
    names = {
        import_name.get(n, n) for n in (d.split(">")[0].split("=")[0].split("[")[0].strip().lower() for d in declared)
    }
    assert names == set(RUNTIME_MODULES)
