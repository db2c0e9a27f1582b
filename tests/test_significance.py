import numpy as np
import pytest

from fedcore.interpret.significance import deviation_sums, max_single_site_z, significance_marks


def _column(values):
    return np.array(values, dtype=float)[:, None]


def test_one_outlying_site_gets_an_O():
    m = _column([1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 1.03, 0.2])  # 8 sites, last one far off
    marks = significance_marks(m)
    assert marks.cells[:, 0].tolist() == [False] * 7 + [True]
    assert marks.z[7, 0] < -2


def test_sd_floor_suppresses_marks_on_columns_that_barely_vary():
    m = _column([0.0, 0.001, -0.001, 0.0, 0.001, 0.0, -0.001, 0.04])  # outlier, but SD ~0.013
    assert not significance_marks(m).cells.any()
    assert significance_marks(m, sd_floor=0.001).cells[7, 0]


def test_threshold_is_a_parameter():
    m = _column([0, 0, 0, 0, 0, 0, 0, 1.0])  # z of the outlier = sqrt(7) = 2.65
    assert significance_marks(m, n_sd=2.0).cells[7, 0]
    assert not significance_marks(m, n_sd=3.0).cells.any()


def test_x_marks_only_unusually_high_spread():
    rng = np.random.default_rng(0)
    base = rng.normal(0, 0.1, size=(10, 12))  # 12 features with similar spread
    high = base.copy()
    high[:, 3] *= 20  # feature 3 varies far more across sites than the others
    assert significance_marks(high).features.tolist() == [j == 3 for j in range(12)]
    low = base.copy()
    low[:, 5] = 0.0  # unusually LOW spread is not significant (signed rule)
    assert not significance_marks(low).features[5]


def test_constant_columns_have_undefined_z_and_no_marks():
    m = np.ones((6, 2))
    marks = significance_marks(m)
    assert not marks.cells.any() and not marks.features.any()
    assert np.isnan(marks.z).all()


def test_with_five_sites_no_single_site_can_pass_two_sd():
    assert max_single_site_z(5) == pytest.approx(2.0)
    m = _column([0, 0, 0, 0, 100.0])
    assert not significance_marks(m).cells.any()
    assert max_single_site_z(6) > 2.0


def test_deviation_sums():
    m = np.array([[1.0, 0.0], [3.0, 0.0]])
    per_feature, per_site = deviation_sums(m)
    assert per_feature.tolist() == [2.0, 0.0] and per_site.tolist() == [1.0, 1.0]


def test_robust_rule_is_not_masked_by_a_second_far_off_site():
    # Two sites far off in the same column: the SD rule's yardstick widens so much that the
    # milder one (a whole unit below the others) goes unmarked.
    m = _column([1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 0.0, -1.4])
    assert significance_marks(m).cells[:, 0].tolist() == [False] * 7 + [True]
    robust = significance_marks(m, rule="robust")
    assert robust.cells[:, 0].tolist() == [False] * 6 + [True, True]


def test_robust_rule_can_single_out_one_of_four_sites():
    m = _column([0.1, 0.12, 0.09, 0.9])
    assert not significance_marks(m).cells.any()  # impossible with 4 sites and 2 SD
    assert significance_marks(m, rule="robust").cells[:, 0].tolist() == [False, False, False, True]


def test_robust_rule_floor_and_identical_columns():
    # All sites identical but one tiny deviation: below n_sd * floor, not marked.
    m = _column([1.0, 1.0, 1.0, 1.0, 1.0, 1.08])
    assert not significance_marks(m, rule="robust").cells.any()
    # ...a large one is, even though the other sites do not vary at all (MAD 0).
    m = _column([1.0, 1.0, 1.0, 1.0, 1.0, 0.01])
    assert significance_marks(m, rule="robust").cells[5, 0]


def test_robust_x_marks_unusually_wide_features():
    rng = np.random.default_rng(1)
    m = rng.normal(0, 0.1, size=(10, 12))
    m[:, 7] *= 20
    assert significance_marks(m, rule="robust").features.tolist() == [j == 7 for j in range(12)]


def test_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="rule"):
        significance_marks(np.zeros((3, 2)), rule="vibes")
