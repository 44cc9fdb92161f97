"""The one progress bar: shown only when asked for and on a terminal; on stderr by default; gone when done."""

from __future__ import annotations

import io

from rich.console import Console

from zincbench.progress import progress_bar


def test_shown_only_when_asked_on_a_terminal():
    terminal = Console(file=io.StringIO(), force_terminal=True)
    pipe = Console(file=io.StringIO(), force_terminal=False)
    assert not progress_bar(True, terminal).disable
    assert progress_bar(False, terminal).disable
    assert progress_bar(True, pipe).disable


def test_on_stderr_by_default_and_transient():
    bar = progress_bar(True)
    assert bar.console.stderr and bar.live.transient


def test_a_finished_bar_leaves_nothing_on_the_terminal():
    out = io.StringIO()
    with progress_bar(True, Console(file=out, force_terminal=True, width=80)) as bar:
        task = bar.add_task("cases", total=2)
        bar.advance(task, 2)
    assert "cases" not in out.getvalue().split("\x1b[2K")[-1]
