"""Microbench rows made up rather than measured: a timed row from given samples, shaped as the runner
writes it. For tests and for scripts that build long synthetic histories (scripts/history_bench.py)."""

from __future__ import annotations

from zincbench.bench.base import CheckResult
from zincbench.bench.rows import Floor, MicrobenchRow, Summary
from zincbench.measure.timer import Measurement


def timed_row(
    case: str,
    variant: str,
    samples,
    *,
    family: str = "t2",
    params: dict | None = None,
    role: str = "candidate",
    detail: dict | None = None,
    tolerance: float = 1e-3,
) -> MicrobenchRow:
    """A row that passed its check and was timed at ``samples`` (µs)."""
    samples = [float(x) for x in samples]
    measurement = Measurement(
        name=f"{family}/{variant}/{case}",
        mode="cold",
        gpu_us=samples,
        cpu_launch_us=[],
        sm_clock_mhz=[],
        throttled=[],
        dropped_throttled=0,
        stop_reason="count",
        warmup=3,
        launch_hiding=True,
    )
    return MicrobenchRow(
        family=family,
        case=case,
        params=params or {},
        variant=variant,
        role=role,
        check=CheckResult(rel_error=1e-6, fully_written=True, tolerance=tolerance),
        traffic={},
        detail=detail,
        reference={},
        floor=Floor(us=None, bound=None),
        measurement=measurement,
        summary=Summary.of_samples(samples),
    )
