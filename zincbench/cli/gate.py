"""``zincbench gate``: run the declared checks (experiments/gates.yaml) and exit with the worst code."""

from __future__ import annotations

import os

import click

from zincbench.cli._common import checked_output_file, echo_json, json_option, results_dir_option


@click.command(
    help="""Run a declared list of checks and exit with the worst of their codes.

\b
GATES_YAML (default: the bundled experiments/gates.yaml) lists checks of kinds microbench (a
family's GO rule), validate (catalog token correctness), ab (A/B at a threshold), recorded
(re-judge recorded results from their raw data) and parse (recorded tool outputs still parse).
Each ends PASS, FAIL, INCONCLUSIVE, SKIPPED (no GPU, model, binary or recorded file here; the
reason is shown) or ERROR. Writes a results document (kind gate), optionally JUnit XML and
markdown; the markdown is also appended to $GITHUB_STEP_SUMMARY when that is set.

\b
--bundled NAME runs a gates file shipped in the package (gates, gates_ci) wherever it is installed.

\b
Exit codes: 0 every check passed or was skipped (at least one ran), 1 a check failed (or, with
--strict, was skipped), 3 inconclusive, 6 every check was skipped (nothing was checked), 2 bad
input (the gates file or a check's input), 4 environment."""
)
@click.argument("gates_yaml", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--bundled",
    metavar="NAME",
    help="A gates file shipped in the package by name (gates, gates_ci) instead of GATES_YAML.",
)
@click.option("--strict", is_flag=True, help="A skipped check fails the gate (a GPU host that must run everything).")
@click.option(
    "--junit",
    "junit_path",
    metavar="FILE",
    callback=checked_output_file,
    help="Write JUnit XML (one testcase per check) to FILE.",
)
@click.option(
    "--markdown",
    "markdown_path",
    metavar="FILE",
    callback=checked_output_file,
    help="Write the summary as markdown to FILE.",
)
@json_option
@results_dir_option
def command(gates_yaml, bundled, strict, junit_path, markdown_path, as_json, results_dir):
    from rich.console import Console

    from zincbench.errors import InputError
    from zincbench.outputs import check_output_file, write_output
    from zincbench.records import to_jsonable
    from zincbench.runs.gate import bundled_gates_path, load_gates, run_gates
    from zincbench.show import gate_summary
    from zincbench.show.junit import junit_xml

    if bundled is not None:
        if gates_yaml is not None:
            raise InputError(f"give GATES_YAML or --bundled, not both (got {gates_yaml} and --bundled {bundled})")
        gates_yaml = bundled_gates_path(bundled)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        check_output_file(step_summary, "$GITHUB_STEP_SUMMARY")
    gates = load_gates(gates_yaml)
    log = Console(stderr=True, highlight=False)

    def announce(index, total, check):
        log.print(f"[{index + 1}/{total}] {check.kind} {check.name}", markup=False)

    result = run_gates(gates, strict=strict, results_dir=results_dir, on_check=announce)
    data = to_jsonable(result.document)
    if as_json:
        echo_json(
            {
                "status": data["verdict"]["status"],
                "exit_code": int(result.exit_code),
                "results": str(result.path),
                "checks": data["results"],
            }
        )
    else:
        gate_summary.print_summary(data)
        log.print(f"results: {result.path}", markup=False)
    # Written after the verdict is shown: a failed write (exit 4) cannot hide it.
    markdown = gate_summary.to_markdown(data)
    if junit_path:
        write_output(junit_path, junit_xml(data), "--junit")
    if markdown_path:
        write_output(markdown_path, markdown, "--markdown")
    gate_summary.append_step_summary(markdown)
    return int(result.exit_code)
