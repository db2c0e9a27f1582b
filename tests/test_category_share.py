"""'Categories in other proportions' (`Checks.category_shares`): a yes/no or categorical column's
shares at a site against the other sites' — its statistic by hand, one finding per column, and a
share that the site's class mix predicts is no recording problem. The registry's own known answer
(a reversed yes/no column) is in tests/test_check_registry.py."""

from __future__ import annotations

import numpy as np
import pytest
from test_check_registry import BROKEN, SITES, federation, reported

from fedcore.interpret.calibration import leave_one_out
from fedcore.interpret.data_checks import Checks
from fedcore.interpret.findings import decide
from fedcore.interpret.profile import profile_federation

SMOKER, WARD = 9, [10, 11, 12]


def cells(profile, feature: str) -> list:
    return [f for f in decide(Checks(profile).run(_check())) if f.feature == feature]


def _check():
    from fedcore.interpret.checks import BY_KIND

    return BY_KIND["category_share"]


def test_a_yes_no_columns_share_is_tested_on_its_logit_against_the_other_sites_by_hand():
    profile = federation(seed=3)
    share, n = profile.mean[:, SMOKER], profile.observed[:, SMOKER]
    count = share * n
    logit = np.log((count + 0.5) / (n - count + 0.5))
    own = 1 / (count + 0.5) + 1 / (n - count + 0.5)
    # moderated across every tested share: the smoker's, and each of the ward's three categories
    shares = profile.mean[:, [SMOKER, *WARD]]
    counts, rows = shares * profile.observed[:, [SMOKER, *WARD]], profile.observed[:, [SMOKER, *WARD]]
    _, _, p = leave_one_out(np.log((counts + 0.5) / (rows - counts + 0.5)),
                            own_variance=1 / (counts + 0.5) + 1 / (rows - counts + 0.5))
    for i, finding in enumerate(sorted(cells(profile, "smoker"), key=lambda f: SITES.index(f.site))):
        others = np.delete(share, i).mean()
        assert finding.effect == pytest.approx(share[i] - others, abs=1e-12)
        assert finding.p == min(1.0, p[i, 0])  # one share tested: a yes/no column's share of yes says both
        assert np.isfinite(logit[i]) and own[i] > 0
        assert f"{share[i]:.0%} of its rows, against {others:.0%}" in finding.message
    assert 0 < np.min(p[:, 0]) < 1  # a tested share, not a degenerate one
    for finding in cells(profile, "ward"):  # three categories: the smallest p, × 3
        assert finding.p == pytest.approx(min(1.0, 3 * p[SITES.index(finding.site), 1:].min()), rel=1e-12)


def test_a_categorical_column_in_other_proportions_is_one_finding_for_the_column():
    def icu_and_medicine_mapped_the_other_way(x, y, rng):
        x = x.copy()
        x[:, [10, 11]] = x[:, [11, 10]]  # icu 20 % -> 50 %, medicine 50 % -> 20 %
        return x, y

    found = [f for f in reported(federation(icu_and_medicine_mapped_the_other_way)) if f.site == BROKEN]
    shares = [f for f in found if f.kind == "category_share"]
    assert [(f.kind, f.feature) for f in shares] == [("category_share", "ward")]  # not one per category
    assert shares[0].evidence["category"] in ("'icu'", "'med'") and abs(shares[0].effect) > 0.25  # 30 points
    assert not [f for f in reported(federation(icu_and_medicine_mapped_the_other_way)) if f.site != BROKEN]


def test_a_share_its_class_mix_predicts_is_no_finding():
    """Smokers are 10 % of the well and 70 % of the ill at every site; site 2 holds nine ill patients
    in ten, so 64 % of its rows smoke against about 40 % elsewhere: 24 points and 2.7 × the odds, and
    just what its mix predicts — another class balance, not a coding of the column."""
    rng = np.random.default_rng(5)
    rows = []
    for name in SITES:
        y = (rng.random(500) < (0.9 if name == BROKEN else 0.5)).astype(int)
        smoker = (rng.random(500) < 0.1 + 0.6 * y).astype(float)
        rows.append((name, np.column_stack([rng.normal(0, 1, 500) + y, smoker]), y))
    profile = profile_federation(rows, ["age", "smoker"], ["continuous", "binary"], ["age", "smoker"],
                                 ["well", "ill"], {}, None)
    (site,) = [f for f in cells(profile, "smoker") if f.site == BROKEN]
    assert site.effect > 0.2 and site.p < 0.01  # the shares differ beyond doubt ...
    assert not site.material and "as its mix of classes predicts" in site.message  # ... as the mix predicts
    kinds = [f.kind for f in reported(profile) if f.site == BROKEN]
    assert "class_balance" in kinds and "category_share" not in kinds  # (age: 'differs as its class mix predicts')


def test_a_reversed_yes_no_column_is_found_where_its_share_is_far_from_a_half():
    def reversed_smoker(x, y, rng):
        x = x.copy()
        x[:, SMOKER] = 1 - x[:, SMOKER]
        return x, y

    (finding,) = [f for f in cells(federation(reversed_smoker), "smoker") if f.site == BROKEN]
    assert finding.significant and finding.effect > 0.3
    assert "'smoker = 1' in 7" in finding.message
