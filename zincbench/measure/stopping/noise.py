"""Default rule: stop once the median is known to ``max_noise`` (relative half-width of its
confidence interval), after at least ``min_samples`` and ``min_time_s``; give up at ``max_time_s``
or ``max_samples`` and say which condition was still unmet (nvbench's stdrel idea, applied to the
median so outliers from outside the kernel do not keep it running)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from zincbench.judge import quantile_ci
from zincbench.measure.stopping import StopDecision, rule

# --quick: at most this many seconds and this minimum of samples
QUICK_MAX_TIME_S = 0.3
QUICK_MIN_SAMPLES = 10


@rule("noise")
@dataclass(frozen=True)
class MedianNoiseRule:
    max_noise: float = 0.005
    min_samples: int = 20
    max_samples: int = 5000
    min_time_s: float = 0.05
    max_time_s: float = 1.0
    confidence: float = 0.95
    check_every: int = 10

    def __post_init__(self) -> None:
        # `not a < x < b` also refuses NaN
        if not 0 < self.max_noise < 1:
            raise ValueError(f"max_noise must be strictly between 0 and 1, got {self.max_noise}")
        if not 1 <= self.min_samples <= self.max_samples:
            raise ValueError(f"need 1 <= min_samples <= max_samples, got {self.min_samples} and {self.max_samples}")
        if not 0 <= self.min_time_s <= self.max_time_s < math.inf:
            raise ValueError(
                f"need 0 <= min_time_s <= max_time_s (finite), got {self.min_time_s} and {self.max_time_s}"
            )
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be strictly between 0 and 1, got {self.confidence}")
        if self.check_every < 1:
            raise ValueError(f"check_every must be at least 1, got {self.check_every}")

    def quick(self) -> MedianNoiseRule:
        max_time_s = min(self.max_time_s, QUICK_MAX_TIME_S)
        return dataclasses.replace(
            self,
            max_time_s=max_time_s,
            min_time_s=min(self.min_time_s, max_time_s),
            min_samples=min(self.min_samples, QUICK_MIN_SAMPLES),
        )

    def relative_noise(self, samples: Sequence[float]) -> float:
        lo, hi = quantile_ci(samples, 0.5, self.confidence)
        med = float(np.median(samples))
        if not (np.isfinite(lo) and np.isfinite(hi)) or med <= 0:
            return float("inf")
        return (hi - lo) / 2.0 / med

    def check(self, samples: Sequence[float], elapsed_s: float) -> StopDecision:
        n = len(samples)
        if n >= self.max_samples:
            return StopDecision(
                True, f"max_samples ({self.max_samples}) reached; noise {self.relative_noise(samples):.2%}"
            )
        if elapsed_s >= self.max_time_s:
            unmet = []
            if n < self.min_samples:
                unmet.append(f"min_samples {n}/{self.min_samples}")
            noise = self.relative_noise(samples) if n >= 2 else float("inf")
            if noise > self.max_noise:
                unmet.append(f"noise {noise:.2%} > {self.max_noise:.2%}")
            return StopDecision(
                True, f"timeout {self.max_time_s:g}s" + (f" (unmet: {', '.join(unmet)})" if unmet else "")
            )
        if n < self.min_samples or elapsed_s < self.min_time_s or n % self.check_every:
            return StopDecision(False)
        noise = self.relative_noise(samples)
        if noise <= self.max_noise:
            return StopDecision(True, f"noise {noise:.2%} <= {self.max_noise:.2%} after {n} samples")
        return StopDecision(False)
