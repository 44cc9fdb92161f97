"""Bencher Metric Format (BMF) JSON, what Bencher's ``json`` adapter reads: ``{benchmark: {measure:
{value, lower_value, upper_value}}}``. One benchmark per series (family/case/variant on GPU), the latest
run's median in Bencher's built-in ``latency`` measure (nanoseconds), its confidence interval as the
lower and upper values (left out where the run recorded none)."""

from __future__ import annotations

import json
import math

from zincbench.history import History

MEASURE = "latency"  # Bencher's built-in Latency measure, in nanoseconds


def to_bmf(history: History) -> dict:
    out = {}
    for series in history.series:
        run = series.latest
        value = run.median_us * 1e3
        metric = {"value": value}
        lo, hi = run.interval_us
        if math.isfinite(lo) and math.isfinite(hi):
            metric.update(lower_value=min(lo * 1e3, value), upper_value=max(hi * 1e3, value))
        out[series.key.label] = {MEASURE: metric}
    return out


def to_text(history: History) -> str:
    return json.dumps(to_bmf(history), indent=1, allow_nan=False) + "\n"
