"""`layer` family: the whole routed-expert MoE FFN block, as the engine launches it vs a grouped
Tensor-core candidate, with a per-stage breakdown.

Block (zinc-kernels.md §2.1 "MoE FFN"): the FFN-normed activations x [T][n_embd] -> router GEMV (f32)
-> top-k + softmax over the chosen logits -> routed gate and up (Q4_K) -> SwiGLU -> routed down (Q4_K,
Q5_K or Q6_K) -> routing-weighted combine into the residual stream hidden [T][n_embd], plus the
sigmoid-gated shared expert (dense path). The engine's block is declared in experiments/engine_zinc.yaml
(its matvec path below moe_tc_min_t, its grouped-TC path from it); the candidate (``fused_block``) is
zincbench/ops/moe_layer.py. Both start each run from hidden = residual.

Checked against float64 NumPy on a sample of tokens (all of them for small T): the router logits, and
the block output computed from the GPU's own logits (so near-ties between the k-th and (k+1)-th
expert cannot pick different experts; exact ties follow the engine's rule, see ``engine_topk``).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Literal, Optional

import numpy as np

from zincbench.bench import autotune, register_family
from zincbench.bench.base import (
    Case,
    ExperimentConfig,
    FamilyBase,
    GateRule,
    NotApplicable,
    Prepared,
    VariantInfo,
    in_order,
)
from zincbench.config import load_config
from zincbench.errors import InputError
from zincbench.measure.traffic import Traffic
from zincbench.ops.fused import check_tiles
from zincbench.quant import check_row_length, get_format
from zincbench.reference.kernels_ref import rel_frobenius

TOPK_BLOCK = 64  # softmax_topk_batched's block: the tie rule depends on it
DOWN_TYPES = ("q4_k", "q5_k", "q6_k")
SHARED_TYPES = ("q4_k", "q6_k")  # the dense path's dequant kernels (the real qwen36 shared expert is Q8_0)
X_SCALE = 0.05  # activations' scale: keeps random-block gate*up products well inside fp16


@dataclass
class LayerShape:
    name: str
    experts: int
    top_k: int
    n_embd: int
    expert_width: int
    down_types: list[str]
    shared_width: int = 0  # 0: no shared expert
    shared_type: Literal["q4_k", "q6_k"] = "q6_k"
    # MoE layers of the model by down type, for the prefill projection (qwen36-35b-a3b: 36 Q5_K + 4 Q6_K)
    moe_layers: dict[str, int] = field(default_factory=dict)

    def check(self) -> None:
        if not 1 <= self.top_k <= min(self.experts, 32) or self.experts > 256:
            raise ValueError(f"{self.name}: need 1 <= top_k <= min(E, 32) and E <= 256 (the top-k kernel's limits)")
        for what, k in (
            ("n_embd", self.n_embd),
            ("expert_width", self.expert_width),
            ("shared_width", self.shared_width or 256),
        ):
            try:
                check_row_length(k)  # each is some projection's K
            except InputError as exc:
                raise ValueError(f"{self.name}: {what}: {exc}") from None
        bad = set(self.down_types) - set(DOWN_TYPES) or set(self.moe_layers) - set(self.down_types)
        if not self.down_types or bad:
            raise ValueError(f"{self.name}: down_types must be among {', '.join(DOWN_TYPES)} and cover moe_layers")


@dataclass
class LayerConfig(ExperimentConfig):
    shapes: list[LayerShape]
    tokens: list[int]
    routing: list[Literal["uniform", "zipf"]] = field(default_factory=lambda: ["uniform"])
    zipf_s: float = 1.0
    fused_tiles: list[str] = field(default_factory=lambda: ["1,8,8,1,2", "1,4,4,1,4"])
    correctness_tokens: int = 12  # tokens checked against float64 (all when T is at most this)
    gate: GateRule = field(default_factory=lambda: GateRule("fused_block", "engine", when={"min_tokens": 256}))
    # llama.cpp prefill (pp) tokens/s of the whole model, device -> prompt length -> tok/s: shown beside
    # the projected MoE-part tokens/s, never judged.
    llama_cpp_pp_tps: dict[str, dict[str, float]] = field(default_factory=dict)
    llama_cpp_pp_source: str = ""
    gguf_layer: Optional[int] = None

    def __post_init__(self):
        if not self.shapes or not self.tokens or not self.routing:
            raise ValueError("shapes, tokens and routing must not be empty")
        for s in self.shapes:
            s.check()
        if any(t < 1 or t >= 65536 for t in self.tokens):
            raise ValueError("tokens must be in 1..65535 (the engine's order packs t in 16 bits)")
        self.gate.check_when({"min_tokens"})
        check_tiles(self.fused_tiles, grouped=True)
        for device, table in self.llama_cpp_pp_tps.items():
            if not all(str(t).isdigit() for t in table):
                raise ValueError(
                    f"llama_cpp_pp_tps.{device}: keys are prompt lengths (whole numbers), got {sorted(table)}"
                )


VARIANTS = {
    "fused_block": VariantInfo(
        "fused_block",
        "candidate",
        5e-3,
        "routing once; gate+up one grouped fused-dequant Q4_K GEMM, SwiGLU in its epilogue (fp16); down the "
        "same fused kernel on its type (Q4_K, Q5_K, Q6_K) with the weighted combine in its epilogue; shared "
        "expert dense",
    ),
    "fused_block_cublas_down": VariantInfo(
        "fused_block_cublas_down",
        "reference",
        5e-3,
        "fused_block with the down by dequant + batched cuBLAS on every type: what the fused down is worth "
        "(and the fallback candidate)",
    ),
}
DOWN_OF_VARIANT = {"fused_block": "fused", "fused_block_cublas_down": "cublas"}


# ---- the float64 reference ---------------------------------------------------------------------------
def engine_topk(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The engine's softmax_topk_batched on [T][E] logits: ids [T][k] and float64 weights (softmax over
    the k chosen logits). Order and ties: largest first; among equal logits the lowest index mod 64
    (the thread) wins, then the lowest index."""
    t, e = logits.shape
    index = np.arange(e)
    # lexsort: last key is primary -> value descending, then thread, then index within the thread
    order = np.stack([np.lexsort((index // TOPK_BLOCK, index % TOPK_BLOCK, -row.astype(np.float64))) for row in logits])
    ids = order[:, :k]
    chosen = np.take_along_axis(logits.astype(np.float64), ids, axis=1)
    w = np.exp(chosen - chosen.max(axis=1, keepdims=True))
    return ids, w / w.sum(axis=1, keepdims=True)


def silu(v: np.ndarray) -> np.ndarray:
    return v / (1.0 + np.exp(-v))


def reference_block(x, residual, ids, weights, expert, shared=None) -> np.ndarray:
    """float64 hidden rows after the block for the tokens of ``x`` [n][n_embd].

    expert(e) -> (gate [ef][n_embd], up [ef][n_embd], down [n_embd][ef]) dequantized; shared: None or
    (gate [efs][n_embd], up, down [n_embd][efs], gate_inp [n_embd])."""
    x = x.astype(np.float64)
    out = residual.astype(np.float64).copy()
    for e in np.unique(ids):
        tok, slot = np.nonzero(ids == e)
        g, u, d = expert(int(e))
        h = silu(x[tok] @ g.T) * (x[tok] @ u.T)
        np.add.at(out, tok, weights[tok, slot][:, None] * (h @ d.T))
    if shared is not None:
        g, u, d, gate_inp = shared
        o = (silu(x @ g.T) * (x @ u.T)) @ d.T
        out += o / (1.0 + np.exp(-(x @ gate_inp)))[:, None]
    return out


# ---- inputs ----------------------------------------------------------------------------------------------
@dataclass
class LayerWeights:
    """Host blocks (uint8 [..][row bytes]; the router f32) and their device copies, one set per shape."""

    host: dict
    device: dict
    types: dict  # tensor -> format


@dataclass
class LayerInputs:
    shape: LayerShape
    down_type: str
    weights: LayerWeights
    x_host: np.ndarray
    residual_host: np.ndarray
    buffers: object  # ops.moe_layer.LayerBuffers
    counts: np.ndarray  # tokens per expert of this case's routing
    reference_cache: dict = field(default_factory=dict)


def zipf_router_column(rng, e: int, s: float) -> np.ndarray:
    """A per-expert logit offset with Zipf(s) popularity in a random expert order."""
    return np.log(1.0 / np.arange(1, e + 1) ** s)[rng.permutation(e)]


class LayerFamily(FamilyBase):
    name = "layer"
    default_experiment = "moe_layer"
    summary = "MoE FFN block: router, top-k, gate/up, SwiGLU, down, combine, shared expert"
    _weights_cache: dict = {}

    def load(self, path, gguf: str | None = None, layer: int | None = None) -> LayerConfig:
        cfg = load_config(LayerConfig, path)
        if gguf:
            cfg.gguf, cfg.gguf_layer = gguf, layer
        if cfg.gguf:
            tensors = gguf_layer_tensors(cfg.gguf, cfg.gguf_layer)
            cfg.shapes = [shape_of_gguf(tensors, cfg.shapes[0] if cfg.shapes else None, cfg.gguf, cfg.gguf_layer)]
        return cfg

    def cases(self, cfg: LayerConfig) -> list[Case]:
        out = []
        for s in cfg.shapes:
            for down in s.down_types:
                for routing in cfg.routing:
                    for t in cfg.tokens:
                        key = f"{s.name}-{down.replace('_', '')}-T{t}-{routing}"
                        out.append(
                            Case(
                                key,
                                {
                                    "shape": s.name,
                                    "experts": s.experts,
                                    "top_k": s.top_k,
                                    "n_embd": s.n_embd,
                                    "expert_width": s.expert_width,
                                    "down_type": down,
                                    "tokens": t,
                                    "routing": routing,
                                    "shared_width": s.shared_width,
                                    "shared_type": s.shared_type,
                                    "moe_layers": s.moe_layers.get(down, 0),
                                    "gguf": cfg.gguf,
                                },
                            )
                        )
        return out

    def variants(self, cfg: LayerConfig) -> list[VariantInfo]:
        return list(VARIANTS.values())

    def gate_applies(self, cfg: LayerConfig, case: Case) -> bool:
        return case.params["tokens"] >= cfg.gate.when.get("min_tokens", 0)

    # ---- inputs ------------------------------------------------------------------------------------
    def _weights(self, cfg: LayerConfig, s: LayerShape, down_type: str, rng) -> LayerWeights:
        import cupy

        key = (s.name, s.experts, s.n_embd, s.expert_width, s.shared_width, down_type, cfg.gguf, cfg.gguf_layer)
        if key not in self._weights_cache:
            self._weights_cache.clear()  # one weight set resident at a time
            host, types = self._build_weights(cfg, s, down_type, rng)
            self._weights_cache[key] = LayerWeights(host, {name: cupy.asarray(a) for name, a in host.items()}, types)
        return self._weights_cache[key]

    def _build_weights(self, cfg: LayerConfig, s: LayerShape, down_type: str, rng):
        if cfg.gguf:
            tensors = gguf_layer_tensors(cfg.gguf, cfg.gguf_layer)
            host = {name: np.ascontiguousarray(t.data) for name, t in tensors.items()}
            host["router"] = host["router"].astype(np.float32)
            if "shared_gate_inp" in host:
                host["shared_gate_inp"] = host["shared_gate_inp"].astype(np.float32).reshape(-1)
            return host, {name: t.qtype for name, t in tensors.items()}
        e, ef, n = s.experts, s.expert_width, s.n_embd
        types = {"gate": "q4_k", "up": "q4_k", "down": down_type}
        host = {
            name: get_format(types[name]).random_blocks(rng, e * rows, k).reshape(e, rows, -1)
            for name, rows, k in (("gate", ef, n), ("up", ef, n), ("down", n, ef))
        }
        host["router"] = rng.standard_normal((e, n), dtype=np.float32) / np.float32(math.sqrt(n) * X_SCALE)
        if s.shared_width:
            for name, rows, k in (
                ("shared_gate", s.shared_width, n),
                ("shared_up", s.shared_width, n),
                ("shared_down", n, s.shared_width),
            ):
                types[name] = s.shared_type
                host[name] = get_format(s.shared_type).random_blocks(rng, rows, k)
            host["shared_gate_inp"] = rng.standard_normal(n, dtype=np.float32) / np.float32(math.sqrt(n) * X_SCALE)
        return host, types

    def build_inputs(self, cfg: LayerConfig, case: Case, rng) -> LayerInputs:
        import cupy

        from zincbench.ops.fused import permute_activations, permuted_activations
        from zincbench.ops.moe_layer import LayerBuffers, tensor_core_routing

        p = case.params
        s = next(sh for sh in cfg.shapes if sh.name == p["shape"])
        w = self._weights(cfg, s, p["down_type"], rng)
        t, n = p["tokens"], s.n_embd
        x = rng.standard_normal((t, n), dtype=np.float32) * np.float32(X_SCALE)
        if p["routing"] == "zipf":
            # Skewed popularity through the router itself: x[:, 0] = 1 and router column 0 = log popularity,
            # so logit = log p_e + noise of about unit scale (the other columns).
            x[:, 0] = 1.0
            skewed = w.host["router"].copy()
            skewed[:, 0] = zipf_router_column(rng, s.experts, cfg.zipf_s)
            w = LayerWeights({**w.host, "router": skewed}, {**w.device, "router": cupy.asarray(skewed)}, w.types)
        residual = rng.standard_normal((t, n), dtype=np.float32)
        d = w.device
        shared = s.shared_width > 0
        buffers = LayerBuffers(
            x=cupy.asarray(x),
            hidden=cupy.empty((t, n), dtype=cupy.float32),
            residual=cupy.asarray(residual),
            router=d["router"],
            gate=d["gate"],
            up=d["up"],
            down=d["down"],
            down_type=w.types["down"],
            shared_gate=d.get("shared_gate") if shared else None,
            shared_up=d.get("shared_up") if shared else None,
            shared_down=d.get("shared_down") if shared else None,
            shared_type=w.types.get("shared_gate", s.shared_type),
            shared_gate_inp=d.get("shared_gate_inp") if shared else None,
            logits=cupy.empty((t, s.experts), dtype=cupy.float32),
            table=cupy.empty((t, 2 * s.top_k), dtype=cupy.uint32),
            top_k=s.top_k,
        )

        # This case's routing, once, as the candidate routes (its padded down path is sized by the largest
        # bucket); the traffic floor counts the hit experts.
        xp = permuted_activations(cupy, t, n)
        permute_activations(buffers.x, xp)
        tensor_core_routing(buffers, xp)()
        counts = np.bincount(buffers.table[:, : s.top_k].get().ravel(), minlength=s.experts)
        return LayerInputs(s, p["down_type"], w, x, residual, buffers, counts)

    # ---- variants ------------------------------------------------------------------------------------
    def prepare(self, cfg: LayerConfig, case: Case, inp: LayerInputs, variant: str, tuner) -> Prepared:
        from zincbench.ops.fused import MmaTile
        from zincbench.ops.moe_layer import candidate_stages

        if variant not in DOWN_OF_VARIANT:
            raise ValueError(variant)
        if inp.weights.types["gate"] != "q4_k" or inp.weights.types["up"] != "q4_k":
            raise NotApplicable("the fused gate/up kernel reads Q4_K")
        shared = inp.shape.shared_width > 0
        # The padded down path's rows per expert: this case's largest bucket (the routing is fixed per case),
        # rounded up to 8; the epilogue drops what does not fit, so a wrong size fails the check.
        capacity = int(-(-max(int(inp.counts.max()), 1) // 8) * 8)

        def make_run(tile_text: str):
            stages = candidate_stages(
                inp.buffers, MmaTile.parse(tile_text), shared=shared, down=DOWN_OF_VARIANT[variant], capacity=capacity
            )
            return in_order(stages)

        tuning = tuner(f"layer/{variant}/{case.key}", cfg.fused_tiles, make_run)
        run = make_run(tuning.choice)
        return Prepared(
            run,
            inp.buffers.hidden,
            self.block_traffic(inp),
            stages=run.parts,
            detail={
                "tile": MmaTile.parse(tuning.choice).label,
                "tile_spec": tuning.choice,
                "capacity": capacity,
                "autotune": autotune.record(tuning),
            },
        )

    def block_traffic(self, inp: LayerInputs) -> Traffic:
        """minimum: the weights of the experts this routing hits, once, the router and shared expert
        once, x, the residual read and hidden written; FLOPs of every routed and shared product."""
        b, s = inp.buffers, inp.shape
        hit = int((inp.counts > 0).sum())
        h = inp.weights.host
        per_expert = sum(h[name][0].nbytes for name in ("gate", "up", "down"))
        shared = sum(
            h[name].nbytes for name in ("shared_gate", "shared_up", "shared_down", "shared_gate_inp") if name in h
        )
        io = 4 * b.t * b.n_embd * 3
        routed = 2 * b.t * s.top_k * 3 * s.expert_width * b.n_embd
        flops = routed + 2 * b.t * s.experts * b.n_embd + 2 * b.t * 3 * s.shared_width * b.n_embd
        floor = hit * per_expert + h["router"].nbytes + shared + io
        return Traffic(
            floor, floor, flops, "floor: hit experts' weights once + router + shared expert + x, residual, hidden"
        )

    def declared_binding(self, cfg: LayerConfig, case: Case, inp: LayerInputs):
        from zincbench.bench.declared import Binding

        b, s = inp.buffers, inp.shape
        tensors = {
            name: getattr(b, name)
            for name in ("x", "hidden", "residual", "router", "gate", "up", "down", "logits", "table")
        }
        if s.shared_width:
            tensors.update(
                {name: getattr(b, name) for name in ("shared_gate", "shared_up", "shared_down", "shared_gate_inp")}
            )
        fmt = get_format
        params = {
            "T": b.t,
            "E": s.experts,
            "top_k": s.top_k,
            "n_embd": s.n_embd,
            "ef": s.expert_width,
            "ef_sh": s.shared_width,
            "down_qtype": b.down_type.replace("_", ""),
            "shared_qtype": b.shared_type.replace("_", ""),
            "gate_row_bytes": fmt("q4_k").row_bytes(s.n_embd),
            "down_row_bytes": fmt(b.down_type).row_bytes(s.expert_width),
            "gate_slice": s.expert_width * fmt("q4_k").row_bytes(s.n_embd),
            "down_slice": s.n_embd * fmt(b.down_type).row_bytes(s.expert_width),
        }
        return Binding(tensors, params, "hidden", self.block_traffic(inp))

    # ---- correctness -----------------------------------------------------------------------------------
    def check(self, cfg: LayerConfig, case: Case, inp: LayerInputs, output) -> tuple[float, bool]:
        import cupy

        written = not bool(cupy.isnan(output).any())
        b, s = inp.buffers, inp.shape
        t = b.t
        rng = np.random.default_rng(zlib.crc32(case.key.encode()))
        tokens = np.arange(t) if t <= cfg.correctness_tokens else np.sort(rng.choice(t, cfg.correctness_tokens, False))
        logits = b.logits.get()[tokens].astype(np.float64)
        x = inp.x_host[tokens]
        router = inp.weights.host["router"]
        logits_ref = x.astype(np.float64) @ router.astype(np.float64).T
        rel_logits = rel_frobenius(logits, logits_ref)
        ids, weights = engine_topk(b.logits.get()[tokens], s.top_k)
        key = (tokens.tobytes(), ids.tobytes(), weights.tobytes())
        if key not in inp.reference_cache:
            inp.reference_cache.clear()
            inp.reference_cache[key] = reference_block(
                x, inp.residual_host[tokens], ids, weights, self._expert_reader(inp), self._shared_reference(inp)
            )
        ref = inp.reference_cache[key]
        got = output[cupy.asarray(tokens)].get().astype(np.float64)
        # The block adds onto the residual: judge the block's contribution, not the residual it carries.
        contribution = rel_frobenius(got - inp.residual_host[tokens], ref - inp.residual_host[tokens])
        return max(contribution, rel_logits), written

    def _expert_reader(self, inp: LayerInputs):
        h, types = inp.weights.host, inp.weights.types

        def expert(e: int):
            return tuple(
                get_format(types[name]).dequantize(h[name][e]).astype(np.float64) for name in ("gate", "up", "down")
            )

        return expert

    def _shared_reference(self, inp: LayerInputs):
        h, types = inp.weights.host, inp.weights.types
        if not inp.shape.shared_width:
            return None
        mats = tuple(
            get_format(types[name]).dequantize(h[name]).astype(np.float64)
            for name in ("shared_gate", "shared_up", "shared_down")
        )
        return (*mats, h["shared_gate_inp"].astype(np.float64))


# ---- a real layer from a GGUF file -------------------------------------------------------------------------
GGUF_ROLES = {
    "router": "ffn_gate_inp",
    "gate": "ffn_gate_exps",
    "up": "ffn_up_exps",
    "down": "ffn_down_exps",
    "shared_gate": "ffn_gate_shexp",
    "shared_up": "ffn_up_shexp",
    "shared_down": "ffn_down_shexp",
    "shared_gate_inp": "ffn_gate_inp_shexp",
}
REQUIRED_ROLES = ("router", "gate", "up", "down")


def gguf_layer_tensors(path: str, layer: int | None) -> dict:
    """The MoE block's tensors of one layer (``layer`` None: the first with experts), by our names."""
    from zincbench.quant.gguf_io import expert_tensors, list_tensors, read_tensor

    if layer is None:
        layer = int(next(iter(expert_tensors(path).values())).name.split(".")[1])
    names = {name for name, _, _ in list_tensors(path)}
    found = {
        ours: read_tensor(path, f"blk.{layer}.{role}.weight")
        for ours, role in GGUF_ROLES.items()
        if f"blk.{layer}.{role}.weight" in names
    }
    missing = [GGUF_ROLES[r] for r in REQUIRED_ROLES if r not in found]
    if missing:
        raise InputError(f"{path}: layer {layer} lacks {', '.join(f'blk.{layer}.{m}.weight' for m in missing)}")
    shared = [r for r in GGUF_ROLES if r.startswith("shared")]
    if any(r in found for r in shared) and not all(r in found for r in shared):
        raise InputError(
            f"{path}: layer {layer} has only part of the shared expert "
            f"({', '.join(GGUF_ROLES[r] for r in shared if r in found)})"
        )
    return found


def shape_of_gguf(tensors: dict, template: LayerShape | None, path: str, layer: int | None) -> LayerShape:
    """The layer's shape and types from its tensors; the model's layer counts come from the YAML's first
    shape (``template``), the file cannot say how many layers share this down type."""
    e, ef, n = tensors["gate"].shape
    where = f"{path}: layer {layer if layer is not None else '(first)'}"
    expect = {"router": (e, n), "up": (e, ef, n), "down": (e, n, ef)}
    for name, shape in expect.items():
        if tuple(tensors[name].shape) != shape:
            raise InputError(f"{where}: {GGUF_ROLES[name]} has shape {tensors[name].shape}, expected {shape}")
    if tensors["router"].qtype not in ("f32", "f16"):
        raise InputError(f"{where}: the router is {tensors['router'].qtype}; the engine's block needs F32")
    for name in ("gate", "up"):
        if tensors[name].qtype != "q4_k":
            raise InputError(
                f"{where}: {GGUF_ROLES[name]} is {tensors[name].qtype}; the block's gate/up kernels read q4_k"
            )
    down = tensors["down"].qtype
    if down not in DOWN_TYPES:
        raise InputError(f"{where}: ffn_down_exps is {down}; the block reads {', '.join(DOWN_TYPES)}")
    shared_width, shared_type = 0, "q6_k"
    if "shared_gate" in tensors:
        shared_width, _ = tensors["shared_gate"].shape
        shared_type = tensors["shared_gate"].qtype
        if {tensors[r].qtype for r in ("shared_gate", "shared_up", "shared_down")} - set(SHARED_TYPES):
            raise InputError(
                f"{where}: the shared expert must be {' or '.join(SHARED_TYPES)} (dense-path dequant kernels)"
            )
    top_k = template.top_k if template else 8
    name = template.name if template else "gguf"
    layers = {down: (template.moe_layers.get(down, 0) if template else 0)}
    try:
        shape = LayerShape(name, e, top_k, n, ef, [down], shared_width, shared_type, layers)
        shape.check()
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None
    return shape


FAMILY = register_family(LayerFamily())
