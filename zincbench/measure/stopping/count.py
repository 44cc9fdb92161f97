"""Fixed sample count: for A/A self-tests and reproducible profiles, where adaptivity is unwanted."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

from zincbench.measure.stopping import StopDecision, rule

QUICK_SAMPLES = 10


@rule("count")
@dataclass(frozen=True)
class FixedCountRule:
    samples: int = 100

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError(f"samples must be at least 1, got {self.samples}")

    def check(self, samples: Sequence[float], elapsed_s: float) -> StopDecision:
        if len(samples) >= self.samples:
            return StopDecision(True, f"fixed count {self.samples}")
        return StopDecision(False)

    def quick(self) -> FixedCountRule:
        return dataclasses.replace(self, samples=min(self.samples, QUICK_SAMPLES))
