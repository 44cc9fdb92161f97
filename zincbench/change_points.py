"""Change points in a benchmark's history: where a series of runs (one median and its confidence interval
per commit) steps to another level.

The rule, the same two-part test as every comparison in zincbench.judge (a practical threshold and
statistical evidence):

- the history is cut into segments of consecutive runs; a segment's level is the median of its runs'
  medians and its interval is the envelope of its runs' intervals (lowest lower bound to highest upper
  bound);
- a boundary between two adjacent segments is a step only when their intervals do not overlap (every run
  on one side is clearly above every run on the other), their levels differ by at least ``min_change``
  (relative to the earlier level), and both segments hold at least ``min_runs`` runs, except the newest
  one: a regression shows at the commit that made it, while one outlying run in the middle of the history
  is not taken for two steps (there and back).

Segments are found bottom-up: every run starts as its own segment, and while some adjacent pair fails the
rule, the pair whose levels are closest is merged. What is left are boundaries that all pass.
Medians must be positive (they are times).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Step:
    """A change of level at run ``index`` (the first run of the new segment)."""

    index: int
    before: float  # the level of the segment before
    after: float  # the level from ``index`` on
    before_interval: tuple[float, float]
    after_interval: tuple[float, float]

    @property
    def ratio(self) -> float:
        return self.after / self.before


def _real(
    levels: np.ndarray, lows: np.ndarray, highs: np.ndarray, sizes: np.ndarray, min_change: float, min_runs: int
) -> np.ndarray:
    """For each adjacent pair of segments: whether the boundary between them passes the rule."""
    apart = (highs[:-1] < lows[1:]) | (highs[1:] < lows[:-1])
    change = np.abs(levels[1:] / levels[:-1] - 1.0)
    long_enough = sizes >= min_runs
    long_enough[-1] = True  # the newest segment may be short: a regression shows at its first commit
    return apart & (change >= min_change) & long_enough[:-1] & long_enough[1:]


def find_steps(
    medians: Sequence[float], lows: Sequence[float], highs: Sequence[float], min_change: float, min_runs: int = 1
) -> list[Step]:
    """The steps of one history, oldest first. ``medians[i]`` is run i's median, ``[lows[i], highs[i]]``
    its interval (a missing bound, NaN, counts as the median itself: no evidence beyond the point)."""
    values = np.asarray(medians, dtype=float)
    if values.size < 2:
        return []
    lo = np.fmin(np.asarray(lows, dtype=float), values)  # fmin/fmax: a NaN bound falls back to the median
    hi = np.fmax(np.asarray(highs, dtype=float), values)
    starts = np.arange(values.size)  # first run of each segment
    levels, seg_lo, seg_hi = values.copy(), lo.copy(), hi.copy()
    while starts.size > 1:
        sizes = np.diff(np.append(starts, values.size))
        failing = ~_real(levels, seg_lo, seg_hi, sizes, min_change, min_runs)
        if not failing.any():
            break
        gaps = np.where(failing, np.abs(np.log(levels[1:] / levels[:-1])), np.inf)
        j = int(np.argmin(gaps))  # merge segment j+1 into segment j
        end = starts[j + 2] if j + 2 < starts.size else values.size
        levels[j] = float(np.median(values[starts[j] : end]))
        seg_lo[j], seg_hi[j] = min(seg_lo[j], seg_lo[j + 1]), max(seg_hi[j], seg_hi[j + 1])
        starts, levels = np.delete(starts, j + 1), np.delete(levels, j + 1)
        seg_lo, seg_hi = np.delete(seg_lo, j + 1), np.delete(seg_hi, j + 1)
    return [
        Step(
            index=int(starts[k]),
            before=float(levels[k - 1]),
            after=float(levels[k]),
            before_interval=(float(seg_lo[k - 1]), float(seg_hi[k - 1])),
            after_interval=(float(seg_lo[k]), float(seg_hi[k])),
        )
        for k in range(1, starts.size)
    ]
