"""MicrobenchRow: the runner's rows survive a write and a read; rows of another shape are refused."""

from __future__ import annotations

import re

import pytest
from documents import failed_row, microbench_document

from zincbench import records
from zincbench.bench.rows import MicrobenchRow, VsBaseline, rows_of
from zincbench.errors import InputError
from zincbench.runs.gate import rejudge_document


def test_every_kind_of_row_survives_a_write_and_a_read(tmp_path):
    doc = microbench_document(n_cases=2)
    doc.results[1].vs_baseline = VsBaseline(
        baseline="matvec", verdict="inconclusive", note="baseline has no valid timing"
    )
    doc.results[2].warnings = ["timed median departs from the autotuned one"]
    doc.results.append(failed_row("E8-M16-K256-Ne1", "fused"))
    doc.results.append(
        MicrobenchRow(
            family="t2",
            case="E8-M16-K256-Ne1",
            params={"tokens": 8},
            variant="engine",
            role="candidate",
            skipped="absent from the engine's source tree",
        )
    )
    path = records.write(doc, tmp_path / "m.json")
    assert rows_of(records.read(path)) == doc.results


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"speed": 1.0}, "unknown key(s) speed"),
        ({"summary": {"median_us": 1.0}}, "missing"),
        ({"check": [1e-6]}, "check must be an object, got list"),
    ],
)
def test_a_row_of_another_shape_is_one_input_error(edit, message):
    data = records.to_jsonable(microbench_document(n_cases=1))
    data["results"][0].update(edit)
    with pytest.raises(InputError, match=f"doc.json: not a valid microbench document .*{re.escape(message)}"):
        rejudge_document(data, "doc.json")


def test_a_document_of_another_schema_version_is_refused():
    data = records.to_jsonable(microbench_document(n_cases=1))
    data["schema_version"] = records.SCHEMA_VERSION + 1
    with pytest.raises(ValueError, match="schema_version"):
        rows_of(data)
    with pytest.raises(InputError, match="schema_version"):
        rejudge_document(data, "doc.json")


def test_the_report_names_the_row_of_another_shape(tmp_path):
    from zincbench.report import build_report

    data = records.to_jsonable(microbench_document(n_cases=1))
    data["results"][2]["summary"] = {"median_us": 1.0}
    path = records.write(records.Document(**data), tmp_path / "m.json")
    with pytest.raises(InputError, match=re.escape("m.json: results[2]: ") + ".*missing"):
        build_report([path])
