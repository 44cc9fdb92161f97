"""Options and output helpers shared by the command modules."""

from __future__ import annotations

import json
import math
import sys

import click

from zincbench.records import to_jsonable

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout instead of tables."
)


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
    "--results-dir",
    type=click.Path(file_okay=False),
    default=None,
    callback=_prepared_results_dir,
    help="Where to write the results document (default: ./results, or $ZINCBENCH_RESULTS).",
)


def stacked(*decorators):
    """The decorators as one, applied as if written one per line in this order (so --help lists them so)."""

    def apply(function):
        for decorator in reversed(decorators):
            function = decorator(function)
        return function

    return apply


# The A/B's options, shared by `zincbench ab` and `zincbench aa ab` (which runs the same A/B, repeated).


def engine_options(function):
    """--engine-kind (an adapter that measures tokens/s) and --engine-config."""
    from zincbench.engines import THROUGHPUT, engine_kinds

    return stacked(
        click.option(
            "--engine-kind", type=click.Choice(engine_kinds(THROUGHPUT)), default="zinc-main", show_default=True
        ),
        click.option(
            "--engine-config", type=click.Path(exists=True, dir_okay=False), help="Engine YAML (generic kind)."
        ),
    )(function)


model_options = stacked(
    click.option(
        "--catalog",
        "catalog_path",
        type=click.Path(dir_okay=False),
        help="Model catalog YAML (default: experiments/catalog.yaml).",
    ),
    click.option("--models", "model_names", help="Comma-separated catalog names or aliases (default: all)."),
    click.option(
        "--model",
        "model_pairs",
        multiple=True,
        metavar="NAME=PATH",
        help="A model file, no catalog needed (repeatable).",
    ),
)


def chosen_models(catalog_path, names, model_pairs):
    """The models of ``model_options``: catalog selection plus NAME=PATH overrides (a catalog name keeps its
    shape and env)."""
    from zincbench.catalog import add_model_files, load_catalog

    catalog = load_catalog(catalog_path)  # the bundled one when no --catalog: it names shapes and aliases
    chosen = (
        catalog.select([n.strip() for n in names.split(",") if n.strip()] if names else None)
        if catalog_path or names
        else []
    )
    chosen = add_model_files(catalog, chosen, parse_env_pairs(model_pairs, "--model"))
    if not chosen:
        raise click.UsageError("no models: give --model NAME=PATH, or --catalog FILE / --models NAMES")
    return chosen


def design_options(defaults):
    """How the A/B runs and when it stops: --rounds to --timeout. Each defaults to its field of ``defaults``
    (an ``ABSettings``, shown in --help); with None every one is left unset, for a command whose config
    file supplies them."""
    from zincbench.runs.ab import ORDERS

    def default(field: str) -> dict:
        return {"default": getattr(defaults, field), "show_default": True} if defaults else {"default": None}

    return stacked(
        click.option("--rounds", type=int, default=None, help="Exactly this many measured rounds (default: adaptive)."),
        click.option(
            "--min-rounds", type=int, **default("min_rounds"), help="Rounds before the first look at the verdict."
        ),
        click.option("--max-rounds", type=int, **default("max_rounds"), help="Budget: most rounds per model."),
        click.option(
            "--max-time",
            "max_time_s",
            type=float,
            **default("max_time_s"),
            help="Budget: seconds per model, checked at every look.",
        ),
        click.option("--order", type=click.Choice(ORDERS), **default("order")),
        click.option("--threshold", type=float, **default("threshold"), help="Smallest relative change that counts."),
        click.option(
            "--prompt-tokens", type=int, **default("prompt_tokens"), help="Length of the built-in neutral prompt."
        ),
        click.option("--n-gen", type=int, **default("n_gen"), help="Tokens to generate (decode rate)."),
        click.option("--timeout", "timeout_s", type=SECONDS, **default("timeout_s"), help="Seconds per engine run."),
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
