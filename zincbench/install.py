"""What an optional part of zincbench needs, and how to get it, said in one line.

The hints differ by how zincbench was installed: from a source checkout (an editable install, or
``python -m zincbench`` in the repository) the extras are added with ``pip install -e '.[extra]'``;
an installed wheel (pip, pipx, uv tool) has no checkout to point at, so its users are told the
package itself (``pip install llama-cpp-python``).
"""

from __future__ import annotations

# extra -> the packages it adds (pyproject.toml's [project.optional-dependencies])
EXTRAS = {
    "reference": "'llama-cpp-python>=0.3.0'",
    "plot": "'matplotlib>=3.7'",
    "cuda12": "'cupy-cuda12x>=13.0'",
    "cuda13": "'cupy-cuda13x>=13.6'",
}


def from_checkout() -> bool:
    """Is this zincbench a source checkout (it has its pyproject.toml beside the package)?"""
    from zincbench import resources

    return (resources._CHECKOUT / "pyproject.toml").is_file()


def extra_hint(extra: str) -> str:
    """The command that adds an extra to this installation."""
    if from_checkout():
        return f"pip install -e '.[{extra}]'"
    return f"pip install {EXTRAS[extra]}"


def cupy_hint() -> str:
    if from_checkout():
        return "pip install -e '.[cuda12]' for CUDA 12, '.[cuda13]' for CUDA 13"
    return f"pip install {EXTRAS['cuda12']} for CUDA 12, {EXTRAS['cuda13']} for CUDA 13"
