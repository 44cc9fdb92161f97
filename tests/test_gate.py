"""`zincbench gate`: loading and schema checks, statuses and exit codes, re-judging recorded documents,
JUnit XML (parsed back with xml.etree), markdown and $GITHUB_STEP_SUMMARY, and the CPU-only CI config.

Recorded documents are built here in the runner's row format with samples whose verdict is known by
construction (a candidate 20% faster with 0.5% noise is GO; 20% slower is NO-GO).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from documents import microbench_document, reference_document, validate_document
from hypothesis import given, settings
from hypothesis import strategies as st

from zincbench import records
from zincbench.cli import main
from zincbench.config import EXPERIMENTS_DIR
from zincbench.errors import ConfigError, ExitCode, InputError
from zincbench.runs.gate import Status, load_gates, rejudge_document, run_gates
from zincbench.show.gate_summary import append_step_summary, to_markdown
from zincbench.show.junit import junit_xml, xml_text


def write_gates(directory: Path, checks: list[dict], name: str = "gates.yaml") -> Path:
    import yaml

    path = directory / name
    path.write_text(yaml.safe_dump({"checks": checks}))
    return path


# --- re-judging ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["t2", "t1"])
def test_recorded_go_rejudges_go_from_raw_samples(family):
    data = records.to_jsonable(microbench_document(family, n_cases=6 if family == "t1" else None))
    judged = rejudge_document(data, "doc.json")
    assert judged.status is Status.PASS, judged.reason
    assert judged.details["rejudged"] == "GO" and "drift" not in judged.details
    assert all(cell["verdict"] == "faster" for cell in judged.details["cells"]) and judged.details["cells"]


def test_slower_candidate_rejudges_no_go():
    data = records.to_jsonable(microbench_document(candidate_factor=1.2, decision="NO-GO"))
    judged = rejudge_document(data, "doc.json")
    assert judged.status is Status.FAIL and judged.details["rejudged"] == "NO-GO"
    assert "slower" in judged.reason


def test_recorded_decision_that_the_samples_contradict_is_judge_drift():
    data = records.to_jsonable(microbench_document(candidate_factor=1.2, decision="GO"))
    assert "judge drift: recorded decision GO, re-judged NO-GO" in rejudge_document(data, "doc.json").details["drift"]


def test_rule_changed_since_recording_is_no_drift_but_said():
    data = records.to_jsonable(microbench_document(candidate_factor=1.2, decision="GO"))
    data["verdict"]["rule"]["threshold"] = 0.5
    judged = rejudge_document(data, "doc.json")
    assert judged.status is Status.FAIL and "drift" not in judged.details
    assert "recorded GO under another rule" in judged.reason


def test_incomplete_document_is_inconclusive():
    doc = microbench_document(complete=False)
    doc.notes.append("interrupted (SIGINT)")
    judged = rejudge_document(records.to_jsonable(doc), "doc.json")
    assert judged.status is Status.INCONCLUSIVE and "interrupted (SIGINT)" in judged.reason


@pytest.mark.parametrize(
    "statuses, code, status",
    [
        ({"a": "OK", "b": "OK"}, 0, Status.PASS),
        ({"a": "OK", "b": "FAIL"}, 1, Status.FAIL),
        ({"a": "OK", "b": "MISSING"}, 1, Status.FAIL),
    ],
)
def test_validate_document_rejudged_from_its_outcomes(statuses, code, status):
    judged = rejudge_document(records.to_jsonable(validate_document(statuses, code)), "v.json")
    assert judged.status is status and "drift" not in judged.details


def test_validate_document_whose_exit_code_disagrees_is_drift():
    judged = rejudge_document(records.to_jsonable(validate_document({"a": "FAIL"}, 0)), "v.json")
    assert "recorded exit code 0, re-judged 1" in judged.details["drift"]


def test_ab_document_rejudged_from_its_rounds(ab_document):
    data = records.read(ab_document)
    judged = rejudge_document(data, "ab.json")
    assert judged.status is Status.FAIL and judged.details["verdicts"] == {"tiny": "slower"}
    assert judged.details["recorded"] == judged.details["rejudged"] == 1
    for record in data["results"]:  # the same rounds with B as fast as A: B is no longer slower
        if record["arm"] == "B":
            record["prefill_tps"] /= 0.95
            record["decode_tps"] /= 0.95
    drifted = rejudge_document(data, "ab.json")
    assert drifted.status is not Status.FAIL and "recorded exit code 1" in drifted.details["drift"]


def test_reference_documents_are_checked():
    assert rejudge_document(records.to_jsonable(reference_document([0.5, 2.0])), "r.json").status is Status.PASS
    with pytest.raises(InputError, match=r"results\[1\]: negative margin"):  # a reference that cannot be: bad input
        rejudge_document(records.to_jsonable(reference_document([0.5, -1.0])), "r.json")


def test_a_document_of_another_schema_is_bad_input():
    data = records.to_jsonable(microbench_document())
    del data["results"][0]["case"]
    with pytest.raises(InputError, match="not a valid microbench document"):
        rejudge_document(data, "doc.json")


def test_unjudgeable_kind_is_bad_input():
    with pytest.raises(InputError, match="cannot re-judge a 'profile' document"):
        rejudge_document({"kind": "profile", "schema_version": 1}, "p.json")


# --- loading -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"name": "x", "kind": "nope"}, "kind: must be one of"),
        ({"name": "x", "kind": "recorded"}, "missing required key 'path'"),
        ({"name": "x", "kind": "recorded", "path": "a.json", "expect": "MAYBE"}, "expect: must be one of"),
        ({"name": "x", "kind": "microbench", "family": "no-such-family"}, "family: must be one of"),
        ({"name": "x", "kind": "microbench", "experiment": "missing.yaml"}, "file not found"),
        ({"name": "x", "kind": "validate", "models": ["no-such-model"]}, "unknown catalog model 'no-such-model'"),
        ({"name": "x", "kind": "ab", "a": "bin"}, "give models"),
        ({"name": "x", "kind": "ab", "a": "bin", "models": ["qwen35-9b"], "rounds": 1}, "--rounds must be at least 2"),
        ({"name": "x", "kind": "parse", "parser": "llama-bench", "path": "${BROKEN"}, "bad ${VAR} placeholder"),
        ({"name": "x", "kind": "parse", "parser": "llama-bench", "path": "a", "colour": 1}, "unknown key 'colour'"),
        # ab and validate checks hold their run's settings, under the settings' own keys and checks
        ({"name": "x", "kind": "ab", "a": "bin", "models": ["qwen35-9b"], "alpha": 2.0}, "--alpha is a probability"),
        ({"name": "x", "kind": "ab", "a": "bin", "models": ["qwen35-9b"], "settings": {}}, "unknown key 'settings'"),
        ({"name": "x", "kind": "validate", "near_tie": -1.0}, "--near-tie must be a finite non-negative"),
        ({"name": "x", "kind": "validate", "n_batch": "big"}, "checks[0].n_batch: expected an integer"),
        ({"name": "x", "kind": "validate", "gpu_layers": 1}, "unknown key 'gpu_layers'"),
    ],
)
def test_bad_check_is_rejected_at_load_time(tmp_path, entry, message):
    with pytest.raises(InputError, match=None) as exc:
        load_gates(write_gates(tmp_path, [entry]))
    assert message in str(exc.value) and "checks[0]" in str(exc.value)


def test_ab_and_validate_checks_hold_their_run_settings(tmp_path):
    from zincbench.engines.llama_cpp import LlamaSettings
    from zincbench.runs.ab import ABSettings

    ab, fixed, validate = load_gates(
        write_gates(
            tmp_path,
            [
                {
                    "name": "ab",
                    "kind": "ab",
                    "a": "bin",
                    "models": ["qwen35-9b"],
                    "threshold": 0.05,
                    "min_rounds": 4,
                    "rounds": None,
                },
                {"name": "fixed", "kind": "ab", "a": "bin", "models": ["qwen35-9b"]},
                {"name": "v", "kind": "validate", "mode": "exact", "n_gpu_layers": -1, "references_dir": "${REFS}"},
            ],
        )
    ).checks
    assert ab.settings == ABSettings(threshold=0.05, min_rounds=4)  # adaptive, as `zincbench ab` without --rounds
    assert fixed.settings == ABSettings(rounds=6)  # a gate's A/B runs 6 fixed rounds unless told otherwise
    assert validate.llama == LlamaSettings(n_gpu_layers=-1) and validate.options.mode == "exact"
    options = validate._options(tmp_path)
    assert options.references_dir == tmp_path and options.llama == validate.llama


def test_duplicate_names_and_empty_files_are_rejected(tmp_path):
    entry = {"name": "x", "kind": "recorded", "path": "a.json"}
    with pytest.raises(ConfigError, match="'x' is used by another check"):
        load_gates(write_gates(tmp_path, [entry, entry]))
    with pytest.raises(ConfigError, match="declares no checks"):
        load_gates(write_gates(tmp_path, []))


def test_experiment_with_k_not_a_multiple_of_256_is_rejected(tmp_path):
    text = (EXPERIMENTS_DIR / "t2_moe_expert.yaml").read_text().replace("k: 2048", "k: 300")
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(InputError, match="K=300 is not a multiple of 256"):
        load_gates(write_gates(tmp_path, [{"name": "t2", "kind": "microbench", "experiment": "bad.yaml"}]))


def test_bundled_gate_files_load():
    assert [c.kind for c in load_gates().checks][:4] == ["microbench", "microbench", "validate", "ab"]
    assert {c.kind for c in load_gates(EXPERIMENTS_DIR / "gates_ci.yaml").checks} == {"recorded", "parse"}


# --- running ----------------------------------------------------------------------------------------------


def test_statuses_exit_codes_and_gate_document(tmp_path, monkeypatch):
    records.write(microbench_document(), tmp_path / "go.json")
    records.write(microbench_document(candidate_factor=1.2, decision="NO-GO"), tmp_path / "nogo.json")
    monkeypatch.delenv("ZINC_DBG_BIN", raising=False)
    gates = load_gates(
        write_gates(
            tmp_path,
            [
                {"name": "go", "kind": "recorded", "path": "go.json"},
                {"name": "expected-no-go", "kind": "recorded", "path": "nogo.json", "expect": "FAIL"},
                {"name": "absent", "kind": "recorded", "path": "recorded/none-*.json"},
                {"name": "no-engine", "kind": "validate", "engine_bin": "${ZINC_DBG_BIN}", "needs_gpu": False},
            ],
        )
    )
    result = run_gates(gates, results_dir=tmp_path / "results")
    by_name = {o.name: o for o in result.outcomes}
    assert by_name["go"].status is Status.PASS
    assert by_name["expected-no-go"].status is Status.PASS and "as expected" in by_name["expected-no-go"].reason
    assert by_name["absent"].status is Status.SKIPPED and "no file matches" in by_name["absent"].reason
    assert by_name["no-engine"].status is Status.SKIPPED
    assert "ZINC_MODELS" in by_name["no-engine"].reason or "ZINC_DBG_BIN" in by_name["no-engine"].reason
    assert result.exit_code == ExitCode.OK
    saved = records.read(result.path)
    assert saved["kind"] == "gate" and saved["complete"] is True
    assert [r["status"] for r in saved["results"]] == ["PASS", "PASS", "SKIPPED", "SKIPPED"]
    assert saved["verdict"]["counts"]["SKIPPED"] == 2 and saved["verdict"]["exit_code"] == 0

    strict = run_gates(gates, strict=True, results_dir=tmp_path / "results")
    assert strict.exit_code == ExitCode.FAIL
    assert [o.status for o in strict.outcomes][2:] == [Status.FAIL, Status.FAIL]
    assert all(o.skipped and "--strict" in o.reason for o in strict.outcomes[2:])


def test_recorded_family_picks_its_documents_among_the_matches(tmp_path):
    records.write(microbench_document("t2"), tmp_path / "microbench-a.json")
    records.write(
        microbench_document("t1", n_cases=6, candidate_factor=1.2, decision="NO-GO"), tmp_path / "microbench-b.json"
    )
    result = run_gates(
        load_gates(
            write_gates(
                tmp_path,
                [
                    {"name": "t2", "kind": "recorded", "path": "microbench-*.json", "family": "t2"},
                    {"name": "t1", "kind": "recorded", "path": "microbench-*.json", "family": "t1"},
                    {
                        "name": "t1-known-no-go",
                        "kind": "recorded",
                        "path": "microbench-*.json",
                        "family": "t1",
                        "expect": "FAIL",
                    },
                    {"name": "both", "kind": "recorded", "path": "microbench-*.json"},
                ],
            )
        ),
        results_dir=tmp_path / "r",
    )
    assert [o.status for o in result.outcomes] == [Status.PASS, Status.FAIL, Status.PASS, Status.FAIL]
    assert "microbench-a.json" in result.outcomes[0].reason and "microbench-b.json" in result.outcomes[1].reason
    assert result.outcomes[3].details["documents"].keys() == {
        str(tmp_path / "microbench-a.json"),
        str(tmp_path / "microbench-b.json"),
    }


def test_worst_check_decides_the_exit_code(tmp_path):
    records.write(microbench_document(candidate_factor=1.2, decision="NO-GO"), tmp_path / "nogo.json")
    incomplete = microbench_document(complete=False)
    records.write(incomplete, tmp_path / "partial.json")
    (tmp_path / "broken.json").write_text("{not json")
    checks = [
        {"name": "nogo", "kind": "recorded", "path": "nogo.json"},
        {"name": "partial", "kind": "recorded", "path": "partial.json"},
    ]
    result = run_gates(load_gates(write_gates(tmp_path, checks)), results_dir=tmp_path / "r")
    assert [o.status for o in result.outcomes] == [Status.FAIL, Status.INCONCLUSIVE]
    assert result.exit_code == ExitCode.FAIL  # a failure outranks an inconclusive check

    checks.append({"name": "broken", "kind": "recorded", "path": "broken.json"})
    result = run_gates(load_gates(write_gates(tmp_path, checks)), results_dir=tmp_path / "r")
    assert result.outcomes[-1].status is Status.ERROR and "invalid JSON" in result.outcomes[-1].reason
    assert result.exit_code == ExitCode.USAGE  # input the gate could not judge outranks both


def test_microbench_check_is_skipped_without_a_gpu(tmp_path):
    from zincbench.errors import EnvironmentProblem
    from zincbench.gpu import require_cupy

    try:
        require_cupy("this check")
    except EnvironmentProblem as exc:
        reason = str(exc)
    else:
        pytest.skip("this machine has a GPU: the microbench check would run")
    result = run_gates(
        load_gates(write_gates(tmp_path, [{"name": "t2", "kind": "microbench", "quick": True}])),
        results_dir=tmp_path / "r",
    )
    (outcome,) = result.outcomes
    assert outcome.status is Status.SKIPPED and reason in outcome.reason and outcome.reason.startswith("needs a GPU")
    assert not list((tmp_path / "r").glob("microbench-*"))


@pytest.fixture
def fake_engine(tmp_path, monkeypatch):
    """The fake engine as a binary, its run counter in tmp_path, no failure or slowdown configured."""
    from fake_engine import write_launcher

    for var in ("FAKE_SPEED", "FAKE_DRIFT", "FAKE_SEED", "FAKE_FAIL", "FAKE_FAIL_RUNS", "FAKE_NOISE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FAKE_COUNTER", str(tmp_path / "counter"))
    return write_launcher(tmp_path)


def test_validate_check_end_to_end(tmp_path, fake_engine, monkeypatch):
    """The fake speaks cuda-dbg's protocol; a recorded reference for a tiny GGUF says what it must print."""
    from zincbench import reference_store
    from zincbench.catalog import DEFAULT_PROMPT
    from zincbench.testing.tiny_gguf import write_tiny_llama

    gguf = write_tiny_llama(tmp_path / "models" / "tiny.gguf", quant="q4_k")
    reference_store.save(
        reference_store.Reference(
            gguf=str(gguf),
            identity=reference_store.gguf_identity(gguf),
            prompt=DEFAULT_PROMPT,
            n_gen=12,
            prompt_ids=[1, 2, 3],
            generated_ids=list(range(7, 19)),
            tokens=[reference_store.TokenRow(7 + i, 10.0, 3, 9.0) for i in range(12)],
            producer={},
        ),
        tmp_path / "refs",
    )
    (tmp_path / "catalog.yaml").write_text(f"models:\n  tiny: {{gguf: {gguf}, arch: llama, shape: dense}}\n")
    gates = load_gates(
        write_gates(
            tmp_path,
            [
                {
                    "name": "tokens",
                    "kind": "validate",
                    "catalog": "catalog.yaml",
                    "engine_bin": fake_engine.name,
                    "references_dir": "refs",
                    "mode": "exact",
                    "needs_gpu": False,
                }
            ],
        )
    )
    ok = run_gates(gates, results_dir=tmp_path / "results")
    assert ok.outcomes[0].status is Status.PASS and ok.outcomes[0].reason == "1/1 catalog models token-correct"
    assert records.read(ok.outcomes[0].results_file)["kind"] == "validate"

    monkeypatch.setenv("FAKE_FAIL", "crash")
    crashed = run_gates(gates, results_dir=tmp_path / "results")
    assert crashed.outcomes[0].status is Status.FAIL and crashed.outcomes[0].details["statuses"] == {"tiny": "ERROR"}
    assert crashed.exit_code == ExitCode.FAIL


@pytest.mark.parametrize("speed_b, status", [("1", Status.PASS), ("0.95", Status.FAIL)])
def test_ab_check_end_to_end(tmp_path, fake_engine, speed_b, status):
    (tmp_path / "tiny.gguf").touch()
    gates = load_gates(
        write_gates(
            tmp_path,
            [
                {
                    "name": "ab",
                    "kind": "ab",
                    "a": fake_engine.name,
                    "b": fake_engine.name,
                    "model": {"tiny": "tiny.gguf"},
                    "env_b": {"FAKE_SPEED": speed_b},
                    "rounds": 2,
                    "needs_gpu": False,
                }
            ],
        )
    )
    (outcome,) = run_gates(gates, results_dir=tmp_path / "results").outcomes
    assert outcome.status is status and outcome.details["verdicts"] == {"tiny": "same" if speed_b == "1" else "slower"}
    assert records.read(outcome.results_file)["kind"] == "ab"


def test_engine_check_skipped_when_its_model_is_absent(tmp_path, fake_engine):
    gates = load_gates(
        write_gates(
            tmp_path,
            [{"name": "ab", "kind": "ab", "a": fake_engine.name, "model": {"tiny": "absent.gguf"}, "needs_gpu": False}],
        )
    )
    (outcome,) = run_gates(gates, results_dir=tmp_path / "results").outcomes
    assert outcome.status is Status.SKIPPED
    assert outcome.reason.startswith("model GGUF absent: tiny (") and outcome.reason.endswith("absent.gguf)")
    assert not list((tmp_path / "results").glob("ab-*.json"))


def test_parse_check_fails_on_a_recorded_output_that_no_longer_parses(tmp_path):
    (tmp_path / "good.jsonl").write_text(json.dumps({"n_prompt": 512, "n_gen": 0, "avg_ts": 1000.0}) + "\n")
    (tmp_path / "bad.jsonl").write_text('{"n_prompt": 512, "n_gen": 0, "avg_ts": 10')
    ok = run_gates(
        load_gates(
            write_gates(tmp_path, [{"name": "p", "kind": "parse", "parser": "llama-bench", "path": "good.jsonl"}])
        ),
        results_dir=tmp_path / "r",
    )
    assert ok.outcomes[0].status is Status.PASS and "1 rows" in ok.outcomes[0].reason
    bad = run_gates(
        load_gates(write_gates(tmp_path, [{"name": "p", "kind": "parse", "parser": "llama-bench", "path": "*.jsonl"}])),
        results_dir=tmp_path / "r",
    )
    assert bad.outcomes[0].status is Status.FAIL and "1 of 2 file(s) failed" in bad.outcomes[0].reason
    assert "bad.jsonl:1" in bad.outcomes[0].reason


# --- outputs ----------------------------------------------------------------------------------------------


def _mixed_gate_document() -> dict:
    rows = [
        {
            "name": n,
            "kind": "recorded",
            "status": s,
            "exit_code": c,
            "reason": f"why {n}",
            "wall_s": 0.25,
            "results_file": f"/r/{n}.json" if s != "SKIPPED" else None,
            "skipped": s == "SKIPPED",
            "details": {},
        }
        for n, s, c in (
            ("p", "PASS", 0),
            ("f", "FAIL", 1),
            ("i", "INCONCLUSIVE", 3),
            ("s", "SKIPPED", 0),
            ("e", "ERROR", 2),
        )
    ]
    return {
        "kind": "gate",
        "config": {"gates_file": "g.yaml"},
        "results": rows,
        "timestamp": "t",
        "complete": True,
        "verdict": {
            "status": "ERROR",
            "exit_code": 2,
            "strict": False,
            "counts": {"PASS": 1, "FAIL": 1, "INCONCLUSIVE": 1, "SKIPPED": 1, "ERROR": 1},
        },
    }


def test_junit_xml_has_one_testcase_per_check():
    root = ET.fromstring(junit_xml(_mixed_gate_document()))
    suite = root.find("testsuite")
    assert suite.attrib["tests"] == "5" and suite.attrib["failures"] == "2"
    assert suite.attrib["errors"] == "1" and suite.attrib["skipped"] == "1"
    cases = {c.attrib["name"]: c for c in suite.iter("testcase")}
    assert list(cases) == ["p", "f", "i", "s", "e"]
    assert len(cases["p"]) == 1 and cases["p"][0].tag == "system-out"
    assert cases["f"].find("failure").attrib == {"message": "why f", "type": "FAIL"}
    assert cases["i"].find("failure").attrib["type"] == "INCONCLUSIVE"
    assert cases["s"].find("skipped").attrib["message"] == "why s"
    assert "results: /r/e.json" in cases["e"].find("error").text


@settings(max_examples=60, deadline=None)
@given(st.text(), st.text(min_size=1))
def test_junit_xml_parses_back_whatever_the_reason_text(reason, name):
    doc = _mixed_gate_document()
    doc["results"][1].update(reason=reason, name=name)
    case = ET.fromstring(junit_xml(doc)).find("testsuite")[1]
    assert case.attrib["name"] == xml_text(name)
    assert case.find("failure").attrib["message"] == xml_text(reason)  # only XML-illegal characters replaced


def test_markdown_summary_and_github_step_summary(tmp_path):
    doc = _mixed_gate_document()
    markdown = to_markdown(doc)
    assert markdown.count("\n| ") == 7  # header, separator, five checks
    assert "❌ FAIL" in markdown and "gate ERROR" in markdown
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    assert append_step_summary(markdown, {"GITHUB_STEP_SUMMARY": str(summary)}) == summary
    assert summary.read_text() == "earlier step\n" + markdown + "\n"
    assert append_step_summary(markdown, {}) is None


def test_cli_writes_junit_markdown_json_and_step_summary(tmp_path, capsys, monkeypatch):
    records.write(microbench_document(), tmp_path / "go.json")
    records.write(microbench_document(candidate_factor=1.2, decision="NO-GO"), tmp_path / "nogo.json")
    gates = write_gates(
        tmp_path,
        [
            {"name": "go", "kind": "recorded", "path": "go.json"},
            {"name": "nogo", "kind": "recorded", "path": "nogo.json"},
        ],
    )
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "step.md"))
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "gate",
                str(gates),
                "--junit",
                str(tmp_path / "j.xml"),
                "--markdown",
                str(tmp_path / "g.md"),
                "--json",
                "--results-dir",
                str(tmp_path / "results"),
            ]
        )
    out = json.loads(capsys.readouterr().out)
    assert exc.value.code == 1 and out["status"] == "FAIL" and out["exit_code"] == 1
    assert [c["status"] for c in out["checks"]] == ["PASS", "FAIL"]
    failure = ET.parse(tmp_path / "j.xml").getroot().find("testsuite/testcase[@name='nogo']/failure")
    assert failure is not None and "NO-GO" in failure.attrib["message"]
    assert (tmp_path / "g.md").read_text() == (tmp_path / "step.md").read_text().rstrip("\n") + "\n"
    assert records.read(out["results"])["verdict"]["status"] == "FAIL"


def test_cli_refuses_an_output_folder_that_does_not_exist_before_running(tmp_path, capsys):
    gates = write_gates(tmp_path, [{"name": "go", "kind": "recorded", "path": "go.json"}])
    with pytest.raises(SystemExit) as exc:
        main(["gate", str(gates), "--junit", str(tmp_path / "nope" / "j.xml"), "--results-dir", str(tmp_path / "r")])
    assert exc.value.code == 2 and "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_recorded_results_in_the_repository_rejudge_as_recorded():
    paths = [
        p
        for p in sorted((EXPERIMENTS_DIR.parent / "results").glob("**/microbench-*.json*"))
        if records.read(p)["complete"]
    ]
    if not paths:
        pytest.skip("no complete microbench document recorded under results/ yet")
    for path in paths:
        judged = rejudge_document(records.read(path), str(path))
        assert "drift" not in judged.details, judged.details["drift"]


def test_ci_gate_passes_on_this_machine(tmp_path, capsys):
    """The CPU-only configuration CI runs: whatever is recorded in results/ must re-judge as it says."""
    with pytest.raises(SystemExit) as exc:
        main(["gate", str(EXPERIMENTS_DIR / "gates_ci.yaml"), "--json", "--results-dir", str(tmp_path)])
    out = json.loads(capsys.readouterr().out)
    assert exc.value.code == 0, out["checks"]
    parsed = {c["name"]: c for c in out["checks"] if c["kind"] == "parse"}
    assert parsed["parse-nsys-sqlite"]["status"] == "PASS" and parsed["parse-ncu"]["status"] == "PASS"


# --- a gate that checked nothing -----------------------------------------------------------------------


def test_a_gate_whose_every_check_was_skipped_exits_6_and_says_so(tmp_path, capsys, monkeypatch):
    """All skipped (what the bundled CI gate gives outside a checkout): neither 0 (pass) nor 1 (regression)."""
    monkeypatch.delenv("ZINC_DBG_BIN", raising=False)
    gates = write_gates(
        tmp_path,
        [
            {"name": "absent", "kind": "recorded", "path": "recorded/none-*.json"},
            {"name": "no-engine", "kind": "validate", "engine_bin": "${ZINC_DBG_BIN}", "needs_gpu": False},
        ],
    )
    result = run_gates(load_gates(gates), results_dir=tmp_path / "r")
    assert result.exit_code == ExitCode.NOTHING_CHECKED == 6
    assert records.read(result.path)["verdict"]["status"] == "NOTHING CHECKED"
    assert run_gates(load_gates(gates), strict=True, results_dir=tmp_path / "r").exit_code == ExitCode.FAIL
    with pytest.raises(SystemExit) as exc:
        main(["gate", str(gates), "--results-dir", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert exc.value.code == 6
    (line,) = [line for line in out.splitlines() if line.startswith("gate ")]
    assert "NOTHING CHECKED" in line and "all 2 skipped" in line and "(exit 6)" in line


def test_one_check_that_ran_is_enough_for_a_pass(tmp_path):
    records.write(microbench_document(), tmp_path / "go.json")
    result = run_gates(
        load_gates(
            write_gates(
                tmp_path,
                [
                    {"name": "go", "kind": "recorded", "path": "go.json"},
                    {"name": "absent", "kind": "recorded", "path": "recorded/none-*.json"},
                ],
            )
        ),
        results_dir=tmp_path / "r",
    )
    assert result.exit_code == ExitCode.OK


@given(st.lists(st.sampled_from(list(Status)), min_size=1, max_size=8))
def test_the_gate_code_is_6_exactly_when_every_check_was_skipped(statuses):
    from zincbench.runs.gate import CODE_OF_STATUS, CheckOutcome, gate_code

    outcomes = [
        CheckOutcome(
            f"c{i}", "recorded", s, int(CODE_OF_STATUS.get(s, ExitCode.USAGE)), "why", skipped=s is Status.SKIPPED
        )
        for i, s in enumerate(statuses)
    ]
    code = gate_code(outcomes)
    assert (code == ExitCode.NOTHING_CHECKED) == all(s is Status.SKIPPED for s in statuses)
    assert code != ExitCode.OK or Status.PASS in statuses


def test_bundled_names_a_gate_shipped_in_the_package(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["gate", "--bundled", "gates_ci", "--json", "--results-dir", str(tmp_path)])
    out = json.loads(capsys.readouterr().out)
    assert exc.value.code == 0 and len(out["checks"]) == len(load_gates(EXPERIMENTS_DIR / "gates_ci.yaml").checks)
    with pytest.raises(SystemExit) as exc:
        main(["gate", "--bundled", "no-such-gate", "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "gates_ci" in err and "no-such-gate" in err
    with pytest.raises(SystemExit) as exc:
        main(["gate", str(EXPERIMENTS_DIR / "gates_ci.yaml"), "--bundled", "gates_ci", "--results-dir", str(tmp_path)])
    assert exc.value.code == 2 and "not both" in capsys.readouterr().err
