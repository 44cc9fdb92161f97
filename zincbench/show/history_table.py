"""``zincbench history``'s terminal view: current regressions first, then one table per family x GPU with
each case x variant's latest median, its best, the latest run against the previous one (ratio interval and
verdict) and the newest step with the commit that made it, then every step of every series; at 80 columns
(zincbench.show.fit)."""

from __future__ import annotations

import math

from rich.console import Console
from rich.markup import escape

from zincbench.change_points import Step
from zincbench.history import History, Run, Series
from zincbench.show.fit import print_in_column_groups

HEADERS = ["case", "variant", "runs", "latest µs", "best µs", "best at", "vs previous", "verdict", "last step"]


def us(value: float) -> str:
    """Four significant digits at most, never an exponent (a column of times reads at a glance)."""
    if not math.isfinite(value):
        return "—"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def percent(ratio: float) -> str:
    return "—" if not math.isfinite(ratio) else f"{(ratio - 1) * 100:+.1f}%"


def short_commit(run: Run) -> str:
    """7 hex digits (with -dirty: the tree had changes), or the run id of a document without a commit."""
    if not run.commit:
        return run.label
    head, dirty, _ = run.commit.partition("-dirty")
    return head[:7] + ("-dirty" if dirty else "")


def change_text(series: Series) -> tuple[str, str]:
    """'+4.1% [+3.2,+5.0]' (the ratio's interval in percent) and the verdict of the latest run against the
    previous one."""
    if series.change is None:
        return "—", "—"
    lo, hi = series.change.ci
    finite = math.isfinite(lo) and math.isfinite(hi)
    interval = f" [{(lo - 1) * 100:+.1f},{(hi - 1) * 100:+.1f}]" if finite else ""
    return percent(series.change.ratio) + interval, series.change.verdict.value


def step_text(series: Series, step: Step) -> str:
    return f"{percent(step.ratio)} @{short_commit(series.runs[step.index])}"


def cells(series: Series) -> list[str]:
    best = series.best
    change, verdict = change_text(series)
    return [
        series.key.case,
        series.key.variant,
        str(len(series.runs)),
        us(series.latest.median_us),
        us(best.median_us),
        short_commit(best),
        change,
        verdict,
        step_text(series, series.steps[-1]) if series.steps else "—",
    ]


def print_history(history: History, console: Console | None = None) -> None:
    console = console or Console()
    console.print(
        f"{history.documents} microbench documents, {len(history.series)} series, ordered by "
        f"document timestamp (when each run was recorded). A step: adjacent segments whose median "
        f"intervals do not overlap and differ by >= {history.rules.min_change:.0%} "
        f"(experiments/history.yaml).",
        markup=False,
        highlight=False,
    )
    regressions = history.regressions
    console.print(f"Current regressions: {len(regressions) or 'none'}", markup=False, highlight=False)
    for series in regressions:
        console.print(
            f"  {series.key.name} on {series.key.gpu}: {step_text(series, series.regression)}",
            markup=False,
            highlight=False,
        )
    groups: dict[tuple[str, str], list[Series]] = {}
    for series in history.series:
        groups.setdefault((series.key.family, series.key.gpu), []).append(series)
    for (family, gpu), members in groups.items():
        print_in_column_groups(
            console,
            escape(f"{family} on {gpu}"),
            [escape(h) for h in HEADERS],
            [[escape(c) for c in cells(s)] for s in members],
            keys=2,
            right=range(2, 5),
        )
    stepped = [s for s in history.series if s.steps]
    console.print("Steps, oldest first:" + ("" if stepped else " none"), markup=False, highlight=False)
    for series in stepped:
        console.print(
            f"  {series.key.label}: {', '.join(step_text(series, step) for step in series.steps)}",
            markup=False,
            highlight=False,
        )
    for note in history.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
