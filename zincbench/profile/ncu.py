"""Nsight Compute: run ``ncu`` around a command for per-launch duration and DRAM bytes, and read its CSV.

``ncu --csv --page raw`` writes a wide table: ``==PROF==``/``==WARNING==`` lines, a header row, a units
row, then one row per profiled launch, with locale thousands separators (``"6,176"``) and demangled
kernel names that contain commas. ``--page details`` writes the long form (one row per metric); both
are read here, columns always by name.
"""

from __future__ import annotations

import csv
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from zincbench.errors import EnvironmentProblem, InputError
from zincbench.gpu.tools import require_profiler, tool_version
from zincbench.inputs import read_lines
from zincbench.measure.process import EngineFailure, run_process
from zincbench.profile.nsys import MAX_FIELD_BYTES

METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")
LAUNCH_COLUMNS = ["name", "duration_ns", "range", "start_ns", "dram_read_bytes", "dram_write_bytes"]

_UNIT_SCALE = {
    "ns": 1.0,
    "nsecond": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "s": 1e9,
    "second": 1e9,
    "byte": 1.0,
    "Kbyte": 1e3,
    "Mbyte": 1e6,
    "Gbyte": 1e9,
    "Tbyte": 1e12,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "KiB": 2.0**10,
    "MiB": 2.0**20,
    "GiB": 2.0**30,
}
_PUSHPOP_PREFIX = "thread Domain:Push/Pop_Range"
_STARTEND_PREFIX = "Id:Domain:Start/Stop_Range"
_DEFAULT_DOMAIN = "<default domain>"


@dataclass
class NcuRun:
    csv: Path
    exit_code: int | None
    ncu: str
    version: str | None
    log: Path
    notes: list[str] = field(default_factory=list)


def command_line(
    ncu: str, argv: list[str], csv_path: Path, nvtx_include: tuple[str, ...] = (), metrics: tuple[str, ...] = METRICS
) -> list[str]:
    """Unmodified clocks (comparable with nsys), base units, unsimplified kernel names, NVTX ranges per launch."""
    include = [arg for rule in nvtx_include for arg in ("--nvtx-include", rule)]
    return [
        ncu,
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--clock-control",
        "none",
        "--rename-kernels",
        "off",
        "--metrics",
        ",".join(metrics),
        "--nvtx",
        *include,
        "--log-file",
        str(csv_path),
        *argv,
    ]


def profile_command(
    argv: list[str],
    out_dir: str | os.PathLike,
    *,
    name: str = "ncu",
    nvtx_include: tuple[str, ...] = (),
    timeout_s: float = 3600.0,
    env: dict[str, str] | None = None,
) -> NcuRun:
    ncu = require_profiler("ncu")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / f"{name}.csv"
    log = out / f"{name}.log"
    csv_path.unlink(missing_ok=True)
    argv_full = command_line(ncu, argv, csv_path, nvtx_include)
    try:
        result = run_process(argv_full, env=env, timeout_s=timeout_s)
    except EngineFailure as exc:
        raise EnvironmentProblem(str(exc)) from None
    log.write_text(f"$ {' '.join(argv_full)}\n{result.stdout}{result.stderr}\n", encoding="utf-8")
    tool_text = "\n".join([*_tool_messages(csv_path), result.stdout, result.stderr])
    if "ERR_NVGPUCTRPERM" in tool_text:
        raise EnvironmentProblem(
            "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): run as root, or "
            "set the driver option NVreg_RestrictProfilingToAdminUsers=0"
        )
    if "LibraryNotLoaded" in tool_text:
        raise EnvironmentProblem(
            f"ncu could not initialize its profiler (LibraryNotLoaded; sandboxed host?); see {log}"
        )
    if result.timed_out:
        raise EnvironmentProblem(f"ncu timed out after {timeout_s:.0f} s; see {log}")
    if not csv_path.exists():
        raise EnvironmentProblem(f"ncu wrote no output (exit {result.returncode}); see {log}: {result.tail(1)}")
    notes = [] if result.returncode == 0 else [f"ncu exited with code {result.returncode} (see {log})"]
    return NcuRun(csv_path, result.returncode, ncu, tool_version(ncu), log, notes)


def _tool_messages(csv_path: Path) -> list[str]:
    """The log's lines that hold ncu's failure codes, read line by line (the log can be a large CSV)."""
    if not csv_path.exists():
        return []
    return [
        line
        for line in read_lines(csv_path, "ncu log", errors="replace")
        if "ERR_NVGPUCTRPERM" in line or "LibraryNotLoaded" in line
    ]


def number(text: str) -> float:
    """An ncu CSV value: thousands separators removed, empty / n/a -> NaN."""
    cleaned = text.strip().replace(",", "")
    if cleaned in ("", "n/a", "N/A"):
        return math.nan
    try:
        return float(cleaned)
    except ValueError:
        return math.nan


def range_from_nvtx_cell(cell: str, start_end: bool = False) -> str | None:
    """The innermost range of an ncu ``--nvtx`` cell.

    A push/pop cell is the thread id then one quoted stack entry per open range, outermost first:
    ``6393  "<default domain>:step:Int64:0:RGB:0xff0000:REGISTERED:step"``; entries are
    ``Domain:Name:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg`` (start/end entries start with an Id field).
    The default domain gives the bare name, others ``domain:name`` (as nsys writes them).
    """
    entries = re.findall(r'"([^"]*)"', cell)
    if not entries:  # a single unquoted entry, after the thread id of a push/pop cell
        rest = cell.strip() if start_end else re.sub(r"^\d+\s*", "", cell.strip())
        entries = [rest] if rest else []
    if not entries:
        return None
    parts = entries[-1].split(":")
    fixed = 9 if start_end else 8
    if len(parts) < fixed:
        return entries[-1]
    name_fields = (len(parts) - fixed) // 2 + 1  # the name appears twice (Name and Msg); it may contain ':'
    domain = parts[1] if start_end else parts[0]
    name = ":".join(parts[-name_fields:])
    return name if domain == _DEFAULT_DOMAIN else f"{domain}:{name}"


def read_csv(path: str | os.PathLike) -> tuple[pd.DataFrame, list[str]]:
    """Per-launch rows (``LAUNCH_COLUMNS``; ``start_ns`` is the launch ID, ncu has no timestamps) and notes.

    The file is read once, row by row, keeping only the columns used: a large export (``--set full`` has
    hundreds of columns per launch) takes memory for its launches, not for its text.
    """
    p = Path(path)
    lines = _ToolLines(read_lines(p, "ncu CSV", errors="replace"))
    previous_limit = csv.field_size_limit(MAX_FIELD_BYTES)
    try:
        rows = csv.reader(lines)
        header = next((r for r in rows if "Kernel Name" in r and "ID" in r), None)
        if header is None:
            if lines.profiler_output:
                return pd.DataFrame(columns=LAUNCH_COLUMNS), [f"{p.name}: ncu profiled no kernels"]
            raise InputError(f"{p}: not an ncu CSV (no header with 'ID' and 'Kernel Name')")
        repeated = sorted({c for c in header if header.count(c) > 1})
        if repeated:
            raise InputError(f"{p}: column {repeated[0]!r} appears more than once in the header")
        body = (r for r in rows if len(r) == len(header))  # rows of another width are console lines
        if "Metric Name" in header and "Metric Value" in header:
            return _checked(_from_details(header, body), p), []
        return _from_raw(header, body, p)
    except csv.Error as exc:
        raise InputError(f"{p}: malformed CSV: {exc}") from None
    finally:
        csv.field_size_limit(previous_limit)


class _ToolLines:
    """The CSV's lines without ncu's ``==PROF==``/``==WARNING==`` console lines; remembers whether the
    file was ncu's output at all (to tell "profiled no kernels" from another file)."""

    def __init__(self, lines):
        self._lines = lines
        self.profiler_output = False

    def __iter__(self):
        for line in self._lines:
            if "==PROF==" in line or "No kernels were profiled" in line:
                self.profiler_output = True
            if not line.startswith("=="):
                yield line


def _from_raw(header: list[str], body, path: Path) -> tuple[pd.DataFrame, list[str]]:
    """``--page raw`` CSV: a units row (empty ID) first, then one row per launch."""
    pushpop = next((c for c in header if c.startswith(_PUSHPOP_PREFIX)), None)
    startend = next((c for c in header if c.startswith(_STARTEND_PREFIX)), None)
    metrics = [m for m in METRICS if m in header]
    kept = {c: header.index(c) for c in ["ID", "Kernel Name", *metrics, pushpop, startend] if c is not None}
    cells: dict[str, list[str]] = {c: [] for c in kept}
    units = {}
    for n, row in enumerate(body):
        if n == 0 and row[kept["ID"]] == "":  # the units row
            units = {c: row[i] for c, i in kept.items()}
            continue
        for column, i in kept.items():
            cells[column].append(row[i])
    notes = []
    launches = pd.DataFrame({"name": cells["Kernel Name"], "start_ns": [number(v) for v in cells["ID"]]})
    for metric, column in zip(METRICS, ["duration_ns", "dram_read_bytes", "dram_write_bytes"]):
        if metric in cells:
            scale = _UNIT_SCALE.get(units.get(metric, ""), 1.0)
            launches[column] = [number(v) * scale for v in cells[metric]]
        else:
            launches[column] = math.nan
            notes.append(f"{path.name}: no {metric} column")
    no_cells = [None] * len(launches)
    launches["range"] = [
        _innermost_range(start_end, push_pop)
        for start_end, push_pop in zip(cells.get(startend, no_cells), cells.get(pushpop, no_cells))
    ]
    return _checked(launches[LAUNCH_COLUMNS], path), notes


def _checked(launches: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Durations and byte counts are NaN (not measured) or finite and >= 0; anything else is a damaged log."""
    for column in ("duration_ns", "dram_read_bytes", "dram_write_bytes"):
        values = launches[column] = pd.to_numeric(launches[column], errors="coerce").astype(float)
        bad = values.notna() & ~(np.isfinite(values.fillna(0)) & (values.fillna(0) >= 0))
        if bad.any():
            raise InputError(
                f"{path}: {column} of launch {launches['start_ns'][bad].iloc[0]!r} is "
                f"{values[bad].iloc[0]!r}, not a measurement"
            )
    return launches


def _innermost_range(start_end_cell: str | None, push_pop_cell: str | None) -> str | None:
    # ncu gives no timestamps to order an open start/end range against the push/pop stack; the start/end
    # range is taken, as it is usually the narrower one (nsys agrees on the capture fixture).
    name = range_from_nvtx_cell(start_end_cell, start_end=True) if start_end_cell is not None else None
    if name is None and push_pop_cell is not None:
        name = range_from_nvtx_cell(push_pop_cell)
    return name


def _from_details(header: list[str], body) -> pd.DataFrame:
    """``--page details`` CSV: one row per (launch, metric) -> one row per launch, ordered by ID.

    Only the first number of each wanted metric is kept; a launch without a single number (every metric
    n/a) is left out, as there is nothing to tell about it.
    """
    i_id, i_name, i_metric, i_value = (header.index(c) for c in ("ID", "Kernel Name", "Metric Name", "Metric Value"))
    i_unit = header.index("Metric Unit") if "Metric Unit" in header else None
    measured: dict[tuple[str, str], dict[str, float]] = {}  # (ID, kernel name) -> metric -> value
    for row in body:
        amount = number(row[i_value]) * _UNIT_SCALE.get(row[i_unit] if i_unit is not None else "", 1.0)
        if math.isnan(amount):
            continue
        metrics = measured.setdefault((row[i_id], row[i_name]), {})
        if row[i_metric] in METRICS:
            metrics.setdefault(row[i_metric], amount)
    keys = sorted(measured)
    launches = pd.DataFrame({"name": [k[1] for k in keys], "start_ns": [number(k[0]) for k in keys], "range": None})
    for metric, column in zip(METRICS, ["duration_ns", "dram_read_bytes", "dram_write_bytes"]):
        launches[column] = [measured[k].get(metric, math.nan) for k in keys]
    return launches.sort_values("start_ns", ignore_index=True)[LAUNCH_COLUMNS]
