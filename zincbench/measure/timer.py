"""GPU timer: CUDA events on a dedicated stream, cold-L2 or hot, adaptive stopping, clocks per sample.

Per sample (cold mode, the default for gates):
  1. write a buffer of 2x the L2 size (allocated once, outside the timed region) to evict L2;
  2. launch the blocking kernel (nvbench-style) so that the timed launches queue up behind it;
  3. record the start event, enqueue the timed function (its host time is the CPU launch time),
     record the end event, release the blocking kernel;
  4. read the elapsed GPU time and, through NVML, the SM clock and clock-event (throttle) reasons.
Hot mode skips step 1 (back-to-back launches on a warm cache).
Samples taken while throttled are flagged and, by default, dropped (with a count), unless that
would drop most of them (then all are kept and the record says the GPU throttled throughout).
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Literal

import numpy as np

from zincbench.errors import ConfigError
from zincbench.gpu.nvml import Nvml
from zincbench.measure.stopping import StoppingRule, rule_class
from zincbench.measure.stopping.noise import MedianNoiseRule

SPIN_TIMEOUT_NS = 2_000_000_000


@dataclass
class Measurement:
    """Raw record of one timed function: everything needed to judge and to audit it later."""

    name: str
    mode: str
    gpu_us: list[float]
    cpu_launch_us: list[float]
    sm_clock_mhz: list[int | None]
    throttled: list[bool]
    dropped_throttled: int
    stop_reason: str
    warmup: int
    launch_hiding: bool
    notes: list[str] = field(default_factory=list)


@dataclass
class TimerConfig:
    """How to time: the experiment YAML's ``timer:`` section. Its ``stopping`` key names a rule
    (measure/stopping/) and its keys other than ``mode`` and ``warmup`` are that rule's own fields:
    ``{mode: cold, warmup: 3, stopping: noise, max_noise: 0.005}``, ``{stopping: count, samples: 50}``."""

    mode: Literal["cold", "hot"] = "cold"
    warmup: int = 3
    stopping: StoppingRule = field(default_factory=MedianNoiseRule)
    drop_throttled: bool = True
    # nvbench's blocking kernel; ZINCBENCH_LAUNCH_HIDING=0 turns it off (under profilers that serialize launches)
    launch_hiding: bool = field(default_factory=lambda: os.environ.get("ZINCBENCH_LAUNCH_HIDING", "1") != "0")

    YAML_KEYS: ClassVar[tuple[str, ...]] = ("mode", "warmup")  # the section's keys besides stopping and the rule's

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise ValueError(f"warmup must be at least 0, got {self.warmup}")

    def quick(self) -> TimerConfig:
        """``--quick``: the same timer with its stopping rule shortened."""
        return dataclasses.replace(self, stopping=self.stopping.quick())

    @classmethod
    def from_config(cls, data: Any, where: str) -> TimerConfig:
        """The YAML section (config.coerce calls this): every key is checked against the chosen rule's fields."""
        from zincbench.config import build, coerce

        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
        name = coerce(data.get("stopping", MedianNoiseRule.name), str, f"{where}.stopping")
        try:
            rule_cls = rule_class(name)
        except ValueError as exc:
            raise ConfigError(f"{where}.stopping: {exc}") from None
        rule_keys = [f.name for f in dataclasses.fields(rule_cls) if f.init]
        allowed = {*cls.YAML_KEYS, "stopping", *rule_keys}
        unknown = sorted(set(map(str, data)) - allowed)
        if unknown:
            raise ConfigError(
                f"{where}: unknown key {unknown[0]!r} (allowed with stopping: {name}: {', '.join(sorted(allowed))})"
            )
        rule = build(rule_cls, {k: v for k, v in data.items() if k in rule_keys}, where)
        timer = build(cls, {k: v for k, v in data.items() if k in cls.YAML_KEYS}, where)
        return dataclasses.replace(timer, stopping=rule)

    def to_json(self) -> dict:
        """The YAML form (what from_config reads), as recorded in results documents."""
        return {
            **{k: getattr(self, k) for k in self.YAML_KEYS},
            "stopping": self.stopping.name,
            **dataclasses.asdict(self.stopping),
        }


class _MappedFlag:
    """Two ints in zero-copy host memory: [0] release flag (host writes), [1] timeout flag (GPU writes)."""

    def __init__(self, cupy):
        rt = cupy.cuda.runtime
        self._host = rt.hostAlloc(8, getattr(rt, "hostAllocMapped", 2))
        # Under unified virtual addressing (every 64-bit CUDA platform) the device address of mapped
        # pinned memory is the host address; ask the runtime when it can say.
        try:
            dptr = rt.pointerGetAttributes(self._host).devicePointer or self._host
        except Exception:
            dptr = self._host
        mem = cupy.cuda.UnownedMemory(dptr, 8, self)
        self.device = cupy.ndarray((2,), dtype=cupy.int32, memptr=cupy.cuda.MemoryPointer(mem, 0))
        self.host = np.ctypeslib.as_array((ctypes.c_int32 * 2).from_address(self._host))
        self._free = rt.freeHost

    def __del__(self):
        try:
            self._free(self._host)
        except Exception:
            pass


class GpuTimer:
    """Times functions that enqueue GPU work on the current CuPy stream."""

    def __init__(self, config: TimerConfig | None = None, nvml: Nvml | None = None, stream=None):
        from zincbench.gpu import require_cupy
        from zincbench.gpu.device import current_device
        from zincbench.gpu.runtime import get_kernel

        self.cupy = cupy = require_cupy()
        self.config = config or TimerConfig()
        self.device = current_device()
        self.nvml = nvml if nvml is not None else Nvml(pci_bus_id=self.device.pci_bus_id)
        self.stream = stream or cupy.cuda.Stream(non_blocking=True)
        self.flush_bytes = 2 * self.device.l2_bytes
        self._flush = cupy.empty(self.flush_bytes, dtype=cupy.uint8)
        self._flush_value = 0
        self._spin = get_kernel("timing.cu", "zb_spin_until_released")
        self._flag = _MappedFlag(cupy)
        self._start = cupy.cuda.Event()
        self._end = cupy.cuda.Event()

    def _evict_l2(self) -> None:
        self._flush_value ^= 1
        self.cupy.cuda.runtime.memsetAsync(self._flush.data.ptr, self._flush_value, self.flush_bytes, self.stream.ptr)

    def _hold(self) -> None:
        """Hold the stream behind a spin kernel until ``self._flag.host[0] = 1`` (or its timeout, which it flags)."""
        self._flag.host[0] = 0
        self._flag.host[1] = 0
        self._spin((1,), (1,), (self._flag.device, np.uint64(SPIN_TIMEOUT_NS)), stream=self.stream)

    def run_held(self, fn: Callable[[], None]) -> None:
        """``fn``'s launches on the timer's stream as a sample enqueues them: with launch hiding on, held behind the
        spin kernel until ``fn`` returns, so that they meet on the GPU back to back whatever the host's pace. A
        correctness check run this way sees what a timed run does (a dependent launch's early start among it)."""
        with self.stream:
            if self.config.launch_hiding:
                self._hold()
            fn()
        self._flag.host[0] = 1  # the release (unread without a hold)
        self.stream.synchronize()

    def _sample(self, fn: Callable[[], None], cold: bool, hide: bool) -> tuple[float, float, bool]:
        """One sample: (gpu_us, cpu_launch_us, launch_hidden_ok)."""
        if cold:
            self._evict_l2()
        if hide:
            self._hold()
        self._start.record(self.stream)
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        self._end.record(self.stream)
        if hide:
            self._flag.host[0] = 1
        self._end.synchronize()
        ok = not (hide and self._flag.host[1])
        return self.cupy.cuda.get_elapsed_time(self._start, self._end) * 1e3, (t1 - t0) * 1e6, ok

    def measure(self, fn: Callable[[], None], name: str = "", rule: StoppingRule | None = None) -> Measurement:
        cfg = self.config
        rule = rule or cfg.stopping
        cold = cfg.mode == "cold"
        hide = cfg.launch_hiding
        notes: list[str] = []
        with self.stream:
            for _ in range(cfg.warmup):
                fn()
            self.stream.synchronize()
            gpu, cpu, clocks, throttled = [], [], [], []
            start = time.perf_counter()
            while True:
                g, c, ok = self._sample(fn, cold, hide)
                if not ok:
                    notes.append("launch hiding timed out (the timed function synchronizes); measured without it")
                    hide = False
                    continue
                clock = self.nvml.clock_sample()
                gpu.append(g)
                cpu.append(c)
                clocks.append(clock.sm_mhz)
                throttled.append(clock.throttled)
                kept = [x for x, t in zip(gpu, throttled) if not t] if cfg.drop_throttled else gpu
                decision = rule.check(kept if len(kept) >= 2 else gpu, time.perf_counter() - start)
                if decision.stop:
                    break
        n_throttled = sum(throttled)
        if cfg.drop_throttled and n_throttled and n_throttled <= len(gpu) // 2:
            keep = [not t for t in throttled]
            gpu_kept = [x for x, k in zip(gpu, keep) if k]
            cpu_kept = [x for x, k in zip(cpu, keep) if k]
            clocks_kept = [x for x, k in zip(clocks, keep) if k]
            dropped = n_throttled
        else:
            gpu_kept, cpu_kept, clocks_kept, dropped = gpu, cpu, clocks, 0
            if n_throttled:
                notes.append(f"GPU throttled during {n_throttled}/{len(gpu)} samples: all kept")
        return Measurement(
            name=name,
            mode=cfg.mode,
            gpu_us=gpu_kept,
            cpu_launch_us=cpu_kept,
            sm_clock_mhz=clocks_kept,
            throttled=[False] * len(gpu_kept) if dropped else throttled,
            dropped_throttled=dropped,
            stop_reason=decision.reason,
            warmup=cfg.warmup,
            launch_hiding=hide,
            notes=notes,
        )
