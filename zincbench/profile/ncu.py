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

from zincbench.engines.base import EngineFailure
from zincbench.engines.process import run_process
from zincbench.errors import EnvironmentProblem, InputError
from zincbench.gpu.tools import find_tool, tool_version
from zincbench.inputs import read_text
from zincbench.profile.nsys import MAX_FIELD_BYTES

INSTALL_HINT = ("install NVIDIA Nsight Compute (https://developer.nvidia.com/nsight-compute; the CUDA toolkit "
                "ships it as /usr/local/cuda/bin/ncu) and put ncu on PATH")
METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")
LAUNCH_COLUMNS = ["name", "duration_ns", "range", "start_ns", "dram_read_bytes", "dram_write_bytes"]

_UNIT_SCALE = {
    "ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9,
    "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
    "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30,
}
_PUSHPOP_PREFIX = "thread Domain:Push/Pop_Range"
_STARTEND_PREFIX = "Id:Domain:Start/Stop_Range"
_DEFAULT_DOMAIN = "<default domain>"


def find_ncu() -> str:
    path = find_tool("ncu")
    if path is None:
        raise EnvironmentProblem(f"ncu (NVIDIA Nsight Compute) not found: {INSTALL_HINT}")
    return path


@dataclass
class NcuRun:
    csv: Path
    exit_code: int | None
    ncu: str
    version: str | None
    log: Path
    notes: list[str] = field(default_factory=list)


def command_line(ncu: str, argv: list[str], csv_path: Path, nvtx_include: tuple[str, ...] = (),
                 metrics: tuple[str, ...] = METRICS) -> list[str]:
    """Unmodified clocks (comparable with nsys), base units, unsimplified kernel names, NVTX ranges per launch."""
    include = [arg for rule in nvtx_include for arg in ("--nvtx-include", rule)]
    return [ncu, "--csv", "--page", "raw", "--print-units", "base", "--clock-control", "none",
            "--rename-kernels", "off", "--metrics", ",".join(metrics), "--nvtx", *include,
            "--log-file", str(csv_path), *argv]


def profile_command(argv: list[str], out_dir: str | os.PathLike, *, name: str = "ncu",
                    nvtx_include: tuple[str, ...] = (), timeout_s: float = 3600.0,
                    env: dict[str, str] | None = None) -> NcuRun:
    ncu = find_ncu()
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
    log.write_text(f"$ {' '.join(argv_full)}\n{result.stdout}{result.stderr}\n")
    tool_text = (csv_path.read_text(errors="replace") if csv_path.exists() else "") + result.stdout + result.stderr
    if "ERR_NVGPUCTRPERM" in tool_text:
        raise EnvironmentProblem("ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): run as root, or "
                                 "set the driver option NVreg_RestrictProfilingToAdminUsers=0")
    if "LibraryNotLoaded" in tool_text:
        raise EnvironmentProblem(f"ncu could not initialize its profiler (LibraryNotLoaded; sandboxed host?); see {log}")
    if result.timed_out:
        raise EnvironmentProblem(f"ncu timed out after {timeout_s:.0f} s; see {log}")
    if not csv_path.exists():
        raise EnvironmentProblem(f"ncu wrote no output (exit {result.returncode}); see {log}: {result.tail(1)}")
    notes = [] if result.returncode == 0 else [f"ncu exited with code {result.returncode} (see {log})"]
    return NcuRun(csv_path, result.returncode, ncu, tool_version(ncu), log, notes)


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
    """Per-launch rows (``LAUNCH_COLUMNS``; ``start_ns`` is the launch ID, ncu has no timestamps) and notes."""
    p = Path(path)
    text = read_text(p, "ncu CSV", errors="replace")
    previous_limit = csv.field_size_limit(MAX_FIELD_BYTES)
    try:
        rows = list(csv.reader(line for line in text.splitlines() if not line.startswith("==")))
    except csv.Error as exc:
        raise InputError(f"{p}: malformed CSV: {exc}") from None
    finally:
        csv.field_size_limit(previous_limit)
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r and "ID" in r), None)
    if start is None:
        if "No kernels were profiled" in text or "==PROF==" in text:
            return pd.DataFrame(columns=LAUNCH_COLUMNS), [f"{p.name}: ncu profiled no kernels"]
        raise InputError(f"{p}: not an ncu CSV (no header with 'ID' and 'Kernel Name')")
    header = rows[start]
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise InputError(f"{p}: column {repeated[0]!r} appears more than once in the header")
    body = [r for r in rows[start + 1:] if len(r) == len(header)]
    if "Metric Name" in header and "Metric Value" in header:
        return _checked(_from_details(pd.DataFrame(body, columns=header)), p), []
    units = {}
    if body and body[0][header.index("ID")] == "":  # the units row
        units = dict(zip(header, body.pop(0)))
    frame = pd.DataFrame(body, columns=header)
    notes = []
    launches = pd.DataFrame({"name": frame["Kernel Name"], "start_ns": frame["ID"].map(number)})
    for metric, column in zip(METRICS, ["duration_ns", "dram_read_bytes", "dram_write_bytes"]):
        if metric in frame:
            scale = _UNIT_SCALE.get(units.get(metric, ""), 1.0)
            launches[column] = frame[metric].map(number) * scale
        else:
            launches[column] = math.nan
            notes.append(f"{p.name}: no {metric} column")
    launches["range"] = _ranges(frame, header)
    return _checked(launches[LAUNCH_COLUMNS], p), notes


def _checked(launches: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Durations and byte counts are NaN (not measured) or finite and >= 0; anything else is a damaged log."""
    for column in ("duration_ns", "dram_read_bytes", "dram_write_bytes"):
        values = launches[column] = pd.to_numeric(launches[column], errors="coerce").astype(float)
        bad = values.notna() & ~(np.isfinite(values.fillna(0)) & (values.fillna(0) >= 0))
        if bad.any():
            raise InputError(f"{path}: {column} of launch {launches['start_ns'][bad].iloc[0]!r} is "
                             f"{values[bad].iloc[0]!r}, not a measurement")
    return launches


def _ranges(frame: pd.DataFrame, header: list[str]) -> list:
    pushpop = next((c for c in header if c.startswith(_PUSHPOP_PREFIX)), None)
    startend = next((c for c in header if c.startswith(_STARTEND_PREFIX)), None)
    ranges = []
    for _, row in frame.iterrows():
        # ncu gives no timestamps to order an open start/end range against the push/pop stack; the start/end
        # range is taken, as it is usually the narrower one (nsys agrees on the capture fixture).
        name = range_from_nvtx_cell(row[startend], start_end=True) if startend else None
        if name is None and pushpop:
            name = range_from_nvtx_cell(row[pushpop])
        ranges.append(name)
    return ranges


def _from_details(long: pd.DataFrame) -> pd.DataFrame:
    """``--page details`` CSV: one row per (launch, metric) -> one row per launch."""
    long = long.assign(value=[number(v) * _UNIT_SCALE.get(u, 1.0)
                              for v, u in zip(long["Metric Value"], long["Metric Unit"])])
    wide = long.pivot_table(index=["ID", "Kernel Name"], columns="Metric Name", values="value", aggfunc="first")
    wide = wide.reset_index()
    launches = pd.DataFrame({"name": wide["Kernel Name"], "start_ns": wide["ID"].map(number), "range": None})
    for metric, column in zip(METRICS, ["duration_ns", "dram_read_bytes", "dram_write_bytes"]):
        launches[column] = wide[metric] if metric in wide else math.nan
    return launches.sort_values("start_ns", ignore_index=True)[LAUNCH_COLUMNS]

