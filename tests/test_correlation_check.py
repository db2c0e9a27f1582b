"""The correlation check (`Checks.correlation`) where sites differ in how tightly their features go
together, as vehicle's sensors do (the same features' median |r| 0.06 at one sensor, 0.99 at
another). A channel replaced by noise at a tight site then has correlations that a loose site has
too: measured against the other sites' correlations alone (the projection) it does not stand out.
Against its own partners' correlations among themselves at the site it does. Known answers: the
two statistics by hand on a small matrix; a noise channel at a tight site is found there, and only
there, by the partners' test, where the projection alone cannot find it; on federations without a
problem the check's p-values are not below 5 % more often than 5 % of the time."""

from __future__ import annotations

import numpy as np
import pytest

from fedcore.interpret.calibration import leave_one_out, one_sided
from fedcore.interpret.data_checks import against_partners, check_profile, either_test, others_median
from fedcore.interpret.findings import decide
from fedcore.interpret.profile import profile_federation

SITES = [f"sensor {k:02d}" for k in range(12)]
BROKEN = "sensor 02"
FEATURES = ["f1", "f2", "f3", "f4", "f5", "speed"]
ROWS = 300
# how much of each channel is the sensor's shared factor t: r between two channels is t² / (t² + 1)
TIGHTNESS = np.array([3.0, 0.25, 3.0, 2.0, 2.5, 0.2, 2.0, 3.0, 0.3, 2.5, 0.25, 2.0])


def rows_of(rng: np.random.Generator, tightness: float) -> tuple[np.ndarray, np.ndarray]:
    """Five channels of one factor (r between two of them t² / (t² + 1): 0.04 to 0.9 by sensor, a
    third of the sensors loose) and one unrelated measurement."""
    y = rng.integers(0, 2, ROWS)
    factor = rng.normal(0, 1, (ROWS, 1))
    channels = 10 + tightness * factor + rng.normal(0, 1, (ROWS, 5))
    return np.column_stack([channels, 60 + 10 * rng.normal(0, 1, ROWS)]), y


def noise_channel(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    x = x.copy()
    x[:, 0] = rng.normal(x[:, 0].mean(), x[:, 0].std(), len(x))  # f1: its mean and SD, no relation left
    return x


def federation(problem=None, seed: int = 0, policy=None):
    rng = np.random.default_rng(seed)
    rows = []
    for name, tightness in zip(SITES, TIGHTNESS):
        x, y = rows_of(rng, tightness)
        if name == BROKEN and problem is not None:
            x = problem(x, rng)
        rows.append((name, x, y))
    return profile_federation(rows, FEATURES, ["continuous"] * len(FEATURES), FEATURES, ["off", "on"], {}, policy)


def correlation_cells(profile) -> list:
    return [f for f in decide(check_profile(profile)) if f.kind == "correlation"]


def test_the_two_statistics_by_hand():
    """Three features at two sites: feature 0's partners are 1 and 2 (the used mask). Its own
    statistic is the mean Fisher z of r(0, 1) and r(0, 2), each signed as the other sites' r; its
    partners' is the Fisher z of r(1, 2), signed as theirs."""
    r = np.array([[[1.0, 0.5, -0.6], [0.5, 1.0, -0.9], [-0.6, -0.9, 1.0]],
                  [[1.0, 0.1, 0.2], [0.1, 1.0, -0.8], [0.2, -0.8, 1.0]]])
    reference = np.array([[[1.0, 0.7, -0.7], [0.7, 1.0, -0.8], [-0.7, -0.8, 1.0]]] * 2)
    used = np.zeros(r.shape, dtype=bool)
    used[:, 0, [1, 2]] = True
    own, among = against_partners(r, reference, used)
    z = np.arctanh
    assert own[0, 0] == pytest.approx((z(0.5) + z(0.6)) / 2)  # r(0, 2) = -0.6 where the others' is negative
    assert own[1, 0] == pytest.approx((z(0.1) - z(0.2)) / 2)  # +0.2 against the others' sign: a reversal
    assert among[0, 0] == pytest.approx(z(0.9)) and among[1, 0] == pytest.approx(z(0.8))
    assert np.isnan(own[:, 1:]).all() and np.isnan(among[:, 1:]).all()  # no partners: nothing to compare
    # a pair the other sites did not release has no sign to read the site's r by: left out, not 0
    reference[:, [1, 2], [2, 1]] = np.nan
    own_again, among = against_partners(r, reference, used)
    assert np.isnan(among[:, 0]).all() and np.array_equal(own_again, own, equal_nan=True)


def test_either_test_is_the_smaller_p_times_the_tests_made():
    p = either_test(np.array([0.01, 0.3, np.nan, np.nan]), np.array([0.2, 0.02, 0.04, np.nan]))
    assert p[:3] == pytest.approx([0.02, 0.04, 0.04]) and np.isnan(p[3])
    assert either_test(np.array([0.7]), np.array([0.6]))[0] == 1.0  # never above 1


def test_a_noise_channel_at_a_tight_sensor_is_found_there_only():
    profile = federation(noise_channel)
    cells = correlation_cells(profile)
    found = [(f.site, f.feature) for f in cells if f.significant and f.material and f.explained_by is None]
    assert found == [(BROKEN, "f1")], [(f.site, f.feature, f"{f.q:.2g}") for f in cells if f.significant]
    (cell,) = [f for f in cells if (f.site, f.feature) == (BROKEN, "f1")]
    # its partners still go together there as the sensor's factor makes them: 9 / 10
    assert cell.evidence["partners_r"] == pytest.approx(0.9, abs=0.03)
    assert f"still go together there ({cell.evidence['partners_r']:+.2f} among them)" in cell.message
    assert cell.effect < 0.2  # its correlations a small share of the others'


def test_the_projection_alone_cannot_set_it_apart_from_the_loose_sensors():
    """What the check did before it compared a channel with its own partners: the loose sensors'
    correlations are as small a share of the others' as the noise channel's."""
    profile = federation(noise_channel)
    r = profile.correlation
    reference = others_median(r)
    used = (np.abs(reference) >= 0.3) & ~np.eye(r.shape[1], dtype=bool)[None] & np.isfinite(r)
    weight = np.where(used, reference, 0.0)
    with np.errstate(invalid="ignore"):  # the unrelated measurement has no partners
        projection = (np.where(used, r, 0.0) * weight).sum(2) / (weight**2).sum(2)
    p_projection = one_sided(*leave_one_out(projection)[1:], -1)
    assert p_projection[SITES.index(BROKEN), 0] > 0.05
    own, among = against_partners(r, reference, used)
    assert one_sided(*leave_one_out(own - among)[1:], -1)[SITES.index(BROKEN), 0] < 1e-4


def test_without_a_problem_the_p_values_are_not_too_small():
    """30 federations × 12 sensors × 5 channels: the share of p < 5 % (and < 1 %) is at most what
    a calibrated null gives (the smaller of two p-values, doubled: conservative)."""
    p = np.array([f.p for seed in range(30) for f in check_profile(federation(seed=200 + seed))
                  if f.kind == "correlation" and f.tested])
    assert len(p) == 30 * 12 * 5
    assert np.mean(p < 0.05) <= 0.06 and np.mean(p < 0.01) <= 0.015


def test_one_row_far_out_breaks_a_sites_pearson_correlations_not_its_ranks_and_is_no_finding():
    """A tight sensor with one glitch: f1 at 1000 SDs in one row of its 300. Its Pearson r of f1 with
    the other channels falls to about 0 (one row holds nearly all of f1's variance); its rank
    correlations move by about 1/300, and the check, which reads the ranks, finds nothing there
    (rows dealt to sites at random from vehicle's data, which holds such rows, made 95 such findings:
    benchmarks/random_split_null.py)."""
    def glitch(x, rng):
        x = x.copy()
        x[7, 0] = x[:, 0].mean() + 1000 * x[:, 0].std()
        return x

    profile = federation(glitch)
    i, others = SITES.index(BROKEN), [k for k in range(len(SITES)) if SITES[k] != BROKEN]
    assert np.abs(profile.correlation[i, 0, 1:5]).max() < 0.1  # the Pearson correlations are gone
    tight = [k for k in others if TIGHTNESS[k] >= 2.0]
    assert np.median(profile.correlation[tight, 0, 1:5]) > 0.7
    # the ranks: as tight as at the other tight sensors
    assert profile.rank_correlation[i, 0, 1:5].min() > 0.75
    cells = {f.feature: f for f in correlation_cells(profile) if f.site == BROKEN}
    assert not (cells["f1"].significant and cells["f1"].material)
    # the same sensor with the channel replaced by noise is still found (the check still has its power)
    assert [(f.site, f.feature) for f in correlation_cells(federation(noise_channel))
            if f.significant and f.material and f.explained_by is None] == [(BROKEN, "f1")]
