"""A validate report as a rich table (terminal) or a markdown table (PR descriptions, READMEs)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from zincbench.runs.validate import ModelOutcome, Status, ValidateReport

STATUS_STYLE = {Status.OK: "bold green", Status.FAIL: "bold red", Status.ERROR: "bold red",
                Status.MISSING: "yellow"}
COLUMNS = ("model", "status", "match", "tf", "diverges", "margin", "note")
NUMERIC = {"match", "tf", "diverges", "margin"}
LEGEND = ("match: leading tokens equal to llama.cpp's; tf: teacher-forced agreement; diverges: first differing "
          "position; margin: llama.cpp's top1-top2 logit there (tolerant mode forgives only a margin below --near-tie)")


def _cells(o: ModelOutcome) -> list[str]:
    """Plain text of one row, in COLUMNS order: leading match k/n, teacher-forced m/n, first
    divergent position, llama.cpp's top1-top2 logit margin there; "—" where it does not apply."""
    match = f"{o.match}/{o.n_gen}" if o.match is not None else "—"
    tf = f"{o.tf_match}/{o.tf_total}" if o.tf_match is not None else "—"
    divergence = str(o.first_divergence) if o.first_divergence is not None else "—"
    margin = f"{o.margin:.3f}" if o.margin is not None else "—"
    forgiven = [f"forgave {f['position']} ({f['why']})" for f in o.forgiven]
    note = "; ".join(forgiven or (["near-tie"] if o.near_tie else []) + [o.reason])
    return [o.model, o.status.value, match, tf, divergence, margin, note]


def verdict_line(report: ValidateReport) -> str:
    return f"=== {report.summary} ==="


def render(report: ValidateReport) -> Table:
    table = Table(title=f"validate, mode {report.mode}", title_justify="left")
    for name in COLUMNS:
        table.add_column(name, justify="right" if name in NUMERIC else "left", no_wrap=name != "note")
    for o in report.outcomes:
        cells = _cells(o)
        cells[1] = f"[{STATUS_STYLE[o.status]}]{cells[1]}[/]"
        table.add_row(*cells)
    return table


def print_report(report: ValidateReport, console: Console | None = None) -> None:
    console = console or Console()
    console.print(render(report))
    console.print(LEGEND, style="dim", highlight=False)
    for o in report.outcomes:
        if o.status is Status.ERROR and o.stderr_tail:
            console.print(f"[bold]{o.model}[/] stderr tail:", highlight=False)
            console.print(o.stderr_tail, markup=False, highlight=False, style="dim")
    style = "bold green" if report.exit_code == 0 else "bold red"
    console.print(verdict_line(report), style=style, highlight=False)
    if report.path:
        console.print(f"results: {report.path}", highlight=False)


def to_markdown(report: ValidateReport) -> str:
    def row(cells) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    lines = [row(COLUMNS), row(["---"] * len(COLUMNS))]
    lines += [row(_cells(o)) for o in report.outcomes]
    return "\n".join(lines) + f"\n\n**{report.summary}** (mode: {report.mode})\n"
