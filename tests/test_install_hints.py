"""What a missing optional part says: one line, the right install command for how zincbench was installed
(a checkout: pip install -e; a wheel: the package itself), and never CuPy's own internals."""

from __future__ import annotations

import sys
import types

import pytest

from zincbench import gpu, install
from zincbench.cli import main
from zincbench.errors import EnvironmentProblem


def _microbench(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["microbench", "t2", "--quick", "--results-dir", str(tmp_path)])
    return exc.value.code, capsys.readouterr().err


def test_microbench_without_cupy_says_so_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    code, err = _microbench(capsys, tmp_path)
    assert code == 4 and err.count("\n") == 1
    assert "microbench needs CuPy and a CUDA GPU; CuPy is not installed" in err and "cuda12" in err


@pytest.mark.parametrize(
    "failure",
    [
        RuntimeError(
            "CUDA environment is not correctly set up\n(see https://docs.cupy.dev/en/stable/install.html)\n"
            "libcuda.so: cannot open shared object file: No such file or directory"
        ),
        OSError("libcudart.so.12: cannot open shared object file"),
    ],
)
def test_microbench_where_cupy_reaches_no_gpu_says_what_is_missing_not_cupys_internals(
    monkeypatch, capsys, tmp_path, failure
):
    def no_device():
        raise failure

    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(
            getDeviceCount=no_device, CUDARuntimeError=type("CUDARuntimeError", (Exception,), {})
        )
    )
    monkeypatch.setitem(sys.modules, "cupy", fake)
    code, err = _microbench(capsys, tmp_path)
    assert code == 4 and err.count("\n") == 1, err
    assert "microbench needs a CUDA GPU; CuPy finds none on this machine" in err
    assert "libcuda" not in err and "docs.cupy.dev" not in err and "Traceback" not in err


def test_a_cuda_error_is_named_in_a_few_words():
    assert gpu._cuda_words(RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")) == "cudaErrorNoDevice"


@pytest.mark.parametrize("checkout", [True, False])
def test_hints_follow_how_zincbench_was_installed(monkeypatch, checkout):
    monkeypatch.setattr(install, "from_checkout", lambda: checkout)
    hints = [install.extra_hint("reference"), install.extra_hint("plot"), install.cupy_hint()]
    if checkout:
        assert all("pip install -e '." in h for h in hints)
    else:  # a wheel user has no checkout: never `pip install -e`
        assert not any("-e" in h.split() for h in hints)
        assert hints[0] == "pip install 'llama-cpp-python>=0.3.0'" and "cupy-cuda12x" in hints[2]


def test_the_extras_named_in_hints_are_pyprojects(monkeypatch):
    tomllib = pytest.importorskip("tomllib")
    from zincbench.resources import _CHECKOUT

    extras = tomllib.loads((_CHECKOUT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, requirement in install.EXTRAS.items():
        assert extras[extra] == [requirement.strip("'")]


def test_without_llama_cpp_python_validate_needs_says_one_line_exit_4(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    monkeypatch.setattr(install, "from_checkout", lambda: False)
    with pytest.raises(SystemExit) as exc:
        main(["validate", "record", "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert exc.value.code == 4 and err.count("\n") == 1
    assert "llama-cpp-python, the optional `reference` extra), which is not installed" in err
    assert "pip install 'llama-cpp-python>=0.3.0'" in err and "-e" not in err.split()


def test_recorded_references_need_no_llama_cpp_python(monkeypatch):
    """The llama.cpp binding is optional: a validate against recorded references does not import it."""
    from zincbench.engines import llama_cpp

    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(EnvironmentProblem):
        llama_cpp.import_llama_cpp()
    import zincbench.runs.validate  # noqa: F401  (imports fine without it)
