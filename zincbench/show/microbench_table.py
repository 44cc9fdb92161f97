"""Render a microbench document: one rich table (or markdown) with every case x variant, the
ceilings it was judged against, and the gate decision."""

from __future__ import annotations

import importlib
from types import ModuleType

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from zincbench.bench.rows import MicrobenchRow, rows_of
from zincbench.show import stage_table
from zincbench.show.fit import fits

ROLE_STYLE = {"baseline": "cyan", "candidate": "bold", "ceiling": "dim", "reference": "dim"}
VERDICT_STYLE = {"faster": "green", "slower": "red", "same": "yellow", "inconclusive": "magenta"}


def family_view(family: object) -> ModuleType | None:
    """A family's own tables after the common one: ``zincbench/show/<family>_view.py`` with
    ``print_view(doc, console)``, ``markdown_view(doc) -> str`` and ``FIELDS``/``REQUIRED`` (what they read
    of a document beyond its typed rows, for report.check_fields), found by its name (adding one is one
    new file); None for a family without one, or a name that is none (a document's family is its text)."""
    if not isinstance(family, str) or not family.isidentifier():
        return None
    name = f"{__package__}.{family}_view"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None


def family_parts(doc: dict) -> list[ModuleType]:
    """What renders a document's tables after the common one: its family's view (if any), then the stage
    tables (any family's variants that record stages); each has ``print_view``, ``markdown_view``,
    ``FIELDS`` and ``REQUIRED``."""
    view = family_view((doc.get("config") or {}).get("family"))
    return [view, stage_table] if view is not None else [stage_table]


def print_family_tables(doc: dict, console: Console) -> None:
    for part in family_parts(doc):
        part.print_view(doc, console)


def family_markdown(doc: dict) -> str:
    """The tables after the common one as markdown, "" where the document has none."""
    return "\n\n".join(filter(None, (part.markdown_view(doc) for part in family_parts(doc))))


def _fmt(v, spec=".1f", dash="–"):
    return dash if v is None else format(v, spec)


def _check_text(row: MicrobenchRow) -> str:
    return "ok" if row.check.passed else f"FAIL ({row.check.failure or 'err %.1e' % row.check.rel_error})"


def rows_for_display(doc: dict) -> list[dict]:
    out = []
    for r in rows_of(doc):
        if r.skipped is not None:
            continue
        s, vs, detail, rates = r.summary, r.vs_baseline, r.detail or {}, r.rates or {}
        median = s.median_us if s else None
        ref = (r.reference or {}).get("llama_cpp_us")
        out.append(
            {
                "case": r.case,
                "variant": r.variant + ("*" if detail.get("source") == "stand-in" else ""),
                "role": r.role,
                "check": _check_text(r),
                "median": median,
                "p90": s.p90_us if s else None,
                "ci": (s.median_ci_us if s else None) or [None, None],
                "speedup": vs.speedup if vs else None,
                "speedup_ci": (vs.speedup_ci if vs else None) or [None, None],
                "verdict": vs.verdict if vs else None,
                "gbps": rates.get("gbps"),
                "tflops": rates.get("tflops"),
                "pct_floor": r.floor.pct_of_floor if r.floor else None,
                "llama_x": (ref / median) if ref and median else None,
                "llama_us": ref,
                "detail": detail.get("tile", ""),
            }
        )
    return out


def source_notes(doc: dict) -> list[str]:
    """Where declared variants came from, and the variants that did not run (absent from a source)."""
    kinds = doc["config"].get("declared_sources") or {}
    notes = []
    if "stand-in" in kinds.values():
        notes.append("* stand-in: zincbench's copy in the engine's ABI (--engine-src DIR runs the engine's own)")
    engine = [name for name, kind in kinds.items() if "engine" in kind.split("+")]
    if engine:
        notes.append(f"from the engine's source tree: {', '.join(engine)}")
    skipped: dict[tuple[str, str], int] = {}
    for r in rows_of(doc):
        if r.skipped is not None and not r.skipped.startswith("not for this case"):
            skipped[(r.variant, r.skipped)] = skipped.get((r.variant, r.skipped), 0) + 1
    notes += [f"not run: {variant} in {n} case(s): {why}" for (variant, why), n in skipped.items()]
    return notes


def _ci(lo, hi, spec=".1f"):
    return "–" if lo is None or hi is None else f"[{lo:{spec}}, {hi:{spec}}]"


HEADERS = [
    "case",
    "variant",
    "check",
    "median µs",
    "p90 µs",
    "95% CI µs",
    "× vs baseline [CI]",
    "verdict",
    "GB/s",
    "TFLOP/s",
    "% floor",
    "llama.cpp µs (×)",
    "tile",
]


def _cells(d: dict) -> list[str]:
    speed = "–" if d["speedup"] is None else f"{d['speedup']:.2f} {_ci(*d['speedup_ci'], spec='.2f')}"
    llama = (
        "–"
        if d["llama_us"] is None
        else f"{d['llama_us']:.0f} ({d['llama_x']:.1f}×)"
        if d["llama_x"]
        else f"{d['llama_us']:.0f}"
    )
    return [
        d["case"],
        d["variant"],
        d["check"],
        _fmt(d["median"]),
        _fmt(d["p90"]),
        _ci(*d["ci"]),
        speed,
        d["verdict"] or ("baseline" if d["role"] == "baseline" else "–"),
        _fmt(d["gbps"], ".0f"),
        _fmt(d["tflops"], ".1f"),
        _fmt(d["pct_floor"], ".0f"),
        llama,
        d["detail"],
    ]


COMPACT_HEADERS = ["variant", "median µs", "× base", "verdict", "× llama.cpp", "tile"]


def _compact_cells(d: dict) -> list[str]:
    status = d["check"] if d["check"] != "ok" else d["verdict"] or ("baseline" if d["role"] == "baseline" else "–")
    return [d["variant"], _fmt(d["median"]), _fmt(d["speedup"], ".2f"), status, _fmt(d["llama_x"], ".1f"), d["detail"]]


def _print_compact(console: Console, rows: list[dict]) -> None:
    """Narrow terminals: the case on a line of its own, then its variants in a few aligned columns
    (median, speedup, verdict, then the llama.cpp ratio and the tile while they fit; the CIs, rates
    and floors stay in --markdown and --json)."""
    cells = [_compact_cells(d) for d in rows]
    widths = [max(cell_len(c) for c in column) for column in zip(COMPACT_HEADERS, *cells)]

    def table(shown: list[int], header: bool) -> Table:
        t = Table(box=None, show_header=header, padding=(0, 1), show_edge=False)
        for i in shown:
            t.add_column(
                COMPACT_HEADERS[i],
                width=widths[i],
                overflow="fold",
                justify="left" if COMPACT_HEADERS[i] in ("variant", "verdict", "tile") else "right",
            )
        return t

    shown = list(range(len(COMPACT_HEADERS)))
    for optional in ("× llama.cpp", "tile"):
        if fits(console, table(shown, header=True)):
            break
        shown.remove(COMPACT_HEADERS.index(optional))
    console.print(table(shown, header=True))
    for case in dict.fromkeys(d["case"] for d in rows):
        console.print(Text(case, style="bold"), overflow="fold")
        body = table(shown, header=False)
        for d, line in zip(rows, cells):
            if d["case"] != case:
                continue
            if d["check"] != "ok":
                line[3] = f"[red]{escape(line[3])}[/]"
            elif d["verdict"] in VERDICT_STYLE:
                line[3] = f"[{VERDICT_STYLE[d['verdict']]}]{line[3]}[/]"
            body.add_row(*(line[i] for i in shown), style=ROLE_STYLE.get(d["role"], ""))
        console.print(body)


def _when_in_words(when: dict) -> str:
    if not when:
        return "every cell"
    parts = [
        f"{k[4:]} ≥ {v}" if k.startswith("min_") else f"{k[4:]} ≤ {v}" if k.startswith("max_") else f"{k} = {v}"
        for k, v in when.items()
    ]
    return "every cell with " + " and ".join(parts)


def rule_in_words(rule: dict) -> str:
    """The gate rule as a sentence (the document keeps it as data)."""
    if not rule:
        return "no rule recorded"
    return (
        f"{rule.get('candidate')} must be {rule.get('require')} than {rule.get('baseline')} "
        f"(by ≥ {100 * rule.get('threshold', 0):.0f}%, {100 * rule.get('confidence', 0):.0f}% CI) "
        f"in {_when_in_words(rule.get('when') or {})}"
    )


NO_CELLS = "no case of this run is one the gate judges: nothing was decided"


def judged_nothing(verdict: dict) -> bool:
    """The gate was decided over no cell (a document without a verdict was not decided at all)."""
    return "cells" in verdict and not verdict["cells"]


def gate_lines(verdict: dict) -> list[str]:
    """Why a decision is what it is, beyond the rule: the cells that did not meet it, or that there were none."""
    rule = verdict.get("rule") or {}
    if judged_nothing(verdict):
        return [NO_CELLS]
    return [
        f"{cell['case']}: {cell['verdict']}" + (f" ({cell.get('why')})" if cell.get("why") else "")
        for cell in verdict.get("cells", [])
        if cell["verdict"] != rule.get("require")
    ]


def print_microbench(doc: dict, console: Console | None = None) -> None:
    console = console or Console()
    cfg = doc["config"]
    ceil = cfg.get("ceilings") or {}
    gpu = (doc.get("environment") or {}).get("gpu") or {}
    title = (
        f"{cfg['family']} microbench on {gpu.get('name', '?')} — ceilings measured this run: copy "
        f"{ceil.get('copy_gbps', 0):.0f} GB/s, cuBLAS fp16 {ceil.get('fp16_tflops', 0):.0f} TFLOP/s"
    )
    table = Table(title=title, title_justify="left")
    for h in HEADERS:
        table.add_column(h, justify="left" if h in ("case", "variant", "check", "verdict", "tile") else "right")
    rows = rows_for_display(doc)
    last_case = None
    for d in rows:
        cells = _cells(d)
        if d["case"] == last_case:
            cells[0] = ""
        elif last_case is not None:
            table.add_section()
        last_case = d["case"]
        style = ROLE_STYLE.get(d["role"], "")
        cells[7] = (
            f"[{VERDICT_STYLE.get(d['verdict'], '')}]{cells[7]}[/]" if d["verdict"] in VERDICT_STYLE else cells[7]
        )
        if d["check"] != "ok":
            cells[2] = f"[red]{escape(cells[2])}[/red]"
        table.add_row(*cells, style=style)
    if fits(console, table):
        console.print(table)
    else:
        console.print(title, highlight=False)
        _print_compact(console, rows)
    verdict = doc.get("verdict") or {}
    decision = verdict.get("decision", "INCOMPLETE")
    rule = verdict.get("rule") or {}
    color = {"GO": "green", "NO-GO": "red"}.get(decision, "magenta")
    console.print(f"[bold {color}]{decision}[/]: {escape(rule_in_words(rule))}")
    for line in gate_lines(verdict):
        console.print(f"  {line}", markup=False, highlight=False)
    for note in source_notes(doc):
        console.print(note, markup=False, highlight=False)
    print_family_tables(doc, console)


def microbench_markdown(doc: dict) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join("---" for _ in HEADERS) + "|"]
    for d in rows_for_display(doc):
        lines.append("| " + " | ".join(c.replace("|", "/") for c in _cells(d)) + " |")
    verdict = doc.get("verdict") or {}
    lines.append("")
    lines.append(f"**{verdict.get('decision', 'INCOMPLETE')}**: {rule_in_words(verdict.get('rule') or {})}")
    if judged_nothing(verdict):
        lines.append(f"({NO_CELLS})")
    lines += [""] + [f"- {note}" for note in source_notes(doc)] if source_notes(doc) else []
    return "\n\n".join(filter(None, ["\n".join(lines), family_markdown(doc)]))
