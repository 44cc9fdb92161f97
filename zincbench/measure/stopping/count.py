"""Fixed sample count: for A/A self-tests and reproducible profiles, where adaptivity is unwanted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from zincbench.measure.stopping import StopDecision, rule


@rule("count")
@dataclass
class FixedCountRule:
    samples: int = 100

    def check(self, samples: Sequence[float], elapsed_s: float) -> StopDecision:
        if len(samples) >= self.samples:
            return StopDecision(True, f"fixed count {self.samples}")
        return StopDecision(False)
