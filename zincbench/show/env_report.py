"""Rich rendering of the environment report."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def print_environment(report: dict, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title="zincbench environment", show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    gpu = report.get("gpu")
    if gpu:
        table.add_row(
            "GPU",
            f"{gpu['name']} ({gpu['arch']}, {gpu['sm_count']} SMs, L2 {gpu['l2_mib']} MiB, {gpu['memory_gib']} GiB)",
        )
        table.add_row("UUID / PCI", f"{gpu['uuid']}  {gpu['pci_bus_id']}")
    else:
        table.add_row("GPU", "[red]no CUDA device[/red]")
    sw = report.get("software") or {}
    if sw:
        table.add_row(
            "CUDA",
            f"runtime {sw.get('cuda_runtime', '?')}, driver API {sw.get('cuda_driver_api', '?')}, "
            f"NVRTC {sw.get('nvrtc', '?')}, CuPy {sw.get('cupy', '?')}",
        )
    nvml = report.get("nvml") or {}
    if nvml.get("available"):
        table.add_row("driver", str(nvml.get("driver")))
        table.add_row("SM clock", f"{nvml.get('sm_clock_mhz')} / max {nvml.get('sm_clock_max_mhz')} MHz")
        table.add_row("memory clock", f"{nvml.get('mem_clock_mhz')} / max {nvml.get('mem_clock_max_mhz')} MHz")
        table.add_row(
            "power", f"{nvml.get('power_w')} W (limit {nvml.get('power_limit_w')} W), {nvml.get('temperature_c')} °C"
        )
        table.add_row("clock event reasons", ", ".join(nvml.get("clock_event_reasons") or []) or "none")
        others = nvml.get("other_compute_processes") or []
        table.add_row(
            "other GPU processes", ", ".join(f"pid {p['pid']} ({p['used_mib']} MiB)" for p in others) or "none"
        )
    for name, tool in (report.get("tools") or {}).items():
        table.add_row(
            name, f"{tool['version'] or '?'}  {tool['path']}" if tool.get("path") else "[yellow]not found[/yellow]"
        )
    console.print(table)
    problems = report.get("problems") or []
    if problems:
        console.print("[bold yellow]Missing or degraded:[/bold yellow]")
        for p in problems:
            console.print(f"  - {escape(p)}")
    else:
        console.print("[green]Nothing missing.[/green]")
