"""``zincbench validate``: the catalog token-correctness gate; ``zincbench validate record``: its references."""

from __future__ import annotations

import click

from zincbench.cli._common import (
    SECONDS,
    checked_output_file,
    echo_json,
    json_option,
    parse_env_pairs,
    results_dir_option,
)
from zincbench.engines import GENERATE, engine_kinds

ENGINE_KINDS = engine_kinds(GENERATE)  # the adapters that produce token ids


def _options(*decorators):
    def apply(fn):
        for deco in reversed(decorators):
            fn = deco(fn)
        return fn

    return apply


catalog_option = click.option(
    "--catalog",
    type=click.Path(dir_okay=False),
    default=None,
    help="Catalog YAML (default: the bundled experiments/catalog.yaml).",
)
models_option = click.option(
    "--models",
    "models",
    multiple=True,
    metavar="NAMES",
    help="Catalog models or aliases, comma-separated or repeated (default: all).",
)
gguf_option = click.option(
    "--gguf",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Use this one GGUF instead of the catalog paths (the catalog row it "
    "belongs to, by file name or --models, supplies prompt/n_gen/min_match).",
)
references_dir_option = click.option(
    "--references-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where recorded references live (default: <results dir>/references).",
)
full_hash_option = click.option(
    "--full-hash",
    is_flag=True,
    help="Key references by a sha256 of the whole GGUF instead of its header and "
    "tensor layout (slow on big files; catches weights-only edits).",
)
gpu_layers_option = click.option(
    "--gpu-layers",
    type=int,
    default=0,
    show_default=True,
    help="llama.cpp n_gpu_layers for the reference and the llama-cpp engine (0 = CPU, bit-stable; -1 = all).",
)
n_batch_option = click.option(
    "--n-batch",
    type=click.IntRange(min=1),
    default=512,
    show_default=True,
    help="llama.cpp n_batch (fixed, because batching changes the numbers).",
)
shared_options = _options(
    catalog_option,
    models_option,
    gguf_option,
    references_dir_option,
    full_hash_option,
    gpu_layers_option,
    n_batch_option,
    json_option,
    results_dir_option,
)


def _select(catalog_path, models, gguf):
    from zincbench.catalog import load_catalog
    from zincbench.errors import InputError

    catalog = load_catalog(catalog_path)
    names = [n.strip() for group in models for n in group.split(",") if n.strip()]
    if gguf is None:
        return catalog, catalog.select(names)
    if len(names) > 1:
        raise InputError("--gguf validates one file: give at most one --models name with it")
    return catalog, [catalog.select(names)[0].with_gguf(gguf) if names else catalog.for_file(gguf)]


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@shared_options
@click.option(
    "--engine-kind",
    type=click.Choice(ENGINE_KINDS),
    default="zinc-dbg",
    show_default=True,
    help="Engine adapter under test: ZINC's cuda-dbg, llama.cpp itself (another build or settings), "
    "or a generic engine declared in YAML.",
)
@click.option(
    "--engine-bin",
    default=None,
    metavar="PATH",
    help="zinc-dbg/generic: the engine binary ({bin}); llama-cpp: a folder holding another libllama build.",
)
@click.option(
    "--engine-config",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="generic: YAML with command templates and regexes (see zincbench.engines.generic).",
)
@click.option(
    "--env",
    "env_pairs",
    multiple=True,
    metavar="KEY=VAL",
    help="Extra environment for every engine run (the engine's feature knobs); repeatable; "
    "overrides the catalog's engine_env.",
)
@click.option(
    "--mode",
    type=click.Choice(["exact", "tolerant"]),
    default="tolerant",
    show_default=True,
    help="exact: all n_gen tokens identical (structural changes); tolerant: identical, or one flip to "
    "llama.cpp's runner-up at a near-tie with every later position still checked by teacher "
    "forcing (fp16/reduction-order changes).",
)
@click.option(
    "--min-match",
    type=click.IntRange(min=1),
    default=None,
    help="Tokens that must agree in tolerant mode (default: the catalog's min_match, 8).",
)
@click.option(
    "--near-tie",
    type=click.FloatRange(min=0),
    default=0.2,
    show_default=True,
    help="Tolerant mode forgives a divergence only to llama.cpp's recorded runner-up where its "
    "top1-top2 logit margin is below this finite value (an fp16/reduction-order flip).",
)
@click.option(
    "--reference",
    type=click.Choice(["live", "recorded"]),
    default="recorded",
    show_default=True,
    help="live: run llama.cpp now (needs llama-cpp-python); recorded: use `validate record` output.",
)
@click.option("--allow-missing", is_flag=True, help="Do not count models whose GGUF is absent as failures.")
@click.option(
    "--timeout",
    type=SECONDS,
    default=600.0,
    show_default=True,
    help="Seconds per engine run; a run past it is killed and reported as an ERROR row.",
)
@click.option(
    "--markdown",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    callback=checked_output_file,
    help="Also write the report as a markdown table to FILE.",
)
@click.pass_context
def command(
    ctx,
    catalog,
    models,
    gguf,
    references_dir,
    full_hash,
    gpu_layers,
    n_batch,
    as_json,
    results_dir,
    engine_kind,
    engine_bin,
    engine_config,
    env_pairs,
    mode,
    min_match,
    near_tie,
    reference,
    allow_missing,
    timeout,
    markdown,
):
    """Check that an engine's greedy tokens match llama.cpp's on every catalog model.

    \b
    Per model: OK / FAIL / MISSING (GGUF absent) / ERROR (crash, timeout, garbage output),
    the leading match k/n, teacher-forced m/n (tolerant mode, when the prefix is short), the
    first divergence and llama.cpp's logit margin there. Exit code 0 when every model is
    token-correct, 1 on any FAIL/ERROR (and MISSING unless --allow-missing), 2 bad input,
    3 when nothing could be checked, 4 environment. Writes a results document (kind validate).
    Record references first with `zincbench validate record [OPTIONS]`.
    """
    if ctx.invoked_subcommand is not None:
        return None
    from pathlib import Path

    from zincbench.engines import make_engine
    from zincbench.engines.llama_cpp import LlamaSettings
    from zincbench.errors import InputError
    from zincbench.records import to_jsonable
    from zincbench.runs.validate import ValidateOptions, validate_models

    env = parse_env_pairs(env_pairs)
    catalog_obj, chosen = _select(catalog, models, gguf)
    settings = LlamaSettings(n_gpu_layers=gpu_layers, n_batch=n_batch)
    engine = make_engine(engine_kind, engine_bin, engine_config, llama=settings)
    try:
        options = ValidateOptions(
            mode=mode,
            min_match=min_match,
            near_tie=near_tie,
            reference=reference,
            references_dir=Path(references_dir) if references_dir else None,
            full_hash=full_hash,
            allow_missing=allow_missing,
            timeout_s=timeout,
            env=env,
            llama=settings,
        )
    except ValueError as exc:
        raise InputError(str(exc)) from None
    report = validate_models(
        chosen, engine, options, config={"catalog": str(catalog_obj.path)}, results_dir=results_dir
    )
    if as_json:
        echo_json(
            {
                "summary": report.summary,
                "exit_code": int(report.exit_code),
                "results": report.path,
                "outcomes": to_jsonable(report.outcomes),
            }
        )
    else:
        from zincbench.show.validate_table import print_report

        print_report(report)
    if markdown:  # after the verdict is shown: a failed write (exit 4) cannot hide it
        from zincbench.outputs import write_output
        from zincbench.show.validate_table import to_markdown

        write_output(markdown, to_markdown(report), "--markdown")
    return int(report.exit_code)


@command.command("record")
@shared_options
@click.option(
    "--force",
    is_flag=True,
    help="Replace a different reference already recorded for a model "
    "(the old one is kept beside it as *.replaced-<time>.json).",
)
@click.option(
    "--timeout",
    type=SECONDS,
    default=600.0,
    show_default=True,
    help="Seconds per model for llama.cpp's decode; past it the child is killed (exit 4).",
)
def record(catalog, models, gguf, references_dir, full_hash, gpu_layers, n_batch, as_json, results_dir, force, timeout):
    """Record llama.cpp greedy references (prompt ids, tokens, top-2 logits) for the selected models.

    Needs llama-cpp-python (the `reference` extra); llama.cpp decodes in a child process, killed
    after --timeout seconds per model.
    References are keyed by the GGUF's identity, the prompt and n_gen, so `validate --reference
    recorded` can gate without llama.cpp. An existing different reference is never overwritten
    without --force (exit 2 before anything is written).
    """
    from zincbench import reference_store
    from zincbench.engines.llama_cpp import LlamaSettings, import_llama_cpp
    from zincbench.runs.validate import record_references

    import_llama_cpp()  # fail with the install hint before touching any model
    _, chosen = _select(catalog, models, gguf)
    directory = references_dir or reference_store.default_directory(results_dir)
    saved = record_references(
        chosen,
        directory,
        settings=LlamaSettings(n_gpu_layers=gpu_layers, n_batch=n_batch),
        full_hash=full_hash,
        force=force,
        timeout_s=timeout,
    )
    if as_json:
        echo_json(
            {
                "references": [str(path) for path, _ in saved],
                "replaced": {str(path): str(aside) for path, aside in saved if aside},
            }
        )
    else:
        for model, (path, aside) in zip(chosen, saved):
            click.echo(f"{model.name}: {path}" + (f" (the old one is kept as {aside.name})" if aside else ""))
    return 0
