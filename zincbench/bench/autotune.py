"""Pick the fastest of a small declared set of kernel configurations, per GPU and case, and cache it.

The cache (~/.cache/zincbench/autotune.json, or $ZINCBENCH_CACHE) is keyed by device name, family,
case and configuration set, so a warm cache makes a gate run skip tuning entirely.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Sequence

from zincbench.judge import summarize
from zincbench.measure.stopping.count import FixedCountRule

TUNE_SAMPLES = 15


def cache_path() -> Path:
    root = Path(os.environ.get("ZINCBENCH_CACHE", Path.home() / ".cache" / "zincbench"))
    return root / "autotune.json"


def _load() -> dict:
    try:
        return json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}


def _store(cache: dict) -> None:
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
    os.replace(tmp, path)


def choose(key: str, candidates: Sequence[str], make_run: Callable[[str], Callable[[], None]], timer) -> tuple[str, dict]:
    """The candidate with the lowest median cold time; ``make_run(c)`` returns an enqueue function
    (or raises ValueError when the candidate does not apply). Returns (choice, medians in µs)."""
    cache = _load()
    full_key = f"{key}|{','.join(candidates)}"
    if full_key in cache and cache[full_key]["choice"] in candidates:
        return cache[full_key]["choice"], cache[full_key]["medians_us"]
    medians = {}
    for cand in candidates:
        try:
            run = make_run(cand)
        except ValueError:
            continue
        m = timer.measure(run, name=f"autotune/{key}/{cand}", rule=FixedCountRule(TUNE_SAMPLES))
        medians[cand] = summarize(m.gpu_us).median
    if not medians:
        raise ValueError(f"no applicable configuration for {key}")
    choice = min(medians, key=medians.get)
    cache[full_key] = {"choice": choice, "medians_us": medians}
    _store(cache)
    return choice, medians
