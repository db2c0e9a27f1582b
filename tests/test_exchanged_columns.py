"""The "columns exchanged" check (`Checks.exchanged_columns`): two columns on one scale swapped in
one site's export leave every value check blind; their correlations with the other features still
say which column is which. Known answers: the fit of two correlation rows by hand, an exchange
between two groups of related channels found at its site and nowhere else, and what is no
exchange (two channels of one group, whose relations are the same; relations exchanged while the
values stay their own columns')."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "evidence"))

from fedcore.interpret.data_checks import correlation_fit, check_profile
from fedcore.interpret.findings import decide
from fedcore.interpret.profile import profile_federation

SITES = [f"site {k}" for k in range(8)]
BROKEN = "site 2"  # where tests/test_checkup.py plants its problems (the evidence views' cases)
FEATURES = ["a1", "a2", "a3", "b1", "b2", "b3", "c1", "c2"]


def test_the_fit_is_the_pearson_r_of_two_rows_without_the_pair_by_hand():
    """correlation_fit[c, x]: Pearson r over l not in {c, x} of site[c, l] and reference[x, l]."""
    rng = np.random.default_rng(1)
    site, reference = (np.corrcoef(rng.normal(size=(6, 30))) for _ in range(2))
    fit = correlation_fit(site, reference)
    for c, x in [(0, 1), (2, 5), (4, 4), (5, 0)]:
        rest = [l for l in range(6) if l not in (c, x)]
        assert fit[c, x] == pytest.approx(np.corrcoef(site[c, rest], reference[x, rest])[0, 1])
    # a withheld correlation drops out of that pair of rows only; fewer than 3 left: no fit
    site[0, 2] = site[2, 0] = np.nan
    fit = correlation_fit(site, reference)
    assert fit[0, 1] == pytest.approx(np.corrcoef(site[0, [3, 4, 5]], reference[1, [3, 4, 5]])[0, 1])
    assert fit[1, 0] == pytest.approx(np.corrcoef(site[1, [2, 3, 4, 5]], reference[0, [2, 3, 4, 5]])[0, 1])
    assert np.isnan(correlation_fit(site[:4, :4], reference[:4, :4])[0, 1])  # 2 left


def site_rows(rng: np.random.Generator, rows: int = 300, shift: float = 0.0) -> np.ndarray:
    """Three channels of factor A, three of factor B, two of factor C, every one 10 ± about 2.2
    (one scale: no value check can tell them apart); `shift`: the site's own small offset."""
    factors = rng.normal(0, 1, (rows, 3))
    groups = [0, 0, 0, 1, 1, 1, 2, 2]
    return 10 + shift + 2 * (factors[:, groups] + 0.5 * rng.normal(0, 1, (rows, len(groups))))


def federation(problem=None, seed: int = 0, policy=None, broken_rows: int = 300):
    """Eight sites, BROKEN with `problem` (and `broken_rows` rows; the others 300); the statistics as
    computed, or at a disclosure `policy`."""
    rng = np.random.default_rng(seed)
    out = []
    for name in SITES:
        x = site_rows(rng, rows=broken_rows if name == BROKEN else 300, shift=rng.normal(0, 0.05))
        y = rng.integers(0, 2, len(x))
        if name == BROKEN and problem is not None:
            x = problem(x, rng)
        out.append((name, x, y))
    return profile_federation(out, FEATURES, ["continuous"] * len(FEATURES), FEATURES, ["no", "yes"], {}, policy)


def exchanged(a: int, b: int):
    def problem(x, rng):
        x = x.copy()
        x[:, [a, b]] = x[:, [b, a]]
        return x
    return problem


def reported(profile):
    return [f for f in decide(check_profile(profile)) if f.significant and f.explained_by is None]


def test_two_channels_of_different_factors_exchanged_are_found_both_ways_at_their_site_only():
    cells = decide(check_profile(federation(exchanged(0, 3))))
    found = [f for f in cells if f.significant and f.explained_by is None]
    assert {(f.site, f.kind, f.feature, f.evidence["partner"]) for f in found if f.kind == "exchanged_columns"} == {
        (BROKEN, "exchanged_columns", "a1", "b1"), (BROKEN, "exchanged_columns", "b1", "a1")}
    # nothing at the other sites; at the site, what else is found is a channel of the two groups
    # whose partner left (b2 and b3 lost b1), never of the group the exchange did not touch
    assert all(f.site == BROKEN for f in found)
    assert all(f.feature[0] in "ab" for f in found if f.kind == "correlation")
    a1 = next(f for f in found if f.feature == "a1")
    # a1 at the site relates to a2, a3 no more (own fit about -0.5) and as b1 does elsewhere (about +1)
    assert a1.evidence["fit"] > 0.9 and a1.evidence["own"] < 0 and a1.effect == pytest.approx(
        min(a1.evidence["fit"] - a1.evidence["own"], a1.evidence["partner_fit"] - a1.evidence["partner_own"]))
    assert "look exchanged" in a1.message and "b1" in a1.message
    # what the correlation check sees at the same cells is explained by the exchange, not lost
    lost = [f for f in cells if f.site == BROKEN and f.kind == "correlation" and f.feature in ("a1", "b1")
            and f.significant]
    assert lost and all(f.explained_by == "exchanged_columns" for f in lost)


def test_an_exchange_over_too_few_rows_to_tell_it_from_chance_is_said_so_and_not_material():
    """The same exchange at a site of 12 rows: its rank correlations still read as the other
    column's, but 12 rows' correlations vary by about 0.3 each, so the pair is said to be too few rows
    to tell an exchange from chance, and is no material finding; at 40 rows it is one."""
    from fedcore.interpret.checks import FEWEST_ROWS

    from fedcore.interpret.data_checks import Checks

    def cells(rows):
        return {f.feature: f for f in decide(check_profile(federation(exchanged(0, 3), seed=1, broken_rows=rows)))
                if f.kind == "exchanged_columns" and f.site == BROKEN and f.feature in ("a1", "b1")}

    few = cells(12)
    # the fit is read from rank correlations (a row far out makes 12 rows' Pearson r ±1): by hand
    profile, i = federation(exchanged(0, 3), seed=1, broken_rows=12), SITES.index(BROKEN)
    by_hand = correlation_fit(profile.rank_correlation[i], Checks(profile).others_rank_correlation[i])
    assert few["a1"].evidence["fit"] == pytest.approx(by_hand[0, 3])
    assert few["a1"].evidence["partner"] == "b1" and few["a1"].evidence["fit"] > 0.9
    assert f"too few rows to tell an exchange from chance (fewer than {FEWEST_ROWS})" in few["a1"].message
    assert not any(f.material for f in few.values())
    enough = cells(40)
    assert all(f.material and f.evidence["partner"] in ("a1", "b1") for f in enough.values())


@pytest.mark.parametrize("seed", range(3))
def test_no_exchange_on_a_clean_federation(seed):
    assert not [f for f in reported(federation(seed=seed)) if f.kind == "exchanged_columns"]


def test_two_channels_of_one_factor_exchanged_are_no_finding():
    """a1 and a2 relate to every other feature alike: nothing tells them apart, nothing to report."""
    assert not [f for f in reported(federation(exchanged(0, 1))) if f.kind == "exchanged_columns"]


def test_relations_exchanged_while_the_values_stay_their_own_columns_are_no_exchange():
    """At the site a1 is driven by factor B and b1 by factor A, but a1's values keep a1's scale
    (10 ± 2) and b1's keep b1's, where b1 elsewhere is 40 ± 2: the values say which column is which,
    so the relations alone make no exchange (a sensor wired to another factor is another problem:
    the correlation check's)."""
    def rescaled(problem=None):
        def scaled(x, rng):
            x = problem(x, rng) if problem else x.copy()
            x[:, 3] += 30  # b1 recorded on its own scale at every site
            return x
        return scaled

    rng = np.random.default_rng(0)
    out = []
    for name in SITES:
        x = site_rows(rng)
        x[:, 3] += 30
        if name == BROKEN:
            values_a, values_b = x[:, 0].copy(), x[:, 3].copy()
            # relations exchanged: a1 follows b1's factor, b1 a1's; each keeps its own scale
            x[:, 0] = values_b - 30
            x[:, 3] = values_a + 30
        out.append((name, x, rng.integers(0, 2, len(x))))
    profile = profile_federation(out, FEATURES, ["continuous"] * len(FEATURES), FEATURES, ["no", "yes"], {})
    cells = [f for f in decide(check_profile(profile)) if f.kind == "exchanged_columns" and f.site == BROKEN
             and f.feature in ("a1", "b1")]
    assert cells and all(f.evidence["partner"] in ("a1", "b1") and f.q < 0.05 for f in cells)
    assert not [f for f in cells if f.material]
    # the same relations with the values exchanged too: an exchange
    swapped = [f for f in reported(federation(exchanged(0, 3))) if f.kind == "exchanged_columns"]
    assert swapped


def test_the_fit_with_every_correlation_released_is_the_masked_fit():
    """The closed form for fully released matrices is each pair's Pearson r by hand, and the masked
    sums (forced by one withheld pair) give the same for the rows that pair is not in."""
    rng = np.random.default_rng(3)
    site, reference = (np.corrcoef(rng.normal(size=(9, 40))) for _ in range(2))
    fast = correlation_fit(site, reference)
    for c in range(9):
        for x in range(9):
            rest = [l for l in range(9) if l not in (c, x)]
            assert fast[c, x] == pytest.approx(np.corrcoef(site[c, rest], reference[x, rest])[0, 1])
    site[7, 8] = site[8, 7] = np.nan
    masked = correlation_fit(site, reference)
    rows = list(range(7))
    assert np.allclose(masked[np.ix_(rows, range(9))], fast[np.ix_(rows, range(9))])
    rest = [l for l in range(9) if l not in (7, 2, 8)]
    assert masked[7, 2] == pytest.approx(np.corrcoef(site[7, rest], reference[2, rest])[0, 1])


@pytest.mark.parametrize("dataset", ["har", "vehicle"])
def test_no_exchange_on_the_real_federations_as_they_are(dataset, shared_data):
    """HAR's 30 subjects and vehicle's 23 sensors as recorded: nothing exchanged. Before the
    reversal rule, two HAR subjects' axis correlations, turned round there (own fit -0.8), fitted
    another column's by chance and read as exchanged."""
    from corruptions import load_table

    from fedcore.interpret.checks import BY_KIND
    from fedcore.interpret.data_checks import Checks

    # the check alone: its family is its own, so its q-values are the check-up's, and no other
    # check's finding can explain one of its cells away here
    cells = decide(Checks(load_table(dataset).profile()).run(BY_KIND["exchanged_columns"]))
    assert not [(f.site, f.feature) for f in cells if f.significant]


def test_an_exchange_is_material_only_both_ways_each_the_others_best_and_better_than_reversed():
    """The material rule on the check's own statistics (set by hand, four sites × five columns):
    at site 0, c0's best exchange is c1 but c1's is c2 (a column in two exchanges is in none of
    c0's); c1 and c2 name each other; c3 and c4 name each other, but c3 gains less than 0.3 over
    its own correlations turned round (own fit -0.6: +0.6 turned round, +0.8 as c4: likelier a
    reversed column than an exchange)."""
    from types import SimpleNamespace

    from fedcore.interpret.data_checks import Checks

    sites, m = 4, 5
    checks = Checks.__new__(Checks)
    # sites of 300 rows: nothing drawn for their size (`sampling.rank_correlation_moments`)
    checks.profile = SimpleNamespace(features=[f"c{k}" for k in range(m)], observed=np.full((sites, m), 300.0),
                                     rank_correlation=np.zeros((sites, m, m)))
    checks.sites, checks.continuous = [f"s{i}" for i in range(sites)], list(range(m))
    gain = np.zeros((sites, m))
    gain[0] = [0.8, 0.9, 0.9, 0.7, 0.7]  # the other sites' about 0: this site stands out in every column
    gain[1:] += np.array([[0.01], [-0.01], [0.02]])
    partner = np.array([[1, 2, 1, 4, 3]] + [[1, 0, 3, 2, 0]] * 3)
    fit, own = np.full((sites, m), 0.8), np.full((sites, m), -0.1)
    own[0, 3] = -0.6
    partner_own = np.take_along_axis(own, partner, axis=1)
    checks.__dict__["_exchange"] = {"gain": gain, "partner": partner, "fit": fit, "partner_fit": fit, "own": own,
                                    "partner_own": partner_own,
                                    "mutual": np.take_along_axis(partner, partner, axis=1) == np.arange(m)}
    checks._values_contradict = lambda i, j, k, tolerance: False
    material = {(f.site, f.feature): f.material for f in checks.exchanged_columns()}
    assert material[("s0", "c1")] and material[("s0", "c2")]
    assert not material[("s0", "c0")]  # its partner c1 has a better exchange
    assert not material[("s0", "c3")] and not material[("s0", "c4")]  # c3 reads as well turned round
    assert not any(material[(s, f"c{k}")] for s in ("s1", "s2", "s3") for k in range(m))  # gains below 0.3
    checks.profile.observed[0, 2] = 15  # one column of the pair under FEWEST_ROWS rows: no material exchange
    material = {(f.site, f.feature): f.material for f in checks.exchanged_columns()}
    assert not material[("s0", "c1")] and not material[("s0", "c2")]
    checks.profile.observed[0, 2] = 300
    checks._values_contradict = lambda i, j, k, tolerance: True  # the values say otherwise
    assert not any(f.material for f in checks.exchanged_columns())


def test_the_values_contradict_an_exchange_when_either_column_is_farther_from_the_other_and_beyond_the_tolerance():
    """`_values_contradict` on hand-set distances (`values_as`: j's values from the others' k, k's
    from the others' j, each from the others' of its own column, in SDs). On HAR as recorded,
    subject 05's tBodyAccJerk-arCoeff()-Y,2 and tBodyGyroJerk-arCoeff()-Z,4 fit each other's
    correlations (0.64 and 0.53, own -0.09): their values, 0.34 SD from each other's against 0.25
    from their own, are what keeps that from reading as an exchange. A rule asking for a margin
    over the own distance instead (0.25 SD more) let it through; the price is a real swap at a site
    whose values sit apart in both columns (vehicle's sensor 09: 0.60 from the other, 0.45 from its
    own) staying unreported as an exchange."""
    from fedcore.interpret.data_checks import Checks

    checks = Checks.__new__(Checks)

    def contradict(j_as_k, k_as_j, j_as_j, k_as_k):
        checks.values_as = lambda i, j, k: tuple(np.array([v]) for v in (j_as_k, k_as_j, j_as_j, k_as_k))
        return checks._values_contradict(0, 0, 1, 0.25)

    assert contradict(0.34, 0.12, 0.25, 0.04)  # HAR's subject 05 as recorded: no exchange
    assert contradict(0.21, 0.60, 0.34, 0.45)  # vehicle's swapped sensor: k farther from j's, beyond 0.25
    assert not contradict(0.05, 0.10, 0.60, 0.70)  # an exchange the values confirm
    assert not contradict(0.24, 0.20, 0.10, 0.05)  # farther, but within the tolerance: one scale
    assert not contradict(0.30, 0.40, 0.35, 0.45)  # beyond the tolerance, but no farther than their own
    assert not contradict(np.nan, np.nan, np.nan, np.nan)  # nothing released: nothing said


def test_a_small_site_where_nothing_differs_is_tested_against_what_its_size_reads():
    """A site of 16 rows among sites of 300, every site's rows from one distribution (the factors of
    `site_rows`, a Gaussian copula: `sampling.rank_correlation_moments` draws exactly this): the
    best of its partners rises and spreads by chance alone, which the test of the exchange and of
    the copy must hold. Without its size drawn, 5 % of the small site's exchange cells and 69 % of
    its copy cells had p < 0.01 over 40 seeds; with it 0.6 % and 0.3 %."""
    p = {"exchanged_columns": [], "copied_column": []}
    for seed in range(20):
        for f in check_profile(federation(None, seed=seed, broken_rows=16)):
            if f.site == BROKEN and f.kind in p:
                p[f.kind].append(f.p)
    for kind, values in p.items():
        values = np.array(values)
        assert len(values) == 20 * len(FEATURES) and np.isfinite(values).all()
        assert np.mean(values < 0.01) <= 0.02, kind
        assert np.mean(values < 0.05) <= 0.10, kind
