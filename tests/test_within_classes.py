"""The checks of values within classes (`Checks.location_within`, `Checks.spread_within`): sites of
one population that differ in their class mix (label skew; a hospital with more patients ill) differ
in their medians and spreads, and hide a change of one site's values there. Against the class means
and SDs of every site the mix is set aside. Known answers: the statistic by hand from the rows; a
shift and a wider spread at one site of a label-skewed federation found there and nowhere else,
where the plain location and spread cannot set it apart; nothing in the same federation untouched;
a site whose labels are swapped is said to have wrong labels, not shifted values. And a site whose
values within each class are the others' but whose mix of classes differs is said to differ as its
class mix predicts (`Checks.class_mix`), not to have shifted values. The spread within classes
varies by the classes' tails: by hand for normal classes, against draws of Laplace classes, and
small sites of lognormal classes are not reported for it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fedcore.interpret import checks
from fedcore.interpret.data_checks import Checks, check_profile, pooled_log_sd_variance, tied_share, within_class_sd
from fedcore.interpret.disclosure import DEFAULT_POLICY, block_starts, location
from fedcore.interpret.findings import FDR, decide
from fedcore.interpret.profile import PROBABILITIES, Profile, profile_federation

SITES = [f"site {k}" for k in range(8)]
BROKEN = "site 2"
FEATURES = ["f1", "f2", "f3", "f4", "f5", "f6"]
CLASSES = ["a", "b", "c"]
# each class's mean per feature, several within-class SDs apart: a site's mix moves its median by more
# than the change looked for
CLASS_MEANS = np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                        [4.0, -3.0, 2.0, 5.0, -4.0, 3.0],
                        [8.0, 3.0, -3.0, 1.0, 4.0, -2.0]])


def rows(rng: np.random.Generator, mix: np.ndarray, n: int = 600) -> tuple[np.ndarray, np.ndarray]:
    y = rng.choice(len(CLASSES), n, p=mix)
    return CLASS_MEANS[y] + rng.normal(0, 1, (n, len(FEATURES))), y


def skewed_federation(problem=None, seed: int = 0, policy=None):
    """Eight sites of one population, their class mixes drawn from a Dirichlet(0.7) (label skew);
    `problem(x, y)` at site 2."""
    rng = np.random.default_rng(seed)
    sites = []
    for name in SITES:
        mix = rng.dirichlet(np.full(len(CLASSES), 0.7)) * 0.9 + 0.1 / len(CLASSES)  # every class present
        x, y = rows(rng, mix)
        if name == BROKEN and problem is not None:
            x, y = problem(x, y)
        sites.append((name, x, y))
    profile = profile_federation(sites, FEATURES, ["continuous"] * len(FEATURES), FEATURES, CLASSES, {}, policy)
    return profile, sites


def reported(profile) -> list:
    return [f for f in decide(check_profile(profile)) if f.significant and f.explained_by is None]


def test_the_statistics_by_hand_from_the_rows():
    """Site mean less Σ n_c · (median over sites of class c's mean) / Σ n_c, in the median over sites
    of the pooled within-class SD; the log SD within classes against √(Σ (n_c − 1) · median over sites
    of class c's variance / Σ (n_c − 1)) — computed from the rows, as computed (no policy)."""
    profile, sites = skewed_federation(seed=3)
    within = Checks(profile)._within_classes
    k = len(CLASSES)
    means = np.array([[x[y == c].mean(0) for c in range(k)] for _, x, y in sites])  # [sites, classes, features]
    variances = np.array([[x[y == c].var(0, ddof=1) for c in range(k)] for _, x, y in sites])
    counts = np.array([[np.sum(y == c) for c in range(k)] for _, x, y in sites], dtype=float)
    pooled_sd = np.sqrt(((counts - 1)[:, :, None] * variances).sum(1) / (counts - 1).sum(1)[:, None])
    assert within_class_sd(profile) == pytest.approx(pooled_sd)
    yardstick = np.median(pooled_sd, axis=0)
    class_mean, class_variance = np.median(means, axis=0), np.median(variances, axis=0)
    for i, (_, x, y) in enumerate(sites):
        predicted = counts[i] @ class_mean / counts[i].sum()
        assert within["mean"][i] == pytest.approx(x.mean(0))
        assert within["predicted"][i] == pytest.approx(predicted)
        expected_sd = np.sqrt((counts[i] - 1) @ class_variance / (counts[i] - 1).sum())
        assert within["sd"][i] == pytest.approx(pooled_sd[i])
        assert within["predicted_sd"][i] == pytest.approx(expected_sd)
    # the deviations tested: each site's value against the other sites' mean of theirs
    location = (within["mean"] - within["predicted"]) / yardstick
    others = (location.sum(0) - location) / (len(SITES) - 1)
    assert within["location_dev"] == pytest.approx(location - others)
    log_ratio = np.log(within["sd"] / within["predicted_sd"])
    assert within["spread_dev"] == pytest.approx(log_ratio - (log_ratio.sum(0) - log_ratio) / (len(SITES) - 1))


def shifted(x, y):
    x = x.copy()
    x[:, 0] += 0.8  # 0.8 within-class SDs: every class's values at the site
    return x, y


def wider(x, y):
    x = x.copy()
    x[:, 1] = CLASS_MEANS[y, 1] + 1.6 * (x[:, 1] - CLASS_MEANS[y, 1])  # 1.6 times as wide within each class
    return x, y


@pytest.mark.parametrize("problem, kind, feature", [(shifted, "location_within", "f1"),
                                                    (wider, "spread_within", "f2")])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_change_the_class_mix_hides_is_found_within_classes(problem, kind, feature, seed):
    """Label skew moves the sites' medians and SDs by several within-class SDs: the plain location
    and spread cannot set site 2 apart; within its classes it is found, at its feature, and at no
    other site or feature (the default disclosure policy: what the sites release)."""
    profile, _ = skewed_federation(problem, seed, DEFAULT_POLICY)
    found = reported(profile)
    assert [(f.site, f.kind, f.feature) for f in found if f.kind in ("location_within", "spread_within")] == \
        [(BROKEN, kind, feature)]
    assert not [f for f in found if f.kind in ("location", "spread") and f.site == BROKEN]
    finding = next(f for f in found if f.kind == kind)
    assert finding.material
    effect = finding.effect if kind == "location_within" else np.log(finding.effect)
    truth = 0.8 if kind == "location_within" else np.log(1.6)
    assert effect == pytest.approx(truth, abs=0.25)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nothing_within_classes_in_a_skewed_federation_untouched(seed):
    profile, _ = skewed_federation(seed=seed, policy=DEFAULT_POLICY)
    assert not [f for f in reported(profile) if f.kind in ("location_within", "spread_within")]


def test_swapped_labels_are_wrong_labels_not_values_shifted_within_classes():
    """Site 2's labels a and c exchanged, with twice as many a rows as c: what its class mix predicts
    moves by several within-class SDs (its mean stays its own), so the cells within classes are
    material findings there — explained by its labels looking wrong, the finding it shows."""
    def relabelled(x, y):
        a, c = np.flatnonzero(y == 0), np.flatnonzero(y == 2)
        keep = np.sort(np.r_[a, c[:len(a) // 2], np.flatnonzero(y == 1)])
        return x[keep], np.choose(y[keep], [2, 1, 0])

    profile, _ = skewed_federation(relabelled, 0, DEFAULT_POLICY)
    findings = decide(check_profile(profile))
    labels = [f for f in findings if f.site == BROKEN and f.kind == "labels_permuted" and f.significant]
    assert labels and labels[0].explained_by is None
    within = [f for f in findings if f.kind in ("location_within", "spread_within") and f.significant]
    assert within and all(f.site == BROKEN and f.explained_by == "labels_permuted" for f in within)


# what the values themselves show, plain or within classes
VALUE_KINDS = ("location", "spread", "shape", "range", "distribution", "location_within", "spread_within")


def mixed_differently(problem=None, seed: int = 0, policy=DEFAULT_POLICY):
    """Seven sites holding the three classes alike, site 2 mostly class a (80 %, 10 %, 10 %): its
    medians lie one to three within-class SDs from the others' on every feature, its values within
    each class are theirs; `problem(x, y)` at site 2."""
    rng = np.random.default_rng(seed)
    sites = []
    for name in SITES:
        x, y = rows(rng, np.array([0.8, 0.1, 0.1]) if name == BROKEN else np.full(3, 1 / 3))
        if name == BROKEN and problem is not None:
            x, y = problem(x, y)
        sites.append((name, x, y))
    return profile_federation(sites, FEATURES, ["continuous"] * len(FEATURES), FEATURES, CLASSES, {}, policy)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_site_of_another_class_mix_differs_as_its_mix_predicts_not_in_its_values(seed):
    """Site 2's medians and spreads differ from the others' (found by the plain checks), but
    within its classes its values are theirs: each such cell is reported as its class mix, the
    plain findings there explained by it, and nothing within classes is found."""
    findings = decide(check_profile(mixed_differently(seed=seed)))
    plain = [f for f in findings if f.site == BROKEN and f.kind in ("location", "spread") and f.significant]
    assert plain and all(f.explained_by == "class_mix" for f in plain)
    mix = {f.feature for f in findings if f.kind == "class_mix" and f.significant}
    assert mix and mix == {f.feature for f in plain}
    assert all(f.site == BROKEN and f.explained_by is None for f in findings if f.kind == "class_mix")
    assert not [f for f in findings if f.significant and f.kind in ("location_within", "spread_within")]
    # what it says: its mean against what its mix predicts, and the others' means of its classes
    cell = next(f for f in findings if f.kind == "class_mix")
    assert "as its mix of classes predicts" in cell.message and "not a recording problem" in cell.message


def test_a_shift_on_top_of_another_class_mix_is_a_shift_not_the_mix():
    """The same site with f1 also shifted by 0.8 within-class SDs in every class: f1 is found within
    classes and is not its class mix; the other features still are."""
    findings = decide(check_profile(mixed_differently(shifted)))
    reported_here = {(f.kind, f.feature) for f in findings if f.site == BROKEN and f.significant and f.explained_by is None}
    assert {kind for kind, feature in reported_here if feature == "f1"} & set(VALUE_KINDS)  # found as what it is
    assert ("class_mix", "f1") not in reported_here
    assert {feature for kind, feature in reported_here if kind == "class_mix"} - {"f1"}


def test_without_classes_compared_nothing_is_a_class_mix():
    """The class means and SDs withheld at site 2 (a policy): its differences stay what the plain
    checks found, never explained by a mix that cannot be compared: its cells of the class mix are
    visibly not testable, with the reason."""
    profile = mixed_differently()
    i = profile.sites.index(BROKEN)
    arrays = {name: value.astype(np.float64, copy=True) for name, value in profile.arrays.items()}
    for name in ("mean_by_class", "sd_by_class"):
        arrays[name][i] = np.nan
    bare = Profile(profile.sites, profile.features, profile.kinds, profile.columns, profile.classes, arrays,
                   profile.units, {BROKEN: {"mean_by_class": "withheld", "sd_by_class": "withheld"}})
    findings = decide(check_profile(bare))
    mix = [f for f in findings if f.kind == "class_mix" and f.site == BROKEN]
    assert mix and all(f.untestable == "withheld" and not f.significant for f in mix)  # visibly not testable
    assert [f for f in findings if f.site == BROKEN and f.kind in VALUE_KINDS and f.significant
            and f.explained_by is None]


# -- point masses a class mix predicts (`Checks.mass_of_class_mix`, `data_checks.tied_share`) ------
def test_tied_share_by_hand():
    """As computed: quantiles at 0 from the 1 % to the 30 % one, the 35 % one above: between 29 %
    and 35 %, so 32 %. Released from blocks: 100 values, 33 of them 0, in ten blocks of ten (the
    default policy): the first three blocks' means are 0, the fourth holds the other three zeros;
    the quantiles at 0 say blocks one to three (30 %) and perhaps part of the fourth (10 % more):
    35 %. No quantile at the value: 0; none shared: NaN."""
    quantiles = np.where(PROBABILITIES <= 0.30, 0.0, PROBABILITIES)
    assert tied_share(quantiles, 0.0) == pytest.approx((0.29 + 0.35) / 2)
    values = np.r_[np.zeros(33), np.linspace(1, 5, 67)][:, None]
    _, _, released = location(values, PROBABILITIES, DEFAULT_POLICY)
    starts = block_starts(100, DEFAULT_POLICY.min_count)
    assert starts.tolist() == list(range(0, 101, 10))
    assert tied_share(released[:, 0], 0.0, starts) == pytest.approx(0.30 + 0.10 / 2)
    assert tied_share(released[:, 0], 0.5, starts) == 0.0
    assert np.isnan(tied_share(np.full(len(PROBABILITIES), np.nan), 0.0))


ZEROS_IN_A = 0.9  # class a leaves the feature at 0 in 90 % of its rows (a blank region of an image)


def blank_in_class_a(mix: np.ndarray, rng: np.random.Generator, zeros: float = ZEROS_IN_A,
                     n: int = 1200) -> tuple[np.ndarray, np.ndarray]:
    """f1 > 0 in classes b and c, 0 in a share `zeros` of class a's rows; the other features as `rows`."""
    x, y = rows(rng, mix, n)
    x[:, 0] = np.abs(x[:, 0]) + 1.0
    x[(y == 0) & (rng.random(n) < zeros), 0] = 0.0
    return x, y


def mostly_blank(problem=None, seed: int = 0, policy=DEFAULT_POLICY, mix=(0.5, 0.25, 0.25), zeros=ZEROS_IN_A):
    """Seven sites with 10 % of class a (9 % of f1 at 0), site 2 with half (45 % at 0); `problem`
    at site 2."""
    rng = np.random.default_rng(seed)
    sites = []
    for name in SITES:
        x, y = blank_in_class_a(np.array(mix) if name == BROKEN else np.array([0.1, 0.45, 0.45]), rng, zeros)
        if name == BROKEN and problem is not None:
            x, y = problem(x, y)
        sites.append((name, x, y))
    return profile_federation(sites, FEATURES, ["continuous"] * len(FEATURES), FEATURES, CLASSES, {}, policy)


def zero_filled_in_b_and_c(x, y):
    x = x.copy()
    x[(y > 0) & (np.arange(len(y)) % 2 == 0), 0] = 0.0  # half of the other classes' rows
    return x, y


@pytest.mark.parametrize("policy", [None, DEFAULT_POLICY], ids=["as computed", "default"])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_site_of_mostly_one_class_holds_that_classs_mass_not_a_recording_problem(seed, policy):
    """Site 2's f1 is at its minimum five times as often as the other sites' (45 % against 9 %),
    significant and material against them; it is half class a, whose f1 the other sites record at 0
    in 90 % of its rows: its class mix predicts the mass (within the check's material excess), and
    the cell is no finding, its message says so. Half of its other classes' rows zero-filled on top
    (70 %): 25 points beyond what the mix predicts, a point mass at its minimum."""
    findings = decide(check_profile(mostly_blank(seed=seed, policy=policy)))
    (cell,) = [f for f in findings if f.site == BROKEN and f.kind == "point_mass" and f.feature == "f1"]
    assert cell.q < FDR and cell.evidence["where"] == "min" and cell.evidence["share"] >= 3 * cell.evidence["others_share"]
    assert not cell.material and not cell.significant
    assert abs(cell.evidence["class_mix_share"] - cell.evidence["share"]) < checks.limit("point_mass", "excess")
    assert "as its mix of classes predicts" in cell.message and "not a recording problem" in cell.message
    assert not [f for f in findings if f.kind == "point_mass" and f.significant]

    filled = decide(check_profile(mostly_blank(zero_filled_in_b_and_c, seed, policy)))
    (cell,) = [f for f in filled if f.site == BROKEN and f.kind == "point_mass" and f.feature == "f1"]
    assert cell.significant and cell.explained_by is None and "at its minimum" in cell.message
    assert cell.evidence["share"] - cell.evidence["class_mix_share"] == pytest.approx(0.25, abs=0.07)


@pytest.mark.parametrize("policy", [None, DEFAULT_POLICY], ids=["as computed", "default"])
def test_a_column_at_one_value_where_the_class_mix_leaves_some_values_off_it_is_a_point_mass(policy):
    """Site 2 of 97 % class a, whose f1 is 0 in every row: its mix leaves 3 % of its f1 values off 0
    and it shows as many (no finding). Its f1 set to 0 in every row as well (a dead channel): 100 %
    against the 97 % the mix predicts, under the excess, but none of the values the mix leaves off
    the mass: material, reported."""
    untouched = decide(check_profile(mostly_blank(mix=(0.97, 0.015, 0.015), zeros=1.0, policy=policy)))
    (cell,) = [f for f in untouched if f.site == BROKEN and f.kind == "point_mass" and f.feature == "f1"]
    assert cell.q < FDR and not cell.material and cell.evidence["class_mix_share"] > 0.95

    def dead(x, y):
        x = x.copy()
        x[:, 0] = 0.0
        return x, y

    findings = decide(check_profile(mostly_blank(dead, mix=(0.97, 0.015, 0.015), zeros=1.0, policy=policy)))
    (cell,) = [f for f in findings if f.site == BROKEN and f.kind == "point_mass" and f.feature == "f1"]
    assert cell.material and cell.significant and cell.evidence["share"] - cell.evidence["class_mix_share"] < 0.05
    assert [f for f in findings if f.site == BROKEN and f.feature == "f1" and f.significant and f.explained_by is None]


def test_mnist_split_by_label_shows_its_class_mix_not_recording_problems(shared_data):
    """MNIST's test digits as a table of block grey levels, dealt to 8 sites by label skew (the
    check-up suite's federation; default policy): nothing was recorded wrongly, so no block is a
    point mass beyond its class mix (site 3, 61 % '1's, holds 37-62 % of four blocks at 0, as the
    '1's leave them blank), and block r3c2 there, 26 times the others' tails with its median and
    spread the others', is said to differ as its class mix predicts (its shape alone differs
    materially: the class mix is tried there too)."""
    if not (shared_data / "mnist").is_dir():
        pytest.skip("the shared MNIST data")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "evidence"))
    import corruptions

    findings = decide(check_profile(corruptions.load_table("mnist").profile()))
    shown = [f for f in findings if f.significant and f.explained_by is None]
    assert not [f for f in shown if f.kind == "point_mass"]
    # material against the other sites' share (so its class mix was asked), significant, and its mix
    masses = [f for f in findings if f.kind == "point_mass" and f.site == "site3" and f.q < FDR
              and "class_mix_share" in f.evidence]
    assert len(masses) >= 4 and all("as its mix of classes predicts" in f.message for f in masses)
    block = {f.kind for f in shown if f.site == "site3" and f.feature == "block r3c2"}
    assert block == {"class_mix"}, block


def test_the_pooled_log_sd_varies_by_its_classes_tails():
    # normal classes of equal variance: 1 / (2 Σ (n − 1)), by hand; Laplace classes (kurtosis 6) of
    # 11 and 16 values: the variance of half the log of their pooled variance over 20,000 draws
    freedom = np.array([[[10.0], [15.0]]])
    variance = np.ones((1, 2, 1))
    assert pooled_log_sd_variance(freedom, variance, np.full((1, 2, 1), 3.0))[0, 0] == pytest.approx(1 / 50)
    assert pooled_log_sd_variance(freedom, variance, np.full((1, 2, 1), np.nan))[0, 0] == pytest.approx(1 / 50)
    rng = np.random.default_rng(0)
    a, b = rng.laplace(0, 1, (20_000, 11)), rng.laplace(0, 1, (20_000, 16))
    pooled = (10 * a.var(1, ddof=1) + 15 * b.var(1, ddof=1)) / 25
    drawn = np.var(0.5 * np.log(pooled))
    predicted = pooled_log_sd_variance(freedom, 2 * variance, np.full((1, 2, 1), 6.0))[0, 0]
    assert predicted == pytest.approx(drawn, rel=0.15)
    assert predicted > 1.8 / 50  # nearly twice the normal classes'


def heavy_tailed(seed: int) -> Profile:
    """8 sites of 22 rows (11 per class) and 8 of 400, every class lognormal (σ 1) and the classes
    1.5 apart: nothing differs between the sites but chance."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, n in enumerate([22] * 8 + [400] * 8):
        y = np.arange(n) % 2
        rows.append((f"site {k}", rng.lognormal(0, 1.0, (n, 8)) + 1.5 * y[:, None], y))
    names = [f"x{k}" for k in range(8)]
    return profile_federation(rows, names, ["continuous"] * 8, names, ["no", "yes"])


def test_small_sites_of_heavy_tailed_classes_are_not_reported_for_their_spread_within_classes(monkeypatch):
    def small_sites_below(level: float) -> float:
        p = np.concatenate([Checks(heavy_tailed(seed))._within_classes["spread_p"][:8].ravel() for seed in range(12)])
        return float(np.mean(p < level))

    with_tails = small_sites_below(0.05)
    assert with_tails < 0.09  # of 768 cells where none differs (7 %: lognormal classes' tails run longer still)
    # normal theory's variance (every class's kurtosis 3): half as many again
    monkeypatch.setattr("fedcore.interpret.data_checks.fenced_kurtosis", lambda common: np.full(common.shape[1], 3.0))
    assert small_sites_below(0.05) > with_tails + 0.025
