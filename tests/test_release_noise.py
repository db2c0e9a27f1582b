"""What a release's differential-privacy noise adds to the statistics the data lens reads
(`fedcore/interpret/release_noise.py`). Known answers: the read-off weights against the release's
own read-off, the clipping width of normal values, the variance of a released median and of
class means against many releases of the same rows, and a group's variance against the product's
own noisy blocks; without noise every variance is 0."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import special

from fedcore.interpret import disclosure
from fedcore.interpret.data_checks import MEDIAN
from fedcore.interpret.disclosure import DP_SHARES, Policy
from fedcore.interpret import profile as profile_module
from fedcore.interpret.profile import PROBABILITIES, profile_federation
from fedcore.interpret.release_noise import class_noise, clipping_width, group_noise, quantile_variance

FEATURES = ["a", "b"]


def test_the_read_off_weights_are_the_releases_read_off():
    rng = np.random.default_rng(1)
    for n in (10, 25, 137, 400):
        starts = disclosure.block_starts(n, 10)
        means = np.sort(rng.normal(0, 1, (len(starts) - 1, 3)), axis=0)
        direct = disclosure._read_off(disclosure.block_probabilities(starts, n), means, PROBABILITIES)
        weights = disclosure.read_off_weights(starts, PROBABILITIES)
        assert np.allclose(np.nan_to_num(direct), weights @ means, atol=1e-12)
        assert np.array_equal(np.isnan(direct[:, 0]), weights.sum(1) == 0)


def test_the_clipping_width_of_normal_quantiles_is_the_outer_blocks_span():
    n = 400  # 20 blocks of 20: the outer blocks' centres where the lowest 5 % of normal values average
    centres = disclosure.block_probabilities(disclosure.block_starts(n, 10), n)
    inside = (PROBABILITIES >= centres[0]) & (PROBABILITIES <= centres[-1])  # as released: none beyond
    quantiles = np.where(inside, special.ndtri(PROBABILITIES), np.nan)[:, None]
    assert clipping_width(quantiles, n, 10)[0] == pytest.approx(2 * special.ndtri(centres[-1]), rel=1e-9)


def sites(seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [(f"s{k}", rng.normal(0, 1, (n, 2)), rng.integers(0, 2, n)) for k, n in enumerate((200, 200, 60))]


def releases(rows, policy, count, monkeypatch=None):
    """`count` releases of the same rows; with `monkeypatch`, their noise drawn from one seeded
    generator (the product draws it from the operating system's entropy), so a test reads the same."""
    if monkeypatch is not None:
        generator = np.random.default_rng(5)
        seeded = lambda x, policy: (lambda noise: noise and replace(noise, rng=generator))(  # noqa: E731
            disclosure.dp_noise(x, policy))
        monkeypatch.setattr(profile_module, "dp_noise", seeded)
    return [profile_federation(rows, FEATURES, ["continuous"] * 2, FEATURES, ["no", "yes"], policy=policy)
            for _ in range(count)]


def test_without_noise_nothing_is_added():
    profile = releases(sites(), Policy(), 1)[0]
    assert not quantile_variance(profile, lambda q, rows: q[:, MEDIAN], [0, 1]).any()
    assert not any(a.any() for a in class_noise(profile))


def test_a_median_and_class_means_vary_across_releases_as_predicted(monkeypatch):
    # ε large enough that the noise is small beside the blocks' spacing (the release sorts its noisy
    # block means, which the first-order variance leaves out), small enough to measure
    rows, policy = sites(), Policy(dp_epsilon=200.0)
    profiles = releases(rows, policy, 1000, monkeypatch)
    predicted = quantile_variance(profiles[0], lambda q, rows: q[:, MEDIAN], [0])[:, 0]
    measured = np.var([p.quantiles[:, MEDIAN, 0] for p in profiles], axis=0)
    # the sites of 200 to a fifth; the site of 60 (6 blocks, its width read off fewer quantiles, its
    # noisy means more often sorted and clipped) to first order only
    assert predicted[:2] == pytest.approx(measured[:2], rel=0.2)
    assert 0.5 < predicted[2] / measured[2] < 2
    # by hand for the sites of 200: the median halfway between two blocks of 10, each mean's noise of
    # SD √2 · width / (10 ε′): half of each
    epsilon = 200.0 / (DP_SHARES * 2)
    width = clipping_width(profiles[0].quantiles[0][:, [0]], 200, 10)[0]
    assert predicted[0] == pytest.approx(2 * 0.25 * 2 * (width / (10 * epsilon)) ** 2, rel=0.02)
    means, _ = class_noise(profiles[0])
    measured = np.var([p.mean_by_class[:, :, 0] for p in profiles], axis=0)
    # to first order: the clipping width read off noisy, clipped quantiles runs some 10 % short
    assert means[:2, :, 0] == pytest.approx(measured[:2], rel=0.4)
    assert (0.5 < means[2, :, 0] / measured[2]).all() and (means[2, :, 0] / measured[2] < 2).all()
    assert (means[2, :, 0] > means[0, :, 0]).all()  # the small site's classes carry more
    # a class's variance, with its range's middle read off noisy quantiles (a few hundredths off,
    # where a class mean 0.05 from it weighs the mean's noise): within a factor of 2.5
    _, variances = class_noise(profiles[0])
    measured = np.var([p.sd_by_class[:, :, 0] ** 2 for p in profiles], axis=0)
    assert (0.4 < variances[:2, :, 0] / measured[:2]).all() and (variances[:2, :, 0] / measured[:2] < 2.5).all()


@pytest.mark.parametrize("centre", [0.0, 0.3, 0.6])
def test_a_groups_variance_varies_across_releases_as_predicted(centre):
    # known answer: 108 values clipped to ±1.8, released 4000 times by the product's own noisy
    # blocks; the variance (S − n (m − c)²) / (n − 1) carries the sum of squares' Laplace noise,
    # 2 b² / (n − 1)², and the mean's through 2 n (m − c) / (n − 1)
    x = np.sort(np.random.default_rng(0).normal(centre, 1, (108, 1)), axis=0)
    low, high, epsilon = np.array([-1.8]), np.array([1.8]), 8.0
    starts = disclosure.block_starts(108, 10)
    generator = np.random.default_rng(1)
    released = [disclosure._noisy_blocks(x, starts, np.diff(starts), disclosure.Noise(epsilon, low, high, generator),
                                         np.array([0])) for _ in range(4000)]
    mean, variance = group_noise(high - low, np.clip(x, low, high).mean(0), 108, 10, epsilon)
    sizes = np.diff(starts)
    assert mean[0] == pytest.approx(np.var([(np.clip(m[:, 0], low, high) * sizes).sum() / 108 for m, _ in released]),
                                    rel=0.1)
    assert variance[0] == pytest.approx(np.var([sd[0] ** 2 for _, sd in released]), rel=0.1)
