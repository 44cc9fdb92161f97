"""Render a microbench document: one rich table (or markdown) with every case x variant, the
ceilings it was judged against, and the gate decision."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

ROLE_STYLE = {"baseline": "cyan", "candidate": "bold", "ceiling": "dim", "reference": "dim"}
VERDICT_STYLE = {"faster": "green", "slower": "red", "same": "yellow", "inconclusive": "magenta"}


def _fmt(v, spec=".1f", dash="–"):
    return dash if v is None else format(v, spec)


def rows_for_display(doc: dict) -> list[dict]:
    out = []
    for r in doc["results"]:
        if "skipped" in r:
            continue
        s = r.get("summary") or {}
        vs = r.get("vs_baseline") or {}
        ci = s.get("median_ci_us") or [None, None]
        sci = vs.get("speedup_ci") or [None, None]
        ref = (r.get("reference") or {}).get("llama_cpp_us")
        out.append({
            "case": r["case"], "variant": r["variant"], "role": r["role"],
            "check": "ok" if r["check"]["passed"] else f"FAIL ({r['check'].get('failure') or 'err %.1e' % r['check']['rel_error']})",
            "rel_err": r["check"]["rel_error"],
            "median": s.get("median_us"), "p90": s.get("p90_us"), "ci": ci,
            "speedup": vs.get("speedup"), "speedup_ci": sci, "verdict": vs.get("verdict"),
            "gbps": (r.get("rates") or {}).get("gbps"), "tflops": (r.get("rates") or {}).get("tflops"),
            "pct_floor": (r.get("floor") or {}).get("pct_of_floor"), "floor_us": (r.get("floor") or {}).get("us"),
            "llama_x": (ref / s["median_us"]) if ref and s.get("median_us") else None, "llama_us": ref,
            "detail": (r.get("detail") or {}).get("tile", ""),
        })
    return out


def _ci(lo, hi, spec=".1f"):
    return "–" if lo is None or hi is None else f"[{lo:{spec}}, {hi:{spec}}]"


HEADERS = ["case", "variant", "check", "median µs", "p90 µs", "95% CI µs", "× vs baseline [CI]", "verdict",
           "GB/s", "TFLOP/s", "% floor", "llama.cpp µs (×)", "tile"]


def _cells(d: dict) -> list[str]:
    speed = "–" if d["speedup"] is None else f"{d['speedup']:.2f} {_ci(*d['speedup_ci'], spec='.2f')}"
    llama = "–" if d["llama_us"] is None else f"{d['llama_us']:.0f} ({d['llama_x']:.1f}×)" if d["llama_x"] else f"{d['llama_us']:.0f}"
    return [d["case"], d["variant"], d["check"], _fmt(d["median"]), _fmt(d["p90"]), _ci(*d["ci"]), speed,
            d["verdict"] or ("baseline" if d["role"] == "baseline" else "–"), _fmt(d["gbps"], ".0f"),
            _fmt(d["tflops"], ".1f"), _fmt(d["pct_floor"], ".0f"), llama, d["detail"]]


def print_microbench(doc: dict, console: Console | None = None) -> None:
    console = console or Console()
    cfg = doc["config"]
    ceil = cfg.get("ceilings") or {}
    gpu = (doc.get("environment") or {}).get("gpu") or {}
    title = (f"{cfg['family']} microbench on {gpu.get('name', '?')} — ceilings measured this run: copy "
             f"{ceil.get('copy_gbps', 0):.0f} GB/s, cuBLAS fp16 {ceil.get('fp16_tflops', 0):.0f} TFLOP/s")
    table = Table(title=title, title_justify="left")
    for h in HEADERS:
        table.add_column(h, justify="left" if h in ("case", "variant", "check", "verdict", "tile") else "right")
    last_case = None
    for d in rows_for_display(doc):
        cells = _cells(d)
        if d["case"] == last_case:
            cells[0] = ""
        elif last_case is not None:
            table.add_section()
        last_case = d["case"]
        style = ROLE_STYLE.get(d["role"], "")
        cells[7] = f"[{VERDICT_STYLE.get(d['verdict'], '')}]{cells[7]}[/]" if d["verdict"] in VERDICT_STYLE else cells[7]
        if d["check"] != "ok":
            cells[2] = f"[red]{cells[2]}[/red]"
        table.add_row(*cells, style=style)
    console.print(table)
    verdict = doc.get("verdict") or {}
    decision = verdict.get("decision", "INCOMPLETE")
    rule = verdict.get("rule") or {}
    color = {"GO": "green", "NO-GO": "red"}.get(decision, "magenta")
    console.print(f"[bold {color}]{decision}[/]: {rule.get('candidate')} must be {rule.get('require')} than "
                  f"{rule.get('baseline')} (≥{100 * rule.get('threshold', 0):.0f}% and {100 * rule.get('confidence', 0):.0f}% CI) "
                  f"in every cell where {rule.get('when')}")
    for cell in verdict.get("cells", []):
        if cell["verdict"] != rule.get("require"):
            console.print(f"  {cell['case']}: {cell['verdict']}" + (f" ({cell.get('why')})" if cell.get("why") else ""))


def microbench_markdown(doc: dict) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join("---" for _ in HEADERS) + "|"]
    for d in rows_for_display(doc):
        lines.append("| " + " | ".join(c.replace("|", "/") for c in _cells(d)) + " |")
    verdict = doc.get("verdict") or {}
    lines.append("")
    lines.append(f"**{verdict.get('decision', 'INCOMPLETE')}** — rule: {verdict.get('rule')}")
    return "\n".join(lines)
