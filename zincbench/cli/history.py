"""``zincbench history``: a kernel's history across commits, steps marked, from the results documents."""

from __future__ import annotations

import click

from zincbench.cli._common import checked_output_file


@click.command(
    help="""A kernel's history across commits: every microbench results document under PATHS
(files or folders; default: the results folder, ./results or $ZINCBENCH_RESULTS), one series per
family x case x variant x GPU, ordered by document timestamp (when each run was recorded).

\b
Per series: the latest median, the best (and its commit), the latest run against the previous
one (ratio of medians, bootstrap interval, verdict) and the newest step with the commit where it
happened; current regressions first. A step is where adjacent segments of runs have median
intervals that do not overlap and levels at least min_change apart (experiments/history.yaml;
README "History"). Documents of other kinds are left out with a note.

\b
--html FILE writes one self-contained page (nothing fetched when viewed): current regressions
first, then a plot per case with a line per variant and GPU, steps marked, hovering a run shows
its commit, median and interval.
--bmf FILE writes Bencher Metric Format JSON (latency in ns: the latest median, its interval as
lower/upper values); --github-benchmark FILE writes github-action-benchmark customSmallerIsBetter
JSON. Both hold the latest run of each series: give one document to export that document.

\b
Exit codes: 0 shown, 2 bad input (an unreadable or damaged document, no microbench documents),
4 an output file the OS refuses."""
)
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--rules",
    "rules_path",
    type=click.Path(dir_okay=False),
    metavar="YAML",
    help="Step rules (default: the bundled experiments/history.yaml).",
)
@click.option(
    "--html",
    "html_file",
    metavar="FILE",
    callback=checked_output_file,
    help="Write the history as one self-contained HTML page.",
)
@click.option(
    "--bmf",
    "bmf_file",
    metavar="FILE",
    callback=checked_output_file,
    help="Write Bencher Metric Format JSON (latency in ns) of each series' latest run.",
)
@click.option(
    "--github-benchmark",
    "github_file",
    metavar="FILE",
    callback=checked_output_file,
    help="Write github-action-benchmark customSmallerIsBetter JSON of each series' latest run.",
)
def command(paths, rules_path, html_file, bmf_file, github_file):
    from zincbench import history, records
    from zincbench.outputs import write_output_atomically
    from zincbench.show import bmf, github_benchmark, history_html, history_table

    result = history.build_history(paths or [records.results_dir()], history.load_rules(rules_path))
    history_table.print_history(result)
    for path, what, writer in (
        (html_file, "--html", history_html),
        (bmf_file, "--bmf", bmf),
        (github_file, "--github-benchmark", github_benchmark),
    ):
        if path:
            write_output_atomically(path, writer.to_text(result), what)
            click.echo(f"{what}: {path}", err=True)
    return 0
