"""The model catalog (experiments/catalog.yaml): which GGUFs to validate and benchmark, and how.

``load_catalog`` schema-checks the file (unknown keys and wrong types name the file and key);
``Catalog.select`` resolves names and aliases; ``CatalogModel.gguf`` expands environment variables
only when the path is used, so a catalog whose models folder is not configured still loads.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import string
from pathlib import Path
from typing import Literal

from zincbench.config import EXPERIMENTS_DIR, build, experiment_path, load_yaml
from zincbench.errors import ConfigError, InputError

DEFAULT_CATALOG = EXPERIMENTS_DIR / "catalog.yaml"
DEFAULT_PROMPT = "The capital of France is"
Shape = Literal["dense", "moe", "hybrid-ssm"]


@dataclasses.dataclass
class _Defaults:
    prompt: str = DEFAULT_PROMPT
    n_gen: int = 12
    min_match: int = 8
    engine_env: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _Entry:
    gguf: str
    arch: str
    shape: Shape
    aliases: list[str] = dataclasses.field(default_factory=list)
    engine_env: dict[str, str] = dataclasses.field(default_factory=dict)
    prompt: str | None = None
    n_gen: int | None = None
    min_match: int | None = None

    def __post_init__(self):
        try:
            string.Template(self.gguf).substitute(collections.defaultdict(str))
        except ValueError as exc:
            raise ValueError(f"gguf: bad ${{VAR}} placeholder in {self.gguf!r} ({exc})") from None


@dataclasses.dataclass
class _CatalogFile:
    models: dict[str, _Entry]
    defaults: _Defaults = dataclasses.field(default_factory=_Defaults)


@dataclasses.dataclass(frozen=True)
class CatalogModel:
    name: str
    gguf_template: str  # as written in the catalog, before environment expansion
    arch: str | None
    shape: str | None
    prompt: str
    n_gen: int
    min_match: int
    engine_env: dict[str, str] = dataclasses.field(default_factory=dict)
    aliases: tuple[str, ...] = ()

    @property
    def gguf(self) -> Path:
        """The GGUF path with ``$VAR``/``${VAR}`` and ``~`` expanded; an unset variable is an InputError."""
        try:
            expanded = string.Template(self.gguf_template).substitute(os.environ)
        except KeyError as exc:
            raise InputError(
                f"catalog model {self.name}: its gguf path {self.gguf_template} needs the environment "
                f"variable {exc.args[0]}, which is not set (export it, or pass --gguf)"
            ) from None
        return Path(expanded).expanduser()

    @property
    def in_catalog(self) -> bool:
        """False for an ad-hoc model made from a bare --gguf file (catalog rows always have an arch)."""
        return self.arch is not None

    @property
    def gguf_basename(self) -> str:
        return Path(self.gguf_template).name

    def matches_file(self, filename: str | os.PathLike) -> bool:
        """True for this model's GGUF (by basename, any folder) or a file/model named after it or an alias."""
        p = Path(str(filename))
        if p.name == self.gguf_basename:
            return True
        names = {n.lower() for n in (self.name, *self.aliases)}
        return p.name.lower() in names or p.stem.lower() in names

    def with_gguf(self, path: str | os.PathLike) -> "CatalogModel":
        return dataclasses.replace(self, gguf_template=str(path))


@dataclasses.dataclass(frozen=True)
class Catalog:
    path: Path
    models: dict[str, CatalogModel]
    defaults: _Defaults

    def find(self, name: str) -> CatalogModel | None:
        """A model by name or alias (case-insensitive)."""
        key = name.lower()
        for model in self.models.values():
            if key == model.name.lower() or key in (a.lower() for a in model.aliases):
                return model
        return None

    def select(self, names=None) -> list[CatalogModel]:
        """Models by name or alias, in the order given; all models (catalog order) for None/empty."""
        if not names:
            return list(self.models.values())
        chosen = []
        for name in names:
            model = self.find(name)
            if model is None:
                raise InputError(f"unknown catalog model {name!r} in {self.path} (known: {', '.join(self.models)})")
            if model not in chosen:
                chosen.append(model)
        return chosen

    def for_file(self, gguf: str | os.PathLike) -> CatalogModel:
        """The catalog model a GGUF belongs to (by basename) pointed at this file, or an ad-hoc
        model named after the file that uses the catalog defaults."""
        match = next((m for m in self.models.values() if m.matches_file(Path(gguf).name)), None)
        if match is not None:
            return match.with_gguf(gguf)
        d = self.defaults
        return CatalogModel(
            name=Path(gguf).stem,
            gguf_template=str(gguf),
            arch=None,
            shape=None,
            prompt=d.prompt,
            n_gen=d.n_gen,
            min_match=d.min_match,
            engine_env=dict(d.engine_env),
        )


def load_catalog(path: str | os.PathLike | None = None) -> Catalog:
    p = experiment_path(path) if path is not None else DEFAULT_CATALOG
    spec = build(_CatalogFile, load_yaml(p), str(p))
    d = spec.defaults
    models: dict[str, CatalogModel] = {}
    seen: dict[str, str] = {}
    for name, entry in spec.models.items():
        n_gen = entry.n_gen if entry.n_gen is not None else d.n_gen
        min_match = entry.min_match if entry.min_match is not None else d.min_match
        where = f"{p}: models.{name}"
        if n_gen < 1:
            raise ConfigError(f"{where}.n_gen: must be at least 1, got {n_gen}")
        if not 1 <= min_match <= n_gen:
            raise ConfigError(f"{where}.min_match: must be between 1 and n_gen ({n_gen}), got {min_match}")
        for label in (name, *entry.aliases):
            if label.lower() in seen:
                raise ConfigError(f"{where}: name or alias {label!r} is already used by {seen[label.lower()]}")
            seen[label.lower()] = name
        models[name] = CatalogModel(
            name=name,
            gguf_template=entry.gguf,
            arch=entry.arch,
            shape=entry.shape,
            prompt=entry.prompt if entry.prompt is not None else d.prompt,
            n_gen=n_gen,
            min_match=min_match,
            engine_env={**d.engine_env, **entry.engine_env},
            aliases=tuple(entry.aliases),
        )
    if not models:
        raise ConfigError(f"{p}: models: the catalog lists no models")
    return Catalog(path=Path(p), models=models, defaults=d)


def add_model_files(catalog: Catalog, chosen: list[CatalogModel], files: dict) -> list[CatalogModel]:
    """``chosen`` plus NAME=PATH models: a catalog name keeps its shape and env with the given GGUF;
    another name takes what the catalog infers from the file."""
    for name, path in files.items():
        known = catalog.find(name)
        model = known.with_gguf(path) if known else dataclasses.replace(catalog.for_file(path), name=name)
        chosen = [m for m in chosen if m.name != model.name] + [model]
    return chosen
