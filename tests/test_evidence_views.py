"""The evidence view of every finding kind (dashboard.presenters.checkup_view.EVIDENCE_VIEWS, chosen by name):
each draws the numbers its finding was computed from, in the data's units, every site with the
finding's site in its colour, in words a clinician reads first. Known answers: the federations of
tests/evidence_cases.py, where each problem is planted at one site."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from dashboard.presenters.checkup_view import EVIDENCE_VIEWS, evidence_figure, view_name
from fedcore.interpret import checks
from dashboard.presenters.evidence_views import OTHERS
from fedcore.glossary import technical_first
from fedcore.interpret.data_checks import relation_to_labels
from fedcore.interpret.disclosure import DEFAULT_POLICY
from fedcore.interpret.findings import KINDS, LENSES
from fedcore.interpret.profile import PROBABILITIES, RESOLUTION_STEPS, SENTINELS
from tests.evidence_cases import MODEL_SITES, SITE, STANDS_OUT, data_cases, model_cases

MEDIAN = list(np.round(PROBABILITIES, 2)).index(0.5)


@pytest.fixture(scope="module")
def data():
    return data_cases()


@pytest.fixture(scope="module")
def models():
    return model_cases()


def texts(figure) -> list[str]:
    """Every text of a figure a reader sees: its title, axis titles, legend names, annotations."""
    layout = figure.layout
    found = [layout.title.text or ""]
    for name in dir(layout):
        if name.startswith(("xaxis", "yaxis")) and getattr(layout, name) is not None:
            found.append(getattr(layout, name).title.text or "")
    found += [trace.name or "" for trace in figure.data] + [a.text or "" for a in layout.annotations]
    return [" ".join(re.sub(r"<[^>]+>", " ", t).split()) for t in found if t]  # as read: lines joined


def test_every_kind_has_a_view_of_its_own():
    # the check registry names each check's view; the dashboard draws exactly the views it names
    # (and one number per site for a kind an older store holds that the registry no longer knows)
    for kind in KINDS:
        assert checks.BY_KIND[kind].evidence in EVIDENCE_VIEWS, kind
    assert set(EVIDENCE_VIEWS) == set(checks.EVIDENCE_VIEWS) | {"site_values"}


def test_every_case_is_drawn_in_words_first(data, models):
    cases = {**data, **models}
    # every kind of the check registry
    assert {c.finding.kind for c in cases.values()} == set(KINDS)
    for key, case in cases.items():
        figure = evidence_figure(case.finding, case.evidence)
        assert figure is not None, key
        assert figure.layout.title.text, key
        assert not [t for t in texts(figure) if technical_first(t)], (key, texts(figure))


def bars(figure):
    return next(t for t in figure.data if t.type == "bar")


def drawn_values(figure) -> np.ndarray:
    """A per-site bar chart's values (bars start at the reference: base + length)."""
    bar = bars(figure)
    return np.asarray(bar.x, dtype=float) + float(bar.base or 0.0)


@pytest.mark.parametrize("key", [("feature shifts", "feature_shift"), ("labels", "output_shift"),
                                 ("labels", "shared_model_reversed"), ("contribution", "low_contribution"),
                                 ("similarity", "distant"), ("prototypes", "prototype_on_stamp")])
def test_a_model_lens_draws_every_sites_value_the_site_in_its_colour(models, key):
    case = models[key]
    figure = evidence_figure(case.finding, case.evidence)
    assert list(bars(figure).y) == MODEL_SITES
    assert np.allclose(drawn_values(figure), case.inputs["values"])
    colours = list(bars(figure).marker.color)
    assert colours[MODEL_SITES.index(STANDS_OUT)] == case.evidence.colors[STANDS_OUT]
    assert {c for site, c in zip(MODEL_SITES, colours) if site != STANDS_OUT} == {OTHERS}
    reference = case.inputs.get("reference")
    if reference is None:  # the other sites' mean
        values = np.asarray(case.inputs["values"], dtype=float)
        reference = np.delete(values, MODEL_SITES.index(STANDS_OUT)).mean()
    assert np.isclose(bars(figure).base, reference)
    if "errors" in case.inputs:  # the spread over the repeat runs
        assert np.allclose(bars(figure).error_x.array, case.inputs["errors"])


def test_a_unit_finding_draws_the_site_in_its_own_units_then_converted(data):
    case = data["unit"]
    figure = evidence_figure(case.finding, case.evidence)
    profile = case.evidence.profile
    i, j = profile.sites.index(SITE), profile.features.index("temperature")
    median = profile.quantiles[i, MEDIAN, j]
    boxes = [t for t in figure.data if t.type == "box"]
    recorded = next(b for b in boxes if b.xaxis == "x")
    converted = next(b for b in boxes if b.xaxis == "x2" and b.y[0] == f"{SITE}, converted")
    assert np.isclose(recorded.median[0], median) and 95 < median < 101  # °F
    assert np.isclose(converted.median[0], (median - 32) * 5 / 9)  # back in °C, among the others
    assert "°F" in figure.layout.xaxis.title.text and "temperature (°C)" in figure.layout.xaxis2.title.text
    others = [b for b in boxes if b.xaxis == "x2" and b is not converted]
    assert [b.y[0] for b in others] == [s for s in profile.sites if s != SITE]
    assert all(np.isclose(b.median[0], profile.quantiles[profile.sites.index(b.y[0]), MEDIAN, j]) for b in others)
    assert {b.marker.color for b in others} == {OTHERS} and converted.marker.color == case.evidence.colors[SITE]


def test_a_missing_code_draws_each_sites_share_of_it(data):
    case = data["missing_code"]
    figure = evidence_figure(case.finding, case.evidence)
    profile = case.evidence.profile
    j, v = profile.features.index("glucose"), list(SENTINELS).index(999.0)
    share = profile.sentinel_counts[:, v, j] / profile.observed[:, j]
    assert np.allclose(bars(figure).x, share) and 0.15 < share[profile.sites.index(SITE)] < 0.25
    assert any(shape.x0 == 999.0 for shape in figure.layout.shapes)  # the code, marked among the values


def test_swapped_columns_draw_each_column_against_the_others_of_both(data):
    case = data["swapped_columns"]
    figure = evidence_figure(case.finding, case.evidence)
    profile = case.evidence.profile
    i = profile.sites.index(SITE)
    own = [t for t in figure.data if t.name == f"{SITE}'s values"]
    for trace, column in zip(own, ("age", "glucose")):
        assert np.allclose(trace.y, profile.quantiles[i, :, profile.features.index(column)])
    # what the site records as age lies on the others' glucose (and its glucose on their age)
    other_glucose = [t for t in figure.data if t.name == "the others' values of the other column"][0]
    assert np.median(np.abs(np.asarray(own[0].y) - np.asarray(other_glucose.y))) < 5


def test_exchanged_columns_draw_each_columns_correlations_against_the_others_of_both(data):
    """a1 and b1 exchanged at the site: what it records as a1 relates to the other features as the
    other sites' b1 does (on the diagonal), not as their a1 (a2 and a3 at r about 0.8 there, 0 here)."""
    case = data["exchanged_columns"]
    figure = evidence_figure(case.finding, case.evidence)
    profile = case.evidence.profile
    i = profile.sites.index(SITE)
    assert case.finding.evidence["partner"] == "b1"
    as_other = [t for t in figure.data if t.name == "the others' other column"]
    as_same = [t for t in figure.data if t.name == "the others' same column"]
    assert len(as_other) == len(as_same) == 2  # one per column, each panel
    c = profile.continuous.index(profile.features.index("a1"))
    rest = [x for x in range(len(profile.continuous)) if x not in (c, profile.continuous.index(3))]
    assert np.allclose(as_other[0].y, profile.rank_correlation[i, c, rest])  # the correlations the check reads
    assert np.median(np.abs(np.asarray(as_other[0].x) - np.asarray(as_other[0].y))) < 0.15
    assert np.max(np.abs(np.asarray(as_same[0].x) - np.asarray(as_same[0].y))) > 0.6
    title = texts(figure)[0]
    assert "a1 and b1 at site 2" in title and "a1 fits as b1 +" in title


def test_missing_values_are_drawn_per_site_and_per_outcome(data):
    case = data["missingness"]
    profile = case.evidence.profile
    j = profile.features.index("score")
    assert np.allclose(bars(evidence_figure(case.finding, case.evidence)).x,
                       1 - profile.observed[:, j] / profile.rows)
    case = data["missing_by_class"]
    profile = case.evidence.profile
    figure = evidence_figure(case.finding, case.evidence)
    j = profile.features.index("marker")
    for k, trace in enumerate(t for t in figure.data if t.type == "bar"):
        assert np.allclose(trace.x, 1 - profile.observed_by_class[:, k, j] / profile.class_counts[:, k])
    assert len({t.marker.color for t in figure.data}) == len(profile.classes)  # an outcome a colour


def test_categories_only_one_site_uses_are_hatched(data):
    case = data["category_codes"]
    figure = evidence_figure(case.finding, case.evidence)
    profile = case.evidence.profile
    hatched = {t.name.split(" ")[0] for t in figure.data if t.marker.pattern.shape == "/"}
    assert hatched == {"1", "2", "3"} and all("(only at site 2)" in t.name for t in figure.data
                                              if t.marker.pattern.shape == "/")
    shares = np.stack([np.asarray(t.x) for t in figure.data], axis=1)
    assert np.allclose(shares.sum(1), 1.0)  # every site's rows, in one category or another
    assert np.allclose(shares[profile.sites.index(SITE)][-3:].sum(), 1.0)


def test_a_yes_no_columns_shares_are_drawn_at_one_and_at_zero_the_site_marked(data):
    case = data["category_share"]  # smoker exported the other way round at site 2
    figure = evidence_figure(case.finding, case.evidence)
    profile = case.evidence.profile
    j = profile.features.index("smoker")
    yes, no = (t for t in figure.data if t.type == "bar")
    assert (yes.name, no.name) == ("smoker = 1", "smoker = 0")
    assert np.allclose(yes.x, profile.mean[:, j]) and np.allclose(np.asarray(yes.x) + np.asarray(no.x), 1.0)
    assert [name for name in yes.y if name.startswith("▶")] == [f"▶ {SITE}"]
    assert "share of each value" in figure.layout.title.text


def test_labels_are_drawn_as_each_features_relation_to_the_outcome(data):
    case = data["labels_permuted"]
    figure = evidence_figure(case.finding, case.evidence)
    profile = case.evidence.profile
    relation = relation_to_labels(profile)
    i = profile.sites.index(SITE)
    mine = next(t for t in figure.data if t.name == SITE)
    j = [profile.features.index(name) for name in mine.y]
    assert np.allclose(mine.x, relation[i, j])
    others = np.nanmedian(np.delete(relation, i, axis=0), axis=0)[j]
    assert (np.sign(mine.x) != np.sign(others)).mean() >= 0.8  # flipped labels: the pattern runs the other way
    noisy = data["labels_weak"]
    weak = next(t for t in evidence_figure(noisy.finding, noisy.evidence).data if t.name == SITE)
    assert np.median(np.abs(weak.x)) < 0.5 * np.median(np.abs(others))  # noisy labels: flattened
    means = data["label_relation"]
    figure = evidence_figure(means.finding, means.evidence)
    j = means.evidence.profile.features.index("marker")
    for k, trace in enumerate(t for t in figure.data if t.mode == "markers"):
        assert np.allclose(trace.x, means.evidence.profile.mean_by_class[:, k, j])


def test_one_class_shifted_is_drawn_as_each_sites_class_means_naming_the_class(data):
    case = data["class_shift"]
    profile = case.evidence.profile
    figure = evidence_figure(case.finding, case.evidence)
    j, k = profile.features.index("x3"), profile.classes.index("c")
    dots = [t for t in figure.data if t.mode == "markers"]
    assert np.allclose(np.asarray(dots[k].x, dtype=float), profile.mean_by_class[:, k, j])
    assert "look at 'c'" in figure.layout.title.text


@pytest.mark.parametrize("kind, statistic", [("location_within", "mean_by_class"), ("spread_within", "sd_by_class")])
def test_values_within_classes_are_drawn_as_each_sites_class_statistic(data, kind, statistic):
    """A label-skewed federation, site 2's f1 shifted (f2 wider) within every class: each class's
    dots are every site's mean (SD) of that class, from the profile; the axis says which."""
    case = data[kind]
    profile = case.evidence.profile
    figure = evidence_figure(case.finding, case.evidence)
    j = profile.features.index(case.finding.feature)
    dots = [t for t in figure.data if t.mode == "markers"]
    assert len(dots) == len(profile.classes)
    for k, trace in enumerate(dots):
        assert np.allclose(np.asarray(trace.x, dtype=float), getattr(profile, statistic)[:, k, j], equal_nan=True)
    word = "mean" if kind == "location_within" else "SD"
    assert figure.layout.xaxis.title.text.startswith(f"{word} of") and f"{word} per outcome" in figure.layout.title.text


def _site_correlations(case) -> tuple:
    """The correlations view of a case: its figure, the site's dots, and the site's row of the
    profile's correlations and rank correlations with every other continuous feature."""
    figure = evidence_figure(case.finding, case.evidence)
    profile = case.evidence.profile
    c = profile.continuous.index(profile.features.index(case.finding.feature))
    rest = [k for k in range(len(profile.continuous)) if k != c]
    i = profile.sites.index(SITE)
    mine = next(t for t in figure.data if t.name == SITE)
    return figure, mine.x, profile.correlation[i, c, rest], profile.rank_correlation[i, c, rest]


def test_correlations_are_drawn_from_the_sites_profiles(data):
    figure, drawn, pearson, ranks = _site_correlations(data["correlation"])
    # the check compares rank correlations (Spearman's): those are what its view draws
    assert np.allclose(drawn, ranks)
    assert not np.allclose(drawn, pearson)
    assert figure.layout.xaxis.title.text.endswith("(rank correlation)")


def test_a_copy_is_drawn_with_the_rank_correlations_its_check_reads(data):
    figure, drawn, pearson, ranks = _site_correlations(data["copied_column"])
    assert np.allclose(drawn, ranks)
    assert not np.allclose(drawn, pearson)
    assert figure.layout.xaxis.title.text.endswith("(rank correlation)")


def test_the_correlations_view_says_the_features_partners_still_go_together_at_the_site(data):
    """The registry's federation: f1–f4 share one factor (r 0.8 by construction), f4 replaced by noise
    at the site. Its partners f1, f2, f3 still go together there: the title's second line gives their
    rank correlation among themselves, the mean of the three pairs' Fisher z computed here by hand."""
    case = data["correlation"]
    profile = case.evidence.profile
    assert case.finding.feature == "f4"
    c = {name: profile.continuous.index(profile.features.index(name)) for name in ("f1", "f2", "f3")}
    r = profile.rank_correlation[profile.sites.index(SITE)]
    among = np.tanh(np.mean([np.arctanh(r[c[a], c[b]]) for a, b in (("f1", "f2"), ("f1", "f3"), ("f2", "f3"))]))
    assert abs(among - 0.8) < 0.1  # the factor's correlation, as built
    title = texts(evidence_figure(case.finding, case.evidence))[0]  # as read: tags out, lines joined
    assert (f"At {SITE} the features f4 goes with at the other sites still go with each other ({among:+.2f} among "
            "them): only f4 lost its relations") in title


def test_a_kind_without_a_declared_view_still_draws_its_data(data, models):
    """A check added later (issue 23's registry names its view; until then): its feature's values,
    or one number per site."""
    case = data["location"]
    new = type(case.finding)(**{**case.finding.__dict__, "kind": "a_check_to_come"})
    assert view_name(new) == "quantiles" and evidence_figure(new, case.evidence) is not None
    model = models[("contribution", "low_contribution")]
    assert view_name(type(model.finding)(**{**model.finding.__dict__, "kind": "a_check_to_come"})) == "site_values"


def test_a_point_mass_and_repeated_rows_are_drawn_from_the_profiles_shares(data):
    case = data["point_mass"]
    figure = evidence_figure(case.finding, case.evidence)
    profile = case.evidence.profile
    j = profile.features.index("score")
    drawn = {t.name: np.asarray(t.x) for t in figure.data}
    assert np.allclose(drawn["its most common value"], profile.arrays["top_share"][:, j])
    assert np.allclose(drawn["its maximum"], profile.arrays["max_share"][:, j])
    case = data["duplicates"]
    figure = evidence_figure(case.finding, case.evidence)
    profile = case.evidence.profile
    assert np.allclose(drawn_values(figure), profile.arrays["duplicate_rows"] / profile.rows)
    # a profile without those statistics (sites that did not share them): nothing to draw
    shared = {name: value for name, value in profile.arrays.items() if name != "duplicate_rows"}
    plain = replace(case.evidence, profile=replace(profile, arrays=shared))
    assert view_name(case.finding) == "duplicates" and evidence_figure(case.finding, plain) is None


def test_decimals_are_drawn_as_each_sites_share_of_values_not_whole_numbers(data):
    case = data["precision"]
    figure = evidence_figure(case.finding, case.evidence)
    profile = case.evidence.profile
    j = profile.features.index("age")
    assert np.allclose(drawn_values(figure), 1 - profile.arrays["integer_share"][:, j])
    assert drawn_values(figure)[profile.sites.index(SITE)] == 1.0 and "age" in figure.layout.title.text


def test_a_coarser_step_is_drawn_as_each_sites_share_of_values_on_that_step(data):
    case = data["resolution"]
    figure = evidence_figure(case.finding, case.evidence)
    profile = case.evidence.profile
    j = profile.features.index("systolic")
    assert view_name(case.finding) == "resolution" and "10" in figure.layout.title.text
    # by hand from the histogram: the values whose own step is a multiple of 10, of those not 0
    tens = [k + 2 for k, step in enumerate(RESOLUTION_STEPS) if step >= 10 and round(step / 10) == step / 10]
    shares = profile.arrays["step_shares"][:, :, j]
    assert np.allclose(drawn_values(figure), shares[:, tens].sum(1) / (1 - shares[:, 0]))
    assert drawn_values(figure)[profile.sites.index(SITE)] == pytest.approx(1.0)
    assert max(v for s, v in zip(profile.sites, drawn_values(figure)) if s != SITE) < 0.2


def test_values_along_the_rows_are_drawn_as_each_sites_rank_correlation_with_the_rows_order(data):
    case = data["row_order"]
    figure = evidence_figure(case.finding, case.evidence)
    profile = case.evidence.profile
    j = profile.features.index("glucose")
    assert view_name(case.finding) == "row_order"
    assert np.allclose(drawn_values(figure), profile.arrays["order_correlation"][:, j])
    # the drifting site's bar stands out: a straight drift over 2 SD is a rank correlation near 0.5
    assert drawn_values(figure)[profile.sites.index(SITE)] > 0.4 > max(
        abs(v) for s, v in zip(profile.sites, drawn_values(figure)) if s != SITE)
    assert "glucose" in figure.layout.title.text


def test_at_the_default_policy_every_view_draws_what_the_sites_released_and_names_what_they_did_not():
    """The same planted federations, every site releasing at the default disclosure policy: each data
    view draws; a line of quantiles holds only released ones (never the 1 or 99 %), no box rests on
    a quantile that was not released; and a site whose statistic was withheld is no bar (not 0), the
    title naming it."""
    released = data_cases(DEFAULT_POLICY)
    assert len(released) >= len(data_cases()) - 1  # every kind is found or tested at site 2 but a policy's cost
    for kind, case in released.items():
        figure = evidence_figure(case.finding, case.evidence)
        assert figure is not None, kind
        for trace in figure.data:
            if trace.type == "scatter" and view_name(case.finding) in ("quantiles", "swapped_columns"):
                assert np.isfinite(np.asarray(trace.y, dtype=float)).all(), kind  # released quantiles only
            if trace.type == "box":
                numbers = [trace[key][0] for key in ("lowerfence", "q1", "median", "q3", "upperfence")]
                assert np.isfinite(numbers).all() and numbers == sorted(numbers), kind
    case = released["location"]
    profile = case.evidence.profile
    lines = [t for t in evidence_figure(case.finding, case.evidence).data if t.type == "scatter"]
    assert lines and all(1 not in np.round(t.x) and 99 not in np.round(t.x) for t in lines)
    # a site whose per-class counts were withheld: no bar of its outcomes, named in the title
    balance = released["class_balance"]
    profile = balance.evidence.profile
    small = replace(profile, arrays={**profile.arrays, "class_counts": profile.class_counts.astype(float)})
    small.arrays["class_counts"][0] = np.nan
    figure = evidence_figure(balance.finding, replace(balance.evidence, profile=small))
    assert all(np.isnan(t.x[0]) and np.isfinite(t.x[1:]).all() for t in figure.data)
    assert f"not shared by {profile.sites[0]}" in " ".join(texts(figure))


def test_renamed_classes_of_a_site_split_by_label_are_drawn_as_the_two_classes_difference():
    """Seven sites without some of five classes, 'a' and 'd' exchanged at site 2: the figure draws
    each feature's mean for 'a' minus mean for 'd' in within-class SDs (the class profiles'
    difference), and site 2's points run against the others'."""
    from dashboard.presenters.evidence_views import Evidence
    from fedcore.interpret.data_checks import check_profile
    from fedcore.interpret.findings import decide
    from tests.test_checkup import exchanged, label_skewed

    profile = label_skewed(exchanged)
    finding = next(f for f in decide(check_profile(profile)) if f.kind == "labels_permuted" and f.significant)
    figure = evidence_figure(finding, Evidence(profile, [finding], {}))
    mine = next(t for t in figure.data if t.name == "site 2")
    j = [profile.features.index(name) for name in mine.y]
    difference = relation_to_labels(profile, (0, 3))  # 'a' minus 'd'
    assert np.allclose(mine.x, difference[2, j])
    others = np.nanmedian(np.delete(difference, 2, axis=0), axis=0)[j]
    assert (np.sign(mine.x) != np.sign(others)).mean() >= 0.8
    assert "mean for 'a' minus mean for 'd'" in " ".join(texts(figure))


def test_a_renaming_that_takes_a_class_the_site_has_none_of_draws_that_class_against_one_it_has():
    """Site 2's 'b' rows labelled 'c' (a class it otherwise has none of): the suggested renaming
    'c' -> 'b' leaves no 'c' minus 'b' at site 2, so the figure draws 'c' against another class
    site 2 has. Known answer: site 2's 'c' rows are 'b' rows, so its points follow the others'
    'b' minus that class, not their 'c' minus it."""
    from dashboard.presenters.evidence_views import Evidence
    from fedcore.interpret.data_checks import check_profile
    from fedcore.interpret.findings import decide
    from tests.test_checkup import label_skewed, taken

    profile = label_skewed(taken)
    finding = next(f for f in decide(check_profile(profile)) if f.kind == "labels_permuted" and f.significant)
    figure = evidence_figure(finding, Evidence(profile, [finding], {}))
    assert figure is not None  # it had no figure at all
    mine = next(t for t in figure.data if t.name == "site 2")
    j = [profile.features.index(name) for name in mine.y]
    title = figure.layout.title.text
    other = next(k for k, name in enumerate(profile.classes) if f"tells 'c' from '{name}'" in title)
    assert other not in (1, 2)  # a class site 2 has rows of
    assert np.allclose(mine.x, relation_to_labels(profile, (2, other))[2, j])
    others = np.delete(np.arange(len(profile.sites)), 2)
    as_named = np.nanmedian(relation_to_labels(profile, (2, other))[others], axis=0)[j]
    as_they_are = np.nanmedian(relation_to_labels(profile, (1, other))[others], axis=0)[j]
    assert np.abs(mine.x - as_they_are).mean() < 0.5 * np.abs(mine.x - as_named).mean()


@pytest.mark.parametrize("kind, predicted, observed", [("location_related", "predicted_median", "median"),
                                                       ("spread_related", "predicted_sd", "sd")])
def test_a_feature_against_its_related_features_draws_each_site_against_its_prediction(data, kind, predicted, observed):
    case = data[kind]
    figure = evidence_figure(case.finding, case.evidence)
    assert view_name(case.finding) == "related_features"
    cells = {f.site: f for f in case.evidence.findings if f.kind == kind and f.feature == case.finding.feature}
    site = next(t for t in figure.data if t.name == SITE)
    assert (site.x[0], site.y[0]) == pytest.approx((cells[SITE].evidence[predicted], cells[SITE].evidence[observed]))
    others = next(t for t in figure.data if t.name == "another site")
    assert len(others.x) == len(cells) - 1 and others.marker.color == OTHERS
    expected = sorted((f.evidence[predicted], f.evidence[observed]) for s, f in cells.items() if s != SITE)
    assert np.allclose(sorted(zip(others.x, others.y)), expected)
    # the site lies off the line by its finding's deleted residual; the others near it
    off = abs(site.y[0] - site.x[0])
    assert off > 2 * np.median([abs(y - x) for x, y in zip(others.x, others.y)])
    assert any("related features" in t for t in texts(figure))


@pytest.mark.parametrize("zero_share", [0.25, 1.0])
def test_the_unit_view_draws_the_other_sites_as_the_unit_check_compared_with_them(zero_share):
    """The same four hospitals: h1's unit finding (÷ 4) draws, on the right, h1 converted and the
    others as the unit check compared with them: h3's box from its quantiles without its code
    (named so, its low whisker above 100 rather than at 0) or, never measured, not at all; h0 and
    h2 as they released."""
    from dashboard.presenters.evidence_views import Evidence
    from fedcore.interpret.data_checks import Checks, check_profile
    from tests.test_checkup import four_hospitals

    profile = four_hospitals(0, zero_share=zero_share, factor=0.25)
    findings = check_profile(profile)
    finding = next(f for f in findings if (f.site, f.kind, f.feature) == ("h1", "unit", "chol"))
    figure = evidence_figure(finding, Evidence(profile, findings, {}))
    j = profile.features.index("chol")
    right = {t.y[0]: t for t in figure.data if t.type == "box" and t.xaxis == "x2"}
    note = " ".join(texts(figure))
    if zero_share < 1:
        assert sorted(right) == ["h0", "h1, converted", "h2", "h3, without codes"]
        reference = Checks(profile).reference_quantiles[3, :, j]
        assert right["h3, without codes"].median[0] == pytest.approx(np.interp(0.5, PROBABILITIES, reference))
        assert right["h3, without codes"].lowerfence[0] > 100
        assert "h3, without its missing codes" in note
    else:
        assert sorted(right) == ["h0", "h1, converted", "h2"] and "h3 not drawn on the right" in note
    assert right["h0"].median[0] == profile.quantiles[0, list(PROBABILITIES).index(0.5), j]


@pytest.mark.parametrize("zero_share", [0.25, 1.0])
def test_the_quantiles_view_draws_the_other_sites_as_the_check_compared_with_them(zero_share):
    """Four hospitals, h3's cholesterol 0 for a quarter of its patients (a missing code) or for all
    (never measured), h1's ÷ 4. h1's location view draws h3 as the check compared with it: without
    its code (dotted, its line the corrected quantiles, the note naming it), or not at all (the
    note saying it is not in the others' mean); h0 and h2 as they released."""
    from dashboard.presenters.evidence_views import Evidence
    from fedcore.interpret.data_checks import Checks, check_profile
    from tests.test_checkup import four_hospitals

    profile = four_hospitals(0, zero_share=zero_share, factor=0.25)
    findings = check_profile(profile)
    finding = next(f for f in findings if (f.site, f.kind, f.feature) == ("h1", "location", "chol"))
    figure = evidence_figure(finding, Evidence(profile, findings, {}))
    j = profile.features.index("chol")
    thin = [t for t in figure.data if t.type == "scatter" and t.line.width == 1]
    note = " ".join(texts(figure))
    reference = Checks(profile).reference_quantiles[:, :, j]
    if zero_share < 1:
        assert len(thin) == 3 and [t.line.dash for t in thin] == ["solid", "solid", "dot"]
        assert np.allclose(thin[2].y, reference[3][np.isfinite(reference[3])]) and min(thin[2].y) > 100
        assert "h3 dotted, without its missing codes" in note and "not in the others' mean" not in note
    else:
        assert len(thin) == 2 and "h3 not in the others' mean" in note and "dotted" not in note
    for trace, k in zip(thin, (0, 2)):
        assert np.allclose(trace.y, profile.quantiles[k, :, j][np.isfinite(profile.quantiles[k, :, j])])

