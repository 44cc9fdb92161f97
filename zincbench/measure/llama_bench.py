"""llama-bench results: parse all five output formats (md, csv, json, jsonl, sql) and run it live.

Every format is reduced to a dict of llama-bench field names, then to one ``LlamaBenchRow``. Parsing
keys on field *names* and tolerates missing or extra ones, because the field set drifts between
llama.cpp versions (see tools/llama-bench/llama-bench.cpp, ``test::get_fields``). A malformed or
truncated file raises InputError naming the line and the field.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from zincbench.errors import InputError
from zincbench.inputs import read_text
from zincbench.measure.process import EngineFailure, checked, run_process

FORMATS = ("md", "csv", "json", "jsonl", "sql")

# Bounds of a plausible result: a rate of zero or below is a failed run, not a sample, and no engine on
# any GPU comes near 10 million tokens/s or 10 million tokens in one test (a larger value is corruption).
MAX_TOKENS_PER_S = 1e7
MAX_TOKENS = 10_000_000
# SQLite virtual-machine steps the replay of a .sql file may take (~1e8: far above llama-bench's own
# INSERTs, far below what a recursive CTE can ask for); the handler is polled every _SQL_POLL steps.
_SQL_POLL = 1000
_SQL_BUDGET_POLLS = 100_000

# The markdown table's display names for the fields it shows (llama-bench.cpp, get_field_display_name).
_MD_FIELDS = {"model": "model_type", "backend": "backends", "ngl": "n_gpu_layers", "threads": "n_threads"}
_MD_TEST = re.compile(r"^(?:pp(?P<p>\d+)(?:\+tg(?P<pg>\d+))?|tg(?P<g>\d+))(?:\s*@\s*d(?P<d>\d+))?$")
_MD_RATE = re.compile(r"^(?P<avg>[-+0-9.eE]+|nan|inf)\s*±\s*(?P<sd>[-+0-9.eE]+|nan|inf)$")
_MD_FOOTER = re.compile(r"^build:\s*(?P<commit>\S+)\s*\((?P<number>\d+)\)\s*$")
_SQL_STATEMENT = re.compile(
    r"^\s*(CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+llama_bench\b|INSERT\s+INTO\s+llama_bench\b)", re.I
)


@dataclass(frozen=True)
class LlamaBenchRow:
    """One llama-bench test result. ``avg_ts`` is llama-bench's mean of per-repetition rates."""

    model_filename: str | None
    model_type: str | None
    backend: str | None
    n_prompt: int
    n_gen: int
    n_depth: int
    avg_ts: float
    stddev_ts: float | None
    samples_ts: tuple[float, ...] | None
    build_commit: str | None
    gpu_info: str | None
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def test(self) -> str:
        """The test's name as llama-bench's markdown prints it: pp512, tg128, pp512+tg128, pp512 @ d1024."""
        if self.n_prompt and self.n_gen:
            name = f"pp{self.n_prompt}+tg{self.n_gen}"
        elif self.n_prompt:
            name = f"pp{self.n_prompt}"
        else:
            name = f"tg{self.n_gen}"
        return f"{name} @ d{self.n_depth}" if self.n_depth else name

    @property
    def is_prefill(self) -> bool:
        return self.n_prompt > 0 and self.n_gen == 0 and self.n_depth == 0

    @property
    def is_decode(self) -> bool:
        return self.n_prompt == 0 and self.n_gen > 0 and self.n_depth == 0

    def summary(self) -> dict:
        """The parsed fields (no raw dict), ``samples_ts`` only when the format carries samples."""
        out = {
            "model_filename": self.model_filename,
            "model_type": self.model_type,
            "backend": self.backend,
            "test": self.test,
            "n_prompt": self.n_prompt,
            "n_gen": self.n_gen,
            "n_depth": self.n_depth,
            "avg_ts": self.avg_ts,
            "stddev_ts": self.stddev_ts,
        }
        if self.samples_ts is not None:
            out["samples_ts"] = list(self.samples_ts)
        out["build_commit"] = self.build_commit
        out["gpu_info"] = self.gpu_info
        return out


def _line_format(line: str) -> str | None:
    """The format a line starts, if it is the first line of one of llama-bench's outputs."""
    if line == "[" or line.startswith("[{") or line == "[]":
        return "json"
    if line.startswith('{"'):
        return "jsonl"
    if line.startswith("|") and "t/s" in line:
        return "md"
    if _SQL_STATEMENT.match(line):
        return "sql"
    if "avg_ts" in line.split(","):
        return "csv"
    return None


def _find_start(text: str, source: str) -> tuple[str, int]:
    """(format, index of its first line). Lines before it are backend-init noise that ``2>&1``
    captures put ahead of the results (llama-bench logs before it silences logging)."""
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        raise InputError(f"{source}: empty file, expected llama-bench output")
    for index, line in enumerate(lines):
        fmt = _line_format(line.strip())
        if fmt:
            return fmt, index
    first = next(line.strip() for line in lines if line.strip())
    raise InputError(f"{source}: not llama-bench output (expected one of {', '.join(FORMATS)}): {first[:60]!r}")


def detect_format(text: str, source: str = "<text>") -> str:
    """md, csv, json, jsonl or sql, from the first line that starts one of them."""
    return _find_start(text, source)[0]


def parse(text: str, *, source: str = "<text>", fmt: str | None = None) -> list[LlamaBenchRow]:
    """All rows of one llama-bench output, in file order. ``fmt`` None means auto-detect."""
    if "\x00" in text:  # llama-bench prints text in every format: a NUL byte is a damaged or binary file
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise InputError(f"{source}:{line}: contains a NUL byte: a damaged or binary file, not llama-bench output")
    detected, start = _find_start(text, source)
    fmt = fmt or detected
    parsers = {"md": _parse_md, "csv": _parse_csv, "json": _parse_json, "jsonl": _parse_jsonl, "sql": _parse_sql}
    if fmt not in parsers:
        raise InputError(f"unknown llama-bench format {fmt!r} (known: {', '.join(FORMATS)})")
    # Blank out the noise instead of cutting it, so error messages keep the file's line numbers.
    lines = text.splitlines(keepends=True)
    text = "\n" * start + "".join(lines[start:])
    rows = [_to_row(raw, where) for where, raw in parsers[fmt](text, source)]
    if not rows:
        raise InputError(f"{source}: no llama-bench result rows ({fmt})")
    return rows


def load(path: str | os.PathLike, fmt: str | None = None) -> list[LlamaBenchRow]:
    p = Path(path)
    return parse(read_text(p, "llama-bench file"), source=str(p), fmt=fmt)


def run_llama_bench(
    binary: str | os.PathLike,
    model: str | os.PathLike,
    n_prompt: int,
    n_gen: int,
    reps: int,
    *,
    n_gpu_layers: int = 99,
    extra_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    timeout_s: float = 600.0,
) -> list[LlamaBenchRow]:
    """Run llama-bench once (``-o jsonl``: one complete line per test, so a killed run stays parsable).

    Raises EngineFailure on a crash, a timeout or output that is not llama-bench jsonl.
    """
    argv = [
        str(binary),
        "-m",
        str(model),
        "-p",
        str(n_prompt),
        "-n",
        str(n_gen),
        "-r",
        str(reps),
        "-ngl",
        str(n_gpu_layers),
        "-o",
        "jsonl",
        *extra_args,
    ]
    result = checked(run_process(argv, env=env, timeout_s=timeout_s))
    try:
        return parse(result.stdout, source=f"{Path(binary).name} stdout", fmt="jsonl")
    except InputError as exc:
        raise EngineFailure("garbage", str(exc), result.tail()) from None


# --- format readers: each yields (where, {field: value}) --------------------------------------------


def _parse_jsonl(text: str, source: str):
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{source}:{lineno}: invalid JSON line (truncated?): {exc.msg} (column {exc.colno})"
            ) from None
        if not isinstance(obj, dict):
            raise InputError(f"{source}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        yield f"{source}:{lineno}", obj


def _parse_json(text: str, source: str):
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # llama-bench writes the closing bracket only at the end: a killed run leaves invalid JSON.
        raise InputError(f"{source}:{exc.lineno}: invalid JSON (truncated? prefer -o jsonl): {exc.msg}") from None
    if not isinstance(data, list):
        raise InputError(f"{source}: expected a JSON list of llama-bench results, got {type(data).__name__}")
    for i, obj in enumerate(data):
        if not isinstance(obj, dict):
            raise InputError(f"{source}: result [{i}]: expected a JSON object, got {type(obj).__name__}")
        yield f"{source}: result [{i}]", obj


def _parse_csv(text: str, source: str):
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next((row for row in reader if row), [])
        for row in reader:
            lineno = reader.line_num
            if not row:
                continue
            if len(row) != len(header):
                raise InputError(f"{source}:{lineno}: {len(row)} values for {len(header)} columns (truncated row?)")
            yield f"{source}:{lineno}", dict(zip(header, row))
    except csv.Error as exc:
        raise InputError(f"{source}:{reader.line_num}: malformed CSV: {exc}") from None


def _parse_sql(text: str, source: str):
    # llama-bench's sql output is meant for `sqlite3`; replay it into an in-memory database, one
    # statement at a time so an error names its line. Only llama_bench CREATE/INSERT are accepted.
    db = sqlite3.connect(":memory:")
    polls = [0]

    def over_budget() -> int:
        polls[0] += 1
        return polls[0] > _SQL_BUDGET_POLLS  # non-zero aborts the running statement

    db.set_progress_handler(over_budget, _SQL_POLL)
    try:
        statement, start = "", 0
        for lineno, line in enumerate(text.splitlines(keepends=True), 1):
            if not statement.strip():
                statement, start = "", lineno
            statement += line
            if not statement.strip() or not sqlite3.complete_statement(statement):
                continue
            if not _SQL_STATEMENT.match(statement):
                raise InputError(
                    f"{source}:{start}: not a llama_bench CREATE TABLE/INSERT statement: {statement.strip()[:60]!r}"
                )
            try:
                db.execute(statement)
            except sqlite3.Error as exc:
                if polls[0] > _SQL_BUDGET_POLLS:
                    raise InputError(
                        f"{source}:{start}: SQL statement does far more work than llama-bench's "
                        "INSERTs (a recursive query?); refused"
                    ) from None
                raise InputError(f"{source}:{start}: invalid SQL statement: {exc}") from None
            statement = ""
        if statement.strip():
            raise InputError(f"{source}:{start}: unterminated SQL statement (truncated file?)")
        try:
            cursor = db.execute("SELECT * FROM llama_bench ORDER BY rowid")
        except sqlite3.Error:
            raise InputError(f"{source}: no llama_bench table in the SQL") from None
        names = [d[0] for d in cursor.description]
        for i, values in enumerate(cursor.fetchall()):
            yield f"{source}: INSERT #{i + 1}", dict(zip(names, values))
    finally:
        db.close()


def _md_cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _parse_md(text: str, source: str):
    lines = text.splitlines()
    build = {}
    for line in lines:
        footer = _MD_FOOTER.match(line.strip())
        if footer:
            build = {"build_commit": footer["commit"], "build_number": footer["number"]}
    header: list[str] | None = None
    for lineno, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped.startswith("|"):
            header = None if not stripped or _MD_FOOTER.match(stripped) else header
            continue
        cells = _md_cells(stripped)
        if all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue  # the separator row under a header
        if header is None:
            header = cells
            if "test" not in header or "t/s" not in header:
                raise InputError(f"{source}:{lineno}: markdown table without 'test' and 't/s' columns")
            continue
        if len(cells) != len(header) or not stripped.endswith("|"):
            raise InputError(f"{source}:{lineno}: {len(cells)} cells for {len(header)} columns (truncated row?)")
        values = dict(zip(header, cells))
        raw = {_MD_FIELDS.get(k, k): v for k, v in values.items()}
        test = _MD_TEST.match(values["test"])
        if not test:
            raise InputError(f"{source}:{lineno}: field 'test': not a llama-bench test name: {values['test']!r}")
        rate = _MD_RATE.match(values["t/s"])
        if not rate:
            raise InputError(f"{source}:{lineno}: field 't/s': expected 'AVG ± STDDEV', got {values['t/s']!r}")
        raw.update(build)
        raw.update(
            n_prompt=test["p"] or 0,
            n_gen=test["pg"] or test["g"] or 0,
            n_depth=test["d"] or 0,
            avg_ts=rate["avg"],
            stddev_ts=rate["sd"],
        )
        yield f"{source}:{lineno}", raw


# --- raw dict -> row ---------------------------------------------------------------------------------


def _number(raw: dict, name: str, where: str, kind: type, default=None):
    if name not in raw or raw[name] is None or raw[name] == "":
        if default is not None:
            return default
        raise InputError(f"{where}: missing field {name!r}")
    value = raw[name]
    try:
        if isinstance(value, bool):
            raise ValueError
        number = kind(value) if kind is float else int(str(value), 10)
    except (TypeError, ValueError, OverflowError):
        raise InputError(
            f"{where}: field {name!r}: expected {'a number' if kind is float else 'an integer'}, got {_shown(value)}"
        ) from None
    if kind is float and not math.isfinite(number):
        raise InputError(f"{where}: field {name!r}: not a finite number: {_shown(value)}")
    return number


def _shown(value) -> str:
    """A value for an error line: a 400-digit number or a long string cut to something readable."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _rate(value: float, name: str, where: str) -> float:
    """A throughput llama-bench measured: above zero (zero is a failed run) and below any real engine."""
    if not 0 < value < MAX_TOKENS_PER_S:
        raise InputError(
            f"{where}: field {name!r}: {value:g} tok/s is not a measured rate (need > 0 and < {MAX_TOKENS_PER_S:g})"
        )
    return value


def _count(raw: dict, name: str, where: str, default=None) -> int:
    count = _number(raw, name, where, int, default=default)
    if not 0 <= count <= MAX_TOKENS:
        raise InputError(f"{where}: field {name!r}: {_shown(count)} tokens is out of range (0..{MAX_TOKENS})")
    return count


def _text(raw: dict, name: str) -> str | None:
    value = raw.get(name)
    return None if value is None else str(value)


def _samples(raw: dict, where: str) -> tuple[float, ...] | None:
    samples = raw.get("samples_ts")
    if samples is None:
        return None
    if not isinstance(samples, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in samples
    ):
        raise InputError(f"{where}: field 'samples_ts': expected a list of numbers")
    try:
        values = tuple(float(v) for v in samples)
    except OverflowError:
        raise InputError(f"{where}: field 'samples_ts': a number too large for a rate") from None
    return tuple(_rate(v, "samples_ts", where) for v in values)


def _to_row(raw: dict, where: str) -> LlamaBenchRow:
    n_prompt = _count(raw, "n_prompt", where)
    n_gen = _count(raw, "n_gen", where)
    if n_prompt + n_gen == 0:
        raise InputError(f"{where}: fields 'n_prompt'/'n_gen': need a positive token count, got {n_prompt}/{n_gen}")
    stddev = _number(raw, "stddev_ts", where, float) if raw.get("stddev_ts") not in (None, "") else None
    if stddev is not None and stddev < 0:
        raise InputError(f"{where}: field 'stddev_ts': a standard deviation cannot be negative, got {stddev:g}")
    return LlamaBenchRow(
        model_filename=_text(raw, "model_filename"),
        model_type=_text(raw, "model_type"),
        backend=_text(raw, "backends"),
        n_prompt=n_prompt,
        n_gen=n_gen,
        n_depth=_count(raw, "n_depth", where, default=0),  # older llama-bench has no depth
        avg_ts=_rate(_number(raw, "avg_ts", where, float), "avg_ts", where),
        stddev_ts=stddev,
        samples_ts=_samples(raw, where),
        build_commit=_text(raw, "build_commit"),
        gpu_info=_text(raw, "gpu_info"),
        raw=dict(raw),
    )
