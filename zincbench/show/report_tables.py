"""``zincbench report``'s views of a merged ``report.Report``: one table per microbench family and one for
validate (median/p90 or status per run, a column per run), each ab run's scoreboard, then the notes; as
rich tables (in column groups when the terminal is narrow) or markdown."""

from __future__ import annotations

from zincbench.report import Report
from zincbench.show import scoreboard
from zincbench.show.fit import print_in_column_groups


def _us(value) -> str:
    return "—" if value is None else f"{value:.1f}"


def microbench_table(report: Report, family: str) -> tuple[list[str], list[list[str]]]:
    """Headers and cells of one family: case, variant, then median/p90 µs per run (a failed check says so)."""
    labels = report.labels("microbench", family)
    headers = ["case", "variant"] + [f"{label} median/p90 µs" for label in labels]
    cells = []
    for row in report.microbench:
        if row["family"] != family:
            continue
        line = [row["case"], row["variant"]]
        for label in labels:
            run = row["runs"].get(label)
            if run is None:
                line.append("—")
            elif run["check"] != "ok":
                line.append(run["check"])
            else:
                line.append(f"{_us(run['median_us'])} / {_us(run['p90_us'])}")
        cells.append(line)
    return headers, cells


def validate_table(report: Report) -> tuple[list[str], list[list[str]]]:
    labels = report.labels("validate")
    cells = []
    for row in report.validate:
        line = [row["model"]]
        for label in labels:
            run = row["runs"].get(label)
            match = f" {run['match']}/{run['n_gen']}" if run and run["match"] is not None else ""
            line.append(f"{run['status']}{match}" if run else "—")
        cells.append(line)
    return ["model", *labels], cells


def _md_table(headers: list[str], cells: list[list[str]]) -> str:
    def row(values) -> str:
        return "| " + " | ".join(str(v).replace("|", "\\|") for v in values) + " |"

    return "\n".join([row(headers), row(["---"] * len(headers)), *(row(c) for c in cells)])


def to_markdown(report: Report) -> str:
    parts = []
    for family in report.families:
        parts += [f"### microbench {family}", "", _md_table(*microbench_table(report, family)), ""]
    if report.validate:
        parts += ["### validate", "", _md_table(*validate_table(report)), ""]
    for run in report.ab:
        parts += [f"### ab · {run['run']} · {run['overall']}", "", scoreboard.to_markdown(run["models"], run["arms"])]
    if report.notes:
        parts += ["", *(f"- {note}" for note in report.notes)]
    return "\n".join(parts).rstrip() + "\n"


def print_report(report: Report, console=None) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = console or Console()
    # (title, table, leading key columns, whether the run columns are numbers, aligned right)
    tables = [(f"microbench {family}", microbench_table(report, family), 2, True) for family in report.families]
    if report.validate:
        tables.append(("validate", validate_table(report), 1, False))
    for title, (headers, cells), keys, numbers in tables:
        print_in_column_groups(console, title, [escape(h) for h in headers], [[escape(c) for c in line] for line in cells],
                               keys=keys, right=range(keys, len(headers)) if numbers else ())
    for run in report.ab:
        scoreboard.render(run["models"], run["arms"], console, title=f"ab · {run['run']} · {run['overall']}")
    for note in report.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
