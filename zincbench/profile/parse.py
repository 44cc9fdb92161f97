"""One entry point for every profiler output: ``parse_file`` -> ``ProfileTables`` (per kernel, per NVTX
range, per category).

Formats, detected from the content: an nsys SQLite export, an ``nsys stats -f csv`` report (sibling
reports of the same ``-o BASE`` run are read too), an ncu ``--csv`` log (raw or details page). Any of them
may be gzip-compressed (``nsys.sqlite.gz``, ``ncu.csv.gz``: how results folders commit the raw exports); a
compressed stats CSV is read without its siblings.
The "kernels" table also lists GPU memory operations (``[CUDA memcpy ...]``, ``[CUDA memset]``) when the
source records them, so shares are of all GPU time the profiler saw.
"""

from __future__ import annotations

import gzip
import os
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from zincbench.errors import InputError
from zincbench.inputs import regular_file
from zincbench.profile import ncu, nsys
from zincbench.profile.categories import CategoryRules, category_table, load_rules

NO_RANGE = "(no NVTX range)"
GZIP_MAGIC = b"\x1f\x8b"
MAX_GUNZIPPED_BYTES = 8 << 30  # a compressed export is unpacked to a temporary file first
_DRAM = ["dram_read_bytes", "dram_write_bytes"]


@dataclass
class ProfileTables:
    source: str
    format: str  # nsys-sqlite | nsys-stats-csv | ncu-csv
    kernels: (
        pd.DataFrame
    )  # name, category, calls, total_ns, mean_ns, median_ns, share [, dram_read_bytes, dram_write_bytes]
    ranges: pd.DataFrame  # range, kernels, calls, total_ns, share [, dram bytes] [, instances]
    categories: pd.DataFrame  # category, kernels, calls, total_ns, share
    notes: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    launches: pd.DataFrame | None = None  # one row per GPU operation, where the source has them

    @property
    def has_dram_bytes(self) -> bool:
        return "dram_read_bytes" in self.kernels and self.kernels["dram_read_bytes"].notna().any()

    def to_dict(self) -> dict:
        """JSON-ready: the three tables as lists of records (NaN -> None), without per-launch rows."""
        return {
            "source": self.source,
            "format": self.format,
            "notes": self.notes,
            "metadata": self.metadata,
            "kernels": frame_records(self.kernels),
            "ranges": frame_records(self.ranges),
            "categories": frame_records(self.categories),
        }


def frame_records(frame: pd.DataFrame) -> list[dict]:
    """Rows as plain dicts, NaN -> None (JSON has no NaN)."""
    return frame.astype(object).where(frame.notna(), None).to_dict(orient="records")


def summarize(
    launches: pd.DataFrame,
    rules: CategoryRules,
    *,
    source: str,
    format: str,
    notes: list[str] | None = None,
    metadata: dict | None = None,
) -> ProfileTables:
    """Tables from per-launch rows (columns ``name``, ``duration_ns``, ``range`` [, DRAM bytes])."""
    dram = [c for c in _DRAM if c in launches and launches[c].notna().any()]
    sums = {c: (c, _sum_or_nan) for c in dram}
    kernels = (
        launches.groupby("name", sort=False)
        .agg(
            calls=("duration_ns", "size"),
            total_ns=("duration_ns", "sum"),
            mean_ns=("duration_ns", "mean"),
            median_ns=("duration_ns", "median"),
            **sums,
        )
        .reset_index()
    )
    kernels = _finish_kernels(kernels, rules, dram)
    in_range = launches.assign(range=launches["range"].fillna(NO_RANGE))
    ranges = (
        in_range.groupby("range", sort=False)
        .agg(kernels=("name", "nunique"), calls=("duration_ns", "size"), total_ns=("duration_ns", "sum"), **sums)
        .reset_index()
    )
    ranges = _with_share(ranges, kernels["total_ns"].sum())[["range", "kernels", "calls", "total_ns", "share", *dram]]
    return ProfileTables(
        source,
        format,
        kernels,
        ranges,
        category_table(kernels, rules),
        list(notes or []),
        dict(metadata or {}),
        launches,
    )


def _sum_or_nan(values: pd.Series) -> float:
    """A sum that stays NaN when nothing was measured (ncu prints n/a for some launches)."""
    return values.sum(min_count=1)


def _with_share(frame: pd.DataFrame, total: float) -> pd.DataFrame:
    frame = frame.assign(share=frame["total_ns"] / total if total > 0 else 0.0)
    return frame.sort_values("total_ns", ascending=False, ignore_index=True)


def _finish_kernels(kernels: pd.DataFrame, rules: CategoryRules, dram: list[str]) -> pd.DataFrame:
    kernels = _with_share(kernels, kernels["total_ns"].sum())
    kernels["category"] = [rules.classify(n) for n in kernels["name"]]
    return kernels[["name", "category", "calls", "total_ns", "mean_ns", "median_ns", "share", *dram]]


def _from_stats(path: Path, rules: CategoryRules) -> ProfileTables:
    reports = {path: nsys.read_stats_csv(path)}
    for sibling in nsys.sibling_reports(path).values():
        if sibling not in reports:  # the file itself is among its siblings: read every file once
            reports[sibling] = nsys.read_stats_csv(sibling)
    by_kind: dict[str, nsys.StatsReport] = {}
    for report in reports.values():
        by_kind.setdefault(report.kind, report)
    notes = [line for r in reports.values() for line in r.skipped]
    if len(reports) > 1:
        notes.append("read with the sibling reports " + ", ".join(r.kind for p, r in reports.items() if p != path))

    ops = [by_kind[k].table for k in ("kern_sum", "mem_time_sum") if k in by_kind and not by_kind[k].table.empty]
    kernel_columns = ["name", "calls", "total_ns", "mean_ns", "median_ns"]
    kernels = pd.concat(ops, ignore_index=True) if ops else pd.DataFrame(columns=kernel_columns)
    kernels = _finish_kernels(kernels, rules, [])
    total = kernels["total_ns"].sum()

    range_columns = ["range", "kernels", "calls", "total_ns", "share"]
    ranges = pd.DataFrame(columns=range_columns)
    if "nvtx_kern_sum" in by_kind and not by_kind["nvtx_kern_sum"].table.empty:
        per_pair = by_kind["nvtx_kern_sum"].table.assign(range=lambda t: t["range"].fillna(NO_RANGE))
        ranges = (
            per_pair.groupby("range", sort=False)
            .agg(kernels=("name", "nunique"), calls=("calls", "sum"), total_ns=("total_ns", "sum"))
            .reset_index()
        )
        ranges = _with_share(ranges, total)[range_columns]
        notes.append("nested NVTX ranges' shares overlap (nvtx_kern_sum counts a kernel in each)")
    if "nvtx_sum" in by_kind and not by_kind["nvtx_sum"].table.empty:
        cpu = (
            by_kind["nvtx_sum"]
            .table.groupby("range", sort=False)
            .agg(instances=("instances", "sum"), range_total_ns=("range_total_ns", "sum"))
            .reset_index()
        )
        ranges = cpu if ranges.empty else ranges.merge(cpu, on="range", how="left")
        notes.append("range CPU time is the ranges' CPU wall time (nvtx_sum), not GPU time")
    return ProfileTables(str(path), "nsys-stats-csv", kernels, ranges, category_table(kernels, rules), notes)


def detect_format(path: str | os.PathLike) -> str:
    p = regular_file(path, "profiler output file")
    suffix_hints = {
        ".nsys-rep": f"export it first: nsys export --type sqlite -f true -o {p.with_suffix('.sqlite')} {p}",
        ".qdrep": f"export it first: nsys export --type sqlite -f true -o {p.with_suffix('.sqlite')} {p}",
        ".qdstrm": "an unfinished nsys capture: convert it with QdstrmImporter -i FILE, or fix nsys' importer "
        "(zincbench env names the missing library)",
        ".ncu-rep": "print it as CSV first: "
        f"ncu --import {p} --csv --page raw --print-units base > {p.with_suffix('.csv')}",
    }
    if p.suffix in suffix_hints:
        raise InputError(f"{p}: {suffix_hints[p.suffix]}")
    with p.open("rb") as fh:
        head = fh.read(1 << 16)
    if not head.strip():
        if nsys.report_name(p):
            return "nsys-stats-csv"  # nsys stats writes an empty file for a report with no rows
        raise InputError(f"{p}: empty file")
    if head.startswith(b"SQLite format 3\x00"):
        return "nsys-sqlite"
    text = head.decode("utf-8", errors="replace")
    if "==PROF==" in text or ('"Kernel Name"' in text and '"ID"' in text):
        return "ncu-csv"
    return "nsys-stats-csv"


def is_gzip(path: str | os.PathLike) -> bool:
    with regular_file(path, "profiler output file").open("rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def _gunzip(path: Path, target: Path) -> None:
    """Unpack ``path`` into ``target``; a damaged or oversized archive is an InputError."""
    written = 0
    try:
        with gzip.open(path, "rb") as src, target.open("wb") as dst:
            while chunk := src.read(1 << 20):
                written += len(chunk)
                if written > MAX_GUNZIPPED_BYTES:
                    raise InputError(f"{path}: unpacks to more than {MAX_GUNZIPPED_BYTES >> 30} GiB")
                dst.write(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: damaged gzip file: {exc}") from None


def parse_file(path: str | os.PathLike, rules: CategoryRules | None = None) -> ProfileTables:
    """Parse any supported profiler output (or a gzip of one) into per-kernel, per-range and per-category tables."""
    rules = rules or load_rules()
    p = Path(path)
    if not is_gzip(p):
        return _parse_plain(p, rules)
    inner = p.name.removesuffix(".gz") if p.name.endswith(".gz") and len(p.name) > 3 else p.name + ".unpacked"
    with tempfile.TemporaryDirectory(prefix="zb-gunzip-") as tmp:
        unpacked = Path(tmp) / inner
        _gunzip(p, unpacked)
        tables = _parse_plain(unpacked, rules)
    tables.source = str(p)
    tables.notes = [note.replace(str(unpacked), str(p)) for note in tables.notes]
    return tables


def _parse_plain(p: Path, rules: CategoryRules) -> ProfileTables:
    fmt = detect_format(p)
    if fmt == "nsys-sqlite":
        launches, metadata, notes = nsys.read_sqlite(p)
        return summarize(launches, rules, source=str(p), format=fmt, notes=notes, metadata=metadata)
    if fmt == "ncu-csv":
        launches, notes = ncu.read_csv(p)
        return summarize(launches, rules, source=str(p), format=fmt, notes=notes)
    return _from_stats(p, rules)


def _field(row: dict, dotted: str):
    """``row["traffic"]["bytes_model"]`` or an already flattened ``row["traffic.bytes_model"]``."""
    if dotted in row:
        return row[dotted]
    value = row
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def traffic_comparison(launches: pd.DataFrame | None, results: list[dict]) -> pd.DataFrame:
    """Measured DRAM bytes per invocation (ncu) next to the microbench traffic model, per NVTX range.

    The microbench names each range ``<family>/<variant>/<case>``; its results rows carry ``variant``,
    ``case`` (or ``shape``) and ``traffic.bytes_model``. A range holds every invocation of its variant
    (warm-up and samples) plus a few timer launches, and an invocation launches each of its kernels the
    same number of times, so invocations = the most common launch count among the range's kernels
    (ties: the larger), and bytes per invocation = the range's read + write bytes / invocations.
    """
    columns = [
        "range",
        "variant",
        "shape",
        "kernels",
        "launches",
        "invocations",
        "measured_bytes",
        "model_bytes",
        "measured_over_model",
    ]
    model = {}
    for row in results:
        variant, shape = row.get("variant"), row.get("shape", row.get("case"))
        predicted = _field(row, "traffic.bytes_model")
        if variant is not None and shape is not None and predicted is not None:
            model[f"{variant}/{shape}"] = predicted
    if launches is None or launches.empty or "dram_read_bytes" not in launches:
        return pd.DataFrame(columns=columns)
    out = []
    for range_name, group in launches.dropna(subset=["range"]).groupby("range", sort=False):
        key = range_name.partition("/")[2]
        if key not in model:
            continue
        variant, _, shape = key.partition("/")
        counts = group.groupby("name").size().value_counts()
        invocations = int(max(counts[counts == counts.max()].index))
        measured = (group["dram_read_bytes"].sum() + group["dram_write_bytes"].sum()) / invocations
        predicted = model[key]
        out.append(
            [
                range_name,
                variant,
                shape,
                group["name"].nunique(),
                len(group),
                invocations,
                measured,
                predicted,
                measured / predicted if predicted else float("nan"),
            ]
        )
    return pd.DataFrame(out, columns=columns)
