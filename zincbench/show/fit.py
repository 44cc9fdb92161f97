"""Tables that read in a narrow terminal (a CI log is 80 columns): measure a table before printing it
and, when it is wider than the console, lay it out in fewer columns instead of letting rich squeeze
every cell into "E1…". Nothing is lost: --markdown and --json keep every column."""

from __future__ import annotations

from typing import Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table


def fits(console: Console, renderable) -> bool:
    """Whether ``renderable`` prints at its natural width (no cell wrapped or cut)."""
    unbounded = console.options.update_width(1 << 20)  # rich clamps a measure to the width it is given
    return Measurement.get(console, unbounded, renderable).maximum <= console.width


def _table(title: str | None, headers: Sequence[str], rows: Sequence[Sequence[str]], columns: Sequence[int],
           keys: int, justify: str, show_header: bool = True) -> Table:
    table = Table(title=title, title_justify="left", show_header=show_header)
    for i in columns:
        if i < keys:  # what identifies a row is never wrapped or cut
            table.add_column(headers[i], no_wrap=True)
        else:
            table.add_column(headers[i], justify=justify, overflow="fold")
    for row in rows:
        table.add_row(*(row[i] for i in columns))
    return table


def print_in_column_groups(console: Console, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], *,
                           keys: int, justify: str = "right") -> None:
    """One table when it fits; otherwise several, each with the ``keys`` leading columns and as many
    of the others as fit (titled "title (i/n)"), or one stacked listing when the keys alone leave
    no room. Only the cells must fit: long headers wrap."""
    key_columns = list(range(keys))
    if not all(fits(console, _table(None, headers, rows, key_columns + [i], keys, justify, False))
               for i in range(keys, len(headers))):
        # some column does not fit beside the keys even alone: the keys get a line of their own
        right = set(range(keys, len(headers))) if justify == "right" else set()
        print_stacked(console, title, headers, rows, keys=key_columns, right=right)
        return
    groups: list[list[int]] = [[]]
    for i in range(keys, len(headers)):
        trial = groups[-1] + [i]
        if groups[-1] and not fits(console, _table(None, headers, rows, key_columns + trial, keys, justify, False)):
            groups.append([i])
        else:
            groups[-1] = trial
    for n, group in enumerate(groups, 1):
        shown = title if len(groups) == 1 else f"{title} ({n}/{len(groups)})"
        console.print(_table(shown, headers, rows, key_columns + group, keys, justify))


def print_stacked(console: Console, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], *,
                  keys: Sequence[int], right: set[int] = frozenset()) -> None:
    """Each row as two lines: its ``keys`` cells alone (long names get the full width), then the other
    cells in aligned columns under one shared header (headers wrap to their column's width)."""
    others = [i for i in range(len(headers)) if i not in keys]
    widths = {i: max(cell_len(r[i]) for r in rows) if rows else cell_len(headers[i]) for i in others}

    def table(header: bool) -> Table:
        t = Table(box=None, show_header=header, padding=(0, 1), show_edge=False)
        for i in others:
            t.add_column(headers[i], width=widths[i], overflow="fold", justify="right" if i in right else "left")
        return t

    console.print(title, highlight=False)
    console.print(f"[bold]{' · '.join(headers[i] for i in keys)}[/bold]")
    console.print(table(header=True))
    for row in rows:
        console.print(" · ".join(row[i] for i in keys), overflow="fold", highlight=False)
        body = table(header=False)
        body.add_row(*(row[i] for i in others))
        console.print(body)
