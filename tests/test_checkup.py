"""The check-up's statistics against known answers: hand-computed p- and q-values, unit conversions
that must (and must not) be named, and every check of the data and model lenses on data built so
that the problem is there or not: each check must fire when its problem is present and stay quiet
when it is absent (the same federation, clean)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fedcore.checkup import check_up
from fedcore.interpret import model_checks
from fedcore.interpret.calibration import benjamini_hochberg, fit_prior, leave_one_out
from fedcore.interpret.data_checks import MEDIAN, Checks, check_profile, weakness_p, without_codes
from fedcore.interpret.findings import decide
from fedcore.interpret.disclosure import DEFAULT_POLICY, Policy
from fedcore.interpret.profile import Profile, profile_federation
from fedcore.interpret.unit_conversions import match_conversion

PROBABILITIES = np.array([0.01, *np.round(np.arange(0.05, 0.951, 0.05), 2), 0.99])


# -- calibration ------------------------------------------------------------------------------------
def test_benjamini_hochberg_by_hand():
    q = benjamini_hochberg(np.array([0.01, 0.04, 0.03, 0.20, np.nan]))
    # sorted 0.01, 0.03, 0.04, 0.20 (m = 4): 0.04, 0.06, 0.0533, 0.20, then the step-up minimum
    assert q[:4] == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.20])
    assert np.isnan(q[4])


def test_leave_one_out_t_by_hand():
    values = np.array([[1.0], [2.0], [3.0], [10.0]])
    deviation, t, p = leave_one_out(values, moderate=False)
    # site 4 against the others (mean 2, SD 1, n - 1 = 3 values): t = 8 / sqrt(1 + 1/3), 2 df
    assert deviation[3, 0] == pytest.approx(8.0)
    assert t[3, 0] == pytest.approx(8 / np.sqrt(4 / 3))
    assert p[3, 0] == pytest.approx(2 * stats.t.sf(8 / np.sqrt(4 / 3), 2))
    # site 1 against 2, 3, 10 (mean 5, SD 4.359)
    assert t[0, 0] == pytest.approx((1 - 5) / (np.std([2, 3, 10], ddof=1) * np.sqrt(4 / 3)))


def test_a_suspect_cell_is_in_no_other_sites_reference_but_is_tested():
    """Per cell: site 4's item 1 is left out of the others' references (site 1 against 2 and 3
    only: mean 2.5, SD 0.707, 1 df) while its item 2 stays in them; site 4 itself is tested against
    the other three as before. A column where every site is suspect keeps every reference."""
    values = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [10.0, 10.0]])
    suspect = np.array([[False, False], [False, False], [False, False], [True, False]])
    deviation, t, p = leave_one_out(values, moderate=False, suspect=suspect)
    assert deviation[0, 0] == pytest.approx(1 - 2.5)
    assert t[0, 0] == pytest.approx(-1.5 / (np.std([2, 3], ddof=1) * np.sqrt(1 + 1 / 2)))
    assert p[0, 0] == pytest.approx(2 * stats.t.sf(1.5 / (np.std([2, 3], ddof=1) * np.sqrt(1.5)), 1))
    assert deviation[0, 1] == pytest.approx(1 - 5)  # item 2: site 4 still in the reference
    assert t[3, 0] == pytest.approx(8 / np.sqrt(4 / 3))  # site 4 tested against the other three
    everyone = leave_one_out(values, moderate=False, suspect=np.ones((4, 2), dtype=bool))
    plain = leave_one_out(values, moderate=False)
    assert all(np.allclose(a, b) for a, b in zip(everyone, plain))


def test_sites_that_tie_differ_by_nothing():
    """Six sites with the same value (a share of 0 everywhere, as a logit): sums of squares leave
    rounding (8.9e-16) that, divided by a rounding-sized SD, would make every site 'significant'
    (p 1e-9). Ties are no deviation: t 0, p 1."""
    values = np.column_stack([np.full(6, np.log(0.5 / 400.5)), np.full(6, 0.1)])
    for moderate in (False, True):
        deviation, t, p = leave_one_out(values, moderate=moderate)
        assert (deviation == 0).all() and (t == 0).all() and (p == 1).all()


def test_the_prior_of_the_variances_is_recovered():
    rng = np.random.default_rng(1)
    d0, s0 = 8.0, 2.0
    true = d0 * s0 / rng.chisquare(d0, 4000)  # scaled inverse chi-square variances
    sample = true * rng.chisquare(3, 4000) / 3  # each seen through 3 degrees of freedom
    fitted_d0, fitted_s0 = fit_prior(sample, 3)
    assert fitted_d0 == pytest.approx(d0, rel=0.25) and fitted_s0 == pytest.approx(s0, rel=0.1)


@pytest.mark.parametrize("n_sites", [4, 8, 30])
def test_leave_one_out_p_values_are_uniform_when_no_site_differs(n_sites):
    """The calibration itself: sites drawn alike (item variances from a prior, as features differ),
    p-values below 0.05 and 0.01 as often as those levels say."""
    rng = np.random.default_rng(n_sites)
    p = []
    for _ in range(300 if n_sites < 30 else 60):
        scale = np.sqrt(1 / rng.gamma(3, 1 / 3, size=40))
        p.append(leave_one_out(rng.normal(0, scale, size=(n_sites, 40)) + rng.normal(0, 1, 40))[2].ravel())
    p = np.concatenate(p)
    assert 0.035 <= (p < 0.05).mean() <= 0.06
    assert 0.005 <= (p < 0.01).mean() <= 0.014


# -- units ------------------------------------------------------------------------------------------
def quantiles(values: np.ndarray) -> np.ndarray:
    return np.quantile(values, PROBABILITIES)


@pytest.mark.parametrize("column, site, others, sd, named", [
    ("temperature", lambda x: x * 9 / 5 + 32, (37.2, 0.8), 0.8, "°F where the others use °C"),
    ("Glucose (fasting)", lambda x: x / 18.016, (100, 20), 20, "mmol/L where the others use mg/dL (glucose)"),
    ("height", lambda x: x / 2.54, (170, 10), 10, "inch where the others use cm"),
    ("weight", lambda x: x / 0.45359237, (75, 12), 12, "lb where the others use kg"),
    ("albumin", lambda x: x * 10, (40, 5), 5, "values 10 times the others'"),
])
def test_a_known_conversion_is_named(column, site, others, sd, named):
    rng = np.random.default_rng(0)
    reference = quantiles(rng.normal(*others, 4000))
    match = match_conversion(column, quantiles(site(rng.normal(*others, 500))), reference, sd)
    assert match is not None and match.conversion is not None and named in match.describe("A", column)


def test_no_conversion_is_named_where_none_happened_or_none_fits():
    rng = np.random.default_rng(0)
    reference = quantiles(rng.normal(100, 20, 4000))
    assert match_conversion("glucose", quantiles(rng.normal(100, 20, 500)), reference, 20) is None  # the same
    assert match_conversion("glucose", quantiles(rng.normal(130, 20, 500)), reference, 20) is None  # an offset
    assert match_conversion("glucose", quantiles(rng.normal(100, 24, 500)), reference, 20) is None  # 1.2 x spread
    # mg/dL -> mmol/L of glucose is for glucose only: another column's factor 1/18 is unexplained
    other = match_conversion("col7", quantiles(rng.normal(100, 20, 500) / 18.016), reference, 20)
    assert other is not None and other.conversion is None and "no known unit conversion" in other.describe("A", "col7")
    # an unknown factor of a positive amount is reported as such
    seven = match_conversion("col7", quantiles(rng.normal(100, 20, 500) * 6.5), reference, 20)
    assert seven.conversion is None and seven.a == pytest.approx(1 / 6.5, rel=0.05)


@pytest.mark.parametrize("seed", range(4))
def test_a_column_shifted_from_others_centred_on_zero_is_shifted_not_in_other_units(seed):
    # a standardised sensor, most of its values near 0 and a wide tail: a 25-row site's column moved
    # up by 9 lands on the others' middle ÷ 100, its spread a hundredth of theirs — a shift, no unit
    # (vehicle, a 25-row sensor: "÷ 100 makes it match")
    names = ["f000", "f001", "f002"]

    def first_site(change) -> list[str]:  # site 0's findings of f000 that no other explains
        rng = np.random.default_rng(seed)
        rows = []
        for k, n in enumerate([25] + [300] * 8):
            x = rng.normal(0, np.where(rng.random((n, 3)) < 0.7, 0.3, 2.0))
            if k == 0:
                x[:, 0] = change(x[:, 0])
            rows.append((f"site {k}", x, rng.integers(0, 2, n)))
        profile = profile_federation(rows, names, ["continuous"] * 3, names, ["no", "yes"])
        return [f.kind for f in decide(check_profile(profile)) if f.site == "site 0" and f.feature == "f000"
                and f.significant and not f.explained_by]  # what the site's cell says, the rest explained by it

    assert first_site(lambda x: x + 9) == ["location"]


# -- the data lens, problem by problem ---------------------------------------------------------------
SITES = [f"site {k}" for k in range(6)]
CONTINUOUS = ["temperature", "age", "glucose", "marker", "score"]
CATEGORIES = ["ward=icu", "ward=med", "ward=surg"]
FEATURES = [*CONTINUOUS, "smoker", *CATEGORIES]
KINDS = ["continuous"] * 5 + ["binary"] + ["categorical"] * 3
COLUMNS = [*CONTINUOUS, "smoker", "ward", "ward", "ward"]
MEANS = np.array([37.2, 55.0, 100.0, 0.0, 5.0])
SDS = np.array([0.8, 15.0, 20.0, 1.0, 2.0])
CLASS_SHIFT = np.array([0.8, 0.6, -0.7, 0.9, 0.5])  # SDs between the classes, per feature


def site_rows(rng: np.random.Generator, rows: int = 400) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 2, rows)
    natural = rng.normal(0, 0.1, 5)  # each site's own small case mix
    continuous = MEANS + SDS * (rng.normal(0, 1, (rows, 5)) + natural + np.outer(y, CLASS_SHIFT))
    smoker = (rng.random(rows) < 0.2 + 0.15 * y).astype(float)
    ward = np.eye(3)[rng.choice(3, rows, p=[0.2, 0.5, 0.3])]
    return np.column_stack([continuous, smoker, ward]), y


def federation(problem=None, seed: int = 0, policy: Policy | None = DEFAULT_POLICY) -> Profile:
    """Six sites of 400 rows, the problem at site 2, profiled as the sites release it at the default
    disclosure policy: every check below is tested at the released resolution (quantiles from
    blocks of at least 10 values, rounded; the 1 and 99 % quantiles not released). `policy` None:
    as computed."""
    rng = np.random.default_rng(seed)
    sites = []
    for k, name in enumerate(SITES):
        x, y = site_rows(rng)
        if k == 2 and problem is not None:
            x, y = problem(x, y, rng)
        sites.append((name, x, y))
    return profile_federation(sites, FEATURES, KINDS, COLUMNS, ["well", "ill"], {"temperature": "°C", "age": "years"},
                              policy)


def findings(profile: Profile):
    return [f for f in decide(check_profile(profile)) if f.significant and f.explained_by is None]


def fahrenheit(x, y, rng):
    x = x.copy()
    x[:, 0] = x[:, 0] * 9 / 5 + 32
    return x, y


def shifted(x, y, rng):
    x = x.copy()
    x[:, 1] += 2 * SDS[1]
    return x, y


def wider(x, y, rng):
    x = x.copy()
    x[:, 4] = MEANS[4] + (x[:, 4] - MEANS[4]) * 3
    return x, y


def missing_code(x, y, rng):
    x = x.copy()
    x[rng.random(len(x)) < 0.2, 2] = 999
    return x, y


def missing_by_class(x, y, rng):
    x = x.copy()
    x[y == 0, 3] = np.nan
    return x, y


def more_missing(x, y, rng):
    x = x.copy()
    x[rng.random(len(x)) < 0.4, 4] = np.nan
    return x, y


def other_codes(x, y, rng):
    """The ward coded with categories no other site uses (a one-hot of six columns, the site's
    mass on the three the others never use)."""
    return x, y  # applied through the federation's feature list below


def flipped(x, y, rng):
    return x, 1 - y


def noisy(x, y, rng):
    y = y.copy()
    relabel = rng.random(len(y)) < 1.0  # labels that say nothing (a column of another meaning?)
    y[relabel] = rng.integers(0, 2, relabel.sum())
    return x, y


def swapped(x, y, rng):
    x = x.copy()
    x[:, [1, 2]] = x[:, [2, 1]]
    return x, y


def skewed(x, y, rng):
    """The same mean and SD, another shape: skewed (as a log-normal quantity)."""
    x = x.copy()
    values = rng.lognormal(0, 1.5, len(x))
    x[:, 3] = CLASS_SHIFT[3] * y + (values - values.mean()) / values.std()
    return x, y


def capped(x, y, rng):
    """Values above a limit recorded as the limit (an export that capped the column)."""
    x = x.copy()
    x[:, 4] = np.minimum(x[:, 4], np.quantile(x[:, 4], 0.4))
    return x, y


@pytest.mark.parametrize("problem, kind, feature", [
    (fahrenheit, "unit", "temperature"),
    (shifted, "location", "age"),
    (wider, "spread", "score"),
    (missing_code, "missing_code", "glucose"),
    (missing_by_class, "missing_by_class", "marker"),
    (more_missing, "missingness", "score"),
    (flipped, "labels_permuted", None),
    (noisy, "labels_weak", None),
    (swapped, "swapped_columns", "age"),
    (skewed, "shape", "marker"),
    (capped, "point_mass", "score"),  # 60 % of the values at the cap: the point mass at its maximum says it
])
def test_each_check_fires_at_the_site_and_feature_with_the_problem(problem, kind, feature):
    found = findings(federation(problem))
    first = [(f.site, f.kind, f.feature) for f in found if f.site == "site 2"][:1]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    assert first and first[0][0] == "site 2" and first[0][1] in kinds and first[0][2] == feature, \
        [(f.site, f.kind, f.feature, f.q) for f in found]
    assert not [f for f in found if f.site != "site 2"], [f.message for f in found if f.site != "site 2"]


@pytest.mark.parametrize("seed", range(5))
def test_no_check_fires_on_a_clean_federation(seed):
    assert findings(federation(seed=seed)) == []


def test_categorical_codes_no_other_site_uses_are_found():
    rng = np.random.default_rng(0)
    features = [*FEATURES, "ward=1", "ward=2", "ward=3"]
    kinds, columns = [*KINDS, "categorical", "categorical", "categorical"], [*COLUMNS, "ward", "ward", "ward"]
    sites = []
    for k, name in enumerate(SITES):
        x, y = site_rows(rng)
        codes = np.zeros((len(x), 3))
        if k == 2:  # this site wrote the ward as 1 / 2 / 3
            x, codes = np.column_stack([x[:, :6], np.zeros((len(x), 3))]), x[:, 6:]
        else:
            x = x
        sites.append((name, np.column_stack([x, codes]), y))
    found = findings(profile_federation(sites, features, kinds, columns, ["well", "ill"]))
    assert [(f.site, f.kind, f.feature) for f in found] == [("site 2", "category_codes", "ward")]
    assert "'1', '2', '3'" in found[0].message and "'icu', 'med', 'surg'" in found[0].message


# -- the model lenses -----------------------------------------------------------------------------------
def test_a_feature_shift_over_replicates_is_found_and_nothing_else():
    rng = np.random.default_rng(3)
    truth = rng.normal(0, 0.05, (10, 20))  # natural differences, the same in every replicate
    replicates = truth + rng.normal(0, 0.05, (4, 10, 20))  # training noise
    replicates[:, 6, 11] += 0.6
    found = [f for f in decide(model_checks.feature_shifts({"b_in": replicates}, [f"s{i}" for i in range(10)],
                                                            [f"f{j}" for j in range(20)])) if f.significant]
    assert [(f.site, f.feature) for f in found] == [("s6", "f11")]
    assert found[0].evidence["replicates"] == 4 and found[0].evidence["replicate_sd"] > 0


def test_a_model_shared_by_all_sites_scoring_below_chance_marks_the_site():
    sites = ["a", "b", "c", "d"]
    found = decide(model_checks.shared_model_auc([0.91, 0.88, 0.07, 0.45], [40, 40, 40, 40], [60, 60, 60, 60], sites))
    assert [f.site for f in found if f.significant] == ["c"]  # 0.45 is within chance of 0.5 with 100 rows


def test_the_output_layer_turned_around_marks_the_site():
    w_out = np.array([[1.1], [0.9], [1.0], [-0.8], [1.05], [0.95]])
    found = decide(model_checks.output_layer(w_out, list("abcdef")))
    assert [f.site for f in found if f.significant] == ["d"]


def test_similarity_and_contribution_mark_the_outlying_site():
    d = np.full((6, 6), 1.0) + np.random.default_rng(0).normal(0, 0.05, (6, 6))
    d = (d + d.T) / 2
    d[4, :] = d[:, 4] = 4.0
    np.fill_diagonal(d, 0)
    assert [f.site for f in decide(model_checks.similarity(d, list("abcdef"))) if f.significant] == ["e"]
    accuracy = [0.82, 0.80, 0.83, 0.81, 0.35, 0.79]
    assert [f.site for f in decide(model_checks.contribution(accuracy, list("abcdef"))) if f.significant] == ["e"]


def test_one_false_discovery_rate_over_every_lens():
    """Findings of all lenses are decided together: a q-value counts every cell tested."""
    profile = federation(fahrenheit)
    result = check_up(profile, {})
    assert [(f.site, f.kind) for f in result.reported] == [("site 2", "unit")]
    assert len(result.findings) > 100 and result.cell("site 2", "data profile").kind == "unit"
    assert result.cell("site 1", "data profile") is None and "data profile" in result.lenses_checked()


def test_a_significant_but_small_difference_is_no_finding():
    """Large, otherwise identical sites: a 0.12-SD shift at one is far beyond sampling noise (tiny
    q-value) yet below what matters (0.25 SD): tested, not reported."""
    rng = np.random.default_rng(5)
    sites = []
    for k in range(6):
        x = rng.normal(0, 1, (20_000, 5))
        if k == 2:
            x[:, 0] += 0.12
        sites.append((f"s{k}", x, rng.integers(0, 2, 20_000)))
    names = [f"f{j}" for j in range(5)]
    result = check_up(profile_federation(sites, names, ["continuous"] * 5, names, ["a", "b"]), {})
    shift = next(f for f in result.findings if (f.site, f.kind, f.feature) == ("s2", "location", "f0"))
    assert shift.q < 0.01 and not shift.material and result.reported == []


def test_a_usual_value_that_is_a_code_elsewhere_is_no_missing_code():
    """0 is common at one site (30 % of a count-like score, 10 % elsewhere) and inside the others'
    range: not a code for 'missing', however significant its excess."""
    def more_zeros(x, y, rng):
        x = x.copy()
        x[rng.random(len(x)) < 0.2, 4] = 0.0
        return x, y

    rng = np.random.default_rng(0)
    sites = []
    for k, name in enumerate(SITES):
        x, y = site_rows(rng)
        x[:, 4] = np.where(rng.random(len(x)) < 0.1, 0.0, np.abs(x[:, 4]))  # a score, 0 for one in ten
        if k == 2:
            x, y = more_zeros(x, y, rng)
        sites.append((name, x, y))
    profile = profile_federation(sites, FEATURES, KINDS, COLUMNS, ["well", "ill"])
    codes = [f for f in decide(check_profile(profile)) if f.kind == "missing_code" and f.site == "site 2"]
    assert codes and codes[0].q < 0.05 and not codes[0].material
    assert not [f for f in findings(profile) if f.kind == "missing_code"]


def test_a_negative_code_in_a_quantity_never_negative_elsewhere_is_a_missing_code():
    """A grey level (0 in a quarter of the rows, SD 50): its others' 5-95 % range less 2 SD reaches
    −100, so −9 lies inside it; but no other site has a quantile below 0, and −9 in 20 % of one
    site's values is a code. The same −9 in a signed column whose values run below 0 everywhere
    is a value, not a code."""
    rng = np.random.default_rng(3)
    sites = []
    for k in range(6):
        level = np.maximum(rng.normal(40, 60, 500), 0.0)
        signed = rng.normal(0, 60, 500)
        if k == 2:
            level[rng.random(500) < 0.2] = -9.0
            signed[rng.random(500) < 0.2] = -9.0
        sites.append((f"s{k}", np.column_stack([level, signed]), rng.integers(0, 2, 500)))
    names = ["level", "signed"]
    profile = profile_federation(sites, names, ["continuous"] * 2, names, ["a", "b"], {}, DEFAULT_POLICY)
    codes = {f.feature: f for f in decide(check_profile(profile))
             if f.kind == "missing_code" and f.site == "s2" and f.evidence["code"] == -9}
    assert codes["level"].material and codes["level"].q < 1e-6
    assert "no other site has a quantile below 0" in codes["level"].message
    assert not codes["signed"].material and "below 0" not in codes["signed"].message


def four_hospitals_rows(seed: int, zero_share: float = 1.0, factor: float = 5.0) -> list:
    """Four hospitals of 250 patients (each its own patient mix, 0.3 SD per feature): h3 records
    cholesterol as 0 for a `zero_share` of its patients (1: never measured; 0.25: a missing code),
    h1 records it in another unit (× `factor`)."""
    rng = np.random.default_rng(seed)
    means, sds = np.array([54.0, 132, 240, 150]), np.array([9.0, 18, 45, 23])
    sites = []
    for k in range(4):
        x = means + sds * (rng.normal(0, 1, (250, 4)) + rng.normal(0, 0.3, 4))
        if k == 3:
            x[: int(round(zero_share * 250)), 2] = 0.0
        if k == 1:
            x[:, 2] *= factor
        sites.append((f"h{k}", x, rng.integers(0, 2, 250)))
    return sites


HOSPITAL_FEATURES = ["age", "trestbps", "chol", "thalach"]


def four_hospitals(seed: int, zero_share: float = 1.0, factor: float = 5.0) -> Profile:
    names = HOSPITAL_FEATURES
    return profile_federation(four_hospitals_rows(seed, zero_share, factor), names, ["continuous"] * 4, names, ["no", "yes"])


def test_a_column_never_measured_at_a_site_is_no_reference_for_the_others():
    """h3's cholesterol (0 for everyone) is reported as one value, and kept out of the other sites'
    references: h1's median is compared with the mean of h0's and h2's medians (not with a mean
    that holds 0), and its factor read against their quantiles is the × 5 put in (≈ × 1/5 back;
    against a reference holding h3's zeros it would read about × 1/7.5). With two references left,
    whether that is significant is another matter (q 0.03-0.15 over seeds)."""
    profile = four_hospitals(0)
    checks = Checks(profile)
    chol = profile.features.index("chol")
    assert checks.not_a_reference[:, chol].tolist() == [False, False, False, True]
    assert not checks.codes_read_as_missing.any()  # its one value, 0, is a code too: but it is in no reference
    medians = profile.quantiles[:, MEDIAN, chol]
    location = next(f for f in check_profile(profile) if (f.site, f.kind, f.feature) == ("h1", "location", "chol"))
    assert location.evidence["others_median"] == pytest.approx((medians[0] + medians[2]) / 2)
    assert location.effect == pytest.approx((medians[1] - (medians[0] + medians[2]) / 2) / checks.yardstick[chol])
    own = next(f for f in check_profile(profile) if (f.site, f.kind, f.feature) == ("h3", "location", "chol"))
    assert np.isfinite(own.p)  # the never-measured site is still tested against the others
    unit = next(f for f in check_profile(profile) if (f.site, f.kind, f.feature) == ("h1", "unit", "chol"))
    assert unit.evidence["a"] == pytest.approx(1 / 5, rel=0.1)
    assert ("h3", "constant", "chol") in {(f.site, f.kind, f.feature) for f in check_up(profile, {}).reported}



def test_a_columns_values_without_its_codes_come_from_its_quantiles():
    """A share s at a code below every value, the rest uniform on [1, 2]: Q(p) = 0 up to s, then
    1 + (p - s) / (1 - s). Without the code the quantiles are 1 + p, exactly where they do not come
    from within `blend` of the code's share (NaN there); a code above the values mirrors it."""
    s = 0.3
    released = np.where(PROBABILITIES < s, 0.0, 1 + (PROBABILITIES - s) / (1 - s))
    out = without_codes(released, s, 0.0, 0.05)
    source = s + PROBABILITIES * (1 - s)
    inside = (source >= s + 0.05) & (source <= 0.99)  # not within the blend, not beyond the 99 % quantile
    assert np.flatnonzero(~inside).tolist() == [0, 1, 20]  # p 0.01, 0.05 and 0.99 (from 0.993)
    assert np.isnan(out[~inside]).all() and np.allclose(out[inside], 1 + PROBABILITIES[inside])
    top = np.where(PROBABILITIES > 1 - s, 9.0, 1 + PROBABILITIES / (1 - s))
    kept, source = without_codes(top, 0.0, s, 0.05), PROBABILITIES * (1 - s)
    inside = (source >= 0.01) & (source <= 1 - s - 0.05)
    assert np.flatnonzero(~inside).tolist() == [0, 19, 20]  # p 0.01 (from 0.007), 0.95 and 0.99
    assert np.isnan(kept[~inside]).all() and np.allclose(kept[inside], 1 + PROBABILITIES[inside])
    assert np.isnan(without_codes(released, 0.6, 0.4, 0.05)).all()  # nothing but codes


def test_a_column_with_a_missing_code_at_a_site_is_compared_without_it():
    """h3 records a quarter of its cholesterol as 0 (a missing code): its 5-25 % quantiles are 0,
    so against a reference holding them no factor maps h1's ÷ 4 quantiles back (the heart
    federation's VA does this). The code is found and material at h3; the other sites are compared
    with h3's values without it (its quantiles read at 0.25 + p·0.75: within 0.15 SD of the
    quantiles of its non-zero rows, as close as a clean site's released quantiles come to its
    rows'); h1's factor reads the ÷ 4 put in (≈ × 4 back), its median
    compared with the mean of h0's, h2's and h3's non-zero median; h3 itself is tested on what it
    released."""
    rows = four_hospitals_rows(0, zero_share=0.25, factor=0.25)
    profile = four_hospitals(0, zero_share=0.25, factor=0.25)
    checks = Checks(profile)
    chol = profile.features.index("chol")
    assert checks.codes_read_as_missing[:, chol].tolist() == [False, False, False, True]
    assert checks.codes_read_as_missing.sum() == 1 and not checks.not_a_reference.any()
    measured = rows[3][1][:, chol][rows[3][1][:, chol] != 0]
    corrected = checks.reference_quantiles[3, :, chol]
    usable = np.isfinite(corrected)
    assert usable.sum() >= 17 and np.isnan(corrected[:2]).all()  # 1 % and 5 %: within the code's blend
    assert np.abs(corrected[usable] - np.quantile(measured, PROBABILITIES[usable])).max() < 0.15 * 45
    findings = {(f.site, f.kind, f.feature): f for f in check_profile(profile)}
    code = findings[("h3", "missing_code", "chol")]
    assert code.material and code.evidence == {"code": 0.0, "count": round(0.25 * 250)}
    medians = profile.quantiles[:, MEDIAN, chol]
    expected = (medians[0] + medians[2] + corrected[MEDIAN]) / 3
    assert findings[("h1", "location", "chol")].evidence["others_median"] == pytest.approx(expected)
    assert findings[("h1", "location", "chol")].effect == pytest.approx((medians[1] - expected) / checks.yardstick[chol])
    assert findings[("h3", "location", "chol")].evidence["median"] == pytest.approx(medians[3])
    assert findings[("h1", "unit", "chol")].evidence["a"] == pytest.approx(4, rel=0.1)
    assert ("h3", "missing_code", "chol") in {(f.site, f.kind, f.feature) for f in check_up(profile, {}).reported}


# -- a federation split by label: sites without some classes -----------------------------------------
from fedcore.interpret.data_checks import class_pattern  # noqa: E402

SKEW_CLASSES = ["a", "b", "c", "d", "e"]
SKEW_PATTERN = np.random.default_rng(7).normal(0, 1.2, (5, 12))  # class means in SDs, per feature
LACKS = {0: [4], 1: [3], 2: [2, 4], 3: [0], 4: [1], 5: [], 6: [3, 4]}  # classes a site has no rows of
FEW = {1: 0, 5: 2}  # a class with 6 rows at the site: too few to release (default policy: 10)


def skewed_site(rng: np.random.Generator, k: int, rows: int = 600) -> tuple[np.ndarray, np.ndarray]:
    has = [c for c in range(5) if c not in LACKS[k]]
    y = rng.choice(has, rows)
    if k in FEW:  # the first 6 rows of the small class, none after
        rest = y[6:]
        rest[rest == FEW[k]] = next(c for c in has if c != FEW[k])
        y[:6] = FEW[k]
    offset = rng.normal(0, 0.5, 12)  # each site's own level, not the label's
    return offset + SKEW_PATTERN[y] + rng.normal(0, 1, (rows, 12)), y


def label_skewed(problem=None, seed: int = 0) -> Profile:
    """Seven sites, each without some of five classes (one with a class too small to release);
    the problem at site 2 (which has classes a, b and d)."""
    rng = np.random.default_rng(seed)
    sites = []
    for k in range(7):
        x, y = skewed_site(rng, k)
        if k == 2 and problem is not None:
            y = problem(y)
        sites.append((f"site {k}", x, y))
    names = [f"x{j}" for j in range(12)]
    return profile_federation(sites, names, ["continuous"] * 12, names, SKEW_CLASSES, {}, DEFAULT_POLICY)


def test_the_class_pattern_of_sites_without_some_classes_is_the_one_they_were_drawn_from():
    """Profiles centred on the classes each site has (exact, no noise): the fitted pattern is the
    true one up to its centre; with every class at every site it is the plain median."""
    truth = SKEW_PATTERN - SKEW_PATTERN.mean(0)
    profiles = np.repeat(truth[None], 7, axis=0)
    for k, lacks in LACKS.items():
        profiles[k, lacks] = np.nan
    profiles -= np.nanmean(profiles, axis=1, keepdims=True)
    fitted = class_pattern(profiles)
    np.testing.assert_allclose(fitted - fitted.mean(0), truth, atol=1e-6)
    naive = np.nanmedian(profiles, axis=0)  # what the median alone gives: off by the sites' centres
    assert np.abs(naive - naive.mean(0) - truth).max() > 0.1
    complete = np.random.default_rng(1).normal(0, 1, (5, 3, 4))
    complete -= complete.mean(1, keepdims=True)
    np.testing.assert_allclose(class_pattern(complete), np.median(complete, axis=0))


def exchanged(y):
    """Classes 'a' and 'd' exchanged (both have rows at site 2)."""
    return np.where(y == 0, 3, np.where(y == 3, 0, y))


def taken(y):
    """The rows of 'b' labelled 'c', a class site 2 otherwise has none of."""
    return np.where(y == 1, 2, y)


@pytest.mark.parametrize("problem, renamed", [(exchanged, {"a": "d", "d": "a"}), (taken, {"c": "b"})])
def test_wrong_labels_are_found_over_the_classes_a_site_has(problem, renamed):
    found = findings(label_skewed(problem))
    permuted = [f for f in found if f.kind == "labels_permuted"]
    assert [f.site for f in permuted] == ["site 2"], [(f.site, f.kind, f.q) for f in found]
    order = permuted[0].evidence["order"]
    assert {SKEW_CLASSES[k]: SKEW_CLASSES[c] for k, c in enumerate(order) if c != k} == renamed
    assert not [f for f in found if f.site != "site 2" and f.kind.startswith("labels")]


@pytest.mark.parametrize("seed", range(3))
def test_a_federation_split_by_label_has_its_label_checks_tested_and_quiet(seed):
    profile = label_skewed(seed=seed)
    every = decide(check_profile(profile))
    for kind in ("labels_permuted", "labels_weak"):
        cells = [f for f in every if f.kind == kind]
        assert len(cells) == 7 and all(f.tested for f in cells), [(f.site, f.untestable) for f in cells]
    assert not [f for f in every if f.significant and f.kind in ("labels_permuted", "labels_weak")]


# -- which site's labels are wrong, with few sites --------------------------------------------------
def few_comparable_sites(flipped_site: str, seed: int = 0) -> Profile:
    """Heart-like: two large sites whose features tell the classes apart well, one whose features
    relate to its labels the same way but a third as strongly, and one with too few rows of one class
    to release (default policy: its class statistics withheld). `flipped_site`'s two classes are
    exchanged."""
    rng = np.random.default_rng(seed)
    sites = []
    for name, rows, strength in (("large 1", 400, 3.0), ("large 2", 400, 3.0), ("weaker", 300, 1.0),
                                 ("one class", 150, 3.0)):
        y = (rng.random(rows) < (0.96 if name == "one class" else 0.5)).astype(int)  # 'one class': ~6 'well'
        x = MEANS + SDS * (rng.normal(0, 1, (rows, 5)) + np.outer(y, strength * CLASS_SHIFT))
        sites.append((name, x, 1 - y if name == flipped_site else y))
    return profile_federation(sites, CONTINUOUS, ["continuous"] * 5, CONTINUOUS, ["well", "ill"], {}, DEFAULT_POLICY)


@pytest.mark.parametrize("flipped_site", ["large 1", "large 2"])
def test_of_two_large_sites_against_each_other_the_one_with_wrong_labels_is_named(flipped_site):
    """Two comparable large sites look reversed against each other (each is most of the other's
    reference); the third site that can be compared tells which one is wrong. Only that one is a
    finding; the other is judged again with it set right, and says so."""
    found = decide(check_profile(few_comparable_sites(flipped_site)))
    permuted = {f.site: f for f in found if f.kind == "labels_permuted" and f.tested}
    assert [f.site for f in found if f.kind == "labels_permuted" and f.significant] == [flipped_site], \
        [(f.site, f.q) for f in permuted.values()]
    other = "large 2" if flipped_site == "large 1" else "large 1"
    assert f"judged with {flipped_site}'s classes taken as renamed" in permuted[other].message
    assert not [f for f in found if f.significant and f.explained_by is None and f.site != flipped_site
                and f.kind.startswith("label")]


def test_a_site_whose_labels_look_wrong_is_no_reference_for_the_others():
    """By hand: values 0, 1, 2 and 10 at a site the label checks suspect. Site 0 against sites 1
    and 2 only (mean 1.5, SD 0.707, 1 df); the suspect site against all three (mean 1, SD 1)."""
    values = np.array([[0.0], [1.0], [2.0], [10.0]])
    deviation, t, p = leave_one_out(values, moderate=False, suspect=np.array([False, False, False, True]))
    assert deviation[0, 0] == pytest.approx(-1.5)
    assert t[0, 0] == pytest.approx(-1.5 / (np.sqrt(0.5) * np.sqrt(1 + 1 / 2)))
    assert p[0, 0] == pytest.approx(2 * stats.t.sf(1.5 / (np.sqrt(0.5) * np.sqrt(1.5)), 1))
    assert deviation[3, 0] == pytest.approx(9.0) and t[3, 0] == pytest.approx(9 / np.sqrt(4 / 3))


def test_the_reversal_test_combines_features_by_the_correlations_the_site_released():
    """|r| between two continuous features where the site released it; 1 (the bound for any pair)
    with a feature whose correlations are not kept (a binary one)."""
    profile = federation()
    checks = Checks(profile)
    bound = checks._correlation_bound(1, np.array([0, 3, 5]))  # temperature, marker, smoker
    assert bound[0, 1] == pytest.approx(abs(profile.correlation[1][0, 3])) and bound[0, 1] < 0.5
    assert bound[0, 2] == bound[2, 1] == 1.0 and np.diag(bound).tolist() == [1.0, 1.0, 1.0]


def test_two_sites_that_only_have_each_other_both_keep_their_finding():
    """Two comparable sites (the others have 4 rows of one class: withheld): either one's renaming explains
    the other, so nothing says which is wrong. Both stay findings; neither is judged 'set right'."""
    rng = np.random.default_rng(3)
    sites = []
    for name, rows in (("north", 400), ("south", 400), ("east", 150), ("west", 150)):
        y = (np.arange(rows) >= 4).astype(int) if name in ("east", "west") else rng.integers(0, 2, rows)
        x = MEANS + SDS * (rng.normal(0, 1, (rows, 5)) + np.outer(y, 3.0 * CLASS_SHIFT))
        sites.append((name, x, 1 - y if name == "south" else y))
    profile = profile_federation(sites, CONTINUOUS, ["continuous"] * 5, CONTINUOUS, ["well", "ill"], {},
                                 DEFAULT_POLICY)
    permuted = [f for f in decide(check_profile(profile)) if f.kind == "labels_permuted" and f.significant]
    assert sorted(f.site for f in permuted) == ["north", "south"]
    assert not [f for f in permuted if "judged with" in f.message]


# -- one class's values shifted ---------------------------------------------------------------------
FOUR_CLASSES = ["a", "b", "c", "d"]
FOUR_PATTERN = np.random.default_rng(11).normal(0, 1.0, (4, 5))  # class means in within-class SDs


def four_class_federation(shift: float = 0.0, seed: int = 0, policy: Policy | None = DEFAULT_POLICY,
                          lacking: dict[int, tuple[int, ...]] | None = None, rows: int = 600,
                          few: int = 0) -> Profile:
    """Six sites of `rows` rows and four classes, each site with a small case mix of its own; at
    site 2 the rows of class 'c' have feature x3 moved by `shift` within-class SDs. `lacking`
    {site: classes}: that site has no rows of those classes (label skew), or only the first `few`."""
    rng = np.random.default_rng(seed)
    sites = []
    for k in range(6):
        y = rng.integers(0, 4, rows)
        x = FOUR_PATTERN[y] + rng.normal(0, 0.1, 5) + rng.normal(0, 1, (rows, 5))
        if k == 2:
            x[y == 2, 3] += shift
        if lacking and k in lacking:
            kept = ~np.isin(y, lacking[k]) | (np.cumsum(np.isin(y, lacking[k])) <= few)
            x, y = x[kept], y[kept]
        sites.append((f"site {k}", 10 + 3 * x, y))
    names = [f"x{j}" for j in range(5)]
    return profile_federation(sites, names, ["continuous"] * 5, names, FOUR_CLASSES, {}, policy)


def test_one_class_shifted_at_one_site_is_found_with_its_class():
    """Class 'c' of x3 moved by 1.5 within-class SDs at site 2: its class mean, centred on the
    site's four class means, moves by 1.5 × 3/4 = 1.125 SDs (the others' by -0.375): the finding
    names x3 and 'c' with about that size; the clean federation gives no such finding."""
    found = findings(four_class_federation(1.5))
    shifted = [f for f in found if f.kind == "class_shift"]
    assert [(f.site, f.feature, f.evidence["class"]) for f in shifted] == [("site 2", "x3", "c")], \
        [(f.site, f.kind, f.feature, f"{f.q:.2g}") for f in found]
    assert shifted[0].effect == pytest.approx(1.125, abs=0.25)
    assert not [f for f in findings(four_class_federation(0.0)) if f.kind == "class_shift"]


LABEL_SKEW = {0: 0, 2: 3, 4: 1}


def test_one_class_shifted_is_found_where_sites_lack_classes():
    """Label skew: three sites each lack a class. Site 2 (without 'd') has 'c' of x3 moved by 1.5
    within-class SDs: centred on its three classes, 'c' moves by 1.5 × 2/3 = 1.0 and a and b by
    -0.5, and every other site is compared re-centred on a, b and c (site 4's missing 'b' placed by
    the pattern), so the finding names x3 and 'c' at about +1.0. Without the shift nothing is
    found, and no site's cell is 'not testable': the sites lacking a class are compared over the
    classes they have (before, every cell of every site was)."""
    found = findings(four_class_federation(1.5, lacking=LABEL_SKEW))
    shifted = [f for f in found if f.kind == "class_shift"]
    assert [(f.site, f.feature, f.evidence["class"]) for f in shifted] == [("site 2", "x3", "c")], \
        [(f.site, f.kind, f.feature, f"{f.q:.2g}") for f in found]
    assert shifted[0].effect == pytest.approx(1.0, abs=0.2)
    clean = decide(check_profile(four_class_federation(0.0, lacking=LABEL_SKEW)))
    cells = [f for f in clean if f.kind == "class_shift"]
    assert len(cells) == 6 * 5 and all(f.tested for f in cells)
    assert not [f for f in cells if f.significant]


def test_where_sites_lack_classes_each_class_is_compared_where_the_pattern_puts_it():
    """Known answer: no class moved anywhere, four of six sites without two classes each (5000 rows
    a site, so a class mean is within about 0.03 SD of the pattern). Each site's classes are
    compared with every other site re-centred on them, a class another site lacks placed where the
    pattern puts it relative to that site's classes: every cell's deviation is sampling error only.
    Placed without that site's own offset (the pattern as it is), the sites' frames disagree by
    up to 0.2 SD."""
    skew = {0: (1, 3), 1: (0, 1), 3: (2, 3), 4: (1, 3)}
    cells = [f for f in decide(check_profile(four_class_federation(0.0, lacking=skew, rows=5000)))
             if f.kind == "class_shift"]
    assert len(cells) == 6 * 5 and all(f.tested for f in cells)
    assert max(abs(f.effect) for f in cells) < 0.12, sorted((abs(f.effect), f.site, f.feature) for f in cells)[-3:]


def test_a_small_class_is_tested_with_its_sampling_error():
    """Site 0 keeps 12 rows of 'a' (the others ~750 of each class): its place of 'a' (its mean
    less the mean of its four class means) carries the sampling error (1 - 2/4)/12 + Σ 1/n / 16
    in within-class SDs², which is added to the predictive variance by hand here. A class of 12
    rows is off by 0.3 SD by chance, and with label skew such classes are common: tested without
    it, the chance deviation of -0.35 at x0 (seed 1) reads as p 0.017, with it 0.18."""
    from fedcore.interpret.data_checks import Checks

    profile = four_class_federation(0.0, seed=1, lacking={0: (0,)}, few=12, rows=3000)
    checks = Checks(profile)
    counts = profile.observed_by_class.astype(float)  # [sites, classes, features]
    own = (1 - 2 / 4) / counts[:, 0] + (1 / counts).sum(1) / 16
    _, _, by_hand = leave_one_out(checks.class_profiles[:, 0, :], own_variance=own)
    _, _, p2 = checks._class_places
    assert counts[0, 0, 0] == 12 and np.allclose(p2[:, 0], by_hand)
    assert p2[0, 0, 0] > 0.1


def test_with_two_classes_the_class_check_has_no_cells():
    """With two classes a class's centred mean is half the class difference, which the relation to
    the label tests: no cell at all, not a column of 'not testable'."""
    assert not [f for f in decide(check_profile(federation())) if f.kind == "class_shift"]


def test_noisy_labels_are_tested_on_the_log_of_their_relative_strength():
    """Label noise scales a site's class differences by a factor, and sites differ among themselves
    by factors: `weakness_p` is the leave-one-out t of the log strength, by hand; a site at a tenth
    of the others stands out there far more than on the share itself, and no relation at all (or
    one the other way round) counts as a twentieth."""
    others = np.array([0.6, 0.75, 0.9, 1.0, 1.1, 1.3, 1.5, 1.9])
    strength = np.append(others, 0.1)
    p = weakness_p(strength)
    logs = np.log(others)
    t = (np.log(0.1) - logs.mean()) / (logs.std(ddof=1) * np.sqrt(1 + 1 / len(others)))
    assert p[-1] == pytest.approx(stats.t.cdf(t, len(others) - 1), rel=1e-6)
    _, t_share, p_share = leave_one_out(strength)
    assert p[-1] < 1e-3 and p_share[-1, 0] / 2 > 0.02  # on the share: 2.3 SDs, p 0.028
    assert weakness_p(np.append(others, -0.4))[-1] == pytest.approx(weakness_p(np.append(others, 0.05))[-1])
    assert np.isnan(weakness_p(np.append(others, np.nan))[-1])


def test_a_class_thinned_out_among_six_is_another_class_balance_and_a_natural_spread_is_not():
    """With k classes a class's share is about 1/k, so the material gap is 2/k × 15 points: a site
    that lost 80 % of one of six activities' rows (about 17 % -> 4 %: 13 points, 5 × the odds) is
    reported; two-class sites 10 points apart at under twice the odds are not."""
    rng = np.random.default_rng(0)
    classes = [f"c{k}" for k in range(6)]
    centres = rng.normal(0, 1, (6, 4))
    sites = []
    for k in range(8):
        y = rng.integers(0, 6, 900)
        if k == 3:
            y = y[~((y == 2) & (rng.random(900) < 0.8))]
        x = rng.normal(0, 1, (len(y), 4)) + centres[y]
        sites.append((f"site {k}", x, y))
    names = [f"f{j}" for j in range(4)]
    profile = profile_federation(sites, names, ["continuous"] * 4, names, classes, {})
    balance = {f.site: f for f in decide(check_profile(profile)) if f.kind == "class_balance"}
    assert balance["site 3"].significant and balance["site 3"].evidence["shares"][2] < 0.06
    assert [site for site, f in balance.items() if f.significant] == ["site 3"]
    two = []
    for k, share in enumerate([0.40, 0.42, 0.44, 0.46, 0.48, 0.50, 0.52, 0.54]):
        y = (np.arange(2000) < share * 2000).astype(int)
        two.append((f"site {k}", rng.normal(0, 1, (2000, 4)) + y[:, None], y))
    profile = profile_federation(two, names, ["continuous"] * 4, names, ["no", "yes"], {})
    balance = [f for f in decide(check_profile(profile)) if f.kind == "class_balance"]
    assert not [f for f in balance if f.material]  # 14 points at most, and under twice the odds


@pytest.mark.parametrize("seed", range(8))
def test_labels_that_say_nothing_are_noisy_not_swapped(seed):
    """A site whose every label was redrawn at random has flat class differences whose direction is
    chance: as labelled they ran against the others' at every second such site, and the check said
    'swapped' (a clinician would swap them back). Renamed, their relation stays flat, so they are
    noisy labels; labels really swapped, renamed, relate as strongly as the others'."""
    profile = federation(noisy, seed=seed)
    found = findings(profile)
    at_site = [(f.kind, f.message) for f in found if f.site == "site 2"]
    assert [kind for kind, _ in at_site][:1] == ["labels_weak"], at_site
    assert not [f for f in decide(check_profile(profile)) if f.kind == "labels_permuted" and f.material]
    swapped = [f for f in findings(federation(flipped, seed=seed)) if f.site == "site 2"]
    assert swapped[0].kind == "labels_permuted" and swapped[0].evidence["renamed_strength"] > 0.7, swapped[0]


def test_noisy_label_sites_run_against_the_others_as_often_as_not():
    """The case the test above guards: among these seeds, noisy sites whose flat pattern happens to
    run against the others' (what the permuted-labels check read as swapped before)."""
    against = [Checks(federation(noisy, seed=seed))._labels["agreement"][2] < 0 for seed in range(8)]
    assert 2 <= sum(against) <= 6, against


# -- what 'nothing found' covers ----------------------------------------------------------------------
@pytest.mark.parametrize("n_sites, items, seed", [(4, 5, 0), (4, 5, 1), (6, 8, 2), (8, 24, 3)])
def test_the_smallest_reported_deviation_is_where_leave_one_out_first_reaches_the_p(n_sites, items, seed):
    """Known answer by brute force: move one cell to the other sites' mean + g for every g of the
    grid, run `leave_one_out` on the whole matrix, and take the first g whose p reaches 0.002 — the
    move widens its item's variance and with it the prior every cell leans on (with 4 sites and 5
    items, several units: a site's own shift hides it). `smallest_reported` must say the same g."""
    from fedcore.interpret.calibration import smallest_reported

    rng = np.random.default_rng(seed)
    x = rng.normal(0, np.sqrt(1 / rng.gamma(3, 1 / 3, size=items)), size=(n_sites, items)) + rng.normal(0, 1, items)
    grid = np.round(np.arange(0.05, 15.001, 0.05), 2)
    fast = smallest_reported(x, np.full(x.shape, 0.002), grid)
    for i, j in [(0, 0), (1, 2), (n_sites - 1, items - 1)]:
        truth = np.inf
        for g in grid:
            moved = x.copy()
            moved[i, j] = np.delete(x[:, j], i).mean() + g
            if leave_one_out(moved)[2][i, j] <= 0.002:
                truth = g
                break
        assert fast[i, j] == truth


def few_columns(seed: int, shift: float = 0.0, hospitals: int = 4, wider: float = 1.0) -> Profile:
    """Hospitals of 300 rows and five columns that differ between them by 0.5 SD (as heart's do),
    hospital 2's first column moved by `shift` SDs, hospital 0's last `wider` times as spread."""
    rng = np.random.default_rng(seed)
    offsets = rng.normal(0, 0.5, (hospitals, 5))
    sites = []
    for k in range(hospitals):
        x = rng.normal(0, 1, (300, 5)) + offsets[k]
        x[:, 0] += shift if k == 2 else 0.0
        x[:, 4] *= wider if k == 0 else 1.0
        sites.append((f"h{k}", x, rng.integers(0, 2, 300)))
    names = [f"c{j}" for j in range(5)]
    return profile_federation(sites, names, ["continuous"] * 5, names, ["a", "b"])


@pytest.mark.parametrize("seed, hospitals, wider", [(0, 4, 1.0), (1, 4, 1.0), (2, 8, 4.0), (3, 8, 4.0)])
def test_a_column_moved_just_beyond_its_reach_is_found_and_just_short_of_it_is_not(seed, hospitals, wider):
    """Known answer with the whole check-up: `location_reach` says how far hospital 2's median of
    c0 would have to sit from the others' to be reported; moved to 1.1 × that distance the location
    cell is significant, to 0.9 × it is not (the move widens c0's variance over the hospitals and
    the prior of all five columns' variances: with four hospitals it takes several SDs). With eight
    hospitals, one of them 4 × as spread in another column: findings of the same family already
    there loosen the threshold (Benjamini–Hochberg's one more rejection)."""
    from fedcore.interpret.data_checks import location_reach
    from fedcore.interpret.findings import FDR

    clean = few_columns(seed, 0.0, hospitals, wider)
    decided = check_up(clean, {}).findings
    assert sum(f.q < FDR and f.family == "values" for f in decided) >= (1 if wider > 1 else 0)
    reach = next(r for r in location_reach(clean, decided) if (r.site, r.feature) == ("h2", "c0"))
    assert 0.25 <= reach.distance < 20 and not reach.found

    def moved(factor: float):
        profile = few_columns(seed, (factor * reach.distance - reach.now) * reach.sd, hospitals, wider)
        return next(f for f in check_up(profile, {}).findings if (f.site, f.kind, f.feature) == ("h2", "location", "c0"))

    beyond, short = moved(1.1), moved(0.9)
    # (the released quantiles are rounded block means: the median lands near, not at, the distance
    # aimed at, so each is asked to land on its side of the reach, within 0.1 × it of its aim)
    assert 1.0 < beyond.effect / reach.distance < 1.2 and beyond.significant
    assert 0.8 < short.effect / reach.distance < 1.0 and not short.significant


def test_a_column_no_shift_on_the_grid_would_report_is_kept_as_beyond_it(monkeypatch):
    """A cell whose p reaches the threshold nowhere on the searched grid is the least covered of
    all: `location_reach` keeps it with distance inf (only an untested cell is left out), and the
    page's tables say "beyond" the grid's end. Known answer with the grid cut to 0.05-0.1 SD, which
    no cell of four hospitals reaches (each needs at least the material 0.25 SD anyway)."""
    from dashboard.presenters import checkup_view
    from fedcore.interpret import data_checks

    monkeypatch.setattr(data_checks, "REACH_GRID", np.array([0.05, 0.1]))  # read by the search and the text
    profile = few_columns(0)
    found = data_checks.location_reach(profile, check_up(profile, {}).findings)
    assert len(found) == 4 * 5 and all(r.distance == np.inf for r in found)
    assert {r.to_dict()["distance"] for r in found} == {None} and {r.to_dict()["beyond"] for r in found} == {0.1}
    summary = checkup_view.reach_summary(found)
    assert set(summary[checkup_view.TYPICAL]) == {"beyond 0.1"} and summary["nearest"].str.endswith("(beyond 0.1)").all()
    assert (checkup_view.reach_frame(found, profile)["that is, in the column's units"] == "").all()
