"""``zincbench report``'s views of a merged ``report.Report``: one table per microbench family and one for
validate (median/p90 or status per run, a column per run), each ab run's scoreboard, then the notes; as
rich tables (in column groups when the terminal is narrow) or markdown. With ``family_tables``, each
microbench run's own tables, as ``zincbench microbench`` shows them after its common one (its family's
view, the stage tables), take the place of its family's merged table: short enough to quote in a doc."""

from __future__ import annotations

from zincbench.report import Report, check_fields
from zincbench.show import scoreboard
from zincbench.show.fit import fits, fits_whole, print_in_column_groups
from zincbench.show.microbench_table import family_markdown, family_parts, print_family_tables


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


def _cell(run: dict | None) -> str:
    if run is None:
        return "—"
    if run["check"] != "ok":
        return run["check"]
    return f"{_us(run['median_us'])} / {_us(run['p90_us'])}"


def _short_labels(labels: list[str]) -> tuple[str, list[str]]:
    """(the device every label starts with, or "", and the labels without it): runs of one GPU are named by
    their run id alone, the device said once in the title."""
    parts = [label.split(" · ", 1) for label in labels]
    devices = {p[0] for p in parts}
    if len(devices) == 1 and all(len(p) == 2 for p in parts):
        return devices.pop(), [p[1] for p in parts]
    return "", labels


def microbench_long_table(report: Report, family: str) -> tuple[str, list[str], list[list[str]]]:
    """One family's runs as rows (case, variant, run, median/p90 µs): the one table a narrow terminal can
    hold whatever the number of runs; a run without a case x variant has no row (no "—" rows)."""
    labels = report.labels("microbench", family)
    device, short = _short_labels(labels)
    cells = [
        [row["case"], row["variant"], name, _cell(row["runs"][label])]
        for row in report.microbench
        if row["family"] == family
        for label, name in zip(labels, short)
        if label in row["runs"]
    ]
    return device, ["case", "variant", "run", "median/p90 µs"], cells


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


def family_documents(report: Report) -> list[tuple[str, dict]]:
    """(heading, document) of each microbench run with tables after the common one, in the order given: the
    document with its rows back in their recorded shape (what the views read), checked for the fields those
    tables read, so that a damaged one is one InputError naming the file and field before anything is
    shown. The heading names the family and the run where the report has several runs, else it is ""."""
    out = []
    for source in report.of_kind("microbench"):
        doc = {**source.doc, "results": [row.to_json() for row in source.doc.get("results") or []]}
        for part in family_parts(doc):
            check_fields(doc, part.FIELDS, str(source.path), part.REQUIRED)
        if family_markdown(doc):
            family = doc["config"].get("family")
            heading = f"{family} · {source.label}" if family else source.label
            out.append((heading if len(report.sources) > 1 else "", doc))
    return out


def _merged_families(report: Report, documents: list[tuple[str, dict]]) -> list[str]:
    """The microbench families shown as a merged table: those whose runs' own tables are not shown instead."""
    own = {doc["config"].get("family") for _, doc in documents}
    return [family for family in report.families if family not in own]


def to_markdown(report: Report, family_tables: bool = False) -> str:
    documents = family_documents(report) if family_tables else []
    parts = []
    for family in _merged_families(report, documents):
        parts += [f"### microbench {family}", "", _md_table(*microbench_table(report, family)), ""]
    if report.validate:
        parts += ["### validate", "", _md_table(*validate_table(report)), ""]
    for run in report.ab:
        parts += [f"### ab · {run['run']} · {run['overall']}", "", scoreboard.to_markdown(run["models"], run["arms"])]
    if report.notes:
        parts += ["", *(f"- {note}" for note in report.notes)]
    blocks = ["\n".join(parts)]
    blocks += [(f"**{heading}**\n\n" if heading else "") + family_markdown(doc) for heading, doc in documents]
    return "\n\n".join(block.rstrip() for block in blocks if block.strip()) + "\n"


def _print_plain(console, title: str, headers: list[str], cells: list[list[str]]) -> bool:
    """A box-less table of whole cells when it fits the terminal (True), else nothing (False)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=None, header_style="bold", pad_edge=False)
    for i, header in enumerate(headers):
        table.add_column(escape(header), no_wrap=True, justify="right" if i == len(headers) - 1 else "left")
    for line in cells:
        table.add_row(*(escape(c) for c in line))
    table.min_width = min(len(title), console.width)
    if not fits(console, table):
        return False
    console.print(table)
    return True


def print_report(report: Report, console=None, family_tables: bool = False) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = console or Console()
    documents = family_documents(report) if family_tables else []  # checked before any table is printed
    # (title, table, leading key columns, whether the run columns are numbers, aligned right)
    tables = []
    for family in _merged_families(report, documents):
        headers, cells = microbench_table(report, family)
        if len(headers) > 3 and not fits_whole(
            console, [escape(h) for h in headers], [[escape(c) for c in line] for line in cells], keys=2
        ):
            # several runs side by side do not fit: one table with a row per run, not one table per run
            device, headers, cells = microbench_long_table(report, family)
            if _print_plain(console, f"microbench {family}" + (f" · {device}" if device else ""), headers, cells):
                continue
        tables.append((f"microbench {family}", (headers, cells), 2, True))
    if report.validate:
        tables.append(("validate", validate_table(report), 1, False))
    for title, (headers, cells), keys, numbers in tables:
        print_in_column_groups(
            console,
            title,
            [escape(h) for h in headers],
            [[escape(c) for c in line] for line in cells],
            keys=keys,
            right=range(keys, len(headers)) if numbers else (),
        )
    for run in report.ab:
        scoreboard.render(run["models"], run["arms"], console, title=f"ab · {run['run']} · {run['overall']}")
    for note in report.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    for heading, doc in documents:
        if heading:
            console.print()
            console.print(heading, style="bold", markup=False, highlight=False, overflow="fold")
        print_family_tables(doc, console)
