"""Records: one JSON document per run, written atomically, readable back as a pandas DataFrame.

A document carries everything needed to trust (or refuse to compare) its numbers: schema version,
command line, timestamp, zincbench version and git commit, the environment report, the
configuration, raw samples, summaries and verdicts, and whether the run completed.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import json
import math
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterable

from zincbench import __version__
from zincbench.errors import InputError

SCHEMA_VERSION = 1
DEFAULT_RESULTS_DIR = "results"


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types only: dataclasses and enums unpacked, numpy scalars converted, NaN/inf -> null."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value)
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):  # numpy arrays and scalars
        return to_jsonable(obj.tolist())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    return str(obj)


def git_commit() -> str | None:
    """zincbench's own commit (with -dirty), when it runs from a checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True, text=True, timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


@dataclasses.dataclass
class Document:
    kind: str  # microbench | validate | ab | profile | gate | aa | report
    config: dict
    environment: dict
    results: list = dataclasses.field(default_factory=list)
    verdict: dict | None = None
    complete: bool = True
    notes: list = dataclasses.field(default_factory=list)
    schema_version: int = SCHEMA_VERSION
    command_line: list = dataclasses.field(default_factory=lambda: list(sys.argv))
    timestamp: str = dataclasses.field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    )
    zincbench_version: str = __version__
    git_commit: str | None = dataclasses.field(default_factory=git_commit)
    run_id: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex[:8])

    def default_name(self) -> str:
        stamp = self.timestamp.replace(":", "").replace("-", "").split("+")[0]
        return f"{self.kind}-{stamp}-{self.run_id}.json"


def results_dir(override: str | os.PathLike | None = None) -> Path:
    return Path(override or os.environ.get("ZINCBENCH_RESULTS", DEFAULT_RESULTS_DIR))


def write(doc: Document, path: str | os.PathLike | None = None, directory: str | os.PathLike | None = None) -> Path:
    """Write atomically (temp file in the same folder, fsync, rename): never a partial results file."""
    target = Path(path) if path else results_dir(directory) / doc.default_name()
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(to_jsonable(doc), indent=1, allow_nan=False)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def read(path: str | os.PathLike) -> dict:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise InputError(f"results file not found: {p}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: not a zincbench results document (invalid JSON: {exc})") from None
    if not isinstance(data, dict) or "schema_version" not in data or "kind" not in data:
        raise InputError(f"{p}: not a zincbench results document (no schema_version/kind)")
    if data["schema_version"] > SCHEMA_VERSION:
        raise InputError(f"{p}: schema version {data['schema_version']} is newer than this zincbench understands ({SCHEMA_VERSION})")
    return data


def device_label(environment: dict) -> str:
    gpu = (environment or {}).get("gpu") or {}
    return gpu.get("name") or "no-gpu"


def load(paths: str | os.PathLike | Iterable[str | os.PathLike]):
    """All result rows of one or more documents as one DataFrame (one row per result entry).

    Nested dictionaries are flattened with dots (``summary.median``); document-level columns
    ``kind``, ``timestamp``, ``device``, ``run_id``, ``complete`` and ``path`` are added.
    """
    import pandas as pd

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    frames = []
    for p in paths:
        doc = read(p)
        rows = doc.get("results") or []
        if not rows:
            continue
        frame = pd.json_normalize(rows)
        frame["kind"] = doc["kind"]
        frame["timestamp"] = doc.get("timestamp")
        frame["device"] = device_label(doc.get("environment") or {})
        frame["run_id"] = doc.get("run_id")
        frame["complete"] = doc.get("complete", True)
        frame["path"] = str(p)
        frames.append(frame)
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


class IncrementalWriter:
    """Re-writes the document after every update, so an interrupted run keeps what it measured.

    Used as a context manager: on an exception (Ctrl-C included) the document is written one last
    time with ``complete = False`` and the reason, then the exception propagates.
    """

    def __init__(self, doc: Document, path: str | os.PathLike | None = None, directory=None):
        self.doc = doc
        self.path = Path(path) if path else results_dir(directory) / doc.default_name()

    def __enter__(self) -> "IncrementalWriter":
        self.doc.complete = False
        self.flush()
        return self

    def flush(self) -> Path:
        return write(self.doc, self.path)

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.doc.complete = True
        else:
            self.doc.complete = False
            reason = "interrupted (SIGINT)" if exc_type is KeyboardInterrupt else f"aborted: {exc_type.__name__}: {exc}"
            self.doc.notes.append(reason)
        self.flush()
        return False
