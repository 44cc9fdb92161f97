"""The T3 tables after the case table: the scans side by side with flash-linear-attention (the anchor the
candidate is measured against, in the same run), then the share table: per model and T, where the SSM
layer's time goes (scan, conv1d, norm, projections) and the scan's share of it, with the engine's scan
and with the chunked candidate.

Read from a t3 microbench document (the ``engine`` row of every stage case, the scan variants of the
scan case); the layer is the sum of the stages timed there (its rms_norm and residual add are not).
"""

from __future__ import annotations

from rich.console import Console

from zincbench.bench.rows import rows_of
from zincbench.bench.t3_ssm import PROJECTIONS, SSM_STAGES
from zincbench.show.titled_tables import TitledTable, markdown_tables, print_tables

# What these tables read of a document beyond its typed rows (report.check_fields; see stage_table.FIELDS):
# every row's case params name its model, T and the layer's stage.
FIELDS = {
    "results.*.params": (dict,),
    "results.*.params.model": (str,),
    "results.*.params.tokens": (int,),
    "results.*.params.stage": (str,),
}
REQUIRED = ("results.*.params.model", "results.*.params.tokens", "results.*.params.stage")

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


SCAN_TITLE = "Scans vs flash-linear-attention, median µs"
SCAN_VARIANTS = ("engine_warp", "engine", "chunked", "fla", "fla_bf16")
SCAN_HEADERS = ["model", "T", "zinc", "copy", "chunk", "fla", "fla16", "÷fla", "÷fla16"]
SCAN_NOTES = [
    "zinc: ssm_delta_net_warp as declared in engine_zinc.yaml (the engine's own kernel with --engine-src, "
    "else our copy); copy: our copy of it (the gate's baseline). chunk: the candidate (tf32 x3 split). "
    "fla, fla16: chunk_gated_delta_rule with fp32 / bf16 "
    "q, k, v, timed as CUDA graph replays. ÷fla, ÷fla16: chunk's time over fla's (below 1: we are "
    "faster)."
]


def _medians(doc: dict, variants) -> dict:
    """(model, T, stage, variant) -> median µs (a float: the tables add and divide them)."""
    return {
        (r.params["model"], r.params["tokens"], r.params["stage"], r.variant): (
            None if r.summary.median_us is None else float(r.summary.median_us)
        )
        for r in rows_of(doc)
        if r.summary is not None and r.variant in variants
    }


def scan_rows(doc: dict) -> list[dict]:
    """One dict per (model, T) with a timed scan variant: median µs per scan variant (None where absent)."""
    medians = _medians(doc, SCAN_VARIANTS)
    out = []
    for model, t in dict.fromkeys((m, t) for m, t, stage, _ in medians if stage == "scan"):
        row = {"model": model, "tokens": t, **{v: medians.get((model, t, "scan", v)) for v in SCAN_VARIANTS}}
        for anchor in ("fla", "fla_bf16"):
            row[f"vs_{anchor}"] = row["chunked"] / row[anchor] if row["chunked"] and row[anchor] else None
        out.append(row)
    return out


def _us(v) -> str:
    return "–" if v is None else f"{v:.0f}"


def _scan_cells(d: dict) -> list[str]:
    def ratio(v):
        return "–" if v is None else f"{v:.2f}×"

    return [
        d["model"],
        str(d["tokens"]),
        *(_us(d[v]) for v in SCAN_VARIANTS),
        ratio(d["vs_fla"]),
        ratio(d["vs_fla_bf16"]),
    ]


def share_rows(doc: dict) -> list[dict]:
    """One dict per (model, T): median µs per stage (None where not timed), the layer and the shares."""
    medians = _medians(doc, ("engine", "chunked"))
    out = []
    for model, t in dict.fromkeys((m, t) for m, t, _, _ in medians):
        stage = {s: medians.get((model, t, s, "engine")) for s in SSM_STAGES + PROJECTIONS}
        projections = [stage[s] for s in PROJECTIONS]
        proj = sum(projections) if None not in projections else None
        parts = [stage["scan"], stage["conv1d"], stage["norm"], proj]
        layer = sum(parts) if None not in parts else None
        chunked = medians.get((model, t, "scan", "chunked"))
        with_chunked = layer - stage["scan"] + chunked if layer and chunked else None  # the layer, chunked scan
        out.append(
            {
                "model": model,
                "tokens": t,
                "scan": stage["scan"],
                "chunked": chunked,
                "conv1d": stage["conv1d"],
                "norm": stage["norm"],
                "proj": proj,
                "layer": layer,
                "share": stage["scan"] / layer if layer else None,
                "share_chunked": chunked / with_chunked if with_chunked else None,
            }
        )
    return out


def _cells(d: dict) -> list[str]:
    def pct(v):
        return "–" if v is None else f"{100 * v:.0f}%"

    return [
        d["model"],
        str(d["tokens"]),
        *(_us(d[k]) for k in ("scan", "chunked", "conv1d", "norm", "proj", "layer")),
        f"{pct(d['share'])}→{pct(d['share_chunked'])}",
    ]


def _tables(doc: dict) -> list[TitledTable]:
    """(title, headers, rows, notes) of each table this document has rows for."""
    tables = [
        (SCAN_TITLE, SCAN_HEADERS, [_scan_cells(d) for d in scan_rows(doc)], SCAN_NOTES),
        (TITLE, HEADERS, [_cells(d) for d in share_rows(doc)], NOTES),
    ]
    return [table for table in tables if table[2]]


def print_view(doc: dict, console: Console) -> None:
    print_tables(_tables(doc), console)


def markdown_view(doc: dict) -> str:
    return markdown_tables(_tables(doc))
