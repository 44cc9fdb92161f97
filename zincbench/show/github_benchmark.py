"""github-action-benchmark's ``customSmallerIsBetter`` input: a JSON list of ``{name, unit, value, range,
extra}``. One entry per series (family/case/variant on GPU): the latest run's median in nanoseconds,
``range`` the half-width of its confidence interval, ``extra`` (the chart's tooltip) the commit, the
interval itself and the number of samples."""

from __future__ import annotations

import json
import math

from zincbench.history import History

UNIT = "ns"


def to_github_benchmark(history: History) -> list[dict]:
    out = []
    for series in history.series:
        run = series.latest
        value = run.median_us * 1e3
        entry = {"name": series.key.label, "unit": UNIT, "value": value}
        lo, hi = run.interval_us
        extra = [f"commit {run.label}", f"recorded {run.timestamp.isoformat()}"]
        if math.isfinite(lo) and math.isfinite(hi):
            entry["range"] = f"± {(hi - lo) * 1e3 / 2:.4g}"
            extra.append(f"median CI [{lo * 1e3:.6g}, {hi * 1e3:.6g}] ns")
        extra.append(f"{len(run.samples_us)} samples")
        entry["extra"] = "\n".join(extra)
        out.append(entry)
    return out


def to_text(history: History) -> str:
    return json.dumps(to_github_benchmark(history), indent=1, allow_nan=False) + "\n"
