"""Golden test: the rows of every document recorded under results/ load as their typed row (MicrobenchRow,
validate's ModelOutcome, ab's ABRun and ScoreboardRow, aa's three row types, a reference's TokenRow,
profile.rows' one type per table) and write back byte for byte; every microbench document re-judges to
its recorded decision (or, when the run never measured a variant today's rule names, by the rule it was
recorded under) and renders the same table text as when the fixtures were written; ``zincbench report``
of each folder shows the same tables too.

The fixtures in tests/fixtures/golden/ were generated from the code before the typed-row refactor;
regenerate them only for an intended change of the tables: ``python3 tests/test_golden_records.py``.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from rich.console import Console

from zincbench.inputs import read_text
from zincbench.records import DOCUMENT_SUFFIXES

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "fixtures" / "golden"


def load(path: Path) -> dict:
    """A recorded document, as committed: JSON, or a gzip of it (*.json.gz)."""
    return json.loads(read_text(path))


RECORDED = {
    p: load(p).get("kind") for p in sorted((ROOT / "results").rglob("*.json*")) if p.name.endswith(DOCUMENT_SUFFIXES)
}
DOCUMENTS = [p for p, kind in RECORDED.items() if kind == "microbench"]
WIDTHS = (80, 200)
TYPED_KINDS = ("microbench", "validate", "ab", "profile")
TYPED = [p for p, kind in RECORDED.items() if kind in TYPED_KINDS]


def row_type(kind: str):
    from zincbench.bench.rows import MicrobenchRow
    from zincbench.profile.rows import ProfileRow
    from zincbench.runs.ab_rows import ABRun
    from zincbench.runs.validate import ModelOutcome

    return {"microbench": MicrobenchRow, "validate": ModelOutcome, "ab": ABRun, "profile": ProfileRow}[kind]


def _stem(path: Path) -> str:
    """The fixtures' name of a document: its folders under results/ and its name without .json (or .json.gz)."""
    relative = path.relative_to(ROOT / "results")
    return "_".join((*relative.parent.parts, relative.name.removesuffix(".gz").removesuffix(".json")))


def rendered(path: Path) -> dict[str, str]:
    """The texts a recorded document renders to: the terminal table at each width, and markdown."""
    from zincbench.show.microbench_table import microbench_markdown, print_microbench

    doc = load(path)
    return _texts(_stem(path), lambda console: print_microbench(doc, console), microbench_markdown(doc))


def report_texts(folder: Path) -> dict[str, str]:
    """``zincbench report`` of a folder's recorded microbench documents: terminal at each width, and markdown
    (paths relative to the repository, as the CLI is run from there)."""
    from zincbench.report import build_report
    from zincbench.show.report_tables import print_report, to_markdown

    paths = [str(p.relative_to(ROOT)) for p in DOCUMENTS if p.parent == folder]
    merged = build_report(paths)
    stem = "report_" + _stem(folder / "x.json")[:-2]
    return _texts(stem, lambda console: print_report(merged, console), to_markdown(merged))


def _texts(stem: str, render, markdown: str) -> dict[str, str]:
    """``render(console)`` captured at each terminal width, and the markdown, keyed by fixture name."""
    out = {}
    for width in WIDTHS:
        buffer = io.StringIO()
        render(Console(file=buffer, width=width, color_system=None, force_terminal=False))
        out[f"{stem}.w{width}.txt"] = buffer.getvalue()
    out[f"{stem}.md.txt"] = markdown + "\n"
    return out


FOLDERS = sorted({p.parent for p in DOCUMENTS})


def rejudged(path: Path) -> dict:
    """What the gate's re-judging makes of a recorded document: status, reason and cells."""
    from zincbench.runs.gate import rejudge_document

    judged = rejudge_document(load(path), str(path.relative_to(ROOT)), base=ROOT)
    return {
        "status": judged.status.value,
        "reason": judged.reason,
        "cells": judged.details["cells"],
        "rule": judged.details["rule"],
    }


def test_every_recorded_microbench_document_is_covered():
    assert len(DOCUMENTS) >= 10  # results/h200, h200/engine, h200/repro, h200/gguf, h200-x2
    assert {p.parent.name for p in DOCUMENTS} >= {"h200", "engine", "repro", "h200-x2"}


def test_every_typed_row_kind_has_a_recorded_document():
    assert {RECORDED[p] for p in TYPED} == set(TYPED_KINDS)


@pytest.mark.parametrize("path", DOCUMENTS, ids=_stem)
def test_microbench_rows_load_through_the_schema_check(path):
    from zincbench.bench.rows import rows_of

    doc = load(path)
    assert json.dumps([row.to_json() for row in rows_of(doc)]) == json.dumps(doc["results"])


@pytest.mark.parametrize("path", TYPED, ids=_stem)
def test_rows_load_and_write_back_byte_for_byte(path):
    doc = load(path)
    loaded = [row_type(doc["kind"]).from_json(row) for row in doc["results"]]
    assert json.dumps([row.to_json() for row in loaded]) == json.dumps(doc["results"])


@pytest.mark.parametrize("path", [p for p in TYPED if RECORDED[p] == "ab"], ids=_stem)
def test_ab_scoreboard_rows_load_and_write_back_byte_for_byte(path):
    from zincbench.runs.ab_rows import ScoreboardRow

    models = load(path)["verdict"]["models"]
    assert json.dumps([ScoreboardRow.from_json(model).to_json() for model in models]) == json.dumps(models)


@pytest.mark.parametrize(
    "path",
    [p for p, kind in RECORDED.items() if kind == "aa"],
    ids=_stem,
)
def test_aa_rows_load_and_write_back_byte_for_byte(path):
    from zincbench.runs.aa_rows import aa_row

    rows = load(path)["results"]
    assert json.dumps([aa_row(row).to_json() for row in rows]) == json.dumps(rows)


@pytest.mark.parametrize(
    "path",
    [p for p, kind in RECORDED.items() if kind == "reference"],
    ids=_stem,
)
def test_references_load_and_write_back_byte_for_byte(path):
    from zincbench.records import to_jsonable
    from zincbench.reference_store import Reference

    doc = load(path)
    written = to_jsonable(Reference.from_document(doc, str(path)).to_document())
    assert json.dumps([written["config"], written["results"]]) == json.dumps([doc["config"], doc["results"]])


@pytest.mark.parametrize("path", DOCUMENTS, ids=_stem)
def test_renders_the_same_tables(path):
    for name, text in rendered(path).items():
        assert text == (GOLDEN / name).read_text(), name


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: str(f.relative_to(ROOT)))
def test_the_report_shows_the_same_tables(folder, monkeypatch):
    monkeypatch.chdir(ROOT)
    for name, text in report_texts(folder).items():
        assert text == (GOLDEN / name).read_text(), name


@pytest.mark.parametrize("path", DOCUMENTS, ids=_stem)
def test_rejudges_to_the_recorded_decision(path):
    doc = load(path)
    judged = rejudged(path)
    assert judged == json.loads((GOLDEN / f"{_stem(path)}.rejudged.json").read_text())
    assert judged["reason"].split(":")[0] == doc["verdict"]["decision"]
    # Today's rule is the recorded one, or the run never measured today's pair and was judged by its own.
    assert judged["rule"] == doc["verdict"]["rule"]


if __name__ == "__main__":
    import os

    os.chdir(ROOT)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for folder in FOLDERS:
        for name, text in report_texts(folder).items():
            (GOLDEN / name).write_text(text)
    for document in DOCUMENTS:
        for name, text in rendered(document).items():
            (GOLDEN / name).write_text(text)
        (GOLDEN / f"{_stem(document)}.rejudged.json").write_text(json.dumps(rejudged(document), indent=1) + "\n")
    print(f"wrote fixtures to {GOLDEN}", file=sys.stderr)
