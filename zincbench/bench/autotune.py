"""Pick the fastest of a small declared set of kernel configurations, per GPU and case, and cache it.

Tuning that does not lie:
  1. every applicable candidate is timed in round-robin rounds (drift such as a clock still boosting
     spreads over all candidates instead of condemning the one measured first);
  2. the best two are re-measured interleaved (A B A B ...) and judged with a paired comparison
     (zincbench.judge.compare_paired), which cancels slow drift between them;
  3. all medians, the re-measure and its verdict go into the row's detail; the runner then compares
     the final timed median with the tuned one (``flag_drift``) and warns when they disagree.

The cache (``autotune.json`` in ~/.cache/zincbench, or in the folder $ZINCBENCH_CACHE names) is keyed
by device, driver, CUDA runtime, NVRTC and a hash of the bundled kernel sources, so a driver update
or a kernel change re-tunes. Writers merge under a file lock and replace the file atomically, so
concurrent runs lose no entries; a file of another shape is ignored (with a warning) and rebuilt.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from zincbench import judge
from zincbench.errors import InputError
from zincbench.measure.stopping.count import FixedCountRule
from zincbench.resources import kernels_dir

CACHE_VERSION = 2
SCAN_ROUNDS = 3  # round-robin rounds over every candidate
RECHECK_ROUNDS = 10  # interleaved A/B rounds between the best two (paired t-interval over rounds)
SAMPLES_PER_ROUND = 5
DRIFT_WARN = 0.10  # final timed median vs the tuned median, relative


def warn(message: str) -> None:
    print(f"zincbench: warning: {message}", file=sys.stderr, flush=True)


# ---- the cache -----------------------------------------------------------------------------------


def cache_path() -> Path:
    """``autotune.json`` in $ZINCBENCH_CACHE (a folder) or ~/.cache/zincbench; InputError when the
    variable names something that is not a folder."""
    configured = os.environ.get("ZINCBENCH_CACHE")
    root = Path(configured) if configured else Path.home() / ".cache" / "zincbench"
    if configured and root.exists() and not root.is_dir():
        raise InputError(f"ZINCBENCH_CACHE={configured}: not a folder (it names the folder that holds autotune.json)")
    path = root / "autotune.json"
    if path.is_dir():
        raise InputError(f"autotune cache {path} is a folder, not a file")
    return path


def _medians(value) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for k, v in value.items()
    )


def _valid_entry(entry) -> bool:
    if not (
        isinstance(entry, dict)
        and isinstance(entry.get("choice"), str)
        and _medians(entry.get("medians_us"))
        and entry["choice"] in entry["medians_us"]
    ):
        return False
    recheck = entry.get("recheck")
    return recheck is None or (
        isinstance(recheck, dict) and _medians(recheck.get("medians_us")) and entry["choice"] in recheck["medians_us"]
    )


class TuneCache:
    """The on-disk picks: ``{"version": 2, "entries": {key: {"choice", "medians_us", ...}}}``."""

    def __init__(self, path: Path):
        self.path = path
        self.notes: list[str] = []  # warnings already printed, kept for the record

    def _note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)
            warn(message)

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError) as exc:
            self._note(f"autotune cache {self.path} unreadable ({type(exc).__name__}); ignoring it, it is rebuilt")
            return {}
        if not (
            isinstance(data, dict) and data.get("version") == CACHE_VERSION and isinstance(data.get("entries"), dict)
        ):
            self._note(f"autotune cache {self.path} has another layout; ignoring it, it is rebuilt")
            return {}
        entries = {k: v for k, v in data["entries"].items() if _valid_entry(v)}
        if len(entries) != len(data["entries"]):
            self._note(f"autotune cache {self.path}: {len(data['entries']) - len(entries)} malformed entries ignored")
        return entries

    def get(self, key: str) -> dict | None:
        return self._read().get(key)

    @contextlib.contextmanager
    def _locked(self):
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def drop(self, key: str) -> None:
        self._update(lambda entries: entries.pop(key, None))

    def put(self, key: str, entry: dict) -> None:
        self._update(lambda entries: entries.__setitem__(key, entry))

    def _update(self, change) -> None:
        """Change the entries under an exclusive lock (another process may have added others meanwhile)
        and replace the file atomically; a cache that cannot be written only costs a warning."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._locked():
                entries = self._read()
                change(entries)
                fd, tmp = tempfile.mkstemp(prefix=".autotune.", suffix=".tmp", dir=self.path.parent)
                try:
                    with os.fdopen(fd, "w") as fh:
                        json.dump({"version": CACHE_VERSION, "entries": entries}, fh, indent=1, sort_keys=True)
                    os.replace(tmp, self.path)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                    raise
        except OSError as exc:
            self._note(
                f"autotune cache {self.path} not written ({exc.strerror or exc}); the pick holds for this run only"
            )


# ---- tuning --------------------------------------------------------------------------------------


def kernels_hash() -> str:
    """One digest of every bundled kernel source: any kernel edit invalidates every cached pick."""
    digest = hashlib.sha256()
    for path in sorted(kernels_dir().glob("*.cu*")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def device_scope(device_name: str) -> str:
    """The part of a cache key that names the GPU and the software that compiles and runs the kernels."""
    import cupy

    from zincbench.gpu.nvrtc import nvrtc_version

    rt = cupy.cuda.runtime
    return (
        f"{device_name}|driver {rt.driverGetVersion()}|runtime {rt.runtimeGetVersion()}|nvrtc {nvrtc_version()}"
        f"|kernels {kernels_hash()}"
    )


@dataclass
class Tuning:
    """What tuning decided and the evidence, as recorded in the row's ``detail["autotune"]``."""

    choice: str
    medians_us: dict[str, float]  # round-robin scan, every applicable candidate
    recheck: dict | None = None  # the interleaved re-measure of the best two
    cached: bool = False
    notes: list[str] = field(default_factory=list)
    key: str = ""  # the cache entry, dropped when the timed median later departs from the tuned one

    @property
    def tuned_median_us(self) -> float:
        """The best evidence of the choice's time: its re-measured median when there was a re-measure."""
        if self.recheck:
            return self.recheck["medians_us"][self.choice]
        return self.medians_us[self.choice]


class Autotuner:
    """The ``tuner`` a family's prepare() calls as ``tuner(key, candidates, make_run) -> Tuning``.

    ``make_run(c)`` returns an enqueue function, or raises ValueError when ``c`` does not apply.
    ``retune`` ignores cached picks (and replaces them).
    """

    def __init__(self, timer, scope: str, *, retune: bool = False, cache: TuneCache | None = None):
        self.timer = timer
        self.scope = scope
        self.retune = retune
        self.cache = cache or TuneCache(cache_path())

    def _times(self, key: str, cand: str, run) -> list[float]:
        m = self.timer.measure(run, name=f"autotune/{key}/{cand}", rule=FixedCountRule(SAMPLES_PER_ROUND))
        return list(m.gpu_us)

    def __call__(self, key: str, candidates: Sequence[str], make_run: Callable[[str], Callable[[], None]]) -> Tuning:
        full_key = f"{self.scope}|{key}|{','.join(candidates)}"
        cached = None if self.retune else self.cache.get(full_key)
        if cached is not None and cached["choice"] in candidates:
            return Tuning(
                cached["choice"],
                cached["medians_us"],
                cached.get("recheck"),
                cached=True,
                notes=list(self.cache.notes),
                key=full_key,
            )
        runs = {}
        for cand in candidates:
            try:
                runs[cand] = make_run(cand)
            except ValueError:
                continue
        if not runs:
            raise ValueError(f"no applicable configuration for {key}")
        scans: dict[str, list[float]] = {c: [] for c in runs}
        for _ in range(SCAN_ROUNDS):
            for cand, run in runs.items():
                scans[cand] += self._times(key, cand, run)
        medians = {c: judge.summarize(v).median for c, v in scans.items()}
        ranked = sorted(medians, key=medians.get)
        tuning = Tuning(ranked[0], medians, key=full_key)
        if len(ranked) > 1:
            tuning.choice, tuning.recheck = self._recheck(key, ranked[0], ranked[1], runs, list(candidates))
        tuning.notes = list(self.cache.notes)
        self.cache.put(full_key, {"choice": tuning.choice, "medians_us": medians, "recheck": tuning.recheck})
        return tuning

    def _recheck(self, key: str, best: str, runner_up: str, runs: dict, declared: list[str]) -> tuple[str, dict]:
        """A B A B ... rounds; the per-round medians are paired, so drift between rounds cancels.
        A pair the comparison cannot tell apart goes to the one declared first, so two machines that
        measure the same tie pick the same tile."""
        pooled = {best: [], runner_up: []}
        per_round = {best: [], runner_up: []}
        for _ in range(RECHECK_ROUNDS):
            for cand in (best, runner_up):
                times = self._times(key, cand, runs[cand])
                pooled[cand] += times
                per_round[cand].append(judge.summarize(times).median)
        cmp = judge.compare_paired(per_round[best], per_round[runner_up], higher_is_better=False)
        if cmp.verdict in (judge.Verdict.FASTER, judge.Verdict.SLOWER):
            choice = runner_up if cmp.ratio < 1.0 else best
        else:
            choice = min((best, runner_up), key=declared.index)
        return choice, {
            "pair": [best, runner_up],
            "rounds": RECHECK_ROUNDS,
            "samples_per_round": SAMPLES_PER_ROUND,
            "medians_us": {c: judge.summarize(v).median for c, v in pooled.items()},
            "runner_up_vs_best": {
                "time_ratio": cmp.ratio,
                "ci": list(cmp.ci),
                "verdict": cmp.verdict.value,
                "confidence": cmp.confidence,
                "method": cmp.method,
            },
        }


def record(tuning: Tuning) -> dict:
    """The row-detail form of a Tuning."""
    return {**asdict(tuning), "tuned_median_us": tuning.tuned_median_us}


def flag_drift(row, threshold: float = DRIFT_WARN, cache: TuneCache | None = None) -> str | None:
    """Warn (stderr, and in the row's ``warnings``) when the timed median of a tuned variant departs
    from its tuned median by more than ``threshold``: the pick was made under other conditions (a stall
    while tuning was seen on an H200), so its cache entry is dropped and the next run tunes again.
    ``row`` is a ``MicrobenchRow`` with its summary."""
    tuning = (row.detail or {}).get("autotune") or {}
    tuned = tuning.get("tuned_median_us")
    final = row.summary.median_us if row.summary else None
    if not tuned or not final:
        return None
    departure = final / tuned - 1.0
    tuning["final_vs_tuned"] = departure
    if abs(departure) <= threshold:
        return None
    message = (
        f"{row.case} {row.variant}: timed median {final:.1f} µs departs {departure:+.0%} from "
        f"the autotuned {tuned:.1f} µs (beyond {threshold:.0%}); try --retune"
    )
    row.warnings = (row.warnings or []) + [message]
    warn(message)
    key = tuning.get("key")
    if cache is not None and key:
        cache.drop(key)
    return message
