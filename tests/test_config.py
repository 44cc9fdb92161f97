"""Schema checks name the file and key; stopping rules say why they stopped."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional

import pytest

from zincbench.config import FLAT, build, load_yaml
from zincbench.errors import ConfigError, InputError
from zincbench.measure.stopping import rule_class
from zincbench.measure.stopping.count import FixedCountRule
from zincbench.measure.stopping.noise import MedianNoiseRule


@dataclass
class Inner:
    n: int


@dataclass
class Outer:
    name: str
    mode: Literal["cold", "hot"] = "cold"
    ratio: float = 1.0
    items: list[Inner] = field(default_factory=list)
    note: Optional[str] = None


def test_build_converts_and_checks():
    obj = build(Outer, {"name": "x", "ratio": 2, "items": [{"n": 3}]}, "f.yaml")
    assert obj.ratio == 2.0 and isinstance(obj.ratio, float) and obj.items == [Inner(3)]


@pytest.mark.parametrize(
    "data, message",
    [
        ({"name": "x", "bogus": 1}, "f.yaml: unknown key 'bogus'"),
        ({}, "f.yaml: missing required key 'name'"),
        ({"name": "x", "mode": "warm"}, "f.yaml.mode: must be one of 'cold', 'hot'"),
        ({"name": "x", "ratio": "fast"}, "f.yaml.ratio: expected a number"),
        ({"name": "x", "items": [{"n": True}]}, "f.yaml.items[0].n: expected an integer"),
        ([1, 2], "f.yaml: expected a mapping"),
    ],
)
def test_build_names_the_offending_key(data, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        build(Outer, data, "f.yaml")


@dataclass
class Limits:
    ratio: float = 1.0
    name: str = "inner"

    def __post_init__(self):
        if self.ratio <= 0:
            raise ValueError(f"ratio must be positive, got {self.ratio}")


@dataclass
class Holder:
    name: str
    limits: Limits = field(default_factory=lambda: Limits(ratio=2.0), metadata=FLAT)


def test_a_flat_field_takes_its_keys_beside_its_owners():
    assert build(Holder, {"name": "x"}, "f.yaml").limits == Limits(ratio=2.0)  # the field's default, not the class's
    assert build(Holder, {"name": "x", "ratio": 3}, "f.yaml").limits == Limits(ratio=3.0)
    # `name` is the owner's own key: the flat field's `name` keeps its default
    assert build(Holder, {"name": "x"}, "f.yaml").limits.name == "inner"


@pytest.mark.parametrize(
    "data, message",
    [
        ({"name": "x", "ratio": 0}, "f.yaml: ratio must be positive"),
        ({"name": "x", "ratio": "fast"}, "f.yaml.ratio: expected a number"),
        ({"name": "x", "limits": {"ratio": 1}}, "f.yaml: unknown key 'limits'"),
    ],
)
def test_a_flat_fields_keys_are_checked_by_name(data, message):
    with pytest.raises(ConfigError, match=message):
        build(Holder, data, "f.yaml")


def test_load_yaml_errors_are_one_line(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_yaml(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:\d+: invalid YAML"):
        load_yaml(bad)


def test_noise_rule_stops_on_precision_or_timeout():
    rule = MedianNoiseRule(max_noise=0.01, min_samples=20, min_time_s=0.0, max_time_s=5.0, check_every=1)
    steady = [100.0 + 0.01 * (i % 7) for i in range(40)]
    assert not rule.check(steady[:10], 0.1).stop  # too few samples
    decision = rule.check(steady, 0.2)
    assert decision.stop and "noise" in decision.reason
    noisy = [100.0 * (1 + (i % 2)) for i in range(30)]
    timeout = rule.check(noisy, 6.0)
    assert timeout.stop and "timeout" in timeout.reason and "unmet" in timeout.reason


def test_count_rule_and_unknown_rule():
    assert FixedCountRule(samples=3).check([1.0, 2.0, 3.0], 0.0).stop
    assert not FixedCountRule(samples=3).check([1.0, 2.0], 0.0).stop
    assert rule_class("count") is FixedCountRule
    with pytest.raises(ValueError, match="unknown rule 'entropy'"):
        rule_class("entropy")
