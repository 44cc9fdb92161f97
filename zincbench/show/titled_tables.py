"""A family view made of titled tables, each ``(title, headers, rows, notes)``: printed in column groups
that fit the console, or as markdown sections. The first two columns are the row keys; the others are
right-aligned numbers."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from zincbench.show.fit import print_in_column_groups

TitledTable = tuple[str, list[str], list[list[str]], list[str]]


def print_tables(tables: list[TitledTable], console: Console) -> None:
    for title, headers, rows, notes in tables:
        cells = [[escape(cell) for cell in row] for row in rows]  # names from the document are text, not markup
        print_in_column_groups(console, title, headers, cells, keys=2, right=range(1, len(headers)))
        for note in notes:
            console.print(note, markup=False, highlight=False)


def markdown_tables(tables: list[TitledTable]) -> str:
    parts = []
    for title, headers, rows, notes in tables:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        parts.append("\n".join([f"### {title}", "", *lines, "", *(f"- {n}" for n in notes)]))
    return "\n\n".join(parts)
