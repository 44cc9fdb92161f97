"""The T3 share table: per model and T, where the SSM layer's time goes (scan, conv1d, norm,
projections) and the scan's share of it, with the engine's scan and with the chunked candidate.

Read from a t3 microbench document (the ``engine`` row of every stage case, the ``chunked`` row of
the scan case); the layer is the sum of the stages timed there (its rms_norm and residual add are not).
"""

from __future__ import annotations

from rich.console import Console

from zincbench.bench.rows import rows_of
from zincbench.bench.t3_ssm import PROJECTIONS, SSM_STAGES
from zincbench.show.fit import print_in_column_groups

TITLE = "SSM layer by stage, median µs"
HEADERS = ["model", "T", "scan", "chunked", "conv1d", "norm", "proj", "layer", "share"]
NOTES = [
    "layer = scan + conv1d + norm + proj as timed in this run (its rms_norm and residual add are not).",
    "scan: the engine's default ssm_delta_net_warp. share: the scan's share of the layer, with the engine's "
    "scan -> with the chunked scan in its place.",
    "proj = attn_qkv + attn_gate + ssm_alpha_beta + ssm_out, each timed in this run through the T1 family's "
    "engine path (dequant -> fp16, f32_to_f16, cuBLAS fp16 GEMM) on Q4_K weights of its shape; the engine's "
    "attn_qkv / ssm_out are Q5_K and alpha / beta run as F32 matvecs (dmmv_f32_batched).",
]


def share_rows(doc: dict) -> list[dict]:
    """One dict per (model, T): median µs per stage (None where not timed), the layer and the shares."""
    medians: dict[tuple, float] = {}
    for r in rows_of(doc):
        if r.summary is not None and r.variant in ("engine", "chunked"):
            p = r.params
            medians[(p["model"], p["tokens"], p["stage"], r.variant)] = r.summary.median_us
    out = []
    for model, t in dict.fromkeys((m, t) for m, t, _, _ in medians):
        stage = {s: medians.get((model, t, s, "engine")) for s in SSM_STAGES + PROJECTIONS}
        projections = [stage[s] for s in PROJECTIONS]
        proj = sum(projections) if None not in projections else None
        parts = [stage["scan"], stage["conv1d"], stage["norm"], proj]
        layer = sum(parts) if None not in parts else None
        chunked = medians.get((model, t, "scan", "chunked"))
        out.append({"model": model, "tokens": t, "scan": stage["scan"], "chunked": chunked,
                    "conv1d": stage["conv1d"], "norm": stage["norm"], "proj": proj, "layer": layer,
                    "share": stage["scan"] / layer if layer else None,
                    "share_chunked": chunked / (layer - stage["scan"] + chunked) if layer and chunked else None})
    return out


def _cells(d: dict) -> list[str]:
    def us(v):
        return "–" if v is None else f"{v:.0f}"

    def pct(v):
        return "–" if v is None else f"{100 * v:.0f}%"

    return [d["model"], str(d["tokens"]), us(d["scan"]), us(d["chunked"]), us(d["conv1d"]), us(d["norm"]),
            us(d["proj"]), us(d["layer"]), f"{pct(d['share'])}→{pct(d['share_chunked'])}"]


def print_view(doc: dict, console: Console) -> None:
    rows = [_cells(d) for d in share_rows(doc)]
    if not rows:
        return
    print_in_column_groups(console, TITLE, HEADERS, rows, keys=2,
                           right=range(1, len(HEADERS)))
    for note in NOTES:
        console.print(note, markup=False, highlight=False)


def markdown_view(doc: dict) -> str:
    rows = [_cells(d) for d in share_rows(doc)]
    if not rows:
        return ""
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join("---" for _ in HEADERS) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join([f"### {TITLE}", "", *lines, "", *(f"- {n}" for n in NOTES)])
