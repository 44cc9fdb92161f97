"""T3 kernels on a GPU (kernels/ssm_scan.cu through zincbench.ops.ssm): every scan against the float64
recurrence at odd head counts and token counts (outputs and final state, from a random initial state),
the chunked scan's state continued by the engine's warp scan, conv1d and the gated norm against their
references, and the whole family through the real runner (bundled, declared stand-ins, fla if present)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from rich.console import Console

from zincbench.bench.runner import run_microbench
from zincbench.reference import ssm_ref
from zincbench.reference.ssm_ref import SsmDims

pytestmark = pytest.mark.gpu
QUICK_TIMER = {
    "mode": "cold",
    "warmup": 1,
    "stopping": "noise",
    "min_samples": 5,
    "min_time_s": 0.0,
    "max_time_s": 0.05,
}
SCAN_TOLERANCE = {"block": 1e-3, "warp": 1e-3, "chunked": 2e-3, "chunked_tf32": 1e-2}


def _rel(got, want) -> float:
    return float(np.linalg.norm(np.asarray(got, np.float64) - want) / np.linalg.norm(want))


def _host_inputs(rng, dims: SsmDims, t: int) -> dict:
    h = dims.dt_rank
    dt = np.exp(rng.uniform(np.log(1e-3), np.log(0.1), size=h))  # decays ~0.2 .. ~0.999: state crosses chunks
    f32 = np.float32
    return {
        "conv_out": rng.standard_normal((t, dims.conv_channels)).astype(f32),
        "alpha": (0.5 * rng.standard_normal((t, h))).astype(f32),
        "beta": rng.standard_normal((t, h)).astype(f32),
        "dt_bias": np.log(np.expm1(dt)).astype(f32),
        "ssm_a": (-rng.uniform(1, 16, size=h)).astype(f32),
        "state": (0.5 * rng.standard_normal((h, dims.head_v_dim, dims.d_state))).astype(f32),
    }


def _scan(kind: str, dims: SsmDims, host: dict):
    """Run one scan kernel; returns (out, final state) as NumPy, out poisoned with NaN before the run."""
    import cupy

    from zincbench.ops.ssm import DeltaNetScan

    dev = {k: cupy.asarray(v) for k, v in host.items()}
    out = cupy.full((host["conv_out"].shape[0], dims.d_inner), cupy.nan, dtype=cupy.float32)
    DeltaNetScan(
        kind, dims, dev["conv_out"], dev["dt_bias"], dev["alpha"], dev["beta"], dev["ssm_a"], dev["state"], out
    )()
    cupy.cuda.Device().synchronize()
    return out.get(), dev["state"].get()


def _expected(dims: SsmDims, host: dict):
    out, state = ssm_ref.delta_net_block(
        host["conv_out"], host["alpha"], host["beta"], host["dt_bias"], host["ssm_a"], host["state"], dims
    )
    return out.reshape(out.shape[0], -1), state


@pytest.mark.parametrize("kind", ["block", "warp", "chunked", "chunked_tf32"])
@pytest.mark.parametrize(
    "dims, t",
    [
        (SsmDims(6, 128, 128, 3), 37),  # a partial chunk only; two heads per key group
        (SsmDims(6, 128, 128, 3), 130),  # two whole chunks and a 2-token tail
        (SsmDims(5, 128, 128, 5), 64),  # exactly one chunk; one group per head
        (SsmDims(3, 128, 128, 1), 1),  # one token
        (SsmDims(7, 128, 128, 7), 200),
    ],
    ids=lambda v: f"T{v}" if isinstance(v, int) else f"H{v.dt_rank}G{v.n_group}",
)
def test_scans_match_the_float64_recurrence(kind, dims, t, rng):
    host = _host_inputs(rng, dims, t)
    out, state = _scan(kind, dims, host)
    want_out, want_state = _expected(dims, host)
    assert not np.isnan(out).any(), "output not fully written"
    assert _rel(out, want_out) < SCAN_TOLERANCE[kind]
    assert _rel(state, want_state) < SCAN_TOLERANCE[kind]


@pytest.mark.parametrize("kind", ["block", "warp"])
def test_sequential_scans_at_a_narrower_head(kind, rng):
    dims = SsmDims(4, 64, 64, 2)
    host = _host_inputs(rng, dims, 37)
    out, state = _scan(kind, dims, host)
    want_out, want_state = _expected(dims, host)
    assert _rel(out, want_out) < 1e-3 and _rel(state, want_state) < 1e-3


def test_the_chunked_state_continues_in_the_engines_scan(rng):
    """State compatibility: 100 tokens through the chunked scan, the next 45 through the warp scan from
    the state it left, equal the recurrence over all 145."""
    dims = SsmDims(6, 128, 128, 3)
    host = _host_inputs(rng, dims, 145)
    first = {k: (v[:100] if v.ndim == 2 and k in ("conv_out", "alpha", "beta") else v) for k, v in host.items()}
    out_a, state_a = _scan("chunked", dims, first)
    second = {k: (v[100:] if v.ndim == 2 and k in ("conv_out", "alpha", "beta") else v) for k, v in host.items()}
    second["state"] = state_a
    out_b, state_b = _scan("warp", dims, second)
    want_out, want_state = _expected(dims, host)
    assert _rel(np.concatenate([out_a, out_b]), want_out) < 2e-3
    assert _rel(state_b, want_state) < 2e-3


@pytest.mark.parametrize("channels, t, offset", [(200, 37, 2), (64, 1, 0), (130, 130, 1)])
def test_conv1d_matches_the_reference(channels, t, offset, rng):
    import cupy

    from zincbench.ops.ssm import Conv1dBatched

    x = rng.standard_normal((t, channels)).astype(np.float32)
    w = (0.5 * rng.standard_normal((channels, 4))).astype(np.float32)
    state = rng.standard_normal((3, channels)).astype(np.float32)
    d_state, out = cupy.asarray(state), cupy.full((t, channels), cupy.nan, dtype=cupy.float32)
    Conv1dBatched(cupy.asarray(x), cupy.asarray(w), d_state, out, offset)()
    want_out, want_state = ssm_ref.conv1d_batched(x, w, state, offset)
    assert _rel(out.get(), want_out) < 1e-5
    assert _rel(d_state.get(), want_state) < 1e-6


@pytest.mark.parametrize("per_head", [True, False])
def test_gated_norm_matches_the_reference(per_head, rng):
    import cupy

    from zincbench.ops.ssm import GatedNorm

    dims = SsmDims(5, 128, 128, 1)
    o = rng.standard_normal((37, dims.d_inner)).astype(np.float32)
    z = rng.standard_normal((37, dims.d_inner)).astype(np.float32)
    w = rng.standard_normal(dims.d_inner if per_head else dims.d_state).astype(np.float32)
    out = cupy.full(o.shape, cupy.nan, dtype=cupy.float32)
    GatedNorm(dims, cupy.asarray(o), cupy.asarray(z), cupy.asarray(w), out, norm_per_head=per_head)()
    assert _rel(out.get(), ssm_ref.gated_norm(o, z, w, dims, per_head)) < 1e-5


def test_the_family_runs_every_variant_and_renders_the_share(tmp_path, monkeypatch):
    from zincbench import records
    from zincbench.show.microbench_table import print_microbench

    monkeypatch.delenv("ZINC_SRC", raising=False)
    spec = {
        "description": "t3 at odd shapes",
        "tokens": [37, 130],
        "models": [{"name": "odd", "n_embd": 512, "dt_rank": 6, "head_v_dim": 128, "d_state": 128, "n_group": 3}],
        "kernel_packs": ["engine_zinc"],
        "check_heads": 6,
        "timer": QUICK_TIMER,
        "gate": {"candidate": "chunked", "baseline": "engine", "when": {"min_tokens": 0}},
    }
    path = tmp_path / "t3.yaml"
    path.write_text(yaml.safe_dump(spec))
    doc, decision, _ = run_microbench("t3", str(path), results_dir=tmp_path, ceilings=False, progress=False, seed=11)
    rows = {(r.case, r.variant): r for r in doc.results}
    for t in (37, 130):
        for stage, variants in {
            "scan": ["engine", "block", "chunked", "chunked_tf32", "engine_warp", "engine_block"],
            "conv1d": ["engine", "engine_conv1d"],
            "norm": ["engine", "engine_gated_norm"],
            "attn_qkv": ["engine"],
            "ssm_out": ["engine"],
            "ssm_alpha_beta": ["engine"],
        }.items():
            for variant in variants:
                row = rows[(f"odd-{stage}-T{t}", variant)]
                assert row.passed and row.timed, (stage, t, variant, row.skipped, row.check)
        for name in ("fla", "fla_bf16"):
            fla = rows[(f"odd-scan-T{t}", name)]
            assert fla.passed or (fla.skipped or "").startswith("flash-linear-attention not importable"), fla
    assert doc.config["declared_sources"]["engine_warp"] == "stand-in"
    assert {c["case"] for c in doc.verdict["cells"]} == {"odd-scan-T37", "odd-scan-T130"}
    console = Console(width=80, record=True)
    print_microbench(records.to_jsonable(doc), console)
    text = console.export_text()
    assert "SSM layer by stage" in text and "odd" in text


def test_an_engine_source_without_the_ssm_kernels_reports_them_absent(tmp_path, monkeypatch):
    monkeypatch.delenv("ZINC_SRC", raising=False)
    tree = tmp_path / "engine"
    (tree / "src" / "shaders" / "cuda").mkdir(parents=True)
    (tree / "src" / "shaders" / "cuda" / "kernels.cu").write_text('extern "C" __global__ void unrelated() {}\n')
    spec = {
        "description": "absent engine kernels",
        "tokens": [37],
        "stages": ["scan"],
        "models": [{"name": "odd", "n_embd": 512, "dt_rank": 2, "head_v_dim": 128, "d_state": 128, "n_group": 1}],
        "kernel_packs": ["engine_zinc"],
        "timer": QUICK_TIMER,
        "gate": {"candidate": "chunked", "baseline": "engine", "when": {}},
    }
    path = tmp_path / "t3.yaml"
    path.write_text(yaml.safe_dump(spec))
    doc, _, _ = run_microbench(
        "t3",
        str(path),
        results_dir=tmp_path,
        ceilings=False,
        progress=False,
        seed=3,
        engine_src=str(tree),
        variant_filter=["engine", "chunked", "engine_warp", "engine_block"],
    )
    rows = {r.variant: r for r in doc.results}
    for name in ("engine_warp", "engine_block"):
        assert rows[name].skipped.startswith("absent: no ssm_delta_net"), rows[name]
    assert rows["engine"].passed and rows["chunked"].passed
