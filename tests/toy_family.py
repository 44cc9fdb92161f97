"""A toy microbench family in one file: y = alpha * x on float32 vectors, as x * alpha and alpha * x
(the same kernel: the gate requires "same").

It registers itself exactly as the bundled families do (``FAMILY = register_family(...)``); being
outside the package, it is named in ``$ZINCBENCH_PLUGINS`` (tests/test_extension_points.py).
Its experiment is tests/fixtures/toy_scale.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from zincbench.bench import register_family
from zincbench.bench.base import Case, ExperimentConfig, FamilyBase, GateRule, Prepared, VariantInfo
from zincbench.config import load_config
from zincbench.measure.traffic import Traffic

VARIANTS = {"scale": "baseline", "scale_swapped": "candidate"}


@dataclass(kw_only=True)
class ToyConfig(ExperimentConfig):
    tokens: list[int] = field(default_factory=lambda: [1024])
    alpha: float = 2.0
    gate: GateRule


class ToyFamily(FamilyBase):
    name = "toy"
    default_experiment = str(Path(__file__).parent / "fixtures" / "toy_scale.yaml")
    summary = "toy vector scale"

    def load(self, path, gguf=None, layer=None) -> ToyConfig:
        return load_config(ToyConfig, path)

    def cases(self, cfg) -> list[Case]:
        return [Case(f"T{t}", {"tokens": t}) for t in cfg.tokens]

    def variants(self, cfg) -> list[VariantInfo]:
        return [VariantInfo(name, role, 1e-6, f"y = alpha * x ({name})") for name, role in VARIANTS.items()]

    def gate_applies(self, cfg, case) -> bool:
        return True

    def build_inputs(self, cfg, case, rng):
        import cupy as cp

        x_host = rng.standard_normal(case.params["tokens"]).astype(np.float32)
        x = cp.asarray(x_host)
        return {"x_host": x_host, "x": x, "y": cp.empty_like(x)}

    def prepare(self, cfg, case, inputs, variant, tuner) -> Prepared:
        import cupy as cp

        x, y = inputs["x"], inputs["y"]
        alpha = np.float32(cfg.alpha)
        operands = (x, alpha) if variant == "scale" else (alpha, x)

        def run():
            cp.multiply(*operands, out=y)

        nbytes = 2 * x.nbytes
        return Prepared(run=run, output=y, traffic=Traffic(bytes_min=nbytes, bytes_model=nbytes, flops=x.size))

    def check(self, cfg, case, inputs, output) -> tuple[float, bool]:
        expected = cfg.alpha * inputs["x_host"].astype(np.float64)
        got = output.get().astype(np.float64)
        return float(np.linalg.norm(got - expected) / np.linalg.norm(expected)), bool(np.isfinite(got).all())

    def declared_binding(self, cfg, case, inputs):
        return None


FAMILY = register_family(ToyFamily())
