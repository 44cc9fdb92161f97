"""The T4 tables after the case table: per layer group and T, each path's launches and median µs, the µs
the candidates save and whether their output bits equal the engine path's; then per model and T, the
projection over the model's layers: T / (sum over its groups of layers x group µs) = the tokens/s of the
part of one prefill these groups are, before and after, beside llama.cpp's whole-model pp tokens/s where
the experiment records them (``llama_cpp_pp_tps``: device -> model -> T).
"""

from __future__ import annotations

from collections import defaultdict

from rich.console import Console

from zincbench.report import MAPPING
from zincbench.show.stage_table import by_tokens, llama_pp_tps, rate
from zincbench.show.titled_tables import TitledTable, markdown_tables, print_tables

ENGINE, A, B, T1, ZINC = "engine_path", "norm_f16", "norm_f16_shared", "t1_fused", "engine"
GROUP_TITLE = "T4 norm + GEMM groups, median µs"
GROUP_HEADERS = ["group", "T", "launches", "eng", "A", "B", "T1", "zinc", "A saves", "B saves", "bits"]
PROJECTION_TITLE = "Norm + GEMM groups of one prefill (group x layers); llama.cpp: whole model"
PROJECTION_HEADERS = ["model", "T", "groups", "eng tok/s", "A tok/s", "B tok/s", "B saves ms", "llama pp tok/s"]
NOTES = [
    "eng: engine_path (rms_norm, per GEMM dequant + f32_to_f16 + cuBLAS; our copies). A: norm_f16 (the norm "
    "writes fp16). B: norm_f16_shared (A + one dequant launch per weight type). T1: T1's fused GEMM. zinc: "
    "the engine path on the engine's own kernels (--engine-src), else our copies. launches: eng/A/B.",
    "bits: A, B, zinc against eng's output, = bit-identical, x differs, - not run. A candidate that differs "
    "fails its check and is never GO.",
]

# What these tables read of a document beyond its typed rows (report.check_fields; see stage_table.FIELDS):
# every row's case params name its model, group, T and the model's layers with that group. (detail.launches
# is shown as text, whatever it is: a count on the declared paths, the launches themselves on `engine`.)
FIELDS = {
    "results.*.params": (dict,),
    "results.*.params.model": (str,),
    "results.*.params.group": (str,),
    "results.*.params.tokens": (int,),
    "results.*.params.layers": (int,),
    "results.*.detail": MAPPING,
    "results.*.detail.bits": MAPPING,
    "results.*.detail.bits.identical": (bool,),
}
REQUIRED = (
    "results.*.params.model",
    "results.*.params.group",
    "results.*.params.tokens",
    "results.*.params.layers",
    "results.*.detail.bits.identical",
)


def _fmt(v, spec=".0f") -> str:
    return "–" if v is None else format(v, spec)


def _rows(doc: dict) -> dict:
    """(case, variant) -> the row dict."""
    return {(r["case"], r["variant"]): r for r in doc.get("results", [])}


def _median(row: dict | None) -> float | None:
    median = ((row or {}).get("summary") or {}).get("median_us")
    return None if median is None else float(median)


def _bits(row: dict | None) -> str:
    bits = ((row or {}).get("detail") or {}).get("bits")
    return "-" if bits is None else ("=" if bits["identical"] else "x")


def group_rows(doc: dict) -> list[list[str]]:
    rows = _rows(doc)
    out = []
    for case in dict.fromkeys(c for c, _ in rows):
        p = next(r for (c, _), r in rows.items() if c == case)["params"]
        eng, a, b = (rows.get((case, v)) for v in (ENGINE, A, B))
        launches = "/".join(str(((r or {}).get("detail") or {}).get("launches", "–")) for r in (eng, a, b))
        saves = [
            _fmt(_median(eng) - _median(r)) if _median(eng) is not None and _median(r) is not None else "–"
            for r in (a, b)
        ]
        out.append(
            [
                f"{p['model']}.{p['group']}",
                str(p["tokens"]),
                launches,
                *(_fmt(_median(rows.get((case, v)))) for v in (ENGINE, A, B, T1, ZINC)),
                *saves,
                "".join(_bits(rows.get((case, v))) for v in (A, B, ZINC)),
            ]
        )
    return out


def projection_rows(doc: dict) -> list[list[str]]:
    """Per model and T with every group timed on eng, A and B: the groups' part of one prefill in tokens/s."""
    rows = _rows(doc)
    pp = {model: by_tokens(table) for model, table in llama_pp_tps(doc).items()}
    totals: dict = defaultdict(lambda: defaultdict(float))
    groups: dict = defaultdict(int)
    missing = set()
    for case in dict.fromkeys(c for c, _ in rows):
        p = next(r for (c, _), r in rows.items() if c == case)["params"]
        key = (p["model"], p["tokens"])
        groups[key] += 1
        for v in (ENGINE, A, B):
            median = _median(rows.get((case, v)))
            if median is None:
                missing.add(key)
            else:
                totals[key][v] += p["layers"] * median
    out = []
    for key in sorted(k for k in groups if k not in missing):
        model, t = key
        total = totals[key]
        out.append(
            [
                model,
                str(t),
                str(groups[key]),
                *(rate(t, total[v]) for v in (ENGINE, A, B)),
                _fmt((total[ENGINE] - total[B]) / 1e3, ".2f"),
                _fmt(pp.get(model, {}).get(t)),
            ]
        )
    return out


def _tables(doc: dict) -> list[TitledTable]:
    out = []
    groups = group_rows(doc)
    if groups:
        out.append((GROUP_TITLE, GROUP_HEADERS, groups, NOTES))
    projection = projection_rows(doc)
    if projection:
        out.append((PROJECTION_TITLE, PROJECTION_HEADERS, projection, []))
    return out


def print_view(doc: dict, console: Console) -> None:
    print_tables(_tables(doc), console)


def markdown_view(doc: dict) -> str:
    return markdown_tables(_tables(doc))
