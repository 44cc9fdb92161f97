"""History: microbench results documents read as series across commits, one series per family x case x
variant x GPU, each with its steps (zincbench.change_points) and its latest run against the previous one
(judge.compare_medians on the two runs' samples).

Runs are ordered by their document's ``timestamp`` (when the run was recorded): a document names its
commit but not the commit's date, so recording time stands in for commit time. Documents are read and
checked as ``zincbench report`` reads them (one clear InputError naming the file and field); documents of
other kinds are left out with a note.
"""

from __future__ import annotations

import collections
import datetime as _dt
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from zincbench import judge
from zincbench.bench.rows import MicrobenchRow
from zincbench.change_points import Step, find_steps
from zincbench.config import EXPERIMENTS_DIR, load_config
from zincbench.errors import InputError
from zincbench.records import DOCUMENT_SUFFIXES
from zincbench.report import Source, load_sources

DEFAULT_RULES_PATH = EXPERIMENTS_DIR / "history.yaml"


@dataclass(frozen=True)
class HistoryRules:
    """experiments/history.yaml: when a history steps, and how sure the latest-vs-previous comparison is."""

    min_change: float = 0.03
    min_runs: int = 2
    confidence: float = 0.99

    def __post_init__(self) -> None:
        if not 0 < self.min_change < 1:
            raise ValueError(f"min_change must be a fraction in (0, 1), got {self.min_change!r}")
        if self.min_runs < 1:
            raise ValueError(f"min_runs must be at least 1, got {self.min_runs!r}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be strictly between 0 and 1, got {self.confidence!r}")


def load_rules(path: str | os.PathLike | None = None) -> HistoryRules:
    return load_config(HistoryRules, path or DEFAULT_RULES_PATH)


def _finite(value) -> float:
    """``value`` as a float, NaN for anything that is not a finite number (a recorded null)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        return math.nan
    return number if math.isfinite(number) else math.nan


@dataclass(frozen=True)
class Run:
    """One recorded run of one series: a microbench row and the document it came from."""

    row: MicrobenchRow
    commit: str | None
    run_id: str | None
    timestamp: _dt.datetime
    path: Path

    @property
    def label(self) -> str:
        """The commit (12 hex digits, -dirty kept: the tree had changes), or the run id without one."""
        return self.commit or f"run {self.run_id or self.path.stem}"

    @property
    def median_us(self) -> float:
        return _finite(self.row.summary.median_us)

    @property
    def interval_us(self) -> tuple[float, float]:
        ci = self.row.summary.median_ci_us
        return (_finite(ci[0]), _finite(ci[1])) if isinstance(ci, list) and len(ci) == 2 else (math.nan, math.nan)

    @property
    def samples_us(self) -> list[float]:
        """The run's timed samples (what is not a finite number left out: a recorded null)."""
        samples = self.row.measurement.gpu_us if self.row.measurement else []
        return [x for x in map(_finite, samples if isinstance(samples, list) else []) if math.isfinite(x)]


@dataclass(frozen=True)
class SeriesKey:
    family: str
    case: str
    variant: str
    gpu: str

    @property
    def name(self) -> str:
        return f"{self.family}/{self.case}/{self.variant}"

    @property
    def label(self) -> str:
        """The series' name with its GPU: unique in a history (what exported benchmarks are called)."""
        return f"{self.name} on {self.gpu}"


@dataclass
class Series:
    key: SeriesKey
    runs: list[Run]  # oldest first
    steps: list[Step] = field(default_factory=list)
    change: judge.Comparison | None = None  # the latest run against the previous one

    @property
    def latest(self) -> Run:
        return self.runs[-1]

    @property
    def best(self) -> Run:
        return min(self.runs, key=lambda r: r.median_us)

    @property
    def regression(self) -> Step | None:
        """The newest step, when it made the kernel slower: the series is slower now than before it."""
        return self.steps[-1] if self.steps and self.steps[-1].ratio > 1 else None


@dataclass
class History:
    series: list[Series]
    rules: HistoryRules
    documents: int  # microbench documents read
    notes: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[Series]:
        return [s for s in self.series if s.regression is not None]


def documents_under(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """The files given and every ``*.json`` and ``*.json.gz`` under the folders given (sorted); a missing path is an
    InputError."""
    found = []
    for given in paths:
        p = Path(given)
        if p.is_dir():
            found += sorted(q for q in p.rglob("*.json*") if q.is_file() and q.name.endswith(DOCUMENT_SUFFIXES))
        elif p.exists():
            found.append(p)
        else:
            raise InputError(f"{p}: no such file or folder")
    return found


def _timestamp(source: Source) -> _dt.datetime:
    text = source.doc.get("timestamp")
    try:
        stamp = _dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise InputError(f"{source.path}: timestamp {text!r} is not an ISO 8601 time") from None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=_dt.timezone.utc)


def _text(value) -> str | None:
    return value if isinstance(value, str) and value else None


def _runs(sources: list[Source]) -> dict[SeriesKey, list[Run]]:
    runs: dict[SeriesKey, list[Run]] = collections.defaultdict(list)
    for source in sources:
        stamp = _timestamp(source)
        commit, run_id = _text(source.doc.get("git_commit")), _text(source.doc.get("run_id"))
        row: MicrobenchRow
        for row in source.doc.get("results") or []:
            if row.summary is None or not _finite(row.summary.median_us) > 0:
                continue  # not timed (skipped, failed its check): nothing to put in a history
            family = row.family or (source.doc.get("config") or {}).get("family") or "?"
            runs[SeriesKey(family, row.case, row.variant, source.device)].append(
                Run(row=row, commit=commit, run_id=run_id, timestamp=stamp, path=source.path)
            )
    return runs


def analyse(key: SeriesKey, runs: list[Run], rules: HistoryRules) -> Series:
    """One series' steps and its latest change; ``runs`` oldest first."""
    series = Series(key=key, runs=runs)
    series.steps = find_steps(
        [r.median_us for r in runs],
        [r.interval_us[0] for r in runs],
        [r.interval_us[1] for r in runs],
        rules.min_change,
        rules.min_runs,
    )
    if len(runs) >= 2:
        series.change = judge.compare_medians(
            runs[-2].samples_us, runs[-1].samples_us, threshold=rules.min_change, confidence=rules.confidence
        )
    return series


def build_history(paths: Iterable[str | os.PathLike], rules: HistoryRules) -> History:
    paths = list(paths)
    files = documents_under(paths)
    if not files:
        raise InputError(f"no results documents (*.json, *.json.gz) under {', '.join(map(str, paths))}")
    sources = load_sources(files)
    microbench = [s for s in sources if s.kind == "microbench"]
    others = collections.Counter(s.kind for s in sources if s.kind != "microbench")
    notes = [
        f"left out {n} {kind} document(s): a history is read from microbench documents"
        for kind, n in sorted(others.items())
    ]
    if not microbench:
        raise InputError(f"no microbench documents among the {len(sources)} read")
    by_key = _runs(microbench)
    # grouped by family and GPU; cases and variants in the order the documents list them
    series = [
        analyse(key, sorted(runs, key=lambda r: (r.timestamp, str(r.path))), rules)
        for key, runs in sorted(by_key.items(), key=lambda kv: (kv[0].family, kv[0].gpu))
    ]
    return History(series=series, rules=rules, documents=len(microbench), notes=notes)
