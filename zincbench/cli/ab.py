"""``zincbench ab``: interleaved A/B of two engine builds, or the p90 scoreboard of one, vs llama-bench."""

from __future__ import annotations

import sys

import click

from zincbench.cli._common import (
    checked_output_file,
    chosen_models,
    design_options,
    echo_json,
    engine_options,
    json_option,
    model_options,
    parse_env_pairs,
    results_dir_option,
)
from zincbench.runs.ab import ABSettings

DEFAULTS = ABSettings()  # the options' defaults are the settings'


@click.command(
    "ab",
    help="""Interleaved A/B of two engine builds with a p90 prefill/decode scoreboard.

\b
Each model gets one discarded warm-up round, then counterbalanced rounds (abba:
A B, B A, ...) until the verdict is decided: B is judged against A from the paired
per-round ratios B/A (geometric mean, t interval) after --min-rounds and then every
4 rounds, and stops at faster / slower / same (at --threshold), or inconclusive when
--max-rounds or --max-time is spent. The looks share a 1% error budget (a
group-sequential design), so looking often does not raise the false-positive rate.
--rounds N runs exactly N rounds instead. Failed runs are counted apart; only more
than --max-failure-rate of them makes the verdict "error". p90 needs 10 runs.
With only --a, it prints the p90 scoreboard of one build (10 rounds) against llama-bench.
A and B may be one binary with different --env-a/--env-b (a feature-flag A/B).

\b
Exit codes: 0 B not slower (or scoreboard measured), 1 B slower on some model,
3 inconclusive or too many failed runs, 2 bad input, 4 environment (--require-clean-gpu).""",
)
@click.option(
    "--a",
    "bin_a",
    required=True,
    type=click.Path(exists=True, dir_okay=False, resolve_path=True),
    help="Engine binary of arm A (baseline).",
)
@click.option(
    "--b",
    "bin_b",
    type=click.Path(exists=True, dir_okay=False, resolve_path=True),
    help="Engine binary of arm B (candidate).",
)
@engine_options
@model_options
@design_options(DEFAULTS)
@click.option(
    "--max-failure-rate",
    type=float,
    default=DEFAULTS.max_failure_rate,
    show_default=True,
    help="Share of failed runs above which a model's verdict is 'error'.",
)
@click.option("--seed", type=int, default=DEFAULTS.seed, show_default=True, help="Seed of --order random.")
@click.option(
    "--gpu",
    "gpu_uuid",
    metavar="UUID[,UUID...]|all",
    help="Pin runs to this GPU (CUDA_VISIBLE_DEVICES); a list or 'all' runs the whole A/B on each GPU in turn.",
)
@click.option("--env-a", multiple=True, metavar="K=V", help="Extra environment for arm A (repeatable).")
@click.option("--env-b", multiple=True, metavar="K=V", help="Extra environment for arm B (repeatable).")
@click.option(
    "--llama-bench",
    "llama_bench_file",
    type=click.Path(dir_okay=False),
    help="llama-bench output (md/csv/json/jsonl/sql) to compare with.",
)
@click.option(
    "--llama-bench-bin",
    type=click.Path(exists=True, dir_okay=False, resolve_path=True),
    help="Run llama-bench live at the engine's T.",
)
@click.option("--require-clean-gpu", is_flag=True, help="Abort (exit 4) if another process computes on the GPU.")
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(dir_okay=False),
    callback=checked_output_file,
    help="Also write the scoreboard as markdown.",
)
@json_option
@results_dir_option
def command(
    bin_a,
    bin_b,
    engine_kind,
    engine_config,
    catalog_path,
    model_names,
    model_pairs,
    env_a,
    env_b,
    llama_bench_file,
    llama_bench_bin,
    markdown_path,
    as_json,
    results_dir,
    **settings_options,
):
    """``settings_options``: the options named as ``ABSettings`` fields (--rounds ... --require-clean-gpu)."""
    from rich.console import Console

    from zincbench.engines import make_engine
    from zincbench.gpu.nvml import check_gpu_request
    from zincbench.measure import llama_bench
    from zincbench.runs.ab import Arm, run_ab
    from zincbench.show import scoreboard

    if llama_bench_file and llama_bench_bin:
        raise click.UsageError("give --llama-bench FILE or --llama-bench-bin PATH, not both")
    if env_b and not bin_b:
        raise click.UsageError("--env-b needs --b (use --b with the same binary for a feature-flag A/B)")
    gpu_uuid = settings_options["gpu_uuid"]
    if gpu_uuid and ("," in gpu_uuid or gpu_uuid == "all"):
        from zincbench.gpu.selection import resolve_gpus, run_per_gpu

        sys.exit(run_per_gpu(resolve_gpus(gpu_uuid)))
    settings = ABSettings.checked(**settings_options)
    check_gpu_request(settings.gpu_uuid, settings.require_clean_gpu)
    models = chosen_models(catalog_path, model_names, model_pairs)
    arms = [
        Arm(
            name,
            make_engine(engine_kind, binary, engine_config, prompt_tokens=settings.prompt_tokens),
            parse_env_pairs(env, f"--env-{name.lower()}"),
        )
        for name, binary, env in (("A", bin_a, env_a), ("B", bin_b, env_b))
        if binary
    ]
    outcome = run_ab(
        models,
        arms,
        settings,
        llama_rows=llama_bench.load(llama_bench_file) if llama_bench_file else None,
        llama_bench_bin=llama_bench_bin,
        results_dir=results_dir,
        console=Console(stderr=True),
    )
    gpu = outcome.document.environment.get("gpu") or {}
    title = scoreboard.run_title(arms, (bin_a, bin_b), gpu, outcome.models, settings.order)
    return _finish(outcome, [a.name for a in arms], title, as_json, markdown_path)


def _finish(outcome, names: list[str], title: str, as_json: bool, markdown_path: str | None) -> int:
    """Show the outcome (a JSON summary, or the scoreboard, the verdict and where the results are), then write
    the --markdown scoreboard; the exit code."""
    from rich.console import Console

    from zincbench.outputs import write_output
    from zincbench.show import scoreboard

    if as_json:
        echo_json(
            {
                "overall": outcome.overall,
                "exit_code": int(outcome.exit_code),
                "results": str(outcome.path),
                "csv": str(outcome.csv_path),
                "complete": outcome.document.complete,
                "models": outcome.models,
            }
        )
    else:
        console = Console()
        scoreboard.render(outcome.models, names, console, title=title)
        console.print(f"verdict: {outcome.overall} (exit {int(outcome.exit_code)})", highlight=False)
        console.print(
            f"results: {outcome.path} · {outcome.csv_path.name}", highlight=False, markup=False, overflow="fold"
        )
    # After the verdict is shown: a failed write (exit 4) cannot hide it.
    if markdown_path:
        write_output(markdown_path, scoreboard.to_markdown(outcome.models, names, title=title), "--markdown")
    return int(outcome.exit_code)
