"""A finding of every kind, each with what its evidence view draws from (`dashboard.presenters.evidence_views.
Evidence`), built so that the answer is known: the data lens's from the check-up tests' federations
with one problem planted at 'site 2' (tests/test_checkup.py), the model lenses' from the arrays their
checks read, with one site made to stand out."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from dashboard.presenters.evidence_views import Evidence
from dashboard.presenters.figures import site_colors
from fedcore.interpret import model_checks
from fedcore.interpret.data_checks import check_profile
from fedcore.interpret.disclosure import Policy
from fedcore.interpret.findings import Finding, decide
from fedcore.interpret.profile import Profile, profile_federation
from tests import test_check_registry as registry
from tests import test_checkup as planted
from tests import test_exchanged_columns as exchanged
from tests import test_precision as precision
from tests import test_resolution as resolution
from tests import test_related_features as related
from tests import test_within_classes as within

SITE = "site 2"  # where tests/test_checkup.py plants each problem
MODEL_SITES = [f"hospital {name}" for name in ("Alder", "Birch", "Cedar", "Elm", "Fir", "Oak")]
STANDS_OUT = MODEL_SITES[3]


@dataclass
class Case:
    finding: Finding
    evidence: Evidence
    inputs: dict  # the numbers the view must draw (per kind)


def _data_case(profile: Profile, kind: str, feature: str | None) -> Case:
    findings = decide(check_profile(profile))
    finding = next(f for f in sorted(findings, key=lambda f: f.q) if f.site == SITE and f.kind == kind
                   and (feature is None or f.feature == feature))
    return Case(finding, Evidence(profile, findings, site_colors(profile.sites)), {})


def _category_profile(policy: Policy | None) -> Profile:
    """The ward written as 1 / 2 / 3 at site 2 where the others write icu / med / surg."""
    rng = np.random.default_rng(0)
    features = [*planted.FEATURES, "ward=1", "ward=2", "ward=3"]
    kinds = [*planted.KINDS, "categorical", "categorical", "categorical"]
    columns = [*planted.COLUMNS, "ward", "ward", "ward"]
    sites = []
    for k, name in enumerate(planted.SITES):
        x, y = planted.site_rows(rng)
        codes = np.zeros((len(x), 3))
        if name == SITE:
            x, codes = np.column_stack([x[:, :6], np.zeros((len(x), 3))]), x[:, 6:]
        sites.append((name, np.column_stack([x, codes]), y))
    return profile_federation(sites, features, kinds, columns, ["well", "ill"], policy=policy)


def _distribution_profile(policy: Policy | None) -> Profile:
    """Site 2's f0 shifted by 0.22 SD and 1.22 times as wide: each below its own check's size, the
    distribution as a whole beyond it (tests/test_check_registry.py)."""
    names = ["f0", "f1", "f2"]
    return profile_federation(registry.a_little_of_everything_sites("site "), names, ["continuous"] * 3, names, ["a", "b"], policy=policy)


def _two_units_case(policy: Policy | None) -> Case:
    """Two sites, site 2's cholesterol in mg/dL where the other's is in mmol/L."""
    rng = np.random.default_rng(7)
    rows = [(name, np.abs(rng.normal(5.2, 1.0, (200, 1))), rng.integers(0, 2, 200)) for name in ("site 1", SITE)]
    rows[1][1][:, 0] *= 38.67
    return _data_case(profile_federation(rows, ["cholesterol"], ["continuous"], ["cholesterol"], ["a", "b"],
                                         policy=policy),
                      "unit_pair", "cholesterol")


def data_cases(policy: Policy | None = None) -> dict[str, Case]:
    """kind -> a finding of the data lens at site 2 (where its problem is planted), from the
    statistics as computed (the views' known answers are theirs), or as the sites release them at
    a disclosure `policy` (kinds the policy leaves unfound at site 2 left out)."""
    federation = partial(planted.federation, policy=policy)
    cases = {
        "unit": lambda: _data_case(federation(planted.fahrenheit), "unit", "temperature"),
        "location": lambda: _data_case(federation(planted.shifted), "location", "age"),
        "spread": lambda: _data_case(federation(planted.wider), "spread", "score"),
        "shape": lambda: _data_case(federation(planted.skewed), "shape", "marker"),
        "missing_code": lambda: _data_case(federation(planted.missing_code), "missing_code", "glucose"),
        "swapped_columns": lambda: _data_case(federation(planted.swapped), "swapped_columns", "age"),
        "missingness": lambda: _data_case(federation(planted.more_missing), "missingness", "score"),
        "missing_by_class": lambda: _data_case(federation(planted.missing_by_class), "missing_by_class", "marker"),
        "category_codes": lambda: _data_case(_category_profile(policy), "category_codes", "ward"),
        "label_relation": lambda: _data_case(federation(planted.flipped), "label_relation", "marker"),
        "labels_permuted": lambda: _data_case(federation(planted.flipped), "labels_permuted", None),
        "labels_weak": lambda: _data_case(federation(planted.noisy), "labels_weak", None),
        "class_shift": lambda: _data_case(planted.four_class_federation(1.5, policy=policy), "class_shift", "x3"),
    }
    # the kinds of the check registry (issue 23), each from its known-answer federation
    for kind in ("constant", "point_mass", "duplicates", "class_balance", "range", "correlation", "copied_column",
                 "category_share", "row_order"):
        problem, feature = registry.KNOWN_ANSWERS[kind]
        cases[kind] = lambda problem=problem, kind=kind, feature=feature: _data_case(
            registry.federation(problem, policy=policy), kind, feature)
    # channels of one scale in groups that relate differently, a1 and b1 exchanged at site 2
    cases["exchanged_columns"] = lambda: _data_case(exchanged.federation(exchanged.exchanged(0, 3), policy=policy),
                                                     "exchanged_columns", "a1")
    cases["distribution"] = lambda: _data_case(_distribution_profile(policy), "distribution", "f0")
    cases["unit_pair"] = lambda: _two_units_case(policy)
    # twelve sites whose own differences hide the change from the plain checks
    cases["location_related"] = lambda: _data_case(related.federation(related.shifted, policy=policy),
                                                    "location_related", "f1")
    cases["spread_related"] = lambda: _data_case(related.federation(related.wider, policy=policy), "spread_related", "f1")
    # eight sites of one population in other class mixes (label skew), whose mix hides the change
    cases["location_within"] = lambda: _data_case(within.skewed_federation(within.shifted, policy=policy)[0],
                                                   "location_within", "f1")
    cases["spread_within"] = lambda: _data_case(within.skewed_federation(within.wider, policy=policy)[0],
                                                 "spread_within", "f2")
    # site 2 holding mostly one class of three, its values within each class the others'
    cases["class_mix"] = lambda: _data_case(within.mixed_differently(policy=policy), "class_mix", "f1")
    # ages with decimals at site 2, where the others record whole years
    cases["precision"] = lambda: _data_case(precision.federation(precision.age_from_birth_dates, policy=policy),
                                            "precision", "age")
    # systolic pressures read to 10 mmHg at site 2, where the others record them to 1
    cases["resolution"] = lambda: _data_case(precision.federation(resolution.rounded(1, 10.0), policy=policy),
                                             "resolution", "systolic")
    out = {}
    for kind, case in cases.items():
        try:
            out[kind] = case()
        except StopIteration:  # no cell of that kind at site 2 (a policy withheld what it reads)
            if policy is None:
                raise
    return out


def model_cases() -> dict[tuple[str, str], Case]:
    """(lens, kind) -> a model lens's finding at STANDS_OUT, with every site's cell of its check."""
    rng = np.random.default_rng(7)
    n = len(MODEL_SITES)
    colors = site_colors(MODEL_SITES)
    s = MODEL_SITES.index(STANDS_OUT)
    replicates = 1.0 + rng.normal(0, 0.05, (3, n, 4))
    replicates[:, s, 2] -= 0.6  # its input scale of f2
    w_out = np.array([[1.1], [0.9], [1.0], [-0.8], [1.05], [0.95]])
    auc = [0.91, 0.88, 0.93, 0.07, 0.9, 0.86]
    accuracy = [0.82, 0.80, 0.83, 0.35, 0.81, 0.79]
    distance = np.full((n, n), 1.0) + rng.normal(0, 0.05, (n, n))
    distance = (distance + distance.T) / 2
    distance[s, :] = distance[:, s] = 4.0
    np.fill_diagonal(distance, 0)
    stamp = [0.05, 0.1, 0.08, 0.7, 0.04, 0.06]
    checks = {
        ("feature shifts", "feature_shift"): (
            model_checks.feature_shifts({"w_in": replicates}, MODEL_SITES, ["f0", "f1", "f2", "f3"], "run-a, run-b"),
            {"values": replicates.mean(0)[:, 2], "errors": replicates.std(0, ddof=1)[:, 2], "reference": 1.0}),
        ("labels", "output_shift"): (model_checks.output_layer(w_out, MODEL_SITES, "run-a"),
                                     {"values": w_out[:, 0], "reference": 0.0}),
        ("labels", "shared_model_reversed"): (model_checks.shared_model_auc(auc, [40] * n, [60] * n, MODEL_SITES, "run-c"),
                                        {"values": auc, "reference": 0.5}),
        ("contribution", "low_contribution"): (model_checks.contribution(accuracy, MODEL_SITES, "run-d"),
                                               {"values": accuracy}),
        ("similarity", "distant"): (model_checks.similarity(distance, MODEL_SITES, "run-e"),
                                    {"values": [np.delete(distance[i], i).mean() for i in range(n)]}),
        ("prototypes", "prototype_on_stamp"): (model_checks.prototypes(stamp, MODEL_SITES, "run-f"), {"values": stamp}),
    }
    cases = {}
    for key, (found, inputs) in checks.items():
        decided = decide(found)
        finding = next(f for f in decided if f.site == STANDS_OUT and (key[1] != "feature_shift" or f.feature == "f2"))
        cases[key] = Case(finding, Evidence(None, decided, colors), inputs)
    return cases
