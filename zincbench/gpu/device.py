"""What a user needs to know before trusting numbers: the device, its software stack and the tools."""

from __future__ import annotations

import platform
from dataclasses import dataclass

from zincbench.gpu.nvml import Nvml
from zincbench.gpu.tools import TOOL_PURPOSE, describe_tools, nsys_importer_problem
from zincbench.install import cupy_hint


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    compute_capability: str  # "90"
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    pci_bus_id: str
    uuid: str | None

    @property
    def arch(self) -> str:
        return f"sm_{self.compute_capability}"


def _decode(value) -> str:
    return value.decode(errors="replace").rstrip("\x00") if isinstance(value, (bytes, bytearray)) else str(value)


def current_device() -> DeviceInfo:
    """The CUDA device CuPy will use (requires CuPy and a GPU)."""
    from zincbench.gpu import require_cupy

    cupy = require_cupy()
    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    uuid = props.get("uuid")
    if isinstance(uuid, (bytes, bytearray)) and len(uuid) == 16:
        h = uuid.hex()
        uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return DeviceInfo(
        index=dev.id,
        name=_decode(props["name"]),
        compute_capability=dev.compute_capability,
        sm_count=int(props["multiProcessorCount"]),
        l2_bytes=int(props["l2CacheSize"]),
        memory_bytes=int(props["totalGlobalMem"]),
        pci_bus_id=cupy.cuda.runtime.deviceGetPCIBusId(dev.id),
        uuid=uuid if isinstance(uuid, str) else None,
    )


def _cuda_versions(cupy) -> dict:
    def fmt(v: int) -> str:
        return f"{v // 1000}.{(v % 1000) // 10}"

    out = {"cupy": cupy.__version__}
    try:
        out["cuda_runtime"] = fmt(cupy.cuda.runtime.runtimeGetVersion())
        out["cuda_driver_api"] = fmt(cupy.cuda.runtime.driverGetVersion())
    except Exception as exc:
        out["cuda_runtime_error"] = str(exc)
    try:
        major, minor = cupy.cuda.nvrtc.getVersion()
        out["nvrtc"] = f"{major}.{minor}"
    except Exception as exc:
        out["nvrtc_error"] = str(exc)
    return out


def environment_report(include_tools: bool = True) -> dict:
    """Everything `zincbench env` prints; also embedded in every results document.

    Never raises for a missing GPU or CuPy: those become entries in ``problems``.
    """
    report: dict = {
        "host": platform.node(),
        "python": platform.python_version(),
        "gpu": None,
        "software": {},
        "nvml": None,
        "tools": {},
        "problems": [],
    }
    try:
        import cupy
    except ImportError:
        report["problems"].append(f"CuPy is not installed: no kernels can run ({cupy_hint()})")
        cupy = None
    if cupy is not None:
        report["software"] = _cuda_versions(cupy)
        try:
            info = current_device()
        except Exception as exc:  # EnvironmentProblem or a CUDA error: report it, do not crash
            report["problems"].append(f"no CUDA device: {exc}")
            info = None
        if info is not None:
            report["gpu"] = {
                "index": info.index,
                "name": info.name,
                "uuid": info.uuid,
                "arch": info.arch,
                "compute_capability": info.compute_capability,
                "sm_count": info.sm_count,
                "l2_mib": round(info.l2_bytes / 2**20, 1),
                "memory_gib": round(info.memory_bytes / 2**30, 1),
                "pci_bus_id": info.pci_bus_id,
            }
            nvml = Nvml(pci_bus_id=info.pci_bus_id)
            report["nvml"] = nvml.snapshot()
            if not nvml.available:
                report["problems"].append(f"NVML unavailable ({nvml.error}): no clock/throttle records per sample")
            elif report["nvml"].get("other_compute_processes"):
                others = len(report["nvml"]["other_compute_processes"])
                report["problems"].append(f"{others} other compute process(es) on this GPU: timings may be disturbed")
    if include_tools:
        for name, tool in describe_tools().items():
            report["tools"][name] = {"path": tool.path, "version": tool.version}
            if not tool.found:
                report["problems"].append(f"{name} not found: disables {TOOL_PURPOSE[name]}")
        nsys = report["tools"].get("nsys", {}).get("path")
        if nsys:
            problem = nsys_importer_problem(nsys)
            if problem:
                report["problems"].append(problem)
    return report
