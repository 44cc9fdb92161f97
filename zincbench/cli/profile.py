"""``zincbench profile``: nsys/ncu around any command or the bundled microbench; parse recorded profiles."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from zincbench import profile as prof
from zincbench.cli._common import SECONDS, echo_json, json_option, results_dir_option
from zincbench.errors import EnvironmentProblem, ExitCode, InputError
from zincbench.profile.categories import load_rules
from zincbench.profile.parse import ProfileTables, frame_records, parse_file, traffic_comparison
from zincbench.records import Document, read, results_dir, write
from zincbench.show import profile_tables as show

_PASSTHROUGH = {"ignore_unknown_options": True, "allow_interspersed_args": False}

tool_option = click.option(
    "--tool",
    type=click.Choice(prof.TOOL_CHOICES),
    default="auto",
    show_default=True,
    help="Profiler: auto = nsys if it works, else ncu (microbench: both when both work).",
)
categories_option = click.option(
    "--categories",
    "categories_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Kernel category rules (default: experiments/kernel_categories.yaml).",
)
out_option = click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Folder for the profiler's files and the tables (default: <results-dir>/profile-<time>-<id>/).",
)
top_option = click.option(
    "--top",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Rows shown per kernel/range table (--json and the CSVs of --out keep every row).",
)
timeout_option = click.option(
    "--timeout",
    "timeout_s",
    type=SECONDS,
    default=3600.0,
    show_default=True,
    help="Seconds before the profiled command is killed.",
)
nvtx_include_option = click.option(
    "--nvtx-include",
    multiple=True,
    help="ncu only: profile launches inside these NVTX ranges (ncu syntax, e.g. 'step/').",
)


@click.group(name="profile")
def command() -> None:
    """Profile a command or the microbench under nsys/ncu: per-kernel, per-NVTX-range and per-category tables.

    \b
    zincbench profile run [--tool nsys|ncu|both|auto] -- COMMAND ARGS...
    zincbench profile microbench [t2|t1] [microbench options...]
    zincbench profile parse FILE        (.sqlite, nsys stats CSV, ncu CSV; or .gz of one)
    """


def _finish(
    console: Console,
    runs: list[prof.ToolRun],
    reason: str,
    argv: list[str],
    out: Path,
    doc: Document,
    results: str | None,
    as_json: bool,
    top: int,
    ok_exit_codes: tuple[int, ...] = (0,),
    traffic=None,
) -> int:
    """Write tables, chart and the results document; print tables (or JSON); exit 1 when a profiled run failed."""
    for run in runs:
        run_traffic = traffic if run.tool == "ncu" else None
        show.write_csvs(run.tables, out, run.tool, run_traffic)
        (out / f"{run.tool}_tables.md").write_text(
            show.to_markdown(run.tables, top=top, traffic=run_traffic), encoding="utf-8"
        )
        try:
            run.artifacts["chart"] = str(show.write_category_chart(run.tables, out / f"{run.tool}_categories.png"))
        except EnvironmentProblem as exc:
            run.notes.append(f"no chart: {exc}")
    traffic_rows = frame_records(traffic) if traffic is not None else []
    doc.results = prof.result_rows(runs, traffic)
    doc.notes = [reason] + [note for run in runs for note in run.notes + run.tables.notes]
    doc.config["artifacts"] = {run.tool: run.artifacts for run in runs}
    doc.config["tool_versions"] = {run.tool: run.version for run in runs}
    failed = [run for run in runs if run.exit_code is not None and run.exit_code not in ok_exit_codes]
    doc.complete = not failed
    path = write(doc, directory=results)
    if as_json:
        echo_json(
            {
                "document": str(path),
                "out": str(out),
                "tool_choice": reason,
                "traffic": traffic_rows,
                "runs": [
                    {
                        "tool": r.tool,
                        "version": r.version,
                        "exit_code": r.exit_code,
                        "artifacts": r.artifacts,
                        **r.tables.to_dict(),
                        "notes": r.notes + r.tables.notes,
                    }
                    for r in runs
                ],
            }
        )
    else:
        console.print(f"[bold]{reason}[/bold]")
        for run in runs:
            show.render(
                run.tables,
                console,
                top=top,
                traffic=traffic if run.tool == "ncu" else None,
                title=f"{run.tool} {run.version or ''}: {' '.join(argv)}",
            )
            for note in run.notes:
                console.print(f"[yellow]note:[/yellow] {note}")
        console.print(f"files: {out}  document: {path}")
    for run in failed:
        click.echo(
            f"zincbench: profiled command failed under {run.tool} (exit {run.exit_code}); "
            f"see {run.artifacts.get('log')}",
            err=True,
        )
    return int(ExitCode.FAIL) if failed else int(ExitCode.OK)


def _start(
    kind_config: dict,
    argv: list[str],
    tool: str,
    categories_file: str | None,
    out_dir: str | None,
    results: str | None,
    prefer_both: bool,
) -> tuple[Document, Path, list[str], str]:
    from zincbench.gpu.device import environment_report

    tools, reason = prof.choose_tools(tool, prefer_both=prefer_both)
    doc = Document(
        kind="profile",
        config={
            **kind_config,
            "command": argv,
            "tools": tools,
            "categories": categories_file or "experiments/kernel_categories.yaml",
        },
        environment=environment_report(),
    )
    out = Path(out_dir) if out_dir else results_dir(results) / doc.default_name().removesuffix(".json")
    out.mkdir(parents=True, exist_ok=True)
    return doc, out, tools, reason


@command.command("run", context_settings=_PASSTHROUGH)
@tool_option
@categories_option
@out_option
@nvtx_include_option
@timeout_option
@top_option
@results_dir_option
@json_option
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
def run_command(tool, categories_file, out_dir, nvtx_include, timeout_s, top, results_dir, as_json, argv) -> None:
    """Profile COMMAND (put it after --), e.g. `zincbench profile run -- ./zinc --prompt-file p.txt`."""
    rules = load_rules(categories_file)
    argv = list(argv)
    if nvtx_include and tool == "auto":
        tool = "ncu"  # only ncu filters launches by NVTX range
    doc, out, tools, reason = _start({"mode": "run"}, argv, tool, categories_file, out_dir, results_dir, False)
    runs = prof.profile_command(argv, tools, out, rules, nvtx_include=tuple(nvtx_include), timeout_s=timeout_s)
    return _finish(Console(), runs, reason, argv, out, doc, results_dir, as_json, top)


@command.command("microbench", context_settings=_PASSTHROUGH)
@tool_option
@categories_option
@out_option
@timeout_option
@top_option
@results_dir_option
@json_option
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def microbench_command(tool, categories_file, out_dir, timeout_s, top, results_dir, as_json, args) -> None:
    """Profile `zincbench microbench ARGS...` (each variant x case is an NVTX range); with ncu, compare the
    measured DRAM bytes per range with the microbench's traffic model.

    Options of this command come before ARGS (`zincbench profile microbench --json t2 --quick`): everything
    from the first argument on goes to the microbench. ncu replays every launch, so keep the microbench
    short (--quick, --case Ne16)."""
    rules = load_rules(categories_file)
    argv = prof.microbench_argv(args)
    doc, out, tools, reason = _start(
        {"mode": "microbench", "microbench_args": list(args)}, argv, tool, categories_file, out_dir, results_dir, True
    )
    bench_results = out / "microbench"
    # ncu serializes kernels, so the timer's blocking kernel would spin until its timeout: time without it.
    runs = prof.profile_command(
        argv,
        tools,
        out,
        rules,
        timeout_s=timeout_s,
        env={"ZINCBENCH_RESULTS": str(bench_results), "ZINCBENCH_LAUNCH_HIDING": "0"},
    )
    traffic = None
    ncu_run = next((r for r in runs if r.tool == "ncu"), None)
    bench_doc = prof.newest_document(bench_results) if bench_results.exists() else None
    if ncu_run is not None and bench_doc is not None:
        traffic = traffic_comparison(ncu_run.tables.launches, read(bench_doc).get("results") or [])
        doc.config["microbench_document"] = str(bench_doc)
    elif ncu_run is not None:
        ncu_run.notes.append(f"no microbench results document in {bench_results}: no traffic-model column")
    # The microbench's own exit codes 1 (NO-GO) and 3 (inconclusive) are verdicts, not failures.
    return _finish(Console(), runs, reason, argv, out, doc, results_dir, as_json, top, (0, 1, 3), traffic)


@command.command("parse")
@categories_option
@top_option
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Also write the tables as CSV and markdown, and the category chart, into this folder.",
)
@click.option(
    "--microbench",
    "microbench_doc",
    type=click.Path(dir_okay=False),
    default=None,
    help="With an ncu CSV of `profile microbench`: the profiled microbench's results document, for the table "
    "of DRAM bytes per invocation next to its traffic model.",
)
@click.option(
    "--table",
    "only",
    type=click.Choice(show.TABLE_NAMES),
    multiple=True,
    help="Show only these tables (repeatable; default: all).",
)
@click.option("--markdown", is_flag=True, help="Print the tables as markdown (what the docs quote).")
@json_option
@click.argument("file", type=click.Path())
def parse_command(categories_file, top, out_dir, microbench_doc, only, markdown, as_json, file) -> None:
    """Tables from a recorded profile: an nsys .sqlite export, an nsys stats CSV or an ncu --csv log, each
    also gzip-compressed (.gz)."""
    tables: ProfileTables = parse_file(file, load_rules(categories_file))
    traffic = None
    if microbench_doc is not None:
        if not tables.has_dram_bytes:
            raise InputError(f"--microbench needs an ncu CSV with DRAM bytes; {file} is {tables.format}")
        traffic = traffic_comparison(tables.launches, read(microbench_doc).get("results") or [])
    notes = []
    if out_dir:
        stem = Path(Path(file).name.removesuffix(".gz")).stem
        show.write_csvs(tables, out_dir, stem, traffic)
        (Path(out_dir) / f"{stem}_tables.md").write_text(
            show.to_markdown(tables, top=top, traffic=traffic), encoding="utf-8"
        )
        try:
            show.write_category_chart(tables, Path(out_dir) / f"{stem}_categories.png")
        except EnvironmentProblem as exc:
            notes.append(f"no chart: {exc}")
    if as_json:
        extra = {"traffic": frame_records(traffic)} if traffic is not None else {}
        echo_json({**tables.to_dict(), **extra, "notes": tables.notes + notes})
        return
    if markdown:
        click.echo(show.to_markdown(tables, top=top, traffic=traffic, only=only), nl=False)
        for note in notes:
            click.echo(f"- note: {note}")
        return
    console = Console()
    title = f"{tables.format}: {file}"
    if len(title) + 6 > console.width:  # a rule cuts a long title with "…": the file's name says enough
        title = f"{tables.format}: {Path(file).name}"
    show.render(tables, console, top=top, title=title, traffic=traffic, only=only)
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {note}")
