"""``zincbench history --bmf / --github-benchmark``: the files CI services read, checked against each
format's published field rules, written whole or not at all."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from test_fuzz_documents import DOCUMENTS, MICROBENCH, edited, edits_of
from test_fuzz_parsers import EXAMPLES
from test_history import ROOT, RULES, run_cli, write_history

from zincbench import history
from zincbench.errors import EnvironmentProblem, InputError
from zincbench.outputs import write_output_atomically
from zincbench.show import bmf, github_benchmark


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_bmf(data) -> None:
    """Bencher Metric Format, as bencher.dev/docs/reference/bencher-metric-format publishes it (its JSON
    schema, https://bencher.dev/bmf.json, and the identification rules):
    - the document is an object whose keys (benchmark names) match ``.+`` and are at most 1024 characters;
    - each benchmark is an object whose keys (measures: a name or slug) match ``.+``, at most 64 characters;
    - each measure is an object with a required number ``value`` and optional numbers ``lower_value`` and
      ``upper_value``; we add lower_value <= value <= upper_value (an interval around the value);
    - ``latency`` is the slug of Bencher's built-in Latency measure, in nanoseconds."""
    assert isinstance(data, dict) and data
    for benchmark, measures in data.items():
        assert isinstance(benchmark, str) and 1 <= len(benchmark) <= 1024
        assert isinstance(measures, dict) and measures
        for measure, metric in measures.items():
            assert isinstance(measure, str) and 1 <= len(measure) <= 64
            assert isinstance(metric, dict) and "value" in metric and is_number(metric["value"])
            assert set(metric) <= {"value", "lower_value", "upper_value"}
            if "lower_value" in metric or "upper_value" in metric:
                assert is_number(metric["lower_value"]) and is_number(metric["upper_value"])
                assert metric["lower_value"] <= metric["value"] <= metric["upper_value"]


def check_github_benchmark(data) -> None:
    """github-action-benchmark's ``customSmallerIsBetter`` input, as its README ("Examples": custom
    benchmarks) publishes it:
    - the file is a JSON array of objects;
    - each has ``name`` (string), ``unit`` (string) and ``value`` (number), and optionally ``range`` and
      ``extra`` (strings; ``extra`` is shown in the chart's tooltip);
    - names are unique within a run (the action matches a benchmark across commits by its name)."""
    assert isinstance(data, list) and data
    for entry in data:
        assert isinstance(entry, dict) and {"name", "unit", "value"} <= set(entry)
        assert set(entry) <= {"name", "unit", "value", "range", "extra"}
        assert isinstance(entry["name"], str) and entry["name"] and isinstance(entry["unit"], str)
        assert is_number(entry["value"])
        assert all(isinstance(entry[k], str) for k in ("range", "extra") if k in entry)
    names = [e["name"] for e in data]
    assert len(names) == len(set(names))


def export(tmp_path: Path, *paths) -> tuple[dict, list]:
    bmf, github = tmp_path / "bmf.json", tmp_path / "github.json"
    code, _, err = run_cli("history", *paths, "--bmf", bmf, "--github-benchmark", github)
    assert code == 0, err
    return json.loads(bmf.read_text()), json.loads(github.read_text())


def test_the_history_exports_the_latest_run_of_each_series(tmp_path):
    write_history(tmp_path / "runs", {"base": [100.0] * 4, "fused": [50.0, 50.0, 50.0, 60.0]})
    bmf, github = export(tmp_path, tmp_path / "runs")
    check_bmf(bmf)
    check_github_benchmark(github)
    latest = history.build_history([tmp_path / "runs"], RULES).series[1].latest
    metric = bmf["t2/Ne16/fused on NVIDIA H200"]["latency"]
    assert metric["value"] == pytest.approx(latest.median_us * 1e3)
    assert (metric["lower_value"], metric["upper_value"]) == pytest.approx([x * 1e3 for x in latest.interval_us])
    entry = next(e for e in github if e["name"] == "t2/Ne16/fused on NVIDIA H200")
    assert entry["unit"] == "ns" and entry["value"] == pytest.approx(60_000, rel=0.02)
    assert entry["range"].startswith("± ") and f"commit {latest.commit}" in entry["extra"]


@pytest.mark.parametrize("document", sorted((ROOT / "results").rglob("microbench-*.json"))[:4], ids=lambda p: p.name)
def test_any_results_document_exports(tmp_path, document):
    bmf, github = export(tmp_path, document)
    check_bmf(bmf)
    check_github_benchmark(github)
    assert set(bmf) == {e["name"] for e in github}


def test_an_output_folder_that_does_not_exist_is_refused_before_any_work(tmp_path):
    code, out, err = run_cli("history", ROOT / "results", "--bmf", tmp_path / "no" / "bmf.json")
    assert code == 2 and out == "" and "folder" in err and "does not exist" in err


def test_a_failed_write_leaves_no_file(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_text("old")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(EnvironmentProblem, match="cannot write --bmf .*No space left on device"):
        write_output_atomically(target, "{}", "--bmf")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.json"]


@settings(max_examples=max(1, EXAMPLES // 3), deadline=None)
@given(case=edits_of({MICROBENCH: DOCUMENTS[MICROBENCH]}))
def test_edited_documents_export_valid_files_or_one_input_error(tmp_path_factory, case):
    name, edits = case
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / name).write_text(json.dumps(edited(DOCUMENTS, name, edits)))
    try:
        result = history.build_history([folder], RULES)
    except InputError:
        return
    if result.series:
        check_bmf(json.loads(bmf.to_text(result)))
        check_github_benchmark(json.loads(github_benchmark.to_text(result)))
