"""Declared kernel variants on a GPU: our engine-ABI test kernels and the engine pack's stand-ins are
checked against the float64 reference at odd shapes through the real runner, and specs that only a
launch can expose (unknown entry, NVRTC error, a workspace too small for the grid) are input errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from zincbench.bench.runner import run_microbench
from zincbench.errors import InputError

pytestmark = pytest.mark.gpu
FIXTURES = Path(__file__).parents[1] / "fixtures" / "engine_abi"
QUICK_TIMER = {
    "mode": "cold",
    "warmup": 1,
    "stopping": "noise",
    "min_samples": 5,
    "min_time_s": 0.0,
    "max_time_s": 0.05,
}


def _t2_experiment(tmp_path, packs, *, candidate="abi_switch", tokens_per_expert=(3, 20)) -> Path:
    spec = {
        "description": "declared variants at odd shapes",
        "weights": "q4_k",
        "k": 512,
        "top_k": 4,
        "shapes": [{"experts": 16, "rows": 96}],
        "tokens_per_expert": list(tokens_per_expert),
        "variants": ["matvec"],
        "kernel_packs": [str(p) for p in packs],
        "correctness_experts": 16,
        "timer": QUICK_TIMER,
        "gate": {"candidate": candidate, "baseline": "engine", "when": {}},
    }
    path = tmp_path / "t2.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _rows(doc):
    return {(r.case, r.variant): r for r in doc.results}


def test_declared_t2_variants_pass_their_checks(tmp_path, monkeypatch):
    monkeypatch.delenv("ZINC_SRC", raising=False)
    experiment = _t2_experiment(tmp_path, ["engine_zinc", FIXTURES / "pack.yaml"])
    doc, _, _ = run_microbench("t2", str(experiment), results_dir=tmp_path, ceilings=False, progress=False, seed=7)
    rows = _rows(doc)
    # T = 12 (engine: matvec path) and T = 80 (engine: order build + grouped TC), M = 96: a partial row tile.
    for case in ("E16-M96-K512-Ne3", "E16-M96-K512-Ne20"):
        for variant in (
            "matvec",
            "engine",
            "engine_matvec",
            "engine_grouped_tc",
            "abi_routed_dot",
            "abi_two_step",
            "abi_switch",
        ):
            row = rows[(case, variant)]
            assert row.passed, (case, variant, row.check)
            assert row.timed
    assert rows[("E16-M96-K512-Ne3", "engine")].detail["launches"][0]["kernel"] == "dmmv_q4k_experts_batched"
    tc = rows[("E16-M96-K512-Ne20", "engine")].detail
    assert [launch["kernel"] for launch in tc["launches"]] == [
        "build_expert_order_padded",
        "gemm_q4k_experts_grouped_tc",
    ]
    assert tc["source"] == "stand-in" and tc["nvrtc_options"][1:2] == ["--std=c++17"]
    assert doc.config["declared_sources"]["engine"] == "stand-in"
    assert doc.config["declared_sources"]["abi_two_step"] == "file"


def test_declared_t1_variants(tmp_path, monkeypatch):
    monkeypatch.delenv("ZINC_SRC", raising=False)
    spec = {
        "description": "declared dense",
        "tokens": [40, 300],
        "shapes": [{"name": "odd", "rows": 200, "k": 512}],
        "variants": ["round_trip"],
        "kernel_packs": ["engine_zinc"],
        "timer": QUICK_TIMER,
        "gate": {"candidate": "engine_round_trip", "baseline": "round_trip", "require": "same"},
    }
    path = tmp_path / "t1.yaml"
    path.write_text(yaml.safe_dump(spec))
    doc, _, _ = run_microbench("t1", str(path), results_dir=tmp_path, ceilings=False, progress=False, seed=3)
    rows = _rows(doc)
    for case in ("odd-q4_k-M200-K512-T40", "odd-q4_k-M200-K512-T300"):
        for variant in ("engine_round_trip", "engine_gemm_tc"):
            assert rows[(case, variant)].passed, (case, variant)
        # The stand-ins hold no lowsmem kernel: absent, not an error (it needs the engine's tree).
        assert rows[(case, "engine_tc_lowsmem")].skipped.startswith("absent")
    assert rows[("odd-q4_k-M200-K512-T40", "engine")].skipped.startswith("absent")
    assert rows[("odd-q4_k-M200-K512-T300", "engine")].passed


def _bad_pack(tmp_path, variant: dict, source_text: str | None = None) -> Path:
    source = FIXTURES / "abi_kernels.cu"
    if source_text is not None:
        source = tmp_path / "broken.cu"
        source.write_text(source_text)
    pack = {"sources": {"abi": {"path": str(source)}}, "variants": [{"family": "t2", **variant}]}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(pack))
    return path


OVERRUN = {
    "name": "overrun",
    "workspace": {"tmp": {"dtype": "f32", "shape": [16]}},
    "steps": [{"kernel": "abi_overrun", "grid": [1], "block": [64], "buffers": ["tmp"], "push": {"n": 64}}],
}
UNKNOWN_ENTRY = {"name": "typo", "steps": [{"kernel": "abi_routed_dott", "grid": [1], "block": [64], "buffers": ["y"]}]}
UNKNOWN_NAME = {
    "name": "names",
    "steps": [{"kernel": "abi_overrun", "grid": ["n_tokens"], "block": [64], "buffers": ["y"], "push": {"n": 1}}],
}


@pytest.mark.parametrize(
    "variant, source_text, message",
    [
        (OVERRUN, None, "workspace.tmp: a launch wrote past its end"),
        (UNKNOWN_ENTRY, None, "kernel: no kernel named 'abi_routed_dott'"),
        (UNKNOWN_NAME, None, "grid[0]: 'n_tokens': unknown name 'n_tokens'"),
        ({**UNKNOWN_ENTRY, "name": "broken"}, 'extern "C" __global__ void k( { }', "NVRTC failed"),
    ],
)
def test_specs_that_fail_at_launch_time(tmp_path, monkeypatch, variant, source_text, message):
    monkeypatch.delenv("ZINC_SRC", raising=False)
    pack = _bad_pack(tmp_path, variant, source_text)
    experiment = _t2_experiment(tmp_path, ["engine_zinc", pack], candidate=variant["name"], tokens_per_expert=(3,))
    with pytest.raises(InputError, match=re.escape(message)) as exc:
        run_microbench("t2", str(experiment), results_dir=tmp_path, ceilings=False, progress=False, seed=1)
    assert str(pack) in str(exc.value)
