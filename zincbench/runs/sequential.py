"""When an adaptive A/B may stop: a group-sequential design over the paired log-ratio t test.

``zincbench ab`` keeps interleaving rounds and looks at the evidence after ``min_rounds`` and then
every ``look_every`` rounds, up to ``max_rounds``. At look k it computes, per metric, the paired
comparison of ``judge.compare_paired`` (geometric mean of the per-round ratios B/A with a t interval)
at confidence 1 - alpha_k, and the four-way verdict of ``judge.decide``: faster/slower need the
interval to exclude 1 *and* the ratio beyond the practical threshold; same needs the whole interval
inside the threshold band (a two one-sided tests equivalence decision at alpha_k / 2 per side).

Why the error rate stays at most ``alpha`` however often we look: a wrong call at look k needs the
look's two-sided t interval to miss the true ratio, which happens with probability at most alpha_k
(exact for normal log-ratios, whatever the earlier looks did). By the union bound (Bonferroni) over
looks and metrics, P(any wrong call) <= sum_k sum_metrics alpha_k = alpha. No assumption on the
correlation between looks is needed, so stopping early on a decided verdict, or late on the time
budget (looks never taken only leave alpha unspent), keeps the bound.

How alpha is split over the looks: by the O'Brien-Fleming-type spending function of Lan and DeMets,
alpha(t) = 2 - 2 Phi(z_{1 - a/2} / sqrt(t)) at information fraction t = rounds / max_rounds. It
spends almost nothing at the first looks (a 6-round A/B needs overwhelming evidence) and most of
alpha at the last, where the many rounds make the interval narrow enough to call "same". Used
with the union bound rather than the exact recursive boundaries, the split is conservative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

METRICS = 2  # prefill and decode: each gets alpha / METRICS


@dataclass(frozen=True)
class SequentialDesign:
    min_rounds: int
    max_rounds: int
    look_every: int
    alpha: float  # family-wise: a wrong faster/slower/same for one model, over every look and metric

    def looks(self) -> list[int]:
        """Round counts at which the verdict is computed; the last is always ``max_rounds``."""
        looks = list(range(self.min_rounds, self.max_rounds + 1, self.look_every))
        return looks if looks[-1] == self.max_rounds else [*looks, self.max_rounds]

    def look_alphas(self) -> list[float]:
        """Two-sided alpha of each look's interval, per metric; they sum to alpha / METRICS."""
        from scipy import stats

        budget = self.alpha / METRICS
        z = stats.norm.ppf(1.0 - budget / 2.0)
        spent = [2.0 - 2.0 * stats.norm.cdf(z / math.sqrt(rounds / self.max_rounds)) for rounds in self.looks()]
        return [b - a for a, b in zip([0.0, *spent], spent)]

    def confidence_at(self, rounds: int) -> float | None:
        """Confidence of the interval at a look after ``rounds`` rounds; None between looks."""
        for look, alpha in zip(self.looks(), self.look_alphas()):
            if look == rounds:
                return 1.0 - alpha
        return None
