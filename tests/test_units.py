"""Standardised values and iFedAvg's corrections back in the data's own units (fedcore/original_units.py), from
the preprocessing record the data adapters write; and the one label of a data reference."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from data_adapters import load_federation
from fedcore.data_labels import data_label
from fedcore.glossary import technical_first
from fedcore.original_units import Scale, correction_text, number
from fedcore.store import StoredFederation

SAMPLES = Path(__file__).resolve().parent.parent / "assets" / "sample_sites"



def scales_of(description):
    """Each site's scales as a page reads them: the description through the store's reader."""
    return StoredFederation.from_json(description).scales

def test_the_demo_records_its_data_dictionary_and_units():
    scales = scales_of(load_federation("demo").describe())
    assert set(scales) == {"Alder General", "Birch University", "Cedar Community", "Elm Regional", "Fir Valley",
                           "Oak District", "Pine County", "Willow Memorial"}
    # the data dictionary of data_adapters/readers/demo.py, the same at every site
    assert scales["Elm Regional"]["temperature"] == Scale(37.3, 0.8, "°C")
    assert scales["Cedar Community"]["age"] == Scale(58.0, 17.0, "years")
    assert "sex_male" not in scales["Elm Regional"]  # binary: never standardised


def test_values_come_back_in_the_units_each_site_recorded():
    """Elm Regional records temperature in °F: back in 'the dictionary's °C' its values sit near 99,
    the other sites' near 37; Cedar's ages 20 years above the others'."""
    federation = load_federation("demo")
    scales = scales_of(federation.describe())
    j = federation.feature_names.index("temperature")
    means = {s.name: scales[s.name]["temperature"].value(s.x_train[:, j].double().numpy()).mean()
             for s in federation.sites}
    assert 97 < means["Elm Regional"] < 101
    assert all(36.5 < m < 38.5 for site, m in means.items() if site != "Elm Regional")
    age = federation.feature_names.index("age")
    ages = {s.name: scales[s.name]["age"].value(s.x_train[:, age].double().numpy()).mean() for s in federation.sites}
    others = np.mean([m for site, m in ages.items() if site != "Cedar Community"])
    assert 15 < ages["Cedar Community"] - others < 25


def test_per_site_standardisation_is_undone_with_each_site_s_own_values(tmp_path):
    """The sample CSVs, standardised per site on each site's training rows: mean + sd · x gives back
    exactly the ages in the files (hold-out rows included, standardised with the training values)."""
    files = [str(f) for f in sorted(SAMPLES.glob("*.csv")) if "west" not in f.name]
    federation = load_federation({"source": "csv", "files": files, "target": "diabetes"})
    scales = scales_of(federation.describe())
    j = federation.feature_names.index("age")
    for site, path in zip(federation.sites, files):
        recorded = pd.read_csv(path)["age"].dropna().to_numpy(dtype=float)
        inputs = np.concatenate([site.x_train[:, j].double().numpy(), site.x_test[:, j].double().numpy()])
        back = scales[site.name]["age"].value(inputs)
        assert np.allclose(np.sort(back), np.sort(recorded), atol=1e-3), site.name
        assert scales[site.name]["age"].unit == ""  # the files do not say


def test_without_standardisation_values_are_the_data_s_own():
    files = [str(f) for f in sorted(SAMPLES.glob("*.csv")) if "west" not in f.name]
    description = load_federation({"source": "csv", "files": files, "target": "diabetes",
                                   "standardization": "none"}).describe()
    scales = scales_of(description)
    assert scales["synthetic_north_clinic"]["age"] == Scale(0.0, 1.0, "")


def test_runs_without_a_record_stay_standardised():
    assert scales_of({"sites": [{"name": "a"}], "preprocessing": {"standardization": "site"}}) == {}
    assert scales_of({}) == {}


def test_corrections_in_words_and_units_with_the_technical_name_second():
    temperature = Scale(37.3, 0.8, "°C")
    # b_in shifts the standardised value: 2.25 SD of 0.8 °C is 1.8 °C
    assert correction_text("b_in", 2.25, temperature) == "shifted by +1.8 °C (input shift b_in = +2.2)"
    assert correction_text("b_in", -1.25, Scale(58.0, 16.0, "years")) == \
        "shifted by -20 years (input shift b_in = -1.2)"
    # w_in scales the deviations from the site's mean: 0.56 squeezes them, 1.8 stretches them
    assert correction_text("w_in", 0.56, temperature) == \
        "squeezed to 0.56 of its spread around 37 °C (input scale w_in = 0.56)"
    assert correction_text("w_in", 1.8, temperature) == \
        "stretched to 1.8 times its spread around 37 °C (input scale w_in = 1.8)"
    assert correction_text("w_in", -0.5, None) == "turned around, ×-0.5 (input scale w_in = -0.5)"
    assert correction_text("b_in", 0.5, None) == "shifted by +0.5 SD (input shift b_in = +0.5)"
    assert correction_text("b_in", 0.5, Scale(0.0, 2.0, "")) == \
        "shifted by +1.0 (the data's units) (input shift b_in = +0.5)"
    flipped = correction_text("w_out", -0.9, None)
    assert flipped.startswith("outcome scores turned around, ×-0.9 (output scale w_out = -0.9)") and \
        "flipped labels" in flipped
    assert "flipped" not in correction_text("w_out", 0.9, None)
    for layer, value in (("b_in", 1.0), ("w_in", 0.3), ("w_out", -1.0), ("b_out", 0.2)):  # words first
        assert technical_first(correction_text(layer, value, temperature)) == []
    assert [number(v) for v in (0.0563, 1.84, 20.4, -3.0)] == ["0.056", "1.8", "20", "-3.0"]


@pytest.mark.parametrize(("ref", "label"), [
    ("demo", "demo"),
    ("demo:standardization=site", "demo · standardization=site"),
    ("heart:/data/uci/canonical", "heart: canonical"),
    ({"source": "csv", "files": ["/tmp/runs/_uploads/3f9a/north.csv", "/tmp/runs/_uploads/3f9a/south.csv"],
      "target": "outcome", "exclude": [], "standardization": "site", "missing_indicators": False},
     "csv: north.csv, south.csv · target outcome · standardization=site"),
    ({"source": "csv", "files": [f"/u/site{i}.csv" for i in range(6)], "target": "y"},
     "csv: site0.csv, site1.csv, site2.csv, … (6 files) · target y"),
    ({"source": "csv", "files": ["/u/a.csv"], "target": "y", "name": "  Diabetes\nclinics 2024 "},
     "Diabetes clinics 2024"),
    ({"source": "csv", "files": ["/u/a.csv"], "target": "y", "label": "Clinics"}, "Clinics"),
    ({"source": "flower", "superlink": "10.0.0.5:9093", "sites": 3, "server_data": "demo:site=Pine County"},
     "Flower federation at 10.0.0.5:9093 (3 sites) · server's data: demo · site=Pine County"),
    (None, "no data"),
])
def test_a_data_reference_has_one_readable_label(ref, label):
    assert data_label(ref) == label
