"""An A/A results document as a rich table (terminal) or markdown (README, PR descriptions).

Input is the plain document (``records.to_jsonable`` of the ``aa`` Document, or a saved file read
back), so a recorded A/A can be shown again without re-measuring.
"""

from __future__ import annotations

from pathlib import Path

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from zincbench.show.fit import fits

OUTCOME_STYLE = {
    "pass": "bold green",
    "fail": "bold red",
    "inconclusive": "bold yellow",
    "no comparisons": "bold yellow",
}


def _pct(value, digits: int = 1) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}%"


def _rate(rate: dict, with_ci: bool) -> str:
    text = f"{_pct(rate['rate'])} ({rate['events']}/{rate['n']})"
    lo, hi = rate["ci"]
    if with_ci and lo is not None and hi is not None:
        text += f", {rate['confidence']:.0%} CI {_pct(lo)}–{_pct(hi)}"
    return text


def _tally(tally: dict) -> str:
    return " · ".join(f"{name} {count}" for name, count in tally.items())


def _detectable(d: dict) -> str:
    if not d or not d.get("n"):
        return "—"
    called = f"called in {d['coverage']:.0%} of {d['n']}"
    return f"speed-up ≥ {_pct(d['speedup'])}, slow-down ≥ {_pct(d['slowdown'])} ({called})"


def _rounds(s: dict) -> str:
    """'6 rounds' (fixed) or 'adaptive 6–30 rounds'; documents from before the adaptive A/B have only rounds."""
    if s.get("rounds") is not None:
        return f"{s['rounds']} rounds"
    return f"adaptive {s['min_rounds']}–{s['max_rounds']} rounds"


def title(data: dict) -> str:
    config, verdict = data["config"], data["verdict"]
    if verdict.get("confidence"):
        rule = f"threshold {verdict['threshold']:.0%}, {verdict['confidence']:.0%} CI"
    elif verdict.get("alpha"):
        rule = f"threshold {verdict['threshold']:.0%}, sequential α {verdict['alpha']:.0%}"
    else:
        rule = f"threshold {verdict['threshold']:.0%}"
    s = config["settings"]
    if config["mode"] == "microbench":
        what = f"microbench {s['family']} {s['variant']} {s['case']}, {s['processes']} processes"
    else:
        engine = config["engine"]
        binary = Path(engine.get("binary") or engine.get("bin") or "").name
        planted = config.get("planted")
        against = (
            "vs itself" if not planted else "vs B with " + " ".join(f"{k}={v}" for k, v in planted["env_b"].items())
        )
        what = f"ab {engine['kind']} {binary} {against}, {s['repeats']} repeats × {_rounds(s)} {s['order']}"
    gpu = ((data.get("environment") or {}).get("gpu") or {}).get("name")
    kind = "A/A self-test" if not (config.get("planted")) else "Detection test"
    return f"{kind} · {what} · {rule}" + (f" · {gpu}" if gpu else "")


def _rounds_used(v: dict) -> tuple[str, str] | None:
    used = v.get("rounds")
    if not used or used.get("mean") is None:
        return None
    stops = ", ".join(f"{reason} {count}" for reason, count in used["stops"].items())
    return (
        "rounds per comparison",
        f"mean {used['mean']:.1f}, median {used['median']:.0f}, max {used['max']} ({stops})",
    )


def _detection_rows(v: dict) -> list[tuple[str, str]]:
    c = v["comparisons"]
    out = [
        ("comparisons", str(c["detected"]["n"])),
        ("verdicts", _tally(c["tally"])),
        (f"detection rate ({v['expected']})", _rate(c["detected"], with_ci=True)),
        ("wrong direction", _rate(c["wrong_direction"], with_ci=False)),
        ("inconclusive rate", _rate(c["inconclusive"], with_ci=False)),
    ]
    return out + [r for r in [_rounds_used(v)] if r]


def rows(data: dict) -> list[tuple[str, str]]:
    """(label, value) lines of the summary, shared by the terminal and markdown forms."""
    v = data["verdict"]
    if "expected" in v:
        return _detection_rows(v)
    every, indep = v["comparisons"], v["independent"]
    out = [
        ("comparisons", f"{every['false_positive']['n']} ({indep['false_positive']['n']} independent)"),
        ("verdicts", _tally(every["tally"])),
        ("false-positive rate", _rate(every["false_positive"], with_ci=False)),
        ("  over independent comparisons", _rate(indep["false_positive"], with_ci=True)),
        ("inconclusive rate", _rate(every["inconclusive"], with_ci=False)),
    ]
    noise = v.get("noise") or {}
    if v["mode"] == "microbench":
        if noise:
            within = noise.get("within_process_rel_noise")
            spread = (
                f"per-process medians {noise['median_us']:.1f} µs: CV {_pct(noise['process_cv'], 2)}, "
                f"range {_pct(noise['process_range'], 2)}; in-process CI half-width {_pct(within, 2)}"
            )
            out.append(("noise floor", spread))
        out.append(("minimum detectable change", _detectable(v.get("detectable"))))
        out.append(("processes", f"{v['processes']['ok']}/{v['processes']['requested']} measured"))
    else:
        out += [r for r in [_rounds_used(v)] if r]
        for metric, tally in v["by_metric"].items():
            out.append((f"{metric} verdicts", _tally(tally)))
        for metric in v["by_metric"]:
            out.append((f"{metric} round-to-round spread", _pct(noise.get(f"{metric}_round_cv"), 2)))
            out.append((f"{metric} minimum detectable change", _detectable(v["detectable"].get(metric))))
    return out


def verdict_line(data: dict) -> str:
    v = data["verdict"]
    if "expected" in v:
        return (
            f"DETECTION {v['outcome'].upper()}: {_pct(v['comparisons']['detected']['rate'])} called "
            f"{v['expected']} vs target ≥ {_pct(v['target_detection_rate'])} (exit {v['exit_code']})"
        )
    rate = v["comparisons"]["false_positive"]["rate"]
    return (
        f"A/A {v['outcome'].upper()}: false-positive rate {_pct(rate)} vs target ≤ {_pct(v['target_fp_rate'])} "
        f"(exit {v['exit_code']})"
    )


def _summary_table(lines: list[tuple[str, str]], probe: bool = False) -> Table:
    """Labels whole, values wrapped between words; a ``probe`` (to measure) holds each value's longest word."""
    table = Table(show_header=False)
    table.add_column("what", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for label, value in lines:
        table.add_row(escape(label), escape(max(value.split() or [""], key=cell_len) if probe else value))
    return table


def render(data: dict, console: Console | None = None, path=None) -> None:
    """The title wraps at the console's width (not the table's, which may be narrower than a long
    variant or binary name); in a terminal too narrow for labels beside values, each label gets a line."""
    console = console or Console()
    console.print(title(data), style="italic", highlight=False, markup=False, overflow="fold")
    lines = rows(data)
    if fits(console, _summary_table(lines, probe=True)):
        console.print(_summary_table(lines))
    else:
        for label, value in lines:
            console.print(label.strip(), style="bold", highlight=False, markup=False, overflow="fold")
            console.print(Padding(Text(value, overflow="fold"), (0, 0, 0, 2)))
    for note in (data["verdict"].get("notes") or []) + (data.get("notes") or []):
        console.print(f"note: {note}", style="dim", highlight=False, markup=False, overflow="fold")
    console.print(
        verdict_line(data), style=OUTCOME_STYLE.get(data["verdict"]["outcome"], "bold"), highlight=False, markup=False
    )
    if path:
        console.print(f"results: {path}", highlight=False, markup=False, overflow="fold")


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|")


def to_markdown(data: dict) -> str:
    lines = [f"**{title(data)}**", "", "| | |", "|---|---|"]
    lines += [f"| {label.strip()} | {_escape(value)} |" for label, value in rows(data)]
    lines += ["", f"**{verdict_line(data)}**"]
    lines += [f"- {note}" for note in (data["verdict"].get("notes") or [])]
    return "\n".join(lines) + "\n"
