"""Tables that read in a narrow terminal (a CI log is 80 columns): measure a table before printing it
and, when it is wider than the console, lay it out in fewer columns instead of letting rich squeeze
every cell into "E1…". Nothing is lost: --markdown and --json keep every column."""

from __future__ import annotations

from typing import Collection, Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


def fits(console: Console, renderable) -> bool:
    """Whether ``renderable`` prints at its natural width (no cell wrapped or cut)."""
    unbounded = console.options.update_width(1 << 20)  # rich clamps a measure to the width it is given
    return Measurement.get(console, unbounded, renderable).maximum <= console.width


def _longest_word(header: str) -> str:
    return max(header.split() or [""], key=cell_len)


def _table(
    title: str | None,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    columns: Sequence[int],
    keys: int,
    right: Collection[int],
    probe: bool = False,
    tight: bool = False,
) -> Table:
    """The table of ``columns``; a ``probe`` (to measure) gives each value header only its longest
    word, since printed headers wrap between words. ``tight``: each value column exactly as wide as its
    widest cell or header word (rich's own squeeze can fold a header word or overrun the width)."""
    if probe:
        headers = [h if i < keys else _longest_word(h) for i, h in enumerate(headers)]
    table = Table(title=title, title_justify="left")
    for i in columns:
        if i < keys:  # what identifies a row is never wrapped or cut
            table.add_column(headers[i], no_wrap=True)
        else:  # cells keep their width when the table is tight: the header wraps between words instead
            widest = max((Text.from_markup(r[i]).cell_len for r in rows), default=0)
            widest = max(widest, cell_len(_longest_word(headers[i])))
            table.add_column(
                headers[i],
                justify="right" if i in right else "left",
                overflow="fold",
                min_width=widest,
                width=widest if tight else None,
            )
    for row in rows:
        table.add_row(*(row[i] for i in columns))
    return table


def fits_whole(
    console: Console, headers: Sequence[str], rows: Sequence[Sequence[str]], *, keys: int, right: Collection[int] = ()
) -> bool:
    """Whether ``print_in_column_groups`` would print one table (every column beside the keys)."""
    return fits(console, _table(None, headers, rows, range(len(headers)), keys, right, probe=True))


def print_in_column_groups(
    console: Console,
    title: str | None,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    keys: int,
    right: Collection[int] = (),
) -> None:
    """One table when it fits; otherwise several, each with the ``keys`` leading columns and as many
    of the others as fit (titled "title (i/n)"), or one stacked listing when the keys alone leave
    no room. Cells must fit whole; long headers wrap between words."""
    if not headers:
        return
    key_columns = list(range(keys))
    if not all(
        fits(console, _table(None, headers, rows, key_columns + [i], keys, right, probe=True))
        for i in range(keys, len(headers))
    ):
        # some column does not fit beside the keys even alone: the keys get a line of their own
        print_stacked(console, title or "", headers, rows, keys=key_columns, right=set(right))
        return
    groups: list[list[int]] = [[]]
    for i in range(keys, len(headers)):
        trial = groups[-1] + [i]
        if groups[-1] and not fits(console, _table(None, headers, rows, key_columns + trial, keys, right, probe=True)):
            groups.append([i])
        else:
            groups[-1] = trial
    for n, group in enumerate(groups, 1):
        shown = title if len(groups) == 1 or not title else f"{title} ({n}/{len(groups)})"
        table = _table(shown, headers, rows, key_columns + group, keys, right)
        if not fits(console, table):  # whole headers do not fit: wrap them, every column at its least width
            table = _table(shown, headers, rows, key_columns + group, keys, right, tight=True)
        # a title wraps at its table's width: a narrow group would fold a long binary or model name in it
        table.min_width = min(cell_len(shown or ""), console.width)
        console.print(table)


def print_stacked(
    console: Console,
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    keys: Sequence[int],
    right: set[int] = frozenset(),
) -> None:
    """Each row as two lines: its ``keys`` cells alone (long names get the full width), then the other
    cells in aligned columns under one shared header (headers wrap to their column's width)."""
    others = [i for i in range(len(headers)) if i not in keys]
    # a column is as wide as its widest cell or its header's longest word: a header never stands one letter a line
    widths = {
        i: max([Text.from_markup(r[i]).cell_len for r in rows] + [cell_len(_longest_word(headers[i]))]) for i in others
    }

    def table(header: bool) -> Table:
        t = Table(box=None, show_header=header, padding=(0, 1), show_edge=False)
        for i in others:
            t.add_column(headers[i], width=widths[i], overflow="fold", justify="right" if i in right else "left")
        return t

    if title:
        console.print(title, highlight=False)
    console.print(f"[bold]{' · '.join(headers[i] for i in keys)}[/bold]")
    console.print(table(header=True))
    for row in rows:
        console.print(" · ".join(row[i] for i in keys), overflow="fold", highlight=False)
        body = table(header=False)
        body.add_row(*(row[i] for i in others))
        console.print(body)


def print_blocks(console: Console, title: str, blocks: Sequence[tuple[str, str, str]]) -> None:
    """The narrow form of a table whose rows are a status, a head line (a name and short fields) and
    prose: one block per row, the status in a column of its own, the prose wrapped under the head.
    Cells are rich markup (escape what is not)."""
    console.print(title, highlight=False, markup=False)
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for status, head, prose in blocks:
        grid.add_row(status, f"{head}\n{prose}" if prose else head)
    console.print(grid)
