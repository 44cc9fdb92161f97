"""T3 on the CPU: the float64 references of the gated delta-net block (the chunk form against the
recurrence, the recurrence against a per-thread transcription of the engine's block kernel, conv1d and
the gated norm against direct formulas), the experiment YAML, the engine pack's push structs against
kernels/ssm_scan.cu, and the share table (arithmetic, 80 columns)."""

from __future__ import annotations

import re
import types

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from rich.console import Console

from zincbench.bench import load_family
from zincbench.bench.declared import LaunchStep, load_pack
from zincbench.bench.rows import MicrobenchRow, Summary
from zincbench.config import experiment_path
from zincbench.errors import ConfigError
from zincbench.gpu.kernel_abi import kernel_abi
from zincbench.gpu.runtime import KERNELS_DIR
from zincbench.reference import ssm_ref
from zincbench.reference.ssm_ref import SsmDims
from zincbench.show import t3_view


def _scan_inputs(rng, dims: SsmDims, t: int, slow_heads: bool = True):
    """Raw buffers as the family draws them: decays from fast to ~0.999 (slow_heads) so state crosses chunks."""
    h = dims.dt_rank
    dt = np.exp(rng.uniform(np.log(1e-3), np.log(0.1), size=h)) if slow_heads else rng.uniform(0.5, 2.0, size=h)
    return dict(
        conv_out=rng.standard_normal((t, dims.conv_channels)),
        alpha=0.5 * rng.standard_normal((t, h)),
        beta=rng.standard_normal((t, h)),
        dt_bias=np.log(np.expm1(dt)),
        ssm_a=-rng.uniform(1, 16, size=h),
        state=0.5 * rng.standard_normal((h, dims.head_v_dim, dims.d_state)),
    )


dims_strategy = st.builds(
    lambda groups, per_group, hv, ds: SsmDims(groups * per_group, hv, ds, groups),
    st.integers(1, 3),
    st.integers(1, 3),
    st.sampled_from([4, 8, 16]),
    st.sampled_from([4, 8, 16]),
)


@given(dims=dims_strategy, t=st.integers(1, 150), chunk=st.sampled_from([1, 7, 16, 64]), seed=st.integers(0, 2**32 - 1))
@example(dims=SsmDims(4, 16, 16, 2), t=37, chunk=64, seed=1)
@example(dims=SsmDims(6, 8, 16, 3), t=130, chunk=64, seed=2)
@example(dims=SsmDims(2, 8, 8, 2), t=128, chunk=64, seed=3)  # whole chunks only
def test_the_chunk_form_equals_the_recurrence(dims, t, chunk, seed):
    b = _scan_inputs(np.random.default_rng(seed), dims, t)
    args = (b["conv_out"], b["alpha"], b["beta"], b["dt_bias"], b["ssm_a"], b["state"], dims)
    out, state = ssm_ref.delta_net_block(*args)
    q, k, v = ssm_ref.split_qkv(b["conv_out"], dims)
    log_g = ssm_ref.gate_log(b["alpha"], b["dt_bias"], b["ssm_a"])
    out_c, state_c = ssm_ref.delta_net_chunked(q, k, v, log_g, ssm_ref.sigmoid(b["beta"]), b["state"], chunk=chunk)
    np.testing.assert_allclose(out_c, out, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(state_c, state, rtol=1e-9, atol=1e-10)


def _block_kernel_transcription(conv_out, alpha, beta, dt_bias, ssm_a, state, dims: SsmDims):
    """zinc-kernels.md §1.7 read literally: block (h, col), thread row holds state[h][col][row]."""
    t_len, hv, ds, qk = conv_out.shape[0], dims.head_v_dim, dims.d_state, dims.qk_dim
    out = np.zeros((t_len, dims.d_inner))
    s = np.array(state, np.float64)
    for h in range(dims.dt_rank):
        grp = h if dims.n_group == dims.dt_rank else h % dims.n_group
        for col in range(hv):
            rs = [s[h, col, row] for row in range(ds)]
            for t in range(t_len):
                x = conv_out[t]
                q = [x[grp * ds + row] for row in range(ds)]
                k = [x[qk + grp * ds + row] for row in range(ds)]
                qn = 1.0 / np.sqrt(max(sum(v * v for v in q), 1e-12)) / np.sqrt(ds)
                kn = 1.0 / np.sqrt(max(sum(v * v for v in k), 1e-12))
                q, k = [v * qn for v in q], [v * kn for v in k]
                g = np.exp(np.log(1 + np.exp(alpha[t, h] + dt_bias[h])) * ssm_a[h])
                b = 1 / (1 + np.exp(-beta[t, h]))
                rs = [g * r for r in rs]
                sk = sum(r * kk for r, kk in zip(rs, k))
                d = b * (x[2 * qk + h * hv + col] - sk)
                rs = [r + kk * d for r, kk in zip(rs, k)]
                out[t, h * hv + col] = sum(r * qq for r, qq in zip(rs, q))
            s[h, col] = rs
    return out, s


@pytest.mark.parametrize("dims", [SsmDims(4, 4, 4, 2), SsmDims(2, 4, 4, 2)], ids=["grouped", "one-group-per-head"])
def test_the_recurrence_is_the_block_kernels_semantics(dims, rng):
    b = _scan_inputs(rng, dims, 9)
    args = (b["conv_out"], b["alpha"], b["beta"], b["dt_bias"], b["ssm_a"], b["state"], dims)
    out, state = ssm_ref.delta_net_block(*args)
    want_out, want_state = _block_kernel_transcription(*args)
    np.testing.assert_allclose(out.reshape(9, -1), want_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state, want_state, rtol=1e-12, atol=1e-12)
    heads = [1, 3] if dims.dt_rank == 4 else [1]
    out_h, state_h = ssm_ref.delta_net_block(*args, heads=heads)
    np.testing.assert_allclose(out_h, out[:, heads])
    np.testing.assert_allclose(state_h, state[heads])


def test_the_gate_without_ssm_a_is_exp_of_minus_softplus():
    alpha = np.array([[-3.0, 0.0, 2.5]])
    np.testing.assert_allclose(np.exp(ssm_ref.gate_log(alpha, None, None)), 1 / (1 + np.exp(alpha)), rtol=1e-12)
    np.testing.assert_allclose(ssm_ref.gate_log(alpha, np.ones(3), -2 * np.ones(3)), -2 * np.log1p(np.exp(alpha + 1)))


@pytest.mark.parametrize("d_conv, offset", [(4, 0), (4, 2), (2, 0), (5, 7)])
def test_conv1d_is_a_causal_conv_over_the_history(d_conv, offset, rng):
    t, c = 11, 5
    x, w = rng.standard_normal((t, c)), rng.standard_normal((c, d_conv))
    state = rng.standard_normal((d_conv - 1, c))
    slots = d_conv - 1
    history = np.concatenate([state[[(offset + i) % slots for i in range(slots)]], x])  # oldest first
    want = np.stack([(history[i : i + d_conv] * w.T).sum(0) for i in range(t)])
    want = want / (1 + np.exp(-want))
    out, new_state = ssm_ref.conv1d_batched(x, w, state, offset)
    np.testing.assert_allclose(out, want, rtol=1e-12)
    new_offset = (offset + t) % slots
    np.testing.assert_allclose(new_state[[(new_offset + i) % slots for i in range(slots)]], history[-slots:])


@pytest.mark.parametrize("per_head", [True, False])
def test_gated_norm_per_head(per_head, rng):
    dims = SsmDims(3, 8, 4, 1)
    o, z = rng.standard_normal((5, 24)), rng.standard_normal((5, 24))
    w = rng.standard_normal(24 if per_head else 4)
    out = ssm_ref.gated_norm(o, z, w, dims, per_head)
    for t in range(5):
        for h in range(3):
            sl = slice(8 * h, 8 * h + 8)
            idx = np.arange(8 * h, 8 * h + 8) if per_head else np.arange(8) % 4
            want = o[t, sl] / np.sqrt(np.mean(o[t, sl] ** 2) + 1e-6) * w[idx] * z[t, sl] / (1 + np.exp(-z[t, sl]))
            np.testing.assert_allclose(out[t, sl], want, rtol=1e-12)


# ---- the experiment and the engine pack --------------------------------------------------------------
def test_the_bundled_experiment_sweeps_both_models():
    family = load_family("t3")
    cfg = family.load(experiment_path(family.default_experiment))
    cases = family.cases(cfg)
    assert {m.name for m in cfg.models} == {"qwen35-9b", "qwen36-27b"}
    assert len(cases) == 2 * 4 * 7  # T 512, 1024, 2048, 8192 (the fla anchor's lengths)
    assert (cfg.gate.candidate, cfg.gate.baseline, cfg.gate.require) == ("chunked", "engine", "faster")
    gated = [c.key for c in cases if family.gate_applies(cfg, c)]
    assert gated and all("-scan-" in k for k in gated)
    assert len(gated) == 2 * 4  # every T >= 512 of both models
    m27 = next(m for m in cfg.models if m.name == "qwen36-27b")
    assert (m27.dims.d_inner, m27.dims.conv_channels) == (6144, 10240)  # zinc-kernels.md §4
    assert m27.projection("ssm_out") == (5120, 6144)


@pytest.mark.parametrize(
    "edit, key",
    [
        ({"stages": ["scan", "bogus"]}, "stages"),
        ({"variants": ["engine", "nope"]}, "variants"),
        ({"tokens": []}, "tokens"),
        ({"gate": {"candidate": "chunked", "baseline": "engine", "when": {"weights": 1}}}, "gate.when"),
    ],
)
def test_a_bad_experiment_is_one_config_error(tmp_path, edit, key):
    import yaml

    spec = yaml.safe_load(experiment_path("t3_ssm_scan").read_text()) | edit
    path = tmp_path / "t3.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError, match=re.escape(key)):
        load_family("t3").load(path)


@pytest.mark.parametrize(
    "variant, struct",
    [
        ("engine_block", "DeltaNetPush"),
        ("engine_warp", "DeltaNetWarpPush"),
        ("engine_conv1d", "ConvBatchPush"),
        ("engine_gated_norm", "GatedNormBatchPush"),
    ],
)
def test_the_engine_pack_pushes_the_structs_of_the_kernels(variant, struct):
    pack = load_pack(experiment_path("engine_zinc"))
    declared = pack.variant("t3", variant)
    assert declared.optional  # an engine source without the SSM kernels reports them absent
    (step,) = declared.steps
    assert isinstance(step, LaunchStep)
    abi = kernel_abi((KERNELS_DIR / "ssm_scan.cu").read_text(), step.kernel)
    assert abi.push.name == struct and set(step.push) == set(abi.push.names)
    assert "ssm_scan.cu" in pack.sources[step.source].stand_in


# ---- the share table ----------------------------------------------------------------------------------
def _row(model, t, stage, variant, median):
    summary = Summary(
        n=20,
        median_us=median,
        p90_us=median,
        mean_us=median,
        stdev_us=0.0,
        min_us=median,
        max_us=median,
        median_ci_us=[median, median],
        p90_ci_us=[median, median],
        rel_noise=0.0,
    )
    return MicrobenchRow(
        family="t3",
        case=f"{model}-{stage}-T{t}",
        params={"model": model, "stage": stage, "tokens": t},
        variant=variant,
        role="baseline",
        summary=summary,
    )


def _document(medians: dict) -> dict:
    from zincbench import records

    rows = [_row("qwen36-27b", 2048, stage, variant, us) for (stage, variant), us in medians.items()]
    return records.to_jsonable({"config": {"family": "t3"}, "results": rows})


def test_the_share_table_sums_the_stages():
    medians = {
        ("scan", "engine"): 6000.0,
        ("scan", "chunked"): 500.0,
        ("scan", "block"): 9000.0,
        ("conv1d", "engine"): 100.0,
        ("norm", "engine"): 50.0,
        ("attn_qkv", "engine"): 400.0,
        ("attn_gate", "engine"): 250.0,
        ("ssm_alpha_beta", "engine"): 60.0,
        ("ssm_out", "engine"): 240.0,
    }
    (row,) = t3_view.share_rows(_document(medians))
    assert row["proj"] == pytest.approx(950.0)
    assert row["layer"] == pytest.approx(7100.0)
    assert row["share"] == pytest.approx(6000 / 7100)
    assert row["share_chunked"] == pytest.approx(500 / 1600)
    del medians[("ssm_out", "engine")]  # a stage that did not run: no layer, no share, nothing made up
    (row,) = t3_view.share_rows(_document(medians))
    assert row["proj"] is None and row["layer"] is None and row["share"] is None


def test_the_share_table_fits_80_columns():
    medians = {
        ("scan", "engine"): 123456.0,
        ("scan", "chunked"): 12345.0,
        ("conv1d", "engine"): 1234.0,
        ("norm", "engine"): 1234.0,
        ("attn_qkv", "engine"): 12345.0,
        ("attn_gate", "engine"): 1234.0,
        ("ssm_alpha_beta", "engine"): 1234.0,
        ("ssm_out", "engine"): 1234.0,
    }
    console = Console(width=80, record=True, force_terminal=False)
    t3_view.print_view(_document(medians), console)
    text = console.export_text()
    assert "qwen36-27b" in text and "123456" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    markdown = t3_view.markdown_view(_document(medians))
    assert "| qwen36-27b | 2048 | 123456 | 12345 |" in markdown
    share = 123456 / (123456 + 1234 * 5 + 12345)
    chunked = 12345 / (12345 + 1234 * 5 + 12345)
    assert f"{100 * share:.0f}%→{100 * chunked:.0f}%" in text


def test_the_scan_table_puts_the_candidate_beside_fla():
    medians = {
        ("scan", "engine"): 488.0,
        ("scan", "chunked"): 150.0,
        ("scan", "fla"): 120.0,
        ("scan", "fla_bf16"): 60.0,
        ("conv1d", "engine"): 246.0,
    }
    (row,) = t3_view.scan_rows(_document(medians))
    assert row["vs_fla"] == pytest.approx(1.25) and row["vs_fla_bf16"] == pytest.approx(2.5)
    assert row["engine_warp"] is None
    markdown = t3_view.markdown_view(_document(medians))
    assert "| qwen36-27b | 2048 | – | 488 | 150 | 120 | 60 | 1.25× | 2.50× |" in markdown
    console = Console(width=80, record=True)
    t3_view.print_view(_document(medians), console)
    assert max(len(line) for line in console.export_text().splitlines()) <= 80


def test_the_microbench_table_appends_the_families_view():
    from zincbench.show.microbench_table import family_view

    assert family_view("t3") is t3_view
    assert family_view("t1") is None


STAGE_TENSORS = {
    "scan": {"conv_out", "dt_bias", "alpha", "beta", "ssm_a", "state", "out"},
    "conv1d": {"x", "weight", "state", "out"},
    "norm": {"o", "z", "weight", "out"},
}


def test_the_engine_packs_t3_launches_evaluate_in_every_case():
    """Every t3 declaration applies to exactly one SSM stage, names only that stage's tensors, and its
    grid, block, shared bytes and push fields evaluate to the engine's geometry in every bundled case."""
    from zincbench.bench.declared import Binding, _names, expand
    from zincbench.bench.expressions import evaluate, evaluate_int
    from zincbench.measure.traffic import Traffic

    family = load_family("t3")
    cfg = family.load(experiment_path(family.default_experiment))
    pack = load_pack(experiment_path("engine_zinc"))
    for case in family.cases(cfg):
        params = family.declared_params(cfg, case)
        names = _names(pack, Binding({}, params, "out", Traffic(0, 0)))
        applying = [v for v in pack.variants["t3"].values() if evaluate(v.applies, names)]
        if case.params["stage"] not in STAGE_TENSORS:
            assert not applying, case.key
            continue
        assert len(applying) == (2 if case.params["stage"] == "scan" else 1), case.key
        for variant in applying:
            for step, step_names, _stage in expand(variant, pack, names).steps:
                assert set(step.buffers) <= STAGE_TENSORS[case.params["stage"]], (variant.info.name, step.buffers)
                grid = [evaluate_int(e, step_names, minimum=1) for e in step.grid]
                block = [evaluate_int(e, step_names, minimum=1) for e in step.block]
                push = {f: evaluate(e, step_names) for f, e in step.push.items()}
                assert push.get("n_tok", params["T"]) == params["T"]
                if step.kernel == "ssm_delta_net_warp":
                    assert grid == [params["dt_rank"], 32] and block == [32, 4]
                    assert evaluate_int(step.shared, step_names) == 2 * params["T"] * 4
                elif step.kernel == "ssm_delta_net":
                    assert grid == [params["dt_rank"], 128] and block == [128] and push["preprocessed"] == 0
                elif step.kernel == "ssm_conv1d_batched":
                    assert grid == [-(-params["conv_channels"] // 64)] and block == [64]
                else:
                    assert grid == [params["dt_rank"], params["T"]] and block == [128]


# ---- the family's inputs and check, with NumPy standing in for CuPy ----------------------------------
class _HostArray(np.ndarray):
    def get(self):
        return np.asarray(self).copy()

    @property
    def data(self):  # CuPy's device pointer: here the host address, unique per buffer
        return types.SimpleNamespace(ptr=self.ctypes.data)


@pytest.fixture
def numpy_as_cupy(monkeypatch):
    """A CuPy look-alike over NumPy: enough for the family's input building, reset and check."""
    import sys
    import types

    fake = types.ModuleType("cupy")
    fake.float32 = np.float32
    fake.ndarray = np.ndarray  # the launchers' buffer checks
    fake.asarray = lambda a: np.array(a).view(_HostArray)
    fake.empty = lambda shape, dtype: np.empty(shape, dtype).view(_HostArray)
    fake.isnan = np.isnan
    fake.cuda = types.SimpleNamespace(Device=lambda: types.SimpleNamespace(synchronize=lambda: None))
    monkeypatch.setitem(sys.modules, "cupy", fake)


def _small_experiment(tmp_path):
    import yaml

    spec = {
        "description": "small",
        "tokens": [37],
        "check_heads": 3,
        "models": [{"name": "small", "n_embd": 256, "dt_rank": 4, "head_v_dim": 8, "d_state": 8, "n_group": 2}],
        "gate": {"candidate": "chunked", "baseline": "engine", "when": {}},
    }
    path = tmp_path / "t3.yaml"
    path.write_text(yaml.safe_dump(spec))
    family = load_family("t3")
    return family, family.load(path)


def test_the_family_checks_outputs_and_the_final_state_of_the_sampled_heads(tmp_path, numpy_as_cupy, rng):
    family, cfg = _small_experiment(tmp_path)
    case = next(c for c in family.cases(cfg) if c.params["stage"] == "scan")
    inp = family.build_inputs(cfg, case, rng)
    assert len(inp.heads) == 3
    h = inp.host
    out, state = ssm_ref.delta_net_block(
        h["conv_out"], h["alpha"], h["beta"], h["dt_bias"], h["ssm_a"], h["state"], inp.dims
    )
    inp.dev["out"][...] = out.reshape(37, -1)  # what a correct kernel leaves behind
    inp.dev["state"][...] = state
    rel, written = family.check(cfg, case, inp, inp.dev["out"])
    assert written and rel < 1e-6
    inp.dev["state"][...] = state.transpose(0, 2, 1)  # [h][k][v]: the wrong layout
    assert family.check(cfg, case, inp, inp.dev["out"])[0] > 0.1
    inp.reset()  # the initial state again, not a final one
    np.testing.assert_array_equal(inp.dev["state"], h["state"])
    assert family.check(cfg, case, inp, inp.dev["out"])[0] > 0.1
    inp.dev["state"][...] = state
    inp.dev["out"][5, :] = np.nan
    rel, written = family.check(cfg, case, inp, inp.dev["out"])
    assert not written


@pytest.mark.parametrize("stage", ["conv1d", "norm"])
def test_the_family_checks_conv1d_and_norm(tmp_path, numpy_as_cupy, rng, stage):
    family, cfg = _small_experiment(tmp_path)
    case = next(c for c in family.cases(cfg) if c.params["stage"] == stage)
    inp = family.build_inputs(cfg, case, rng)
    h = inp.host
    if stage == "conv1d":
        from zincbench.bench.t3_ssm import CONV_STATE_OFFSET

        out, state = ssm_ref.conv1d_batched(h["x"], h["weight"], h["state"], CONV_STATE_OFFSET)
        inp.dev["state"][...] = state
    else:
        out = ssm_ref.gated_norm(h["o"], h["z"], h["weight"], inp.dims, cfg.norm_per_head)
    inp.dev["out"][...] = out
    assert family.check(cfg, case, inp, inp.dev["out"])[0] < 1e-6
    inp.dev["out"][...] = 1.01 * out
    assert family.check(cfg, case, inp, inp.dev["out"])[0] > 5e-3


# ---- the launchers (zincbench/ops/ssm.py) against the engine pack's declared launches ----------------------
class _RecordedLaunch:
    def __init__(self, function, grid, block, shared_bytes, params, buffers):
        self.name, self.grid, self.block, self.shared, self.params = function, grid, block, shared_bytes, params
        self.buffers = buffers


@pytest.mark.parametrize(
    "kind, declared_variant",
    [
        ("warp", "engine_warp"),
        ("block", "engine_block"),
        ("chunked", "engine_warp"),
        ("conv1d", "engine_conv1d"),
        ("norm", "engine_gated_norm"),
    ],
)
def test_the_launchers_pack_what_the_engine_pack_declares(monkeypatch, numpy_as_cupy, rng, kind, declared_variant):
    """ops/ssm.py and experiments/engine_zinc.yaml name their push values independently; both lay them out
    through the kernel's own struct (kernel_abi). The launcher's whole parameter buffer must equal the one
    the declared step packs for the same case: the same buffers in the kernel's order, the same values.
    The chunked candidate takes the warp kernel's buffers and push."""
    from zincbench.bench.declared import Binding, _names, expand
    from zincbench.bench.expressions import evaluate, evaluate_int
    from zincbench.bench.t3_ssm import CONV_STATE_OFFSET, SsmModel, T3Config
    from zincbench.gpu import nvrtc, runtime
    from zincbench.gpu.kernel_abi import kernel_abi
    from zincbench.measure.traffic import Traffic
    from zincbench.ops import ssm

    monkeypatch.setattr(runtime, "load_module", lambda source: types.SimpleNamespace(function=lambda name: name))
    monkeypatch.setattr(nvrtc, "PackedLaunch", _RecordedLaunch)
    monkeypatch.setattr(ssm, "chunked_shared_bytes", lambda: 160 * 1024)
    monkeypatch.setattr(ssm, "shared_limit", lambda: 227 * 1024)
    family = load_family("t3")
    # T not a multiple of the chunked kernel's 64 tokens; hv = d_state = 128 so every scan kind applies
    cfg = T3Config(description="launch", tokens=[37], models=[SsmModel("m", 256, 2, 128, 128, 1)])
    stage = {"conv1d": "conv1d", "norm": "norm"}.get(kind, "scan")
    case = next(c for c in family.cases(cfg) if c.params["stage"] == stage)
    inp = family.build_inputs(cfg, case, rng)
    d = inp.dev
    if stage == "scan":
        op = ssm.DeltaNetScan(
            kind, inp.dims, d["conv_out"], d["dt_bias"], d["alpha"], d["beta"], d["ssm_a"], d["state"], d["out"]
        )
    elif stage == "conv1d":
        op = ssm.Conv1dBatched(d["x"], d["weight"], d["state"], d["out"], CONV_STATE_OFFSET)
    else:
        op = ssm.GatedNorm(inp.dims, d["o"], d["z"], d["weight"], d["out"], norm_per_head=cfg.norm_per_head)
    launch = op.launch

    pack = load_pack(experiment_path("engine_zinc"))
    names = _names(pack, Binding({}, family.declared_params(cfg, case), "out", Traffic(0, 0)))
    ((step, step_names, _),) = expand(pack.variant("t3", declared_variant), pack, names).steps
    abi = kernel_abi((KERNELS_DIR / "ssm_scan.cu").read_text(), step.kernel)
    declared_params = abi.parameters(
        [d[name].data.ptr for name in step.buffers],
        {f: evaluate(e, step_names) for f, e in step.push.items()},
        "declared",
    )
    assert launch.params == declared_params
    assert [a.data.ptr for a in launch.buffers] == [d[name].data.ptr for name in step.buffers]  # kept alive
    if kind == "chunked":
        assert launch.name == "ssm_delta_net_chunked_tc"
        assert launch.grid == (2, 128 // 32, 1) and launch.block == (128, 1, 1) and launch.shared == 160 * 1024
    else:
        assert launch.name == step.kernel

        def extent(exprs):
            return [evaluate_int(e, step_names, minimum=1) for e in exprs] + [1] * (3 - len(exprs))

        assert list(launch.grid) == extent(step.grid) and list(launch.block) == extent(step.block)
        assert launch.shared == (evaluate_int(step.shared, step_names) if step.shared is not None else 0)


def test_the_gated_norm_refuses_more_tokens_than_grid_y_holds(numpy_as_cupy):
    from zincbench.errors import InputError
    from zincbench.ops import ssm

    dims = SsmDims(1, 32, 32, 1)
    o = np.zeros((ssm.MAX_GRID_Y + 1, dims.d_inner), np.float32)
    with pytest.raises(InputError, match="grid.y"):
        ssm.GatedNorm(dims, o, o, np.ones(dims.d_inner, np.float32), o, norm_per_head=True)
