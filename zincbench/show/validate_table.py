"""A validate report as a rich table (terminal) or a markdown table (PR descriptions, READMEs)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from zincbench.runs.validate import ModelOutcome, Status, ValidateReport
from zincbench.show.fit import fits, print_blocks

STATUS_STYLE = {Status.OK: "bold green", Status.FAIL: "bold red", Status.ERROR: "bold red", Status.MISSING: "yellow"}
COLUMNS = ("model", "status", "match", "tf", "diverges", "margin", "note")
NUMERIC = {"match", "tf", "diverges", "margin"}
LEGEND = (
    "match: leading tokens equal to llama.cpp's; tf: teacher-forced agreement; diverges: first differing "
    "position; margin: llama.cpp's top1-top2 logit there (tolerant mode forgives only a margin below --near-tie)"
)


def _cells(o: ModelOutcome) -> list[str]:
    """Plain text of one row, in COLUMNS order: leading match k/n, teacher-forced m/n, first
    divergent position, llama.cpp's top1-top2 logit margin there; "—" where it does not apply."""
    match = f"{o.match}/{o.n_gen}" if o.match is not None else "—"
    tf = f"{o.tf_match}/{o.tf_total}" if o.tf_match is not None else "—"
    divergence = str(o.first_divergence) if o.first_divergence is not None else "—"
    margin = f"{o.margin:.3f}" if o.margin is not None else "—"
    forgiven = [f"forgave {f['position']} ({f['why']})" for f in o.forgiven or []]
    # the reason always shows: a forgiven near-tie is said beside it, never instead of it
    note = "; ".join(forgiven + (["near-tie"] if o.near_tie and not forgiven else []) + [o.reason])
    return [o.model, o.status.value, match, tf, divergence, margin, note]


def verdict_line(report: ValidateReport) -> str:
    return f"=== {report.summary} ==="


def render(report: ValidateReport) -> Table:
    table = Table(title=f"validate, mode {report.mode}", title_justify="left")
    for name in COLUMNS:
        table.add_column(name, justify="right" if name in NUMERIC else "left", no_wrap=name != "note")
    for o in report.outcomes:
        table.add_row(*_styled(o, [escape(c) for c in _cells(o)]))
    return table


def _styled(o: ModelOutcome, cells: list[str]) -> list[str]:
    cells[1] = f"[{STATUS_STYLE[o.status]}]{cells[1]}[/]"
    return cells


def _print_outcomes(report: ValidateReport, console: Console) -> None:
    """The table when it fits; in a narrow terminal (a CI log) one block per model: status, then the
    model and its numbers, then the note wrapped under them."""
    table = render(report)
    if fits(console, table):
        console.print(table)
        return
    blocks = []
    for o in report.outcomes:
        model, status, *numbers, note = _styled(o, [escape(c) for c in _cells(o)])
        fields = " · ".join(f"{name} {value}" for name, value in zip(COLUMNS[2:-1], numbers))
        blocks.append((status, f"[bold]{model}[/] · {fields}", note))
    print_blocks(console, table.title, blocks)


def print_report(report: ValidateReport, console: Console | None = None) -> None:
    console = console or Console()
    _print_outcomes(report, console)
    console.print(LEGEND, style="dim", highlight=False)
    for o in report.outcomes:
        if o.status is Status.ERROR and o.stderr_tail:
            console.print(f"[bold]{escape(o.model)}[/] stderr tail:", highlight=False)
            console.print(o.stderr_tail, markup=False, highlight=False, style="dim", overflow="fold")
    style = "bold green" if report.exit_code == 0 else "bold red"
    console.print(verdict_line(report), style=style, highlight=False)
    if report.path:
        console.print(f"results: {report.path}", highlight=False, markup=False, overflow="fold")


def to_markdown(report: ValidateReport) -> str:
    def row(cells) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    lines = [row(COLUMNS), row(["---"] * len(COLUMNS))]
    lines += [row(_cells(o)) for o in report.outcomes]
    return "\n".join(lines) + f"\n\n**{report.summary}** (mode: {report.mode})\n"
