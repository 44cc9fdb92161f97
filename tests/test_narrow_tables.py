"""A CI log is 80 columns: every table, rendered from the documents recorded on the H200, must keep
its key cells whole (no "…", not folded over two lines) and no line may exceed the width."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rich.console import Console

from zincbench import records
from zincbench.profile.parse import parse_file
from zincbench.report import build_report
from zincbench.show import gate_summary, profile_tables
from zincbench.show.microbench_table import NO_CELLS, gate_lines, microbench_markdown, print_microbench, rule_in_words
from zincbench.show.report_tables import print_report

H200 = Path(__file__).resolve().parents[1] / "results" / "h200"
MICROBENCH = sorted(H200.glob("**/microbench-*.json"))
GATES = sorted(H200.glob("gate-*.json"))
NSYS_KERNELS = H200 / "profile-t2-Ne16" / "nsys_cuda_gpu_kern_sum.csv"


def render(draw, width: int = 80) -> list[str]:
    out = io.StringIO()
    draw(Console(file=out, width=width, color_system=None, legacy_windows=False))
    return out.getvalue().splitlines()


def assert_readable(lines: list[str], whole: set[str], width: int = 80) -> None:
    too_long = [line for line in lines if len(line) > width]
    assert not too_long, too_long[:3]
    assert not [line for line in lines if "…" in line]
    text = "\n".join(lines)
    broken = sorted(w for w in whole if w not in text)
    assert not broken, f"cut or folded: {broken[:5]}"


def test_the_recorded_documents_are_there():
    assert MICROBENCH and GATES and NSYS_KERNELS.is_file()


@pytest.mark.parametrize("path", MICROBENCH, ids=lambda p: p.name)
def test_microbench_table_at_80_columns(path):
    doc = records.read(path)
    lines = render(lambda console: print_microbench(doc, console))
    rows = [r for r in doc["results"] if "skipped" not in r]
    tiles = {(r.get("detail") or {}).get("tile") for r in rows} - {None, ""}
    tile_column = any(line.split()[-1:] == ["tile"] for line in lines[:5])  # the last column to give way
    assert_readable(lines, {r["case"] for r in rows} | {r["variant"] for r in rows} | (tiles if tile_column else set()))
    decision = doc["verdict"]["decision"]
    verdict_line = next(line for line in lines if line.startswith(f"{decision}:"))
    assert "{" not in verdict_line and "must be" in verdict_line


@pytest.mark.parametrize("path", MICROBENCH[:1], ids=lambda p: p.name)
def test_a_wide_terminal_gets_every_column(path):
    doc = records.read(path)
    wide = "\n".join(render(lambda console: print_microbench(doc, console), width=250))
    narrow = "\n".join(render(lambda console: print_microbench(doc, console)))
    assert "95% CI µs" in wide and "GB/s" in wide
    assert "95% CI µs" not in narrow  # the compact layout leaves those to --markdown / --json
    assert "95% CI µs" in microbench_markdown(doc) and "{" not in microbench_markdown(doc).splitlines()[-1]


def test_the_rule_reads_as_a_sentence():
    rule = {
        "candidate": "fused_grouped",
        "baseline": "matvec",
        "require": "faster",
        "threshold": 0.03,
        "confidence": 0.99,
        "when": {"min_tokens_per_expert": 16},
    }
    assert rule_in_words(rule) == (
        "fused_grouped must be faster than matvec (by ≥ 3%, 99% CI) in every cell with tokens_per_expert ≥ 16"
    )
    assert rule_in_words({**rule, "when": {}}).endswith("in every cell")


def test_a_gate_that_judged_no_cell_says_so():
    """`--case` may leave no cell the rule selects (T1's Q6_K shapes; the gate judges Q4_K): the decision is
    INCONCLUSIVE (exit 3), and the lines under it say why instead of listing nothing."""
    rule = {"candidate": "fused", "baseline": "round_trip", "require": "faster", "when": {"weights": "q4_k"}}
    assert gate_lines({"decision": "INCONCLUSIVE", "rule": rule, "cells": []}) == [NO_CELLS]
    cells = [
        {"case": "a", "verdict": "faster"},
        {"case": "b", "verdict": "slower"},
        {"case": "c", "verdict": "FAIL", "why": "fused failed correctness"},
    ]
    assert gate_lines({"rule": rule, "cells": cells}) == ["b: slower", "c: FAIL (fused failed correctness)"]
    assert gate_lines({}) == []  # an interrupted run's document: no verdict at all


def test_report_of_every_recorded_run_at_80_columns():
    report = build_report(MICROBENCH, ignore_device=True)
    lines = render(lambda console: print_report(report, console))
    keys = {row["case"] for row in report.microbench} | {row["variant"] for row in report.microbench}
    assert_readable(lines, keys)
    for row in report.microbench:  # every run's number is shown somewhere
        for run in row["runs"].values():
            if run["check"] == "ok" and run["median_us"] is not None:
                assert f"{run['median_us']:.1f} / {run['p90_us']:.1f}" in "\n".join(lines)


@pytest.mark.parametrize("path", GATES, ids=lambda p: p.name)
def test_gate_summary_at_80_columns(path):
    doc = json.loads(path.read_text())
    lines = render(lambda console: gate_summary.print_summary(doc, console))
    assert_readable(lines, {r["name"] for r in doc["results"]})
    assert lines[-1] == gate_summary.verdict_line(doc)


def test_profile_tables_at_80_columns_keep_full_names_in_the_data():
    tables = parse_file(NSYS_KERNELS)
    lines = render(lambda console: profile_tables.render(tables, console, top=40))
    shown = {profile_tables.short_kernel_name(n) for n in tables.kernels["name"]}
    assert_readable(lines, shown | set(tables.categories["category"]))
    longest = max(tables.kernels["name"], key=len)
    assert len(longest) > 80 and longest not in "\n".join(lines)
    assert longest in profile_tables.to_markdown(tables, top=40)  # markdown and JSON keep the full name
    assert longest in json.dumps(tables.to_dict())


IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,30}", fullmatch=True)


@settings(derandomize=True, max_examples=200)
@given(
    base=IDENT,
    args=st.lists(st.integers(-9, 999), min_size=1, max_size=12),
    params=st.lists(st.sampled_from(["int", "const float *", "unsigned long long", "T1 *"]), max_size=8),
)
@example(base="gemm_q4k_mma", args=[1, 4, 4, 1, 4, 1, 1], params=["const unsigned char *", "int"])
def test_short_kernel_names_keep_the_name_and_fit(base, args, params):
    demangled = f"void {base}<{', '.join(f'(int){a}' for a in args)}>({', '.join(params)})"
    short = profile_tables.short_kernel_name(demangled)
    assert short.startswith(base + "<")
    assert len(short) <= max(profile_tables.SHORT_NAME_CHARS, len(base) + 5)
    assert "(int)" not in short and "(" not in short


def test_ab_scoreboard_in_a_report_at_80_columns(ab_document):
    report = build_report([ab_document])
    lines = render(lambda console: print_report(report, console))
    models = {m.model for run in report.ab for m in run["models"]}
    verdicts = {m.verdict for run in report.ab for m in run["models"]}
    deltas = {f"{(m.prefill.ratio - 1) * 100:+.1f}%" for run in report.ab for m in run["models"]}
    assert_readable(lines, models | verdicts | deltas)


AA = sorted((H200.parent).glob("*/aa-*.json"))
VALIDATE = sorted((H200.parent).glob("*/validate-*.json"))
LONG_NAME = "Qwen3-Coder-30B-A3B-Instruct-UD-Q4_K_XL-imatrix-2026-11-30"  # whole on a line, not in a cell


def test_the_recorded_aa_and_validate_documents_are_there():
    assert AA and VALIDATE


@pytest.mark.parametrize("path", AA, ids=lambda p: p.name)
@pytest.mark.parametrize("long_names", [False, True], ids=["recorded", "long-names"])
def test_aa_summary_at_80_columns(path, long_names):
    from zincbench.show import aa_table

    doc = records.read(path)
    names = set()
    if long_names:
        settings, engine = doc["config"]["settings"], doc["config"].get("engine")
        if "variant" in settings:
            settings["variant"] = f"fused_grouped_{LONG_NAME}"
            names.add(settings["variant"])
        if engine:
            engine["bin"] = engine["binary"] = f"/opt/builds/{LONG_NAME}"
            names.add(LONG_NAME)
    lines = render(lambda console: aa_table.render(doc, console, path=path))
    labels = {label.strip() for label, _ in aa_table.rows(doc)}
    assert_readable(lines, labels | names | {aa_table.verdict_line(doc)})
    notes = (doc["verdict"].get("notes") or []) + (doc.get("notes") or [])
    text = " ".join(" ".join(lines).split())
    assert all(" ".join(note.split()) in text for note in notes)  # wrapped, never cut


def _validate_report(path: Path, long_names: bool):
    import dataclasses

    from zincbench.runs.validate import ModelOutcome, Status, ValidateReport

    doc = records.read(path)
    fields = {f.name for f in dataclasses.fields(ModelOutcome)}
    outcomes = [
        ModelOutcome(**{k: v for k, v in row.items() if k in fields} | {"status": Status(row["status"])})
        for row in doc["results"]
    ]
    if long_names:  # a model name as long as catalogs have them, a failure with a long note, a forgiven flip
        failed = dataclasses.replace(
            outcomes[0],
            model=LONG_NAME,
            status=Status.FAIL,
            match=5,
            first_divergence=5,
            margin=3.141,
            reason="diverges at 5 (margin 3.141 ≥ near-tie 0.5): "
            "engine output shorter than n_gen (8 of 12 ids); see the stderr tail",
        )
        forgiven = dataclasses.replace(
            outcomes[0],
            model=LONG_NAME + "-b",
            first_divergence=9,
            margin=0.012,
            forgiven=[{"position": 9, "margin": 0.012, "why": "near-tie: margin 0.012 < 0.5"}],
        )
        outcomes += [failed, forgiven]
    return ValidateReport(outcomes, outcomes[0].mode, False, path)


@pytest.mark.parametrize("path", VALIDATE, ids=lambda p: p.name)
@pytest.mark.parametrize("long_names", [False, True], ids=["recorded", "long-names"])
def test_validate_table_at_80_columns(path, long_names):
    from zincbench.show.validate_table import print_report, verdict_line

    report = _validate_report(path, long_names)
    lines = render(lambda console: print_report(report, console))
    matches = {f"{o.match}/{o.n_gen}" for o in report.outcomes}
    assert_readable(
        lines,
        {o.model for o in report.outcomes}
        | {o.status.value for o in report.outcomes}
        | matches
        | {verdict_line(report)},
    )
    text = " ".join(" ".join(lines).split())
    assert all(" ".join(o.reason.split()) in text for o in report.outcomes)  # the notes wrap, never cut
    assert "forgave 9 (near-tie: margin 0.012 < 0.5)" in text or not long_names


def test_a_validate_table_that_fits_stays_one_table():
    from zincbench.show.validate_table import print_report

    lines = render(lambda console: print_report(_validate_report(VALIDATE[0], long_names=False), console))
    assert any(
        line.split()
        == ["┃", "model", "┃", "status", "┃", "match", "┃", "tf", "┃", "diverges", "┃", "margin", "┃", "note", "┃"]
        for line in lines
    )


def test_a_narrow_table_does_not_fold_a_long_name_in_its_title():
    """A table's title wraps at the table's width: a two-column group would cut a binary's name in two."""
    from zincbench.show.fit import print_in_column_groups

    title = f"A=/opt/builds/{LONG_NAME} vs B=/opt/builds/{LONG_NAME}-next · NVIDIA H200"
    lines = render(
        lambda console: print_in_column_groups(console, title, ["model", "verdict"], [["tiny", "same"]], keys=1)
    )
    assert_readable(lines, {f"A=/opt/builds/{LONG_NAME}", f"B=/opt/builds/{LONG_NAME}-next", "tiny", "same"})
