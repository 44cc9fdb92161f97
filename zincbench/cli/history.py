"""``zincbench history``: a kernel's history across commits, steps marked, from the results documents."""

from __future__ import annotations

import click

from zincbench.cli._common import checked_output_file


@click.command(help="""A kernel's history across commits: every microbench results document under PATHS
(files or folders; default: the results folder, ./results or $ZINCBENCH_RESULTS), one series per
family x case x variant x GPU, ordered by document timestamp (when each run was recorded).

\b
Per series: the latest median, the best (and its commit), the latest run against the previous
one (ratio of medians, bootstrap interval, verdict) and the newest step with the commit where it
happened; current regressions first. A step is where adjacent segments of runs have median
intervals that do not overlap and levels at least min_change apart (experiments/history.yaml;
README "History"). Documents of other kinds are left out with a note.

\b
Exit codes: 0 shown, 2 bad input (an unreadable or damaged document, no microbench documents),
4 an output file the OS refuses.""")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--rules", "rules_path", type=click.Path(dir_okay=False), metavar="YAML",
              help="Step rules (default: the bundled experiments/history.yaml).")
def command(paths, rules_path):
    from zincbench import history, records
    from zincbench.show import history_table

    result = history.build_history(paths or [records.results_dir()], history.load_rules(rules_path))
    history_table.print_history(result)
    return 0
