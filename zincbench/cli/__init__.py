"""The ``zincbench`` command: a click group whose subcommands live one per module in this package.

A new command is one new file here defining ``command`` (a click.Command). Modules are imported
only when their command runs, so ``--help`` works without CuPy or a GPU.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import tempfile
import traceback

from zincbench import __version__
from zincbench.errors import ExitCode, ZincbenchError


def _missing_package_line(exc: ImportError) -> str:
    return f"a Python package zincbench needs cannot be imported ({exc}); reinstall zincbench with its dependencies"


def _is_ours(exc: ImportError) -> bool:
    """An import of zincbench's own code failed (a bug), not of a package it depends on (the installation)."""
    return (exc.name or "").partition(".")[0] == "zincbench"


try:
    import click
except ImportError as _exc:  # a broken installation is exit 4 and one line, not a traceback and exit 1
    print(f"zincbench: error: {_missing_package_line(_exc)}", file=sys.stderr)
    raise SystemExit(int(ExitCode.ENVIRONMENT)) from None

_HELP = """Benchmark and gating harness for GPU inference kernels.

\b
Exit codes (a contract for CI):
  0  pass / GO           1  regression / NO-GO / validation failure
  2  bad input/usage     3  inconclusive
  4  environment error (no GPU, missing tool or package, NVML absent, unwritable output)
  5  internal error (a zincbench bug; its traceback is saved to a log file)
  6  nothing checked (a gate whose every check was skipped on this machine)
"""


def _command_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


class _StdoutClosed(Exception):
    """A broken pipe, carried past click (whose own handler would exit 1, a NO-GO) to ``main``."""


class LazyGroup(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise _StdoutClosed from None

    def list_commands(self, ctx):
        return [m.replace("_", "-") for m in _command_modules()]

    def get_command(self, ctx, name):
        module_name = name.replace("-", "_")
        if module_name not in _command_modules():
            return None
        module = importlib.import_module(f"{__name__}.{module_name}")
        return module.command


@click.group(cls=LazyGroup, help=_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="zincbench")
def cli() -> None:
    pass


def _fail(message: str, code: int) -> None:
    click.echo(f"zincbench: error: {message}", err=True)
    sys.exit(int(code))


def _save_traceback(exc: BaseException) -> str:
    """Write the traceback to a fresh log file in $TMPDIR; its path, or why there is none (never raises)."""
    try:
        fd, path = tempfile.mkstemp(prefix="zincbench-internal-error-", suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(f"zincbench {__version__}: {' '.join(sys.argv)}\n")
            fh.write("".join(traceback.format_exception(exc)))
        return path
    except Exception as log_exc:  # noqa: BLE001 - the report of a crash must not crash
        return f"nowhere: {type(log_exc).__name__}"


def _internal_error(exc: BaseException) -> None:
    log = _save_traceback(exc)
    message = " ".join(str(exc).split())[:300]
    click.echo(f"zincbench: internal error: {type(exc).__name__}: {message} (traceback saved to {log})", err=True)
    sys.exit(int(ExitCode.INTERNAL))


def _os_error_line(exc: OSError) -> str:
    """'cannot write results/x.json: No space left on device' from an OSError the code did not wrap."""
    names = " -> ".join(str(n) for n in (exc.filename, exc.filename2) if n is not None)
    reason = exc.strerror or str(exc)
    return f"{names}: {reason}" if names else reason


def _raise_broken_pipe(self) -> None:
    """rich's hook for a closed stdout; its default raises SystemExit(1), which reads as a verdict."""
    raise BrokenPipeError


def _safe_streams() -> None:
    """A closed stdout/stderr becomes /dev/null, and glyphs a narrow encoding (ASCII) lacks become '?',
    so neither can turn a finished run into a crash."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            setattr(sys, name, open(os.devnull, "w"))
        elif hasattr(stream, "reconfigure"):
            try:
                "µ±—×→".encode(stream.encoding or "ascii")
            except (UnicodeEncodeError, LookupError):
                stream.reconfigure(errors="replace")


def _quiet_broken_pipe() -> None:
    """The reader went away (`zincbench env | head -1`): no message, no verdict exit code."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit would raise again
    except (OSError, ValueError, AttributeError):
        pass
    sys.exit(int(ExitCode.BROKEN_PIPE))


def _flush_stdout() -> None:
    """Output still buffered goes now, while a closed pipe can still become exit 141."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()


def main(argv: list[str] | None = None) -> None:
    """Entry point and the one error boundary: every anticipated failure is one clear line and a documented
    exit code (2 input, 4 environment); anything else is exit 5 with its traceback saved to a log file."""
    _safe_streams()
    try:
        from rich.console import Console

        Console.on_broken_pipe = _raise_broken_pipe
        rv = cli.main(args=argv, prog_name="zincbench", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click >= 8.2
        click.echo(exc.ctx.get_help())
        sys.exit(int(ExitCode.USAGE))
    except click.UsageError as exc:
        path = exc.ctx.command_path if exc.ctx else "zincbench"
        _fail(f"{exc.format_message()} (see '{path} --help')", ExitCode.USAGE)
    except click.exceptions.Abort as exc:  # click turns Ctrl-C into Abort
        _fail("interrupted" if isinstance(exc.__context__, KeyboardInterrupt) else "aborted", 130)
    except click.ClickException as exc:
        _fail(exc.format_message(), ExitCode.USAGE)
    except ZincbenchError as exc:
        _fail(str(exc), exc.exit_code)
    except SystemExit:  # a command's own sys.exit(code): flush first, so a closed pipe is 141, not Python's 120
        _flush_stdout()
        raise
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except (BrokenPipeError, _StdoutClosed):
        _quiet_broken_pipe()
    except OSError as exc:  # the OS refused a file or folder that no check named
        _fail(_os_error_line(exc), ExitCode.ENVIRONMENT)
    except ImportError as exc:  # imported lazily, by the command that needs it
        if not _is_ours(exc):
            _fail(_missing_package_line(exc), ExitCode.ENVIRONMENT)
        _internal_error(exc)
    except Exception as exc:  # noqa: BLE001 - the boundary: a bug must not read as a verdict
        _internal_error(exc)
    _flush_stdout()
    sys.exit(int(rv or 0))
