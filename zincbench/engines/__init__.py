"""Engine adapters: one module per engine, each registering itself by kind name.

A new adapter is one new file in this package (or a module named in ``$ZINCBENCH_PLUGINS``) that
subclasses ``Engine``, lists its ``capabilities`` and decorates it with ``@register("kind-name")``.
``validate`` offers the kinds that can ``generate``, ``ab`` those that measure ``throughput``; both,
and the gate's checks, build adapters with ``make_engine``.
"""

from __future__ import annotations

import importlib
import pkgutil

from zincbench.engines.base import (  # noqa: F401
    ENGINE_KINDS,
    GENERATE,
    TEACHER_FORCED,
    THROUGHPUT,
    Engine,
    register,
)
from zincbench.errors import InputError
from zincbench.plugins import load_plugins


def _load_all() -> None:
    for mod in pkgutil.iter_modules(__path__):
        if mod.name != "base" and not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
    load_plugins()


def engine_kinds(capability: str | None = None) -> list[str]:
    """Registered kinds (bundled and $ZINCBENCH_PLUGINS'), only those with ``capability`` if given."""
    _load_all()
    return sorted(kind for kind, cls in ENGINE_KINDS.items() if capability is None or capability in cls.capabilities)


def make_engine(kind: str, bin=None, config=None, *, prompt_tokens: int = 512, llama=None) -> Engine:
    """The one place an engine is built: the adapter of ``kind`` for a run with these settings
    (``Engine.for_run``: each adapter takes the settings it needs)."""
    _load_all()
    try:
        cls = ENGINE_KINDS[kind]
    except KeyError:
        raise InputError(f"unknown engine kind {kind!r} (known: {', '.join(sorted(ENGINE_KINDS))})") from None
    return cls.for_run(bin, config, prompt_tokens=prompt_tokens, llama=llama)
