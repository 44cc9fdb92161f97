"""Views of profile tables: rich (terminal), markdown, CSV files and a PNG bar chart of category shares."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from zincbench.errors import EnvironmentProblem
from zincbench.profile.parse import ProfileTables


def format_ns(ns: float) -> str:
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "-"
    if ns >= 1e6:
        return f"{ns / 1e6:,.2f} ms"
    return f"{ns / 1e3:,.1f} µs"


def format_bytes(n: float) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


_TITLES = {"categories": "GPU time per category", "kernels": "Kernels (and GPU memory operations)",
           "ranges": "NVTX ranges (innermost enclosing range at launch)", "traffic": "DRAM bytes: ncu vs traffic model"}


def _count(value) -> str:
    return f"{int(value):,}"


# Column -> (header, formatter); columns a frame lacks are left out.
_COLUMNS = {
    "category": ("category", str), "name": ("kernel", str), "range": ("range", str), "variant": ("variant", str),
    "shape": ("shape", str), "kernels": ("kernels", _count), "calls": ("calls", _count),
    "launches": ("launches", _count), "invocations": ("invocations", _count), "instances": ("instances", _count),
    "total_ns": ("total", format_ns), "share": ("share", "{:.1%}".format),
    "median_ns": ("median", format_ns), "mean_ns": ("mean", format_ns),
    "range_total_ns": ("range CPU time", format_ns),
    "dram_read_bytes": ("DRAM read", format_bytes), "dram_write_bytes": ("DRAM write", format_bytes),
    "measured_bytes": ("measured/inv.", format_bytes), "model_bytes": ("model", format_bytes),
    "measured_over_model": ("measured/model", "{:.2f}".format),
}
_NAME_COLUMNS = {"name", "range"}
_NUMERIC = {"kernels", "calls", "launches", "invocations", "instances", "total_ns", "mean_ns", "median_ns",
            "range_total_ns", "share", "dram_read_bytes", "dram_write_bytes", "measured_bytes", "model_bytes",
            "measured_over_model"}


def display_rows(frame: pd.DataFrame, top: int | None = None) -> tuple[list[str], list[list[str]], bool]:
    """Headers, formatted rows (at most ``top``) and whether rows were cut: the one formatting rich and markdown share."""
    columns = [c for c in _COLUMNS if c in frame.columns]
    shown = frame if top is None else frame.head(top)
    rows = []
    for record in shown[columns].itertuples(index=False):
        cells = []
        for column, value in zip(columns, record):
            missing = value is None or (isinstance(value, float) and math.isnan(value))
            cells.append("-" if missing else _COLUMNS[column][1](value))
        rows.append(cells)
    return [_COLUMNS[c][0] for c in columns], rows, top is not None and len(frame) > top


def sections(tables: ProfileTables, traffic: pd.DataFrame | None = None) -> list[tuple[str, pd.DataFrame]]:
    out = [("categories", tables.categories), ("kernels", tables.kernels), ("ranges", tables.ranges)]
    if traffic is not None and not traffic.empty:
        out.append(("traffic", traffic))
    return out


def render(tables: ProfileTables, console: Console | None = None, *, top: int = 20,
           traffic: pd.DataFrame | None = None, title: str | None = None) -> None:
    console = console or Console()
    if title:
        console.rule(title)
    for key, frame in sections(tables, traffic):
        if frame.empty:
            console.print(f"[dim]{_TITLES[key]}: none[/dim]")
            continue
        headers, rows, cut = display_rows(frame, None if key == "categories" else top)
        table = Table(title=_TITLES[key] + (f" (top {top} of {len(frame)})" if cut else ""), title_justify="left")
        for header, column in zip(headers, [c for c in _COLUMNS if c in frame.columns]):
            if column in _NAME_COLUMNS:  # the one column that folds when the terminal is narrow
                table.add_column(header, overflow="fold", min_width=24, ratio=1)
            else:
                table.add_column(header, justify="right" if column in _NUMERIC else "left", no_wrap=True)
        for row in rows:
            table.add_row(*row)
        console.print(table)
    for note in tables.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


def to_markdown(tables: ProfileTables, *, top: int = 20, traffic: pd.DataFrame | None = None) -> str:
    parts = [f"Profile of `{tables.source}` ({tables.format})", ""]
    for key, frame in sections(tables, traffic):
        headers, rows, cut = display_rows(frame, None if key == "categories" else top)
        parts.append(f"**{_TITLES[key]}**" + (f" (top {top} of {len(frame)})" if cut else ""))
        parts.append("")
        if not rows:
            parts += ["none", ""]
            continue
        escape = lambda cell: cell.replace("|", "\\|")  # noqa: E731 - kernel names may hold '|'
        parts.append("| " + " | ".join(headers) + " |")
        parts.append("|" + "|".join("---" for _ in headers) + "|")
        parts += ["| " + " | ".join(escape(c) for c in row) + " |" for row in rows]
        parts.append("")
    parts += [f"- note: {note}" for note in tables.notes]
    return "\n".join(parts).rstrip() + "\n"


def write_csvs(tables: ProfileTables, directory: str | os.PathLike, stem: str,
               traffic: pd.DataFrame | None = None) -> list[Path]:
    """``<stem>_<table>.csv`` for each non-empty table (unformatted numbers, ns and bytes)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for key, frame in sections(tables, traffic):
        if not frame.empty:
            path = out / f"{stem}_{key}.csv"
            frame.to_csv(path, index=False)
            written.append(path)
    return written


def write_category_chart(tables: ProfileTables, path: str | os.PathLike) -> Path:
    """A horizontal bar chart of GPU-time share per category. Needs matplotlib (the ``plot`` extra)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise EnvironmentProblem("the category chart needs matplotlib: pip install 'zincbench[plot]'") from None
    frame = tables.categories.iloc[::-1]  # largest at the top
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(frame) + 1.2))
    try:
        ax.barh(frame["category"], frame["share"] * 100)
        for y, share in enumerate(frame["share"]):
            ax.text(share * 100, y, f" {share:.1%}", va="center")
        ax.set_xlabel("share of GPU time (%)")
        ax.set_title(f"GPU time per kernel category\n{Path(tables.source).name}", fontsize=10)
        ax.set_xlim(0, min(100.0, float(frame["share"].max()) * 125 + 5) if len(frame) else 100.0)
        fig.tight_layout()
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(target, dpi=120)
    finally:
        plt.close(fig)
    return target
