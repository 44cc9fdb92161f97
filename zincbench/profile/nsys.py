"""Nsight Systems: run ``nsys profile`` + ``nsys stats`` around a command, and read what they write.

Two readers, one per nsys output:
- ``read_sqlite``: one row per kernel / memcpy / memset from the SQLite export, each attributed to the
  innermost NVTX range enclosing its launching API call (launch-side containment, NVIDIA's rule);
- ``read_stats_csv``: one ``nsys stats -f csv`` report (per-kernel, per-NVTX-range or memory-operation
  summaries), whatever preamble or ``SKIPPED:`` lines surround it.
Column sets differ between nsys versions, so both readers look columns up by name (PRAGMA table_info
for SQLite, header text for CSV).
"""

from __future__ import annotations

import csv
import os
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from zincbench.errors import EnvironmentProblem, InputError
from zincbench.gpu.tools import nsys_importer_problem, require_profiler, tool_version
from zincbench.inputs import read_lines, regular_file
from zincbench.measure.process import EngineFailure, run_process

PROFILE_OPTIONS = [
    "-t",
    "cuda,nvtx,cublas",
    "--sample=none",
    "--cpuctxsw=none",
    "--cuda-graph-trace=node",
    "-f",
    "true",
]

# What we ask `nsys stats` for, with the pre-2023 name of each report (pick the one --help-reports lists).
STATS_REPORTS = {
    "cuda_gpu_kern_sum": "gpukernsum",
    "cuda_gpu_mem_time_sum": "gpumemtimesum",
    "nvtx_kern_sum": "nvtxkernsum",
    "nvtx_sum": "nvtxsum",
}

# ENUM_NSYS_EVENT_TYPE ids (verified on 2025.3.x exports); read from the export when it carries the enum.
_EVENT_TYPE_DEFAULTS = {"NvtxPushPopRange": 59, "NvtxStartEndRange": 60, "NvtxDomainCreate": 75}

LAUNCH_COLUMNS = ["name", "duration_ns", "range", "start_ns"]


@dataclass
class NsysRun:
    report: Path
    sqlite: Path
    stats_csvs: dict[str, Path]
    exit_code: int | None
    nsys: str
    version: str | None
    log: Path
    notes: list[str] = field(default_factory=list)


def choose_reports(help_reports_text: str) -> dict[str, str]:
    """Map each wanted report to the name this nsys knows (from ``nsys stats --help-reports``)."""
    listed = set(re.findall(r"^\s*([a-z_]+)\b", help_reports_text, flags=re.MULTILINE))
    chosen = {}
    for current, old in STATS_REPORTS.items():
        if current in listed:
            chosen[current] = current
        elif old in listed:
            chosen[current] = old
    return chosen


def profile_command(
    argv: list[str],
    out_dir: str | os.PathLike,
    *,
    name: str = "nsys",
    timeout_s: float = 3600.0,
    env: dict[str, str] | None = None,
) -> NsysRun:
    """Profile ``argv`` under nsys into ``out_dir/name.nsys-rep``, then export ``name.sqlite`` and the stats CSVs.

    The SQLite export is always forced: a stale ``name.sqlite`` from an earlier run would otherwise be reused.
    """
    nsys = require_profiler("nsys")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base = out / name
    log = out / f"{name}.log"
    report = base.with_suffix(".nsys-rep")
    report.unlink(missing_ok=True)
    log.write_text("", encoding="utf-8")
    run = _run(log, [nsys, "profile", *PROFILE_OPTIONS, "-o", str(base), *argv], timeout_s, env)
    if not report.exists():
        problem = nsys_importer_problem(nsys) if list(out.glob("*.qdstrm")) else None
        if problem:
            raise EnvironmentProblem(f"nsys wrote only a .qdstrm in {out}: {problem}")
        raise EnvironmentProblem(f"nsys profile wrote no report (exit {run.returncode}); see {log}: {run.tail(1)}")

    help_run = _run(log, [nsys, "stats", "--help-reports"], 120, None)
    reports = choose_reports(help_run.stdout + help_run.stderr)
    if "cuda_gpu_kern_sum" not in reports:
        raise EnvironmentProblem(f"this nsys ({nsys}) lists no kernel summary report in `nsys stats --help-reports`")
    stats = _run(
        log,
        [
            nsys,
            "stats",
            "--force-export=true",
            "-r",
            ",".join(reports.values()),
            "-f",
            "csv",
            "-o",
            str(base),
            str(report),
        ],
        timeout_s,
        None,
    )
    sqlite_path = base.with_suffix(".sqlite")
    if stats.returncode != 0 or not sqlite_path.exists():
        raise EnvironmentProblem(f"nsys stats failed (exit {stats.returncode}); see {log}: {stats.tail(1)}")
    csvs = {want: Path(f"{base}_{got}.csv") for want, got in reports.items() if Path(f"{base}_{got}.csv").exists()}
    notes = [] if run.returncode == 0 else [f"nsys profile exited with code {run.returncode} (see {log})"]
    return NsysRun(report, sqlite_path, csvs, run.returncode, nsys, tool_version(nsys), log, notes)


def _run(log: Path, argv: list[str], timeout_s: float, env: dict[str, str] | None):
    """Run one nsys step, appending its command line and output to ``log``."""
    try:
        result = run_process(argv, env=env, timeout_s=timeout_s)
    except EngineFailure as exc:
        raise EnvironmentProblem(str(exc)) from None
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {' '.join(argv)}\n{result.stdout}{result.stderr}\n")
    if result.timed_out:
        raise EnvironmentProblem(f"{Path(argv[0]).name} {argv[1]} timed out after {timeout_s:.0f} s; see {log}")
    return result


# ---------------------------------------------------------------- SQLite export


def read_sqlite(path: str | os.PathLike) -> tuple[pd.DataFrame, dict, list[str]]:
    """Per-launch rows (``name``, ``duration_ns``, ``range``, ``start_ns``) plus export metadata and notes.

    ``range`` is the innermost NVTX push/pop or start/end range on the launching thread that encloses the
    launching API call (None when there is none); non-default domains are written ``domain:text``.
    """
    p = regular_file(path, "nsys SQLite export")
    try:
        # as_uri() percent-encodes '?', '#' and '%' in the name: 'a?b.sqlite' opens that file, not 'a'.
        con = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True)
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: not a readable SQLite file ({exc})") from None
    try:
        if "StringIds" not in tables:
            raise InputError(f"{p}: not an nsys SQLite export (no StringIds table)")
        metadata = _metadata(con, tables)
        notes = []
        ops = [frame for frame in (_kernels(con, tables), _memory_ops(con, tables)) if not frame.empty]
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
            notes.append(f"{p.name} does not contain CUDA kernel data")
        if not ops:
            return pd.DataFrame(columns=LAUNCH_COLUMNS), metadata, notes
        launches = _numbers(pd.concat(ops, ignore_index=True), ["start_ns", "end_ns"], ["api_start", "api_end"], p)
        untitled = ~launches["name"].map(lambda name: isinstance(name, str))
        if untitled.any():
            raise InputError(
                f"{p}: damaged SQLite export: a GPU operation's name is "
                f"{launches['name'][untitled].iloc[0]!r}, not text"
            )
        launches["duration_ns"] = launches["end_ns"] - launches["start_ns"]
        if (launches["duration_ns"] < 0).any():
            raise InputError(f"{p}: damaged SQLite export: a GPU operation ends before it starts")
        ranges = _numbers(_nvtx_ranges(con, tables), ["start", "end"], [], p)
        launches["range"] = _innermost_ranges(launches, ranges)
        if launches["api_start"].isna().any():
            notes.append(
                f"{int(launches['api_start'].isna().sum())} GPU operations have no launching API call "
                "in the export: not attributed to NVTX ranges"
            )
        launches = launches.sort_values("start_ns", ignore_index=True)
        return launches[LAUNCH_COLUMNS], metadata, notes
    except (sqlite3.DatabaseError, pd.errors.DatabaseError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: damaged SQLite export ({type(exc).__name__}: {exc})") from None
    finally:
        con.close()


def _numbers(frame: pd.DataFrame, required: list[str], optional: list[str], path: Path) -> pd.DataFrame:
    """Timestamp columns as numbers: SQLite columns are untyped, so a damaged or hand-made export can hold
    text or NULL where nsys writes integers; that is one InputError naming the column."""
    for column in required + optional:
        # As floats: int64 would wrap on end - start of absurd values; float64 is exact to 2**53 ns (104 days).
        values = pd.to_numeric(frame[column], errors="coerce").astype(float)
        bad = values.isna() & (frame[column].notna() | (column in required))
        if bad.any():
            value = frame[column].iloc[int(bad.to_numpy().nonzero()[0][0])]
            raise InputError(f"{path}: damaged SQLite export: {column} {value!r} is not a timestamp")
        frame[column] = values
    return frame


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({table})")}


def _metadata(con: sqlite3.Connection, tables: set[str]) -> dict:
    meta = {}
    if "META_DATA_EXPORT" in tables:
        meta.update({k: v for k, v in con.execute("SELECT name, value FROM META_DATA_EXPORT")})
    if "TARGET_INFO_GPU" in tables and "name" in _columns(con, "TARGET_INFO_GPU"):
        meta["gpus"] = [r[0] for r in con.execute("SELECT DISTINCT name FROM TARGET_INFO_GPU")]
    return meta


def _launch_join(
    con: sqlite3.Connection, tables: set[str], table: str, name_sql: str, extra_join: str = ""
) -> pd.DataFrame:
    """GPU operations of ``table`` joined to their launching runtime/driver call (per-process correlation ids)."""
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        api = (
            "LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = g.correlationId "
            "AND (r.globalTid & 0xFFFFFFFFFF000000) = (g.globalPid & 0xFFFFFFFFFF000000)"
        )
        api_cols = "r.start AS api_start, r.end AS api_end, r.globalTid AS api_tid"
    else:
        api, api_cols = "", "NULL AS api_start, NULL AS api_end, NULL AS api_tid"
    sql = (
        f"SELECT {name_sql} AS name, g.start AS start_ns, g.end AS end_ns, "
        f"g.globalPid AS pid, {api_cols} FROM {table} g {extra_join} {api}"
    )
    return pd.read_sql_query(sql, con)


def _kernels(con: sqlite3.Connection, tables: set[str]) -> pd.DataFrame:
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        return pd.DataFrame()
    cols = _columns(con, "CUPTI_ACTIVITY_KIND_KERNEL")
    # demangledName is what `nsys stats` reports; older exports only have shortName.
    name_col = "demangledName" if "demangledName" in cols else "shortName"
    return _launch_join(
        con, tables, "CUPTI_ACTIVITY_KIND_KERNEL", "s.value", f"JOIN StringIds s ON s.id = g.{name_col}"
    )


def _memory_ops(con: sqlite3.Connection, tables: set[str]) -> pd.DataFrame:
    frames = []
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        if "ENUM_CUDA_MEMCPY_OPER" in tables:
            name_sql = "'[CUDA memcpy ' || COALESCE(e.label, 'kind ' || g.copyKind) || ']'"
            join = "LEFT JOIN ENUM_CUDA_MEMCPY_OPER e ON e.id = g.copyKind"
        else:
            name_sql, join = "'[CUDA memcpy kind ' || g.copyKind || ']'", ""
        frames.append(_launch_join(con, tables, "CUPTI_ACTIVITY_KIND_MEMCPY", name_sql, join))
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        frames.append(_launch_join(con, tables, "CUPTI_ACTIVITY_KIND_MEMSET", "'[CUDA memset]'"))
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _event_types(con: sqlite3.Connection, tables: set[str]) -> dict[str, int]:
    types = dict(_EVENT_TYPE_DEFAULTS)
    if "ENUM_NSYS_EVENT_TYPE" in tables:
        cols = _columns(con, "ENUM_NSYS_EVENT_TYPE")
        if {"id", "name"} <= cols:
            found = {name: i for i, name in con.execute("SELECT id, name FROM ENUM_NSYS_EVENT_TYPE")}
            types.update({k: found[k] for k in types if k in found})
    return types


def _nvtx_ranges(con: sqlite3.Connection, tables: set[str]) -> pd.DataFrame:
    """Closed push/pop and same-thread start/end ranges: tid, start, end, name."""
    if "NVTX_EVENTS" not in tables:
        return pd.DataFrame(columns=["tid", "start", "end", "name"])
    cols = _columns(con, "NVTX_EVENTS")
    types = _event_types(con, tables)
    # Registered strings (everything from the Python nvtx package) live in StringIds via textId, not in text.
    text = "COALESCE(n.text, s.value)" if "textId" in cols else "n.text"
    join = "LEFT JOIN StringIds s ON s.id = n.textId" if "textId" in cols else ""
    # Untyped SQLite: a thread id or domain that is not an integer (NULL, text) cannot be matched to launches.
    domain = "CASE WHEN typeof(n.domainId) = 'integer' THEN n.domainId ELSE 0 END" if "domainId" in cols else "0"
    same_thread = "AND (n.endGlobalTid IS NULL OR n.endGlobalTid = n.globalTid)" if "endGlobalTid" in cols else ""
    pushpop, startend = types["NvtxPushPopRange"], types["NvtxStartEndRange"]
    ranges = pd.read_sql_query(
        f"SELECT n.globalTid AS tid, n.start, n.end, {text} AS text, {domain} AS domain_id FROM NVTX_EVENTS n {join} "
        f"WHERE n.end IS NOT NULL AND typeof(n.globalTid) = 'integer' "
        f"AND (n.eventType = {pushpop} OR (n.eventType = {startend} {same_thread}))",
        con,
    )
    domains = pd.read_sql_query(
        f"SELECT n.globalTid AS tid, {domain} AS domain_id, {text} AS domain FROM NVTX_EVENTS n {join} "
        f"WHERE n.eventType = {types['NvtxDomainCreate']} AND typeof(n.globalTid) = 'integer'",
        con,
    )
    pid_mask = 0xFFFFFFFFFF000000  # globalTid = <HW:8><VM:8><PID:24><TID:24>
    domain_names = {(int(t) & pid_mask, int(d)): name for t, d, name in domains.itertuples(index=False)}
    ranges["name"] = [
        f"{domain_names[(int(t) & pid_mask, int(d))]}:{txt}" if (int(t) & pid_mask, int(d)) in domain_names else txt
        for t, d, txt in zip(ranges["tid"], ranges["domain_id"], ranges["text"])
    ]
    return ranges[["tid", "start", "end", "name"]]


def _innermost_ranges(launches: pd.DataFrame, ranges: pd.DataFrame) -> list:
    """For each launch, the latest-starting range on its API thread with start <= api_start and end >= api_end.

    ``launches`` must have a RangeIndex (row labels are positions in the result).
    """
    result = [None] * len(launches)
    if ranges.empty:
        return result
    by_thread = {tid: group.sort_values("start") for tid, group in ranges.groupby("tid")}
    calls = launches.dropna(subset=["api_start"])
    for tid, group in calls.groupby("api_tid"):
        thread_ranges = by_thread.get(tid)
        if thread_ranges is None:
            continue
        starts = thread_ranges["start"].to_numpy()
        ends = thread_ranges["end"].to_numpy()
        names = thread_ranges["name"].to_numpy()
        open_ranges: list[int] = []  # indices into the thread's ranges that started before the current call
        next_range = 0
        for row, api_start, api_end in sorted(
            zip(group.index, group["api_start"], group["api_end"]), key=lambda t: t[1]
        ):
            while next_range < len(starts) and starts[next_range] <= api_start:
                open_ranges.append(next_range)
                next_range += 1
            open_ranges = [i for i in open_ranges if ends[i] >= api_start]
            enclosing = [i for i in open_ranges if ends[i] >= api_end]
            if enclosing:
                result[row] = names[max(enclosing, key=lambda i: starts[i])]
    return result


# ---------------------------------------------------------------- stats CSV reports


@dataclass
class StatsReport:
    kind: str  # kern_sum | nvtx_kern_sum | nvtx_sum | mem_time_sum
    table: pd.DataFrame
    skipped: list[str]


_TIME_UNITS = {
    "ns": 1.0,
    "nsec": 1.0,
    "us": 1e3,
    "usec": 1e3,
    "ms": 1e6,
    "msec": 1e6,
    "s": 1e9,
    "sec": 1e9,
    "seconds": 1e9,
}


def _stats_kind(header: list[str]) -> str | None:
    cols = set(header)
    if "Kernel Name" in cols and any(c.startswith("NVTX Range") for c in cols):
        return "nvtx_kern_sum"
    if "Range" in cols and "Style" in cols and "Instances" in cols:
        return "nvtx_sum"
    if "Operation" in cols and "Count" in cols and any(c.startswith("Total Time") for c in cols):
        return "mem_time_sum"
    if "Name" in cols and "Instances" in cols:
        return "kern_sum"
    return None


# A demangled template name can be long, but not this long: a bigger CSV field is a damaged file.
MAX_FIELD_BYTES = 1 << 20
# Columns each report must end up with (after renaming): anything less is another file, or a damaged header.
_REQUIRED = {
    "kern_sum": ("name", "calls", "total_ns"),
    "mem_time_sum": ("name", "calls", "total_ns"),
    "nvtx_kern_sum": ("name", "calls", "total_ns"),
    "nvtx_sum": ("range", "instances"),
}


class _Lines:
    """The file's lines, read once and lazily, with console prefixes cut off the header; remembers
    ``SKIPPED:`` lines and whether nsys complained about a stale export."""

    def __init__(self, lines):
        self._lines = lines
        self.skipped: list[str] = []
        self.stale_export = False

    def __iter__(self):
        for raw in self._lines:
            line = _from_header_start(raw)
            stripped = line.strip()
            if stripped.startswith("SKIPPED:"):
                self.skipped.append(stripped)
            elif "--force-export" in line:
                self.stale_export = True
            yield line


def read_stats_csv(path: str | os.PathLike) -> StatsReport:
    """One ``nsys stats -f csv`` report, as a file written with ``-o`` or as captured console output.

    Times come back in ns whatever ``--timeunit`` was. Returns columns by report kind:
    kern_sum/mem_time_sum -> name, calls, total_ns, mean_ns, median_ns;
    nvtx_kern_sum -> range, name, calls, total_ns, mean_ns, median_ns (a kernel counts in every enclosing range);
    nvtx_sum -> range, style, instances, range_total_ns (CPU wall time of the ranges).
    The file is read once, streaming: only the report's rows are kept.
    """
    p = Path(path)
    lines = _Lines(read_lines(p, "nsys stats CSV", errors="replace"))
    previous_limit = csv.field_size_limit(MAX_FIELD_BYTES)
    try:
        header, body = _table(csv.reader(lines), p)
        for _ in lines:  # the rest of the file (other reports, SKIPPED: lines), read but not kept
            pass
    except csv.Error as exc:
        raise InputError(f"{p}: malformed CSV: {exc}") from None
    finally:
        csv.field_size_limit(previous_limit)
    if header is None:
        if lines.skipped:
            return StatsReport("kern_sum", _EMPTY["kern_sum"](), lines.skipped)
        if p.stat().st_size == 0 or not _has_text(p):  # nsys stats writes an empty file for a report with no rows
            kind = _REPORT_KINDS.get(report_name(p), "kern_sum")
            return StatsReport(kind, _EMPTY[kind](), [f"{p.name}: empty report (nsys found no data for it)"])
        if lines.stale_export:
            raise InputError(
                f"{p}: nsys stats refused to reuse an existing SQLite export; re-run it with --force-export=true"
            )
        raise InputError(
            f"{p}: not a recognized profiler output (no nsys stats header such as "
            f"'Time (%),Total Time (ns),...'; nor an ncu --csv log or nsys SQLite export)"
        )
    return StatsReport(*_report_table(header, body, p), lines.skipped)


def _has_text(path: Path) -> bool:
    with path.open("rb") as fh:
        return bool(fh.read(1 << 16).strip())


def _table(rows, path: Path) -> tuple[list[str] | None, list[list[str]]]:
    """The first report's header and data rows; rows after it until a blank line (console output may
    hold several reports). Rows of another width (progress lines) are skipped."""
    header = None
    for row in rows:
        if len(row) > 2 and _stats_kind([c.strip() for c in row]):
            header = [c.strip() for c in row]
            break
    if header is None:
        return None, []
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise InputError(f"{path}: column {repeated[0]!r} appears more than once in the header")
    body = []
    for row in rows:
        if not row:
            break
        if len(row) == len(header):
            if [c.strip() for c in row] == header:
                raise InputError(f"{path}: the header row appears twice (two reports pasted together?)")
            body.append(row)
    return header, body


def _report_table(header: list[str], body: list[list[str]], p: Path) -> tuple[str, pd.DataFrame]:
    frame = pd.DataFrame(body, columns=header)
    kind = _stats_kind(header)
    rename = {}
    for col in header:
        base, unit = _split_unit(col)
        scale = _TIME_UNITS.get(unit, 1.0)
        target = {"Total Time": "total_ns", "Avg": "mean_ns", "Average": "mean_ns", "Med": "median_ns"}.get(base)
        if target and target not in rename.values():
            frame[col] = _numeric(frame[col], p, col, blank_ok=True) * scale
            rename[col] = target
    if kind == "nvtx_sum":
        rename.update({"Range": "range", "Style": "style", "Instances": "instances"})
        frame = frame.rename(columns=rename).rename(columns={"total_ns": "range_total_ns"})
        _require(frame, kind, p)
        frame["instances"] = _numeric(frame["instances"], p, "Instances")
        if "range_total_ns" not in frame:
            frame["range_total_ns"] = float("nan")
        frame["range"] = frame["range"].map(strip_default_domain)
        return kind, frame[["range", "style", "instances", "range_total_ns"]]
    name_col = {"kern_sum": "Name", "mem_time_sum": "Operation", "nvtx_kern_sum": "Kernel Name"}[kind]
    calls_col = {"kern_sum": "Instances", "mem_time_sum": "Count", "nvtx_kern_sum": "Kern Inst"}[kind]
    missing = [c for c in (name_col, calls_col) if c not in header]
    if missing:
        raise InputError(f"{p}: {kind} report without a {missing[0]!r} column")
    rename.update({name_col: "name", calls_col: "calls"})
    frame = frame.rename(columns=rename)
    _require(frame, kind, p)
    frame["calls"] = _numeric(frame["calls"], p, calls_col)
    for optional in ("mean_ns", "median_ns"):  # the 2020-21 reports had no median
        if optional not in frame:
            frame[optional] = float("nan")
    columns = ["name", "calls", "total_ns", "mean_ns", "median_ns"]
    if kind == "nvtx_kern_sum":
        range_col = next(c for c in header if c.startswith("NVTX Range"))
        frame["range"] = frame[range_col].map(strip_default_domain)
        columns = ["range", *columns]
    return kind, frame[columns].reset_index(drop=True)


def _require(frame: pd.DataFrame, kind: str, path: Path) -> None:
    names = {
        "total_ns": "Total Time (ns)",
        "instances": "Instances",
        "range": "Range",
        "name": "Name",
        "calls": "Instances",
    }
    missing = [c for c in _REQUIRED[kind] if c not in frame]
    if missing:
        raise InputError(f"{path}: {kind} report without a {names[missing[0]]!r} column (damaged header?)")


def _numeric(column: pd.Series, path: Path, name: str, blank_ok: bool = False) -> pd.Series:
    """A count or time column as finite numbers >= 0; a cell that is not one is an InputError naming its row
    (``blank_ok``: empty cells become NaN, as nsys leaves some statistics empty)."""
    text = column.astype(str).str.strip()
    values = pd.to_numeric(text.where(text != "", None) if blank_ok else text, errors="coerce")
    bad = (values.isna() & (text != "" if blank_ok else True)) | ~np.isfinite(values.fillna(0)) | (values < 0)
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0])
        cell = str(column.iloc[row])
        shown = cell if len(cell) <= 40 else cell[:37] + "..."
        raise InputError(f"{path}: {name} of data row {row + 1} is not a number >= 0: {shown!r}")
    return values.astype(float)


_HEADER_STARTS = ("Time (%),", "Time(%),", "NVTX Range,", "Range,Style,")


def _from_header_start(line: str) -> str:
    """Console output may print a report's header right after ``Processing [...]... `` on the same line."""
    if line.startswith(_HEADER_STARTS):
        return line
    for token in _HEADER_STARTS:
        pos = line.find(token)
        if pos > 0:
            return line[pos:]
    return line


def _split_unit(column: str) -> tuple[str, str]:
    m = re.fullmatch(r"(.*?)\s*\((\w+)\)", column)
    return (m.group(1), m.group(2)) if m else (column, "")


def strip_default_domain(range_name: str) -> str | None:
    """nsys writes ranges as ``domain:text``; the default domain leaves a bare leading ':'; no range is ''."""
    return (range_name[1:] if range_name.startswith(":") else range_name) or None


_REPORT_KINDS = {
    "cuda_gpu_kern_sum": "kern_sum",
    "gpukernsum": "kern_sum",
    "cuda_gpu_mem_time_sum": "mem_time_sum",
    "gpumemtimesum": "mem_time_sum",
    "nvtx_kern_sum": "nvtx_kern_sum",
    "nvtxkernsum": "nvtx_kern_sum",
    "nvtx_sum": "nvtx_sum",
    "nvtxsum": "nvtx_sum",
}
_EMPTY = {
    "kern_sum": lambda: pd.DataFrame(columns=["name", "calls", "total_ns", "mean_ns", "median_ns"]),
    "mem_time_sum": lambda: pd.DataFrame(columns=["name", "calls", "total_ns", "mean_ns", "median_ns"]),
    "nvtx_kern_sum": lambda: pd.DataFrame(columns=["range", "name", "calls", "total_ns", "mean_ns", "median_ns"]),
    "nvtx_sum": lambda: pd.DataFrame(columns=["range", "style", "instances", "range_total_ns"]),
}


def report_name(path: str | os.PathLike) -> str | None:
    """The report a ``BASE_<report>.csv`` file holds, from its name."""
    name = Path(path).name
    return next((r for r in _REPORT_KINDS if name.endswith(f"_{r}.csv")), None)


def sibling_reports(path: str | os.PathLike) -> dict[str, Path]:
    """The other ``BASE_<report>.csv`` files written by the same ``nsys stats -o BASE`` run."""
    p = Path(path)
    report = report_name(p)
    if report is None:
        return {}
    base = p.name[: -len(f"_{report}.csv")]
    return {
        other: p.with_name(f"{base}_{other}.csv")
        for other in _REPORT_KINDS
        if p.with_name(f"{base}_{other}.csv").exists()
    }
