"""Engine adapters: one module per engine, each registering itself by kind name.

A new adapter is one new file in this package that subclasses ``Engine`` and decorates it with
``@register("kind-name")``. ``validate`` and ``ab`` look adapters up with ``make_engine``.
"""

from __future__ import annotations

import importlib
import pkgutil

from zincbench.engines.base import ENGINE_KINDS, Engine, register  # noqa: F401
from zincbench.errors import InputError


def _load_all() -> None:
    for mod in pkgutil.iter_modules(__path__):
        if mod.name not in ("base", "process") and not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")


def make_engine(kind: str, **options) -> Engine:
    _load_all()
    try:
        cls = ENGINE_KINDS[kind]
    except KeyError:
        raise InputError(f"unknown engine kind {kind!r} (known: {', '.join(sorted(ENGINE_KINDS))})") from None
    return cls(**options)
