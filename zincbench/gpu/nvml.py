"""NVML (nvidia-ml-py) access that degrades to "unavailable" instead of failing."""

from __future__ import annotations

import os
from dataclasses import dataclass

# Clock event (throttle) reasons that mean the GPU ran slower than it could: power cap, thermal and
# hardware slowdowns. Idle and application-clock settings are not slowdowns of a running kernel.
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
REASON_NAMES = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in REASON_NAMES.items() if mask & bit]


@dataclass
class ClockSample:
    sm_mhz: int | None
    reasons: int

    @property
    def throttled(self) -> bool:
        return bool(self.reasons & THROTTLE_MASK)


class Nvml:
    """One GPU's NVML handle, found by PCI bus id (matches the CUDA device) or UUID."""

    def __init__(self, pci_bus_id: str | None = None, uuid: str | None = None):
        self.error: str | None = None
        self.handle = None
        self.unknown_uuid = False  # NVML works but knows no GPU with this UUID (a typo, another host's GPU)
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nv = pynvml
            if uuid:
                self.handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
            elif pci_bus_id:
                self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
            else:
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception as exc:  # no driver, no library, no device: NVML facts become "unavailable"
            self.error = f"{type(exc).__name__}: {exc}"
            self.unknown_uuid = bool(uuid) and type(exc).__name__ == "NVMLError_NotFound"

    @property
    def available(self) -> bool:
        return self.handle is not None

    def _call(self, fn_name: str, *args):
        if not self.available:
            return None
        try:
            return getattr(self.nv, fn_name)(self.handle, *args)
        except Exception:
            return None

    def clock_sample(self) -> ClockSample:
        sm = self._call("nvmlDeviceGetClockInfo", 1) if self.available else None  # NVML_CLOCK_SM = 1
        fn = (
            "nvmlDeviceGetCurrentClocksEventReasons"
            if hasattr(getattr(self, "nv", None), "nvmlDeviceGetCurrentClocksEventReasons")
            else "nvmlDeviceGetCurrentClocksThrottleReasons"
        )
        reasons = self._call(fn) if self.available else None
        return ClockSample(sm, int(reasons or 0))

    def power_mw(self) -> int | None:
        """Board power draw in milliwatts (None without NVML)."""
        return self._call("nvmlDeviceGetPowerUsage")

    def snapshot(self) -> dict:
        """Clocks, limits, temperature, power and other compute processes, for reports."""
        if not self.available:
            return {"available": False, "error": self.error}
        nv = self.nv
        mem = self._call("nvmlDeviceGetMemoryInfo")
        procs = self._call("nvmlDeviceGetComputeRunningProcesses") or []
        others = [{"pid": p.pid, "used_mib": (p.usedGpuMemory or 0) // 2**20} for p in procs if p.pid != os.getpid()]
        power = self.power_mw()
        limit = self._call("nvmlDeviceGetEnforcedPowerLimit")
        ecc = self._call("nvmlDeviceGetEccMode")
        return {
            "available": True,
            "name": _text(self._call("nvmlDeviceGetName")),
            "uuid": _text(self._call("nvmlDeviceGetUUID")),
            "driver": _text(nv.nvmlSystemGetDriverVersion()),
            "sm_clock_mhz": self._call("nvmlDeviceGetClockInfo", 1),
            "sm_clock_max_mhz": self._call("nvmlDeviceGetMaxClockInfo", 1),
            "mem_clock_mhz": self._call("nvmlDeviceGetClockInfo", 2),
            "mem_clock_max_mhz": self._call("nvmlDeviceGetMaxClockInfo", 2),
            "temperature_c": self._call("nvmlDeviceGetTemperature", 0),
            "power_w": power / 1000 if power is not None else None,
            "power_limit_w": limit / 1000 if limit is not None else None,
            "persistence_mode": self._call("nvmlDeviceGetPersistenceMode"),
            "ecc_enabled": ecc[0] if isinstance(ecc, (list, tuple)) else None,
            "memory_used_mib": mem.used // 2**20 if mem else None,
            "clock_event_reasons": reason_names(self.clock_sample().reasons),
            "other_compute_processes": others,
        }


def check_gpu_request(uuid: str | None, require_clean: bool) -> None:
    """Before any work: ``--gpu UUID`` must name a GPU NVML knows, and both it and ``--require-clean-gpu``
    need NVML at all (without it neither the GPU nor its other processes can be checked): exit 4."""
    if not uuid and not require_clean:
        return
    from zincbench.errors import EnvironmentProblem, InputError

    monitor = Nvml(uuid=uuid)
    if monitor.unknown_uuid:
        raise InputError(f"--gpu {uuid}: NVML knows no GPU with this UUID")
    if not monitor.available:
        option = "--require-clean-gpu" if require_clean else f"--gpu {uuid}"
        raise EnvironmentProblem(f"{option}: NVML is unavailable ({monitor.error}), so the GPU cannot be checked")


def _text(value):
    return value.decode() if isinstance(value, bytes) else value
