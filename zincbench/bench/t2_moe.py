"""T2 gate: MoE routed-expert projection. The engine's matvec (every routed token re-reads its
expert's rows) vs dequant-once + batched cuBLAS vs our grouped fused Q4_K/Q6_K Tensor-core kernel.

Cases: (E experts, M rows) x N_e tokens per expert, T = N_e * E / top_k tokens, K columns.
Outputs are y[T][top_k][M] for every variant, checked against a float64 NumPy reference on a sample
of experts (all their routed tokens) built from the dequantized weights.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Literal, Optional

import numpy as np

from zincbench.bench import autotune, register_family
from zincbench.bench.base import Case, ExperimentConfig, FamilyBase, GateRule, Prepared, VariantInfo
from zincbench.config import load_config
from zincbench.ops.fused import check_tiles
from zincbench.quant import check_row_length, get_format
from zincbench.reference import kernels_ref


@dataclass
class ExpertShape:
    experts: int
    rows: int


@dataclass
class T2Config(ExperimentConfig):
    shapes: list[ExpertShape]
    tokens_per_expert: list[int]
    k: int = 2048
    top_k: int = 8
    weights: Literal["q4_k", "q6_k"] = "q4_k"
    x_per_slot: bool = False  # down projection: one activation row per (token, slot)
    routing: Literal["uniform", "zipf"] = "uniform"
    zipf_s: float = 1.0
    # How our paths (dequant_cublas, fused_grouped) group items by expert on the GPU: one block, two launches
    # over many blocks, or one launch over many blocks (route blocks that wait for each other's counts, or that
    # each count every item), which for fused_grouped also permutes x (zincbench.ops.routing). Part of the timed
    # op either way.
    routing_build: Literal["single_block", "multi_block", "one_launch", "replicated"] = "single_block"
    # fused_grouped on sm_90 and later: the GEMM launched as the routing launch's programmatic dependent (PDL), its
    # blocks resident while the routing runs, waiting inside for its outputs; other GPUs launch it as usual
    programmatic_launch: bool = False
    # The routing llama_cpp_us was measured with: its numbers show only beside cases routed the same way.
    llama_cpp_routing: Optional[Literal["uniform", "zipf"]] = None
    variants: list[str] = field(default_factory=lambda: ["matvec", "dequant_cublas", "fused_grouped"])
    fused_tiles: list[str] = field(default_factory=lambda: ["1,2,4,1,3", "1,8,8,1,2"])
    correctness_experts: int = 12
    gate: GateRule = field(
        default_factory=lambda: GateRule("fused_grouped", "engine", when={"min_tokens_per_expert": 16})
    )
    # With gguf: which layer and expert tensor supply the shape and weights.
    gguf_layer: Optional[int] = None
    gguf_tensor: Literal["ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"] = "ffn_gate_exps"

    def __post_init__(self):
        check_row_length(self.k)
        if not self.shapes or not self.tokens_per_expert:
            raise ValueError("shapes and tokens_per_expert must not be empty")
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if not self.variants:
            raise ValueError("variants must name at least one variant")
        unknown = set(self.variants) - set(VARIANTS)
        if unknown:
            raise ValueError(f"unknown variant(s) {sorted(unknown)} (known: {', '.join(VARIANTS)})")
        for s in self.shapes:
            if s.experts < self.top_k or s.rows < 1:
                raise ValueError(f"shape E={s.experts}, M={s.rows}: need E >= top_k={self.top_k} and M >= 1")
        if any(n < 1 for n in self.tokens_per_expert):
            raise ValueError("tokens_per_expert must be >= 1")
        self.gate.check_when({"min_tokens_per_expert"})
        check_tiles(self.fused_tiles, grouped=True)


VARIANTS = {
    "matvec": VariantInfo(
        "matvec",
        "reference",
        1e-5,
        "our copy of the engine's dmmv_*_experts_batched: grid (top_k*M, T), every routed token "
        "re-reads its expert rows",
    ),
    "dequant_cublas": VariantInfo(
        "dequant_cublas",
        "candidate",
        2e-3,
        "route, dequantize all experts once to fp16, gather, one batched cuBLAS GEMM, scatter",
    ),
    "dequant_cublas_vec": VariantInfo(
        "dequant_cublas_vec",
        "candidate",
        2e-3,
        "dequant_cublas with a bandwidth-bound dequant (kernels/dequant_vec.cu: the same values, 16 weights a thread)",
    ),
    "fused_grouped": VariantInfo(
        "fused_grouped",
        "candidate",
        2e-3,
        "route, permute x to fp16, grouped fused-dequant Q4_K/Q6_K mma.sync GEMM (one weight read per tile)",
    ),
}


@dataclass
class T2Inputs:
    t: int
    e: int
    m: int
    k: int
    top_k: int
    w_host: np.ndarray
    w: object  # cupy uint8 [E][M][row bytes]
    x_host: np.ndarray
    x: object
    ids_host: np.ndarray
    ids: object
    routing: object  # u32 [T][2*top_k]: the engine's router table, expert ids then weights as f32 bits
    y: object  # f32 [T][top_k][M], shared by variants (each overwrites it)
    counts: np.ndarray  # tokens per expert of this routing


def route(rng: np.random.Generator, t: int, e: int, top_k: int, kind: str, zipf_s: float) -> np.ndarray:
    """top_k distinct experts per token: uniform, or Zipf-skewed popularity (Gumbel top-k sampling)."""
    if kind == "uniform":
        keys = rng.random((t, e))
    else:
        popularity = 1.0 / np.arange(1, e + 1) ** zipf_s
        log_p = np.log(popularity[rng.permutation(e)])
        keys = log_p + rng.gumbel(size=(t, e))
    return np.argpartition(-keys, top_k - 1, axis=1)[:, :top_k].astype(np.uint32)


class T2Family(FamilyBase):
    name = "t2"
    default_experiment = "t2_moe_expert"
    summary = "MoE routed-expert projection"
    _weights_cache: dict = {}

    def load(self, path, gguf: str | None = None, layer: int | None = None) -> T2Config:
        cfg = load_config(T2Config, path)
        if gguf:
            cfg.gguf, cfg.gguf_layer = gguf, layer
        if cfg.gguf:
            tensor = self._gguf_tensor(cfg)
            e, m, k = tensor.shape
            cfg.shapes, cfg.k, cfg.weights = [ExpertShape(e, m)], k, tensor.qtype
            cfg.x_per_slot = cfg.gguf_tensor == "ffn_down_exps"  # down reads one activation row per slot
        return cfg

    def _gguf_tensor(self, cfg: T2Config):
        from zincbench.errors import InputError
        from zincbench.quant.gguf_io import expert_tensors

        tensors = expert_tensors(cfg.gguf, cfg.gguf_layer)
        tensor = tensors.get(cfg.gguf_tensor)
        if tensor is None:
            raise InputError(f"{cfg.gguf}: no {cfg.gguf_tensor} tensor (has: {', '.join(sorted(tensors)) or 'none'})")
        if tensor.qtype not in ("q4_k", "q6_k"):
            raise InputError(f"{cfg.gguf}: {tensor.name} is {tensor.qtype}; the T2 kernels read q4_k or q6_k")
        return tensor

    def cases(self, cfg: T2Config) -> list[Case]:
        out = []
        for s in cfg.shapes:
            for n_e in cfg.tokens_per_expert:
                t = max(1, n_e * s.experts // cfg.top_k)
                key = f"E{s.experts}-M{s.rows}-K{cfg.k}-Ne{n_e}"
                out.append(
                    Case(
                        key,
                        {
                            "experts": s.experts,
                            "rows": s.rows,
                            "k": cfg.k,
                            "top_k": cfg.top_k,
                            "tokens_per_expert": n_e,
                            "tokens": t,
                            "weights": cfg.weights,
                            "routing": cfg.routing,
                            "gguf": cfg.gguf,
                            "tensor": cfg.gguf_tensor if cfg.gguf else None,
                        },
                    )
                )
        return out

    def reference_applies(self, cfg: T2Config, case: Case) -> bool:
        return cfg.llama_cpp_routing == case.params["routing"]

    def variants(self, cfg: T2Config) -> list[VariantInfo]:
        return [VARIANTS[v] for v in cfg.variants]

    def gate_applies(self, cfg: T2Config, case: Case) -> bool:
        return case.params["tokens_per_expert"] >= cfg.gate.when.get("min_tokens_per_expert", 0)

    def _weights(self, cfg: T2Config, e: int, m: int, rng):
        import cupy

        key = (e, m, cfg.k, cfg.weights, cfg.gguf)
        if key not in self._weights_cache:
            self._weights_cache.clear()  # one weight set resident at a time
            if cfg.gguf:
                host = np.ascontiguousarray(self._gguf_tensor(cfg).data)
            else:
                host = get_format(cfg.weights).random_blocks(rng, e * m, cfg.k).reshape(e, m, -1)
            self._weights_cache[key] = (host, cupy.asarray(host))
        return self._weights_cache[key]

    def build_inputs(self, cfg: T2Config, case: Case, rng) -> T2Inputs:
        import cupy

        p = case.params
        e, m, k, top_k, t = p["experts"], p["rows"], p["k"], p["top_k"], p["tokens"]
        w_host, w = self._weights(cfg, e, m, rng)
        x_shape = (t, top_k, k) if cfg.x_per_slot else (t, k)
        x_host = rng.standard_normal(x_shape, dtype=np.float32)
        ids_host = route(rng, t, e, top_k, cfg.routing, cfg.zipf_s)
        gate_weights = rng.random((t, top_k), dtype=np.float32) + np.float32(0.05)
        gate_weights /= gate_weights.sum(axis=1, keepdims=True)
        routing = np.concatenate([ids_host, gate_weights.view(np.uint32)], axis=1)
        return T2Inputs(
            t,
            e,
            m,
            k,
            top_k,
            w_host,
            w,
            x_host,
            cupy.asarray(x_host),
            ids_host,
            cupy.asarray(ids_host),
            cupy.asarray(routing),
            cupy.empty((t, top_k, m), dtype=cupy.float32),
            np.bincount(ids_host.ravel(), minlength=e),
        )

    def prepare(self, cfg: T2Config, case: Case, inp: T2Inputs, variant: str, tuner) -> Prepared:
        hit = int((inp.counts > 0).sum())
        if variant == "matvec":
            from zincbench.ops.matvec import ExpertsMatvec

            op = ExpertsMatvec(cfg.weights, inp.w, inp.x, inp.ids, inp.y, top_k=inp.top_k, x_per_slot=cfg.x_per_slot)
            return Prepared(
                op,
                inp.y,
                op.traffic(hit).with_flops(op.flops(), "each routed (token, slot) re-reads its expert's rows"),
            )
        if variant in ("dequant_cublas", "dequant_cublas_vec"):
            from zincbench.ops.dequant import ENGINE, VECTORIZED
            from zincbench.ops.moe_cublas import MoeDequantCublas

            capacity = int(-(-inp.counts.max() // 8) * 8)  # largest bucket of this routing, rounded to 8
            op = MoeDequantCublas(
                cfg.weights,
                inp.w,
                inp.x,
                inp.ids,
                inp.y,
                top_k=inp.top_k,
                capacity=capacity,
                x_per_slot=cfg.x_per_slot,
                routing_build=cfg.routing_build,
                kernels=VECTORIZED if variant == "dequant_cublas_vec" else ENGINE,
            )
            return Prepared(
                op,
                inp.y,
                op.traffic(hit).with_flops(op.flops(), "dequantizes every expert to fp16 scratch"),
                detail={"capacity": capacity},
                after_check=_capacity_check(op),
            )
        if variant == "fused_grouped":
            return self._prepare_fused(cfg, case, inp, tuner)
        raise ValueError(variant)

    def _prepare_fused(self, cfg: T2Config, case: Case, inp: T2Inputs, tuner) -> Prepared:
        import cupy

        from zincbench.gpu.launch import supports_dependent_launch
        from zincbench.ops.fused import (
            FusedKQuantGemm,
            MmaTile,
            grouped_traffic,
            permuted_activations,
        )
        from zincbench.ops.routing import RoutingWorkspace, route_and_permute

        x_rows = inp.t * inp.top_k if cfg.x_per_slot else inp.t
        xp = permuted_activations(cupy, x_rows, inp.k)
        x2d = inp.x.reshape(x_rows, inp.k)

        dependent = cfg.programmatic_launch and supports_dependent_launch(cupy.cuda.Device().compute_capability)

        def make_run(tile_text: str):
            tile = MmaTile.parse(tile_text)
            gemm = FusedKQuantGemm(tile, grouped=True, weights=cfg.weights)
            ws = RoutingWorkspace(inp.t, inp.top_k, inp.e, tile.bn, build=cfg.routing_build)

            def run():
                route_and_permute(inp.ids, ws, x2d, xp, tile.x_order)
                gemm.grouped_call(
                    inp.w,
                    xp,
                    inp.y,
                    inp.m,
                    inp.k,
                    ws.tiles,
                    ws.offsets,
                    ws.sorted_ids,
                    inp.top_k,
                    x_per_slot=cfg.x_per_slot,
                    dependent=dependent,
                )

            run.tile = tile
            return run

        launch = "/pdl" if dependent else ""  # a tile chosen with the GEMM launched as a dependent, or without
        key = f"t2/fused_grouped/{case.key}/{cfg.routing}/{cfg.routing_build}{launch}"
        tuning = tuner(key, cfg.fused_tiles, make_run)
        run = make_run(tuning.choice)
        return Prepared(
            run,
            inp.y,
            grouped_traffic(inp.counts, inp.m, inp.k, inp.top_k, x_rows, run.tile, cfg.weights),
            detail={
                "tile": run.tile.label,
                "tile_spec": tuning.choice,
                "autotune": autotune.record(tuning),
                "programmatic_launch": dependent,
            },
        )

    def declared_binding(self, cfg: T2Config, case: Case, inp: T2Inputs):
        """Tensors and parameters a declared (YAML) variant can name; y[T][top_k][M] is what is checked."""
        from zincbench.bench.declared import Binding
        from zincbench.ops.matvec import experts_matvec_traffic

        row_bytes = get_format(cfg.weights).row_bytes(inp.k)
        params = {
            "T": inp.t,
            "M": inp.m,
            "K": inp.k,
            "E": inp.e,
            "top_k": inp.top_k,
            "N_e": case.params["tokens_per_expert"],
            "row_bytes": row_bytes,
            "slice": inp.m * row_bytes,
            "weights": cfg.weights,
            "qtype": cfg.weights.replace("_", ""),
            "x_per_slot": int(cfg.x_per_slot),
            # tiles(n): work tiles of a grouped kernel that pads each expert's tokens to a multiple of n
            "tiles": lambda n: int(sum(-(-int(c) // int(n)) for c in inp.counts)),
        }
        hit = int((inp.counts > 0).sum())
        minimum = experts_matvec_traffic(cfg.weights, inp.t, inp.top_k, inp.m, inp.k, hit, cfg.x_per_slot)
        flops = 2 * inp.t * inp.top_k * inp.m * inp.k
        tensors = {"weights": inp.w, "x": inp.x, "expert_ids": inp.ids, "routing": inp.routing, "y": inp.y}
        return Binding(tensors, params, "y", minimum.with_flops(flops))

    # ---- correctness ---------------------------------------------------------------------------
    def check(self, cfg: T2Config, case: Case, inp: T2Inputs, output) -> tuple[float, bool]:
        import cupy

        written = not bool(cupy.isnan(output).any())
        rng = np.random.default_rng(zlib.crc32(case.key.encode()))
        hit = np.flatnonzero(inp.counts)
        sample = rng.choice(hit, size=min(cfg.correctness_experts, hit.size), replace=False)
        fmt = get_format(cfg.weights)
        got, ref = [], []
        for expert in sample:  # one expert's weights dequantized at a time: the reference stays small
            tok, slot = np.nonzero(inp.ids_host == expert)
            x = inp.x_host[tok, slot] if cfg.x_per_slot else inp.x_host[tok]
            ref.append(kernels_ref.dense_gemm(fmt.dequantize(inp.w_host[expert]), x))  # [n][M]
            got.append(output[cupy.asarray(tok), cupy.asarray(slot)].get())
        return kernels_ref.rel_frobenius(np.concatenate(got), np.concatenate(ref)), written


def _capacity_check(op):
    def check():
        try:
            op.check()
        except Exception as exc:  # CapacityExceeded: tokens were dropped, the output is wrong
            return str(exc)
        return None

    return check


FAMILY = register_family(T2Family())
