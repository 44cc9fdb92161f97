"""Recorded greedy references, so CI can gate token correctness without llama.cpp installed.

A reference is a regular results document (kind ``reference``, written atomically by
zincbench.records) in ``results/references/``, keyed by the GGUF's identity, the prompt and n_gen.
Identity is the file size plus the sha256 of everything before the tensor data (header, metadata,
tensor names, types, shapes and data offsets): cheap on an 18 GB model and it changes whenever the
file is re-quantized or re-converted. ``full=True`` hashes the whole file instead (catches a
weights-only edit at the cost of reading every byte).

A reference is never overwritten by a different one unless asked (``force``): the header identity
does not see weights-only edits, so a silent overwrite could replace a good reference with one
recorded from other weights. With ``force`` the old file is kept beside the new one, renamed
``<name>.replaced-<UTC time>.json``. Re-recording an identical reference writes nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import math
import os
from pathlib import Path

from zincbench import records
from zincbench.errors import EnvironmentProblem, ExitCode, InputError

HASH_CHUNK = 16 << 20


def _header_length(path: Path) -> int:
    from gguf import GGUFReader

    try:
        return int(GGUFReader(path).data_offset)
    except (ValueError, OSError, IndexError, KeyError) as exc:  # bad magic/version; KeyError: a duplicated key
        raise InputError(f"{path}: not a readable GGUF file ({exc})") from None


def gguf_identity(path: str | os.PathLike, full: bool = False) -> str:
    """``header:<sha256>`` of size + pre-data region, or ``full:<sha256>`` of size + every byte."""
    from rich.console import Console
    from rich.progress import Progress

    p = Path(path)
    if not p.is_file():
        raise InputError(f"GGUF not found: {p}")
    size = p.stat().st_size
    digest = hashlib.sha256(f"{size}\n".encode())
    if not full:
        with open(p, "rb") as fh:
            digest.update(fh.read(_header_length(p)))
        return f"header:{digest.hexdigest()}"
    console = Console(stderr=True)
    with open(p, "rb") as fh, Progress(console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task(f"hashing {p.name}", total=size)
        while chunk := fh.read(HASH_CHUNK):
            digest.update(chunk)
            progress.advance(task, len(chunk))
    return f"full:{digest.hexdigest()}"


@dataclasses.dataclass(frozen=True)
class TokenRow:
    """One generated position of a reference, a row of its document: llama.cpp's greedy token and its logit,
    and the runner-up (a different token, its logit no higher)."""

    token: int
    top1_logit: float
    top2_token: int
    top2_logit: float

    @property
    def margin(self) -> float:
        """top1 − top2 logit: how close llama.cpp itself was to a tie."""
        return self.top1_logit - self.top2_logit

    def to_json(self, position: int) -> dict:
        return {
            "position": position,
            "token": self.token,
            "top1_logit": self.top1_logit,
            "top2_token": self.top2_token,
            "top2_logit": self.top2_logit,
            "margin": self.margin,
        }

    @classmethod
    def from_json(cls, row, position: int) -> TokenRow:
        """The row at ``position`` of a reference document; a ValueError naming the key for an id that is not a
        non-negative JSON integer, a logit that is not finite, a runner-up that is the same token or above the
        top-1, or a recorded position or margin that disagrees."""
        where = f"results[{position}]"
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected a token row, got {type(row).__name__}")
        if "position" in row and _integer(row["position"], f"{where}.position") != position:
            raise ValueError(f"{where}.position: {row['position']} is not its place in the list")
        first_id = _integer(row["token"], f"{where}.token")
        second_id = _integer(row["top2_token"], f"{where}.top2_token")
        first, second = (
            _logit(row["top1_logit"], f"{where}.top1_logit"),
            _logit(row["top2_logit"], f"{where}.top2_logit"),
        )
        if first_id == second_id:
            raise ValueError(f"{where}: top-1 and top-2 are the same token {first_id}")
        if first < second:
            raise ValueError(f"{where}: negative margin: top-2 logit {second:g} above top-1 {first:g}")
        if "margin" in row:
            margin = _logit(row["margin"], f"{where}.margin")
            if not math.isclose(margin, first - second, rel_tol=1e-9, abs_tol=1e-9):
                raise ValueError(f"{where}.margin: {margin:g} is not top1 - top2 = {first - second:g}")
        return cls(first_id, first, second_id, second)


@dataclasses.dataclass
class Reference:
    gguf: str  # the path it was recorded from (informational)
    identity: str
    prompt: str
    n_gen: int
    prompt_ids: list[int]
    generated_ids: list[int]
    tokens: list[TokenRow]  # one per generated position
    producer: dict  # llama-cpp-python version and the LlamaSettings used

    def margin(self, position: int) -> float:
        """top1 − top2 logit at a generated position: how close llama.cpp itself was to a tie."""
        return self.tokens[position].margin

    def to_document(self) -> records.Document:
        return records.Document(
            kind="reference",
            config={
                "gguf": self.gguf,
                "identity": self.identity,
                "prompt": self.prompt,
                "n_gen": self.n_gen,
                "prompt_ids": self.prompt_ids,
            },
            environment={"producer": self.producer},
            results=[row.to_json(position) for position, row in enumerate(self.tokens)],
        )

    @classmethod
    def from_document(cls, doc: dict, where: str) -> "Reference":
        """The reference in a results document; an InputError for anything malformed: a number of token rows
        other than its n_gen (a truncated or padded reference), a token id that is not a non-negative JSON
        integer (``"2_16"``, ``"+197"``, ``3.0`` and ``true`` are not ids), a logit that is not a finite
        number, a top-2 logit above the top-1 (a negative margin) or a recorded margin that disagrees."""
        try:
            cfg, rows = doc["config"], doc["results"]
            if not isinstance(rows, list):
                raise TypeError(f"results is a {type(rows).__name__}, not a list of token rows")
            n_gen = _integer(cfg["n_gen"], "config.n_gen", minimum=1)
            if len(rows) != n_gen:
                raise InputError(
                    f"{where}: reference holds {len(rows)} token rows for n_gen {n_gen}; "
                    f"record it again with `zincbench validate record --force`"
                )
            prompt_ids = cfg["prompt_ids"]
            if not isinstance(prompt_ids, list) or not prompt_ids:
                raise ValueError("config.prompt_ids: expected a non-empty list of token ids")
            tokens = [TokenRow.from_json(row, i) for i, row in enumerate(rows)]
            ref = cls(
                gguf=_string(cfg["gguf"], "config.gguf"),
                identity=_string(cfg["identity"], "config.identity"),
                prompt=_string(cfg["prompt"], "config.prompt"),
                n_gen=n_gen,
                prompt_ids=[_integer(t, f"config.prompt_ids[{i}]") for i, t in enumerate(prompt_ids)],
                generated_ids=[row.token for row in tokens],
                tokens=tokens,
                producer=(doc.get("environment") or {}).get("producer", {}),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"{where}: not a valid reference document ({type(exc).__name__}: {exc})") from None
        return ref


def _integer(value, what: str, minimum: int = 0) -> int:
    """A JSON integer (not a bool, float or string) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what}: expected an integer, got {value!r:.40}")
    if value < minimum:
        raise ValueError(f"{what}: expected an integer >= {minimum}, got {value}")
    return value


def _logit(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what}: expected a finite logit, got {value!r:.40}")
    return float(value)


def _string(value, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what}: expected a string, got {type(value).__name__}")
    return value


def default_directory(results_dir: str | os.PathLike | None = None) -> Path:
    return records.results_dir(results_dir) / "references"


def reference_path(
    directory: str | os.PathLike, gguf: str | os.PathLike, identity: str, prompt: str, n_gen: int
) -> Path:
    kind, digest = identity.split(":", 1)
    prompt_hash = hashlib.sha256(prompt.encode()).hexdigest()[:10]
    return Path(directory) / f"{Path(gguf).stem}.{kind}-{digest[:16]}.p{prompt_hash}.n{n_gen}.json"


def _same(path: Path, reference: Reference) -> bool:
    """Does ``path`` hold this very reference (same ids and logits; time stamps aside)?"""
    try:
        stored = Reference.from_document(records.read(path), str(path))
    except InputError:
        return False
    mine = Reference.from_document(records.to_jsonable(reference.to_document()), "new reference")
    return (stored.prompt_ids, stored.generated_ids, stored.tokens) == (
        mine.prompt_ids,
        mine.generated_ids,
        mine.tokens,
    )


def conflict(reference: Reference, directory: str | os.PathLike) -> Path | None:
    """The existing file a save would replace with different content; None when free or identical."""
    path = reference_path(directory, reference.gguf, reference.identity, reference.prompt, reference.n_gen)
    return path if path.exists() and not _same(path, reference) else None


def set_aside(path: Path) -> Path | None:
    """Keep a copy of an old reference as an unused ``<name>.replaced-<UTC time>[-k].json``; None when it is gone.

    The copy is a hard link made with exclusive creation, and the old file itself stays until the new
    one atomically replaces it: two ``validate record --force`` running at once each keep their copy
    and the last write wins, neither ever finds the file it meant to move already moved."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for k in range(1000):
        aside = path.with_name(f"{path.stem}.replaced-{stamp}{f'-{k}' if k else ''}{path.suffix}")
        try:
            try:
                os.link(path, aside)
            except (PermissionError, NotImplementedError) as exc:  # a file system without hard links: copy
                if isinstance(exc, PermissionError) and aside.exists():
                    raise FileExistsError(exc) from None
                with open(path, "rb") as src, open(aside, "xb") as dst:
                    dst.write(src.read())
            return aside
        except FileExistsError:
            continue
        except FileNotFoundError:
            return None  # replaced or removed meanwhile: nothing left to keep
        except OSError as exc:
            raise EnvironmentProblem(
                f"cannot keep the old reference {path} as {aside.name}: {exc.strerror or exc}"
            ) from None
    raise InputError(f"{path}: too many replaced references beside it")  # pragma: no cover


def save(reference: Reference, directory: str | os.PathLike, *, force: bool = False) -> tuple[Path, Path | None]:
    """Write the reference; returns (its path, where a different old one was set aside, or None).

    An existing different reference is an InputError unless ``force``; an identical one is left as it is.
    """
    path = reference_path(directory, reference.gguf, reference.identity, reference.prompt, reference.n_gen)
    old = conflict(reference, directory)
    if old is None and path.exists():
        return path, None  # identical: nothing to write
    if old is not None and not force:
        raise InputError(
            f"{path} already holds a different reference for {Path(reference.gguf).name} "
            f"(other weights or llama.cpp build?); re-run with --force to replace it "
            f"(the old one is kept beside it as *.replaced-<time>.json)"
        )
    aside = set_aside(old) if old is not None else None
    return records.write(reference.to_document(), path), aside


def load(
    directory: str | os.PathLike,
    gguf: str | os.PathLike,
    prompt: str,
    n_gen: int,
    *,
    full: bool = False,
    record_args: str | None = None,
) -> Reference:
    """The reference recorded for this exact file, prompt and n_gen; otherwise an InputError saying
    how to record it (``record_args``: the `validate record` options that select this model)."""
    identity = gguf_identity(gguf, full=full)
    path = reference_path(directory, gguf, identity, prompt, n_gen)
    if not path.is_file():
        how = (record_args or f"--gguf {gguf}") + (" --full-hash" if full else "")
        raise InputError(
            f"no recorded reference for {Path(gguf).name} (prompt {prompt!r}, n_gen {n_gen}) in {directory}; "
            f"record one with `zincbench validate record {how} --references-dir {directory}` "
            f"(needs llama-cpp-python) or run with --reference live"
        )
    ref = Reference.from_document(records.read(path), str(path))
    if ref.identity != identity or ref.prompt != prompt or ref.n_gen != n_gen:
        raise InputError(f"{path}: recorded for a different file, prompt or n_gen than its name says")
    return ref


def rejudge(doc: dict, where: str) -> records.Rejudged:
    """A recorded reference must still hold together (``Reference.from_document``: n_gen token rows, integer
    ids, finite logits, top-1 >= top-2); anything else is an InputError naming the row."""
    ref = Reference.from_document(doc, where)
    return records.Rejudged(
        ExitCode.OK,
        f"reference for {Path(ref.gguf).name}: {ref.n_gen} tokens, min margin "
        f"{min((row.margin for row in ref.tokens), default=float('nan')):.3f}",
    )
