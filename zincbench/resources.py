"""Where the bundled CUDA kernels (``kernels/*.cu``) and experiment files (``experiments/*.yaml``) live.

The repository keeps them in its top-level ``kernels/`` and ``experiments/`` folders; the build maps
those folders into the package as ``zincbench.kernels`` and ``zincbench.experiments`` (setup.py's
package_dir), so a wheel, ``pip install .``, pipx or ``uv tool install`` carries them in
site-packages. Every module finds them through this one place.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]


@lru_cache(maxsize=None)
def _bundled(folder: str) -> Path:
    # A source checkout (python -m from the repo, an editable install) reads its own folders, so a
    # worktree never picks up another checkout's kernels through an editable install's path finder.
    if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / folder).is_dir():
        return _CHECKOUT / folder
    spec = importlib.util.find_spec(f"zincbench.{folder}")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"zincbench is installed without its {folder}/ folder (a broken build)")
    return Path(next(iter(spec.submodule_search_locations)))


def kernels_dir() -> Path:
    """The folder of the bundled CUDA sources."""
    return _bundled("kernels")


def experiments_dir() -> Path:
    """The folder of the bundled experiment, gate, catalog and category YAML files."""
    return _bundled("experiments")
