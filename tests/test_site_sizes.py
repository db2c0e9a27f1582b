"""Sites of different sizes (`Checks.excess_variance`): a site's statistic carries the sampling
error of its own rows, and the other sites' spread holds only theirs on average; each value test
adds what a site carries beyond that. Known answers: the excess by hand, the exact tail of a count,
and rows dealt at random to sites of 15 and of 400 rows, where no site differs (the sampling
variances themselves: tests/test_sampling.py)."""

from __future__ import annotations


import numpy as np
import pytest
from scipy import stats

from fedcore.interpret.data_checks import Checks, check_profile, random_effects_excess
from fedcore.interpret.findings import decide
from fedcore.interpret.profile import profile_federation

FEATURES = [f"x{k}" for k in range(6)]
# the kinds that compare a site with the others on its values, its correlations or its class mix
COMPARING = {"location", "spread", "shape", "location_related", "spread_related", "correlation", "class_balance",
             "distribution", "point_mass", "row_order", "label_relation"}


def test_the_excess_is_what_a_site_carries_beyond_the_others_mean_by_hand():
    variance = np.array([[1.0, 0.1], [2.0, 0.1], [3.0, 0.7]])
    # site 3: 3 − (1 + 2) / 2 = 1.5; site 1: 1 − 2.5 < 0, nothing; equal sites: nothing
    assert Checks.excess_variance(variance) == pytest.approx(np.array([[0.0, 0.0], [0.0, 0.0], [1.5, 0.6]]))
    assert Checks.excess_variance(np.array([[np.nan], [1.0], [3.0]])) == pytest.approx(np.array([[0.0], [0.0], [2.0]]))


def test_a_few_values_at_a_small_site_are_tested_on_their_exact_tail():
    # one value tied with the maximum among a site's 9, where the others tie in 0.1 %: a chance of
    # 1 − 0.999⁹ ≈ 0.009, not the 10 binomial SEs the normal approximation makes it
    count = np.array([[1.0], [0.0], [1.0], [0.0], [0.0]])
    total = np.array([[9.0], [500.0], [600.0], [400.0], [300.0]])
    p, rate = random_effects_excess(count, total)
    exact = stats.binom.sf(0, 9, rate[0, 0])
    assert exact == pytest.approx(1 - (1 - rate[0, 0]) ** 9)
    assert p[0, 0] == pytest.approx(exact, rel=0.05)
    assert p[0, 0] > 0.005


def dealt(seed: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """One population of six related, skewed features and a label, dealt to 8 sites of 15 rows and
    8 of 400: nothing differs between the sites but chance."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, n in enumerate([15] * 8 + [400] * 8):
        y = rng.integers(0, 2, n)
        factor = rng.normal(0, 1, n) + 0.8 * y
        x = np.column_stack([factor + rng.normal(0, 0.6, n) for _ in FEATURES])
        x[:, :3] = np.exp(x[:, :3] / 2)  # a few skewed
        rows.append((f"site {k}", x, y))
    return rows


def flagged(rows) -> set[str]:
    profile = profile_federation(rows, FEATURES, ["continuous"] * 6, FEATURES, ["no", "yes"])
    return {f.site for f in decide(check_profile(profile)) if f.significant and f.kind in COMPARING}


def test_small_sites_among_large_ones_are_not_reported_for_their_sampling_error(monkeypatch):
    seeds = range(3)
    with_excess = sum(len(flagged(dealt(seed))) for seed in seeds)
    assert with_excess <= 1  # of 48 sites where none differs
    # without it, the small sites' medians and spreads stand out against the large sites' spread
    monkeypatch.setattr(Checks, "excess_variance", staticmethod(lambda variance, others=None: np.zeros_like(variance)))
    without = sum(len(flagged(dealt(seed))) for seed in seeds)
    assert without >= 4 * max(with_excess, 1)
