"""T4 gate: launch and recast fusion over a layer's GEMM group (the prefill-gap plan's lever T4).

A group is one RMSNorm and the GEMMs that read its output: the attention input group (norm -> Q, K, V)
and the FFN input group (norm -> gate, up), at each catalog model's widths and weight types
(experiments/t4_fusion.yaml). Paths (zincbench/ops/norm_cast.py):

- ``engine_path`` (baseline, our copies in the engine's ABI): rms_norm (f32), then per GEMM dequant to the
  fp16 scratch, f32_to_f16 of the normed rows, cuBLAS fp16 GEMM — 1 + 3n launches. The same path with the
  engine's own kernels is the declared ``engine`` (experiments/engine_zinc.yaml, ``--engine-src``).
- ``norm_f16`` (candidate A): the norm writes fp16 once (our rms_norm_to_f16); per GEMM dequant + cuBLAS.
- ``norm_f16_shared`` (candidate B): A, with the group's weights of one type dequantized by one launch
  into one scratch; per GEMM cuBLAS on its rows (the engine's call).
- ``t1_fused`` (reference): T1's fused-dequant GEMM per GEMM behind one shared activation permute.

The gate is bit-identity first: every variant's output is compared bit for bit with ``engine_path``'s
output on the same inputs (computed once per case); a variant listed in ``bit_identical`` (and the
gate's candidate) that differs in one bit fails its check, so it is never timed and never GO. Every
variant, the declared engine included, records what it found (``detail.bits``). Then the usual float64
check (the norm and the GEMMs from the dequantized weights, sampled rows and tokens) and timing.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Literal

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
from zincbench.ops.fused import check_tiles
from zincbench.quant import check_row_length, get_format
from zincbench.reference import kernels_ref
from zincbench.reference.rms_norm_ref import rms_norm_f64

BIT_REFERENCE = "engine_path"


@dataclass
class GemmSpec:
    name: str
    rows: int  # M, output features
    weights: Literal["q4_k", "q5_k", "q6_k"] = "q4_k"


@dataclass
class GroupSpec:
    model: str
    group: str  # e.g. attn, ffn
    n_embd: int  # K of every GEMM: the norm's width
    gemms: list[GemmSpec]
    layers: int  # the model's layers that run this group as written (for the prefill projection)

    @property
    def name(self) -> str:
        return f"{self.model}.{self.group}"

    def check(self) -> None:
        try:
            check_row_length(self.n_embd)
        except InputError as exc:
            raise ValueError(f"{self.name}: n_embd: {exc}") from None
        if not self.gemms or any(g.rows < 1 for g in self.gemms):
            raise ValueError(f"{self.name}: gemms must list at least one GEMM, each with rows >= 1")
        if self.layers < 0:
            raise ValueError(f"{self.name}: layers must be >= 0")


@dataclass
class T4Config(ExperimentConfig):
    groups: list[GroupSpec]
    tokens: list[int]
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    eps: float = 1e-6
    bit_identical: list[str] = field(default_factory=lambda: ["norm_f16", "norm_f16_shared"])
    fused_tiles: list[str] = field(default_factory=lambda: ["2,8,4,1,3"])
    check_rows: int = 64  # per GEMM, against float64
    check_tokens: int = 32
    gate: GateRule = field(default_factory=lambda: GateRule("norm_f16_shared", BIT_REFERENCE, when={"min_tokens": 512}))
    # llama.cpp prefill (llama-bench pp<T>) of the whole model, tokens/s: device -> model -> T. Shown beside
    # the projection, never judged.
    llama_cpp_pp_tps: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    llama_cpp_pp_source: str = ""

    def __post_init__(self):
        if not self.groups:
            raise ValueError("groups must list at least one layer group")
        names = [g.name for g in self.groups]
        if len(set(names)) != len(names):
            raise ValueError(f"groups: a model.group appears twice ({', '.join(sorted(names))})")
        for g in self.groups:
            g.check()
        if not self.tokens or min(self.tokens) < 1:
            raise ValueError("tokens must be a non-empty list of positive counts")
        unknown = (set(self.variants) | set(self.bit_identical)) - set(VARIANTS)
        if unknown:
            raise ValueError(f"unknown variant(s) {sorted(unknown)} (known: {', '.join(VARIANTS)})")
        if BIT_REFERENCE not in self.variants:
            raise ValueError(f"variants must include {BIT_REFERENCE} (the bit-identity reference)")
        if not self.eps > 0:
            raise ValueError(f"eps must be positive, got {self.eps}")
        self.gate.check_when({"min_tokens"})
        check_tiles(self.fused_tiles)
        for device, models in self.llama_cpp_pp_tps.items():
            for model, table in models.items():
                if not all(str(t).isdigit() for t in table):
                    raise ValueError(
                        f"llama_cpp_pp_tps.{device}.{model}: keys are prompt lengths (whole numbers), "
                        f"got {sorted(table)}"
                    )


VARIANTS = {
    "engine_path": VariantInfo(
        "engine_path",
        "baseline",
        2e-3,
        "rms_norm (f32), per GEMM: dequant -> fp16 scratch, f32_to_f16, cuBLAS fp16 (our copies, the engine's ABI)",
    ),
    "norm_f16": VariantInfo(
        "norm_f16", "candidate", 2e-3, "fused rms_norm_to_f16 (one launch, fp16 rows), per GEMM: dequant, cuBLAS"
    ),
    "norm_f16_shared": VariantInfo(
        "norm_f16_shared",
        "candidate",
        2e-3,
        "norm_f16 with one dequant launch per weight type into one shared scratch, per GEMM: cuBLAS",
    ),
    "t1_fused": VariantInfo(
        "t1_fused", "reference", 2e-3, "rms_norm, one shared permute, T1's fused-dequant GEMM per GEMM"
    ),
}
PATH_OF_VARIANT = {"engine_path": "engine", "norm_f16": "norm_f16", "norm_f16_shared": "norm_f16_shared"}


# ---- bit identity ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BitComparison:
    differing: int  # 32-bit words that differ
    total: int
    first: int | None  # flat index of the first that differs

    @property
    def identical(self) -> bool:
        return self.differing == 0

    def as_detail(self) -> dict:
        return {"identical": self.identical, "differing": self.differing, "total": self.total, "first": self.first}


def compare_bits(reference, output, xp=np) -> BitComparison:
    """``output`` against ``reference`` (f32 arrays of one shape, NumPy or CuPy as ``xp``) as raw 32-bit words:
    NaN payloads, signed zeros and the last mantissa bit all count."""
    if reference.shape != output.shape or reference.dtype != output.dtype:
        return BitComparison(max(reference.size, output.size), max(reference.size, output.size), 0)
    differ = reference.ravel().view(xp.uint32) != output.ravel().view(xp.uint32)
    count = int(differ.sum())
    return BitComparison(count, int(reference.size), int(xp.argmax(differ)) if count else None)


def bits_failure(cmp: BitComparison, gemm_of_index) -> str | None:
    """The check failure of a variant that must be bit-identical and is not (None when it is)."""
    if cmp.identical:
        return None
    gemm, t, m = gemm_of_index(cmp.first)
    return (
        f"not bit-identical to {BIT_REFERENCE}: {cmp.differing} of {cmp.total} output words differ "
        f"(first: {gemm} token {t} row {m})"
    )


def judge_bits(cfg: T4Config, case: Case, variant: str, reference, output, xp=np) -> tuple[dict, str | None]:
    """(detail, failure): the comparison of ``output`` with the engine path's ``reference`` for the row, and
    the check failure when ``variant`` must be bit-identical (``bit_identical`` or the gate's candidate)."""
    cmp = compare_bits(reference, output, xp)
    must = variant in cfg.bit_identical or variant == cfg.gate.candidate
    names = [(g[0], g[1]) for g in case.params["gemms"]]
    failure = bits_failure(cmp, lambda i: gemm_at(names, case.params["tokens"], i)) if must else None
    return {"bits": cmp.as_detail()}, failure


# ---- inputs ------------------------------------------------------------------------------------------------
@dataclass
class T4Inputs:
    spec: GroupSpec
    x_host: np.ndarray
    norm_w_host: np.ndarray
    runs_host: list  # (format, uint8 [rows][row bytes])
    buffers: object  # ops.norm_cast.GroupBuffers
    reference: object  # engine_path's output (device), the bit-identity reference


def weight_runs(gemms: list[GemmSpec]) -> list[tuple[str, int]]:
    """(format, rows) per run of consecutive GEMMs of one weight type."""
    runs: list[list] = []
    for g in gemms:
        if runs and runs[-1][0] == g.weights:
            runs[-1][1] += g.rows
        else:
            runs.append([g.weights, g.rows])
    return [(fmt, rows) for fmt, rows in runs]


def gemm_at(spec_gemms: list[tuple[str, int]], t: int, index: int) -> tuple[str, int, int]:
    """(GEMM name, token, row) of flat index ``index`` of the concatenated [T][M] outputs."""
    start = 0
    for name, m in spec_gemms:
        if index < start + t * m:
            local = index - start
            return name, local // m, local % m
        start += t * m
    raise IndexError(index)


def gemm_weights(runs: list, gemms: list[GemmSpec]) -> list:
    """Each GEMM's rows of the runs (``weight_runs`` order: a run holds consecutive GEMMs of its type)."""
    out, i = [], 0
    for _, run in runs:
        start = 0
        while start < run.shape[0]:
            out.append(run[start : start + gemms[i].rows])
            start += gemms[i].rows
            i += 1
    return out


class T4Family(FamilyBase):
    name = "t4"
    default_experiment = "t4_fusion"
    summary = "norm + GEMM group: fp16 norm output and shared dequant/recast vs the engine's launches"
    _weights_cache: dict = {}

    def load(self, path, gguf: str | None = None, layer: int | None = None) -> T4Config:
        if gguf:
            raise InputError("t4 takes its groups from the experiment YAML; --gguf is not supported")
        return load_config(T4Config, path)

    def cases(self, cfg: T4Config) -> list[Case]:
        return [
            Case(
                f"{g.name}-T{t}",
                {
                    "model": g.model,
                    "group": g.group,
                    "n_embd": g.n_embd,
                    "gemms": [[x.name, x.rows, x.weights] for x in g.gemms],
                    "layers": g.layers,
                    "tokens": t,
                },
            )
            for g in cfg.groups
            for t in cfg.tokens
        ]

    def variants(self, cfg: T4Config) -> list[VariantInfo]:
        return [VARIANTS[v] for v in cfg.variants]

    def gate_applies(self, cfg: T4Config, case: Case) -> bool:
        return case.params["tokens"] >= cfg.gate.when.get("min_tokens", 0)

    def _spec(self, cfg: T4Config, case: Case) -> GroupSpec:
        return next(g for g in cfg.groups if g.model == case.params["model"] and g.group == case.params["group"])

    def build_inputs(self, cfg: T4Config, case: Case, rng) -> T4Inputs:
        import cupy

        from zincbench.ops.norm_cast import GroupBuffers, group_steps

        spec = self._spec(cfg, case)
        t, k = case.params["tokens"], spec.n_embd
        key = (spec.name, k, tuple((g.rows, g.weights) for g in spec.gemms))
        if key not in self._weights_cache:
            self._weights_cache.clear()  # one group's weights resident at a time
            runs_host = [(fmt, get_format(fmt).random_blocks(rng, rows, k)) for fmt, rows in weight_runs(spec.gemms)]
            norm_w = (1.0 + 0.25 * rng.standard_normal(k)).astype(np.float32)
            self._weights_cache[key] = (runs_host, [(fmt, cupy.asarray(w)) for fmt, w in runs_host], norm_w)
        runs_host, runs, norm_w_host = self._weights_cache[key]
        x_host = rng.standard_normal((t, k), dtype=np.float32)
        total = sum(g.rows for g in spec.gemms)
        gemms = [(g.name, g.weights, g.rows) for g in spec.gemms]

        def buffers():
            return GroupBuffers(
                cupy.asarray(x_host),
                cupy.asarray(norm_w_host),
                cfg.eps,
                runs,
                gemms,
                cupy.empty(t * total, dtype=cupy.float32),
            )

        reference = buffers()
        for _, step in group_steps("engine", reference):
            step()
        cupy.cuda.Device().synchronize()
        return T4Inputs(spec, x_host, norm_w_host, runs_host, buffers(), reference.y)

    def prepare(self, cfg: T4Config, case: Case, inp: T4Inputs, variant: str, tuner) -> Prepared:
        from zincbench.ops.norm_cast import group_steps, group_traffic, launch_count

        formats = [g.weights for g in inp.spec.gemms]
        if variant == "t1_fused":
            return self._prepare_fused(cfg, case, inp, tuner)
        path = PATH_OF_VARIANT[variant]
        steps = group_steps(path, inp.buffers)
        assert len(steps) == launch_count(path, formats)

        def run() -> None:
            for _, step in steps:
                step()

        return Prepared(
            run,
            inp.buffers.y,
            group_traffic(path, inp.buffers),
            detail={"launches": len(steps), "steps": [name for name, _ in steps]},
        )

    def _prepare_fused(self, cfg: T4Config, case: Case, inp: T4Inputs, tuner) -> Prepared:
        from zincbench.ops.fused import POLICIES, MmaTile
        from zincbench.ops.norm_cast import group_steps, group_traffic

        missing = {g.weights for g in inp.spec.gemms} - set(POLICIES)
        if missing:
            raise NotApplicable(f"T1's fused kernel has no policy for {', '.join(sorted(missing))}")

        def make_run(tile_text: str):
            return in_order(group_steps("t1_fused", inp.buffers, MmaTile.parse(tile_text)))

        tuning = tuner(f"t4/t1_fused/{case.key}", cfg.fused_tiles, make_run)
        run = make_run(tuning.choice)
        return Prepared(
            run,
            inp.buffers.y,
            group_traffic("t1_fused", inp.buffers),
            detail={
                "launches": len(run.parts),
                "steps": [name for name, _ in run.parts],
                "tile": MmaTile.parse(tuning.choice).label,
                "tile_spec": tuning.choice,
                "autotune": autotune.record(tuning),
            },
        )

    def declared_binding(self, cfg: T4Config, case: Case, inp: T4Inputs):
        """x, norm_w, w0.. (each GEMM's quantized rows), y0.. (each GEMM's [T][M] output) and y (all of them,
        what is checked); parameters T, K, eps, n_gemms, M0.., qtype0.. (empty past n_gemms), max_M."""
        from zincbench.bench.declared import Binding
        from zincbench.ops.norm_cast import group_traffic

        b = inp.buffers
        tensors = {"x": b.x, "norm_w": b.norm_w, "y": b.y}
        params = {"T": b.t, "K": b.k, "eps": cfg.eps, "n_gemms": len(b.gemms), "max_M": max(b.rows)}
        for i in range(3):
            params[f"M{i}"], params[f"qtype{i}"] = 0, ""
        for i, (w, y, (_, fmt, m)) in enumerate(zip(b.weights(), b.outputs(), b.gemms)):
            tensors[f"w{i}"], tensors[f"y{i}"] = w, y
            params[f"M{i}"], params[f"qtype{i}"] = m, fmt.replace("_", "")
        return Binding(tensors, params, "y", group_traffic("engine", b))

    # ---- correctness ---------------------------------------------------------------------------------------
    def check(self, cfg: T4Config, case: Case, inp: T4Inputs, output) -> tuple[float, bool]:
        import cupy

        written = not bool(cupy.isnan(output).any())
        t = case.params["tokens"]
        rng = np.random.default_rng(zlib.crc32(case.key.encode()))
        toks = np.sort(rng.choice(t, size=min(cfg.check_tokens, t), replace=False))
        norm = rms_norm_f64(inp.x_host[toks], inp.norm_w_host, cfg.eps)
        got, ref = [], []
        start = 0
        for g, w in zip(inp.spec.gemms, gemm_weights(inp.runs_host, inp.spec.gemms)):
            rows = np.sort(rng.choice(g.rows, size=min(cfg.check_rows, g.rows), replace=False))
            y = output[start : start + t * g.rows].reshape(t, g.rows)
            got.append(y[cupy.asarray(toks)][:, cupy.asarray(rows)].get().ravel())
            ref.append(kernels_ref.dense_gemm(get_format(g.weights).dequantize(w[rows]), norm).ravel())
            start += t * g.rows
        return kernels_ref.rel_frobenius(np.concatenate(got), np.concatenate(ref)), written

    def judge_output(self, cfg: T4Config, case: Case, inp: T4Inputs, info: VariantInfo, output) -> tuple[dict, str]:
        """The runner's hook after the check: the output's bits against engine_path's (``detail.bits``), and
        a failure for a variant that must be bit-identical and is not."""
        import cupy

        return judge_bits(cfg, case, info.name, inp.reference, output, cupy)


FAMILY = register_family(T4Family())
