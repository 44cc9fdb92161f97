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

from collections import defaultdict

from rich.console import Console

from zincbench.show.fit import print_in_column_groups

SHORT = {"baseline": "eng", "candidate": "ours"}


def _fmt(v, spec=".0f") -> str:
    return "–" if v is None else format(v, spec)


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
        if variant in (baseline, candidate) and (row.get("detail") or {}).get("stages_us"):
            tokens = row["params"].get("tokens")
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
    device = ((doc.get("environment") or {}).get("gpu") or {}).get("name", "")
    pp = {}
    for name, table in ((doc.get("config") or {}).get("settings") or {}).get("llama_cpp_pp_tps", {}).items():
        if name in device:
            pp = {int(t): v for t, v in table.items()}
    totals: dict[tuple, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    layers: dict[tuple, int] = defaultdict(int)
    missing = set()
    cases = {r["case"]: r["params"] for r in doc.get("results", [])}
    for case, p in cases.items():
        key = (p.get("shape"), p.get("routing"), p.get("tokens"))
        if not p.get("moe_layers"):
            continue
        layers[key] += p["moe_layers"]
        for variant in (baseline, candidate):
            row = timed.get((case, variant))
            if row is None:
                missing.add(key)
            else:
                totals[key][variant] += p["moe_layers"] * row["summary"]["median_us"]
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
                _fmt(t / (before * 1e-6)),
                _fmt(t / (after * 1e-6)),
                _fmt((before - after) / 1e3, ".2f"),
                _fmt(pp.get(t)),
            ]
        )
    return headers, rows


def print_stage_tables(doc: dict, console: Console | None = None) -> None:
    console = console or Console()
    for title, headers, rows in stage_tables(doc):
        print_in_column_groups(console, f"stages: {title}", headers, rows, keys=1, right=range(1, len(headers)))
    headers, rows = projection(doc)
    if rows:
        print_in_column_groups(
            console,
            "MoE part of one prefill (block x MoE layers); llama.cpp: whole model",
            headers,
            rows,
            keys=2,
            right=range(1, len(headers)),
        )


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


def _markdown(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    return "\n".join(lines)
