"""A wheel is a complete zincbench: built offline, installed into a fresh venv and run from outside
the repository, it finds its kernels and experiments in site-packages."""

from __future__ import annotations

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


def _run(cmd, cwd, **kw):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ZINCBENCH_RESULTS")}
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, venv zincbench script, wheel path) for a wheel built from a copy of the sources
    (the build never writes into the checkout)."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    wheels = root / "dist"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                  "-w", wheels, src], cwd=root)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = wheels.glob("zincbench-*.whl")
    venv = root / "venv"
    made = _run([sys.executable, "-m", "venv", "--system-site-packages", venv], cwd=root)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    # --ignore-installed: the venv sees the host's site-packages (for the dependencies), where a zincbench of
    # the same version (e.g. the editable install under test) would otherwise make pip skip the wheel.
    pip = _run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", wheel], cwd=root)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return python, venv / "bin" / "zincbench", wheel, root


@pytest.mark.slow
def test_the_wheel_holds_every_kernel_and_experiment(installed):
    _, _, wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("kernels", "experiments"):  # subfolders too (experiments/examples/)
        bundled = sorted(p.relative_to(REPO / folder).as_posix() for p in (REPO / folder).rglob("*")
                         if p.suffix in (".cu", ".cuh", ".yaml"))
        assert bundled
        missing = [n for n in bundled if f"zincbench/{folder}/{n}" not in names]
        assert not missing, f"{folder}: {missing} not in {wheel.name}"


@pytest.mark.slow
def test_the_installed_tool_reads_its_files_from_site_packages(installed):
    python, _, _, root = installed
    probe = _run([python, "-c", "import json, zincbench, zincbench.resources as r, zincbench.gpu.runtime as g, "
                  "zincbench.config as c; print(json.dumps([zincbench.__file__, str(r.kernels_dir()), "
                  "str(r.experiments_dir()), str(g.KERNELS_DIR), str(c.EXPERIMENTS_DIR)]))"], cwd=root)
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
    gate = _run([zincbench, "gate", REPO / "experiments" / "gates_ci.yaml", "--json", "--results-dir", tmp_path / "res"],
                cwd=tmp_path)
    assert gate.returncode == 0, gate.stdout[-2000:] + gate.stderr[-2000:]
