"""Views of profile tables: rich (terminal), markdown, CSV files and a PNG bar chart of category shares."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pandas as pd
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from zincbench.errors import EnvironmentProblem
from zincbench.profile.parse import ProfileTables
from zincbench.show.fit import fits, print_stacked


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


_TITLES = {
    "categories": "GPU time per category",
    "kernels": "Kernels (and GPU memory operations)",
    "ranges": "NVTX ranges (innermost enclosing range at launch)",
    "traffic": "DRAM bytes: ncu vs traffic model",
}


def _count(value) -> str:
    return f"{int(value):,}"


# Column -> (header, formatter); columns a frame lacks are left out.
_COLUMNS = {
    "category": ("category", str),
    "name": ("kernel", str),
    "range": ("range", str),
    "variant": ("variant", str),
    "shape": ("shape", str),
    "kernels": ("kernels", _count),
    "calls": ("calls", _count),
    "launches": ("launches", _count),
    "invocations": ("invocations", _count),
    "instances": ("instances", _count),
    "total_ns": ("total", format_ns),
    "share": ("share", "{:.1%}".format),
    "median_ns": ("median", format_ns),
    "mean_ns": ("mean", format_ns),
    "range_total_ns": ("range CPU time", format_ns),
    "dram_read_bytes": ("DRAM read", format_bytes),
    "dram_write_bytes": ("DRAM write", format_bytes),
    "measured_bytes": ("measured/inv.", format_bytes),
    "model_bytes": ("model", format_bytes),
    "measured_over_model": ("measured/model", "{:.2f}".format),
}
_NAME_COLUMNS = {"name", "range"}
_NUMERIC = {
    "kernels",
    "calls",
    "launches",
    "invocations",
    "instances",
    "total_ns",
    "mean_ns",
    "median_ns",
    "range_total_ns",
    "share",
    "dram_read_bytes",
    "dram_write_bytes",
    "measured_bytes",
    "model_bytes",
    "measured_over_model",
}


SHORT_NAME_CHARS = 40
_CAST = re.compile(r"\((?:unsigned |signed )?\w+\)(?=-?\d)")  # (int)4 -> 4


def _strip_trailing_group(text: str, open_: str, close: str) -> tuple[str, str]:
    """Split ``name(args)`` into (name, "(args)") at the balanced group that ends the text."""
    if not text.endswith(close):
        return text, ""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {close: 1, open_: -1}.get(text[i], 0)
        if depth == 0:
            return text[:i], text[i:]
    return text, ""


def short_kernel_name(name: str, limit: int = SHORT_NAME_CHARS) -> str:
    """A demangled kernel name that fits a table cell: no return type, no parameter list, template
    arguments without casts or spaces, and ``<...>`` in their place when still too long. Tables on
    a terminal use it; CSV, JSON and markdown keep the full name."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    if not text.startswith("["):  # "[CUDA memcpy ...]" is no function
        text, _ = _strip_trailing_group(text, "(", ")")
    text = _CAST.sub("", text).replace(", ", ",")
    if len(text) > limit and text.endswith(">"):
        base, _ = _strip_trailing_group(text, "<", ">")
        text = base + "<...>"
    if len(text) > limit and text.count("::") > 1:  # cub::CUB_300102_SM_..::detail::scan::Kernel
        parts = text.split("::")
        text = f"{parts[0]}::...::{parts[-1]}"
    return text


def display_rows(
    frame: pd.DataFrame, top: int | None = None, *, short_names: bool = False
) -> tuple[list[str], list[list[str]], bool]:
    """Headers, formatted rows (at most ``top``) and whether rows were cut: the one formatting rich and
    markdown share. ``short_names`` shortens kernel names (terminal tables)."""
    columns = [c for c in _COLUMNS if c in frame.columns]
    shown = frame if top is None else frame.head(top)
    rows = []
    for record in shown[columns].itertuples(index=False):
        cells = []
        for column, value in zip(columns, record):
            missing = value is None or (isinstance(value, float) and math.isnan(value))
            cells.append("-" if missing else _COLUMNS[column][1](value))
            if short_names and column == "name" and not missing:
                cells[-1] = short_kernel_name(cells[-1])
        rows.append(cells)
    return [_COLUMNS[c][0] for c in columns], rows, top is not None and len(frame) > top


TABLE_NAMES = tuple(_TITLES)


def sections(
    tables: ProfileTables, traffic: pd.DataFrame | None = None, only: tuple[str, ...] | list[str] = ()
) -> list[tuple[str, pd.DataFrame]]:
    """(name, frame) per table, in ``TABLE_NAMES`` order; ``only`` keeps the named ones."""
    out = [("categories", tables.categories), ("kernels", tables.kernels), ("ranges", tables.ranges)]
    if traffic is not None and not traffic.empty:
        out.append(("traffic", traffic))
    return [(key, frame) for key, frame in out if not only or key in only]


TERMINAL_TOP = 8  # rows per kernel/range table on a terminal: a profile reads in a CI log of 32 lines x 80
# Left out, in turn, while a table is wider than the terminal: first what the others imply (mean and median are
# total / calls), then what another table or --json says (the kernels' category, the ranges' CPU time).
NARROW_DROPS = (("median_ns", "mean_ns"), ("category", "instances", "range_total_ns"))


def _terminal_table(
    heading: str, headers: list[str], columns: list[str], rows: list[list[str]], keep: list[int]
) -> Table:
    """A box-less table (one line per row, a plain header): profiles are read in CI logs, where lines count."""
    table = Table(title=heading, title_justify="left", box=None, header_style="bold", pad_edge=False, show_edge=False)
    for i in keep:
        table.add_column(headers[i], justify="right" if columns[i] in _NUMERIC else "left", no_wrap=True)
    for row in rows:
        table.add_row(*(escape(row[i]) for i in keep))
    table.min_width = cell_len(heading)  # the title wraps at the table's width: keep it on one line
    return table


def render(
    tables: ProfileTables,
    console: Console | None = None,
    *,
    top: int = TERMINAL_TOP,
    traffic: pd.DataFrame | None = None,
    title: str | None = None,
    only: tuple[str, ...] | list[str] = (),
) -> None:
    """The tables for a terminal: box-less, at most ``top`` rows per kernel/range table; when a table is wider
    than the terminal the columns of ``NARROW_DROPS`` are left out in turn, and when it still is, each name
    gets a line of its own (names are never cut: --json, --out and markdown keep every row and column)."""
    console = console or Console()
    if title:
        console.rule(title)
    for key, frame in sections(tables, traffic, only):
        if frame.empty:
            console.print(f"[dim]{_TITLES[key]}: none[/dim]")
            continue
        headers, rows, cut = display_rows(frame, None if key == "categories" else top, short_names=True)
        columns = [c for c in _COLUMNS if c in frame.columns]
        heading = _TITLES[key] + (f" (top {top} of {len(frame)})" if cut else "")
        every = list(range(len(columns)))
        named = next((i for i, c in enumerate(columns) if c in _NAME_COLUMNS), None)
        layouts, dropped = [every], set()
        for drops in NARROW_DROPS if named is not None else ():
            dropped |= set(drops)
            layouts.append([i for i in every if columns[i] not in dropped])
        narrow = layouts[-1]
        for keep in layouts:
            table = _terminal_table(heading, headers, columns, rows, keep)
            if fits(console, table):
                console.print(table)
                break
        else:
            if named is None:
                console.print(_terminal_table(heading, headers, columns, rows, every))
                continue
            # still too wide: each name on its own line, its numbers on the next
            print_stacked(
                console,
                heading,
                [escape(headers[i]) for i in narrow],
                [[escape(r[i]) for i in narrow] for r in rows],
                keys=[narrow.index(named)],
                right={j for j, i in enumerate(narrow) if columns[i] in _NUMERIC},
            )
    for note in tables.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


def to_markdown(
    tables: ProfileTables,
    *,
    top: int = 20,
    traffic: pd.DataFrame | None = None,
    only: tuple[str, ...] | list[str] = (),
) -> str:
    """The tables as markdown (numbers right-aligned, full kernel names), then the notes; ``only`` keeps
    the named tables (``TABLE_NAMES``)."""
    parts = [f"Profile of `{tables.source}` ({tables.format})", ""]
    for key, frame in sections(tables, traffic, only):
        headers, rows, cut = display_rows(frame, None if key == "categories" else top)
        columns = [c for c in _COLUMNS if c in frame.columns]
        parts.append(f"**{_TITLES[key]}**" + (f" (top {top} of {len(frame)})" if cut else ""))
        parts.append("")
        if not rows:
            parts += ["none", ""]
            continue
        escape = lambda cell: cell.replace("|", "\\|")  # noqa: E731 - kernel names may hold '|'
        parts.append("| " + " | ".join(headers) + " |")
        parts.append("|" + "|".join("--:" if c in _NUMERIC else "---" for c in columns) + "|")
        parts += ["| " + " | ".join(escape(c) for c in row) + " |" for row in rows]
        parts.append("")
    parts += [f"- note: {note}" for note in tables.notes]
    return "\n".join(parts).rstrip() + "\n"


def write_csvs(
    tables: ProfileTables, directory: str | os.PathLike, stem: str, traffic: pd.DataFrame | None = None
) -> list[Path]:
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
        from zincbench.install import extra_hint

        raise EnvironmentProblem(f"the category chart needs matplotlib: {extra_hint('plot')}") from None
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
