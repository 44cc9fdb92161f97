"""``zincbench llamabench``: read llama-bench output in any of its five formats."""

from __future__ import annotations

import click

from zincbench.cli._common import echo_json, json_option


@click.group("llamabench", help="llama-bench results (md, csv, json, jsonl or sql output, auto-detected).")
def command() -> None:
    pass


@command.command("show", help="Print the parsed rows of a llama-bench output file.")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(("md", "csv", "json", "jsonl", "sql")), help="Skip auto-detection.")
@json_option
def show(file, fmt, as_json) -> None:
    from rich.console import Console
    from rich.table import Table

    from zincbench.measure.llama_bench import load

    rows = load(file, fmt)
    if as_json:
        echo_json([row.summary() for row in rows])
        return
    table = Table(title=file)
    for name in ("model", "backend", "test", "t/s", "samples", "build"):
        table.add_column(name, justify="right" if name in ("t/s", "samples") else "left")
    for row in rows:
        stddev = f" ± {row.stddev_ts:.2f}" if row.stddev_ts is not None else ""
        table.add_row(
            row.model_filename or row.model_type or "?",
            row.backend or "?",
            row.test,
            f"{row.avg_ts:.2f}{stddev}",
            str(len(row.samples_ts)) if row.samples_ts else "—",
            row.build_commit or "?",
        )
    Console().print(table)
