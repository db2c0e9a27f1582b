"""What a site's size does to the statistics of its released quantiles (`fedcore.interpret.sampling`):
drawn from the sites' common distribution, released as the site's policy releases that many values.
Known answers: the common quantiles by hand, the draws' mean and SD, normal theory's sampling
variances at a large unprotected site (the median's π/2, Bowley skew's 1.84), a site of one block
reading its mean (variance 1/n, log SD 1/(2(n − 1))), a skewed population's small-site offset and
a far-out tail's variance against the product's own release of rows drawn so, the floor on the
others' spread by hand, a skewed statistic's two sides, and the kurtosis of a fenced distribution
by integration."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special, stats

from fedcore.interpret import sampling
from fedcore.interpret.calibration import leave_one_out
from fedcore.interpret.data_checks import MEDIAN, QUANTILE_STATISTICS, Checks, as_ratio
from fedcore.interpret.disclosure import DEFAULT_POLICY
from fedcore.interpret.profile import PROBABILITIES, profile_federation

SCORES = special.ndtri(PROBABILITIES)


def moments(rows: list[tuple[str, np.ndarray, np.ndarray]], policy=DEFAULT_POLICY) -> tuple[Checks, dict]:
    features = [f"x{k}" for k in range(rows[0][1].shape[1])]
    profile = profile_federation(rows, features, ["continuous"] * len(features), features, ["no", "yes"],
                                 policy=policy)
    checks = Checks(profile)
    cols = np.asarray(checks.continuous)
    return checks, sampling.sampling_moments(profile, cols, checks.yardstick[cols],
                                             checks.reference_quantiles[:, :, cols], QUANTILE_STATISTICS)


def sites(sizes: list[int], features: int, values=lambda rng, n, k: rng.normal(0, 1, (n, k)), seed: int = 0):
    rng = np.random.default_rng(seed)
    return [(f"site {i}", values(rng, n, features), rng.integers(0, 2, n)) for i, n in enumerate(sizes)]


def test_the_common_quantiles_are_the_median_over_sites_continued_in_normal_scores_by_hand():
    # three sites on parallel lines a + 2z; the 1 % quantile released by none: on the line through
    # the two nearest released (the middle site's 5 % and 10 %)
    lines = [(0.0, 2.0), (1.0, 2.0), (5.0, 2.0)]
    quantiles = np.stack([(a + b * SCORES)[:, None] for a, b in lines])
    quantiles[:, 0] = np.nan
    common = sampling.common_quantiles(quantiles)
    assert common[1:, 0] == pytest.approx(1.0 + 2.0 * SCORES[1:])  # the median site's, quantile by quantile
    assert common[0, 0] == pytest.approx(1.0 + 2.0 * SCORES[0])
    # a quantile that would decrease is held at the one below it
    bent = quantiles.copy()
    bent[:, 5] = -100.0
    assert np.all(np.diff(sampling.common_quantiles(bent)[:, 0]) >= 0)


def test_the_draws_follow_the_common_distribution_and_its_far_share():
    common = (1.0 + 2.0 * SCORES)[:, None]
    x = sampling.draw(common, 2000, np.random.default_rng(1))
    assert x.mean() == pytest.approx(1.0, abs=0.02)
    assert x.std() == pytest.approx(2.0, rel=0.02)
    far = sampling.draw(common, 2000, np.random.default_rng(1), np.array([[0.01], [0.06]]))
    assert (far == sampling.FAR).mean() == pytest.approx(0.06, abs=0.003)
    assert (far == -sampling.FAR).mean() == pytest.approx(0.01, abs=0.002)


def test_a_large_unprotected_site_has_normal_theorys_sampling_variances():
    checks, drawn = moments(sites([400] * 6, 40), policy=None)
    n = 400
    location, skew = (n * drawn[name].variance for name in ("location", "skew"))
    scale = checks.yardstick[checks.continuous]  # the location is in the yardstick's SDs (1 here, nearly)
    assert np.mean(location * scale**2) == pytest.approx(math.pi / 2, rel=0.1)  # the sample median's
    assert np.mean(skew) == pytest.approx(1.839, rel=0.12)  # Bowley's quartile skewness
    # the log of a robust SD from central widths: less efficient than the plain SD's 1/2, more than the IQR's
    iqr = 2 * stats.norm.ppf(0.75)
    log_iqr = (2 * 0.25 * 0.75 - 2 * 0.25 * 0.25) / (stats.norm.pdf(stats.norm.ppf(0.75)) ** 2) / iqr**2
    assert 0.5 < np.mean(n * drawn["spread"].variance) < log_iqr
    for name in drawn:  # every site at the largest size drawn: no offset
        assert np.all(drawn[name].offset == 0)


def test_a_site_of_one_block_reads_its_mean_and_its_plain_sd():
    # a site of 15 rows releases one block (`disclosure`): its median is its mean, variance 1/15 for
    # unit-SD values, and its spread the log of its plain SD, variance about 1/(2·14)
    checks, drawn = moments(sites([15] + [300] * 5, 40))
    scale = checks.yardstick[checks.continuous]
    assert np.mean(drawn["location"].variance[0] * scale**2) == pytest.approx(1 / 15, rel=0.1)
    assert np.mean(drawn["spread"].variance[0]) == pytest.approx(1 / 28, rel=0.15)
    assert np.mean(np.abs(drawn["location"].offset[0])) < 0.05  # symmetric values: no offset to speak of


def skewed(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """Lognormal values (σ 1): 2 to 4 % of them beyond the far-out fences of a site of 300."""
    return np.exp(rng.normal(0, 1.0, (n, k)))


def released_location(n: int, repeats: int, seed: int) -> np.ndarray:
    """The product's own release of `repeats` groups of n skewed rows: each group's median (row)."""
    rows = sites([n] * repeats, 1, skewed, seed)
    profile = profile_federation(rows, ["x0"], ["continuous"], ["x0"], ["no", "yes"])
    return profile.quantiles[:, MEDIAN, 0]


def robust(values: np.ndarray) -> tuple[float, float]:
    """The mean and the squared half-width of the middle 68 % (`sampling.ROBUST`)."""
    low, high = np.percentile(values, sampling.ROBUST)
    return float(values[(values >= low) & (values <= high)].mean()), float(((high - low) / 2) ** 2)


def test_a_small_site_of_a_skewed_population_is_drawn_as_the_site_releases_it(monkeypatch):
    # known by construction: 17-row groups drawn from the population and released by the product
    checks, drawn = moments(sites([17] + [300] * 8, 1, skewed, seed=3))
    scale = checks.yardstick[checks.continuous][0]
    small, spread = robust(released_location(17, 400, seed=4) / scale)
    large, _ = robust(released_location(300, 60, seed=5) / scale)
    assert drawn["location"].variance[0, 0] == pytest.approx(spread, rel=0.25)
    # its median is the mean of its fenced values, well above the median a large site reads
    assert drawn["location"].offset[0, 0] == pytest.approx(small - large, rel=0.2)
    assert drawn["location"].offset[0, 0] > 0.3
    # without the far share the draws stop at the large sites' fences, where a small site's own
    # fences (from its own quartiles) often reach further: a third of the variance is missed
    monkeypatch.setattr(sampling, "far_shares", lambda share, above: np.zeros((2, share.shape[1])))
    _, without = moments(sites([17] + [300] * 8, 1, skewed, seed=3))
    assert without["location"].variance[0, 0] < 0.8 * spread


def test_the_other_sites_spread_is_taken_as_no_less_than_their_own_by_hand():
    values = np.array([0.0, 0.0, 0.0, 0.0, 1.0])[:, None]
    least = np.full((5, 1), 0.25)
    _, t, _ = leave_one_out(values, moderate=False, least_variance=least)
    # the four others agree exactly: their spread 0, taken as 0.25; t = 1 / √(0.25 · (1 + 1/4))
    assert t[4, 0] == pytest.approx(1 / math.sqrt(0.25 * 1.25))
    _, t_without, _ = leave_one_out(values + np.array([[0.1], [-0.1], [0.1], [-0.1], [0.0]]), moderate=False)
    _, t_with, _ = leave_one_out(values + np.array([[0.1], [-0.1], [0.1], [-0.1], [0.0]]), moderate=False,
                                 least_variance=least)
    assert abs(t_with[4, 0]) < abs(t_without[4, 0])  # 0.013 of their own spread: 0.25 instead


def test_the_far_shares_are_the_sites_median_on_each_side_by_hand():
    share, above = np.array([[0.1], [0.2], [0.3]]), np.array([[0.1], [0.0], [0.3]])
    # above: median of 0.1, 0, 0.3; below: median of 0, 0.2, 0
    assert sampling.far_shares(share, above) == pytest.approx(np.array([[0.0], [0.1]]))
    # a profile recorded before the side was shared: half of the median share on each side
    assert sampling.far_shares(share, np.full((3, 1), np.nan)) == pytest.approx(np.array([[0.1], [0.1]]))


def test_small_sites_are_compared_on_what_they_read_at_their_size(monkeypatch):
    # sites of 15 rows release their mean as their median: of lognormal values, 0.4 within-site
    # SDs above a large site's median. Eight such among eight of 300, nothing differing: with the
    # offset each group's deviations centre on 0; without it the small sites sit high, the large low
    def mean_deviation(seed: int) -> tuple[float, float]:
        rows = sites([15] * 8 + [300] * 8, 6, skewed, seed)
        features = [f"x{k}" for k in range(6)]
        profile = profile_federation(rows, features, ["continuous"] * 6, features, ["no", "yes"])
        deviation = Checks(profile)._values["location_dev"]
        return float(np.nanmean(deviation[:8])), float(np.nanmean(deviation[8:]))

    for seed in range(3):
        small, large = mean_deviation(seed)
        assert abs(small) < 0.1 and abs(large) < 0.1
    drawn = sampling.sampling_moments
    monkeypatch.setattr("fedcore.interpret.data_checks.sampling_moments", lambda *args: {
        name: moments._replace(offset=np.zeros_like(moments.offset)) for name, moments in drawn(*args).items()})
    for seed in range(3):
        small, large = mean_deviation(seed)
        assert small > 0.15 and large < -0.15


def test_a_statistic_some_draws_cannot_give_is_left_out_of_them():
    # a log of the median above a line that a small group's median falls below now and then (−inf
    # there) and a large group's never: the draws that cannot give it are left out, not averaged
    # into an offset of −inf (which nan_to_num had made −1.8e308, and a message's exp overflow)
    def statistics(q: np.ndarray, sd: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(q[:, MEDIAN] + 0.3, 0.0))

    checks, _ = moments(sites([12] * 4 + [300] * 6, 3))
    cols = np.asarray(checks.continuous)
    drawn = sampling.sampling_moments(checks.profile, cols, checks.yardstick[cols],
                                      checks.reference_quantiles[:, :, cols], {"log": statistics})
    offset, variance = drawn["log"].offset, drawn["log"].variance
    assert np.all(np.isfinite(offset)) and np.all(np.abs(offset[:4]) < 1)
    assert np.all(np.isfinite(variance[:4]))


def test_a_log_ratio_beyond_what_a_float_holds_is_an_infinite_ratio():
    assert as_ratio(math.log(2)) == pytest.approx(2)
    assert as_ratio(1000.0) == math.inf and as_ratio(-1000.0) == 0.0
    assert math.isnan(as_ratio(float("nan")))


def test_a_count_the_site_withheld_gives_a_message_without_its_size():
    checks, _ = moments(sites([15] + [300] * 5, 2, skewed))
    checks.profile.arrays["observed"] = checks.profile.observed.astype(float)
    checks.profile.arrays["observed"][0, 0] = np.nan
    assert checks._at_its_size(0, 0, "location") == ""
    assert "a site of 15 values" in checks._at_its_size(0, 1, "location")


def test_the_fenced_kurtosis_by_hand():
    # normal: 3; uniform: 9/5; Laplace (b = 1) held at its far-out fences, the quartiles ± ln 2 less and
    # plus 3 interquartile ranges (± 7 ln 2): E x⁴ / (E x²)² of the held values, by integration
    def at(quantile) -> np.ndarray:
        return np.asarray(quantile(PROBABILITIES), dtype=float)[:, None]

    assert sampling.fenced_kurtosis(at(stats.norm.ppf))[0] == pytest.approx(3.0, abs=0.02)
    assert sampling.fenced_kurtosis(at(stats.uniform.ppf))[0] == pytest.approx(1.8, abs=0.03)
    fence = 7 * math.log(2)
    beyond = math.exp(-fence)  # the share of values beyond either fence
    second = integrate.quad(lambda x: x**2 * math.exp(-x), 0, fence)[0] + fence**2 * beyond
    fourth = integrate.quad(lambda x: x**4 * math.exp(-x), 0, fence)[0] + fence**4 * beyond
    laplace = sampling.fenced_kurtosis(at(stats.laplace.ppf))[0]
    assert laplace == pytest.approx(fourth / second**2, rel=0.03)  # the quantiles' lines between them
    assert laplace < 5.0  # the fences hold it well below the unfenced 6
    assert math.isnan(sampling.fenced_kurtosis(np.zeros((len(PROBABILITIES), 1)))[0])  # no spread


def test_each_side_of_a_statistics_mean_has_its_own_variance():
    # by construction the two sides' variances average to the variance; a median of normal values is
    # symmetric; e^(3 × median) of 13 normal values is skewed to the right, its negative to the left
    checks, drawn = moments(sites([13] + [300] * 6, 8))
    cols = np.asarray(checks.continuous)
    skewed_both_ways = sampling.sampling_moments(
        checks.profile, cols, checks.yardstick[cols], checks.reference_quantiles[:, :, cols],
        {"right": lambda q, sd: np.exp(3 * q[:, MEDIAN]), "left": lambda q, sd: -np.exp(3 * q[:, MEDIAN])})
    for moments_of in (*drawn.values(), *skewed_both_ways.values()):
        finite = np.isfinite(moments_of.variance)
        assert ((moments_of.below + moments_of.above) / 2)[finite] == pytest.approx(moments_of.variance[finite])
    location = drawn["location"]
    assert 0.7 < np.mean(location.below[0] / location.above[0]) < 1.4
    right, left = skewed_both_ways["right"], skewed_both_ways["left"]
    assert np.all(right.above[0] > 1.5 * right.below[0]) and np.all(left.below[0] > 1.5 * left.above[0])


def test_a_site_is_tested_on_the_side_of_the_others_it_lies_on(monkeypatch):
    # the drawn variances set by hand: every site's below 4 and above 1, its variance 2.5; a site
    # lying below the others' mean adds 4 − 2.5, one above them nothing (1 < 2.5)
    drawn = sampling.sampling_moments

    def set_by_hand(*args):
        out = {}
        for name, moments_of in drawn(*args).items():
            full = np.ones_like(moments_of.variance)
            out[name] = sampling.Moments(np.zeros_like(full), 4.0 * full, 1.0 * full)
        return out

    monkeypatch.setattr("fedcore.interpret.data_checks.sampling_moments", set_by_hand)
    checks, _ = moments(sites([300] * 6, 3))
    v = checks._values
    below = v["log_sd"] < np.array([[np.mean(np.delete(v["log_sd"][:, c], i)) for c in range(3)] for i in range(6)])
    assert below.any() and (~below).any()
    assert v["spread_own"] == pytest.approx(np.where(below, 4.0 - 2.5, 0.0))  # (the default policy adds no noise)
    assert v["spread_least"] == pytest.approx(np.full((6, 3), 2.5))


def test_rank_correlations_drawn_at_a_sites_size_have_their_known_moments():
    """`rank_correlation_moments` on known answers: independent columns' rank correlation over n
    rows has mean 0 and variance 1 / (n - 1), so its square's offset at 16 rows is 1/15 - 1/199
    (the mean at LARGEST = 200 less); a site beyond LARGEST has the variance at LARGEST scaled by
    LARGEST / n; the Gaussian copula keeps a common rank correlation of 0.5 as the draws' mean;
    with every site at LARGEST or more nothing is drawn."""
    m = 20
    independent = np.eye(m)
    first_row = {"r": lambda x, common: x[..., 0, :], "square": lambda x, common: x[..., 0, :] ** 2}
    drawn = sampling.rank_correlation_moments(independent, np.array([16.0, 400.0, 200.0]), first_row)
    r, square = drawn["r"], drawn["square"]
    others = slice(1, None)  # column 0's correlation with itself is 1 at any size
    assert np.mean(r.variance[0, others]) == pytest.approx(1 / 15, rel=0.15)
    assert np.mean(r.variance[2, others]) == pytest.approx(1 / 199, rel=0.15)
    assert r.variance[1, others] == pytest.approx(r.variance[2, others] * 200 / 400)
    assert np.mean(r.offset[0, others]) == pytest.approx(0.0, abs=0.02)
    assert np.mean(square.offset[0, others]) == pytest.approx(1 / 15 - 1 / 199, rel=0.15)
    assert (square.offset[1:] == 0).all()  # at LARGEST and beyond: no offset
    half = np.full((m, m), 0.5)
    np.fill_diagonal(half, 1.0)
    draws = sampling.draw_rank_correlations(sampling.copula_factor(half), 200, np.random.default_rng(0))
    assert np.mean(draws[:, 0, others]) == pytest.approx(0.5, abs=0.01)  # Pearson 2 sin(π/12) = 0.518 drawn
    nothing = sampling.rank_correlation_moments(independent, np.array([200.0, 500.0]), first_row)["r"]
    assert np.isnan(nothing.variance).all() and (nothing.offset == 0).all()
