"""Values change along the rows (`Checks.row_order`): a device drifting over the recording, found
from one statistic per site and feature, its values' rank correlation with their row's place within
each class (`profile.order_correlation`). Known answers: the statistic by hand (Spearman's per class,
pooled on Fisher's z), a file sorted by its label shows no trend, a straight drift's size comes back
as the change it put in, and a statistic a site withheld is a cell *not testable*."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from fedcore.interpret.data_checks import check_profile
from fedcore.interpret.disclosure import Policy
from fedcore.interpret.findings import decide
from fedcore.interpret.profile import profile_federation, site_profile
from tests import test_check_registry as registry


def pooled_by_hand(x: np.ndarray, y: np.ndarray, j: int) -> float:
    """Places and ranks centred within each class, one correlation over the classes."""
    products = places = ranks = 0.0
    for k in np.unique(y):
        values = x[y == k, j]
        values = values[~np.isnan(values)]
        place = np.arange(len(values)) - (len(values) - 1) / 2
        rank = stats.rankdata(values) - (len(values) + 1) / 2
        products, places, ranks = products + place @ rank, places + place @ place, ranks + rank @ rank
    return products / math.sqrt(places * ranks)


def test_the_statistic_is_spearmans_within_each_class_pooled_as_one_correlation_by_hand():
    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, (120, 2))
    y = np.repeat([0, 1, 0, 1], 30)
    x[:, 0] += np.linspace(0, 3, 120)
    x[[4, 50, 77], 0] = np.nan  # rows without the value: places among the class's observed values
    got = site_profile(x, y, 2, [0, 1], policy=None).arrays["order_correlation"]
    for j in range(2):
        assert abs(got[j] - pooled_by_hand(x, y, j)) < 1e-12
    assert got[0] > 0.5 and abs(got[1]) < 0.2  # the trend is found, the column without one shows none


def test_a_small_class_in_perfect_order_by_chance_does_not_take_the_site():
    # vehicle's rows dealt to its sensors at random: a site of 15 rows whose class of 5 happened to
    # fall in order (once in 60) was released as -0.92 when the classes were pooled on Fisher's z
    # (r = -1 is a z of -7); as one correlation it weighs as its 5 rows
    rng = np.random.default_rng(8)
    y = np.array([1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0])
    x = rng.normal(0, 1, (15, 1))
    x[y == 1, 0] = [0.5, 0.1, -0.05, -0.07, -1.2]  # in perfect (falling) order
    got = site_profile(x, y, 2, [0], policy=None).arrays["order_correlation"][0]
    assert abs(got - pooled_by_hand(x, y, 0)) < 1e-12
    on_fishers_z = [(np.sum(y == k) - 3, math.atanh(np.clip(stats.spearmanr(np.arange(np.sum(y == k)), x[y == k, 0])[0],
                                                            -0.999999, 0.999999))) for k in (0, 1)]
    old = math.tanh(sum(w * z for w, z in on_fishers_z) / sum(w for w, _ in on_fishers_z))
    assert old < -0.8 and abs(got) < 0.5  # the old pooling let 5 rows outweigh the other 10


def test_a_file_sorted_by_its_label_shows_no_trend_within_its_classes():
    rng = np.random.default_rng(4)
    y = np.sort(rng.integers(0, 2, 400))  # the well first, then the ill
    x = rng.normal(0, 1, (400, 1)) + 1.5 * y[:, None]  # a marker the ill have higher
    plain = stats.spearmanr(np.arange(400), x[:, 0])[0]
    within = site_profile(x, y, 2, [0], policy=None).arrays["order_correlation"][0]
    assert plain > 0.5 and abs(within) < 0.15


def drifting_federation(change: float, policy: Policy | None = None):
    """The registry's six sites, site 2's glucose drifting by `change` SDs from its first row to its
    last, centred (its mean kept)."""
    return registry.federation(registry.column(2, registry.drifting(change)), policy=policy)


def test_a_straight_drift_is_found_at_its_site_and_column_with_the_change_it_put_in():
    profile = drifting_federation(2.0)
    cells = decide(check_profile(profile))
    found = [f for f in cells if f.kind == "row_order" and f.significant]
    assert [(f.site, f.feature) for f in found] == [(registry.BROKEN, "glucose")]
    finding = found[0]
    # by hand: values of SD 1 (within classes) with a straight trend of d SD over the rows correlate
    # with the row's place by d / sqrt(12) / sqrt(1 + d^2 / 12), and the check reports sqrt(12) x that
    # beyond the others' (whose own is about 0): 2 / sqrt(1 + 4 / 12) = 1.73 SD
    assert abs(finding.effect - 2.0 / math.sqrt(1 + 4 / 12)) < 0.2
    assert finding.material and "rises along the order of its rows" in finding.message
    # the others' cells are tested and not reported; the effect is the statistic's, as released
    j = profile.features.index("glucose")
    r = profile.order_correlation[:, j]
    i = profile.sites.index(registry.BROKEN)
    others = np.tanh(np.mean(np.arctanh(np.delete(r, i))))
    assert math.isclose(finding.effect, math.sqrt(12) * (r[i] - others), rel_tol=1e-9)


def test_a_drift_under_the_material_size_is_no_finding():
    """Half an SD from the first row to the last (√12 × r about 0.5): significant with 400 rows,
    too small to matter."""
    cells = decide(check_profile(drifting_federation(0.5)))
    cell = next(f for f in cells if f.kind == "row_order" and f.site == registry.BROKEN and f.feature == "glucose")
    assert not cell.material and not cell.significant


def test_without_the_statistic_the_cell_is_not_testable_with_the_reason():
    """Under differential privacy no correlation leaves a site: every cell is not testable, never a
    silent pass."""
    profile = drifting_federation(2.0, policy=Policy(dp_epsilon=1.0))
    cells = [f for f in check_profile(profile) if f.kind == "row_order"]
    assert cells and not any(f.tested for f in cells)
    assert all("differential privacy" in f.untestable for f in cells if f.site == registry.BROKEN)


def test_sites_without_the_statistic_in_their_profile_are_not_testable():
    """A profile recorded before the statistic existed (an older site): its cells say so."""
    rng = np.random.default_rng(0)
    rows = [(f"site {k}", *registry.site_rows(rng)) for k in range(4)]
    profile = profile_federation(rows, registry.FEATURES, registry.KINDS, registry.COLUMNS, ["well", "ill"],
                                 policy=None)
    profile.arrays["order_correlation"][1] = np.nan
    profile.withheld.setdefault("site 1", {})["order_correlation"] = "not in this profile"
    cells = [f for f in check_profile(profile) if f.kind == "row_order" and f.site == "site 1"]
    assert cells and all(not f.tested and "not in this profile" in f.untestable for f in cells)


def test_a_small_sites_chance_trend_is_within_its_own_sampling_error():
    """Five sites of 400 rows and one of 25 whose rows happen to rise along the file (a draw of the
    null: rank correlation 0.3-0.45 by chance, z about 1.7 of its own standard error, √(1.06 / 22)):
    the others' correlations lie within ±0.1 of 0, so without the site's own sampling error in the
    yardstick it would stand out beyond doubt."""
    rng = np.random.default_rng(11)
    rows = [(f"site {k}", *registry.site_rows(rng)) for k in range(5)]
    for _ in range(1000):  # the first chance draw of the small site with such a trend
        x, y = registry.site_rows(rng, rows=25)
        r = site_profile(x, y, 2, range(9), policy=None).arrays["order_correlation"][2]
        if 0.3 < r < 0.45:
            break
    rows.append(("small site", x, y))
    profile = profile_federation(rows, registry.FEATURES, registry.KINDS, registry.COLUMNS, ["well", "ill"],
                                 policy=None)
    cell = next(f for f in decide(check_profile(profile)) if f.kind == "row_order" and f.site == "small site"
                and f.feature == "glucose")
    assert 0.3 < cell.evidence["value"] < 0.45 and cell.p > 0.01 and not cell.significant
