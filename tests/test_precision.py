"""Recorded at another precision (`checks`: 'precision'): a column the other sites record in whole
numbers holds decimals at one site, the way a conversion, a correction by a factor or an offset, or
a computed value shows. Known answers: five hospitals that record age and systolic pressure in whole
numbers and a lab score with decimals, one problem planted at 'site 2'."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from fedcore.interpret import checks
from fedcore.interpret.data_checks import check_profile
from fedcore.interpret.disclosure import DEFAULT_POLICY, Policy
from fedcore.interpret.findings import Finding, decide
from fedcore.interpret.profile import Profile, profile_federation

SITES = [f"site {k}" for k in range(5)]
BROKEN = "site 2"
FEATURES = ["age", "systolic", "score"]
ROWS = 300


def federation(problem: Callable | None = None, policy: Policy | None = None) -> Profile:
    """Age and systolic pressure in whole numbers at every site, a score with decimals; site 2's
    rows changed by `problem` (x, y, rng) -> (x, y)."""
    rng = np.random.default_rng(3)
    rows = []
    for name in SITES:
        y = rng.integers(0, 2, ROWS)
        x = np.column_stack([np.round(rng.normal(55 + 4 * y, 12)), np.round(rng.normal(130 + 6 * y, 18)),
                             rng.normal(1.5 + 0.4 * y, 1.0)])
        if name == BROKEN and problem is not None:
            x, y = problem(x.copy(), y, rng)
        rows.append((name, x, y))
    return profile_federation(rows, FEATURES, ["continuous"] * 3, FEATURES, ["well", "ill"], policy=policy)


def cells(profile: Profile) -> list[Finding]:
    return [f for f in decide(check_profile(profile)) if f.kind == "precision"]


def age_from_birth_dates(x, y, rng):
    x[:, 0] = x[:, 0] + 0.05 + 0.9 * rng.random(len(x))  # ages to the day (years and their fraction), not whole years
    return x, y


def a_few_typed_halves(x, y, rng):
    x[:12, 0] += 0.5  # 4 % of the ages with a half year: typed by hand, below what the check calls material
    return x, y


def age_from_the_score(x, y, rng):
    x[:, 0] = 40 + 10 * x[:, 2]  # age exported from the score's column (a copy, on another scale)
    return x, y


def test_decimals_where_the_others_record_whole_numbers_are_found_at_that_site_and_column():
    found = cells(federation(age_from_birth_dates))
    reported = [(f.site, f.feature) for f in found if f.significant]
    assert reported == [(BROKEN, "age")]
    (age,) = [f for f in found if f.site == BROKEN and f.feature == "age"]
    # by hand: every one of its 300 ages has decimals, none of the others' 1,200
    assert age.evidence == {"share": 1.0, "others_share": 0.0} and age.effect == 1.0
    assert "100% of site 2's age values have decimals" in age.message and "none with decimals" in age.message
    assert age.q < 1e-4 and age.explained_by is None


def test_only_columns_the_others_record_in_whole_numbers_have_a_cell():
    found = cells(federation(age_from_birth_dates))
    # the score has decimals everywhere: no site's share of them says how it was recorded
    assert {f.feature for f in found} == {"age", "systolic"}
    # the other sites' cells of age are compared with site 2's decimals among their others: no cell
    assert {f.site for f in found if f.feature == "age"} == {BROKEN}
    assert {f.site for f in found if f.feature == "systolic"} == set(SITES)
    untouched = cells(federation())
    assert untouched and not any(f.significant for f in untouched)
    assert all(f.tested and f.evidence["share"] == 0.0 for f in untouched)


def test_a_few_values_with_decimals_are_significant_but_not_material():
    (age,) = [f for f in cells(federation(a_few_typed_halves)) if f.site == BROKEN and f.feature == "age"]
    assert age.evidence["share"] == pytest.approx(12 / ROWS)
    assert age.q < 0.05 and not age.material and not age.significant
    assert checks.limit("precision", "share") == 0.1


def test_a_copied_column_explains_the_decimals_it_brought():
    profile = federation(age_from_the_score)
    found = decide(check_profile(profile))
    (age,) = [f for f in found if f.kind == "precision" and f.site == BROKEN and f.feature == "age"]
    assert age.material and age.q < 0.05
    assert age.explained_by == "copied_column"  # the copy says where the values came from


def test_the_default_policy_finds_it_too_and_a_withheld_share_is_not_testable():
    found = cells(federation(age_from_birth_dates, DEFAULT_POLICY))
    assert [(f.site, f.feature) for f in found if f.significant] == [(BROKEN, "age")]

    def few_rows(x, y, rng):
        return x[:6], y[:6]  # below the default policy's minimum: its shares are withheld
    found = cells(federation(few_rows, DEFAULT_POLICY))
    withheld = [f for f in found if f.site == BROKEN]
    assert withheld and all(not f.tested and f.untestable for f in withheld)
