"""A gate document as a rich table (terminal) or markdown (PR comments, GitHub's job summary).

``append_step_summary`` adds the markdown to the file named by ``$GITHUB_STEP_SUMMARY`` (GitHub
Actions shows it on the run's page); without the variable it does nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

STATUS_STYLE = {
    "NOTHING CHECKED": "bold yellow",
    "PASS": "bold green",
    "FAIL": "bold red",
    "ERROR": "bold red",
    "INCONCLUSIVE": "bold magenta",
    "SKIPPED": "yellow",
}
STATUS_ICON = {"PASS": "✅", "FAIL": "❌", "ERROR": "💥", "INCONCLUSIVE": "❔", "SKIPPED": "⏭️"}
COLUMNS = ("check", "kind", "status", "reason", "results")


def _cells(row: dict) -> list[str]:
    return [
        row["name"],
        row["kind"],
        row["status"],
        row["reason"],
        Path(row["results_file"]).name if row.get("results_file") else "—",
    ]


def verdict_line(doc: dict) -> str:
    verdict = doc.get("verdict") or {}
    counts = ", ".join(f"{n} {s.lower()}" for s, n in (verdict.get("counts") or {}).items() if n)
    state = "" if doc.get("complete", True) else " (incomplete)"
    if verdict.get("status") == "NOTHING CHECKED":
        counts = f"all {counts}: this machine ran none of the checks, so the gate says neither pass nor fail"
    return (
        f"gate {verdict.get('status', 'INCOMPLETE')}{state}: {counts or 'no checks'} "
        f"(exit {verdict.get('exit_code', '?')}{', strict' if verdict.get('strict') else ''})"
    )


def print_summary(doc: dict, console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from zincbench.show.fit import fits, print_blocks

    console = console or Console()
    title = f"zincbench gate · {(doc.get('config') or {}).get('gates_file', '')}"
    table = Table(title=title, title_justify="left")
    for name in COLUMNS:
        table.add_column(name, overflow="fold", no_wrap=name in ("check", "kind", "status"))
    for row in doc.get("results") or []:
        cells = [escape(c) for c in _cells(row)]
        cells[2] = f"[{STATUS_STYLE.get(row['status'], '')}]{cells[2]}[/]"
        table.add_row(*cells)
    if fits(console, table):
        console.print(table)
    else:  # narrow terminal: one block per check, its reason wrapped under its name
        blocks = []
        for row in doc.get("results") or []:
            name, kind, status, reason, results = (escape(c) for c in _cells(row))
            head = f"[bold]{name}[/] · {kind}" + (f" · {results}" if row.get("results_file") else "")
            blocks.append((f"[{STATUS_STYLE.get(row['status'], '')}]{status}[/]", head, reason))
        print_blocks(console, title, blocks)
    status = (doc.get("verdict") or {}).get("status")
    console.print(
        verdict_line(doc), style=STATUS_STYLE.get(status, "bold"), highlight=False, markup=False, soft_wrap=True
    )


def to_markdown(doc: dict) -> str:
    def row(cells) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    lines = ["### zincbench gate", "", row(COLUMNS), row(["---"] * len(COLUMNS))]
    for r in doc.get("results") or []:
        cells = _cells(r)
        cells[2] = f"{STATUS_ICON.get(r['status'], '')} {r['status']}"
        lines.append(row(cells))
    return "\n".join(lines) + f"\n\n**{verdict_line(doc)}**\n"


def append_step_summary(markdown: str, environ=os.environ) -> Path | None:
    """Append to $GITHUB_STEP_SUMMARY when it is set; returns the file written, if any."""
    target = environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    from zincbench.outputs import write_output

    return write_output(target, markdown + "\n", "$GITHUB_STEP_SUMMARY", append=True)
