"""The A/B scoreboard: one row per model, as a rich table or markdown (PR comments).

Input is the list of scoreboard rows an A/B records (``runs.ab_rows.ScoreboardRow``, ``verdict.models`` of
an ``ab`` results document), so a saved run can be shown again without re-measuring. Columns:
model | A prefill p90/median | B prefill p90/median | Δ prefill B/A with its interval (at the confidence of
the look that decided, see runs.sequential) | verdict | rounds run | failed runs | decode p90 A/B |
Δ decode | llama ppT | gap× (llama ppT ÷ the newest build's prefill p90) | shape. A p90 from fewer
than 10 runs is shown as "—" (it would be about the maximum).
With one arm the B and Δ columns are left out: that is the plan's p90 scoreboard of one build
against llama-bench.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from zincbench.runs.ab_rows import PairedRatio, ScoreboardRow

TEXT_COLUMNS = ("model", "verdict", "shape")
VERDICT_STYLE = {"faster": "green", "same": "cyan", "slower": "red", "inconclusive": "yellow", "error": "bold red"}


def _num(value) -> str:
    """Rates as the team's tables print them: whole tokens/s from 100 up, one decimal below."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}"


def _pair(first, second) -> str:
    return f"{_num(first)} / {_num(second)}"


def _delta(comparison: PairedRatio | None, with_ci: bool = True) -> str:
    if not comparison:
        return "—"
    ratio, (lo, hi) = comparison.ratio, comparison.ci
    if lo is None or hi is None or not with_ci:
        return f"{(ratio - 1) * 100:+.1f}%"
    return f"{(ratio - 1) * 100:+.1f}% [{(lo - 1) * 100:+.1f}, {(hi - 1) * 100:+.1f}]"


def _llama(summary: ScoreboardRow) -> str:
    llama = summary.llama
    if not llama:
        return "—"
    if "error" in llama:
        return "ERROR"
    pp = llama.get("pp")
    return f"{_num(pp['avg_ts'])} ({pp['test']})" if pp else "—"


def rounds_label(models: Sequence[ScoreboardRow]) -> str:
    """'6 rounds', or '6–14 rounds' when the adaptive A/B stopped at different rounds per model."""
    counts = sorted({s.rounds for s in models if s.rounds is not None})
    if not counts:
        return "no rounds"
    return f"{counts[0]} rounds" if len(counts) == 1 else f"{counts[0]}–{counts[-1]} rounds"


def arm_label(arm, binary) -> str:
    """'B=zinc (md5 1a2b3c4d) ZINC_MOE_TC=0': which build and which flags, for the scoreboard title."""
    md5 = arm.engine.describe().get("md5")
    parts = [f"{arm.name}={Path(binary).name}"] + ([f"(md5 {md5[:8]})"] if md5 else [])
    return " ".join(parts + [f"{k}={v}" for k, v in arm.env.items()])


def run_title(arms: Sequence, binaries: Sequence, gpu: dict, models: Sequence[ScoreboardRow], order: str) -> str:
    """The scoreboard's title: the builds compared (``runs.ab.Arm`` and its binary), the GPU of the results
    document's environment, the rounds run and their order."""
    builds = " vs ".join(arm_label(arm, binary) for arm, binary in zip(arms, binaries))
    device = gpu.get("name") or gpu.get("uuid") or "GPU unknown"
    return f"{builds} · {device} · {rounds_label(models)} {order}"


def display_rows(models: Sequence[ScoreboardRow], arms: Sequence[str]) -> list[dict[str, str]]:
    """Each model's row as formatted text, keyed by column header (shared by table and markdown)."""
    rows = []
    for s in models:
        row = {"model": s.model}
        for arm in arms:
            stats = s.arms[arm]
            row[f"{arm} prefill p90/med"] = _pair(stats.prefill_p90, stats.prefill_median)
        if len(arms) == 2:
            row["Δ prefill B/A [CI]"] = _delta(s.prefill)
        row["verdict"] = s.verdict
        row["rounds"] = "—" if s.rounds is None else str(s.rounds)
        row["failed"] = str(len(s.errors) if s.failed_runs is None else s.failed_runs)  # a row from before failed_runs
        row["decode p90 " + "/".join(arms)] = " / ".join(_num(s.arms[a].decode_p90) for a in arms)
        if len(arms) == 2:
            row["Δ decode"] = _delta(s.decode, with_ci=False)
        row["llama ppT"] = _llama(s)
        row["gap×"] = "—" if s.gap is None else f"{s.gap:.1f}×"
        row["shape"] = s.shape or "—"
        rows.append(row)
    return rows


def render(models: Sequence[ScoreboardRow], arms: Sequence[str], console=None, title: str | None = None) -> None:
    """One row per model; in a narrow terminal the columns come in groups, the model repeated."""
    from rich.console import Console
    from rich.markup import escape

    from zincbench.show.fit import print_in_column_groups

    console = console or Console()
    rows = display_rows(models, arms)
    headers = list(rows[0]) if rows else []
    cells = []
    for row, s in zip(rows, models):
        line = {h: escape(v) for h, v in row.items()}
        style = VERDICT_STYLE.get(s.verdict)
        if style:
            line["verdict"] = f"[{style}]{line['verdict']}[/]"
        cells.append(list(line.values()))
    print_in_column_groups(
        console,
        title,
        [escape(h) for h in headers],
        cells,
        keys=1,
        right=[i for i, h in enumerate(headers) if h not in TEXT_COLUMNS],
    )


def to_markdown(models: Sequence[ScoreboardRow], arms: Sequence[str], title: str | None = None) -> str:
    rows = display_rows(models, arms)
    headers = list(rows[0]) if rows else []
    lines = [f"**{title}**", ""] if title else []
    lines.append("| " + " | ".join(headers) + " |")
    lines.append("|" + "|".join("---" if h in TEXT_COLUMNS else "---:" for h in headers) + "|")
    for row in rows:
        lines.append("| " + " | ".join(v.replace("|", "\\|") for v in row.values()) + " |")
    return "\n".join(lines) + "\n"
