"""Declared kernel variants (zincbench.bench.declared) without a GPU: the spec, the engine pack's
sources, and bad specs as one-line input errors with exit code 2 (the ABI layout: test_kernel_abi.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zincbench.bench import declared
from zincbench.bench.declared import load_pack
from zincbench.bench.expressions import ExpressionError, evaluate, evaluate_int
from zincbench.cli import main
from zincbench.config import experiment_path
from zincbench.errors import ConfigError
from zincbench.gpu import nvrtc
from zincbench.gpu.runtime import find_nvcc

FIXTURES = Path(__file__).parent / "fixtures" / "engine_abi"


# ---- expressions ----------------------------------------------------------------------------------
def test_expressions_over_case_parameters():
    names = {"T": 512, "top_k": 8, "E": 256, "M": 704, "weights": "q4_k", "tiles": lambda n: 3 * n}
    assert evaluate("T*top_k + 64*E", names) == 20480
    assert evaluate_int("ceil_div(M, 64)", names) == 11
    assert evaluate("T >= 64 and weights in ('q4_k', 'q6_k')", names) is True
    assert evaluate("K if 0 else M", {**names, "K": 1}) == 704
    assert evaluate("tiles(64)", names) == 192


@pytest.mark.parametrize(
    "text, why",
    [
        ("T +", "parse"),
        ("__import__('os')", "unknown function"),
        ("T.real", "Attribute"),
        ("missing", "unknown name"),
        ("1 // 0", "division by zero"),
        ("2 ** 1000", "exponent"),
        ("[x for x in T]", "ListComp"),
        ("1e308 * 10", "finite"),
        ("1 << 70", "shift"),
    ],
)
def test_expressions_refuse(text, why):
    with pytest.raises(ExpressionError, match=why):
        evaluate(text, {"T": 1})


def test_integer_expressions_must_be_whole():
    with pytest.raises(ExpressionError, match="whole number"):
        evaluate_int("T / 3", {"T": 4})
    with pytest.raises(ExpressionError, match=">= 1"):
        evaluate_int("T - 4", {"T": 4}, minimum=1)


# ---- packs ----------------------------------------------------------------------------------------
def test_engine_pack_stands_in_without_a_source_tree(monkeypatch):
    monkeypatch.delenv("ZINC_SRC", raising=False)
    for family, experiment in (("t2", "t2_moe_expert"), ("t1", "t1_dense_gemm")):
        from zincbench.bench import load_family

        path = experiment_path(experiment)
        found = declared.declared_for(family, path, load_family(family).load(path))
        kinds = found.source_kinds()
        assert kinds and set(kinds.values()) == {"stand-in"}, kinds


def test_engine_pack_compiles_the_engine_tree_when_given(monkeypatch, tmp_path):
    kernels = tmp_path / "src" / "shaders" / "cuda" / "kernels.cu"
    kernels.parent.mkdir(parents=True)
    kernels.write_text("// an engine tree\n")
    monkeypatch.setenv("ZINC_SRC", str(tmp_path))
    pack = declared.load_pack(experiment_path("engine_zinc"))
    kind, files = pack.sources["zinc"].resolve()
    assert (kind, files) == ("engine", [kernels])


def test_every_bundled_stand_in_exists():
    from zincbench.gpu.runtime import KERNELS_DIR

    pack = declared.load_pack(experiment_path("engine_zinc"))
    for source in pack.sources.values():
        for name in source.stand_in:
            assert (KERNELS_DIR / name).is_file(), name


def test_the_t2_gate_judges_against_what_the_engine_runs():
    from zincbench.bench import load_family

    family = load_family("t2")
    cfg = family.load(experiment_path("t2_moe_expert"))
    assert family.gate_rule(cfg).baseline == "engine"
    engine = declared.load_pack(experiment_path("engine_zinc")).variant("t2", "engine")
    conditions = [step.condition for step in engine.steps]
    assert conditions[0] == "T < moe_tc_min_t" and all("T >= moe_tc_min_t" in c for c in conditions[1:])


def test_steps_follow_the_declared_threshold():
    pack = declared.load_pack(experiment_path("engine_zinc"))
    variant = pack.variant("t2", "engine")
    params = {"T": 63, "E": 256, "top_k": 8, "x_per_slot": 0, "weights": "q4_k"}
    names = declared._names(pack, declared.Binding({}, params, "y", None))
    plan = declared.expand(variant, pack, names)
    assert [s.kernel for s, _, _ in plan.steps] == ["dmmv_{qtype}_experts_batched"] and not plan.workspace
    plan = declared.expand(variant, pack, {**names, "T": 64})
    assert [s.kernel for s, _, _ in plan.steps] == ["build_expert_order_padded", "gemm_q4k_experts_grouped_tc"]
    # the used variant's let and workspace come along: max_pos = T*top_k + 64*E
    assert {ws.name for ws, _, _ in plan.workspace} == {"order", "tile_expert"}
    assert plan.steps[0][1]["max_pos"] == 64 * 8 + 64 * 256


@pytest.mark.parametrize(
    "weights, kernels",
    [
        ("q4_k", ["dmmv_{qtype}_experts_batched"]),
        ("q6_k", ["build_expert_order_padded", "gemm_{qtype}_experts_grouped_tc"]),
    ],
)
def test_the_engines_down_form_at_the_tc_threshold(weights, kernels):
    """Per-slot activations (the down projection) from moe_tc_min_t: Q6_K takes the down-form grouped TC
    kernel; Q4_K has none (gemm_q4k_experts_grouped_tc takes the gate/up push, so the down push there would
    read base = slice bytes) and stays on the matvec, as in the layer block."""
    pack = declared.load_pack(experiment_path("engine_zinc"))
    params = {"T": 64, "E": 256, "top_k": 8, "x_per_slot": 1, "weights": weights, "qtype": weights.replace("_", "")}
    names = declared._names(pack, declared.Binding({}, params, "y", None))
    plan = declared.expand(pack.variant("t2", "engine"), pack, names)
    assert [s.kernel for s, _, _ in plan.steps] == kernels


def test_test_pack_parses():
    pack = declared.load_pack(FIXTURES / "pack.yaml")
    assert set(pack.variants["t2"]) == {"abi_routed_dot", "abi_two_step", "abi_switch"}
    assert pack.sources["abi"].resolve() == ("file", [FIXTURES / "abi_kernels.cu"])


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not found (install the CUDA toolkit)")
@pytest.mark.parametrize("arch", ["sm_89", "sm_90", "sm_120"])
def test_abi_test_kernels_compile(arch, tmp_path):
    import subprocess

    proc = subprocess.run(
        [
            find_nvcc(),
            "-std=c++17",
            f"-arch={arch}",
            "-cubin",
            "-o",
            str(tmp_path / "k.cubin"),
            str(FIXTURES / "abi_kernels.cu"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


# ---- bad specs: one line naming the file and the key, exit 2 ------------------------------------------
GOOD_STEP = {
    "kernel": "abi_routed_dot",
    "grid": [1],
    "block": [64],
    "buffers": ["weights", "x", "routing", "y"],
    "push": {"M": "M"},
}
BAD_SPECS = {
    "push-typed": ({"push": {"M": "u32 M"}}, "steps[0].push.M: write only the expression ('M')"),
    "push-form": ({"push": {"M": "M +"}}, "steps[0].push.M: 'M +': does not parse"),
    "expression": ({"grid": ["ceil_div(M", "64)"]}, "steps[0].grid[0]: 'ceil_div(M': does not parse"),
    "attribute": ({"grid": ["M.real"]}, "steps[0].grid[0]: 'M.real': unsupported syntax Attribute"),
    "unknown-key": ({"threads": 64}, "steps[0]: unknown key(s) threads"),
    "source": ({"source": "nowhere"}, "steps[0].source: unknown source 'nowhere'"),
    "host-op": ({"host": "sgemm", "kernel": None}, "steps[0].host: unknown host operation 'sgemm'"),
}


def _write_pack(tmp_path, step=None, variant=None, source=None) -> Path:
    import yaml

    step = {k: v for k, v in {**GOOD_STEP, **(step or {})}.items() if v is not None}
    if "host" in step:
        step = {"host": step["host"]}
    pack = {
        "sources": {"abi": source or {"path": str(FIXTURES / "abi_kernels.cu")}},
        "variants": [{"name": "mine", "family": "t2", "steps": [step], **(variant or {})}],
    }
    path = tmp_path / "pack.yaml"
    path.write_text(yaml.safe_dump(pack))
    return path


def _one_line_exit_2(capsys, args) -> str:
    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize("name", sorted(BAD_SPECS))
def test_bad_specs_fail_with_one_line(name, tmp_path, capsys):
    step, message = BAD_SPECS[name]
    path = _write_pack(tmp_path, step=step)
    err = _one_line_exit_2(capsys, ["microbench", "t2", "--kernels", str(path), "--no-progress"])
    assert str(path) in err and message in err


def test_unset_variable_without_stand_in(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MY_KERNELS", raising=False)
    path = _write_pack(tmp_path, source={"path": "${MY_KERNELS}/k.cu"})
    err = _one_line_exit_2(capsys, ["microbench", "t2", "--kernels", str(path), "--no-progress"])
    assert "sources.abi.path: ${MY_KERNELS} is not set" in err


@pytest.mark.parametrize(
    "variant, message",
    [
        ({"role": "judge"}, "role: must be one of"),
        ({"tolerance": 5}, "tolerance: must be a number in (0, 1)"),
        ({"name": "matvec"}, "clash with t2's own variants"),
        ({"steps": [{"use": "other"}]}, "use: no t2 variant 'other'"),
    ],
)
def test_bad_variants(variant, message, tmp_path, capsys):
    path = _write_pack(tmp_path, variant=variant)
    err = _one_line_exit_2(capsys, ["microbench", "t2", "--kernels", str(path), "--no-progress"])
    assert message in err


def test_missing_engine_tree(tmp_path, capsys):
    err = _one_line_exit_2(capsys, ["microbench", "t2", "--engine-src", str(tmp_path / "nope"), "--no-progress"])
    assert "--engine-src" in err


def test_engine_tree_without_kernels_file(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ZINC_SRC", raising=False)
    err = _one_line_exit_2(capsys, ["microbench", "t2", "--engine-src", str(tmp_path), "--no-progress"])
    assert "engine_zinc.yaml: sources.zinc.path: no such file" in err


def test_candidate_override_must_name_a_variant(capsys):
    err = _one_line_exit_2(
        capsys,
        [
            "microbench",
            "t2",
            "--kernels",
            str(FIXTURES / "pack.yaml"),
            "--candidate",
            "abi_routed_dott",
            "--no-progress",
        ],
    )
    assert "gate.candidate: no variant named 'abi_routed_dott'" in err and "abi_routed_dot" in err


def test_readme_example_pack_parses_and_needs_the_engine_tree(monkeypatch, tmp_path, capsys):
    path = Path(__file__).parents[1] / "experiments" / "examples" / "grouped_matvec.yaml"
    pack = declared.load_pack(path)
    assert set(pack.variants["t2"]) == {"grouped_matvec"}
    monkeypatch.delenv("ZINC_SRC", raising=False)
    err = _one_line_exit_2(
        capsys, ["microbench", "t2", "--kernels", str(path), "--candidate", "grouped_matvec", "--no-progress"]
    )
    assert "sources.zinc.path: ${ZINC_SRC} is not set" in err


def test_kernels_on_the_command_line_are_relative_to_the_working_folder(monkeypatch, capsys):
    monkeypatch.chdir(FIXTURES.parents[2])
    with pytest.raises(SystemExit) as exc:
        main(["microbench", "t2", "--kernels", "tests/fixtures/engine_abi/pack.yaml", "--no-progress"])
    err = capsys.readouterr().err
    assert "not found" not in err and "no such file" not in err
    assert exc.value.code in (0, 1, 3, 4), err  # it got past loading (no GPU here: 4)


class _Driver:
    """cuFuncGet/SetAttribute of one kernel with `static` bytes of static shared memory, as CUDA keeps them:
    the dynamic limit starts at 48 KB minus the static bytes."""

    def __init__(self, static: int):
        self.limit = 48 * 1024 - static

    def funcGetAttribute(self, attribute, ptr):
        assert attribute == nvrtc.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        return self.limit

    def funcSetAttribute(self, ptr, attribute, value):
        assert attribute == nvrtc.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        self.limit = value


@pytest.mark.parametrize("static", [0, 512, 16 * 1024])
def test_every_dynamic_shared_request_fits_the_kernels_limit_afterwards(monkeypatch, static):
    """Under 48 KB of dynamic memory still needs the opt-in when static + dynamic exceed 48 KB (the fused
    kernel's token tables are static), and a smaller request must not lower a limit another launch needs."""
    import sys
    import types

    driver = _Driver(static)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(driver=driver)))
    function = types.SimpleNamespace(ptr=1)
    for request in (100, 48 * 1024 - 256, 200 * 1024, 64 * 1024, 0):
        nvrtc.set_dynamic_shared(function, request)
        assert request <= driver.limit
    assert driver.limit == 200 * 1024


def test_engine_src_sets_the_variable_each_pack_names(tmp_path):
    """--engine-src gives its folder to the ${VAR} a pack declares as its engine_tree, and to no other."""
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(float* y) {}\n')
    named = {
        "engine_tree": "MY_TREE",
        "sources": {"s": "${MY_TREE}/k.cu"},
        "variants": [
            {"name": "v", "family": "t2", "steps": [{"kernel": "k", "grid": [1], "block": [1], "buffers": ["y"]}]}
        ],
    }
    pack = declared.parse_pack(named, tmp_path / "pack.yaml")
    assert pack.variables(str(tmp_path)) == {"MY_TREE": str(tmp_path)}
    assert pack.sources["s"].resolve(pack.variables(str(tmp_path))) == ("file", [tmp_path / "k.cu"])
    unnamed = declared.parse_pack({**named, "engine_tree": None}, tmp_path / "pack.yaml")
    assert unnamed.variables(str(tmp_path)) == {}
    with pytest.raises(ConfigError, match="no source path names"):
        declared.parse_pack({**named, "engine_tree": "OTHER"}, tmp_path / "pack.yaml")


def test_the_engine_pack_names_its_source_tree():
    assert load_pack(experiment_path("engine_zinc")).engine_tree == "ZINC_SRC"
