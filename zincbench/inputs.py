"""Opening outside files with bounds: every input zincbench reads goes through ``regular_file`` (and
``read_text`` for text, ``read_lines`` for tool outputs that can be gigabytes), so a missing file, a folder,
``/dev/zero``, a FIFO, an unreadable or oversized file is one InputError naming it, never a hang, a gigabyte
string or a traceback. ``read_text`` also reads a gzip of the text (how results folders commit large documents,
``*.json.gz``), bounded by the same size after decompression."""

from __future__ import annotations

import gzip
import io
import os
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path

from zincbench.errors import InputError

# Far above any real input (a results document of a long A/B is a few MB; a YAML file a few KB), far below
# what a machine cannot hold: text inputs past it are refused instead of read whole.
MAX_TEXT_BYTES = 256 * 2**20
# Profiler exports are read line by line, whatever their size; a "line" past this is not text a tool wrote
# (an ncu raw row of every metric is a few hundred KB) and is refused instead of held whole.
MAX_LINE_CHARS = 16 * 2**20
GZIP_MAGIC = b"\x1f\x8b"


def regular_file(path: str | os.PathLike, what: str = "file") -> Path:
    """``path`` when it names a readable regular file; else an InputError saying what it is instead."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{what} not found: {p}") from None
    except OSError as exc:  # ENAMETOOLONG, ELOOP, ENOTDIR, EACCES on a parent
        raise InputError(f"cannot open {what} {p}: {exc.strerror or exc}") from None
    except ValueError as exc:  # an embedded NUL
        raise InputError(f"cannot open {what} {p!r}: {exc}") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"expected a {what}, got a directory: {p}")
    if not stat.S_ISREG(mode):
        raise InputError(f"{p}: not a regular file (a device, FIFO or socket), expected a {what}")
    if not os.access(p, os.R_OK):
        raise InputError(f"cannot read {what} {p}: permission denied")
    return p


def read_text(
    path: str | os.PathLike, what: str = "file", max_bytes: int = MAX_TEXT_BYTES, errors: str = "strict"
) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes``, or of a gzip of one (told by its magic bytes, which
    no UTF-8 text starts with) that decompresses to at most ``max_bytes`` (``errors="replace"`` for tool logs that
    mix in undecodable output)."""
    p = regular_file(path, what)
    too_big = f"is more than a {what} can be ({max_bytes / 2**20:.0f} MiB); is it the right file?"
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise InputError(f"{p}: {size / 2**20:.0f} MiB {too_big}")
        with p.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    if data[:2] == GZIP_MAGIC:
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as fh:
                data = fh.read(max_bytes + 1)  # bounded: a small gzip may inflate without end
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError; EOFError: truncated
            raise InputError(f"{p}: damaged gzip file ({exc or 'truncated'}), expected a {what}") from None
        if len(data) > max_bytes:
            raise InputError(f"{p}: decompressed, it {too_big}")
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError:
        raise InputError(f"{p}: not a text file (not UTF-8), expected a {what}") from None


def read_lines(
    path: str | os.PathLike, what: str = "file", max_line_chars: int = MAX_LINE_CHARS, errors: str = "strict"
) -> Iterator[str]:
    """The lines of a regular file's UTF-8 text, without their line ends (\\n, \\r\\n or \\r), read one at a
    time: memory stays bounded by ``max_line_chars`` whatever the file's size. The file is checked now; read
    errors and an over-long line are InputErrors raised while iterating."""
    return _lines(regular_file(path, what), what, max_line_chars, errors)


def _lines(p: Path, what: str, max_line_chars: int, errors: str) -> Iterator[str]:
    try:
        with p.open(encoding="utf-8", errors=errors, newline="") as fh:
            # two more characters than allowed: a line at the limit comes whole with its \r\n
            while chunk := fh.readline(max_line_chars + 2):
                line = chunk.rstrip("\r\n")
                if len(line) > max_line_chars:
                    raise InputError(f"{p}: a line longer than {max_line_chars} characters; not a {what}")
                yield line
    except OSError as exc:
        raise InputError(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{p}: not a text file (not UTF-8), expected a {what}") from None
