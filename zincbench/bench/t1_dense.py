"""T1 gate: dense prefill GEMM Y[T][M] = X[T][K] W[M][K]^T with Q4_K/Q6_K weights.

Baseline = the engine's cuBLAS path timed as one unit: dequant to fp16 scratch + f32_to_f16 of the
activations + cuBLAS fp16 GEMM with fp32 accumulation. Also shown: cuBLAS alone on pre-dequantized
fp16 weights (the ceiling a fused kernel chases) and the engine's own Tensor-core kernels, declared in
experiments/engine_zinc.yaml (from its source tree with --engine-src, else our copies). Candidates:
our fused-dequant kernel (activation permute + GEMM), tile autotuned per GPU and shape; the same kernel on weights
the engine would repack once at load (fused_repacked: Q6_K in 16-byte aligned blocks, zincbench.quant.q6k_r); and the
round trip with bandwidth-bound conversions (round_trip_vec: what the engine's path costs with a better dequant kernel).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from zincbench.bench import autotune, register_family
from zincbench.bench.base import Case, ExperimentConfig, FamilyBase, GateRule, NotApplicable, Prepared, VariantInfo
from zincbench.config import load_config
from zincbench.measure.traffic import Traffic
from zincbench.ops.fused import check_tiles
from zincbench.quant import REPACKS, check_row_length, get_format
from zincbench.reference import kernels_ref


@dataclass
class DenseShape:
    name: str
    rows: int  # M (output features)
    k: int  # K (input features)
    weights: Literal["q4_k", "q6_k"] = "q4_k"


@dataclass
class T1Config(ExperimentConfig):
    shapes: list[DenseShape]
    tokens: list[int]
    variants: list[str] = field(default_factory=lambda: ["round_trip", "cublas_f16", "fused"])
    fused_tiles: list[str] = field(default_factory=lambda: ["2,8,4,1,3"])
    check_rows: int = 96
    check_tokens: int = 64
    gate: GateRule = field(default_factory=lambda: GateRule("fused", "round_trip", when={"min_tokens": 512}))
    # With gguf: the layer whose Q4_K/Q6_K projections are the shapes.
    gguf_layer: int = 0

    def __post_init__(self):
        for s in self.shapes:
            check_row_length(s.k)
            if s.rows < 1:
                raise ValueError(f"shape {s.name}: rows must be >= 1")
        if not self.variants:
            raise ValueError("variants must name at least one variant")
        unknown = set(self.variants) - set(VARIANTS)
        if unknown:
            raise ValueError(f"unknown variant(s) {sorted(unknown)} (known: {', '.join(VARIANTS)})")
        if not self.tokens or min(self.tokens) < 1:
            raise ValueError("tokens must be a non-empty list of positive counts")
        self.gate.check_when({"min_tokens", "weights"})
        check_tiles(self.fused_tiles)


VARIANTS = {
    "round_trip": VariantInfo(
        "round_trip",
        "baseline",
        2e-3,
        "engine path: dequant -> fp16 scratch, f32_to_f16(x), cuBLAS fp16 GEMM (fp32 accumulate)",
    ),
    "round_trip_vec": VariantInfo(
        "round_trip_vec",
        "candidate",
        2e-3,
        "the round trip with bandwidth-bound conversions: the same dequant and downcast values, 16 weights and 8"
        " activations per thread (kernels/dequant_vec.cu), then the same cuBLAS GEMM",
    ),
    "cublas_f16": VariantInfo("cublas_f16", "ceiling", 2e-3, "cuBLAS alone on pre-dequantized fp16 weights"),
    "fused": VariantInfo(
        "fused", "candidate", 2e-3, "fused-dequant Q4_K/Q6_K mma.sync GEMM, cp.async pipeline, autotuned tile"
    ),
    "fused_repacked": VariantInfo(
        "fused_repacked",
        "candidate",
        2e-3,
        "the fused GEMM on weights an engine repacks once at load (zincbench.quant.REPACKS: Q6_K into 16-byte"
        " aligned 224-byte blocks with fp16 scales, +6.7% memory; the same fp16 weights); formats without one skip it",
    ),
}


@dataclass
class T1Inputs:
    m: int
    k: int
    t: int
    fmt: str
    w_host: np.ndarray
    w: object
    x_host: np.ndarray
    x: object
    y: object


class T1Family(FamilyBase):
    name = "t1"
    default_experiment = "t1_dense_gemm"
    summary = "dense fused-dequant GEMM"
    _weights_cache: dict = {}

    def load(self, path, gguf: str | None = None, layer: int | None = None) -> T1Config:
        cfg = load_config(T1Config, path)
        if gguf:
            cfg.gguf, cfg.gguf_layer = gguf, layer or 0
        if cfg.gguf:
            cfg.shapes = [
                DenseShape(name, t.shape[0], t.shape[1], t.qtype) for name, t in self._gguf_tensors(cfg).items()
            ]
        return cfg

    def _gguf_tensors(self, cfg: T1Config) -> dict:
        from zincbench.errors import InputError
        from zincbench.quant.gguf_io import dense_projections

        tensors = {
            name: t for name, t in dense_projections(cfg.gguf, cfg.gguf_layer).items() if t.qtype in ("q4_k", "q6_k")
        }
        if not tensors:
            raise InputError(f"{cfg.gguf}: layer {cfg.gguf_layer} has no Q4_K or Q6_K dense projection")
        return tensors

    def cases(self, cfg: T1Config) -> list[Case]:
        return [
            Case(
                f"{s.name}-{s.weights}-M{s.rows}-K{s.k}-T{t}",
                {"shape": s.name, "rows": s.rows, "k": s.k, "tokens": t, "weights": s.weights},
            )
            for s in cfg.shapes
            for t in cfg.tokens
        ]

    def variants(self, cfg: T1Config) -> list[VariantInfo]:
        return [VARIANTS[v] for v in cfg.variants]

    def gate_applies(self, cfg: T1Config, case: Case) -> bool:
        when = cfg.gate.when
        return case.params["tokens"] >= when.get("min_tokens", 0) and case.params["weights"] == when.get(
            "weights", case.params["weights"]
        )

    @staticmethod
    def _weights_key(cfg: T1Config, case: Case) -> tuple:
        p = case.params
        return (p["rows"], p["k"], p["weights"], cfg.gguf, p["shape"])

    def build_inputs(self, cfg: T1Config, case: Case, rng) -> T1Inputs:
        import cupy

        p = case.params
        key = self._weights_key(cfg, case)
        if key not in self._weights_cache:
            self._weights_cache.clear()
            if cfg.gguf:
                host = np.ascontiguousarray(self._gguf_tensors(cfg)[p["shape"]].data)
            else:
                host = get_format(p["weights"]).random_blocks(rng, p["rows"], p["k"])
            self._weights_cache[key] = (host, cupy.asarray(host))
        w_host, w = self._weights_cache[key]
        x_host = rng.standard_normal((p["tokens"], p["k"]), dtype=np.float32)
        return T1Inputs(
            p["rows"],
            p["k"],
            p["tokens"],
            p["weights"],
            w_host,
            w,
            x_host,
            cupy.asarray(x_host),
            cupy.empty((p["tokens"], p["rows"]), dtype=cupy.float32),
        )

    def prepare(self, cfg: T1Config, case: Case, inp: T1Inputs, variant: str, tuner) -> Prepared:
        if variant in ("round_trip", "round_trip_vec"):
            from zincbench.ops.dequant import ENGINE, VECTORIZED
            from zincbench.ops.moe_cublas import DenseDequantCublas

            kernels = VECTORIZED if variant == "round_trip_vec" else ENGINE
            op = DenseDequantCublas(inp.fmt, inp.w, inp.x, inp.y, kernels)
            return Prepared(op, inp.y, op.traffic().with_flops(op.flops(), "fp16 weight scratch and fp16 activations"))
        if variant == "cublas_f16":
            from zincbench.ops.moe_cublas import DenseDequantCublas

            dequant, downcast, gemm = DenseDequantCublas(inp.fmt, inp.w, inp.x, inp.y).steps
            dequant()
            downcast()  # fp16 operands prepared once, outside the timed region
            return Prepared(gemm, inp.y, gemm.traffic().with_flops(gemm.flops(), "cuBLAS alone on fp16 operands"))
        if variant == "fused":
            return self._prepare_fused(cfg, case, inp, tuner, inp.fmt, inp.w)
        if variant == "fused_repacked":
            if inp.fmt not in REPACKS:
                raise NotApplicable(f"{inp.fmt} has no repacked layout")
            import cupy

            layout, repack = REPACKS[inp.fmt]
            # once per weight matrix (cleared with it): an engine repacks when it loads the model
            key = ("repacked", *self._weights_key(cfg, case))
            if key not in self._weights_cache:
                self._weights_cache[key] = cupy.asarray(repack(inp.w_host))
            return self._prepare_fused(cfg, case, inp, tuner, layout, self._weights_cache[key], "fused_repacked")
        raise ValueError(variant)

    def _prepare_fused(
        self, cfg: T1Config, case: Case, inp: T1Inputs, tuner, weights: str, w, name: str = "fused"
    ) -> Prepared:
        import cupy

        from zincbench.ops.fused import (
            FusedKQuantGemm,
            MmaTile,
            dense_traffic,
            permute_activations,
            permuted_activations,
        )

        xp = permuted_activations(cupy, inp.t, inp.k)

        def make_run(tile_text: str):
            tile = MmaTile.parse(tile_text)
            gemm = FusedKQuantGemm(tile, grouped=False, weights=weights)

            def run():
                permute_activations(inp.x, xp, tile.x_order)
                gemm.dense(w, xp, inp.y, inp.m, inp.k, inp.t)

            run.tile, run.gemm = tile, gemm
            return run

        tuning = tuner(f"t1/{name}/{case.key}", cfg.fused_tiles, make_run)
        run = make_run(tuning.choice)
        schedule = run.gemm.schedule(inp.m, inp.k, inp.t)
        return Prepared(
            run,
            inp.y,
            dense_traffic(inp.m, inp.k, inp.t, run.tile, weights),
            detail={
                "tile": run.tile.label,
                "tile_spec": tuning.choice,
                "autotune": autotune.record(tuning),
                # blocks: whole tiles, then stream-K blocks sharing the last wave's tiles (none without sk)
                "schedule": {
                    "tiles": schedule.tiles,
                    "whole_tile_blocks": schedule.dp_tiles,
                    "stream_k_blocks": schedule.ctas,
                },
            },
        )

    def declared_binding(self, cfg: T1Config, case: Case, inp: T1Inputs):
        """Tensors and parameters a declared (YAML) variant can name; y[T][M] is what is checked."""
        from zincbench.bench.declared import Binding

        row_bytes = get_format(inp.fmt).row_bytes(inp.k)
        params = {
            "T": inp.t,
            "M": inp.m,
            "K": inp.k,
            "row_bytes": row_bytes,
            "weights": inp.fmt,
            "qtype": inp.fmt.replace("_", ""),
        }
        minimum = inp.m * row_bytes + 4 * inp.t * inp.k + 4 * inp.t * inp.m  # weights, x and y once
        return Binding(
            {"weights": inp.w, "x": inp.x, "y": inp.y},
            params,
            "y",
            Traffic(minimum, minimum, 2 * inp.t * inp.m * inp.k),
        )

    def check(self, cfg: T1Config, case: Case, inp: T1Inputs, output) -> tuple[float, bool]:
        import cupy

        written = not bool(cupy.isnan(output).any())
        rng = np.random.default_rng(zlib.crc32(case.key.encode()))
        rows = np.sort(rng.choice(inp.m, size=min(cfg.check_rows, inp.m), replace=False))
        toks = np.sort(rng.choice(inp.t, size=min(cfg.check_tokens, inp.t), replace=False))
        ref = kernels_ref.dense_gemm(get_format(inp.fmt).dequantize(inp.w_host[rows]), inp.x_host[toks])
        got = output[cupy.asarray(toks)][:, cupy.asarray(rows)].get()
        return kernels_ref.rel_frobenius(got, ref), written


FAMILY = register_family(T1Family())
