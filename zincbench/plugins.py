"""Extension modules named in ``$ZINCBENCH_PLUGINS``, imported before a registry is read.

A family or engine adapter kept outside the package (a lab's own kernels, a test's toy) is one
module that registers itself exactly as the bundled ones do (``zincbench.bench.register_family``,
``zincbench.engines.register``); ``ZINCBENCH_PLUGINS=pkg.mod,other.mod`` names it.
"""

from __future__ import annotations

import importlib
import os

from zincbench.errors import InputError

PLUGINS_VARIABLE = "ZINCBENCH_PLUGINS"


def load_plugins() -> None:
    """Import every module named in $ZINCBENCH_PLUGINS (once: Python caches the import)."""
    for name in (n.strip() for n in os.environ.get(PLUGINS_VARIABLE, "").split(",")):
        if not name:
            continue
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a broken plugin is bad input, named in one line
            raise InputError(f"${PLUGINS_VARIABLE}: cannot import {name!r} ({type(exc).__name__}: {exc})") from None
