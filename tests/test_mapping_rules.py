"""The mapping step's rules that read the values (`data_adapters.mapping.value_rules`), what a decision says
it changes (`dictionary.effects`), renames that would lose a column, the dictionary on a server's
test file and on a Flower server's data, and the target's candidates — each on data made so that
the answer is known, with the cases where the data cannot decide asked, never pre-filled."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from data_adapters import load_federation
from data_adapters.alignment.align import Alignment, SiteTable, TableSites
from data_adapters.mapping.dictionary import FORMAT, apply_dictionary, effects
from data_adapters.mapping.study_view import target_choices
from data_adapters.mapping.suggestions import decision, suggest
from fedcore.errors import DataError
from fedcore.interpret.unit_conversions import CONVERSIONS

CHOL = next(c for c in CONVERSIONS if c.source == "mg/dL" and c.target == "mmol/L" and "cholesterol" in c.analytes)


def clinic(seed: int, n: int = 200, **columns) -> pd.DataFrame:
    """chol (mmol/L) and hr raise or lower the chance of y = 1; age unrelated."""
    rng = np.random.default_rng(seed)
    chol = np.round(rng.normal(5.4, 1.0, n), 2)
    hr = np.round(rng.normal(140, 20, n))
    y = ((chol - 5.4) - 0.04 * (hr - 140) + rng.normal(0, 0.7, n) > 0).astype(int)
    frame = pd.DataFrame({"age": np.round(rng.normal(55, 9, n)), "chol": chol, "hr": hr, "y": y})
    for name, make in columns.items():
        frame[name] = make(rng, frame)
    return frame


def run(frames: dict[str, pd.DataFrame], content: dict | None = None, target: str = "y"):
    sites = TableSites("t", "", "test", [SiteTable(s, f"{s}.csv", f) for s, f in frames.items()], target)
    if content:
        sites = apply_dictionary(sites, content)
    alignment = Alignment(sites)
    return sites, suggest(sites, alignment)


def decided(found, kind):
    return sorted((s.site, s.column, s.value) for s in found if s.kind == kind and not s.question)


def asked(found, kind):
    return sorted((s.site, s.column) for s in found if s.kind == kind and s.question)


# -- missing values -----------------------------------------------------------------------------------------
def test_a_column_one_site_never_measured_is_missing_there_and_does_not_hide_the_others_units_or_codes():
    frames = {s: clinic(k) for k, s in enumerate("abcd")}
    frames["b"]["chol"] = 0.0  # never measured: 0 for every patient
    frames["c"]["chol"] = np.where(np.arange(200) % 5 == 0, 0.0, frames["c"]["chol"] / CHOL.a)  # mg/dL, 0 = unknown
    _, found = run(frames)
    assert decided(found, "missing") == [("b", "chol", "0"), ("c", "chol", "0")]
    (unit,) = [s for s in found if s.kind == "convert"]  # a and d agree: c is the odd one out, in mg/dL
    assert (unit.site, unit.question) == ("c", False) and unit.patch["sites"]["c"]["convert"]["chol"]["a"] == CHOL.a


def test_a_value_common_at_other_sites_is_no_code_even_when_one_site_has_only_it():
    def vessels(rng, f):
        return rng.choice([0, 0, 0, 1, 2, 3], len(f))
    frames = {s: clinic(k, vessels=vessels) for k, s in enumerate("abc")}
    frames["c"]["vessels"] = 0  # every patient 0 vessels: a real value elsewhere (ca = 0)
    assert decided(run(frames)[1], "missing") == []


def test_a_code_in_a_categorical_or_binary_column_is_missing_not_a_category():
    frames = {s: clinic(k, exang=lambda rng, f: rng.integers(0, 2, len(f)),
                        pain=lambda rng, f: rng.choice(["typical", "atypical", "none"], len(f))) for k, s in enumerate("abc")}
    frames["b"].loc[::10, "exang"] = -9
    frames["c"].loc[::12, "pain"] = "unknown"
    _, found = run(frames)
    assert decided(found, "missing") == [("b", "exang", "-9"), ("c", "pain", "unknown")]


def test_a_site_with_a_coding_of_its_own_is_mapped_not_stripped_of_its_zeros():
    frames = {s: clinic(k, smoker=lambda rng, f: rng.choice(["no", "yes"], len(f))) for k, s in enumerate("abc")}
    frames["c"]["smoker"] = frames["c"]["smoker"].map({"no": 0, "yes": 1})
    _, found = run(frames)
    assert decided(found, "missing") == [] and decided(found, "values") == [("c", "smoker", "0=no; 1=yes")]


# -- units -----------------------------------------------------------------------------------------------------
def test_the_factor_is_chosen_by_the_values_tenths_are_divided_by_ten_not_a_hundred():
    frames = {s: clinic(k) for k, s in enumerate("abcd")}
    frames["d"]["age"] = frames["d"]["age"] * 10  # tenths of a year
    (unit,) = [s for s in run(frames)[1] if s.kind == "convert"]
    if unit.question:  # ÷ 10 against ÷ 12 can be too close to call: then both are offered, ÷ 10 among them
        assert any(abs(o["patch"]["sites"]["d"]["convert"]["age"]["a"] - 0.1) < 1e-12 for o in unit.options)
    else:
        assert unit.patch["sites"]["d"]["convert"]["age"]["a"] == pytest.approx(0.1)
    assert "÷ 100" not in [o["label"].split(" (")[0] for o in unit.options]


def test_no_factor_for_a_code_column_or_against_a_median_of_zero():
    frames = {s: clinic(k, grade=lambda rng, f: rng.choice([0, 0, 0, 1, 2], len(f))) for k, s in enumerate("abcd")}
    frames["d"]["grade"] = frames["d"]["grade"] * 1000  # looks like × 1000, but a 0/1/2 code has no unit
    assert [s for s in run(frames)[1] if s.kind == "convert"] == []


def test_no_factor_against_a_median_of_zero_a_mostly_zero_column_has_no_unit_to_read():
    def bleeds(rng, f):  # 0 for most patients: the quantiles hold a few distinct values only
        return np.where(rng.random(len(f)) < 0.85, 0.0, np.round(rng.lognormal(0, 1, len(f)), 2))
    frames = {s: clinic(k, bleeds=bleeds) for k, s in enumerate("abcd")}
    frames["d"]["bleeds"] = frames["d"]["bleeds"] * 1000
    assert [s for s in run(frames)[1] if s.kind == "convert"] == []


def test_no_factor_from_step_shaped_quantiles_the_check_up_s_rule_for_discrete_columns():
    def steps(rng, f):  # nearly all at 1 or 2: the quantiles take three values
        return np.where(rng.random(len(f)) < 0.97, rng.choice([1.0, 2.0], len(f)), np.round(rng.uniform(0, 10, len(f)), 1))
    frames = {s: clinic(k, n=300, steps=steps) for k, s in enumerate("abcd")}
    frames["d"]["steps"] = frames["d"]["steps"] / 0.45359237  # × 2.2 fits (lb against kg): read from three values
    assert [s for s in run(frames)[1] if s.kind == "convert"] == []


def test_two_junk_cells_left_where_a_site_s_column_was_never_measured_do_not_make_the_column_a_code():
    frames = {s: clinic(k) for k, s in enumerate("abcde")}
    frames["d"]["chol"] = frames["d"]["chol"] / CHOL.a  # mg/dL
    frames["b"]["chol"] = [np.nan] * 198 + ["n.v.", "??"]  # nothing measured but two junk cells: no coding
    (unit,) = [s for s in run(frames)[1] if s.kind == "convert"]
    assert (unit.site, unit.question) == ("d", False) and unit.patch["sites"]["d"]["convert"]["chol"]["a"] == CHOL.a


def test_sites_split_in_two_units_are_asked_which_is_the_study_s():
    frames = {s: clinic(k) for k, s in enumerate("abcd")}
    for site in "cd":
        frames[site]["chol"] = frames[site]["chol"] / CHOL.a
    (unit,) = [s for s in run(frames)[1] if s.kind == "convert"]
    assert unit.question and unit.site is None and len(unit.options) == 2
    assert {tuple(o["patch"]["sites"]) for o in unit.options} == {("c", "d"), ("a", "b")}


def test_a_factor_no_conversion_explains_is_asked_not_pre_filled():
    frames = {s: clinic(k) for k, s in enumerate("abcd")}
    frames["c"]["hr"] = frames["c"]["hr"] * 6.3
    found = [s for s in run(frames)[1] if s.kind == "convert"]
    assert [(s.site, s.question, s.patch) for s in found] == [("c", True, {})]


def test_the_analyte_the_column_names_beats_factors_that_fit_about_as_well():
    lactate = next(c for c in CONVERSIONS if "lactate" in c.analytes and c.source == "mg/dL")
    frames = {s: clinic(k, lactate=lambda rng, f: np.round(rng.lognormal(0.4, 0.45, len(f)), 2)) for k, s in enumerate("abcd")}
    frames["d"]["lactate"] = np.round(frames["d"]["lactate"] / lactate.a, 1)  # mg/dL: × 9.01, about × 10 (or kPa)
    (unit,) = [s for s in run(frames)[1] if s.kind == "convert"]
    assert (unit.site, unit.question) == ("d", False) and unit.patch["sites"]["d"]["convert"]["lactate"]["a"] == lactate.a


# -- which column a site's column is -----------------------------------------------------------------------
def test_a_column_at_one_site_only_is_matched_to_the_column_missing_only_there():
    frames = {s: clinic(k) for k, s in enumerate("abcd")}
    frames["c"] = frames["c"].rename(columns={"hr": "Max HR"})
    frames["d"] = frames["d"].rename(columns={"hr": "max_heart_rate"})
    assert decided(run(frames)[1], "rename") == [("c", "Max HR", "hr"), ("d", "max_heart_rate", "hr")]


def test_no_match_by_data_where_the_relation_to_the_label_differs_or_two_columns_fit():
    frames = {s: clinic(k) for k, s in enumerate("abcd")}
    unrelated = frames["d"].rename(columns={"hr": "pulse_rest"})
    unrelated["pulse_rest"] = np.random.default_rng(9).permutation(unrelated["pulse_rest"].to_numpy())
    _, found = run({**frames, "d": unrelated})
    assert decided(found, "rename") == [] and asked(found, "rename") == [("d", "pulse_rest")]  # its values alone: asked
    (question,) = [s for s in found if s.kind == "rename"]
    assert "relates to the label otherwise" in question.message
    assert [o["patch"] for o in question.options] == [{"sites": {"d": {"rename": {"pulse_rest": "hr"}}}}]
    elsewhere = frames["d"].rename(columns={"hr": "pulse_rest"}).assign(pulse_rest=lambda f: f["pulse_rest"] + 200)
    assert [s for s in run({**frames, "d": elsewhere})[1] if s.kind == "rename"] == []  # nor its values: nothing
    twins = {s: f.assign(hr2=f["hr"]) for s, f in frames.items()}
    twins["d"] = twins["d"].drop(columns=["hr", "hr2"]).assign(x=frames["d"]["hr"])
    _, found = run(twins)
    assert decided(found, "rename") == [] and asked(found, "rename") == [("d", "x")]


# -- kinds, codings ------------------------------------------------------------------------------------------
def test_two_codes_are_paired_by_share_and_label_rate_or_asked():
    def sex(rng, f):
        return np.where(rng.random(len(f)) < np.where(f["y"] == 1, 0.85, 0.35), "M", "F")
    frames = {s: clinic(k, n=300, sex=sex) for k, s in enumerate("abcd")}
    frames["d"]["sex"] = frames["d"]["sex"].map({"M": 1, "F": 0})
    assert decided(run(frames)[1], "values") == [("d", "sex", "0=F; 1=M")]
    even = {s: f.assign(sex=np.random.default_rng(k).choice(["M", "F"], len(f))) for k, (s, f) in enumerate(frames.items())}
    even["d"]["sex"] = even["d"]["sex"].map({"M": 1, "F": 0})
    _, found = run(even)
    assert decided(found, "values") == [] and asked(found, "values") == [("d", "sex")]


# -- what a decision changes; renames that would lose a column ----------------------------------------------
def test_each_decision_says_what_it_changes_before_it_applies():
    frame = pd.DataFrame({"Age": [61, 999, 47, 999], "sex": ["M", "F", "M", "x"], "chol": [5.0, 6.0, 0.0, 7.0],
                          "y": ["yes", "no", "no", "yes"]})
    sites = TableSites("t", "", "test", [SiteTable("south", "south.csv", frame)], "y")
    assert effects(sites, decision("missing", "south", "Age", "999")) == [
        "2 value(s) at south become missing (50% of its 'Age')."]
    assert effects(sites, decision("values", "south", "sex", "M=1; F=0")) == ["At south, 'sex': 2 'M' → '1', 1 'F' → '0'."]
    assert effects(sites, decision("convert", "south", "chol", "38.67, 0")) == [
        "4 values of 'chol' at south are converted: median 5.5 → 212.7."]
    assert effects(sites, decision("rename", "south", "Age", "sex"))[0].startswith("Refused: south already has a column 'sex'")
    assert effects(sites, {"sites": {"south": {"positive": ["yes"]}}}) == [
        "At south, 2 row(s) (yes) become '1' and 2 '0'."]


def test_a_rename_onto_a_column_the_site_keeps_is_refused_naming_site_and_columns():
    frames = {"a": clinic(0), "b": clinic(1).rename(columns={"hr": "Max HR"}).assign(hr=1.0)}
    with pytest.raises(DataError, match=r"site 'b' \(b.csv\): renames 'Max HR' to 'hr', a column the site already has"):
        run(frames, {"format": FORMAT, "sites": {"b": {"rename": {"Max HR": "hr"}}}})
    sites, _ = run(frames, {"format": FORMAT, "sites": {"b": {"rename": {"Max HR": "hr", "hr": "hr_old"}}}})
    assert sites.tables[1].frame["hr"].tolist() == frames["b"]["Max HR"].tolist()  # renamed away first: allowed
    sites, _ = run(frames, {"format": FORMAT, "sites": {"b": {"rename": {"Max HR": "hr", "hr": "hr"}}}})
    assert sites.tables[1].frame["hr"].tolist() == frames["b"]["Max HR"].tolist()  # both named: merged


def test_the_report_hints_at_one_column_spelled_otherwise_by_the_rename_rule_s_name_key():
    frames = {"a": clinic(0), "b": clinic(1), "c": clinic(2).rename(columns={"age": "Âge (years)", "hr": "Pulse"})}
    sites, found = run(frames)
    hints = [w for w in Alignment(sites).report.warnings if "spelled differently" in w]
    assert hints == ["These look like one column spelled differently at different sites: 'Pulse' (c), 'hr' (a, b); "
                     "rename them to one spelling to use the column.",
                     "These look like one column spelled differently at different sites: 'age' (a, b), "
                     "'Âge (years)' (c); rename them to one spelling to use the column."]
    assert decided(found, "rename") == [("c", "Pulse", "hr"), ("c", "Âge (years)", "age")]  # the same rule renames


# -- the server's data ---------------------------------------------------------------------------------------------
def test_the_dictionary_maps_a_server_test_file_by_the_entry_named_after_it(tmp_path):
    paths = []
    for k, site in enumerate(("north", "south", "server")):
        frame = clinic(k)
        if site == "server":
            frame = frame.rename(columns={"age": "Age"})
            frame.loc[::7, "chol"] = -1
        paths.append(tmp_path / f"{site}.csv")
        frame.to_csv(paths[-1], index=False)
    dictionary = tmp_path / "study.dictionary.json"
    dictionary.write_text('{"format": "%s", "sites": {"server": {"rename": {"Age": "age"}, "missing": {"chol": [-1]}}}}'
                          % FORMAT)
    ref = {"source": "csv", "files": [str(p) for p in paths[:2]], "target": "y", "server_test": str(paths[2])}
    with pytest.raises(DataError, match="no column 'age'|lacks|age"):
        load_federation(ref)
    federation = load_federation({**ref, "dictionary": str(dictionary)})
    x, _ = federation.server_test
    assert federation.feature_names == ["age", "chol", "hr"] and x.shape[0] == 200


def test_a_flower_server_s_data_is_mapped_by_the_sites_dictionary(tmp_path):
    from application.flower.server import _server_test
    from fedcore.store import FlowerReference

    for k, site in enumerate(("north", "server")):
        frame = clinic(k)
        (frame.rename(columns={"age": "Age"}) if site == "server" else frame).to_csv(tmp_path / f"{site}.csv", index=False)
    dictionary = {"format": FORMAT, "target": {"column": "y"}, "sites": {"server": {"rename": {"Age": "age"}}}}
    site = load_federation({"source": "csv", "files": [str(tmp_path / "north.csv")], "target": "y"})
    description = {"feature_names": site.feature_names, "class_names": site.class_names,
                   "preprocessing": {"dictionary": {"content": dictionary}}}
    server_data = {"source": "csv", "files": [str(tmp_path / "server.csv")], "target": "y"}  # no dictionary of its own
    reference = FlowerReference(superlink="127.0.0.1:9092", server_data=server_data)
    x, y = _server_test(reference, description, 0)
    assert x.shape == (200, 3) and len(y) == 200
    with pytest.raises(DataError):
        _server_test(reference, {**description, "preprocessing": {}}, 0)


# -- the target's candidates ----------------------------------------------------------------------------------
def test_the_target_is_offered_with_every_site_s_spelling_when_one_site_spells_it_otherwise():
    frames = {s: clinic(k).rename(columns={"y": "disease"}) for k, s in enumerate("abc")}
    frames["c"] = frames["c"].rename(columns={"disease": "Disease"})
    sites = TableSites("t", "", "test", [SiteTable(s, f"{s}.csv", f) for s, f in frames.items()], "disease")
    choices = {c["name"]: c["spellings"] for c in target_choices(sites)}
    assert choices["disease"] == {"a": "disease", "b": "disease", "c": "Disease"}
    assert list(choices)[0] == "disease"  # few values, every site: first
