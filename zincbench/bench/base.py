"""The contract between a microbench family and the runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol

from zincbench.measure.timer import TimerConfig
from zincbench.measure.traffic import Traffic


def in_order(named: list[tuple[str, Callable[[], None]]]) -> Callable[[], None]:
    """One callable that runs named steps (or stages) in order; ``.parts`` keeps them, names included."""

    def run() -> None:
        for _, fn in named:
            fn()

    run.parts = named
    return run


class NotApplicable(Exception):
    """A variant that cannot run this case (e.g. a Q4_K-only kernel on Q6_K weights): reported, not failed."""


@dataclass(frozen=True)
class Case:
    """One point of a sweep. ``key`` names it in tables and NVTX ranges (e.g. E256-M512-Ne16)."""

    key: str
    params: dict


@dataclass
class Prepared:
    """A variant ready to run on one case: ``run`` only enqueues GPU work on the current stream."""

    run: Callable[[], None]
    output: Any  # the device array the check reads
    traffic: Traffic
    detail: dict = field(default_factory=dict)  # e.g. the tile shape the autotuner chose
    after_check: Callable[[], str | None] | None = None  # e.g. "bucket overflow" -> failure text
    before_check: Callable[[], None] | None = None  # e.g. poison workspaces before the checked run
    # Named parts of ``run`` in launch order (e.g. a layer's router, gate/up, down): the runner times each
    # on its own after the whole, for a per-stage table. Each must be runnable again on its own.
    stages: list[tuple[str, Callable[[], None]]] | None = None
    # Named intermediate buffers (a declared variant's workspaces): where a non-finite output is traced.
    workspace: dict[str, Any] | None = None


@dataclass(frozen=True)
class VariantInfo:
    name: str
    role: str  # baseline | candidate | ceiling | reference
    tolerance: float  # relative Frobenius error bound vs the float64 reference
    description: str


@dataclass
class CheckResult:
    rel_error: float
    fully_written: bool
    tolerance: float
    failure: str | None = None

    @property
    def passed(self) -> bool:
        # a recorded rel_error of null was non-finite
        return (
            self.failure is None
            and self.fully_written
            and self.rel_error is not None
            and self.rel_error <= self.tolerance
        )


@dataclass
class GateRule:
    """The experiment YAML's `gate:` section: the candidate must be ``require`` versus the baseline
    (beyond ``threshold`` with a ``confidence`` interval) in every cell selected by ``when``, a
    filter each family defines (e.g. min_tokens_per_expert for T2)."""

    candidate: str
    baseline: str
    require: Literal["faster", "same", "slower"] = "faster"
    threshold: float = 0.03
    confidence: float = 0.99
    when: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # NaN fails both comparisons, so it is refused too.
        if not 0 <= self.threshold < 1:
            raise ValueError(f"threshold must be a fraction in [0, 1), got {self.threshold}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be strictly between 0 and 1, got {self.confidence}")
        if self.candidate == self.baseline:
            raise ValueError(f"candidate and baseline are both {self.candidate!r}")

    def check_when(self, allowed: set[str]) -> None:
        unknown = set(self.when) - allowed
        if unknown:
            raise ValueError(f"gate.when: unknown key(s) {sorted(unknown)} (allowed: {', '.join(sorted(allowed))})")


class Family(Protocol):
    name: str  # the registry key: `zincbench microbench NAME`, a gate check's `family:`
    default_experiment: str  # experiments/ name (or path) used without --experiment
    summary: str  # what it measures, for --help

    def load(self, path, gguf: str | None = None, layer: int | None = None) -> Any: ...  # the experiment config
    def cases(self, config) -> list[Case]: ...
    def variants(self, config) -> list[VariantInfo]: ...
    def timer_config(self, config) -> TimerConfig: ...
    def gate_rule(self, config) -> GateRule: ...
    def gate_applies(self, config, case: Case) -> bool: ...
    def build_inputs(self, config, case: Case, rng) -> Any: ...
    def prepare(self, config, case: Case, inputs, variant: str, tuner) -> Prepared: ...
    def check(self, config, case: Case, inputs, output) -> tuple[float, bool]: ...
    def reference_columns(self, config, case: Case, device_name: str) -> dict: ...
    def declared_binding(self, config, case: Case, inputs) -> Any: ...  # bench.declared.Binding

    # Optional: judge_output(config, case, inputs, info, output) -> (detail, failure or None), called by the
    # runner after the check (t4: the output's bits against the engine path's); a failure fails the check.


@dataclass(kw_only=True)
class ExperimentConfig:
    """The sections every experiment YAML has; each family's config adds its sweep and variants."""

    description: str
    timer: TimerConfig = field(default_factory=TimerConfig)
    llama_cpp_us: dict[str, dict[str, float]] = field(default_factory=dict)  # device -> case key -> µs
    llama_cpp_source: str = ""
    gguf: str | None = None  # a real model's shapes and weights instead of random blocks
    # Declared kernel variants (zincbench.bench.declared): packs by name or path, or inline.
    kernel_packs: list[str] = field(default_factory=list)
    kernel_sources: dict[str, Any] = field(default_factory=dict)
    declared_variants: list[Any] = field(default_factory=list)
    engine_tree: str | None = None  # the ${VAR} of kernel_sources that --engine-src DIR sets


class FamilyBase:
    """What every family's experiment config shares: a `timer:` and a `gate:` section, and recorded
    llama.cpp times per device and case (`llama_cpp_us`, shown beside ours, never judged)."""

    def timer_config(self, cfg) -> TimerConfig:
        return cfg.timer

    def gate_rule(self, cfg) -> GateRule:
        return cfg.gate

    def reference_applies(self, cfg, case: Case) -> bool:
        """Whether the recorded llama.cpp numbers were measured under this case's conditions."""
        return True

    def reference_columns(self, cfg, case: Case, device_name: str) -> dict:
        if not self.reference_applies(cfg, case):
            return {}
        for device, table in cfg.llama_cpp_us.items():
            if device in device_name and case.key in table:
                return {"llama_cpp_us": table[case.key], "llama_cpp_source": cfg.llama_cpp_source}
        return {}
