"""The ``zincbench`` command: a click group whose subcommands live one per module in this package.

A new command is one new file here defining ``command`` (a click.Command). Modules are imported
only when their command runs, so ``--help`` works without CuPy or a GPU.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

from zincbench import __version__
from zincbench.errors import ExitCode, ZincbenchError

_HELP = """Benchmark and gating harness for GPU inference kernels.

\b
Exit codes (a contract for CI):
  0  pass / GO          1  regression / NO-GO / validation failure
  2  bad input/usage    3  inconclusive          4  environment error (no GPU, missing tool)
"""


def _command_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


class LazyGroup(click.Group):
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


def main(argv: list[str] | None = None) -> None:
    """Entry point: one clear line and a documented exit code for every expected failure."""
    try:
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
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except BrokenPipeError:  # `zincbench ... | head`
        sys.exit(0)
    sys.exit(int(rv or 0))
