"""Columns that sit at one value in most rows (an image block blank in most rows, a dose most
patients never get): what the data lens compares there. Known answers on federations made here.

- A site whose column is one value in every row has no extremes apart from it: its share is its
  most common value's against the others' most common value's, never 'saturated at the top'
  against the others' share at their maximum (MNIST's blocks dealt to sites at random:
  benchmarks/random_split_null.py).
- A site with half or more of its values at one value has no spread to compare: its robust SD is a
  width across the edge of the mass, or the plain SD of the few values off it, and jumps with a few
  rows. Its spread cells say so, and it is in no other site's reference for spread."""

from __future__ import annotations

import numpy as np

from fedcore.interpret.data_checks import Checks, check_profile, tied_middle
from fedcore.interpret.findings import decide
from fedcore.interpret.profile import profile_federation

SITES = [f"site {k}" for k in range(6)]
ROWS = 1000


def _federation(column: list, seed: int = 0):
    """Six sites of ROWS rows: a normal 'pressure' related to the label, and 'block' as
    `column[k](rng, y)` gives it at site k."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, name in enumerate(SITES):
        y = rng.integers(0, 2, ROWS)
        pressure = 120 + 15 * rng.normal(0, 1, ROWS) + 10 * y
        rows.append((name, np.column_stack([pressure, column[k](rng, y)]), y))
    return profile_federation(rows, ["pressure", "block"], ["continuous"] * 2, ["pressure", "block"],
                              ["no", "yes"], {}, None)


def _mostly_zero(share_zero: float):
    def values(rng, y):
        return np.where(rng.random(len(y)) < share_zero, 0.0, rng.gamma(2.0, 20.0, len(y)))
    return values


def _cells(profile, site: str, feature: str) -> dict:
    return {f.kind: f for f in decide(check_profile(profile)) if (f.site, f.feature) == (site, feature)}


def test_a_site_blank_in_every_row_where_the_others_are_blank_in_nearly_every_row_has_no_point_mass():
    # the others: 3 to 4 rows of 1000 with a grey level; site 0: none (a chance of about 1 in 50 per site)
    profile = _federation([lambda rng, y: np.zeros(len(y))] + [_mostly_zero(0.9965)] * 5)
    cells = _cells(profile, "site 0", "block")
    mass = cells["point_mass"]
    assert mass.evidence["where"] == "top"  # its one value, not its maximum
    assert mass.evidence["share"] == 1.0 and mass.evidence["others_share"] > 0.99
    assert not mass.material and not (mass.significant and mass.explained_by is None)
    reported = [f for f in decide(check_profile(profile)) if f.significant and f.explained_by is None]
    assert not [f for f in reported if f.feature == "block"]


def test_a_site_at_its_maximum_in_a_third_of_its_rows_is_still_saturated():
    """The rule reads a site of one value only: a sensor capped at its 70 % quantile keeps its
    maximum apart from its minimum, and its mass there is found against the others' maximum."""
    def capped(rng, y):
        values = rng.gamma(4.0, 10.0, len(y))
        return np.minimum(values, np.quantile(values, 0.7))
    profile = _federation([capped] + [lambda rng, y: rng.gamma(4.0, 10.0, len(y))] * 5)
    mass = _cells(profile, "site 0", "block")["point_mass"]
    assert mass.evidence["where"] == "max" and mass.material and mass.significant


def test_the_spread_of_a_column_mostly_at_one_value_is_not_testable_and_in_no_reference():
    # sites 0-2: 88-92 % zeros (tied); sites 3-5: 30 % zeros (their quartiles apart)
    profile = _federation([_mostly_zero(0.88), _mostly_zero(0.92), _mostly_zero(0.90)] + [_mostly_zero(0.3)] * 3)
    j = profile.features.index("block")
    assert tied_middle(profile.quantiles)[:, j].tolist() == [True] * 3 + [False] * 3
    for site in SITES[:3]:
        cells = _cells(profile, site, "block")
        for kind in ("spread", "spread_within"):
            assert not cells[kind].tested and "half or more of its values sit at one value" in cells[kind].untestable
    # a site whose values vary is compared with the others whose values vary: their robust SDs' mean log
    robust = Checks(profile).robust_sd[:, j]
    spread = _cells(profile, "site 3", "block")["spread"]
    assert spread.tested
    assert np.isclose(spread.evidence["others_sd"], np.exp(np.mean(np.log(robust[4:]))))
    # and within its classes: its log SD ratio against the mean of the other varying sites' (sites 4, 5)
    within, c = Checks(profile)._within_classes, Checks(profile).continuous.index(j)
    assert np.isnan(within["log_ratio"][:3, c]).all()
    assert np.isclose(within["spread_dev"][3, c], within["log_ratio"][3, c] - within["log_ratio"][4:, c].mean())
    # the normal column is tested at every site
    assert all(_cells(profile, site, "pressure")["spread"].tested for site in SITES)
