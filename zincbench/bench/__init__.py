"""Microbenchmark families (one module each: t2_moe.py, t1_dense.py) and the gate runner.

A family turns an experiment YAML into cases, builds inputs, offers variants (baseline, candidates,
ceilings) that enqueue GPU work, and checks outputs against a float64 NumPy reference. The runner
(runner.py) does the rest the same way for every family: check, time, compare, decide.

A new family is one new module in this package (or one named in ``$ZINCBENCH_PLUGINS``) ending in
``FAMILY = register_family(MyFamily())``; the family names itself (``name``), its bundled experiment
(``default_experiment``) and says what it measures (``summary``). The CLI's family choices, the
gate's ``family`` keys and the runner all read this registry.
"""

from __future__ import annotations

import importlib
import pkgutil

from zincbench.errors import InputError
from zincbench.plugins import load_plugins

# The runner's own modules; every other module here is imported when the registry is read, so a family
# module registers itself just by being here.
RUNNER_MODULES = ("autotune", "base", "declared", "expressions", "host_steps", "rejudge", "rows", "runner")

FAMILIES: dict = {}  # name -> the family object (bench.base.Family)


def register_family(family):
    """Add a family object to the registry under its ``name``; returns it (``FAMILY = register_family(...)``)."""
    FAMILIES[family.name] = family
    return family


def _load_all() -> None:
    for mod in pkgutil.iter_modules(__path__):
        if mod.name not in RUNNER_MODULES and not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
    load_plugins()


def family_names() -> list[str]:
    """Every registered family: the bundled ones and those of $ZINCBENCH_PLUGINS."""
    _load_all()
    return sorted(FAMILIES)


def load_family(name: str):
    _load_all()
    try:
        return FAMILIES[name]
    except KeyError:
        raise InputError(f"unknown microbench family {name!r} (known: {', '.join(sorted(FAMILIES))})") from None


def default_experiment(name: str) -> str:
    """The bundled experiment (a name in experiments/, or a path) a family runs without --experiment."""
    return load_family(name).default_experiment
