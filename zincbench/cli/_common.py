"""Options and output helpers shared by the command modules."""

from __future__ import annotations

import json
import math
import sys

import click

from zincbench.records import to_jsonable

json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout instead of tables.")


class Seconds(click.ParamType):
    """A duration option: a finite number of seconds above zero (nan, inf and negatives are refused)."""

    name = "seconds"

    def convert(self, value, param, ctx):
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds <= 0:
            self.fail(f"{value!r}: need a finite number of seconds above 0", param, ctx)
        return seconds


SECONDS = Seconds()


def _prepared_results_dir(ctx, param, value):
    """Check the results folder (or $ZINCBENCH_RESULTS) before the command does any work."""
    from zincbench.records import prepare_results_dir

    prepare_results_dir(value)
    return value


def checked_output_file(ctx, param, value):
    """Option callback: an output file's path is checked before any work (zincbench.outputs)."""
    from zincbench.outputs import check_output_file

    return None if value is None else str(check_output_file(value, param.opts[0]))


results_dir_option = click.option(
    "--results-dir", type=click.Path(file_okay=False), default=None, callback=_prepared_results_dir,
    help="Where to write the results document (default: ./results, or $ZINCBENCH_RESULTS).",
)


def echo_json(obj) -> None:
    sys.stdout.write(json.dumps(to_jsonable(obj), indent=1, allow_nan=False) + "\n")


def parse_env_pairs(pairs: tuple[str, ...], option: str = "--env") -> dict[str, str]:
    """KEY=VAL pairs from a repeated option; a malformed one is a usage error."""
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VAL, got {pair!r}", param_hint=option)
        env[key] = value
    return env
