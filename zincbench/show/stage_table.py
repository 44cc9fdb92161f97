"""Per-stage times of variants that record them (``detail["stages_us"]``, e.g. the `layer` family's
MoE block), and the prefill projection of a block's time: fits 80 columns (show.fit), or markdown.

Stage table: one per case family (every case key but its token count), stages as rows, a column per
T and variant (the gate's baseline and candidate), then the whole block's median and its % of the
block's floor. Projection: per routing and T, the MoE part of one prefill of T tokens takes
sum over down types of (MoE layers with that type x the block's median); T / that time is the MoE
part's tokens/s, before (baseline) and after (candidate), beside llama.cpp's whole-model pp tokens/s
where the experiment records them (``llama_cpp_pp_tps``).
"""

from __future__ import annotations

import sys
from collections import defaultdict

from rich.console import Console
from rich.markup import escape

from zincbench.report import MAPPING, NUMBER, TEXT
from zincbench.show.fit import print_in_column_groups

SHORT = {"baseline": "eng", "candidate": "ours"}

# What these tables read of a document beyond its typed rows, with the JSON types allowed (report.check_fields:
# `report --family-tables` checks a document read from a file against them before showing it). A stage row
# needs its T (params.tokens) and a MoE case its shape, routing and T: rows without them are left out.
FIELDS = {
    "verdict.rule": MAPPING,
    "verdict.rule.baseline": TEXT,
    "verdict.rule.candidate": TEXT,
    "results.*.params": (dict,),
    "results.*.params.tokens": (int,),
    "results.*.params.shape": (str,),
    "results.*.params.routing": (str,),
    "results.*.params.moe_layers": (int,),
    "results.*.detail": MAPPING,
    "results.*.detail.stages_us": (list, type(None)),
    "results.*.detail.stages_us.*": (dict,),
    "results.*.detail.stages_us.*.stage": (str,),
    "results.*.detail.stages_us.*.median_us": NUMBER,
    "results.*.floor": MAPPING,
    "results.*.floor.pct_of_floor": NUMBER,
}
REQUIRED = ("results.*.detail.stages_us.*.stage", "results.*.detail.stages_us.*.median_us")


def _fmt(v, spec=".0f") -> str:
    return "–" if v is None else format(v, spec)


def rate(tokens: int, us: float) -> str:
    """T tokens in ``us`` µs as tokens/s ("–" for no time)."""
    seconds = us * 1e-6
    return _fmt(tokens / seconds) if seconds else "–"


def llama_pp_tps(doc: dict) -> dict:
    """The experiment's ``llama_cpp_pp_tps`` entry for the run's device (the first whose name is in the GPU's
    name), {} without one. Its shape is the family's: T -> tok/s (layer), model -> T -> tok/s (t4)."""
    device = ((doc.get("environment") or {}).get("gpu") or {}).get("name") or ""
    settings = (doc.get("config") or {}).get("settings")
    tables = settings.get("llama_cpp_pp_tps") if isinstance(settings, dict) else None
    for name, table in tables.items() if isinstance(tables, dict) else ():
        if name in device and isinstance(table, dict):
            return table
    return {}


def by_tokens(table) -> dict[int, float]:
    """{T: tok/s} of a recorded table: the entries with a token count for key and a number for value (these
    are reference numbers copied into the experiment; an entry of another shape is left out, "–")."""
    return {
        int(t): float(v)
        for t, v in (table.items() if isinstance(table, dict) else ())
        if t.isdecimal()
        and len(t) <= 12  # int() refuses a 4300-digit text; no prompt is a trillion tokens
        and isinstance(v, (int, float))
        and not isinstance(v, bool)
        and abs(v) <= sys.float_info.max
    }


def _pair(doc: dict) -> tuple[str | None, str | None]:
    rule = (doc.get("verdict") or {}).get("rule") or {}
    return rule.get("baseline"), rule.get("candidate")


def _timed(doc: dict) -> dict:
    """(case, variant) -> the row, for rows with a median."""
    return {(r["case"], r["variant"]): r for r in doc.get("results", []) if (r.get("summary") or {}).get("median_us")}


def stage_tables(doc: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, headers, rows) per case family with recorded stages."""
    baseline, candidate = _pair(doc)
    timed = _timed(doc)
    groups: dict[str, list[dict]] = defaultdict(list)
    for (case, variant), row in timed.items():
        tokens = row["params"].get("tokens")
        if variant in (baseline, candidate) and (row.get("detail") or {}).get("stages_us") and tokens is not None:
            groups[case.replace(f"-T{tokens}", "")].append(row)
    out = []
    for title, rows in groups.items():
        by_column = {(r["params"]["tokens"], r["variant"]): r for r in rows}
        columns = sorted(by_column, key=lambda tv: (tv[0], tv[1] != baseline))  # per T: baseline first
        stages = list(
            dict.fromkeys(
                s["stage"]
                for r in sorted(rows, key=lambda r: r["variant"] != baseline)
                for s in r["detail"]["stages_us"]
            )
        )
        headers = ["stage (µs)"] + [f"T{t} {SHORT['baseline' if v == baseline else 'candidate']}" for t, v in columns]
        body = []
        for stage in stages:
            cells = [stage]
            for column in columns:
                times = {x["stage"]: x["median_us"] for x in by_column[column]["detail"]["stages_us"]}
                cells.append(_fmt(times.get(stage)))
            body.append(cells)
        body.append(["block"] + [_fmt(by_column[c]["summary"]["median_us"]) for c in columns])
        body.append(["% of floor"] + [_fmt((by_column[c].get("floor") or {}).get("pct_of_floor")) for c in columns])
        out.append((title, headers, body))
    return out


def projection(doc: dict) -> tuple[list[str], list[list[str]]]:
    """(headers, rows): per shape, routing and T, the MoE part's prefill tokens/s before and after."""
    baseline, candidate = _pair(doc)
    timed = _timed(doc)
    totals: dict[tuple, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    layers: dict[tuple, int] = defaultdict(int)
    missing = set()
    cases = {r["case"]: r["params"] for r in doc.get("results", [])}
    for case, p in cases.items():
        key = (p.get("shape"), p.get("routing"), p.get("tokens"))
        if not p.get("moe_layers") or None in key:
            continue
        layers[key] += p["moe_layers"]
        for variant in (baseline, candidate):
            row = timed.get((case, variant))
            if row is None:
                missing.add(key)
            else:
                totals[key][variant] += p["moe_layers"] * float(row["summary"]["median_us"])
    pp = by_tokens(llama_pp_tps(doc)) if totals else {}  # read only where there are MoE cases: t4's has models
    headers = ["model · routing", "T", "layers", "eng tok/s", "ours tok/s", "saved ms", "llama.cpp pp tok/s"]
    rows = []
    for key in sorted(k for k in totals if k not in missing):
        shape, routing, t = key
        before, after = totals[key][baseline], totals[key][candidate]
        rows.append(
            [
                f"{shape} · {routing}",
                str(t),
                str(layers[key]),
                rate(t, before),
                rate(t, after),
                _fmt((before - after) / 1e3, ".2f"),
                _fmt(pp.get(t)),
            ]
        )
    return headers, rows


def print_stage_tables(doc: dict, console: Console | None = None) -> None:
    console = console or Console()
    for title, headers, rows in stage_tables(doc):
        print_in_column_groups(
            console, escape(f"stages: {title}"), headers, _escaped(rows), keys=1, right=range(1, len(headers))
        )
    headers, rows = projection(doc)
    if rows:
        print_in_column_groups(
            console,
            "MoE part of one prefill (block x MoE layers); llama.cpp: whole model",
            headers,
            _escaped(rows),
            keys=2,
            right=range(1, len(headers)),
        )


def _escaped(rows: list[list[str]]) -> list[list[str]]:
    """Cells as rich markup: a name from the document is text, whatever brackets it has."""
    return [[escape(cell) for cell in row] for row in rows]


def stage_markdown(doc: dict) -> str:
    parts = []
    for title, headers, rows in stage_tables(doc):
        parts.append(f"**stages: {title}**\n\n" + _markdown(headers, rows))
    headers, rows = projection(doc)
    if rows:
        parts.append(
            "**MoE part of one prefill** (block × MoE layers; llama.cpp: whole model)\n\n" + _markdown(headers, rows)
        )
    return "\n\n".join(parts)


# The names of a family view (microbench_table.family_parts): the stage tables follow any family's own.
print_view, markdown_view = print_stage_tables, stage_markdown


def _markdown(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    return "\n".join(lines)
