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
import stat
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterable

from zincbench import __version__
from zincbench.errors import EnvironmentProblem, ExitCode, InputError
from zincbench.inputs import read_text

SCHEMA_VERSION = 1
DEFAULT_RESULTS_DIR = "results"
# A results document's file names: JSON as written, or a gzip of it (how results folders commit large documents);
# read() takes either
DOCUMENT_SUFFIXES = (".json", ".json.gz")


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types only: dataclasses and enums unpacked (a record type through its own ``to_json``),
    numpy scalars converted, NaN/inf -> null."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if hasattr(obj, "to_json"):  # its own JSON form (a record row, measure.timer.TimerConfig)
            return to_jsonable(obj.to_json())
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
            capture_output=True,
            text=True,
            timeout=5,
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


@dataclasses.dataclass
class Rejudged:
    """A recorded document judged again from its raw data by the module that produces its kind:
    the exit code it reduces to, one line saying why, and ``details`` (see ``drift_details``)."""

    exit_code: ExitCode
    reason: str
    details: dict = dataclasses.field(default_factory=dict)


def drift_details(what: str, recorded, rejudged) -> dict:
    """``recorded`` and ``rejudged`` conclusions, and ``drift`` (a sentence) when the same data now
    reaches another one: the judge changed behaviour."""
    details = {"recorded": recorded, "rejudged": rejudged}
    if recorded is not None and recorded != rejudged:
        details["drift"] = f"judge drift: recorded {what} {recorded}, re-judged {rejudged} from the same data"
    return details


def results_dir(override: str | os.PathLike | None = None) -> Path:
    """--results-dir, else $ZINCBENCH_RESULTS (an empty value counts as unset), else ./results."""
    return Path(override or os.environ.get("ZINCBENCH_RESULTS") or DEFAULT_RESULTS_DIR)


def _folder_problem(folder: Path, exc: OSError) -> EnvironmentProblem:
    return EnvironmentProblem(f"results folder {folder}: {exc.strerror or exc}")


def prepare_results_dir(override: str | os.PathLike | None = None) -> Path:
    """The results folder, checked before any work: it, or the nearest folder it would be created in,
    must be a writable folder. The OS's refusal (a file on the way, a name > 255 bytes, a symlink loop,
    a read-only file system) is one line, exit 4. Nothing is created here."""
    folder = results_dir(override)
    probe = folder
    while True:
        try:
            mode = os.stat(probe).st_mode
            break
        except FileNotFoundError:
            if probe.parent == probe:
                raise EnvironmentProblem(f"results folder {folder}: no existing folder to create it in") from None
            probe = probe.parent
        except OSError as exc:
            raise _folder_problem(folder, exc) from None
    if not stat.S_ISDIR(mode):
        raise EnvironmentProblem(f"results folder {folder}: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise EnvironmentProblem(f"results folder {folder}: {probe} is not writable")
    return folder


def write(doc: Document, path: str | os.PathLike | None = None, directory: str | os.PathLike | None = None) -> Path:
    """Write atomically (temp file in the same folder, fsync, rename): never a partial results file.

    Any refusal of the OS (disk full, read-only file system, a file where the folder should be) is an
    EnvironmentProblem naming the file."""
    target = Path(path) if path else results_dir(directory) / doc.default_name()
    text = json.dumps(to_jsonable(doc), indent=1, allow_nan=False)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise _folder_problem(target.parent, exc) from None
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise EnvironmentProblem(f"cannot write results document {target}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


# The document-level fields a reader relies on, with their JSON types (None: may be null).
_DOCUMENT_FIELDS = {
    "kind": (str,),
    "results": (list,),
    "config": (dict, type(None)),
    "environment": (dict, type(None)),
    "verdict": (dict, type(None)),
    "notes": (list, type(None)),
    "complete": (bool,),
}


# Documents are a handful of levels deep; far deeper nesting is not ours, and the copying and
# flattening readers do (deepcopy, json_normalize) would overflow the stack on it.
MAX_DOCUMENT_DEPTH = 64


def _depth_exceeds(data, limit: int) -> bool:
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return False


def check_document(data, where: str) -> dict:
    """A parsed results document with the shape readers rely on, or one InputError naming the field."""
    if _depth_exceeds(data, MAX_DOCUMENT_DEPTH):
        raise InputError(f"{where}: not a zincbench results document (JSON nested too deeply)")
    if not isinstance(data, dict) or "schema_version" not in data or "kind" not in data:
        raise InputError(f"{where}: not a zincbench results document (no schema_version/kind)")
    version = data["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InputError(f"{where}: schema_version must be a positive integer, got {version!r}")
    if version > SCHEMA_VERSION:
        raise InputError(
            f"{where}: schema version {version} is newer than this zincbench understands ({SCHEMA_VERSION})"
        )
    for name, types in _DOCUMENT_FIELDS.items():
        if name in data and not isinstance(data[name], types):
            raise InputError(
                f"{where}: field {name!r} must be {' or '.join(_JSON_TYPE[t] for t in types)}, "
                f"got {_JSON_TYPE.get(type(data[name]), type(data[name]).__name__)}"
            )
    for i, row in enumerate(data.get("results") or []):
        if not isinstance(row, dict):
            raise InputError(
                f"{where}: results[{i}] must be an object, got {_JSON_TYPE.get(type(row), type(row).__name__)}"
            )
    return data


_JSON_TYPE = {
    str: "a string",
    list: "a list",
    dict: "an object",
    type(None): "null",
    bool: "true/false",
    int: "an integer",
    float: "a number",
}


def read(path: str | os.PathLike) -> dict:
    p = Path(path)
    text = read_text(p, "results file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: not a zincbench results document (invalid JSON: {exc})") from None
    except ValueError as exc:  # json.loads' other error: an integer longer than Python converts (4300 digits)
        raise InputError(f"{p}: not a zincbench results document ({exc})"[:300]) from None
    except RecursionError:
        raise InputError(f"{p}: not a zincbench results document (JSON nested too deeply)") from None
    return check_document(data, str(p))


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
            if issubclass(exc_type, KeyboardInterrupt):  # Ctrl-C, or SIGTERM/SIGHUP turned into an interrupt
                reason = str(exc) if str(exc) else "interrupted (SIGINT)"
            else:
                reason = f"aborted: {exc_type.__name__}: {exc}"
            self.doc.notes.append(reason)
        try:
            self.flush()
        except EnvironmentProblem as write_error:
            if exc_type is None:  # the work is done: the failed write must not hide its outcome
                raise EnvironmentProblem(f"{write_error}; the run itself finished: {outcome_line(self.doc)}") from None
            # The run's own exception says more than the failed rewrite (often the same full disk).
        return False


def outcome_line(doc: Document) -> str:
    """A finished document's verdict in a few words (for messages that must carry it)."""
    verdict = doc.verdict or {}
    words = verdict.get("decision") or verdict.get("overall") or verdict.get("status")
    code = verdict.get("exit_code")
    if words is None and code is None:
        return "no verdict recorded"
    return " ".join(str(part) for part in (words, f"(exit {code})" if code is not None else None) if part)
