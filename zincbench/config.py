"""YAML loading and schema checks. Every problem becomes one ConfigError line (exit code 2)."""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

import yaml

from zincbench.errors import ConfigError
from zincbench.inputs import read_text
from zincbench.resources import experiments_dir

EXPERIMENTS_DIR = experiments_dir()


def experiment_path(name_or_path: str | os.PathLike) -> Path:
    """A path as given, or a bare name looked up in the bundled experiments/ folder."""
    p = Path(name_or_path)
    if p.exists() or p.suffix or os.sep in str(name_or_path):
        return p
    return EXPERIMENTS_DIR / f"{name_or_path}.yaml"


# Bounds on what a YAML file may expand to: configs here are a few hundred nodes, a few levels deep.
# Aliases share one object when loaded, but every consumer walks the expanded tree, so a "billion
# laughs" file of nested aliases is refused by its expanded size, before anything walks it.
MAX_YAML_BYTES = 16 * 2**20
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 100_000
MAX_CONFIG_INT = 2**63


class _BoundedLoader(yaml.SafeLoader):
    """safe_load that refuses duplicate keys (YAML says keys are unique; PyYAML keeps the last one)
    and documents deeper than MAX_YAML_DEPTH or larger than MAX_YAML_NODES once aliases are expanded."""

    def construct_document(self, node):
        _expanded_size(node, {}, 0)
        return super().construct_document(node)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key_node.value!r} (each key may appear once)", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _expanded_size(node, sizes: dict, depth: int) -> int:
    """Nodes in the tree ``node`` expands to (aliases counted every time they are used)."""
    if depth > MAX_YAML_DEPTH:
        raise yaml.constructor.ConstructorError(
            None, None, f"nested deeper than {MAX_YAML_DEPTH} levels", node.start_mark
        )
    if id(node) in sizes:
        return sizes[id(node)]
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(child, sizes, depth + 1) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, sizes, depth + 1) + _expanded_size(v, sizes, depth + 1) for k, v in node.value)
    else:
        size = 1
    if size > MAX_YAML_NODES:
        raise yaml.constructor.ConstructorError(
            None, None, f"expands to more than {MAX_YAML_NODES} values (aliases of aliases?)", node.start_mark
        )
    sizes[id(node)] = size
    return size


def load_yaml(path: str | os.PathLike) -> Any:
    """Every YAML file zincbench reads: bounded in size, depth and alias expansion, duplicate keys refused."""
    p = Path(path)
    text = read_text(p, "YAML file", MAX_YAML_BYTES)
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark is not None else str(p)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{p}: invalid YAML: nested too deeply (more than {MAX_YAML_DEPTH} levels)") from None


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def coerce(value: Any, tp: Any, where: str) -> Any:
    """Check ``value`` against a type hint (and convert ints to floats, lists to tuples where asked)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for alt in (a for a in args if a is not type(None)):
            try:
                return coerce(value, alt, where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[-1] if errors else f"{where}: unexpected value {value!r}")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{where}: must be one of {', '.join(map(repr, args))}, got {value!r}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        item_t = args[0] if args else Any
        items = [coerce(v, item_t, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        val_t = args[1] if len(args) == 2 else Any
        return {str(k): coerce(v, val_t, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        from_config = getattr(tp, "from_config", None)  # a section whose keys depend on a value in it
        return from_config(value, where) if from_config else build(tp, value, where)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        try:
            return float(value)
        except OverflowError:
            raise ConfigError(f"{where}: {str(value)[:20]}... is too large for a number") from None
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        if abs(value) >= MAX_CONFIG_INT:  # no setting needs more than 64 bits; beyond is corruption
            raise ConfigError(f"{where}: {str(value)[:20]}... is out of range for an integer setting")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return str(value)
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{where}: expected {_type_name(tp)}, got {type(value).__name__}")
    return value


# Field metadata: this dataclass-typed field's own keys sit beside its owner's in the YAML (a gate
# check holds the run settings it stands for, under the keys the run's settings have). A key the owner
# declares itself stays the owner's. Keys not given keep the field's default.
FLAT = {"flat": True}


def _init_fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls) if f.init}


def _flat(default: Any, data: dict, keys: set[str], where: str) -> Any:
    hints = typing.get_type_hints(type(default))
    given = {k: coerce(data[k], hints[k], f"{where}.{k}") for k in keys if k in data}
    try:
        return dataclasses.replace(default, **given)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def build(cls: type, data: Any, where: str) -> Any:
    """Construct dataclass ``cls`` from a mapping, naming the exact key on any mismatch."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__ if data is not None else 'nothing'}")
    hints = typing.get_type_hints(cls)
    fields = _init_fields(cls)
    flat = {name: set(_init_fields(hints[name])) - set(fields) for name, f in fields.items() if f.metadata.get("flat")}
    allowed = set(fields) - set(flat) | {key for keys in flat.values() for key in keys}
    unknown = sorted(set(map(str, data)) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")
    kwargs = {}
    for name, f in fields.items():
        if name in flat:
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            kwargs[name] = _flat(default, data, flat[name], where)
        elif name in data:
            kwargs[name] = coerce(data[name], hints[name], f"{where}.{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}: missing required key {name!r}")
    try:
        obj = cls(**kwargs)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return obj


def load_config(cls: type, path: str | os.PathLike) -> Any:
    """Load a YAML file into dataclass ``cls``; a dataclass may check itself in ``__post_init__``
    by raising ValueError, which becomes a ConfigError naming the file."""
    p = Path(path)
    return build(cls, load_yaml(p), str(p))
