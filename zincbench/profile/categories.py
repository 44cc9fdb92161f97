"""Kernel categories: ordered regex rules (experiments/kernel_categories.yaml) and the share of GPU time
per category."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import pandas as pd

from zincbench.config import EXPERIMENTS_DIR, load_config

DEFAULT_RULES_PATH = EXPERIMENTS_DIR / "kernel_categories.yaml"


@dataclass
class CategoryRule:
    category: str
    pattern: str
    regex: re.Pattern = field(init=False, repr=False)

    def __post_init__(self) -> None:
        try:
            self.regex = re.compile(self.pattern, re.IGNORECASE)
        except re.error as exc:
            raise ValueError(f"category {self.category!r}: invalid regex {self.pattern!r}: {exc}") from None


@dataclass
class CategoryRules:
    rules: list[CategoryRule]
    default: str = "other"

    def classify(self, kernel_name: str) -> str:
        key = strip_parameters(kernel_name)
        for rule in self.rules:
            if rule.regex.search(key):
                return rule.category
        return self.default

    def categories(self) -> list[str]:
        """Category names in rule order (the order tables and charts use), then the default."""
        names = list(dict.fromkeys(rule.category for rule in self.rules))
        return names if self.default in names else [*names, self.default]


def load_rules(path: str | os.PathLike | None = None) -> CategoryRules:
    """The rules in ``path``, or the bundled experiments/kernel_categories.yaml."""
    return load_config(CategoryRules, path or DEFAULT_RULES_PATH)


def strip_parameters(kernel_name: str) -> str:
    """A demangled name without its trailing parameter list: ``void k<a, b>(int, float *)`` -> ``void k<a, b>``."""
    name = kernel_name.rstrip()
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        if name[i] == ")":
            depth += 1
        elif name[i] == "(":
            depth -= 1
            if depth == 0:
                return name[:i] if i > 0 else name
    return name


def category_table(kernels: pd.DataFrame, rules: CategoryRules) -> pd.DataFrame:
    """Per category: distinct kernels, calls, total GPU time and its share, largest first.

    ``kernels`` needs the columns ``name``, ``calls`` and ``total_ns`` (one row per kernel name); a
    ``category`` column already there is used as it is (names are matched against the rules once).
    """
    columns = ["category", "kernels", "calls", "total_ns", "share"]
    if kernels.empty:
        return pd.DataFrame(columns=columns)
    categorized = (
        kernels if "category" in kernels else kernels.assign(category=[rules.classify(n) for n in kernels["name"]])
    )
    table = (
        categorized.groupby("category", sort=False)
        .agg(kernels=("name", "nunique"), calls=("calls", "sum"), total_ns=("total_ns", "sum"))
        .reset_index()
    )
    total = table["total_ns"].sum()
    table["share"] = table["total_ns"] / total if total > 0 else 0.0
    return table.sort_values(["total_ns", "category"], ascending=[False, True], ignore_index=True)[columns]
