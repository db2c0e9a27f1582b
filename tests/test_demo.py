"""The synthetic demo federation, and iFedAvg finding its injected shifts end to end."""

import numpy as np
import pytest

from data_adapters import load_federation
from data_adapters.readers.demo import FEATURE_INDEX, make_demo_federation
from application.cli import main
from fedcore.errors import DataError
from fedcore.store import RunStore


def test_demo_is_declared_synthetic_and_carries_its_ground_truth():
    federation = make_demo_federation()
    assert federation.synthetic
    assert "synthetic" in federation.name.lower() and "SYNTHETIC" in federation.description
    assert len(federation.sites) == 8 and federation.n_features == 12 and federation.n_classes == 2
    truth = {(g.site, g.feature, g.kind) for g in federation.ground_truth}
    assert truth == {
        ("Cedar Community", "age", "offset"),
        ("Elm Regional", "temperature", "unit"),
        ("Fir Valley", "confusion", "missing_not_at_random"),
        ("Oak District", None, "label_flip"),
    }
    assert federation.describe()["ground_truth"] == [g.to_json() for g in federation.ground_truth]
    assert federation.warnings == []  # every demo site is large enough for a 100-row hold-out


def test_injected_shifts_are_really_in_the_data():
    federation = make_demo_federation()
    site = {s.name: s for s in federation.sites}
    temperature = FEATURE_INDEX["temperature"]
    # °F against the °C reference: about (98.6 - 37.3) / 0.8 standard units
    assert site["Elm Regional"].x_train[:, temperature].mean() > 50
    assert abs(site["Alder General"].x_train[:, temperature].mean()) < 1
    age = FEATURE_INDEX["age"]
    assert site["Cedar Community"].x_train[:, age].mean() - site["Pine County"].x_train[:, age].mean() > 0.8
    confusion = FEATURE_INDEX["confusion"]
    fir = site["Fir Valley"]
    assert (fir.x_train[fir.y_train == 0, confusion] == 0.5).all()  # missing, encoded 0.5
    assert set(fir.x_train[fir.y_train == 1, confusion].tolist()) <= {0.0, 1.0}
    # Oak's labels are flipped: its 'sepsis' rows have the temperatures of the others' non-septic rows
    oak, pine = site["Oak District"], site["Pine County"]
    oak_gap = oak.x_train[oak.y_train == 1, temperature].mean() - oak.x_train[oak.y_train == 0, temperature].mean()
    pine_gap = pine.x_train[pine.y_train == 1, temperature].mean() - pine.x_train[pine.y_train == 0, temperature].mean()
    assert oak_gap < 0 < pine_gap


def test_demo_data_are_fixed_and_the_split_follows_the_run_seed():
    a, b, c = make_demo_federation(seed=0), make_demo_federation(seed=0), make_demo_federation(seed=1)
    assert np.array_equal(a.sites[0].x_test.numpy(), b.sites[0].x_test.numpy())
    assert not np.array_equal(a.sites[0].x_test.numpy(), c.sites[0].x_test.numpy())
    assert a.sites[0].n_train + a.sites[0].n_test == c.sites[0].n_train + c.sites[0].n_test


def test_one_demo_site_is_that_site_of_the_whole_federation():
    whole = {s.name: s for s in make_demo_federation(seed=2).sites}
    elm = load_federation("demo:site=Elm Regional", seed=2)
    assert elm.site_names == ["Elm Regional"]
    for part in ("x_train", "y_train", "x_test", "y_test"):
        assert np.array_equal(getattr(elm.sites[0], part).numpy(), getattr(whole["Elm Regional"], part).numpy())
    assert [g.site for g in elm.ground_truth] == ["Elm Regional"]
    with pytest.raises(DataError, match="no site 'Elm'.*Elm Regional"):
        load_federation("demo:site=Elm")


def test_per_site_standardization_hides_the_unit_error():
    federation = load_federation("demo:standardization=site")
    elm = {s.name: s for s in federation.sites}["Elm Regional"]
    assert abs(float(elm.x_train[:, FEATURE_INDEX["temperature"]].mean())) < 0.2
    assert federation.preprocessing["standardization"].startswith("site (fitted on each site")


def test_ifedavg_on_the_demo_flags_every_injected_shift(tmp_path, capsys):
    """End to end through the CLI: marks land on the injected (site, feature) cells and the flip."""
    code = main(["run", "--store", str(tmp_path), "-a", "ifedavg", "--local-f-out", "--scalar-w-out",
                 "--rounds", "150", "--eval-every", "50", "-q"])
    assert code == 0
    run = RunStore(tmp_path).runs()[0]
    detection = run.summary.detection
    caught = {(e.site, e.feature): e.caught for e in detection.injected}
    assert caught == {
        ("Cedar Community", "age"): True,
        ("Elm Regional", "temperature"): True,
        ("Fir Valley", "confusion"): True,
        ("Oak District", None): True,
    }
    # Marks are not everywhere: most of the 8 x 12 input cells per layer stay unmarked.
    assert len(detection.false_positives) <= 12
    arrays = run.load_arrays(150)
    sites = run.federation.site_names
    oak = sites.index("Oak District")
    assert arrays["w_out"][oak, 0] < 0 < np.delete(arrays["w_out"][:, 0], oak).min()
    elm = sites.index("Elm Regional")
    assert abs(arrays["w_in"][elm, FEATURE_INDEX["temperature"]]) < 0.3  # temperature switched off at Elm
    out = capsys.readouterr().out
    assert "Injected shifts caught by the significance marks: 4 of 4" in out
