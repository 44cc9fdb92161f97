"""`zincbench microbench [FAMILY]`: the go/no-go kernel gates (FAMILY: any registered family)."""

from __future__ import annotations

import sys

import click

from zincbench.bench import family_names, load_family
from zincbench.cli._common import checked_output_file, echo_json, json_option, results_dir_option

FAMILIES = [load_family(name) for name in family_names()]


@click.command(
    help="Run a microbench gate over the bundled CUDA kernels: correctness against a float64 NumPy "
    "reference first, then cold-L2 timing with confidence intervals, a traffic/roofline model and a "
    "GO / NO-GO verdict. FAMILY (default t2) is one of: "
    + "; ".join(f"{f.name} ({f.summary})" for f in FAMILIES)
    + ". Exit code: 0 GO, 1 NO-GO, 3 inconclusive, 2 bad input, 4 no GPU/CuPy."
)
@click.argument("family", type=click.Choice([f.name for f in FAMILIES]), default="t2", required=False)
@click.option(
    "--experiment",
    "-e",
    default=None,
    help="Experiment YAML (default: the family's own: "
    + ", ".join(f"{f.name}: {f.default_experiment}" for f in FAMILIES)
    + ").",
)
@click.option("--case", "case_filter", default=None, help="Only cases whose key contains this text (e.g. Ne16).")
@click.option(
    "--gguf",
    type=click.Path(dir_okay=False),
    default=None,
    help="Take shapes and weights from this GGUF (t2: an expert tensor; t1: the layer's Q4_K/Q6_K projections).",
)
@click.option("--layer", type=int, default=None, help="Layer of --gguf (t2: first layer with experts; t1: 0).")
@click.option(
    "--gpu",
    "gpu_spec",
    default=None,
    help="GPU(s) to run on: a UUID, an index, a comma list or 'all' (several run in turn, one process each).",
)
@click.option(
    "--engine-src",
    type=click.Path(file_okay=False),
    default=None,
    help="The engine's source tree: its own kernels (experiments/engine_zinc.yaml) are compiled from "
    "DIR/src/shaders/cuda/kernels.cu and timed beside ours (default: $ZINC_SRC; without one, "
    "zincbench's copies in the engine's ABI stand in).",
)
@click.option(
    "--kernels",
    "kernel_packs",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="A kernel pack YAML declaring more variants (repeatable): any CUDA source, launched through "
    "the engine's ABI (buffers, then one push struct by value).",
)
@click.option(
    "--candidate",
    default=None,
    help="Gate this variant instead of the experiment's candidate (e.g. one declared with --kernels).",
)
@click.option(
    "--baseline", default=None, help="Judge the candidate against this variant instead of the experiment's baseline."
)
@click.option("--variant", "variants", multiple=True, help="Only this variant (repeatable), e.g. fused_grouped.")
@click.option(
    "--no-ceilings", is_flag=True, help="Skip measuring the copy-bandwidth and cuBLAS ceilings (no floor columns)."
)
@click.option("--retune", is_flag=True, help="Ignore cached autotune picks: tune again and replace them.")
@click.option("--quick", is_flag=True, help="Shorter timing budget per variant (smoke runs; wider CIs).")
@click.option("--seed", type=int, default=None, help="Seed for weights, activations and routing (default: fresh).")
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(dir_okay=False),
    default=None,
    callback=checked_output_file,
    help="Also write the table as markdown to this file.",
)
@click.option("--no-progress", is_flag=True, help="No progress bar (CI logs).")
@results_dir_option
@json_option
def command(
    family,
    experiment,
    gguf,
    layer,
    gpu_spec,
    engine_src,
    kernel_packs,
    candidate,
    baseline,
    case_filter,
    variants,
    no_ceilings,
    retune,
    quick,
    seed,
    markdown_path,
    no_progress,
    results_dir,
    as_json,
):

    from zincbench import records
    from zincbench.bench.runner import run_microbench
    from zincbench.outputs import write_output
    from zincbench.show.microbench_table import microbench_markdown, print_microbench

    if gpu_spec:
        from zincbench.gpu.selection import pin, resolve_gpus, run_per_gpu

        gpus = resolve_gpus(gpu_spec)
        if len(gpus) > 1:
            sys.exit(run_per_gpu(gpus))
        pin(gpus[0])
    doc, decision, path = run_microbench(
        family,
        experiment,
        results_dir=results_dir,
        case_filter=case_filter,
        retune=retune,
        variant_filter=list(variants) or None,
        ceilings=not no_ceilings,
        quick=quick,
        gguf=gguf,
        layer=layer,
        progress=not no_progress and not as_json,
        seed=seed,
        kernel_packs=kernel_packs,
        engine_src=engine_src,
        candidate=candidate,
        baseline=baseline,
    )
    data = records.to_jsonable(doc)
    if as_json:
        echo_json({"results_file": str(path), "verdict": data["verdict"], "rows": data["results"]})
    else:
        print_microbench(data)
        click.echo(f"results: {path}", err=True)
    if markdown_path:  # after the verdict is shown: a failed write (exit 4) cannot hide it
        write_output(markdown_path, microbench_markdown(data) + "\n", "--markdown")
    sys.exit(int(decision.exit_code))
