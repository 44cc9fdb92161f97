"""T3 gate: the gated delta-net SSM block of the hybrid qwen models (zinc-kernels.md §1.7-1.9, §2.1).

Cases are model x T x stage. Stages are the ones ``ssmLayerBatched`` runs: ``scan``, ``conv1d``,
``norm``, and the layer's projections ``attn_qkv``, ``attn_gate``, ``ssm_alpha_beta``, ``ssm_out``.
Variants:

- ``engine`` (baseline): what the engine runs for the stage. scan: our copy of ``ssm_delta_net_warp``
  (the CUDA default); conv1d / norm: our copies of ``ssm_conv1d_batched`` / ``ssm_gated_norm_batched``;
  projections: the T1 family's engine path (dequant -> fp16 scratch, f32_to_f16, cuBLAS), run here on
  Q4_K weights of the projection's shape;
- ``block`` (reference): our copy of ``ssm_delta_net``, the semantic reference kernel;
- ``chunked`` (candidate): our chunked scan (chunk 64, Tensor-core intra-chunk products);
  ``chunked_tf32`` (reference): the same kernel with plain tf32 products instead of the x3 split;
- ``fla`` / ``fla_bf16`` (reference): flash-linear-attention's ``chunk_gated_delta_rule`` with fp32 / bf16
  q, k, v when fla and torch import, timed at its best (one CUDA graph replay per run).

The engine's own kernels come in through experiments/engine_zinc.yaml (``--engine-src``). Every scan
is checked against the float64 recurrence (zincbench.reference.ssm_ref) on a sample of heads: the
outputs and the final state, from the same initial state; the relative error is the larger of the two.
"""

from __future__ import annotations

import inspect
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zincbench.bench import register_family
from zincbench.bench.base import Case, ExperimentConfig, FamilyBase, GateRule, NotApplicable, Prepared, VariantInfo
from zincbench.bench.t1_dense import FAMILY as T1_FAMILY
from zincbench.bench.t1_dense import DenseShape, T1Config
from zincbench.config import load_config
from zincbench.errors import InputError
from zincbench.measure.traffic import Traffic
from zincbench.ops import ssm
from zincbench.reference import ssm_ref
from zincbench.reference.kernels_ref import rel_frobenius
from zincbench.reference.ssm_ref import SsmDims

SSM_STAGES = ("scan", "conv1d", "norm")
PROJECTIONS = ("attn_qkv", "attn_gate", "ssm_alpha_beta", "ssm_out")
STAGES = SSM_STAGES + PROJECTIONS
# The conv state's oldest slot in the checked inputs: not 0, so the circular indexing is exercised.
CONV_STATE_OFFSET = 1


@dataclass
class SsmModel:
    """A model's SSM block (zinc-kernels.md §4): value heads (dt_rank) x hv, key groups x d_state."""

    name: str
    n_embd: int
    dt_rank: int
    head_v_dim: int
    d_state: int
    n_group: int
    d_conv: int = 4

    @property
    def dims(self) -> SsmDims:
        return SsmDims(self.dt_rank, self.head_v_dim, self.d_state, self.n_group, self.d_conv)

    def projection(self, stage: str) -> tuple[int, int]:
        """(M output features, K input features) of a projection stage."""
        d = self.dims
        return {
            "attn_qkv": (d.conv_channels, self.n_embd),
            "attn_gate": (d.d_inner, self.n_embd),
            "ssm_alpha_beta": (2 * self.dt_rank, self.n_embd),
            "ssm_out": (self.n_embd, d.d_inner),
        }[stage]


@dataclass
class T3Config(ExperimentConfig):
    models: list[SsmModel]
    tokens: list[int]
    stages: list[str] = field(default_factory=lambda: list(STAGES))
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    check_heads: int = 8  # value heads the float64 recurrence is run on (heads are independent)
    norm_per_head: bool = True  # the gated norm's weight has d_inner elements
    # Decay and state of the random inputs: dt = softplus(alpha + dt_bias) spans dt_range (log-uniform),
    # ssm_a = -U(a_range): per-token decays from ~0.2 (forgets within a chunk) to ~0.999 (carries state
    # across chunks), as trained models have. The initial state is N(0, state_std).
    dt_range: list[float] = field(default_factory=lambda: [1e-3, 0.1])
    a_range: list[float] = field(default_factory=lambda: [1.0, 16.0])
    state_std: float = 0.5
    gate: GateRule = field(default_factory=lambda: GateRule("chunked", "engine", when={"min_tokens": 512}))

    def __post_init__(self):
        if not self.models:
            raise ValueError("models must name at least one model")
        for m in self.models:
            for key in ("n_embd", "dt_rank", "head_v_dim", "d_state", "n_group"):
                if getattr(m, key) < 1:
                    raise ValueError(f"model {m.name}: {key} must be >= 1")
            if m.d_conv < 2:
                raise ValueError(f"model {m.name}: d_conv must be >= 2 (the state holds d_conv - 1 samples)")
            if m.dt_rank % m.n_group:
                raise ValueError(f"model {m.name}: dt_rank {m.dt_rank} is not a multiple of n_group {m.n_group}")
        if not self.tokens or min(self.tokens) < 1:
            raise ValueError("tokens must be a non-empty list of positive counts")
        unknown = set(self.stages) - set(STAGES)
        if unknown or not self.stages:
            raise ValueError(f"stages: unknown or empty {sorted(unknown)} (known: {', '.join(STAGES)})")
        unknown = set(self.variants) - set(VARIANTS)
        if unknown or not self.variants:
            raise ValueError(f"variants: unknown or empty {sorted(unknown)} (known: {', '.join(VARIANTS)})")
        if self.check_heads < 1:
            raise ValueError("check_heads must be >= 1")
        for key in ("dt_range", "a_range"):
            lo, hi = (getattr(self, key) + [0, 0])[:2]
            if len(getattr(self, key)) != 2 or not 0 < lo <= hi:
                raise ValueError(f"{key} must be [low, high] with 0 < low <= high")
        self.gate.check_when({"min_tokens"})


VARIANTS = {
    "engine": VariantInfo(
        "engine",
        "baseline",
        2e-3,
        "what the engine runs: scan = ssm_delta_net_warp (copy), conv1d / norm = copies of "
        "ssm_conv1d_batched / ssm_gated_norm_batched, projections = T1's engine path (Q4_K)",
    ),
    # Tolerances from the recorded H200 run (results/h200/t3/): block 2.0e-6, chunked 4.0e-6, chunked_tf32
    # 4.6e-4, fla 1.5e-3, fla_bf16 5.6e-3 at most over every case.
    "block": VariantInfo("block", "reference", 2e-4, "copy of ssm_delta_net, grid (dt_rank, hv), block hv"),
    "chunked": VariantInfo(
        "chunked",
        "candidate",
        2e-4,
        "chunked scan: chunk 64, WY/UT transform, Tensor-core products (tf32 x3 split, fp32-level)",
    ),
    "chunked_tf32": VariantInfo(
        "chunked_tf32",
        "reference",
        3e-3,
        "the chunked scan with one plain tf32 MMA per product (what the x3 split costs)",
    ),
    "fla": VariantInfo(
        "fla",
        "reference",
        5e-3,
        "flash-linear-attention chunk_gated_delta_rule, fp32 q/k/v, CUDA graph replay (anchor)",
    ),
    "fla_bf16": VariantInfo(
        "fla_bf16",
        "reference",
        1e-2,
        "flash-linear-attention chunk_gated_delta_rule, bf16 q/k/v, CUDA graph replay (anchor)",
    ),
}
FLA_DTYPES = {"fla": "float32", "fla_bf16": "bfloat16"}
SCAN_ONLY = {"block", "chunked", "chunked_tf32", *FLA_DTYPES}


@dataclass
class SsmInputs:
    """scan, conv1d or norm: float32 NumPy inputs, their device copies (plus ``state0``, the initial state
    kept aside, and ``out``), and the float64 reference, computed once on first check."""

    dims: SsmDims
    t: int
    host: dict
    dev: dict
    heads: np.ndarray | None = None  # scan: the value heads the check compares
    expected: tuple | None = None  # (out, final state or None)

    def reset(self) -> None:
        """Put the initial state back (timed runs move it on) and wait for it: the check runs on another stream."""
        import cupy

        if "state0" in self.dev:
            self.dev["state"][...] = self.dev["state0"]
        cupy.cuda.Device().synchronize()

    def expected_for(self, stage: str, norm_per_head: bool) -> tuple:
        if self.expected is None:
            h = self.host
            if stage == "scan":
                self.expected = ssm_ref.delta_net_block(
                    h["conv_out"],
                    h["alpha"],
                    h["beta"],
                    h["dt_bias"],
                    h["ssm_a"],
                    h["state"],
                    self.dims,
                    heads=self.heads,
                )
            elif stage == "conv1d":
                self.expected = ssm_ref.conv1d_batched(h["x"], h["weight"], h["state"], CONV_STATE_OFFSET)
            else:
                self.expected = (ssm_ref.gated_norm(h["o"], h["z"], h["weight"], self.dims, norm_per_head), None)
        return self.expected


@dataclass
class ProjectionInputs:
    t1_config: T1Config
    t1_case: Case
    t1_inputs: Any


def _case_rng(case: Case) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(case.key.encode()))


class T3Family(FamilyBase):
    name = "t3"
    default_experiment = "t3_ssm_scan"
    summary = "gated delta-net SSM block: scan, conv1d, norm, projections"

    def load(self, path, gguf: str | None = None, layer: int | None = None) -> T3Config:
        if gguf:
            raise InputError("--gguf: the t3 family takes its shapes from the experiment's models, not a GGUF")
        return load_config(T3Config, path)

    def cases(self, cfg: T3Config) -> list[Case]:
        return [
            Case(f"{m.name}-{stage}-T{t}", {"model": m.name, "stage": stage, "tokens": t})
            for m in cfg.models
            for t in cfg.tokens
            for stage in cfg.stages
        ]

    def variants(self, cfg: T3Config) -> list[VariantInfo]:
        return [VARIANTS[v] for v in cfg.variants]

    def gate_applies(self, cfg: T3Config, case: Case) -> bool:
        p = case.params
        return p["stage"] == "scan" and p["tokens"] >= cfg.gate.when.get("min_tokens", 0)

    @staticmethod
    def _model(cfg: T3Config, case: Case) -> SsmModel:
        return next(m for m in cfg.models if m.name == case.params["model"])

    # ---- inputs -------------------------------------------------------------------------------------
    def build_inputs(self, cfg: T3Config, case: Case, rng):
        model, t, stage = self._model(cfg, case), case.params["tokens"], case.params["stage"]
        if stage in PROJECTIONS:
            rows, k = model.projection(stage)
            t1_cfg = T1Config(description=f"t3 {stage}", shapes=[DenseShape(stage, rows, k)], tokens=[t])
            t1_case = T1_FAMILY.cases(t1_cfg)[0]
            return ProjectionInputs(t1_cfg, t1_case, T1_FAMILY.build_inputs(t1_cfg, t1_case, rng))
        dims = model.dims
        if stage == "scan":
            return self._scan_inputs(cfg, case, dims, t, rng)
        if stage == "conv1d":
            host = {
                "x": rng.standard_normal((t, dims.conv_channels), dtype=np.float32),
                "weight": (0.5 * rng.standard_normal((dims.conv_channels, dims.d_conv))).astype(np.float32),
                "state": rng.standard_normal((dims.d_conv - 1, dims.conv_channels), dtype=np.float32),
            }
            return self._device_inputs(dims, t, host, (t, dims.conv_channels))
        host = {
            "o": rng.standard_normal((t, dims.d_inner), dtype=np.float32),
            "z": rng.standard_normal((t, dims.d_inner), dtype=np.float32),
            "weight": (1.0 + 0.1 * rng.standard_normal(dims.d_inner if cfg.norm_per_head else dims.d_state)).astype(
                np.float32
            ),
        }
        return self._device_inputs(dims, t, host, (t, dims.d_inner))

    @staticmethod
    def _device_inputs(dims: SsmDims, t: int, host: dict, out_shape: tuple, heads=None) -> SsmInputs:
        import cupy

        dev = {k: cupy.asarray(v) for k, v in host.items()}
        if "state" in dev:
            dev["state0"] = dev["state"].copy()
        dev["out"] = cupy.empty(out_shape, dtype=cupy.float32)
        return SsmInputs(dims, t, host, dev, heads)

    def _scan_inputs(self, cfg: T3Config, case: Case, dims: SsmDims, t: int, rng) -> SsmInputs:
        h = dims.dt_rank
        dt = np.exp(rng.uniform(*np.log(cfg.dt_range), size=h))
        host = {
            "conv_out": rng.standard_normal((t, dims.conv_channels), dtype=np.float32),
            "alpha": (0.5 * rng.standard_normal((t, h))).astype(np.float32),
            "beta": rng.standard_normal((t, h), dtype=np.float32),
            "dt_bias": np.log(np.expm1(dt)).astype(np.float32),
            "ssm_a": (-rng.uniform(*cfg.a_range, size=h)).astype(np.float32),
            "state": (cfg.state_std * rng.standard_normal((h, dims.head_v_dim, dims.d_state))).astype(np.float32),
        }
        heads = np.sort(_case_rng(case).choice(h, size=min(cfg.check_heads, h), replace=False))
        return self._device_inputs(dims, t, host, (t, dims.d_inner), heads)

    # ---- variants -----------------------------------------------------------------------------------
    def prepare(self, cfg: T3Config, case: Case, inp, variant: str, tuner) -> Prepared:
        stage = case.params["stage"]
        if variant in SCAN_ONLY and stage != "scan":
            raise NotApplicable(f"not for this case (a scan variant, stage {stage})")
        if isinstance(inp, ProjectionInputs):
            prepared = T1_FAMILY.prepare(inp.t1_config, inp.t1_case, inp.t1_inputs, "round_trip", tuner)
            prepared.detail = {**prepared.detail, "path": "T1 round_trip on Q4_K weights", "shape": inp.t1_case.key}
            return prepared
        if variant in FLA_DTYPES:
            return self._prepare_fla(inp, FLA_DTYPES[variant])
        d = inp.dev
        try:
            if stage == "scan":
                op = ssm.DeltaNetScan(
                    "warp" if variant == "engine" else variant,
                    inp.dims,
                    d["conv_out"],
                    d["dt_bias"],
                    d["alpha"],
                    d["beta"],
                    d["ssm_a"],
                    d["state"],
                    d["out"],
                )
            elif stage == "conv1d":
                op = ssm.Conv1dBatched(d["x"], d["weight"], d["state"], d["out"], CONV_STATE_OFFSET)
            else:
                op = ssm.GatedNorm(inp.dims, d["o"], d["z"], d["weight"], d["out"], norm_per_head=cfg.norm_per_head)
        except InputError as exc:  # a shape this kernel or GPU cannot take (e.g. the chunked kernel's shared memory)
            raise NotApplicable(str(exc)) from None
        return Prepared(op, d["out"], op.traffic(), before_check=inp.reset)

    def _prepare_fla(self, inp: SsmInputs, dtype: str) -> Prepared:
        """fla's chunk kernel at its best: q/k/v in ``dtype`` prepared once, the call captured in a CUDA graph
        after a warm-up (Triton's compile and autotuning stay outside), each timed run one graph replay on
        the timer's stream. The output is fla's own output tensor (no copy); the final state is copied
        into ours (it is [HV][K][V] in fla, [HV][V][K] here)."""
        import cupy

        try:
            import fla
            import torch
            from fla.ops.gated_delta_rule import chunk_gated_delta_rule
        except Exception as exc:  # ImportError, or a broken install raising anything at import
            raise NotApplicable(f"flash-linear-attention not importable ({type(exc).__name__}: {exc})") from None
        wanted = {"q", "k", "v", "g", "beta", "scale", "initial_state", "output_final_state", "use_qk_l2norm_in_kernel"}
        params = inspect.signature(chunk_gated_delta_rule).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        missing = set() if takes_any else wanted - set(params)
        if missing:
            raise NotApplicable(f"this fla's chunk_gated_delta_rule lacks {', '.join(sorted(missing))}")
        dims, t, d = inp.dims, inp.t, inp.dev
        cupy.cuda.Device().synchronize()
        # per-head q/k (GVA groups expanded), log-decay and beta, the initial state in fla's [N][H][K][V]
        # layout. L2 normalisation runs inside fla's kernel.
        x = torch.from_dlpack(d["conv_out"]).to(getattr(torch, dtype))
        groups = torch.tensor([dims.group_of(h) for h in range(dims.dt_rank)], device=x.device)
        q, k = (
            x[:, i * dims.qk_dim : (i + 1) * dims.qk_dim]
            .reshape(t, dims.n_group, dims.d_state)[:, groups]
            .unsqueeze(0)
            .contiguous()
            for i in (0, 1)
        )
        v = x[:, 2 * dims.qk_dim :].reshape(1, t, dims.dt_rank, dims.head_v_dim).contiguous()
        sp = torch.nn.functional.softplus(torch.from_dlpack(d["alpha"]) + torch.from_dlpack(d["dt_bias"]))
        g = (sp * torch.from_dlpack(d["ssm_a"])).unsqueeze(0).contiguous()
        beta = torch.sigmoid(torch.from_dlpack(d["beta"])).unsqueeze(0).contiguous()
        h0 = torch.from_dlpack(d["state0"]).transpose(-1, -2).unsqueeze(0).contiguous()
        state = torch.from_dlpack(d["state"])

        def call():
            o, final = chunk_gated_delta_rule(
                q=q,
                k=k,
                v=v,
                g=g,
                beta=beta,
                scale=dims.d_state**-0.5,
                initial_state=h0,
                output_final_state=True,
                use_qk_l2norm_in_kernel=True,
            )
            state.copy_(final[0].transpose(-1, -2))
            return o

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):  # compile and autotune, then one run as captured
                call()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o = call()
        torch.cuda.synchronize()
        output = cupy.from_dlpack(o.detach()).reshape(t, dims.d_inner)

        def run():
            with torch.cuda.stream(torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)):
                graph.replay()

        return Prepared(
            run,
            output,
            ssm.scan_traffic(dims, t),
            detail={"fla": getattr(fla, "__version__", "?"), "inputs": dtype, "timed": "CUDA graph replay"},
            before_check=inp.reset,
        )

    def declared_params(self, cfg: T3Config, case: Case) -> dict:
        """The names a declared variant's expressions see for this case."""
        d = self._model(cfg, case).dims
        return {
            "stage": case.params["stage"],
            "T": case.params["tokens"],
            "dt_rank": d.dt_rank,
            "hv": d.head_v_dim,
            "d_state": d.d_state,
            "n_group": d.n_group,
            "d_inner": d.d_inner,
            "conv_channels": d.conv_channels,
            "d_conv": d.d_conv,
            "norm_per_head": int(cfg.norm_per_head),
            "state_offset": CONV_STATE_OFFSET % (d.d_conv - 1),
        }

    def declared_binding(self, cfg: T3Config, case: Case, inp):
        """Tensors and parameters declared variants (experiments/engine_zinc.yaml, family t3) can name."""
        from zincbench.bench.declared import Binding

        params, stage, d = self.declared_params(cfg, case), case.params["stage"], self._model(cfg, case).dims
        if isinstance(inp, ProjectionInputs):
            return Binding({}, params, "y", Traffic(0, 0))
        inp.reset()  # the check run starts from the initial state; earlier timed runs moved it on
        tensors = {k: v for k, v in inp.dev.items() if k != "state0"}
        traffic = (
            ssm.scan_traffic(d, inp.t)
            if stage == "scan"
            else ssm.conv1d_traffic(inp.t, d.conv_channels, d.d_conv)
            if stage == "conv1d"
            else ssm.gated_norm_traffic(d, inp.t)
        )
        return Binding(tensors, params, "out", traffic)

    # ---- correctness --------------------------------------------------------------------------------
    def check(self, cfg: T3Config, case: Case, inp, output) -> tuple[float, bool]:
        import cupy

        if isinstance(inp, ProjectionInputs):
            return T1_FAMILY.check(inp.t1_config, inp.t1_case, inp.t1_inputs, output)
        written = not bool(cupy.isnan(output).any())
        stage = case.params["stage"]
        want_out, want_state = inp.expected_for(stage, cfg.norm_per_head)
        got, got_state = output.get(), inp.dev["state"].get() if want_state is not None else None
        if stage == "scan":  # only the sampled heads
            got = got.reshape(inp.t, inp.dims.dt_rank, inp.dims.head_v_dim)[:, inp.heads]
            got_state = got_state[inp.heads]
        rel = rel_frobenius(got, want_out)
        if want_state is not None:
            rel = max(rel, rel_frobenius(got_state, want_state))
        return rel, written


FAMILY = register_family(T3Family())
