"""Shares released under differential privacy (`data_checks.beyond_noise`): the check-up tests a
share only where the Laplace noise added to it is at most half its binomial standard error, and
says why it did not test the others; without it, a noisy share near 0 or 1 (a point mass, a
constant column, whole numbers) is reported as a problem the noise made. Known answers: the rule's
boundary from the noise's scale (1 / (n ε′), ε′ = ε / (DP_SHARES × features)) by hand, on
`test_precision`'s five hospitals."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from fedcore.interpret import checks
from fedcore.interpret.data_checks import NOISY, beyond_noise, check_profile
from fedcore.interpret.disclosure import DEFAULT_POLICY, DP_SHARES, Policy
from fedcore.interpret.findings import decide
from fedcore.interpret.profile import STATISTICS, Profile
from tests.test_precision import BROKEN, FEATURES, ROWS, SITES, federation

# the data checks that read a share statistic
SHARE_CHECKS = {check.kind for check in checks.of_lens(checks.DATA)
                if any(name in STATISTICS and STATISTICS[name].kind == "share" for name in check.needs)}
SCORE = FEATURES.index("score")


def as_if_noised(profile: Profile, epsilon: float, sites=(BROKEN,)) -> Profile:
    """The profile as if `sites` had released it at ε: the rule reads only the released shares,
    the sizes of their groups and the policy."""
    return replace(profile, policies={**profile.policies,
                                      **{site: {"min_count": 10, "dp_epsilon": epsilon} for site in sites}})


def epsilon_for(noise_sd: float, n: int) -> float:
    """By hand: the ε whose noise on a share of n rows has this SD (√2 × the Laplace scale 1 / (n ε′)),
    in a release of the federation's three features."""
    return math.sqrt(2) / (n * noise_sd) * DP_SHARES * len(FEATURES)


def with_share(profile: Profile, name: str, value: float) -> Profile:
    arrays = {**profile.arrays, name: profile.arrays[name].copy()}
    arrays[name][SITES.index(BROKEN), SCORE] = value
    return replace(profile, arrays=arrays)


def test_a_share_is_tested_only_where_its_noise_is_at_most_half_its_sampling_error():
    profile = with_share(federation(), "top_share", 0.5)
    limit = 0.5 * math.sqrt(0.5 * 0.5 / ROWS)  # half the binomial SE of a share of 0.5 of 300 values
    i = SITES.index(BROKEN)
    kept = beyond_noise(as_if_noised(profile, epsilon_for(0.95 * limit, ROWS)))
    assert kept.top_share[i, SCORE] == 0.5
    dropped = beyond_noise(as_if_noised(profile, epsilon_for(1.05 * limit, ROWS)))
    assert np.isnan(dropped.top_share[i, SCORE])
    assert dropped.withheld[BROKEN]["top_share"] == NOISY.format(epsilon=epsilon_for(1.05 * limit, ROWS))
    # the other sites released without noise: as they were
    others = [k for k, site in enumerate(SITES) if site != BROKEN]
    assert np.array_equal(dropped.top_share[others], profile.top_share[others])


def test_a_share_of_0_is_tested_as_one_of_a_single_row():
    # at ε = 50 a share of 0.5 is tested (its limit at ε ≈ 10.8), one of 0 not (ε ≈ 93 would do)
    i = SITES.index(BROKEN)
    assert epsilon_for(0.5 * math.sqrt(0.25 / ROWS), ROWS) < 50 < epsilon_for(
        0.5 * math.sqrt((1 / ROWS) * (1 - 1 / ROWS) / ROWS), ROWS)
    assert beyond_noise(as_if_noised(with_share(federation(), "min_share", 0.5), 50.0)).min_share[i, SCORE] == 0.5
    assert np.isnan(beyond_noise(as_if_noised(with_share(federation(), "min_share", 0.0), 50.0)).min_share[i, SCORE])


def test_a_histogram_of_steps_is_set_aside_whole_per_feature():
    profile = federation()
    i = SITES.index(BROKEN)
    gated = beyond_noise(as_if_noised(profile, 50.0))
    # its bins near 0 are too noisy, so no step's share can be formed: every bin of every feature
    assert np.isnan(gated.step_shares[i]).all()
    assert np.isfinite(profile.step_shares[i]).all()


def test_without_noise_the_profile_is_read_as_released():
    profile = federation(policy=DEFAULT_POLICY)
    assert beyond_noise(profile) is profile


def test_under_noise_no_share_check_reports_what_the_noise_made():
    def point_mass(x, y, rng):
        x[rng.random(len(x)) < 0.3, SCORE] = 0.0
        return x, y

    # the planted point mass is found where the shares are released rounded ...
    found = [f for f in decide(check_profile(federation(point_mass, DEFAULT_POLICY))) if f.significant]
    assert any(f.kind == "point_mass" and f.site == BROKEN and f.feature == "score" for f in found)
    # ... and under noise at ε = 1 its shares are noise: not tested, with the reason; nothing a share made is reported
    findings = decide(check_profile(federation(point_mass, Policy(dp_epsilon=1.0))))
    assert not [f for f in findings if f.significant and f.kind in SHARE_CHECKS]
    cell = next(f for f in findings if f.kind == "point_mass" and f.site == BROKEN and f.feature == "score")
    assert cell.untestable == NOISY.format(epsilon=1.0)


def test_the_check_up_says_what_the_noise_leaves_untested():
    from dashboard.presenters.checkup_view import sharing_note
    note = sharing_note(federation(policy=Policy(dp_epsilon=1.0)))
    assert "5 site(s) added noise" in note and "too noisy to test are not testable" in note
    assert "added noise" not in sharing_note(federation(policy=DEFAULT_POLICY))
