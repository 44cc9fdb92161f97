"""Profiling: nsys/ncu around a command or the microbench, parsed into per-kernel, per-NVTX-range and
per-category tables.

Library API (the CLI, ``zincbench profile``, only wires these):
- ``choose_tools(requested)``: which profiler(s) to run and why;
- ``profile_command(argv, tools, out_dir, rules)``: run them, parse what they wrote -> ``ToolRun`` per tool;
- ``microbench_argv(args)``: the microbench command line profiled by ``zincbench profile microbench``;
- ``parse.parse_file(path)``: tables from an existing .sqlite / nsys stats CSV / ncu CSV;
- ``parse.traffic_comparison``: ncu's DRAM bytes per microbench range next to the traffic model;
- ``result_rows(runs, traffic)``: the rows of the ``kind: profile`` results document.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from zincbench.errors import EnvironmentProblem, InputError
from zincbench.gpu.tools import INSTALL_HINTS, find_tool, nsys_importer_problem, require_profiler
from zincbench.profile import ncu, nsys
from zincbench.profile.categories import CategoryRules
from zincbench.profile.parse import ProfileTables, frame_records, parse_file
from zincbench.profile.rows import ROW_TYPES, ProfileRow, TrafficRow

TOOL_CHOICES = ("auto", "nsys", "ncu", "both")


@dataclass
class ToolRun:
    tool: str  # nsys | ncu
    tables: ProfileTables
    artifacts: dict[str, str]  # what the profiler wrote: report, sqlite, csv, log
    exit_code: int | None
    version: str | None
    notes: list[str] = field(default_factory=list)


def choose_tools(requested: str, *, prefer_both: bool = False) -> tuple[list[str], str]:
    """The profiler(s) to run and a sentence saying why.

    ``auto`` picks nsys (a whole-run timeline: every kernel, NVTX ranges), then ncu (per-launch counters,
    replaying each kernel, slower); with ``prefer_both`` (the microbench: times and DRAM bytes) it takes
    both when both work. A named tool that is missing is an EnvironmentProblem naming what to install.
    """
    if requested not in TOOL_CHOICES:
        raise InputError(f"--tool must be one of {', '.join(TOOL_CHOICES)}, got {requested!r}")
    nsys_path, ncu_path = find_tool("nsys"), find_tool("ncu")
    nsys_problem = nsys_importer_problem(nsys_path) if nsys_path else None
    if requested in ("nsys", "both") and nsys_path is None:
        require_profiler("nsys")  # raises with the install hint
    if requested in ("ncu", "both") and ncu_path is None:
        require_profiler("ncu")
    if requested in ("nsys", "both") and nsys_problem:
        raise EnvironmentProblem(nsys_problem)
    if requested != "auto":
        tools = ["nsys", "ncu"] if requested == "both" else [requested]
        return tools, f"--tool {requested}"
    nsys_ok = nsys_path is not None and nsys_problem is None
    if nsys_ok and ncu_path and prefer_both:
        return ["nsys", "ncu"], f"auto: nsys ({nsys_path}) for times and NVTX ranges, ncu ({ncu_path}) for DRAM bytes"
    if nsys_ok:
        return ["nsys"], f"auto: nsys found at {nsys_path} (whole-run timeline, every kernel and NVTX range)"
    why_not = nsys_problem or f"nsys not found ({INSTALL_HINTS['nsys']})"
    if ncu_path:
        return ["ncu"], f"auto: ncu ({ncu_path}), because {why_not}"
    raise EnvironmentProblem(f"no profiler found: {why_not}; or {INSTALL_HINTS['ncu']}")


def profile_command(
    argv: list[str],
    tools: list[str],
    out_dir: str | os.PathLike,
    rules: CategoryRules,
    *,
    nvtx_include: tuple[str, ...] = (),
    timeout_s: float = 3600.0,
    env: dict[str, str] | None = None,
) -> list[ToolRun]:
    """Run ``argv`` once under each tool (nsys first), writing into ``out_dir``, and parse the results."""
    if not argv:
        raise InputError("no command to profile (give it after --)")
    runs = []
    for tool in tools:
        if tool == "nsys":
            if nvtx_include:
                raise InputError("--nvtx-include filters ncu launches; nsys records every range")
            run = nsys.profile_command(argv, out_dir, timeout_s=timeout_s, env=env)
            tables = parse_file(run.sqlite, rules)
            artifacts = {
                "report": str(run.report),
                "sqlite": str(run.sqlite),
                "log": str(run.log),
                **{f"stats_{k}": str(v) for k, v in run.stats_csvs.items()},
            }
        else:
            run = ncu.profile_command(argv, out_dir, nvtx_include=nvtx_include, timeout_s=timeout_s, env=env)
            tables = parse_file(run.csv, rules)
            artifacts = {"csv": str(run.csv), "log": str(run.log)}
        runs.append(ToolRun(tool, tables, artifacts, run.exit_code, run.version, list(run.notes)))
    return runs


_TABLE_ROW_KIND = {"categories": "category", "kernels": "kernel", "ranges": "range"}


def result_rows(runs: list[ToolRun], traffic=None) -> list[ProfileRow]:
    """Rows of the profile results document (profile.rows): every table row, tagged with its tool and table
    (category | kernel | range | traffic), so ``records.load`` gives one filterable DataFrame."""
    rows = [
        ROW_TYPES[kind](tool=run.tool, **row)
        for run in runs
        for table, kind in _TABLE_ROW_KIND.items()
        for row in run.tables.to_dict()[table]
    ]
    if traffic is not None:
        rows += [TrafficRow(tool="ncu", **row) for row in frame_records(traffic)]
    return rows


def microbench_argv(args: tuple[str, ...] | list[str]) -> list[str]:
    """``python -m zincbench microbench ARGS...`` with this interpreter (the one zincbench is installed in)."""
    return [sys.executable, "-m", "zincbench", "microbench", *args]


def newest_document(directory: str | os.PathLike, kind: str = "microbench") -> Path | None:
    """The most recent results document of ``kind`` written into ``directory`` (the profiled microbench's)."""
    from zincbench.records import read

    found = []
    for path in Path(directory).glob("*.json"):
        try:
            doc = read(path)
        except InputError:
            continue
        if doc.get("kind") == kind:
            found.append((path.stat().st_mtime, path))
    return max(found)[1] if found else None
