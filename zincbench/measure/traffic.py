"""Traffic and roofline model: bytes and FLOPs of a variant, and the hardware floor of a case.

``bytes_min`` is what any implementation must move (weights once, activations once, outputs once);
``bytes_model`` is what this variant moves by construction (e.g. the matvec re-reads an expert's
weights once per routed token). The floor is max(bytes_min / copy bandwidth, flops / fp16 peak),
both ceilings measured by zincbench on the same GPU in the same run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Traffic:
    bytes_min: int
    bytes_model: int
    flops: int = 0
    note: str = ""

    def __add__(self, other: "Traffic") -> "Traffic":
        note = "; ".join(n for n in (self.note, other.note) if n)
        return Traffic(
            self.bytes_min + other.bytes_min, self.bytes_model + other.bytes_model, self.flops + other.flops, note
        )

    def with_flops(self, flops: int, note: str = "") -> "Traffic":
        return Traffic(self.bytes_min, self.bytes_model, flops, note or self.note)


@dataclass(frozen=True)
class Ceilings:
    copy_gbps: float  # bytes read + written per second / 1e9
    fp16_tflops: float  # cuBLAS fp16 GEMM, fp32 accumulate

    def floor_us(self, traffic: Traffic) -> tuple[float, str]:
        mem_us = traffic.bytes_min / (self.copy_gbps * 1e3)
        flop_us = traffic.flops / (self.fp16_tflops * 1e6)
        return (mem_us, "memory") if mem_us >= flop_us else (flop_us, "compute")


def rates(traffic: Traffic, median_us: float) -> dict:
    """Achieved bandwidth (of the modelled bytes) and arithmetic rate at a measured time."""
    return {
        "gbps": traffic.bytes_model / (median_us * 1e3),
        "tflops": traffic.flops / (median_us * 1e6),
    }
