"""``zincbench aa``: the A/A self-test of the verdicts (a kernel against itself, or one engine as A and B)."""

from __future__ import annotations

import click

from zincbench.bench import family_names
from zincbench.cli._common import (
    SECONDS,
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

EXIT_CODES = """\b
Exit codes, from a test over the independent comparisons (never the point estimate): 0 the
false-positive rate is shown at or below the target (experiments/aa.yaml target_fp_rate: its
Clopper-Pearson upper bound), 1 it is shown above (exact binomial test, Holm over the models),
3 too few comparisons to show either, or some run produced no verdict, 2 bad input, 4 environment."""

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="A/A settings YAML (default: experiments/aa.yaml); options below override it.",
)
markdown_option = click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(dir_okay=False),
    default=None,
    callback=checked_output_file,
    help="Also write the summary as markdown to this file.",
)
no_progress_option = click.option("--no-progress", is_flag=True, help="No progress bar (CI logs).")


@click.group(
    "aa",
    help="A/A self-test: compare identical code with itself many times and report how often the "
    "verdict says faster or slower (the false-positive rate, with a Clopper-Pearson interval), "
    "how often it is inconclusive, and the smallest change it detects on this machine.",
)
def command() -> None:
    pass


def _finish(outcome, as_json: bool, markdown_path: str | None) -> int:
    from zincbench import records
    from zincbench.outputs import write_output
    from zincbench.show import aa_table

    data = records.to_jsonable(outcome.document)
    if as_json:
        echo_json({"results_file": str(outcome.path), "summary": data["verdict"], "notes": data["notes"]})
    else:
        aa_table.render(data, path=outcome.path)
    if markdown_path:  # after the verdict is shown: a failed write cannot hide it
        write_output(markdown_path, aa_table.to_markdown(data), "--markdown")
    return int(outcome.exit_code)


@command.command(
    "microbench",
    help=f"""Time one kernel variant against itself in separate processes.

\b
Runs `python -m zincbench microbench FAMILY --case C --variant V --no-ceilings --json` --processes
times and compares every pair of processes with the family's gate rule (threshold and confidence of
the gate: block in its experiment YAML). The interval of the false-positive rate uses only disjoint
pairs (1-2, 3-4, ...), the comparisons that share no process.

{EXIT_CODES}""",
)
@click.option("--processes", type=int, default=None, help="Separate microbench processes (at least 2).")
@click.option("--case", default=None, help="Case key, e.g. E256-M512-K2048-Ne16.")
@click.option("--variant", default=None, help="Variant to time, e.g. fused_grouped.")
@click.option("--family", type=click.Choice(family_names()), default=None, help="Microbench family.")
@click.option("--experiment", "-e", default=None, help="The family's experiment YAML (default: its bundled one).")
@click.option("--quick/--no-quick", default=None, help="Shorter timing budget per process (wider intervals).")
@click.option("--seed", type=int, default=None, help="Same inputs in every process (default: fresh per process).")
@click.option("--timeout", "timeout_s", type=SECONDS, default=None, help="Seconds per process.")
@config_option
@markdown_option
@no_progress_option
@results_dir_option
@json_option
def microbench(
    processes,
    case,
    variant,
    family,
    experiment,
    quick,
    seed,
    timeout_s,
    config_path,
    markdown_path,
    no_progress,
    results_dir,
    as_json,
):
    from zincbench.runs.aa import load_aa_config, run_microbench_aa

    config = load_aa_config(config_path).with_overrides(
        "microbench",
        processes=processes,
        case=case,
        variant=variant,
        family=family,
        experiment=experiment,
        quick=quick,
        seed=seed,
        timeout_s=timeout_s,
    )
    outcome = run_microbench_aa(config, results_dir=results_dir, progress=not (no_progress or as_json))
    return _finish(outcome, as_json, markdown_path)


@command.command(
    "ab",
    help=f"""Run one engine binary as both arms of `zincbench ab`, --repeats times.

\b
Every repeat is a full, independent A/B (warm-up round, then adaptive counterbalanced rounds, or
exactly --rounds) judged by the verdict of `zincbench ab` at --threshold; each model's verdict is
one comparison. With --env-b K=V and --expect slower|faster, arm B gets a planted change and the
run measures how often the verdict calls it instead (exit 0 when at least detection_coverage of
the comparisons do, 1 below).

{EXIT_CODES}""",
)
@click.option(
    "--a",
    "bin_a",
    required=True,
    type=click.Path(exists=True, dir_okay=False, resolve_path=True),
    help="Engine binary (used as both A and B).",
)
@engine_options
@model_options
@click.option("--repeats", type=int, default=None, help="Independent A/A runs.")
@design_options(None)  # unset: the --config file's ab block fills them
@click.option("--gpu", "gpu_uuid", metavar="UUID", help="Pin runs to this GPU (CUDA_VISIBLE_DEVICES).")
@click.option("--env", "env_pairs", multiple=True, metavar="K=V", help="Extra environment of both arms (repeatable).")
@click.option(
    "--env-b",
    "planted_pairs",
    multiple=True,
    metavar="K=V",
    help="A planted change: extra environment of arm B only (repeatable; needs --expect).",
)
@click.option(
    "--expect", type=click.Choice(["slower", "faster"]), default=None, help="The verdict the planted change should get."
)
@config_option
@markdown_option
@no_progress_option
@results_dir_option
@json_option
def ab(
    bin_a,
    engine_kind,
    engine_config,
    catalog_path,
    model_names,
    model_pairs,
    repeats,
    rounds,
    min_rounds,
    max_rounds,
    max_time_s,
    order,
    threshold,
    prompt_tokens,
    n_gen,
    timeout_s,
    gpu_uuid,
    env_pairs,
    planted_pairs,
    expect,
    config_path,
    markdown_path,
    no_progress,
    results_dir,
    as_json,
):
    from zincbench.engines import make_engine
    from zincbench.gpu.nvml import check_gpu_request
    from zincbench.runs.aa import load_aa_config, run_ab_aa

    config = load_aa_config(config_path).with_overrides(
        "ab",
        repeats=repeats,
        rounds=rounds,
        min_rounds=min_rounds,
        max_rounds=max_rounds,
        max_time_s=max_time_s,
        order=order,
        threshold=threshold,
        prompt_tokens=prompt_tokens,
        n_gen=n_gen,
        timeout_s=timeout_s,
    )
    if bool(planted_pairs) != bool(expect):
        raise click.UsageError("--env-b and --expect go together (a planted change and the verdict it should get)")
    check_gpu_request(gpu_uuid, require_clean=False)
    models = chosen_models(catalog_path, model_names, model_pairs)
    engine = make_engine(engine_kind, bin_a, engine_config, prompt_tokens=config.ab.prompt_tokens)
    outcome = run_ab_aa(
        models,
        engine,
        config,
        env=parse_env_pairs(env_pairs, "--env"),
        gpu_uuid=gpu_uuid,
        planted=parse_env_pairs(planted_pairs, "--env-b"),
        expect=expect,
        results_dir=results_dir,
        progress=not (no_progress or as_json),
    )
    return _finish(outcome, as_json, markdown_path)
