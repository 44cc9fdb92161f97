"""`zincbench report`: merging runs side by side, refusing mixed devices, incomplete runs, markdown/JSON,
PNG plots (matplotlib) and the exit-4 line without it. The A/B document is a real one, measured
against the fake engine (the ab_document fixture in conftest.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from documents import all_variants, microbench_document, validate_document

from zincbench import records
from zincbench.cli import main
from zincbench.errors import EnvironmentProblem, InputError
from zincbench.report import build_report
from zincbench.show.report_tables import microbench_table, to_markdown, validate_table

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REPO_RESULTS = Path(__file__).resolve().parent.parent / "results"


def run_cli(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["report", *map(str, args)])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


@pytest.fixture
def two_h200_runs(tmp_path):
    first = records.write(microbench_document(seed=1), tmp_path / "first.json")
    second = records.write(microbench_document(candidate_factor=0.7, seed=2), tmp_path / "second.json")
    return first, second


def test_runs_of_one_device_are_merged_side_by_side(two_h200_runs):
    first, second = two_h200_runs
    report = build_report([first, second, first])  # a path given twice is read once
    labels = report.labels("microbench", "t2")
    docs = [records.read(p) for p in (first, second)]
    assert labels == [f"NVIDIA H200 · {d['run_id']}" for d in docs]
    headers, cells = microbench_table(report, "t2")
    assert headers[2:] == [f"{label} median/p90 µs" for label in labels]
    assert len(cells) == len(docs[0]["results"])  # one row per case x variant, not per run
    row = next(r for r in report.microbench if r["variant"] == "fused_grouped")
    for label, doc in zip(labels, docs):
        recorded = next(r for r in doc["results"] if r["case"] == row["case"] and r["variant"] == "fused_grouped")
        assert row["runs"][label]["median_us"] == recorded["summary"]["median_us"]


def test_families_get_their_own_tables(tmp_path, two_h200_runs):
    t1 = records.write(microbench_document("t1", n_cases=3), tmp_path / "t1.json")
    report = build_report([two_h200_runs[0], t1])
    assert report.families == ["t2", "t1"]
    assert report.labels("microbench", "t1") == report.labels("microbench", "t2") == ["NVIDIA H200"]
    assert len(microbench_table(report, "t1")[1]) == 3 * len(all_variants("t1"))  # cases x variants
    assert "### microbench t2" in to_markdown(report) and "### microbench t1" in to_markdown(report)


def test_runs_from_different_devices_are_refused_unless_asked(tmp_path, capsys):
    h200 = records.write(microbench_document(), tmp_path / "h200.json")
    rtx = records.write(microbench_document(device="NVIDIA GeForce RTX 4090"), tmp_path / "rtx.json")
    with pytest.raises(InputError, match="refusing to compare microbench runs from different devices"):
        build_report([h200, rtx])
    code, out, err = run_cli(capsys, h200, rtx)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("zincbench: error: refusing to compare")
    assert "NVIDIA H200: h200.json" in err and "NVIDIA GeForce RTX 4090: rtx.json" in err and "--ignore-device" in err

    code, out, _ = run_cli(capsys, h200, rtx, "--ignore-device", "--json")
    assert code == 0
    assert [r["label"] for r in json.loads(out)["runs"]] == ["NVIDIA H200", "NVIDIA GeForce RTX 4090"]


def test_different_kinds_on_different_devices_are_not_a_mismatch(tmp_path):
    micro = records.write(microbench_document(), tmp_path / "m.json")
    valid = records.write(validate_document({"a": "OK"}, 0, device="NVIDIA GeForce RTX 5090"), tmp_path / "v.json")
    report = build_report([micro, valid])
    assert report.labels("validate") == ["NVIDIA GeForce RTX 5090"]


def test_incomplete_run_is_labelled_and_noted(tmp_path):
    doc = microbench_document(complete=False)
    doc.notes.append("interrupted (SIGINT)")
    doc.results = doc.results[:4]
    path = records.write(doc, tmp_path / "partial.json")
    report = build_report([path])
    assert report.labels("microbench", "t2") == ["NVIDIA H200 (incomplete)"]
    assert any("partial.json: incomplete run (interrupted (SIGINT))" in n for n in report.notes)
    assert "(incomplete)" in to_markdown(report)


def test_validate_statuses_per_model_and_run(tmp_path):
    a = records.write(validate_document({"qwen35-9b": "OK", "gemma4-31b": "FAIL"}, 1), tmp_path / "a.json")
    b = records.write(validate_document({"qwen35-9b": "OK", "gemma4-31b": "OK"}, 0), tmp_path / "b.json")
    headers, cells = validate_table(build_report([a, b]))
    assert headers[0] == "model" and len(headers) == 3
    assert cells == [["qwen35-9b", "OK 12/12", "OK 12/12"], ["gemma4-31b", "FAIL 3/12", "OK 12/12"]]


def test_ab_scoreboard_rows_and_markdown(ab_document, capsys):
    code, out, _ = run_cli(capsys, ab_document, "--markdown")
    assert code == 0
    assert "### ab · " in out and "| tiny |" in out and "slower" in out


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda doc: doc.update(schema_version=2), "schema version 2 is newer than this zincbench understands (1)"),
        (
            lambda doc: doc["verdict"]["models"][0].update(speedup=1.5),
            "verdict.models[0]: ab scoreboard row has unknown key",
        ),
        (lambda doc: doc["verdict"]["models"][0]["prefill"].pop("n_pairs"), "verdict.models[0]: "),
    ],
)
def test_an_ab_scoreboard_of_another_shape_is_one_line(ab_document, tmp_path, capsys, edit, message):
    doc = json.loads(Path(ab_document).read_text())
    edit(doc)
    (tmp_path / "ab.json").write_text(json.dumps(doc))
    code, _, err = run_cli(capsys, tmp_path / "ab.json")
    assert code == 2 and message in err and err.count("\n") == 1


def test_other_kinds_are_left_out_and_nothing_to_report_is_bad_input(tmp_path, capsys, two_h200_runs):
    gate = records.write(records.Document(kind="gate", config={}, environment={}), tmp_path / "gate.json")
    report = build_report([two_h200_runs[0], gate])
    assert any("gate.json: gate documents have no report table" in n for n in report.notes)
    code, _, err = run_cli(capsys, gate)
    assert code == 2 and err.startswith("zincbench: error: nothing to report") and err.count("\n") == 1


def test_unreadable_document_is_one_line(tmp_path, capsys):
    (tmp_path / "junk.json").write_text('{"kind": "microbench"')
    code, out, err = run_cli(capsys, tmp_path / "junk.json")
    assert code == 2 and "invalid JSON" in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_flag_of_the_wrong_type_is_one_line(tmp_path, capsys):
    """A JSON null where a true/false flag belongs (check.fully_written) is bad input, not an internal error."""
    recorded = Path(__file__).resolve().parents[1] / "results/h200/microbench-20261129T134040-ba24976f.json"
    doc = json.loads(recorded.read_text())
    doc["results"][0]["check"]["fully_written"] = None
    (tmp_path / "doc.json").write_text(json.dumps(doc))
    code, _, err = run_cli(capsys, tmp_path / "doc.json")
    assert code == 2 and "check.fully_written must be true or false, got None" in err and err.count("\n") == 1


def test_plots_are_written_as_png(tmp_path, capsys, two_h200_runs, ab_document):
    pytest.importorskip("matplotlib", reason="the plot extra is not installed (pip install -e '.[plot]')")
    t1 = records.write(microbench_document("t1", n_cases=6), tmp_path / "t1.json")
    code, out, err = run_cli(
        capsys, *two_h200_runs, t1, ab_document, "--plot", tmp_path / "plots", "--json", "--ignore-device"
    )
    assert code == 0
    written = sorted(Path(p).name for p in json.loads(out)["plots"])
    assert written == ["ab_scoreboard.png", "t1_vs_round_trip.png", "t2_time_vs_ne.png"]
    for name in written:
        data = (tmp_path / "plots" / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_missing_matplotlib_is_an_environment_error(tmp_path, capsys, monkeypatch, two_h200_runs):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    from zincbench.show.plots import require_matplotlib

    with pytest.raises(EnvironmentProblem, match=r"matplotlib, which is not installed: pip install"):
        require_matplotlib()
    code, out, err = run_cli(capsys, two_h200_runs[0], "--plot", tmp_path / "plots")
    assert code == 4 and out == "" and err.count("\n") == 1 and "needs matplotlib" in err
    assert not (tmp_path / "plots").exists()


@pytest.mark.parametrize(
    "number, message",
    [
        ("1" + "0" * 400, "results[0].summary.median_us is out of range: 10000000000000000000... has 401 digits"),
        ("9" * 5000, "Exceeds the limit (4300 digits) for integer string conversion"),
    ],
    ids=["beyond a float", "beyond Python's int parsing"],
)
def test_a_number_too_large_is_one_line(tmp_path, capsys, number, message):
    """An integer a float cannot hold (the tables format and divide medians) or one too long for json.loads."""
    recorded = Path(__file__).resolve().parents[1] / "results/h200/microbench-20261129T134040-ba24976f.json"
    text = recorded.read_text()
    median = json.loads(text)["results"][0]["summary"]["median_us"]
    (tmp_path / "doc.json").write_text(text.replace(f'"median_us": {median}', f'"median_us": {number}', 1))
    code, _, err = run_cli(capsys, tmp_path / "doc.json", "--markdown")
    assert code == 2 and message in err and err.count("\n") == 1 and err.startswith("zincbench: error: ")


def test_recorded_results_in_the_repository_report_cleanly():
    paths = [
        p for p in sorted(REPO_RESULTS.glob("**/*.json")) if records.read(p)["kind"] in ("microbench", "validate", "ab")
    ]
    if not paths:
        pytest.skip("no recorded microbench/validate/ab documents under results/ yet")
    report = build_report(paths, ignore_device=True)
    assert to_markdown(report).startswith("###")


@pytest.mark.parametrize("folder", ["h200-x2", "h200/repro", "h200"], ids=str)
def test_several_runs_of_a_family_at_80_columns_are_one_table(capsys, monkeypatch, folder):
    """Runs side by side that do not fit become one table with a row per run, never one table per run
    full of "—" rows; every recorded value is in it."""
    paths = sorted((REPO_RESULTS / folder).glob("microbench-*.json"))
    report = build_report(paths)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, *paths)
    lines = out.splitlines()
    assert code == 0 and max(len(line) for line in lines) <= 80
    for family in report.families:
        titles = [line for line in lines if line.startswith(f"microbench {family}")]
        assert len(titles) == 1 and "/" not in titles[0], titles  # not "(1/3)"
        expected = [
            (row["case"], row["variant"], run)
            for row in report.microbench
            if row["family"] == family
            for run in row["runs"]
        ]
        if len(report.labels("microbench", family)) > 1:
            body = [line.split() for line in lines]
            for case, variant, run in expected:
                run_id = run.split(" · ")[-1]
                assert any(cells[:3] == [case, variant, run_id] for cells in body), (case, variant, run_id)
    assert "—" not in out and "(1/" not in out


# --- --family-tables: each run's own tables in place of its family's merged table --------------------------

T4_RUN = REPO_RESULTS / "h200" / "t4" / "microbench-20261202T003114-63cf59ef.json"
T3_RUN = next((REPO_RESULTS / "h200" / "t3").glob("microbench-*.json"))
LAYER_RUN = REPO_RESULTS / "h200" / "layer" / "microbench-20261201T232924-f3c1f172.json"


def _md_rows(text: str, header: str) -> list[list[str]]:
    """The body rows of the markdown table whose header row starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    body = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        body.append([cell.strip() for cell in line.strip("|").split("|")])
    return body


def test_family_tables_of_a_t4_run_in_markdown(capsys):
    """`report --family-tables --markdown` of the committed t4 run: the t4 view's group table and projection
    in place of the merged table, the cells computed here from the JSON."""
    from zincbench.show import t4_view

    code, plain, _ = run_cli(capsys, "--markdown", T4_RUN)
    assert code == 0 and plain.startswith("### microbench t4")
    code, out, err = run_cli(capsys, "--family-tables", "--markdown", T4_RUN)
    assert code == 0 and err == ""
    doc = json.loads(T4_RUN.read_text())
    assert out == t4_view.markdown_view(doc).rstrip() + "\n"
    assert f"### {t4_view.GROUP_TITLE}" in out and f"### {t4_view.PROJECTION_TITLE}" in out

    rows = {(r["case"], r["variant"]): r for r in doc["results"]}
    cases = list(dict.fromkeys(r["case"] for r in doc["results"]))
    groups = _md_rows(out, "| group | T | launches |")
    assert len(groups) == len(cases) == 30
    for case, cells in zip(cases, groups):
        params = rows[(case, "engine_path")]["params"]
        medians = [rows[(case, v)]["summary"]["median_us"] for v in ("engine_path", "norm_f16", "norm_f16_shared")]
        assert cells[:2] == [f"{params['model']}.{params['group']}", str(params["tokens"])]
        assert cells[3:6] == [f"{m:.0f}" for m in medians]
        assert cells[-3:-1] == [f"{medians[0] - medians[1]:.0f}", f"{medians[0] - medians[2]:.0f}"]
        assert cells[-1] == "==="  # every candidate's bits equal the engine path's in this run
    assert groups[0][:7] == ["qwen35-9b.attn", "512", "10/7/5", "284", "259", "254", "229"]

    projection = _md_rows(out, "| model | T | groups |")
    assert len(projection) == 9  # 3 models x 3 T
    for cells in projection:
        model, t = cells[0], int(cells[1])
        timed = [r for r in doc["results"] if r["params"]["model"] == model and r["params"]["tokens"] == t]
        us = sum(r["params"]["layers"] * r["summary"]["median_us"] for r in timed if r["variant"] == "engine_path")
        assert cells[3] == f"{t / (us * 1e-6):.0f}" and cells[2] == str(len(timed) // 5)


def test_family_tables_of_several_runs_are_headed_by_their_run_and_fit_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(capsys, "--family-tables", T4_RUN, T3_RUN, LAYER_RUN)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert not any(line.startswith("microbench ") for line in lines)  # the merged tables give way
    assert max(len(line) for line in lines) <= 80
    assert [line for line in lines if line.startswith(("t4 · ", "t3 · ", "layer · "))] == [
        "t4 · NVIDIA H200",
        "t3 · NVIDIA H200",
        "layer · NVIDIA H200",
    ]
    for title in ("T4 norm + GEMM groups", "Norm + GEMM groups of one prefill", "Scans vs flash-linear-attention"):
        assert any(line.startswith(title) for line in lines), title
    assert any(line.startswith("stages: qwen36-35b-a3b") for line in lines)

    code, single, _ = run_cli(capsys, "--family-tables", T4_RUN)  # one run: no heading
    assert code == 0 and max(len(line) for line in single.splitlines()) <= 80 and "t4 · " not in single


def test_family_tables_read_only_checked_fields(tmp_path, capsys):
    """A field the family tables read, of the wrong type, is one line and exit 2 with the option; the merged
    table alone does not read it. A family name that names no module has no view."""
    from zincbench.show.microbench_table import family_view

    doc = json.loads(T4_RUN.read_text())
    doc["results"][7]["params"]["tokens"] = "512"
    (tmp_path / "t4.json").write_text(json.dumps(doc))
    code, _, err = run_cli(capsys, "--family-tables", "--markdown", tmp_path / "t4.json")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("zincbench: error: ") and "results[7].params.tokens must be a number, got '512'" in err
    assert run_cli(capsys, "--markdown", tmp_path / "t4.json")[0] == 0

    code, _, err = run_cli(capsys, "--family-tables", "--json", T4_RUN)
    assert code == 2 and "--family-tables" in err
    assert [family_view(name) for name in ("..", "t4.", "t4_view.x", None, 4)] == [None] * 5
