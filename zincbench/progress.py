"""The one progress bar of long work (microbench cases, validate, ab and A/A runs): on stderr, so stdout keeps
the tables and JSON a pipe reads; only on a terminal, so CI logs stay free of redraws; gone when done."""

from __future__ import annotations


def progress_bar(enabled: bool = True, console=None):
    """A rich ``Progress`` (description, bar, done/total, elapsed) on ``console`` (default: stderr), disabled
    unless ``enabled`` and that console is a terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = console or Console(stderr=True)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not (enabled and console.is_terminal),
    )
