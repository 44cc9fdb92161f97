"""`zincbench env`: the device, its software and tools, and what is missing."""

from __future__ import annotations

import click

from zincbench.cli._common import echo_json, json_option


@click.command(
    help="Show the GPU, CUDA/CuPy versions, clocks, other GPU processes and the profiling tools found. "
    "Exits 0 even without a GPU (the report says so)."
)
@json_option
def command(as_json: bool) -> None:
    from zincbench.gpu.device import environment_report
    from zincbench.show.env_report import print_environment

    report = environment_report()
    if as_json:
        echo_json(report)
    else:
        print_environment(report)
