"""Options and output helpers shared by the command modules."""

from __future__ import annotations

import json
import sys

import click

from zincbench.records import to_jsonable

json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout instead of tables.")
results_dir_option = click.option(
    "--results-dir", type=click.Path(file_okay=False), default=None,
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
