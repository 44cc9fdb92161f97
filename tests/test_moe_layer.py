"""The `layer` family without a GPU: its float64 reference (top-k tie rule, the block), its config, the
engine block declared in engine_zinc.yaml, and the --gguf path on a tiny weights-only GGUF."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from zincbench.bench import declared, load_family
from zincbench.bench.moe_layer import TOPK_BLOCK, engine_topk, reference_block, silu
from zincbench.config import experiment_path
from zincbench.errors import ConfigError, InputError
from zincbench.quant import get_format
from zincbench.testing.weights_gguf import write_weights_gguf


def kernel_topk_ids(logits: np.ndarray, k: int) -> list[int]:
    """softmax_topk_batched's selection, step by step: each of 64 threads scans its indices i = tid,
    tid + 64, ... keeping the first strictly larger value; thread 0 then scans the threads in order
    keeping the first strictly larger; the winner is taken out (-inf) for the next round."""
    values = logits.astype(np.float64).copy()
    chosen = []
    for _ in range(k):
        best = []
        for tid in range(TOPK_BLOCK):
            v, at = -np.inf, None
            for i in range(tid, len(values), TOPK_BLOCK):
                if values[i] > v:
                    v, at = values[i], i
            best.append((v, at))
        bv, bi = -np.inf, None
        for v, at in best:
            if v > bv:
                bv, bi = v, at
        chosen.append(bi)
        values[bi] = -np.inf
    return chosen


@settings(max_examples=60)
@given(
    st.integers(8, 256).flatmap(
        lambda e: st.tuples(
            arrays(np.float32, e, elements=st.integers(-3, 3).map(float)),  # small integers: many exact ties
            st.integers(1, min(e, 8)),
        )
    )
)
@example((np.zeros(130, dtype=np.float32), 8))  # all tied: thread order, then index within a thread
def test_reference_topk_follows_the_kernels_tie_rule(case):
    logits, k = case
    ids, weights = engine_topk(logits[None, :], k)
    assert list(ids[0]) == kernel_topk_ids(logits, k)
    chosen = logits[ids[0]].astype(np.float64)
    expected = np.exp(chosen - chosen.max()) / np.exp(chosen - chosen.max()).sum()
    np.testing.assert_allclose(weights[0], expected, rtol=1e-12)


def test_ties_prefer_the_lower_thread_over_the_lower_index():
    logits = np.full(128, -1.0, dtype=np.float32)
    logits[[2, 65]] = 5.0  # index 65 is thread 1, index 2 thread 2
    ids, _ = engine_topk(logits[None, :], 2)
    assert list(ids[0]) == [65, 2]


def test_reference_block_is_the_per_token_formula(rng):
    t, n, ef, e, k, efs = 5, 16, 8, 6, 3, 4
    x, residual = rng.standard_normal((t, n)), rng.standard_normal((t, n))
    experts = [
        (rng.standard_normal((ef, n)), rng.standard_normal((ef, n)), rng.standard_normal((n, ef))) for _ in range(e)
    ]
    shared = (
        rng.standard_normal((efs, n)),
        rng.standard_normal((efs, n)),
        rng.standard_normal((n, efs)),
        rng.standard_normal(n),
    )
    ids = np.stack([rng.choice(e, k, replace=False) for _ in range(t)])
    weights = rng.random((t, k))
    got = reference_block(x, residual, ids, weights, lambda i: experts[i], shared)
    for tok in range(t):
        want = residual[tok].copy()
        for j in range(k):
            g, u, d = experts[ids[tok, j]]
            want += weights[tok, j] * (d @ (silu(g @ x[tok]) * (u @ x[tok])))
        g, u, d, gate_inp = shared
        want += (d @ (silu(g @ x[tok]) * (u @ x[tok]))) / (1 + np.exp(-(gate_inp @ x[tok])))
        np.testing.assert_allclose(got[tok], want, rtol=1e-10, atol=1e-10)


# ---- config ---------------------------------------------------------------------------------------------
def test_bundled_experiment_sweeps_both_down_types_routings_and_lengths():
    family = load_family("layer")
    cfg = family.load(experiment_path("moe_layer"))
    cases = family.cases(cfg)
    assert len(cases) == 2 * 2 * 4
    assert {c.params["down_type"] for c in cases} == {"q5_k", "q6_k"}
    assert {c.params["moe_layers"] for c in cases} == {36, 4}
    assert all(family.gate_applies(cfg, c) == (c.params["tokens"] >= 256) for c in cases)
    assert family.gate_rule(cfg).baseline == "engine" and family.gate_rule(cfg).candidate == "fused_block"


def _experiment(tmp_path, **shape_changes):
    data = yaml.safe_load(experiment_path("moe_layer").read_text())
    data["shapes"][0].update(shape_changes)
    path = tmp_path / "layer.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    "change, words",
    [
        ({"top_k": 300}, "top_k"),
        ({"experts": 512}, "E <= 256"),
        ({"down_types": ["q8_0"]}, "down_types"),
        ({"moe_layers": {"q4_k": 3}}, "moe_layers"),
        ({"expert_width": 704}, "256"),
    ],
)
def test_bad_shapes_are_config_errors(tmp_path, change, words):
    with pytest.raises(ConfigError, match=words):
        load_family("layer").load(_experiment(tmp_path, **change))


# ---- the engine's block as declared --------------------------------------------------------------------
def _plan(t: int, down_qtype: str = "q5k", ef_sh: int = 512):
    pack = declared.load_pack(experiment_path("engine_zinc"))
    params = {
        "T": t,
        "E": 256,
        "top_k": 8,
        "n_embd": 2048,
        "ef": 512,
        "ef_sh": ef_sh,
        "down_qtype": down_qtype,
        "shared_qtype": "q6k",
        "gate_slice": 1,
        "down_slice": 1,
    }
    names = declared._names(pack, declared.Binding({}, params, "hidden", None))
    return declared.expand(pack.variant("layer", "engine"), pack, names)


def _launched(plan) -> list[str]:
    return [getattr(step, "kernel", None) or step.op for step, _, _ in plan.steps]


def test_engine_block_switches_paths_at_moe_tc_min_t():
    below, at = _launched(_plan(63)), _launched(_plan(64))
    assert below.count("dmmv_q4k_experts_batched") == 2 and "dmmv_{down_qtype}_experts_batched" in below
    assert "gemm_q4k_experts_grouped_tc" not in below
    assert at.count("gemm_q4k_experts_grouped_tc") == 2 and "gemm_{down_qtype}_experts_grouped_tc" in at
    assert "build_expert_order_padded" in at and "dmmv_q4k_experts_batched" not in at
    for path in (below, at):  # the same router, combine and shared expert on both paths
        assert path[:3] == ["copy", "dmmv_f32_batched", "softmax_topk_batched"]
        assert "moe_weighted_acc_batched" in path and path[-1] == "sigmoid_scale_acc_batched"


def test_engine_block_down_on_q4k_layers_is_the_matvec():
    at = _launched(_plan(512, down_qtype="q4k"))
    assert "gemm_{down_qtype}_experts_grouped_tc" not in at and "dmmv_{down_qtype}_experts_batched" in at


def test_engine_block_stages_and_no_shared_expert():
    plan = _plan(512)
    stages = list(dict.fromkeys(stage for _, _, stage in plan.steps))
    assert stages == [
        "residual",
        "router+top-k",
        "routing build",
        "gate+up",
        "swiglu",
        "down",
        "combine",
        "shared expert",
    ]
    assert "shared expert" not in {stage for _, _, stage in _plan(512, ef_sh=0).steps}


# ---- --gguf ---------------------------------------------------------------------------------------------
E, N, EF, EFS = 8, 256, 256, 256


def _layer_gguf(path, layer=3, down="q5_k", skip=(), gate="q4_k"):
    tensors = {
        "ffn_gate_inp": ("f32", (E, N)),
        "ffn_gate_exps": (gate, (E, EF, N)),
        "ffn_up_exps": ("q4_k", (E, EF, N)),
        "ffn_down_exps": (down, (E, N, EF)),
        "ffn_gate_shexp": ("q6_k", (EFS, N)),
        "ffn_up_shexp": ("q6_k", (EFS, N)),
        "ffn_down_shexp": ("q6_k", (N, EFS)),
        "ffn_gate_inp_shexp": ("f32", (N,)),
    }
    return write_weights_gguf(
        path, {f"blk.{layer}.{role}.weight": spec for role, spec in tensors.items() if role not in skip}
    )


def test_gguf_layer_gives_the_shape_types_and_weights(tmp_path):
    path = tmp_path / "layer.gguf"
    written = _layer_gguf(path)
    family = load_family("layer")
    cfg = family.load(experiment_path("moe_layer"), gguf=str(path), layer=3)
    (shape,) = cfg.shapes
    assert (shape.experts, shape.n_embd, shape.expert_width, shape.down_types) == (E, N, EF, ["q5_k"])
    assert (shape.shared_width, shape.shared_type, shape.top_k, shape.moe_layers) == (EFS, "q6_k", 8, {"q5_k": 36})
    host, types = family._build_weights(cfg, shape, "q5_k", np.random.default_rng(0))
    np.testing.assert_array_equal(host["down"], written["blk.3.ffn_down_exps.weight"])
    np.testing.assert_array_equal(host["router"], written["blk.3.ffn_gate_inp.weight"])
    assert types["down"] == "q5_k" and host["shared_gate_inp"].shape == (N,)
    # the blocks read back dequantize to what was written
    np.testing.assert_array_equal(
        get_format("q5_k").dequantize(host["down"][1]),
        get_format("q5_k").dequantize(written["blk.3.ffn_down_exps.weight"][1]),
    )


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"skip": ("ffn_gate_inp",)}, "ffn_gate_inp"),
        ({"skip": ("ffn_up_shexp",)}, "part of the shared expert"),
        ({"gate": "q6_k"}, "read q4_k"),
    ],
)
def test_gguf_layers_the_block_cannot_run_are_input_errors(tmp_path, kwargs, words):
    path = tmp_path / "layer.gguf"
    _layer_gguf(path, **kwargs)
    with pytest.raises(InputError, match=words):
        load_family("layer").load(experiment_path("moe_layer"), gguf=str(path), layer=3)


def test_gguf_layer_without_experts_is_an_input_error(tmp_path):
    path = tmp_path / "layer.gguf"
    _layer_gguf(path)
    with pytest.raises(InputError, match="layer 5"):
        load_family("layer").load(experiment_path("moe_layer"), gguf=str(path), layer=5)


# ---- the per-stage table and the projection --------------------------------------------------------------
def _layer_document(rng) -> tuple[dict, dict]:
    results, block = [], {}
    for down, layers in (("q5_k", 36), ("q6_k", 4)):
        for t in (256, 2048):
            case = f"qwen36-35b-a3b-{down.replace('_', '')}-T{t}-uniform"
            for variant, stages in (
                ("engine", ["residual", "router+top-k", "gate+up", "swiglu", "down", "combine"]),
                ("fused_block", ["residual", "router+top-k", "gate+up+swiglu", "down+combine"]),
            ):
                times = rng.uniform(5, 500, len(stages))
                block[(down, t, variant)] = float(times.sum())
                results.append(
                    {
                        "case": case,
                        "variant": variant,
                        "role": "x",
                        "params": {
                            "shape": "qwen36-35b-a3b",
                            "routing": "uniform",
                            "tokens": t,
                            "down_type": down,
                            "moe_layers": layers,
                        },
                        "summary": {"median_us": float(times.sum())},
                        "floor": {"pct_of_floor": 42.0},
                        "detail": {"stages_us": [{"stage": s, "median_us": float(v)} for s, v in zip(stages, times)]},
                    }
                )
    doc = {
        "results": results,
        "verdict": {"rule": {"baseline": "engine", "candidate": "fused_block"}},
        "environment": {"gpu": {"name": "NVIDIA H200"}},
        "config": {"settings": {"llama_cpp_pp_tps": {"H200": {"2048": 5000.0}}}},
    }
    return doc, block


def test_projection_is_tokens_over_the_moe_layers_time(rng):
    from zincbench.show.stage_table import projection

    doc, block = _layer_document(rng)
    headers, rows = projection(doc)
    by_t = {int(r[1]): dict(zip(headers, r)) for r in rows}
    for t in (256, 2048):
        before = 36 * block[("q5_k", t, "engine")] + 4 * block[("q6_k", t, "engine")]
        after = 36 * block[("q5_k", t, "fused_block")] + 4 * block[("q6_k", t, "fused_block")]
        assert by_t[t]["layers"] == "40"
        assert (
            by_t[t]["eng tok/s"] == f"{t / (before * 1e-6):.0f}"
            and by_t[t]["ours tok/s"] == f"{t / (after * 1e-6):.0f}"
        )
        assert by_t[t]["saved ms"] == f"{(before - after) / 1e3:.2f}"
    assert by_t[2048]["llama.cpp pp tok/s"] == "5000" and by_t[256]["llama.cpp pp tok/s"] == "–"


def test_stage_tables_fit_80_columns_and_keep_every_stage(rng):
    from rich.console import Console

    from zincbench.show.stage_table import print_stage_tables, stage_markdown, stage_tables

    doc, _ = _layer_document(rng)
    tables = stage_tables(doc)
    assert len(tables) == 2  # one per down type: the T columns side by side
    title, headers, rows = tables[0]
    assert headers == ["stage (µs)", "T256 eng", "T256 ours", "T2048 eng", "T2048 ours"]
    assert [r[0] for r in rows] == [
        "residual",
        "router+top-k",
        "gate+up",
        "swiglu",
        "down",
        "combine",
        "gate+up+swiglu",
        "down+combine",
        "block",
        "% of floor",
    ]
    console = Console(width=80, record=True, force_terminal=False)
    print_stage_tables(doc, console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "down+combine" in text and "saved" in text  # the projection follows the stage tables
    assert "| gate+up+swiglu |" in stage_markdown(doc)


def test_cli_refuses_a_layer_it_cannot_run_in_one_line(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    def microbench(*args):
        env = {**os.environ, "ZINCBENCH_RESULTS": str(tmp_path / "results"), "COLUMNS": "250"}
        return subprocess.run(
            [sys.executable, "-m", "zincbench", "microbench", "layer", *map(str, args)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=Path(__file__).resolve().parent.parent,
        )  # this checkout's zincbench

    _layer_gguf(tmp_path / "bad.gguf", down="q4_k", gate="q6_k")
    for args, words in (
        ((f"--gguf={tmp_path / 'bad.gguf'}", "--layer=3"), "ffn_gate_exps is q6_k"),
        ((f"--gguf={tmp_path / 'missing.gguf'}",), "missing.gguf"),
    ):
        result = microbench(*args)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert len(result.stderr.splitlines()) == 1 and words in result.stderr, result.stderr
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def _recorded_layer_document(tmp_path):
    """A runner-shaped `layer` document (tests/documents.py) with stage times on the gate's pair."""
    from documents import microbench_document

    from zincbench import records

    doc = microbench_document("layer")
    for row in doc.results:
        if row.variant in ("engine", "fused_block"):
            share = [0.05, 0.1, 0.5, 0.35] if row.variant == "fused_block" else [0.05, 0.1, 0.3, 0.1, 0.3, 0.15]
            names = (
                ["residual", "router+top-k", "gate+up+swiglu", "down+combine"]
                if row.variant == "fused_block"
                else ["residual", "router+top-k", "gate+up", "swiglu", "down", "combine"]
            )
            row.detail = {
                **(row.detail or {}),
                "stages_us": [{"stage": n, "median_us": f * row.summary.median_us} for n, f in zip(names, share)],
            }
    return records.write(doc, tmp_path / "layer.json")


def test_recorded_layer_document_renders_stage_tables_and_projection(tmp_path):
    import json

    from rich.console import Console

    from zincbench.show.microbench_table import microbench_markdown, print_microbench

    doc = json.loads(_recorded_layer_document(tmp_path).read_text())
    console = Console(width=80, record=True, force_terminal=False)
    print_microbench(doc, console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert text.count("stages: qwen36-35b-a3b") == 4  # two down types x two routings
    markdown = microbench_markdown(doc)
    assert "| gate+up+swiglu |" in markdown and "MoE part of one prefill" in markdown


def test_layer_stage_plot_is_written(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra is not installed (pip install -e '.[plot]')")
    from zincbench.report import build_report
    from zincbench.show.plots import plot_report

    written = plot_report(build_report([_recorded_layer_document(tmp_path)]), tmp_path / "plots")
    assert [p.name for p in written] == ["layer_stages.png"]
    assert (tmp_path / "plots" / "layer_stages.png").read_bytes().startswith(b"\x89PNG")


def test_llama_cpp_pp_numbers_are_keyed_by_prompt_length(tmp_path):
    data = yaml.safe_load(experiment_path("moe_layer").read_text())
    data["llama_cpp_pp_tps"] = {"H200": {512: 1234.5}}
    (tmp_path / "ok.yaml").write_text(yaml.safe_dump(data))
    assert load_family("layer").load(tmp_path / "ok.yaml").llama_cpp_pp_tps == {"H200": {"512": 1234.5}}
    data["llama_cpp_pp_tps"] = {"H200": {"pp512": 1234.5}}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="llama_cpp_pp_tps.H200"):
        load_family("layer").load(tmp_path / "bad.yaml")


def test_gpu_orchestration_dry_run(tmp_path):
    """Both blocks built, run and checked with CuPy stood in by NumPy and every launch checked against the
    kernel's parameter list (tests/fixtures/layer_dryrun.py): Python and launch-ABI errors in GPU-only code
    show up here. In a subprocess: the stand-in `cupy` must never be seen by other tests."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "tests" / "fixtures" / "fakecupy"), str(root)])}
    result = subprocess.run(
        [sys.executable, str(root / "tests" / "fixtures" / "layer_dryrun.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=root,
    )
    assert result.returncode == 0 and result.stdout.strip().endswith("dry run ok"), result.stderr[-3000:]


def test_every_down_type_has_a_fused_and_a_cublas_down():
    """fused_block's down is the fused kernel with the combine epilogue on every type the family reads (the
    kernel has a format policy for each); fused_block_cublas_down is dequant + cuBLAS on every type."""
    from zincbench.bench.moe_layer import DOWN_TYPES
    from zincbench.ops.fused import POLICIES
    from zincbench.ops.moe_layer import DOWN_PATHS, DequantCublasDown, FusedDownCombine

    assert DOWN_PATHS["fused"] == dict.fromkeys(DOWN_TYPES, FusedDownCombine)
    assert DOWN_PATHS["cublas"] == dict.fromkeys(DOWN_TYPES, DequantCublasDown)
    assert set(DOWN_TYPES) <= set(POLICIES)


def _topk_keys(logits: np.ndarray) -> np.ndarray:
    """kernels/moe_routing.cu moe_topk_softmax's 64-bit keys, in NumPy: the logit's order as an unsigned
    (-0 as +0) over the complement of the engine's rank; 0 where a logit is never chosen."""
    t, e = logits.shape
    u = logits.view(np.uint32).copy()
    u[u == 0x80000000] = 0
    order = np.where(u >> 31 == 1, ~u, u ^ np.uint32(0x80000000)).astype(np.uint64)
    i = np.arange(e, dtype=np.uint64)
    per_thread = np.uint64((e + 63) // 64)
    rank = (i & np.uint64(63)) * per_thread + (i >> np.uint64(6))
    keys = (order << np.uint64(32)) | (np.uint64(0xFFFFFFFF) - rank)
    return np.where(logits > -np.inf, keys, np.uint64(0))  # NaN and -inf: never chosen


@pytest.mark.parametrize("experts", [24, 64, 130, 256])
def test_topk_kernel_keys_order_logits_as_the_engine_chooses(experts):
    """The warp top-k picks the k largest keys (a max per lane, then over the warp); those must be the
    engine's choice, exact ties, signed zeros, -inf and NaN included, and a key must give back its index."""
    from zincbench.bench.moe_layer import engine_topk

    rng = np.random.default_rng(experts)
    logits = rng.integers(-2, 3, size=(200, experts)).astype(np.float32)
    logits[:, ::7] = -0.0
    logits[:, 3::11] = np.nan
    logits[:, 5::13] = -np.inf
    logits[:20] += rng.standard_normal((20, experts), dtype=np.float32)
    keys = _topk_keys(logits)
    k = 8
    by_key = np.argsort(keys, axis=1)[:, ::-1][:, :k]  # keys are unique where valid
    ids, _ = engine_topk(np.where(np.isnan(logits), -np.inf, logits), k)
    np.testing.assert_array_equal(by_key, ids)
    per_thread = (experts + 63) // 64
    rank = (0xFFFFFFFF - (keys & 0xFFFFFFFF)).astype(np.int64)
    back = (rank % per_thread) * 64 + rank // per_thread
    valid = keys > 0
    np.testing.assert_array_equal(back[valid], np.broadcast_to(np.arange(experts), keys.shape)[valid])
