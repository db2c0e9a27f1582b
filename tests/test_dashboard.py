"""Every dashboard page through Streamlit's AppTest, on a store with small finished runs."""

import base64
import io
import json
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from PIL import Image
from streamlit.testing.v1 import AppTest

from dashboard.presenters.lenses import DEVIATION, FEATURE_VIEWS, shift_view
from dashboard.presenters.record_tables import per_site_series, run_name
from dashboard.presenters.safe_text import md
from application import jobs
from fedcore.glossary import setting_words, technical_first
from fedcore.interpret.significance import significance_marks
from fedcore.records import Mixture, SiteWeights
from application.runner import execute, resolve_spec
from fedcore.store import RunStore
from fedcore.original_units import number
from tests.helpers import SHARED_DATA, make_federation, open_page, remove_started_runs, unescaped

APP = str(Path(__file__).resolve().parent.parent / "app.py")
QUICK_RUNS = {
    "ifedavg": {"algorithm": "ifedavg", "params": {"local_f_out": True, "scalar_w_out": True},
                "config": {"rounds": 3}},
    "fedhealth2": {"algorithm": "fedhealth2", "params": {"pretrain_epochs": 2}, "config": {"rounds": 2}},
    "adafed": {"algorithm": "adafed", "params": {"weight_rule": "threshold"}, "config": {"rounds": 2, "local_epochs": 3}},
    "apfl": {"algorithm": "apfl", "config": {"rounds": 2}},
    "fedavg": {"algorithm": "fedavg", "config": {"rounds": 2}},
}


@pytest.fixture(scope="module")
def finished_store(tmp_path_factory):
    store = RunStore(tmp_path_factory.mktemp("store") / "runs")
    ids = {}
    for name, spec in QUICK_RUNS.items():
        run = store.create(resolve_spec(spec))
        execute(run)
        ids[name] = run.id
    return store, ids


@pytest.fixture
def app(finished_store, monkeypatch):
    store, ids = finished_store
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    monkeypatch.setenv("FEDCORE_MAX_JOBS", "1")
    at = AppTest.from_file(APP, default_timeout=60)
    yield at, store, ids
    remove_started_runs(store, list(ids.values()))  # stop and remove anything a test started


def plotted(value):
    """A plotted array from a figure's JSON (plotly writes numpy arrays as base64 typed arrays)."""
    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return array.reshape([int(n) for n in str(shape).split(",")]) if shape else array
    return np.asarray(value)


def texts(at):
    """Every text element as a person reads it."""
    return " ".join(unescaped(m.value) for m in [*at.markdown, *at.caption, *at.info, *at.warning, *at.success, *at.error])


@pytest.fixture
def downloads(monkeypatch):
    """What every st.download_button a page draws would hand the browser: file name -> bytes.
    (AppTest drops a run's media files when the run ends, so the data is caught on the way in.)"""
    captured = {}
    draw = st.download_button

    def record(label, data, file_name=None, *args, **kwargs):
        captured[file_name] = data
        return draw(label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", record)
    return captured


def downloaded(downloads, file_name):
    return pd.read_csv(io.BytesIO(downloads[file_name]))


def select_run(at, run_id):
    """Select a run's row in the Runs table, as a click on the row does."""
    at.run()
    row = list(at.dataframe[0].value["run id"]).index(run_id)
    at.session_state["runs_table"] = {"selection": {"rows": [row], "columns": []}}
    at.run()
    assert not at.exception, at.exception
    return at


def test_runs_page_lists_every_run(app):
    at, store, ids = app
    at.run()
    assert not at.exception
    assert at.title[0].value == "Federated interoperability dashboard"
    table = at.dataframe[0].value
    assert set(table["run id"]) == set(ids.values())
    assert set(table["state"]) == {"done"}
    assert "No training running." in texts(at)


def test_runs_page_opens_a_run_in_its_lens_and_in_its_details(app):
    at, store, ids = app
    select_run(at, ids["adafed"]).button(key="open").click().run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Site weights (AdaFed)"
    assert at.query_params["run"] == ids["adafed"]
    at = select_run(AppTest.from_file(APP, default_timeout=60), ids["apfl"])
    at.button(key="details").click().run()
    assert at.title[0].value == "Run details" and at.query_params["run"] == ids["apfl"]


def test_runs_page_reruns_a_run_with_its_settings(app):
    at, store, ids = app
    select_run(at, ids["fedavg"]).button(key="rerun").click().run()
    assert not at.exception, at.exception
    (again,) = [r for r in store.runs() if r.id not in ids.values()]
    original = store.get(ids["fedavg"])
    asked = [(r.spec.algorithm, r.spec.data, r.spec.params, r.spec.config) for r in (again, original)]
    assert asked[0] == asked[1]
    assert again.id in set(at.dataframe[0].value["run id"])  # the page shows the new run at once


def test_runs_page_renames_and_tags_a_run_and_a_rerun_keeps_them(app):
    at, store, ids = app
    select_run(at, ids["fedavg"])
    key = f"identity-{ids['fedavg']}"
    at.text_input(key=f"{key}-name").set_value("**Baseline** [x](y)")
    at.multiselect(key=f"{key}-tags").set_value(["pilot", "sweep"])
    at.button(key=f"{key}-save").click().run()
    assert not at.exception, at.exception
    run = store.get(ids["fedavg"])
    assert run.identity.name == "**Baseline** [x](y)" and run.identity.tags == ["pilot", "sweep"]
    table = at.dataframe[0].value.set_index("run id")
    assert table.loc[run.id, "name"] == "**Baseline** [x](y)" and table.loc[run.id, "tags"] == "pilot, sweep"
    # the name as typed, not as Markdown: every character that could format it escaped
    assert any(m.value.startswith(f"Selected: **{md('**Baseline** [x](y)')}** (") for m in at.markdown)
    assert "**Baseline** [x](y)" in texts(at)
    at.button(key="rerun").click().run()
    (again,) = [r for r in store.runs() if r.id not in ids.values()]
    assert again.identity.name == "**Baseline** [x](y) (re-run)" and again.identity.tags == ["pilot", "sweep"]
    run.set_identity(name="", tags=[])


def test_runs_page_columns_are_chosen_and_kept(app):
    at, store, ids = app
    at.run()
    assert list(at.dataframe[0].proto.column_order) == ["name", "tags", "state", "data", "settings", "round",
                                                         "mean F1", "worst-site F1"]
    at.multiselect(key="runs_columns").set_value(["name", "run id", "worst site"]).run()
    assert list(at.dataframe[0].proto.column_order) == ["name", "run id", "worst site"]
    fresh = AppTest.from_file(APP, default_timeout=60)  # a reload: the choice is kept with the store
    fresh.run()
    assert list(fresh.dataframe[0].proto.column_order) == ["name", "run id", "worst site"]
    worst = fresh.dataframe[0].value.set_index("run id")["worst site"]
    assert worst[ids["ifedavg"]] == store.get(ids["ifedavg"]).summary.worst_site["f1"]
    (store.root / ".dashboard.json").unlink()


def test_runs_that_differ_only_in_settings_are_told_apart(app):
    at, store, ids = app
    other = store.create(resolve_spec({"algorithm": "fedavg", "config": {"rounds": 2, "lr": 0.01}}))
    at.run()
    table = at.dataframe[0].value.set_index("run id")
    assert table.loc[other.id, "settings"] == "learning rate 0.01"
    assert table.loc[ids["fedavg"], "settings"] == "learning rate 0.002"
    assert table.loc[other.id, "name"] != table.loc[ids["fedavg"], "name"]
    assert table.loc[ids["adafed"], "settings"] == ""  # the only AdaFed run: nothing to tell apart
    jobs.cancel(other)


def test_runs_page_cancels_a_training_run(app):
    at, store, ids = app
    run = jobs.submit(store, {"algorithm": "fedavg", "config": {"rounds": 5000}})
    deadline = time.time() + 120
    while not run.status.round and time.time() < deadline:  # training, signal handler in place
        time.sleep(0.2)
    select_run(at, run.id)
    assert "confirm_delete" not in [b.key for b in at.button]  # a training run cannot be deleted
    # cancelling asks first: the control says what it stops and what stays, and only its confirmation acts
    assert "cancel" not in [b.key for b in at.button] and "cancel-confirm" in [b.key for b in at.button]
    assert f"Stop {run_name(run)} at round" in texts(at) and "it cannot be resumed" in texts(at)
    assert run.status.state == "running"
    at.button(key="cancel-confirm").click().run()
    assert not at.exception, at.exception
    while run.status.state == "running" and time.time() < deadline:
        time.sleep(0.2)
    assert run.status.state == "cancelled" and run.status.round >= 1  # its rounds are kept


def test_runs_page_deletes_a_finished_run_after_confirmation(app):
    at, store, ids = app
    run = store.create(resolve_spec({"algorithm": "fedavg", "config": {"rounds": 1}}))
    execute(run)
    select_run(at, run.id)
    assert "cancel-confirm" not in [b.key for b in at.button]  # nothing to cancel on a finished run
    at.button(key="confirm_delete").click().run()
    assert not at.exception, at.exception
    assert run.id not in {r.id for r in store.runs()}
    assert run.id not in set(at.dataframe[0].value["run id"])


def test_quick_start_launches_a_background_job_and_opens_the_heatmap(app):
    at, store, ids = app
    at.run()
    at.button[0].click().run()
    new = [r for r in store.runs() if r.id not in ids.values()]
    assert len(new) == 1 and new[0].spec.algorithm == "ifedavg"
    assert new[0].spec.params["local_f_out"] is True
    assert new[0].status.state in ("running", "done")


def test_train_page_launches_several_algorithms(app):
    at, store, ids = open_page(app[0], "views/train.py"), app[1], app[2]
    at.multiselect[0].set_value(["fedavg", "local"])
    at.number_input(key="config-rounds").set_value(2)
    at.button[0].click().run()
    assert not at.exception
    new = {r.spec.algorithm: r for r in store.runs() if r.id not in ids.values()}
    assert set(new) == {"fedavg", "local"}
    assert new["fedavg"].spec.rounds == 2
    assert "Started 2 run(s)" in texts(at)


def test_train_page_explains_invalid_settings(app):
    at, store, ids = open_page(app[0], "views/train.py"), app[1], app[2]
    at.number_input(key="config-rounds").set_value(0)
    at.button[0].click().run()
    assert "rounds must be at least 1" in texts(at)
    assert {r.id for r in store.runs()} == set(ids.values())  # nothing stored


def test_train_page_refuses_what_the_parameter_declarations_refuse(app):
    # A browser's number box cannot hold nan or inf; a list of widths can hold a 0.
    at, store, ids = open_page(app[0], "views/train.py"), app[1], app[2]
    at.text_input(key="config-hidden").set_value("64,0")
    at.button[0].click().run()
    assert "hidden: each width must be from 1 to 65,536" in texts(at)
    assert {r.id for r in store.runs()} == set(ids.values())


def test_train_page_launches_a_flower_federation_run_as_a_job(app):
    at, store, ids = open_page(app[0], "views/train.py"), app[1], app[2]
    at.radio(key="where").set_value("flower").run()
    assert len(at.multiselect[0].options) == 9  # the algorithms whose needs a Flower federation meets
    at.text_input(key="superlink").set_value("127.0.0.1:9")
    at.number_input(key="flower_sites").set_value(3)
    at.multiselect[0].set_value(["fedhealth2"])
    at.button[0].click().run()
    assert "variant 'f'" in texts(at)  # refused before anything is stored
    assert {r.id for r in store.runs()} == set(ids.values())
    at.multiselect[0].set_value(["ifedavg"])
    at.number_input(key="config-rounds").set_value(2)
    at.button[0].click().run()
    assert not at.exception
    (run,) = [r for r in store.runs() if r.id not in ids.values()]
    assert run.spec.flower.superlink == "127.0.0.1:9" and run.spec.flower.sites == 3 and run.spec.rounds == 2
    assert "Started 1 run(s)" in texts(at)


def test_apfl_keeps_its_own_engine_default_unless_changed(app):
    at, store, ids = open_page(app[0], "views/train.py"), app[1], app[2]
    at.multiselect[0].set_value(["apfl"])
    at.number_input(key="config-rounds").set_value(1)
    at.button[0].click().run()
    run = next(r for r in store.runs() if r.id not in ids.values())
    assert run.spec.config["momentum"] == 0.0


def test_train_page_sets_fedhealth2_lambda_with_a_slider(app):
    at, store, ids = open_page(app[0], "views/train.py"), app[1], app[2]
    at.multiselect[0].set_value(["fedhealth2"]).run()
    lam = at.slider(key="params-fedhealth2-lam")
    assert (lam.value, lam.min, lam.max) == (0.5, 0.0, 1.0)  # the paper's default, FedHealth2's range
    lam.set_value(0.8)
    at.number_input(key="config-rounds").set_value(1)
    at.button(key="start").click().run()
    assert not at.exception, at.exception
    (run,) = [r for r in store.runs() if r.id not in ids.values()]
    assert run.spec.params["lam"] == 0.8


def test_data_page_shows_the_demo_and_remembers_the_choice(app):
    at, store, _ = app
    open_page(at, "views/data.py")
    overview = at.dataframe[0].value
    assert len(overview) == 8 and "injected problem (ground truth)" in overview
    assert "Synthetic data" in texts(at)
    at.radio(key="demo_standardization").set_value("site").run()
    at.button(key="use").click().run()
    settings = json.loads((store.root / ".dashboard.json").read_text())
    assert settings["data"]["ref"] == "demo:standardization=site"
    open_page(at, "views/train.py")
    assert "per-site standardisation" in texts(at)
    (store.root / ".dashboard.json").unlink()


def test_data_page_previews_each_demo_site_with_missing_values_and_class_balance(app, downloads):
    from data_adapters import load_federation

    at, store, _ = app
    open_page(at, "views/data.py")
    federation = load_federation("demo")
    counts = {s.name: (s.y_train.bincount(minlength=2) + s.y_test.bincount(minlength=2)).tolist()
              for s in federation.sites}
    overview = at.dataframe[0].value
    assert overview[["'no sepsis'", "'sepsis'"]].values.tolist() == [counts[s] for s in overview["site"]]
    preview = next(d.value for d in at.dataframe if "class" in d.value)
    assert list(preview.columns) == ["site", "class", *federation.feature_names]
    for site in federation.sites:
        rows = preview[preview["site"] == site.name]
        assert np.allclose(rows[federation.feature_names].values, site.x_train[:5].numpy(), atol=5e-4)
        assert list(rows["class"]) == [federation.class_names[k] for k in site.y_train[:5]]
    # Fir Valley records 'confusion' for septic patients only: missing for exactly its other rows
    missing = downloaded(downloads, "missing-values.csv")
    assert list(missing["feature"]) == ["confusion"]
    fir = counts["Fir Valley"]
    assert missing["Fir Valley"][0] == pytest.approx(fir[0] / sum(fir))
    assert (missing.drop(columns=["feature", "Fir Valley"]).values == 0).all()
    assert len(at.get("plotly_chart")) == 1  # the heatmap those numbers draw


def test_an_image_folder_on_this_machine_shows_thumbnails_of_each_site(app, tmp_path, monkeypatch):
    from data_adapters import load_federation

    at, store, _ = app
    root = tmp_path / "scans"
    rng = np.random.default_rng(0)
    for site in ("north", "south"):
        for k, label in enumerate(("clear", "spot")):
            (root / site / label).mkdir(parents=True)
            for i in range(20):
                pixels = (rng.random((8, 8)) * 100 + 100 * k).astype(np.uint8)
                Image.fromarray(pixels).save(root / site / label / f"{i}.png")
    monkeypatch.setenv("FEDCORE_DATA_DIRS", str(tmp_path))
    open_page(at, "views/data.py")
    at.radio(key="source").set_value("A dataset on this machine").run()
    at.selectbox(key="dataset").set_value("Another folder or file…").run()
    at.selectbox(key="kind").set_value("images").run()
    at.text_input(key="path").set_value(str(root)).run()
    assert not at.exception, at.exception
    federation = load_federation({"source": "images", "path": str(root)})
    assert [image.captions for image in at.image] == [
        [federation.class_names[k] for k in site.y_train[:6]] for site in federation.sites]
    assert not at.button(key="use").disabled


def test_feature_shifts_page_draws_marks_and_the_detection_table(app):
    at, store, ids = app
    open_page(at, "views/feature_shifts.py", ids["ifedavg"])
    assert at.selectbox[0].value == ids["ifedavg"]
    assert len(at.get("plotly_chart")) == 2  # heatmap and the distribution of the picked cell
    heatmap = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert heatmap["data"][0]["type"] == "heatmap" and len(heatmap["data"][0]["y"]) == 8
    detection = at.dataframe[0].value
    assert set(detection["site"]) == {"Cedar Community", "Elm Regional", "Fir Valley", "Oak District"}
    at.radio(key="layer").set_value("w_out").run()
    assert not at.exception
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][0]["x"] == ["all classes"]


def test_feature_shifts_page_exports_the_numbers_of_every_figure(app, downloads):
    from data_adapters import load_federation

    at, store, ids = app
    open_page(at, "views/feature_shifts.py", ids["ifedavg"])
    run = store.get(ids["ifedavg"])
    last = run.array_rounds()[-1]
    b_in = run.load_arrays(last)["b_in"]
    sites, features = run.federation.site_names, run.federation.feature_names
    prefix = f"{run.id}-b_in-round{last}"
    assert np.allclose(downloaded(downloads, f"{prefix}.csv")["value"], b_in.ravel())
    deviation = np.abs(b_in - b_in.mean(axis=0))
    per_site = downloaded(downloads, f"{prefix}-site-deviation.csv")
    per_feature = downloaded(downloads, f"{prefix}-feature-deviation.csv")
    assert list(per_site["site"]) == sites and np.allclose(per_site[DEVIATION], deviation.sum(axis=1))
    assert list(per_feature["feature"]) == features and np.allclose(per_feature[DEVIATION], deviation.sum(axis=0))
    bars = [t for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"] if t["type"] == "bar"]
    assert np.allclose(plotted(bars[0]["x"]), per_site[DEVIATION])  # the CSVs hold what the bars draw
    assert np.allclose(plotted(bars[1]["y"]), per_feature[DEVIATION])
    # the distribution below: every site's values of the picked feature, as the model sees them
    feature = at.selectbox(key="dist_feature").value
    values = downloaded(downloads, f"{run.id}-values-of-{feature}.csv")
    federation = load_federation(run.spec.data, run.spec.seed)
    j = features.index(feature)
    for site in federation.sites:
        shown = values.loc[values["site"] == site.name, f"{feature} (preprocessed)"]
        assert np.allclose(shown, np.concatenate([site.x_train[:, j].numpy(), site.x_test[:, j].numpy()]), atol=1e-6)
    assert set(values["class"]) == set(federation.class_names)


def test_feature_shifts_page_reads_values_and_corrections_in_the_features_units(app, downloads):
    """The demo standardises with its data dictionary (temperature: mean 37.3 °C, SD 0.8 °C): the data
    behind a cell come back in °C (Elm Regional's, recorded in °F, near 99), and each cell's hover
    gives its correction in °C first and the technical value second."""
    at, store, ids = app
    open_page(at, "views/feature_shifts.py", ids["ifedavg"])
    at.selectbox(key="dist_site").set_value("Elm Regional")
    at.selectbox(key="dist_feature").set_value("temperature").run()
    assert not at.exception, at.exception
    run = store.get(ids["ifedavg"])
    values = downloaded(downloads, f"{run.id}-values-of-temperature.csv")
    assert np.allclose(values["temperature (°C)"], 37.3 + 0.8 * values["temperature (preprocessed)"])
    means = values.groupby("site")["temperature (°C)"].mean()
    assert means["Elm Regional"] > 95 and means.drop("Elm Regional").between(36.5, 38.5).all()
    distribution = json.loads(at.get("plotly_chart")[1].proto.spec)
    (axis_title,) = [a["text"] for a in distribution["layout"]["annotations"] if a.get("name") == "x title"]
    assert axis_title == "temperature as each site recorded it (expected unit: °C)"  # once, under both panels
    assert not any((axis.get("title") or {}).get("text") for key, axis in distribution["layout"].items()
                   if key.startswith("xaxis"))
    heatmap = json.loads(at.get("plotly_chart")[0].proto.spec)
    notes = {(x, y): note[0] for x, y, note in zip(heatmap["data"][1]["x"], heatmap["data"][1]["y"],
                                                    heatmap["data"][1]["customdata"])}
    b_in = run.load_arrays(run.array_rounds()[-1])["b_in"]
    elm, temperature = 3, run.federation.feature_names.index("temperature")
    note = notes[("temperature", "Elm Regional")]
    assert f"shifted by {number(0.8 * b_in[elm, temperature], signed=True)} °C (input shift b_in = " in note  # 1 SD = 0.8 °C


def test_feature_shifts_page_sorts_marked_features_first_then_by_largest_z(app, downloads):
    at, store, ids = app
    open_page(at, "views/feature_shifts.py", ids["ifedavg"])
    at.slider(key="n_sd").set_value(1.0)  # a few marks on this short run
    at.selectbox(key="features_view").set_value(FEATURE_VIEWS[3]).run()
    assert not at.exception, at.exception
    run = store.get(ids["ifedavg"])
    last = run.array_rounds()[-1]
    marks = significance_marks(run.load_arrays(last)["b_in"], 1.0, run.spec.params["sd_floor"])
    marked = marks.cells.any(axis=0) | marks.features
    largest = np.nan_to_num(np.abs(marks.z), nan=0.0).max(axis=0)
    features = run.federation.feature_names
    expected = [features[j] for j in sorted(range(len(features)), key=lambda j: (not marked[j], -largest[j]))]
    assert 0 < marked.sum() < len(features)
    assert json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["x"] == expected
    exported = downloaded(downloads, f"{run.id}-b_in-round{last}-feature-deviation.csv")
    assert list(exported["feature"]) == expected  # the bars' CSV in the order shown


def test_largest_z_order_puts_a_feature_marked_for_its_spread_first(tmp_path):
    """'spread' is marked x (its values vary across sites far more than any other feature's) but
    no site lies more than 1 SD out; in 'tiny' one site lies 2.6 SDs out, unmarked because the
    feature barely varies (SD under the floor). Marked first puts 'spread' first, then the rest
    by |z|; the total deviation would put 'tiny' behind the 'calm' features."""
    names = ["spread", "tiny", *[f"calm{i}" for i in range(5)], "constant"]
    matrix = np.zeros((8, len(names)))
    matrix[:, 0] = [-1.0, 1.0] * 4
    matrix[7, 1] = 0.01
    matrix[:, 2:7] = np.array([[-0.1], [0.1]] * 4)
    marks = significance_marks(matrix)
    assert marks.features.tolist() == [True] + [False] * 7 and not marks.cells.any()
    store = RunStore(tmp_path)
    run = store.create(resolve_spec({"algorithm": "ifedavg", "config": {"rounds": 1}}))
    run.write_federation({"sites": [{"name": f"site{i}"} for i in range(8)], "feature_names": names,
                          "class_names": ["no", "yes"]})
    run.save_arrays(1, {"b_in": matrix})
    by_z = shift_view(run, 1, "b_in", features_view=FEATURE_VIEWS[3])
    assert list(by_z.feature_deviation["feature"]) == ["spread", "tiny", *names[2:7], "constant"]
    assert json.loads(by_z.figure.to_json())["data"][0]["x"] == list(by_z.feature_deviation["feature"])
    by_deviation = shift_view(run, 1, "b_in", features_view="sorted by deviation")
    assert list(by_deviation.feature_deviation["feature"]) == ["spread", *names[2:7], "tiny", "constant"]


def test_site_similarity_page(app):
    at, store, ids = app
    open_page(at, "views/site_similarity.py", ids["fedhealth2"])
    charts = at.get("plotly_chart")
    assert len(charts) == 2
    weights = plotted(json.loads(charts[1].proto.spec)["data"][0]["z"])
    assert weights.shape == (8, 8) and np.allclose(weights.sum(axis=1), 1)
    assert "λ = 0.5" in texts(at)
    assert len(at.dataframe[0].value) == 8  # nearest neighbours of every site


def test_site_weights_page(app):
    at, store, ids = app
    open_page(at, "views/site_weights.py", ids["adafed"])
    assert len(at.get("plotly_chart")) == 4
    assert "Weight rule: **threshold**" in texts(at)


def test_site_weights_page_shows_raw_scores_and_exports_them_with_the_shares(app, downloads):
    at, store, ids = app
    open_page(at, "views/site_weights.py", ids["adafed"])
    run = store.get(ids["adafed"])
    shares = per_site_series(run, SiteWeights, lambda record: record.p_share)
    scores = per_site_series(run, SiteWeights, lambda record: record.p)
    exported = downloaded(downloads, f"{run.id}-site-weights.csv")
    assert list(exported.columns) == ["round", "site", "share", "p"]
    assert np.allclose(exported["share"], shares["value"]) and np.allclose(exported["p"], scores["value"])
    at.segmented_control(key="weight_scale").set_value("score").run()
    assert not at.exception, at.exception
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert chart["layout"]["yaxis"]["title"]["text"] == "p_i = max(accuracy − 0.55, 0)"
    for trace in chart["data"]:
        assert np.allclose(plotted(trace["y"]), scores.loc[scores["site"] == trace["name"], "value"])


@pytest.fixture(scope="module")
def random_label_run(tmp_path_factory):
    """AdaFed (threshold rule) on four CSV sites, the last with uniformly random labels. With 20
    features its model fits the noise and scores below the floor on the pooled server rows; with
    few features it stays near the server model it starts from and keeps scoring above it."""
    folder = tmp_path_factory.mktemp("random_labels")
    federation = make_federation(n_sites=4, rows=300, n_features=20, random_label_sites=(3,))
    files = []
    for site in federation.sites:
        path = folder / f"{site.name}.csv"
        x = np.concatenate([site.x_train.numpy(), site.x_test.numpy()])
        y = np.concatenate([site.y_train.numpy(), site.y_test.numpy()])
        pd.DataFrame(x, columns=federation.feature_names).assign(label=np.array(federation.class_names)[y]).to_csv(
            path, index=False)
        files.append(str(path))
    store = RunStore(folder / "runs")
    run = store.create(resolve_spec({
        "algorithm": "adafed", "data": {"source": "csv", "files": files, "target": "label"},
        "params": {"weight_rule": "threshold"}, "config": {"rounds": 4, "local_epochs": 10, "lr": 0.02},
    }))
    execute(run)
    return store, run


def test_site_weights_page_flags_a_random_label_site_driven_to_zero(random_label_run, monkeypatch):
    store, run = random_label_run
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = open_page(AppTest.from_file(APP, default_timeout=60), "views/site_weights.py", run.id)
    assert any("near) zero weight" in unescaped(w.value) and "**site3**" in unescaped(w.value) for w in at.warning)
    flagged = at.dataframe[0].value
    assert list(flagged["site"]) == ["site3"] and flagged["latest share"][0] < 0.25 / 4
    at.segmented_control(key="weight_scale").set_value("score").run()
    last = {t["name"]: plotted(t["y"])[-1] for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]}
    assert last["site3"] == 0 and min(last[f"site{i}"] for i in range(3)) > 0  # the rule set it to zero


def test_compare_page(app):
    at, store, ids = app
    open_page(at, "views/compare.py")
    table = at.dataframe[0].value
    assert len(table) == len(QUICK_RUNS)
    assert {"mean F1 (weighted)", "worst site F1 (weighted)"} <= set(table.columns)
    assert len(at.get("plotly_chart")) == 2


def test_compare_takes_finished_runs_and_marks_only_a_finished_run_best(app):
    at, store, ids = app
    # a cancelled run whose last round scores better than every finished run, and a failed one
    cancelled = store.create(resolve_spec({"algorithm": "fedavg", "config": {"rounds": 2, "lr": 0.02}}))
    execute(cancelled)
    records = [json.loads(line) for line in (cancelled.path / "rounds.jsonl").read_text().splitlines()]
    records[-1]["mean"]["f1"] = 0.99
    (cancelled.path / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    cancelled.update_status(state="cancelled", total_rounds=20000)
    failed = store.create(resolve_spec({"algorithm": "ifedavg", "config": {"rounds": 2}}))
    execute(failed)
    failed.update_status(state="failed", error="diverged")
    open_page(at, "views/compare.py")
    picker = at.multiselect[0]
    assert set(picker.value) == set(ids.values())  # the finished runs, one of each setting
    assert "(cancelled)" in picker.format_func(cancelled.id) and "(failed)" in picker.format_func(failed.id)
    picker.select(cancelled.id).run()
    table = at.dataframe[0].value
    row = list(table["state"]).index("cancelled")
    assert table["mean F1 (weighted)"][row] == table["mean F1 (weighted)"].max()  # it would have been 'best'
    styles = at.dataframe[0].proto.arrow_data.styler.styles
    highlighted = {int(r) for r in re.findall(r"_row(\d+)_col3", styles)}
    best_done = table["mean F1 (weighted)"].where(table["state"] == "done").idxmax()
    assert highlighted == {best_done}, (styles, table)
    assert "Green marks the best finished run" in texts(at)


def test_run_details_page(app):
    at, store, ids = app
    open_page(at, "views/run.py", ids["apfl"])
    final = at.dataframe[0].value
    assert list(final["site"])[-2:] == ["mean", "worst site"]
    assert len(at.get("plotly_chart")) == 2  # per-site curves and APFL's alpha


def test_run_details_page_exports_apfl_alpha(app, downloads):
    at, store, ids = app
    open_page(at, "views/run.py", ids["apfl"])
    alpha = downloaded(downloads, f"{ids['apfl']}-apfl-alpha.csv")
    recorded = per_site_series(store.get(ids["apfl"]), Mixture, lambda record: record.alpha)
    assert list(alpha.columns) == ["round", "site", "alpha"]
    assert list(alpha["site"]) == list(recorded["site"]) and np.allclose(alpha["alpha"], recorded["value"])


def test_lens_pages_say_what_to_do_without_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDCORE_STORE", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=60)
    for page in ("views/feature_shifts.py", "views/site_similarity.py", "views/site_weights.py",
                 "views/compare.py", "views/run.py"):
        open_page(at, page)
        assert at.info, page


def test_html_report_is_self_contained(finished_store):
    from dashboard.presenters.report import html_report

    store, ids = finished_store
    for run_id in ids.values():
        report = html_report(store.get(run_id))
        assert report.startswith("<!doctype html>") and "Scores at the last evaluated round" in report
        scripts = re.findall(r"<script[^>]*>", report)
        assert scripts and not any("src=" in tag for tag in scripts)  # plotly.js inline, nothing fetched
    ifedavg = html_report(store.get(ids["ifedavg"]))
    assert "Feature shifts at round 3" in ifedavg and "Injected problems" in ifedavg


SAMPLES = Path(__file__).resolve().parent.parent / "assets" / "sample_sites"


def test_upload_of_the_sample_csvs_shows_the_alignment_report(app, downloads):
    at, store, _ = app
    open_page(at, "views/data.py")
    at.radio(key="source").set_value("Upload CSV files (one per site)").run()
    files = sorted(SAMPLES.glob("*.csv"))
    at.file_uploader[0].set_value([(f.name, f.read_bytes(), "text/csv") for f in files]).run()
    assert not at.exception, at.exception
    assert at.selectbox(key="target").value == "diabetes"
    sites = at.dataframe[1].value  # after the editable site names
    assert len(sites) == 4 and set(sites["rows"]) == {220, 180, 260, 200}
    shown = texts(at)
    # the unit difference: the one site, its conversion (before, a location warning for the column)
    assert "synthetic_east_clinic's glucose looks like mmol/L where the others use mg/dL (glucose)" in shown
    assert "semicolons" in shown and "'unknown'" in shown  # West's export, South's bad cells
    at.button(key="use").click().run()
    chosen = json.loads((store.root / ".dashboard.json").read_text())["data"]["ref"]
    from data_adapters import inspect_data

    share = inspect_data(chosen).missing_share  # the heatmap's numbers, as CSV
    missing = downloaded(downloads, "missing-values.csv").set_index("feature")
    assert len(missing) and all(missing.loc[f, s] == share[s][f] for f in missing.index for s in missing.columns)
    assert chosen["source"] == "csv" and chosen["target"] == "diabetes" and len(chosen["files"]) == 4
    # ... and it trains: Train page, one short FedAvg run in a background job
    open_page(at, "views/train.py")
    at.multiselect[0].set_value(["fedavg"])
    at.number_input(key="config-rounds").set_value(2)
    at.button(key="start").click().run()
    run = next(r for r in store.runs() if r.spec.algorithm == "fedavg" and isinstance(r.spec.data, dict))
    deadline = time.time() + 120
    while run.status.state in ("queued", "running") and time.time() < deadline:
        time.sleep(0.5)
    assert run.status.state == "done", run.status
    assert run.federation.site_names == [f.stem for f in files]
    (store.root / ".dashboard.json").unlink()


def test_a_bad_upload_gets_a_specific_message_and_stores_nothing(app):
    at, store, _ = app
    open_page(at, "views/data.py")
    at.radio(key="source").set_value("Upload CSV files (one per site)").run()
    good = (SAMPLES / "synthetic_north_clinic.csv").read_bytes()
    at.file_uploader[0].set_value([("north.csv", good, "text/csv"), ("empty.csv", b"", "text/csv")]).run()
    assert not at.exception
    assert any("empty.csv" in unescaped(e.value) for e in at.error)
    assert "use" not in [b.key for b in at.button]  # nothing can be chosen for training
    assert not (store.root / ".dashboard.json").exists()


def test_a_site_with_one_class_is_a_warning_not_an_error(app, tmp_path):
    at, store, _ = app
    open_page(at, "views/data.py")
    at.radio(key="source").set_value("Upload CSV files (one per site)").run()
    north = (SAMPLES / "synthetic_north_clinic.csv").read_text().splitlines()
    only_no = [north[0]] + [row for row in north[1:] if row.endswith(",no")]
    at.file_uploader[0].set_value([
        ("north.csv", "\n".join(north).encode(), "text/csv"),
        ("healthy.csv", "\n".join(only_no).encode(), "text/csv"),
    ]).run()
    assert not at.exception
    assert any("'healthy'" in unescaped(w.value) and "single class" in unescaped(w.value) and "still takes part" in unescaped(w.value)
               for w in at.warning)
    assert not at.button(key="use").disabled


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="needs ../shared/data beside the repo (as in CI)")
def test_a_dataset_on_this_machine(app, monkeypatch):
    at, store, _ = app
    monkeypatch.setenv("FEDCORE_DATA_DIRS", str(SHARED_DATA))
    open_page(at, "views/data.py")
    at.radio(key="source").set_value("A dataset on this machine").run()
    heart = next(o for o in at.selectbox(key="dataset").options if o.startswith("UCI heart disease"))
    at.selectbox(key="dataset").set_value(heart).run()
    assert not at.exception
    sites = at.dataframe[0].value
    assert list(sites["rows"]) == [303, 294, 123, 200]
    assert "switzerland / chol: switzerland's chol is 0 in 100% of its rows" in texts(at)  # the check-up's finding
    assert "not measured?" in texts(at)
    preview = at.dataframe[-1].value  # the first rows of each hospital, as the model sees them
    assert list(preview["site"].value_counts(sort=False)) == [5] * 4 and {"site", "class", "age"} <= set(preview)
    at.button(key="use").click().run()
    assert json.loads((store.root / ".dashboard.json").read_text())["data"]["ref"]["source"] == "heart"
    (store.root / ".dashboard.json").unlink()


def test_each_run_keeps_one_colour_whatever_is_drawn_with_it():
    from dashboard.presenters.figures import RUN_PALETTE, run_colors

    # the run's number picks its colour, whatever else is drawn with it: consecutive runs differ
    assert run_colors({"a": 1, "b": 2}) == {"a": RUN_PALETTE[0], "b": RUN_PALETTE[1]}
    assert run_colors({"b": 2, "c": 3})["b"] == RUN_PALETTE[1]
    selections = [{"first": 1, "ninth": 9, "second": 2}, {"ninth": 9}, {"ninth": 9, "tenth": 10, "first": 1}]
    assert {run_colors(chosen)["ninth"] for chosen in selections} == {RUN_PALETTE[0]}  # eight apart: alike
    many = run_colors({f"r{i}": i for i in range(1, 9)})
    assert len(set(many.values())) == 8
    old = run_colors({"old run": None})["old run"]  # runs from before numbers: by their id
    assert old in RUN_PALETTE and run_colors({"old run": None, "x": 1})["old run"] == old


def test_the_settings_that_differ_between_runs(tmp_path):
    from dashboard.presenters.record_tables import settings_table

    store = RunStore(tmp_path)
    slow = store.create(resolve_spec({"algorithm": "fedavg", "config": {"rounds": 2}}))
    fast = store.create(resolve_spec({"algorithm": "fedavg", "config": {"rounds": 2, "lr": 0.01}}))
    adafed = store.create(resolve_spec({"algorithm": "adafed", "config": {"rounds": 2}}))
    table = settings_table([slow, fast])
    assert table.to_dict("records") == [{"setting": "learning rate", "fedavg #1": "0.002", "fedavg #2": "0.01"}]
    # a parameter only one of the runs' algorithms has is no difference between them
    rows = settings_table([slow, adafed])["setting"].tolist()
    adafed_only = {setting_words(f"params.{key}") for key in adafed.spec.params}
    assert rows[0] == "algorithm" and not adafed_only & set(rows)
    assert not [row for row in rows if technical_first(row)]  # words, never config.x or params.y
    assert settings_table([slow, slow]).empty
    fast.set_identity(name="fedavg #1")  # two runs called alike stay apart
    assert list(settings_table([slow, fast]).columns) == ["setting", "fedavg #1 (#1)", "fedavg #1 (#2)"]


def test_a_page_is_refreshed_by_the_one_timer_when_a_run_it_shows_moves_on(tmp_path, monkeypatch):
    """refresh_while_training / refresh_if_moved (the sidebar's timer reruns the page; pages have no
    timers of their own): a rerun when the shown run's round, state or existence changes, none while
    it stands still, and nothing watched for a page of finished runs or after a full run began."""
    from types import SimpleNamespace

    from dashboard.widgets import common

    class Rerun(Exception):
        pass

    def rerun():
        raise Rerun

    fake = SimpleNamespace(session_state={}, rerun=rerun)
    monkeypatch.setattr(common, "st", fake)
    store = RunStore(tmp_path / "runs")
    training = store.create(resolve_spec({"algorithm": "fedavg", "config": {"rounds": 5}}))
    finished = store.create(resolve_spec({"algorithm": "fedavg", "config": {"rounds": 5}}))
    finished.mark_started(5)
    finished.mark_finished("cancelled")
    training.mark_started(5)  # this process is its worker: it stays 'running'
    training.heartbeat(round=2)

    common.refresh_while_training([finished])  # nothing trains: no timer wanted
    assert common.WATCHED not in fake.session_state
    common.refresh_while_training([training, finished])
    assert fake.session_state[common.WATCHED] == {training.id: ("running", 2, None), finished.id: ("cancelled", 0, None)}
    common.refresh_if_moved(store.runs())  # still at round 2: no rerun
    training.heartbeat(round=3)
    with pytest.raises(Rerun):
        common.refresh_if_moved(store.runs())
    assert common.WATCHED not in fake.session_state  # asked once; the page's next run watches again

    common.refresh_while_training([training])
    common.refresh_if_moved(store.runs())
    training.mark_finished("cancelled")  # its end is a move too: the page settles on the final state
    with pytest.raises(Rerun):
        common.refresh_if_moved(store.runs())

    common.refresh_while_training([finished, store.create(resolve_spec({"algorithm": "fedavg"}))])  # queued
    store.delete(finished.id)  # a run gone from the store is a move
    with pytest.raises(Rerun):
        common.refresh_if_moved(store.runs())

    common.refresh_while_training([training, store.runs()[0]])
    common.forget_watched()  # a full run starts: only the page drawn now may ask
    common.refresh_if_moved(store.runs())
