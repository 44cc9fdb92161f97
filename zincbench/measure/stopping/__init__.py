"""Stopping rules decide when a measurement has enough samples. One rule per module; each rule is a
dataclass whose fields are its parameters (the experiment YAML's ``timer:`` keys besides ``mode``,
``warmup`` and ``stopping``), registered under its name with ``@rule("name")``. A rule checks its
own fields in ``__post_init__`` (ValueError) and ``quick()`` returns its shortened self (``--quick``)."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import ClassVar, Protocol, Sequence


@dataclass
class StopDecision:
    stop: bool
    reason: str = ""


class StoppingRule(Protocol):
    name: ClassVar[str]

    def check(self, samples: Sequence[float], elapsed_s: float) -> StopDecision: ...

    def quick(self) -> StoppingRule: ...


_RULES: dict[str, type] = {}


def rule(name: str):
    def deco(cls):
        cls.name = name
        _RULES[name] = cls
        return cls

    return deco


def rule_names() -> list[str]:
    """Every registered rule (importing each module of this package registers its rules)."""
    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")
    return sorted(_RULES)


def rule_class(name: str) -> type:
    """The rule registered as ``name``; ValueError naming the known ones otherwise."""
    if name not in rule_names():
        raise ValueError(f"unknown rule {name!r} (known: {', '.join(rule_names())})")
    return _RULES[name]
