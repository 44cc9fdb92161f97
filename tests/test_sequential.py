"""The group-sequential design of the adaptive A/B: looks, and an error budget that looking often does not raise."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from zincbench.judge import Verdict, compare_paired
from zincbench.runs.sequential import METRICS, SequentialDesign


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.integers(2, 40), st.integers(0, 60), st.integers(1, 10), st.floats(1e-4, 0.2))
@example(6, 24, 4, 0.01)  # the defaults
@example(2, 0, 1, 0.01)  # fixed rounds: one look
def test_looks_end_at_the_budget_and_their_alphas_spend_exactly_the_metric_budget(first, extra, every, alpha):
    design = SequentialDesign(first, first + extra, every, alpha)
    looks, alphas = design.looks(), design.look_alphas()
    assert looks[0] == first and looks[-1] == first + extra and looks == sorted(set(looks))
    assert all(a >= 0 for a in alphas)  # the first looks may spend (numerically) nothing
    assert sum(alphas) == pytest.approx(alpha / METRICS, rel=1e-9)


def test_a_single_look_spends_the_whole_metric_budget():
    assert SequentialDesign(6, 6, 1, 0.01).confidence_at(6) == pytest.approx(1 - 0.01 / METRICS)
    assert SequentialDesign(6, 30, 4, 0.01).confidence_at(7) is None  # between looks


def test_early_looks_demand_more_evidence_than_late_ones():
    confidences = [SequentialDesign(6, 30, 4, 0.01).confidence_at(n) for n in SequentialDesign(6, 30, 4, 0.01).looks()]
    assert confidences[0] > confidences[-1] > 1 - 0.01


def _sequential_verdict(logs, design, threshold=0.02):
    for n in design.looks():
        cmp = compare_paired(np.ones(n), np.exp(logs[:n]), threshold=threshold, confidence=design.confidence_at(n))
        if cmp.verdict is not Verdict.INCONCLUSIVE:
            return cmp.verdict
    return Verdict.INCONCLUSIVE


def test_false_calls_on_identical_arms_stay_within_the_budget_of_one_metric():
    """Simulated A/A log-ratios at the issue's noise (1.5% per run, so 2.1% per pair): the share of
    faster/slower calls over every look must stay below alpha / METRICS (union bound), and most
    comparisons must reach "same" within the budget."""
    design = SequentialDesign(6, 30, 4, 0.01)
    rng = np.random.default_rng(0)
    verdicts = [
        _sequential_verdict(rng.normal(0, 0.015 * math.sqrt(2), design.max_rounds), design) for _ in range(2000)
    ]
    false_calls = sum(v in (Verdict.FASTER, Verdict.SLOWER) for v in verdicts)
    assert false_calls / len(verdicts) <= 0.01 / METRICS
    assert sum(v is Verdict.SAME for v in verdicts) > len(verdicts) / 2
