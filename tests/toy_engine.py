"""A toy engine adapter in one file: it registers itself exactly as the bundled adapters do
(``@register``), and being outside the package it is named in ``$ZINCBENCH_PLUGINS``
(tests/test_extension_points.py). It runs no process: ``bin`` is any file; its rates wobble by
1% from run to run (a fixed sequence) and scale by $TOY_SPEED of the arm's environment."""

from __future__ import annotations

import itertools

from zincbench.engines import GENERATE, THROUGHPUT, Engine, register
from zincbench.engines.base import GenerationResult, ThroughputResult
from zincbench.errors import InputError

WOBBLE = itertools.cycle([1.0, 1.01, 0.99, 1.005, 0.995])  # shared by both arms, so their ratios vary


@register("toy-engine")
class ToyEngine(Engine):
    capabilities = frozenset({GENERATE, THROUGHPUT})

    def __init__(self, bin=None, config=None):
        if config is not None:
            raise InputError("the toy engine takes no engine config")
        self.bin = bin

    def describe(self) -> dict:
        return {"kind": self.kind, "bin": self.bin}

    def generate(self, model, prompt_ids, n_gen, *, env=None, timeout_s=600.0) -> GenerationResult:
        return GenerationResult(list(prompt_ids), list(range(n_gen)))

    def throughput(self, model, prompt_text, n_gen, *, env=None, timeout_s=600.0) -> ThroughputResult:
        speed = float((env or {}).get("TOY_SPEED", "1")) * next(WOBBLE)
        return ThroughputResult(
            prefill_tokens=len(prompt_text.split()),
            prefill_tps=1000.0 * speed,
            decode_tokens=n_gen,
            decode_tps=100.0 * speed,
        )
