"""Files written beside the results document (--markdown, --junit, $GITHUB_STEP_SUMMARY).

Each is checked before any work, so a typo costs nothing, and written after the verdict is shown, so a
write that fails then (disk full, a folder removed meanwhile) is reported without hiding the verdict.
A bad path (missing folder, a folder where the file should be) is bad input, exit 2; the OS refusing a
good path (read-only, permission, name too long) is the environment, exit 4.
"""

from __future__ import annotations

import os
from pathlib import Path

from zincbench.errors import EnvironmentProblem, InputError


def check_output_file(path: str | os.PathLike, what: str) -> Path:
    """``path`` when a file can be written there; ``what`` names it in the error (an option, a variable)."""
    p = Path(path)
    parent = p.parent
    try:
        if p.is_dir():
            raise InputError(f"{what} {p}: is a folder, expected a file name")
        if not parent.exists():
            raise InputError(f"{what} {p}: folder {parent} does not exist")
        if not parent.is_dir():
            raise InputError(f"{what} {p}: {parent} is not a folder")
    except OSError as exc:  # a name longer than the file system allows, a symlink loop
        raise EnvironmentProblem(f"{what} {p}: {exc.strerror or exc}") from None
    if p.exists() and not os.access(p, os.W_OK):
        raise EnvironmentProblem(f"{what} {p}: file is not writable")
    if not p.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise EnvironmentProblem(f"{what} {p}: folder {parent} is not writable")
    return p


def write_output(path: str | os.PathLike, text: str, what: str, *, append: bool = False) -> Path:
    """Write (or append) ``text``; the OS refusing it is one EnvironmentProblem line naming ``what``."""
    p = Path(path)
    try:
        with p.open("a" if append else "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write {what} {p}: {exc.strerror or exc}") from None
    return p


def write_output_atomically(path: str | os.PathLike, text: str, what: str) -> Path:
    """Write ``text`` to a temporary file beside ``path`` and rename it over ``path``: a reader never sees
    a partial file, and a failed write leaves none. The OS refusing it is one EnvironmentProblem line."""
    import tempfile

    p = Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; outputs are meant to be shared
        os.replace(tmp, p)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise EnvironmentProblem(f"cannot write {what} {p}: {exc.strerror or exc}") from None
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    return p
