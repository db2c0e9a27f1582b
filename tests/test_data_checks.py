"""The data checks' rules against known answers: unit factors (and what sampling allows), duplicate
and overlapping sites, label codings, far-off values, the last guard before training, the
mixed-delimiter rule's false alarms, and the parse cache's copies."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from data_adapters.alignment import unit_differences as units
from data_adapters.tables import text_tables
from data_adapters.assembly.assemble import check_model_inputs
from data_adapters.tables.columns import EXTREME_IQRS, extreme_rows
from data_adapters.alignment.duplicates import duplicate_sites, row_fingerprints
from data_adapters.alignment.targets import label_problems, single_site_classes
from fedcore.errors import DataError
from fedcore.interpret import unit_conversions as catalogue


def positive(rng, n, median, sd):
    return np.abs(rng.normal(median, sd, n))


@pytest.mark.parametrize(("factor", "what"), units.KNOWN_FACTORS)
def test_every_known_unit_factor_is_found_between_two_sites_and_named(factor, what):
    rng = np.random.default_rng(int(factor * 1000))
    site = positive(rng, 200, 50.0, 8.0)
    other = positive(rng, 200, 50.0, 8.0) * factor
    findings = units.unit_differences({"lab": {"a": site, "b": other}}, ["a", "b"])
    assert len(findings) == 1 and findings[0]["sites"] == ["b", "a"]  # the larger values first, no culprit named
    assert what in findings[0]["conversions"] and abs(findings[0]["factor"] / factor - 1) < 0.12
    assert "cannot tell which site's unit is the intended one" in units.unit_message(findings[0])


def test_fahrenheit_against_celsius_is_found_as_an_affine_unit():
    rng = np.random.default_rng(5)
    celsius = rng.normal(37.0, 0.5, 300)
    fahrenheit = rng.normal(37.0, 0.5, 300) * 1.8 + 32
    (finding,) = units.unit_differences({"temp": {"c": celsius, "f": fahrenheit}}, ["c", "f"])
    assert finding["sites"] == ["f", "c"] and units.FAHRENHEIT in finding["conversions"]


def test_sites_with_different_patient_mixes_are_not_called_a_unit_difference():
    """Medians up to ±30 % apart, spreads up to ±50 %, sizes 20 to 400: 300 pairs, no finding."""
    rng = np.random.default_rng(0)
    findings = []
    for _ in range(300):
        median, sd = rng.uniform(1, 500), rng.uniform(0.05, 0.4)
        a = positive(rng, int(rng.integers(20, 400)), median, sd * median)
        b = positive(rng, int(rng.integers(20, 400)), median * rng.uniform(0.7, 1.3), sd * median * rng.uniform(0.5, 1.5))
        findings += units.unit_differences({"x": {"a": a, "b": b}}, ["a", "b"])
    assert findings == []


def test_signed_or_centred_columns_are_not_compared():
    rng = np.random.default_rng(1)
    z = rng.normal(0, 1, 200)
    assert units.unit_differences({"z": {"a": z, "b": z * 10}}, ["a", "b"]) == []


def test_the_spread_tolerance_is_what_sampling_gives():
    """The log ratio of two normal samples' IQRs (n = 40 each) has sd IQR_LOG_SD * sqrt(2 / 40):
    measured over 4000 pairs, within 8 %."""
    rng = np.random.default_rng(2)
    samples = rng.normal(0, 1, (4000, 2, 40))
    q25, q75 = np.percentile(samples, (25, 75), axis=2)
    measured = np.log((q75 - q25)[:, 0] / (q75 - q25)[:, 1]).std()
    assert measured == pytest.approx(catalogue.IQR_LOG_SD * math.sqrt(2 / 40), rel=0.08)
    assert catalogue.spread_tolerance(40, 40) == pytest.approx(catalogue.SPREAD_SDS * measured, rel=0.08)
    floor = math.log(1 + catalogue.PAIR_SPREAD_TOLERANCE)
    assert catalogue.spread_tolerance(10_000, 10_000) == floor  # large samples: the floor


def fingerprints(frames: dict[str, pd.DataFrame]) -> dict[str, np.ndarray]:
    return {site: row_fingerprints([f[c].to_numpy() for c in f.columns if c != "y"], f["y"].to_numpy())
            for site, f in frames.items()}


def test_duplicate_and_overlapping_sites():
    rng = np.random.default_rng(3)
    a = pd.DataFrame({"x": rng.normal(size=50), "t": rng.choice(np.array(["p", "q"], dtype=object), 50),
                      "y": rng.integers(0, 2, 50)})
    same = a.sample(frac=1.0, random_state=1)  # the same rows in another order
    part = pd.concat([a.iloc[:35], pd.DataFrame({"x": rng.normal(size=15), "t": "p", "y": 1})], ignore_index=True)
    apart = pd.DataFrame({"x": rng.normal(size=50), "t": "q", "y": rng.integers(0, 2, 50)})
    found = duplicate_sites(fingerprints({"a": a, "same": same, "part": part, "apart": apart}))
    assert [(f["sites"], f["kind"], f["shared"], f["blocking"]) for f in found] == [
        (["a", "same"], "same", 50, True), (["a", "part"], "overlap", 35, False), (["same", "part"], "overlap", 35, False)]
    assert found[0]["rows"] == [50, 50]


def test_identical_low_information_sites_are_flagged_not_refused():
    """Two yes/no columns: 4 possible rows, so equal counts at two sites can be chance."""
    a = pd.DataFrame({"x": [0.0, 1.0] * 20, "y": [0, 0, 1, 1] * 10})
    (finding,) = duplicate_sites(fingerprints({"a": a, "b": a.copy()}))
    assert finding["kind"] == "same" and not finding["blocking"]


def labels(*values):
    return pd.Series(list(values), index=range(len(values)), dtype=object)


FILES = {"a": "a.csv", "b": "b.csv"}


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        (("0", "1"), ("no", "yes"), "mixes number codes and words (a.csv: '0', '1'; b.csv: 'no', 'yes')"),
        (("0", "1"), ("0", "inf"), "b.csv: the target 'y' holds an infinite number at data row(s) 2 ('inf')"),
        (("0", "1"), ("0", "-inf"), "holds an infinite number at data row(s) 2 ('-inf')"),
        (("0", "1"), ("0", "1\x1b"), "b.csv: the target 'y' holds a control character (damage in the file?) at data "
                                     "row(s) 2 ('1\\x1b')"),
        (("yes", "no"), ("Yes", "no"), "spells one class several ways: 'Yes' at b.csv; 'yes' at a.csv"),
        (("1", "2"), ("3", "4"), "b.csv (site 'b') shares no class of the target 'y' with the other sites"),
    ],
)
def test_label_codings_that_cannot_be_one_set_of_classes(a, b, message):
    problems = label_problems("y", {"a": labels(*a), "b": labels(*b)}, FILES)
    assert any(message in p for p in problems), problems


def test_agreeing_labels_and_a_rare_class():
    assert label_problems("y", {"a": labels("0", "1"), "b": labels("1", "0", "1")}, FILES) == []
    y = {"a": np.array([0, 1, 0]), "b": np.array([0, 1, 2, 2])}
    rows = {"a": pd.RangeIndex(3), "b": pd.Index([4, 6, 7, 9])}
    (warning,) = single_site_classes("y", ["0", "1", "2"], y, rows, FILES)
    assert warning.startswith("Class '2' of the target 'y' is only at b.csv (site 'b', 2 row(s): data row(s) 8, 10)")


def test_far_off_values_by_the_iqr_rule():
    # 1 … 19 and one value at each end: sorted, the median is the 11th value (10), the quartiles
    # the 6th and 16th (5 and 15), so the IQR is 10 and 'far' is beyond 10 ± 1000 × 10.
    values = np.array([*range(1, 20), 10 + EXTREME_IQRS * 10 + 1, 10 - EXTREME_IQRS * 10 + 1, np.nan])
    extreme, median = extreme_rows(values)
    assert median == 10 and np.flatnonzero(extreme).tolist() == [19]
    assert not extreme_rows(np.array([5.0] * 9 + [1e9]))[0].any()  # no spread: nothing to be far on
    assert not extreme_rows(np.array([1.0, 1e9]))[0].any()  # too few values


def test_the_last_guard_names_the_site_and_feature():
    x = np.zeros((4, 3))
    check_model_inputs("a", x, ["p", "q", "r"])
    x[2, 1] = np.inf
    x[0, 2] = 1e39  # finite in float64, infinite in float32
    with pytest.raises(DataError, match=r"Site 'a': 2 input value\(s\) of feature\(s\) 'q', 'r' are not finite 32-bit"):
        check_model_inputs("a", x, ["p", "q", "r"])


def test_free_text_with_semicolons_and_an_empty_last_cell_is_no_mixed_delimiter():
    data = b"id,note,age,outcome\n1,took aspirin; stopped,50,\n2,none,61,1\n3,\"a;b;c\",40,0\n"
    table = text_tables.parse_text_table(data, "notes.csv", 10_000)
    assert table.frame["note"].tolist() == ["took aspirin; stopped", "none", "a;b;c"]


def test_the_parse_cache_hands_out_copies(monkeypatch):
    monkeypatch.setattr(text_tables, "PARSED", text_tables.ParsedTables(max_entries=4))
    data = b"a,b,outcome\n1,2,0\n3,4,1\n"
    first = text_tables.parse_text_table(data, "t.csv", 10_000)
    first.frame.loc[0, "b"] = 99  # the first caller edits the frame it was handed ...
    first.frame = first.frame.rename(columns={"a": "renamed"})  # ... and replaces it, as the HAR reader does
    first.warnings.append("changed")
    again = text_tables.parse_text_table(data, "t.csv", 10_000)
    assert list(again.frame.columns) == ["a", "b", "outcome"] and again.frame.loc[0, "b"] == 2 and not again.warnings
    assert text_tables.parse_text_table(data, "other.csv", 10_000).file == "other.csv"  # the label is part of the key


def lab_sites(rng, n=150, median=5.2, sd=1.0):
    return {site: positive(rng, n, median, sd) for site in ("north", "south", "east", "west")}


def test_with_three_or_more_sites_the_one_site_in_another_unit_is_named_with_its_conversion():
    """Cholesterol in mg/dL at 'west' only: one finding, naming west and × 1/38.67 back to mmol/L;
    no pairwise finding for the column (it would name every pair with west)."""
    rng = np.random.default_rng(11)
    at = lab_sites(rng)
    at["west"] = at["west"] * 38.67
    findings = units.unit_differences({"cholesterol": at}, list(at))
    assert [(f["column"], f["site"]) for f in findings] == [("cholesterol", "west")]
    (finding,) = findings
    assert finding["a"] == pytest.approx(1 / 38.67) and finding["b"] == 0
    assert finding["conversion"] == "cholesterol mg/dL ↔ mmol/L"
    assert "west's cholesterol looks like mg/dL where the others use mmol/L" in units.unit_message(finding)


def test_sites_in_one_unit_get_no_unit_finding_and_an_unnamed_analyte_factor_is_not_named():
    rng = np.random.default_rng(12)
    assert units.unit_differences({"cholesterol": lab_sites(rng)}, ["north", "south", "east", "west"]) == []
    at = lab_sites(rng)
    at["west"] = at["west"] * 38.67
    (finding,) = units.unit_differences({"marker": at}, list(at))  # no analyte named: a bare factor
    assert finding["site"] == "west" and finding["conversion"] is None and "no known unit conversion" in finding["message"]


def test_fahrenheit_at_one_of_four_sites_is_converted_affinely():
    rng = np.random.default_rng(13)
    at = {site: rng.normal(37.0, 0.6, 200) for site in ("a", "b", "c", "d")}
    at["c"] = at["c"] * 1.8 + 32
    (finding,) = units.unit_differences({"temp": at}, list(at))
    assert finding["site"] == "c" and finding["a"] == pytest.approx(5 / 9) and finding["b"] == pytest.approx(-160 / 9)


def test_two_sites_in_each_unit_name_no_culprit_but_the_pairs():
    rng = np.random.default_rng(14)
    at = lab_sites(rng)
    at["east"], at["west"] = at["east"] * 38.67, at["west"] * 38.67
    findings = units.unit_differences({"cholesterol": at}, list(at))
    assert findings and all("site" not in f for f in findings)
    assert {tuple(sorted(f["sites"])) for f in findings} == {("east", "north"), ("east", "south"), ("north", "west"),
                                                             ("south", "west")}


def test_the_median_along_the_first_axis_is_numpys_nanmedian():
    """`median_along_first` (the quantile distances' median, from one sort) by hand, and equal to
    np.nanmedian(axis=0) on random arrays with NaN and infinities."""
    import warnings

    from fedcore.interpret.data_checks import median_along_first

    values = np.array([[1.0, np.nan, 3.0], [5.0, np.nan, np.nan], [2.0, np.nan, 4.0], [4.0, np.nan, 10.0]])
    assert np.array_equal(median_along_first(values), [3.0, np.nan, 4.0], equal_nan=True)
    rng = np.random.default_rng(0)
    for _ in range(300):
        x = rng.normal(size=(rng.integers(1, 25), rng.integers(1, 12))) * 10.0 ** rng.integers(-3, 4)
        x[rng.random(x.shape) < rng.random()] = np.nan
        x[rng.random(x.shape) < 0.05] = np.inf
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column
            expected = np.nanmedian(x, axis=0)
        assert np.array_equal(median_along_first(x), expected, equal_nan=True)
