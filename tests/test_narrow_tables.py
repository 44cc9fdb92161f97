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
from zincbench.show.report_tables import print_report
from zincbench.show.microbench_table import microbench_markdown, print_microbench, rule_in_words

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
    rule = {"candidate": "fused_grouped", "baseline": "matvec", "require": "faster", "threshold": 0.03,
            "confidence": 0.99, "when": {"min_tokens_per_expert": 16}}
    assert rule_in_words(rule) == ("fused_grouped must be faster than matvec (by ≥ 3%, 99% CI) in every cell "
                                   "with tokens_per_expert ≥ 16")
    assert rule_in_words({**rule, "when": {}}).endswith("in every cell")


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
@given(base=IDENT, args=st.lists(st.integers(-9, 999), min_size=1, max_size=12),
       params=st.lists(st.sampled_from(["int", "const float *", "unsigned long long", "T1 *"]), max_size=8))
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
    models = {m["model"] for run in report.ab for m in run["models"]}
    verdicts = {m["verdict"] for run in report.ab for m in run["models"]}
    deltas = {f"{(m['prefill']['ratio'] - 1) * 100:+.1f}%" for run in report.ab for m in run["models"]}
    assert_readable(lines, models | verdicts | deltas)
