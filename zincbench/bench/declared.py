"""Kernel variants declared in YAML: any CUDA source, launched through the engine's ABI.

A *kernel pack* (a YAML file, or the ``kernel_sources:`` / ``declared_variants:`` keys of an experiment)
names CUDA sources and declares variants as sequences of steps:

- a **launch**: ``kernel`` (an entry of a source, ``{name}`` fields filled from the case, e.g.
  ``dmmv_{qtype}_experts_batched``), ``grid`` / ``block`` / ``shared`` as expressions, ``buffers`` (the
  family's tensors or the variant's workspaces, in the kernel's order) and ``push``, the one struct the
  engine passes by value (or the kernel's scalar parameters): ``field: <expression>`` by field name; the
  layout (order, C types, alignment) is read from the struct and the kernel's signature in the source it
  is compiled from (zincbench.gpu.kernel_abi), so it is written nowhere else;
- a **host** step: a named Python operation (``gemm_f16``: cuBLAS) for what is not a kernel;
- **use**: another declared variant's steps.
Any step may carry ``if: <expression>`` (e.g. the engine's ``T >= moe_tc_min_t`` switch). Workspaces are
sized by expressions, poisoned before the correctness check and followed by a guard zone whose bytes are
checked after it: a kernel that writes past a workspace makes the spec an input error, not a wrong result.

The family supplies a *binding* per case (tensors, parameters, the output the checker reads, the
op's minimum traffic); from there a declared variant lives like any other: checked against the float64
reference, timed, recorded, shown and usable as a gate's baseline or candidate.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from zincbench.bench.base import NotApplicable, Prepared, VariantInfo, in_order
from zincbench.bench.expressions import ExpressionError, check_syntax, evaluate, evaluate_int
from zincbench.errors import ConfigError, InputError, KernelCompileError
from zincbench.measure.traffic import Traffic

TYPED_PUSH = re.compile(r"^\s*(u32|i32|u64|i64|f32|f32_bits)\s+(.+)$", re.S)
DTYPES = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "i32": np.int32, "f16": np.float16, "f32": np.float32}
GUARD_BYTES = 4096
GUARD_BYTE = 0xA5
POISON_BYTE = 0xFF  # NaN in f16/f32, 0xFFFFFFFF (the engine's INV) in u32
MAX_BLOCK_THREADS = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)
ENV_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
ROLES = ("baseline", "candidate", "ceiling", "reference")


@dataclass(frozen=True)
class Binding:
    """What a family offers declared variants for one case."""

    tensors: dict  # name -> CuPy array
    params: dict  # name -> int / float / str (T, M, K, E, top_k, qtype ...)
    output: str  # the tensor the checker reads
    traffic: Traffic  # the op's minimum bytes and FLOPs


# ---- the spec ---------------------------------------------------------------------------------------
@dataclass
class KernelSource:
    name: str
    where: str  # "file: key" for messages
    path: str  # as written, ${VAR} unexpanded
    stand_in: list[str]  # bundled kernels/ files used when the path's variables are unset
    options: list[str] | None  # None: the engine's options

    def resolve(self, variables: dict | None = None) -> tuple[str, list[Path]]:
        """("engine" | "stand-in" | "file", files). ``variables`` override the environment for ${VAR}
        (e.g. --engine-src for ZINC_SRC). An unset ${VAR} without a stand-in is an input error."""
        env = {**os.environ, **{k: v for k, v in (variables or {}).items() if v}}
        missing = [v for v in ENV_VAR.findall(self.path) if not env.get(v)]
        if missing and self.stand_in:
            from zincbench.gpu.runtime import KERNELS_DIR

            return "stand-in", [KERNELS_DIR / name for name in self.stand_in]
        if missing:
            raise InputError(f"{self.where}.path: ${{{missing[0]}}} is not set")
        path = Path(ENV_VAR.sub(lambda m: env[m.group(1)], self.path)).expanduser()
        if not path.is_file():
            raise InputError(f"{self.where}.path: no such file {path}")
        return ("engine" if self.stand_in else "file"), [path]


@dataclass
class Step:
    where: str
    condition: str | None
    stage: str | None = field(default=None, kw_only=True)  # the per-stage table's row; `use` passes it down


@dataclass
class LaunchStep(Step):
    source: str
    kernel: str
    grid: list
    block: list
    shared: Any
    buffers: list[str]
    push: dict  # field -> expression; the kernel's source gives the layout


@dataclass
class HostStep(Step):
    op: str
    args: dict


@dataclass
class UseStep(Step):
    variant: str


@dataclass
class Workspace:
    name: str
    dtype: str
    shape: list


@dataclass
class DeclaredVariant:
    info: VariantInfo
    family: str
    where: str
    steps: list[Step]
    workspace: list[Workspace] = field(default_factory=list)
    let: dict = field(default_factory=dict)
    output: str | None = None
    bytes_model: Any = None
    applies: Any = None  # expression: cases where it is false are reported not applicable
    optional: bool = False  # entries missing from a source version make it absent, not an error


@dataclass
class KernelPack:
    path: Path
    sources: dict[str, KernelSource]
    let: dict
    variants: dict[str, dict[str, DeclaredVariant]]  # family -> name -> variant
    engine_tree: str | None = None  # the ${VAR} of its source paths that --engine-src DIR sets

    def variables(self, engine_tree_dir: str | None) -> dict:
        """${VAR} values ahead of the environment: the engine's source tree, when given and this pack names one."""
        return {self.engine_tree: engine_tree_dir} if self.engine_tree and engine_tree_dir else {}

    def variant(self, family: str, name: str) -> DeclaredVariant:
        return self.variants[family][name]


# ---- parsing ----------------------------------------------------------------------------------------
def _mapping(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _list(value, where: str) -> list:
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _keys(spec: dict, where: str, allowed: set[str], required: set[str] = frozenset()) -> None:
    unknown = set(spec) - allowed
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))} (allowed: {', '.join(sorted(allowed))})"
        )
    missing = required - set(spec)
    if missing:
        raise ConfigError(f"{where}: missing key(s) {', '.join(sorted(missing))}")


def _text(value, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: expected a non-empty string")
    return value


def _expr(value, where: str):
    """A number, or an expression whose syntax is checked now (names are checked per case)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"{where}: expected a number or an expression")
    try:
        check_syntax(value)
    except ExpressionError as exc:
        hint = " (quote an expression that holds a comma inside [ ])" if "parse" in str(exc) else ""
        raise ConfigError(f"{where}: {value!r}: {exc}{hint}") from None
    return value


def _extent(value, where: str) -> list:
    items = value if isinstance(value, list) else [value]
    if not 1 <= len(items) <= 3:
        raise ConfigError(f"{where}: expected 1 to 3 extents")
    return [_expr(v, f"{where}[{i}]") for i, v in enumerate(items)]


def _push(value, where: str) -> dict:
    fields = {}
    for name, expr in _mapping(value, where).items():
        typed = TYPED_PUSH.match(expr) if isinstance(expr, str) else None
        if typed:
            raise ConfigError(
                f"{where}.{name}: write only the expression ({typed.group(2).strip()!r}): the "
                f"field's type and place come from the kernel's struct in its source"
            )
        fields[str(name)] = _expr(expr, f"{where}.{name}")
    return fields


def _step(spec, where: str, default_source: str | None) -> Step:
    spec = _mapping(spec, where)
    condition = spec.get("if")
    if condition is not None:
        _expr(condition, f"{where}.if")
    stage = _text(spec["stage"], f"{where}.stage") if "stage" in spec else None
    if "use" in spec:
        _keys(spec, where, {"use", "if", "stage"})
        return UseStep(where, condition, _text(spec["use"], f"{where}.use"), stage=stage)
    if "host" in spec:
        _keys(spec, where, {"host", "args", "if", "stage"}, {"host"})
        from zincbench.bench.host_steps import HOST_OPS

        op = _text(spec["host"], f"{where}.host")
        if op not in HOST_OPS:
            raise ConfigError(f"{where}.host: unknown host operation {op!r} (known: {', '.join(sorted(HOST_OPS))})")
        return HostStep(where, condition, op, dict(_mapping(spec.get("args", {}), f"{where}.args")), stage=stage)
    _keys(
        spec,
        where,
        {"kernel", "source", "grid", "block", "shared", "buffers", "push", "if", "stage"},
        {"kernel", "grid", "block", "buffers"},
    )
    source = spec.get("source", default_source)
    if source is None:
        raise ConfigError(f"{where}.source: several sources are declared; say which one")
    buffers = [_text(b, f"{where}.buffers[{i}]") for i, b in enumerate(_list(spec["buffers"], f"{where}.buffers"))]
    return LaunchStep(
        where,
        condition,
        str(source),
        _text(spec["kernel"], f"{where}.kernel"),
        _extent(spec["grid"], f"{where}.grid"),
        _extent(spec["block"], f"{where}.block"),
        _expr(spec.get("shared", 0), f"{where}.shared"),
        buffers,
        _push(spec.get("push", {}), f"{where}.push"),
        stage=stage,
    )


def _variant(spec, where: str, family: str | None, default_source: str | None) -> DeclaredVariant:
    spec = _mapping(spec, where)
    _keys(
        spec,
        where,
        {
            "name",
            "family",
            "role",
            "tolerance",
            "description",
            "steps",
            "workspace",
            "let",
            "output",
            "bytes",
            "applies",
            "optional",
        },
        {"name", "steps"},
    )
    name = _text(spec["name"], f"{where}.name")
    role = spec.get("role", "candidate")
    if role not in ROLES:
        raise ConfigError(f"{where}.role: must be one of {', '.join(ROLES)}, got {role!r}")
    tolerance = spec.get("tolerance", 2e-3)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 < tolerance < 1:
        raise ConfigError(f"{where}.tolerance: must be a number in (0, 1), got {tolerance!r}")
    fam = spec.get("family", family)
    if fam is None:
        raise ConfigError(f"{where}.family: which microbench family does this variant belong to?")
    steps = [
        _step(s, f"{where}.steps[{i}]", default_source) for i, s in enumerate(_list(spec["steps"], f"{where}.steps"))
    ]
    if not steps:
        raise ConfigError(f"{where}.steps: at least one step")
    workspace = []
    for ws_name, ws in _mapping(spec.get("workspace", {}), f"{where}.workspace").items():
        w = f"{where}.workspace.{ws_name}"
        ws = _mapping(ws, w)
        _keys(ws, w, {"dtype", "shape"}, {"dtype", "shape"})
        if ws["dtype"] not in DTYPES:
            raise ConfigError(f"{w}.dtype: unknown dtype {ws['dtype']!r} (known: {', '.join(DTYPES)})")
        workspace.append(Workspace(str(ws_name), ws["dtype"], _extent(ws["shape"], f"{w}.shape")))
    let = {str(k): _expr(v, f"{where}.let.{k}") for k, v in _mapping(spec.get("let", {}), f"{where}.let").items()}
    info = VariantInfo(name, role, float(tolerance), str(spec.get("description", "")))
    return DeclaredVariant(
        info,
        str(fam),
        where,
        steps,
        workspace,
        let,
        spec.get("output"),
        _expr(spec["bytes"], f"{where}.bytes") if "bytes" in spec else None,
        _expr(spec["applies"], f"{where}.applies") if "applies" in spec else None,
        bool(spec.get("optional", False)),
    )


def parse_pack(
    data: dict, path: Path, *, family: str | None = None, sources_key: str = "sources", variants_key: str = "variants"
) -> KernelPack:
    """A pack from already loaded YAML (a pack file, or an experiment's inline keys)."""
    where = str(path)
    sources = {}
    for name, spec in _mapping(data.get(sources_key, {}), f"{where}: {sources_key}").items():
        w = f"{where}: {sources_key}.{name}"
        spec = {"path": spec} if isinstance(spec, str) else _mapping(spec, w)
        _keys(spec, w, {"path", "stand_in", "options"}, {"path"})
        stand_in = spec.get("stand_in", [])
        stand_in = [stand_in] if isinstance(stand_in, str) else _list(stand_in, f"{w}.stand_in")
        options = spec.get("options", "engine")
        if options != "engine":
            options = [_text(o, f"{w}.options[{i}]") for i, o in enumerate(_list(options, f"{w}.options"))]
        path_text = _text(spec["path"], f"{w}.path")
        if not ENV_VAR.search(path_text) and not Path(path_text).is_absolute():
            path_text = str(path.parent / path_text)  # relative to the YAML that names it
        sources[str(name)] = KernelSource(
            str(name), w, path_text, [str(s) for s in stand_in], None if options == "engine" else options
        )
    let = {str(k): _expr(v, f"{where}: let.{k}") for k, v in _mapping(data.get("let", {}), f"{where}: let").items()}
    engine_tree = data.get("engine_tree")
    if engine_tree is not None:
        engine_tree = _text(engine_tree, f"{where}: engine_tree")
        if not any(f"${{{engine_tree}}}" in source.path for source in sources.values()):
            raise ConfigError(f"{where}: engine_tree: no source path names ${{{engine_tree}}}")
    default_source = next(iter(sources)) if len(sources) == 1 else None
    variants: dict[str, dict[str, DeclaredVariant]] = {}
    for i, spec in enumerate(_list(data.get(variants_key, []), f"{where}: {variants_key}")):
        variant = _variant(spec, f"{where}: {variants_key}[{i}]", family, default_source)
        same_family = variants.setdefault(variant.family, {})
        if variant.info.name in same_family:
            raise ConfigError(f"{variant.where}.name: {variant.family} variant {variant.info.name!r} is declared twice")
        same_family[variant.info.name] = variant
    for same_family in variants.values():
        for variant in same_family.values():
            for step in variant.steps:
                if isinstance(step, LaunchStep) and step.source not in sources:
                    raise ConfigError(
                        f"{step.where}.source: unknown source {step.source!r} "
                        f"(declared: {', '.join(sources) or 'none'})"
                    )
                if isinstance(step, UseStep) and step.variant not in same_family:
                    raise ConfigError(f"{step.where}.use: no {variant.family} variant {step.variant!r} in this pack")
    return KernelPack(path, sources, let, variants, engine_tree)


def load_pack(path: Path) -> KernelPack:
    from zincbench.config import load_yaml

    data = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with sources and variants")
    _keys(data, str(path), {"description", "engine_tree", "sources", "let", "variants"}, {"variants"})
    return parse_pack(data, path)


# ---- building a variant for a case --------------------------------------------------------------------
def _names(pack: KernelPack, binding: Binding) -> dict:
    """The case's parameters and the pack's ``let`` values: what every expression of the pack can name."""
    names = dict(binding.params)
    for key, expr in pack.let.items():
        names[key] = _evaluated(expr, names, f"{pack.path}: let.{key}")
    return names


def _with_let(variant: DeclaredVariant, names: dict) -> dict:
    names = dict(names)
    for key, expr in variant.let.items():
        names[key] = _evaluated(expr, names, f"{variant.where}.let.{key}")
    return names


def _evaluated(expr, names, where: str, *, integer: bool = False, minimum: int = 0):
    try:
        return evaluate_int(expr, names, minimum=minimum) if integer else evaluate(expr, names)
    except ExpressionError as exc:
        raise InputError(f"{where}: {expr!r}: {exc}") from None


@dataclass
class Plan:
    """A variant expanded for one case: the steps whose ``if`` holds (``use`` followed), each with the
    names it evaluates under, and the workspaces of every variant that contributed a step."""

    steps: list = field(default_factory=list)  # (Step, names, stage)
    workspace: list = field(default_factory=list)  # (Workspace, names, where)


def expand(variant: DeclaredVariant, pack: KernelPack, names: dict, seen=()) -> Plan:
    names = _with_let(variant, names)
    plan = Plan(workspace=[(ws, names, f"{variant.where}.workspace.{ws.name}") for ws in variant.workspace])
    for step in variant.steps:
        if step.condition is not None and not _evaluated(step.condition, names, f"{step.where}.if"):
            continue
        if isinstance(step, UseStep):
            if step.variant in seen or step.variant == variant.info.name:
                raise InputError(f"{step.where}.use: {step.variant!r} uses itself")
            used = expand(pack.variant(variant.family, step.variant), pack, names, (*seen, variant.info.name))
            plan.steps += [(st, nm, stage or step.stage) for st, nm, stage in used.steps]
            plan.workspace += used.workspace
        else:
            plan.steps.append((step, names, step.stage))
    return plan


def kernel_function(source: KernelSource, entry: str, where: str, optional: bool, variables: dict):
    """The compiled entry of a source (modules compile once per process), its ABI read from the same
    text, and where it came from. The file that declares the entry is found by reading the sources, not by
    asking the driver for symbols that may not exist."""
    import cupy

    from zincbench.gpu.kernel_abi import kernel_abi, source_abi
    from zincbench.gpu.nvrtc import KernelNotFound, engine_options, load_cached, source_headers

    kind, files = source.resolve(variables)
    arch = cupy.cuda.Device().compute_capability
    options = tuple(source.options) if source.options is not None else engine_options(arch)

    def module(path: Path, text: str):
        try:
            # Headers beside the file (a stand-in's kernels/zb_*.cuh) go to NVRTC by content: no -I of ours.
            headers = source_headers(text, path.parent)
            return load_cached(text, str(path), options, (), cupy.cuda.Device().id, headers)
        except KernelCompileError as exc:  # the spec's source or options: an input error, with NVRTC's log
            raise InputError(f"{source.where}: {exc}") from None

    texts = []
    for path in files:
        try:
            texts.append((path, path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{source.where}: cannot read {path} ({exc})") from None
    for path, text in texts:
        if entry not in source_abi(text).kernels:
            continue
        abi = kernel_abi(text, entry, f"{where} ({path.name})")
        loaded = module(path, text)
        try:
            function = loaded.function(entry)
        except KernelNotFound:  # in the text but compiled out (an #if): look on
            continue
        return (
            function,
            abi,
            {"source": kind, "file": str(path), "nvrtc_options": list(options), "nvrtc": loaded.compiled.nvrtc},
        )
    for path, text in texts:  # not found: a source that does not compile says so first
        module(path, text)
    shown = ", ".join(p.name for p in files)
    if optional:
        raise NotApplicable(f"absent: no {entry} in {shown} ({kind})")
    raise InputError(f"{where}.kernel: no kernel named {entry!r} in {shown}")


def prepare(variant: DeclaredVariant, pack: KernelPack, binding: Binding, variables: dict | None = None) -> Prepared:
    """Bind a declared variant to one case: workspaces allocated, every launch's parameters packed."""
    names = _with_let(variant, _names(pack, binding))
    if variant.applies is not None and not _evaluated(variant.applies, names, f"{variant.where}.applies"):
        raise NotApplicable(f"not for this case ({variant.applies})")
    plan = expand(variant, pack, _names(pack, binding))
    buffers = dict(binding.tensors)
    workspaces = _allocate_workspaces(plan, buffers)
    runs: list[Callable[[], None]] = []
    launches, origins = [], []
    run_stages: list[str | None] = []  # the stage of each entry of runs
    for step, step_names, stage in plan.steps:
        run_stages.append(stage)
        if isinstance(step, HostStep):
            runs.append(_host_operation(step, step_names, buffers))
            launches.append({"host": step.op})
            continue
        launch, record, origin = _kernel_launch(step, step_names, pack, variant, binding, buffers, variables or {})
        runs.append(launch)
        launches.append(record)
        origins.append(origin)
    if not runs:
        raise NotApplicable("no step applies to this case")

    def run() -> None:
        for step in runs:
            step()

    def poison() -> None:
        for ws in workspaces:
            ws.poison()

    def guards_intact() -> str | None:
        for ws in workspaces:
            ws.check_guard()
        return None

    model = binding.traffic.bytes_min
    if variant.bytes_model is not None:
        model = _evaluated(variant.bytes_model, names, f"{variant.where}.bytes", integer=True)
    traffic = Traffic(binding.traffic.bytes_min, model, binding.traffic.flops, variant.info.description)
    kinds = sorted({o["source"] for o in origins})
    detail = {
        "declared_in": str(pack.path),
        "source": "+".join(kinds) or "host",
        "files": sorted({o["file"] for o in origins}),
        "launches": launches,
        **({"nvrtc_options": origins[-1]["nvrtc_options"], "nvrtc": origins[-1]["nvrtc"]} if origins else {}),
    }
    return Prepared(
        run,
        _output(variant, binding, buffers),
        traffic,
        detail=detail,
        after_check=guards_intact,
        before_check=poison,
        stages=_timed_stages(run_stages, runs),
        workspace={ws.name: ws.array for ws in workspaces},
    )


@dataclass
class GuardedWorkspace:
    """A workspace with GUARD_BYTES after its end: poisoned before the checked run, and its guard checked
    after it (a launch that writes past the end makes the spec an input error, not a wrong result)."""

    name: str
    raw: Any  # cupy uint8 [nbytes + GUARD_BYTES]
    nbytes: int
    array: Any  # the workspace: a typed, shaped view of raw[:nbytes]
    where: str

    def poison(self) -> None:
        self.raw[: self.nbytes].fill(POISON_BYTE)
        self.raw[self.nbytes :].fill(GUARD_BYTE)

    def check_guard(self) -> None:
        if bool((self.raw[self.nbytes :] != GUARD_BYTE).any()):
            raise InputError(
                f"{self.where}: a launch wrote past its end ({self.nbytes} bytes): the buffer is too small for the grid"
            )


def _allocate_workspaces(plan: Plan, buffers: dict) -> list[GuardedWorkspace]:
    """Every workspace of the plan at this case's shape, added to ``buffers`` by name."""
    import cupy

    out = []
    for ws, ws_names, where in plan.workspace:
        if ws.name in buffers:
            raise InputError(f"{where}: the name {ws.name!r} is already a buffer of this variant")
        shape = tuple(_evaluated(e, ws_names, f"{where}.shape", integer=True, minimum=1) for e in ws.shape)
        dtype = np.dtype(DTYPES[ws.dtype])
        nbytes = int(np.prod(shape)) * dtype.itemsize
        raw = cupy.empty(nbytes + GUARD_BYTES, dtype=cupy.uint8)
        buffers[ws.name] = raw[:nbytes].view(dtype).reshape(shape)
        out.append(GuardedWorkspace(ws.name, raw, nbytes, buffers[ws.name], where))
    return out


def _host_operation(step: HostStep, names: dict, buffers: dict) -> Callable[[], None]:
    """A ``host:`` step bound to its buffers (by name) and numbers (by expression)."""
    from zincbench.bench.host_steps import HOST_OPS

    args = {
        k: buffers[v] if isinstance(v, str) and v in buffers else _evaluated(v, names, f"{step.where}.args.{k}")
        for k, v in step.args.items()
    }
    try:
        return HOST_OPS[step.op](**args)
    except TypeError as exc:
        raise InputError(f"{step.where}.args: {exc}") from None


def _kernel_launch(
    step: LaunchStep,
    names: dict,
    pack: KernelPack,
    variant: DeclaredVariant,
    binding: Binding,
    buffers: dict,
    variables: dict,
):
    """(the packed launch, what it launches for the results document, where its kernel came from)."""
    from zincbench.gpu.nvrtc import PackedLaunch

    try:
        entry = step.kernel.format_map({k: v for k, v in names.items()})
    except (KeyError, ValueError, IndexError) as exc:
        raise InputError(f"{step.where}.kernel: {step.kernel!r}: unknown field {exc}") from None
    function, abi, origin = kernel_function(pack.sources[step.source], entry, step.where, variant.optional, variables)
    grid = [_evaluated(e, names, f"{step.where}.grid[{i}]", integer=True, minimum=1) for i, e in enumerate(step.grid)]
    block = [
        _evaluated(e, names, f"{step.where}.block[{i}]", integer=True, minimum=1) for i, e in enumerate(step.block)
    ]
    grid, block = (grid + [1, 1])[:3], (block + [1, 1])[:3]
    if any(g > limit for g, limit in zip(grid, MAX_GRID)):
        raise InputError(f"{step.where}.grid: {grid} exceeds the CUDA grid limits {list(MAX_GRID)}")
    if int(np.prod(block)) > MAX_BLOCK_THREADS:
        raise InputError(f"{step.where}.block: {block} has more than {MAX_BLOCK_THREADS} threads")
    shared = _evaluated(step.shared, names, f"{step.where}.shared", integer=True)
    for name in step.buffers:
        if name not in buffers:
            raise InputError(
                f"{step.where}.buffers: unknown buffer {name!r} "
                f"(family tensors: {', '.join(binding.tensors)}; workspace: "
                f"{', '.join(w.name for w in variant.workspace) or 'none'})"
            )
    arrays = tuple(buffers[name] for name in step.buffers)
    values = {f: _evaluated(e, names, f"{step.where}.push.{f}") for f, e in step.push.items()}
    params = abi.parameters([a.data.ptr for a in arrays], values, f"{step.where}.push")
    record = {"kernel": entry, "grid": grid, "block": block, "shared": shared, "push": values}
    return PackedLaunch(function, tuple(grid), tuple(block), shared, params, arrays), record, origin


def _output(variant: DeclaredVariant, binding: Binding, buffers: dict):
    """The buffer the family's check reads: the variant's ``output`` (shaped as the family's) or the family's."""
    output_name = variant.output or binding.output
    if output_name not in buffers:
        raise InputError(f"{variant.where}.output: unknown buffer {output_name!r}")
    output = buffers[output_name]
    family_output = binding.tensors[binding.output]
    if output_name == binding.output:
        return output
    if output.size != family_output.size or output.dtype != family_output.dtype:
        raise InputError(
            f"{variant.where}.output: {output_name} is {output.dtype}[{output.size}], the checker reads "
            f"{family_output.dtype}[{family_output.size}]"
        )
    return output.reshape(family_output.shape)


def _timed_stages(run_stages: list[str | None], runs: list) -> list | None:
    """Consecutive runs of one ``stage:`` make one timed stage; None when no step names a stage."""
    if not any(run_stages):
        return None
    stages: list[tuple[str, list]] = []
    for stage, fn in zip(run_stages, runs):
        if stages and stages[-1][0] == (stage or "other"):
            stages[-1][1].append(fn)
        else:
            stages.append((stage or "other", [fn]))
    return [(name, in_order([(name, fn) for fn in fns])) for name, fns in stages]


# ---- which declared variants a run gets ---------------------------------------------------------------
@dataclass
class DeclaredSet:
    """The declared variants of one family in one run, and the packs they come from."""

    variants: dict[str, tuple[DeclaredVariant, KernelPack]] = field(default_factory=dict)
    engine_tree_dir: str | None = None  # --engine-src: each pack's engine_tree variable takes it

    def add(self, pack: KernelPack, family: str) -> None:
        for name, variant in pack.variants.get(family, {}).items():
            if name in self.variants:
                raise ConfigError(
                    f"{variant.where}.name: variant {name!r} is also declared in {self.variants[name][1].path}"
                )
            self.variants[name] = (variant, pack)

    def infos(self) -> list[VariantInfo]:
        return [v.info for v, _ in self.variants.values()]

    def source_kinds(self) -> dict[str, str]:
        """variant -> engine / stand-in / file, resolving every source (an unset ${VAR} or a missing file is
        an input error now, before any GPU work) without compiling anything."""
        out = {}
        for name, (variant, pack) in self.variants.items():
            variables = pack.variables(self.engine_tree_dir)
            kinds = {pack.sources[step.source].resolve(variables)[0] for step in _all_launches(variant, pack)}
            out[name] = "+".join(sorted(kinds)) or "host"
        return out

    def prepare(self, name: str, binding: Binding) -> Prepared:
        variant, pack = self.variants[name]
        return prepare(variant, pack, binding, pack.variables(self.engine_tree_dir))


def _all_launches(variant: DeclaredVariant, pack: KernelPack, seen=()):
    for step in variant.steps:
        if isinstance(step, LaunchStep):
            yield step
        elif isinstance(step, UseStep) and step.variant not in seen:
            yield from _all_launches(pack.variant(variant.family, step.variant), pack, (*seen, variant.info.name))


def pack_path(name: str, relative_to: Path | None) -> Path:
    """A bundled experiments/ pack name (``engine_zinc``), or a path: relative to the experiment file that
    names it (``relative_to``), or to the working folder when given on the command line (None)."""
    from zincbench.config import experiment_path

    if os.sep not in name and not Path(name).suffix:
        return experiment_path(name)
    path = Path(name)
    return path if path.is_absolute() or relative_to is None else relative_to.parent / path


def declared_for(family: str, experiment: Path, cfg, extra_packs=(), engine_tree_dir: str | None = None) -> DeclaredSet:
    """Declared variants of ``family``: the experiment's inline ones (``kernel_sources`` and
    ``declared_variants``), its ``kernel_packs`` and ``extra_packs`` (files named on the command line);
    ``engine_tree_dir`` (--engine-src) is the value of each pack's ``engine_tree`` variable."""
    found = DeclaredSet(engine_tree_dir=engine_tree_dir)
    if cfg.declared_variants:
        inline = {"engine_tree": cfg.engine_tree, "sources": cfg.kernel_sources, "variants": cfg.declared_variants}
        found.add(parse_pack(inline, experiment, family=family), family)
    for name in cfg.kernel_packs:
        found.add(load_pack(pack_path(str(name), experiment)), family)
    for name in extra_packs:
        found.add(load_pack(pack_path(str(name), None)), family)
    return found
