"""The data dictionary and the mapping step's suggestions against known answers: each rule on data
built so the answer is known, and where the data leave a doubt, no suggestion; the dictionary's
validation messages; applying it leaves the source alone; the CLI's draft gives the harmonised
federation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from data_adapters import draft_dictionary, load_federation, mapping
from data_adapters.alignment.align import Alignment, SiteTable, TableSites
from data_adapters.mapping.dictionary import FORMAT, apply_dictionary, merge, parse_dictionary, validate
from data_adapters.tables.names import code_key, name_key
from data_adapters.mapping.suggestions import edited_patch, suggest
from fedcore.errors import DataError
from tests.messy_exports import CHOLESTEROL_MG_DL, FEATURES, SITES, write_messy_exports

ROOT = Path(__file__).resolve().parents[1]


def sites_of(frames: dict[str, pd.DataFrame], target: str = "y") -> TableSites:
    return TableSites("t", "", "test", [SiteTable(s, f"{s}.csv", f) for s, f in frames.items()], target)


def suggestions(frames: dict[str, pd.DataFrame], content: dict | None = None, target: str = "y"):
    sites = sites_of(frames, target)
    if content:
        sites = apply_dictionary(sites, content)
    alignment = Alignment(sites)
    return alignment, suggest(sites, alignment)


def of_kind(found, kind):
    """The pre-filled suggestions of a kind (questions leave the decision to the analyst)."""
    return [(s.site, s.column, s.value) for s in found if s.kind == kind and not s.question]


def questions(found, kind):
    return [(s.site, s.column) for s in found if s.kind == kind and s.question]


def clinic(seed: int, n: int = 120, **columns) -> pd.DataFrame:
    """A site: chol (mmol/L) raises the chance of y = 1; age unrelated."""
    rng = np.random.default_rng(seed)
    chol = np.round(rng.normal(5.4, 1.0, n), 2)
    y = ((chol - 5.4) + rng.normal(0, 0.7, n) > 0).astype(int)
    frame = pd.DataFrame({"age": np.round(rng.normal(55, 9, n)).astype(int), "chol": chol, "y": y})
    for name, make in columns.items():
        frame[name] = make(rng, frame)
    return frame


# -- names ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("a, b", [("Age", "age"), ("Âge", "age"), ("heart rate", "Heart_Rate"), ("Gender", "sex"),
                                  ("Cholestérol (mmol/L)", "chol"), ("weight_kg", "Weight"), ("BMI", "body mass index")])
def test_names_that_mean_one_column(a, b):
    assert name_key(a) == name_key(b)


@pytest.mark.parametrize("a, b", [("age", "stage"), ("chol", "choline"), ("sex", "sexual activity"), ("hr", "hrv")])
def test_names_that_do_not(a, b):
    assert name_key(a) != name_key(b)


def test_a_column_spelled_differently_at_two_sites_is_renamed_to_the_common_spelling():
    frames = {s: clinic(k) for k, s in enumerate(("a", "b", "c", "d"))}
    frames["b"] = frames["b"].rename(columns={"age": "Âge"})
    frames["c"] = frames["c"].rename(columns={"age": "AGE "})
    _, found = suggestions(frames)
    assert sorted(of_kind(found, "rename")) == [("b", "Âge", "age"), ("c", "AGE ", "age")]


def test_no_rename_where_a_site_holds_two_spellings():
    frames = {s: clinic(k) for k, s in enumerate(("a", "b", "c"))}
    frames["b"] = frames["b"].rename(columns={"age": "Age"}).assign(AGE=frames["b"]["age"])
    _, found = suggestions(frames)
    assert of_kind(found, "rename") == []
    assert sorted(questions(found, "rename")) == [("b", "AGE"), ("b", "Age")]  # asked: both match age by the data


def test_a_renamed_column_is_found_by_its_values_and_its_relation_to_the_label():
    frames = {s: clinic(k) for k, s in enumerate(("a", "b", "c"))}
    frames["c"] = frames["c"].rename(columns={"chol": "lab_7"})
    _, found = suggestions(frames)
    assert of_kind(found, "rename") == [("c", "lab_7", "chol")]


def test_no_rename_by_data_when_the_label_relation_reverses_or_two_columns_fit():
    frames = {s: clinic(k) for k, s in enumerate(("a", "b", "c"))}
    reversed_ = frames["c"].rename(columns={"chol": "lab_7"})
    reversed_["y"] = 1 - reversed_["y"]  # its values match chol's, but they relate to the label the other way
    assert of_kind(suggestions({**frames, "c": reversed_})[1], "rename") == []
    twin = {**frames, "c": frames["c"].rename(columns={"chol": "lab_7"})}
    for site in ("a", "b"):  # a second column at the other sites that lab_7 matches as well
        twin[site] = twin[site].assign(chol_copy=twin[site]["chol"])
    assert of_kind(suggestions(twin)[1], "rename") == []


# -- units ------------------------------------------------------------------------------------------
def test_the_one_site_in_another_unit_gets_the_conversion_back():
    frames = {s: clinic(k) for k, s in enumerate(("a", "b", "c", "d"))}
    frames["c"]["chol"] = frames["c"]["chol"] * CHOLESTEROL_MG_DL
    _, found = suggestions(frames)
    (convert,) = [s for s in found if s.kind == "convert"]
    assert (convert.site, convert.column) == ("c", "chol")
    patch = convert.patch["sites"]["c"]["convert"]["chol"]
    assert patch["a"] == pytest.approx(1 / CHOLESTEROL_MG_DL) and patch["b"] == 0
    validate({"format": FORMAT, **convert.patch}, "x")  # the catalogue's name agrees with its factor
    mapped, after = suggestions(frames, {"format": FORMAT, **convert.patch})
    assert not [s for s in after if s.kind == "convert"]
    assert np.median(mapped.columns["chol"]["c"].values) == pytest.approx(np.median(frames["c"]["chol"]) / CHOLESTEROL_MG_DL)


def test_no_conversion_for_sites_in_one_unit_or_a_modest_shift():
    frames = {s: clinic(k) for k, s in enumerate(("a", "b", "c", "d"))}
    frames["d"]["chol"] = frames["d"]["chol"] + 0.4  # another patient mix, not a unit
    assert of_kind(suggestions(frames)[1], "convert") == []


# -- missing codes ----------------------------------------------------------------------------------
def test_a_missing_code_at_one_site_is_suggested_and_applied():
    frames = {s: clinic(k) for k, s in enumerate(("a", "b", "c"))}
    frames["b"].loc[::8, "chol"] = -1
    alignment, found = suggestions(frames)
    assert of_kind(found, "missing") == [("b", "chol", "-1")]
    (suggestion,) = [s for s in found if s.kind == "missing"]
    mapped, _ = suggestions(frames, {"format": FORMAT, **suggestion.patch})
    assert np.isnan(mapped.columns["chol"]["b"].values[::8]).all() and (mapped.columns["chol"]["b"].values != -1).all()


def test_no_missing_code_where_the_value_is_a_real_one_elsewhere():
    frames = {s: clinic(k, bleeds=lambda rng, f: rng.poisson(0.6, len(f))) for k, s in enumerate(("a", "b", "c"))}
    assert [s for s in of_kind(suggestions(frames)[1], "missing") if s[1] == "bleeds"] == []


# -- category codes ---------------------------------------------------------------------------------
def sex_sites(west_codes: tuple[str, str] = ("1", "0"), related: bool = True, share: float = 0.68):
    def sex(rng, frame):
        male = rng.random(len(frame)) < share
        if related:  # men more often y = 1
            male = np.where(frame["y"] == 1, rng.random(len(frame)) < 0.85, rng.random(len(frame)) < 0.35)
        return np.where(male, "M", "F")
    frames = {s: clinic(k, n=300, sex=sex) for k, s in enumerate(("north", "south", "east", "west"))}
    frames["east"]["sex"] = frames["east"]["sex"].map({"M": "male", "F": "female"})
    frames["west"]["sex"] = frames["west"]["sex"].map({"M": west_codes[0], "F": west_codes[1]})
    return frames


def test_category_codes_are_mapped_by_synonyms_and_a_two_valued_code_by_its_label_relation():
    _, found = suggestions(sex_sites())
    assert sorted(of_kind(found, "values")) == [("east", "sex", "female=F; male=M"), ("west", "sex", "0=F; 1=M")]


def test_no_code_map_where_neither_synonyms_nor_shares_and_labels_tell():
    _, found = suggestions(sex_sites(related=False, share=0.5))
    assert of_kind(found, "values") == [("east", "sex", "female=F; male=M")]  # the synonyms still tell


@pytest.mark.parametrize("a, b", [("M", "male"), ("Yes", "y"), ("TRUE", "1"), ("Féminin", "feminine")])
def test_codes_that_mean_one_thing(a, b):
    assert code_key(a) == code_key(b)


# -- kinds, drops -----------------------------------------------------------------------------------
def test_codes_of_categories_are_suggested_categorical_counts_are_asked_and_measurements_left_alone():
    def pain(rng, f):  # y = 1 mostly with codes 1 and 3: a rate that rises and falls, as codes' do
        return np.where(f["y"] == 1, rng.choice([1, 3], len(f)), rng.choice([2, 4], len(f)))

    frames = {s: clinic(k, n=200, pain=pain, thal=lambda rng, f: rng.choice([3, 6, 7], len(f)),
                        vessels=lambda rng, f: rng.integers(0, 4, len(f)),
                        dose=lambda rng, f: np.round(rng.uniform(0, 3, len(f)), 1)) for k, s in enumerate("abc")}
    found = suggestions(frames)[1]
    # pain: not monotone; thal: gaps; vessels 0-3, unrelated: a count or codes, the data cannot tell
    assert sorted(of_kind(found, "kind")) == [(None, "pain", "categorical"), (None, "thal", "categorical")]
    assert questions(found, "kind") == [(None, "vessels")]  # age: many values; dose: decimals


def test_identifiers_empty_and_unnamed_columns_are_suggested_for_dropping_and_measurements_not():
    frames = {s: clinic(k, record=lambda rng, f: np.arange(len(f)) + 1000 * rng.integers(1, 9),
                        code=lambda rng, f: [f"P{k:05d}" for k in rng.permutation(len(f))],
                        blank=lambda rng, f: np.full(len(f), np.nan),
                        **{"Unnamed: 9": lambda rng, f: rng.integers(0, 3, len(f))})
              for k, s in enumerate("abc")}
    assert sorted(c for _, c, _ in of_kind(suggestions(frames)[1], "drop")) == ["Unnamed: 9", "blank", "code", "record"]


# -- the target ------------------------------------------------------------------------------------
def test_a_site_with_yes_no_or_graded_labels_gets_its_positive_values():
    frames = {s: clinic(k) for k, s in enumerate("abcd")}
    frames["b"]["y"] = frames["b"]["y"].map({1: "yes", 0: "no"})
    frames["c"]["y"] = frames["c"]["y"] * np.random.default_rng(0).integers(1, 5, len(frames["c"]))  # 0-4
    alignment, found = suggestions(frames)
    assert not alignment.report.ok  # the codings do not combine as they are
    assert sorted(of_kind(found, "positive")) == [("b", "y", "yes"), ("c", "y", "1, 2, 3, 4")]
    content = {"format": FORMAT}
    for suggestion in found:
        content = merge(content, suggestion.patch)
    mapped, after = suggestions(frames, content)
    assert mapped.report.ok and mapped.class_names == ["0", "1"] and of_kind(after, "positive") == []
    assert (mapped.y["c"] == (frames["c"]["y"] > 0)).all() and (mapped.y["b"] == (frames["b"]["y"] == "yes")).all()


def test_no_positive_values_where_the_sites_agree_or_the_coding_is_unclear():
    frames = {s: clinic(k) for k, s in enumerate("abc")}
    assert of_kind(suggestions(frames)[1], "positive") == []
    frames["c"]["y"] = frames["c"]["y"].map({1: "high", 0: "low"})
    assert of_kind(suggestions(frames)[1], "positive") == []


def test_a_site_without_the_target_gets_a_match_and_still_does_not_block_the_others_report():
    frames = {s: clinic(k) for k, s in enumerate("abc")}
    frames["b"] = frames["b"].rename(columns={"y": "Y "})
    frames["c"] = frames["c"].drop(columns=["y"])
    alignment, found = suggestions(frames)
    report = alignment.report
    assert any("c.csv (site 'c') has no target column 'y'" in e for e in report.errors)
    assert [s["site"] for s in report.sites] == ["a", "b", "c"] and report.sites[0]["rows_used"] == 120
    assert of_kind(found, "target") == [("b", "Y ", "y")]


# -- the dictionary --------------------------------------------------------------------------------
@pytest.mark.parametrize("content, message", [
    ({"format": "fedcore-data-dictionary/9"}, "study.json: format: must be \"fedcore-data-dictionary/1\", not "
                                              "\"fedcore-data-dictionary/9\" (a newer version"),
    ({"format": FORMAT, "colums": {}}, "study.json: colums: is no key of a data dictionary"),
    ({"format": FORMAT, "kinds": {"cp": "ordinal"}}, "study.json: kinds → 'cp': \"ordinal\" is not one of"),
    ({"format": FORMAT, "sites": {"south": {"convert": {"chol": {"a": 0}}}}},
     "study.json: sites → 'south' → convert → 'chol' → a: must be a non-zero number, not 0."),
    ({"format": FORMAT, "sites": {"south": {"convert": {"chol": {"name": "cholesterol mg/dL ↔ mmol/L (÷ 38.67)",
                                                                  "a": 38.67}}}}},
     "study.json: sites → 'south' → convert → 'chol': 'cholesterol mg/dL ↔ mmol/L (÷ 38.67)' means a = 0.02586, b = 0 (the unit catalogue), not a = 38.67"),
    ({"format": FORMAT, "sites": {"south": {"missing": {"age": 999}}}}, "sites → 'south' → missing → 'age': must be a list"),
    ({"format": FORMAT, "sites": {"west": {"positive": "yes"}}}, "sites → 'west' → positive: must be a list"),
    ({"format": FORMAT, "sites": {"west": {"rename": {"Age": ""}}}}, "sites → 'west' → rename: must map"),
])
def test_a_bad_dictionary_is_refused_naming_file_key_site_and_column(content, message):
    with pytest.raises(DataError) as error:
        validate(content, "study.json")
    assert message in str(error.value)


def test_bytes_that_are_no_dictionary():
    with pytest.raises(DataError, match="study.json is not valid JSON: Expecting value at line 1, column 1"):
        parse_dictionary(b"format = 1", "study.json")


def test_applying_a_dictionary_does_each_step_and_leaves_the_source_alone():
    frame = pd.DataFrame({"Age": ["61", "999", "47"], "age_months": [None, "540", None], "sex": ["M", "F", "x"],
                          "chol": ["232,0", "n/a", "0"], "ward": ["A", "B", "C"], "y": ["yes", "no", "maybe"]})
    before = frame.copy()
    table = SiteTable("south", "south.csv", frame, ";", "cp1252", ",")
    content = validate({"format": FORMAT, "drop": ["ward"], "target": {"negative": "0", "positive": "1"},
                        "sites": {"south": {"rename": {"Age": "age", "age_months": "age"},
                                            "missing": {"age": [999], "*": ["x"]},
                                            "values": {"sex": {"M": "male", "F": "female"}},
                                            "convert": {"chol": {"a": 1 / 38.67, "b": 0}},
                                            "positive": ["yes"]},
                                  "nowhere": {"drop": ["z"]}}}, "d.json")
    north = SiteTable("north", "north.csv", before.copy())
    mapped = apply_dictionary(TableSites("t", "", "csv", [table, north], "y"), content, "d.json")
    out = mapped.tables[0].frame
    pd.testing.assert_frame_equal(frame, before)
    assert list(out.columns) == ["age", "sex", "chol", "y"]  # a merged column where its first source was
    assert out["age"].tolist()[0] == "61" and pd.isna(out["age"].iloc[1]) and out["age"].iloc[2] == "47"
    assert out["sex"].tolist()[:2] == ["male", "female"] and pd.isna(out["sex"].iloc[2])
    assert out["chol"].iloc[0] == pytest.approx(232 / 38.67) and out["chol"].iloc[2] == 0 and out["chol"].iloc[1] == "n/a"
    assert out["y"].tolist() == ["1", "0", "0"]
    assert any("d.json has decisions for the site 'nowhere'" in w for w in mapped.warnings)
    assert list(mapped.tables[1].frame.columns) == ["Age", "age_months", "sex", "chol", "y"]  # only the drop
    assert mapped.notes["dictionary"]["content"] == content and len(mapped.notes["dictionary"]["sha256"]) == 64


def test_merging_decisions():
    a = {"format": FORMAT, "drop": ["id"], "sites": {"s": {"rename": {"A": "a"}}}}
    b = {"drop": ["id", "ward"], "sites": {"s": {"rename": {"B": "b"}}, "t": {"positive": ["y"]}}}
    assert merge(a, b) == {"format": FORMAT, "drop": ["id", "ward"],
                           "sites": {"s": {"rename": {"A": "a", "B": "b"}}, "t": {"positive": ["y"]}}}
    assert a["drop"] == ["id"]


def test_an_edited_suggestion_becomes_its_patch_or_a_message():
    suggestion = {"kind": "convert", "site": "east", "column": "chol", "value": "0.0258598, 0", "patch": {}}
    assert edited_patch(suggestion, "38.67, 0") == {"sites": {"east": {"convert": {"chol": {
        "name": "given by the analyst", "a": 38.67, "b": 0.0}}}}}
    with pytest.raises(ValueError, match="Write the conversion as 'a, b'"):
        edited_patch(suggestion, "times ten")
    values = {"kind": "values", "site": "west", "column": "sex", "value": "0=F; 1=M", "patch": {}}
    assert edited_patch(values, "0=M; 1=F") == {"sites": {"west": {"values": {"sex": {"0": "M", "1": "F"}}}}}


# -- the messy study, end to end -------------------------------------------------------------------
@pytest.fixture(scope="module")
def messy(tmp_path_factory) -> list[str]:
    return [str(p) for p in write_messy_exports(tmp_path_factory.mktemp("exports"))]


def test_the_messy_exports_harmonise_with_the_drafted_dictionary(messy, tmp_path):
    ref = {"source": "csv", "files": messy, "target": "outcome"}
    before, _ = mapping(ref)
    assert not before.report.ok and any("(site 'south') has no target column 'outcome'" in e for e in before.report.errors)
    out = tmp_path / "study.dictionary.json"
    done = subprocess.run([sys.executable, "-m", "fedcore", "inspect", "--data", f"csv:{','.join(messy)}",
                           "--target", "outcome", "--draft-dictionary", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    content = json.loads(out.read_text())
    assert content["sites"]["east"]["convert"]["chol"]["a"] == pytest.approx(1 / CHOLESTEROL_MG_DL)
    assert content["sites"]["west"]["missing"] == {"chol": [0], "age": [999]}
    assert content["sites"]["east"]["missing"] == {"smoker": [-9]}  # a code in a text column
    assert content["sites"]["west"]["rename"] == {"systolic_pressure": "sbp"}  # matched by its values and label
    assert content["sites"]["south"]["rename"] == {"Âge": "age", "Outcome": "outcome"}
    assert content["drop"] == ["patient_id"]
    assert content == draft_dictionary(ref)  # the CLI writes what the mapping step drafts
    federation = load_federation({**ref, "dictionary": str(out)})
    assert federation.feature_names == FEATURES and [s.name for s in federation.sites] == list(SITES)
    chol = federation.feature_names.index("chol")
    medians = federation.profile.quantiles[:, 10, chol]  # original units: every site's in mmol/L now
    assert np.all(np.abs(medians - 5.4) < 0.35), medians
    recorded = federation.preprocessing["dictionary"]
    assert recorded["content"] == content and recorded["file"] == "study.dictionary.json"


# -- hostile dictionaries: a message, never a traceback (issue 25) ----------------------------------
def test_a_deep_or_long_numbered_or_large_dictionary_is_refused_by_its_shape():
    from tests.hostile_files import deep_json, long_number_json

    cases = [(deep_json(100_000), "deep.json nests objects and lists 100,000 deep (at most 16): not a data dictionary."),
             (long_number_json(5_000), "long.json holds a number written with 5,000 characters"),
             (b" " * 2_000_001, "large.json is 2 MB, larger than 2 MB: not a data dictionary")]
    for data, message in cases:
        with pytest.raises(DataError) as error:
            parse_dictionary(data, message.split(" ")[0])
        assert message in str(error.value)
    # brackets inside text are no nesting, and a long text is no long number
    assert parse_dictionary(b'{"format": "fedcore-data-dictionary/1", "name": "' + b"[{" * 50 + b"9" * 100 + b'"}',
                            "fine.json")["name"].startswith("[{[{")


def test_a_dictionary_with_many_problems_lists_the_first_twenty_and_counts_the_rest():
    content = {"format": FORMAT, "sites": {f"site{k}": {"positive": "yes"} for k in range(1_000)}}
    with pytest.raises(DataError) as error:
        validate(content, "many.json")
    assert str(error.value).count("\n- ") == 21 and str(error.value).endswith("- and 980 more problem(s).")


@pytest.mark.parametrize("hostile", ["deep", "long"])
def test_the_command_line_refuses_a_hostile_dictionary_with_exit_2_and_a_message(tmp_path, capsys, hostile):
    from application.cli import main
    from tests.hostile_files import deep_json, long_number_json

    file = tmp_path / f"{hostile}.dictionary.json"
    file.write_bytes(deep_json(100_000) if hostile == "deep" else long_number_json(5_000))
    site = tmp_path / "north.csv"
    site.write_text("age,outcome\n61,1\n47,0\n")
    code = main(["inspect", "--data", f"csv:{site},dictionary={file}", "--target", "outcome"])
    err = capsys.readouterr().err
    assert code == 2 and f"{file.name} " in err and "Traceback" not in err


@pytest.mark.parametrize("hostile", ["deep", "long"])
def test_a_flower_site_refuses_a_hostile_dictionary_with_a_message_for_the_server(tmp_path, hostile):
    from application.flower.site import load_site
    from tests.hostile_files import deep_json, long_number_json

    file = tmp_path / "study.dictionary.json"
    file.write_bytes(deep_json(100_000) if hostile == "deep" else long_number_json(5_000))
    site = tmp_path / "north.csv"
    site.write_text("age,outcome\n61,1\n47,0\n")
    with pytest.raises(DataError, match="study.dictionary.json (nests|holds a number)"):
        load_site({"data": f"csv:{site},target=outcome,dictionary={file}"}, seed=0)
