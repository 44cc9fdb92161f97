"""Find the external tools zincbench drives (profilers, compilers, sanitizer) and their versions."""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from zincbench.errors import EnvironmentProblem

# What each tool enables, for the environment report's "missing: ... disables ..." lines.
TOOL_PURPOSE = {
    "nsys": "zincbench profile --tool nsys (per-kernel and NVTX tables)",
    "ncu": "zincbench profile --tool ncu (measured DRAM bytes per kernel)",
    "nvcc": "ahead-of-time kernel compile checks for sm_89/sm_90/sm_120",
    "compute-sanitizer": "pytest -m sanitizer (memcheck/racecheck/initcheck of the bundled kernels)",
}

# The profilers a command cannot run without: their product name and where to get them, for the line
# that says one is missing.
PROFILER_PRODUCT = {"nsys": "NVIDIA Nsight Systems", "ncu": "NVIDIA Nsight Compute"}
INSTALL_HINTS = {
    "nsys": (
        "install NVIDIA Nsight Systems (https://developer.nvidia.com/nsight-systems) and put nsys on PATH; "
        "Nsight Compute also bundles one under /opt/nvidia/nsight-compute/<version>/host/target-linux-x64/nsys"
    ),
    "ncu": (
        "install NVIDIA Nsight Compute (https://developer.nvidia.com/nsight-compute; the CUDA toolkit "
        "ships it as /usr/local/cuda/bin/ncu) and put ncu on PATH"
    ),
}

# Nsight Systems often ships only inside Nsight Compute / the CUDA toolkit, off PATH.
_EXTRA_LOCATIONS = {
    "nsys": [
        "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
        "/opt/nvidia/nsight-systems/*/bin/nsys",
        "/usr/local/cuda/bin/nsys",
    ],
    "ncu": ["/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda/bin/ncu"],
    "nvcc": ["/usr/local/cuda/bin/nvcc"],
    "compute-sanitizer": [
        "/usr/local/cuda/bin/compute-sanitizer",
        "/usr/local/cuda/compute-sanitizer/compute-sanitizer",
    ],
}

_VERSION_RE = re.compile(r"(\d+\.\d+(?:\.\d+)*)")


@dataclass
class Tool:
    name: str
    path: str | None
    version: str | None

    @property
    def found(self) -> bool:
        return self.path is not None


def find_tool(name: str) -> str | None:
    path = shutil.which(name)
    if path:
        return path
    for pattern in _EXTRA_LOCATIONS.get(name, []):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def require_profiler(name: str) -> str:
    """The path of profiler ``name`` (nsys or ncu); an EnvironmentProblem naming what to install when it is missing."""
    path = find_tool(name)
    if path is None:
        raise EnvironmentProblem(f"{name} ({PROFILER_PRODUCT[name]}) not found: {INSTALL_HINTS[name]}")
    return path


def tool_version(path: str) -> str | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout + out.stderr
    # nvcc prints several lines; the release line carries the toolkit version.
    for line in text.splitlines():
        if "release" in line or "version" in line.lower():
            m = _VERSION_RE.search(line.split("release")[-1])
            if m:
                return m.group(1)
    m = _VERSION_RE.search(text)
    return m.group(1) if m else None


def describe_tools(names=tuple(TOOL_PURPOSE)) -> dict[str, Tool]:
    tools = {}
    for name in names:
        path = find_tool(name)
        tools[name] = Tool(name, path, tool_version(path) if path else None)
    return tools


def nsys_importer_problem(nsys_path: str) -> str | None:
    """Some hosts' bundled nsys writes only a .qdstrm because QdstrmImporter cannot load libdw.so.1."""
    importers = glob.glob(str(Path(nsys_path).resolve().parents[1] / "*" / "QdstrmImporter"))
    for importer in importers:
        try:
            out = subprocess.run(["ldd", importer], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        missing = [line.split()[0] for line in out.splitlines() if "not found" in line]
        if missing:
            return (
                f"nsys's QdstrmImporter cannot load {', '.join(missing)}: reports stay .qdstrm. Install elfutils' "
                "libdw1 and libelf1 (e.g. `apt-get download libdw1 libelf1`, `dpkg -x` them into a folder) and put "
                "their usr/lib/x86_64-linux-gnu on LD_LIBRARY_PATH"
            )
    return None
