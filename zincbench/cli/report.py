"""``zincbench report``: merge results documents of several runs and GPUs into one view, with plots."""

from __future__ import annotations

import click

from zincbench.cli._common import echo_json, json_option


@click.command(
    help="""Merge results documents (microbench, validate, ab) of several runs into one view.

\b
microbench: median/p90 per case x variant, one column per run; validate: each model's status per
run; ab: each run's scoreboard. Runs are labelled by GPU (plus the run id where a GPU has several),
and interrupted runs are marked incomplete. Documents of one kind from different GPUs are refused
unless --ignore-device. --family-tables shows, for each microbench document in the order given, the
tables `zincbench microbench` prints after its common one (t3, t4: the family's own; layer: the
stages) in place of its family's merged table, headed by the run where several documents are given.
--plot DIR writes PNGs (needs matplotlib, the `plot` extra): time vs N_e with the hardware floor for
T2, each variant vs the round trip for T1, scoreboard bars for ab.

\b
Exit codes: 0 shown, 2 bad input (unreadable document, devices differ), 4 matplotlib missing."""
)
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--markdown", "as_markdown", is_flag=True, help="Print markdown tables (PR comments, READMEs).")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), metavar="DIR", help="Write PNG plots into DIR.")
@click.option("--ignore-device", is_flag=True, help="Put runs from different GPUs side by side anyway.")
@click.option(
    "--family-tables",
    is_flag=True,
    help="Each microbench run's own family tables (as `microbench` prints them) instead of its merged table.",
)
@json_option
def command(results, as_markdown, plot_dir, ignore_device, family_tables, as_json):
    from zincbench import report as merged
    from zincbench.show import plots, report_tables

    if as_json and as_markdown:
        raise click.UsageError("give --json or --markdown, not both")
    if as_json and family_tables:
        raise click.UsageError("--family-tables shows tables: give it with --markdown or alone, not with --json")
    if plot_dir:
        plots.require_matplotlib()  # before any output: a missing extra is one line, exit 4
    report = merged.build_report(results, ignore_device=ignore_device)
    written = plots.plot_report(report, plot_dir) if plot_dir else []
    if as_json:
        echo_json({**merged.to_dict(report), "plots": [str(p) for p in written]})
    elif as_markdown:
        click.echo(report_tables.to_markdown(report, family_tables=family_tables), nl=False)
    else:
        report_tables.print_report(report, family_tables=family_tables)
    if not as_json:
        for path in written:
            click.echo(f"plot: {path}", err=True)
    return 0
