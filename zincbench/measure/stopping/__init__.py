"""Stopping rules decide when a measurement has enough samples. One rule per module; each module
registers a factory under its name with ``@rule("name")``; experiments pick one by name."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from zincbench.errors import ConfigError


@dataclass
class StopDecision:
    stop: bool
    reason: str = ""


class StoppingRule(Protocol):
    def check(self, samples: Sequence[float], elapsed_s: float) -> StopDecision: ...


_RULES: dict[str, Callable[..., StoppingRule]] = {}


def rule(name: str):
    def deco(factory):
        _RULES[name] = factory
        return factory
    return deco


def rule_names() -> list[str]:
    """Every registered rule (importing each module of this package registers its rules)."""
    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")
    return sorted(_RULES)


def make_rule(name: str, **params) -> StoppingRule:
    if name not in rule_names():
        raise ConfigError(f"unknown stopping rule {name!r} (known: {', '.join(sorted(_RULES))})")
    try:
        return _RULES[name](**params)
    except TypeError as exc:
        raise ConfigError(f"stopping rule {name!r}: {exc}") from None
