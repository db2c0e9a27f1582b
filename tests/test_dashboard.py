"""Every dashboard page through Streamlit's AppTest, on a store with small finished runs."""

import base64
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from fedcore.runner import execute, resolve_spec
from fedcore.store import RunStore
from tests.conftest import remove_started_runs

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


def open_page(at, page, run_id=None):
    at.run()
    if run_id:
        at.query_params["run"] = run_id
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    return at


def plotted(value):
    """A plotted array from a figure's JSON (plotly writes numpy arrays as base64 typed arrays)."""
    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return array.reshape([int(n) for n in str(shape).split(",")]) if shape else array
    return np.asarray(value)


def texts(at):
    return " ".join(m.value for m in [*at.markdown, *at.caption, *at.info, *at.warning, *at.success, *at.error])


def test_runs_page_lists_every_run(app):
    at, store, ids = app
    at.run()
    assert not at.exception
    assert at.title[0].value == "Federated interoperability dashboard"
    table = at.dataframe[0].value
    assert set(table["run id"]) == set(ids.values())
    assert set(table["state"]) == {"done"}
    assert "No training running." in texts(at)


def test_quick_start_launches_a_background_job_and_opens_the_heatmap(app):
    at, store, ids = app
    at.run()
    at.button[0].click().run()
    new = [r for r in store.runs() if r.id not in ids.values()]
    assert len(new) == 1 and new[0].spec["algorithm"] == "ifedavg"
    assert new[0].spec["params"]["local_f_out"] is True
    assert new[0].status["state"] in ("running", "done")


def test_train_page_launches_several_algorithms(app):
    at, store, ids = open_page(app[0], "views/train.py"), app[1], app[2]
    at.multiselect[0].set_value(["fedavg", "local"])
    at.number_input(key="config-rounds").set_value(2)
    at.button[0].click().run()
    assert not at.exception
    new = {r.spec["algorithm"]: r for r in store.runs() if r.id not in ids.values()}
    assert set(new) == {"fedavg", "local"}
    assert new["fedavg"].spec["config"]["rounds"] == 2
    assert "Started 2 run(s)" in texts(at)


def test_train_page_explains_invalid_settings(app):
    at, store, ids = open_page(app[0], "views/train.py"), app[1], app[2]
    at.number_input(key="config-rounds").set_value(0)
    at.button[0].click().run()
    assert "rounds must be at least 1" in texts(at)
    assert {r.id for r in store.runs()} == set(ids.values())  # nothing stored


def test_train_page_launches_a_flower_federation_run_as_a_job(app):
    at, store, ids = open_page(app[0], "views/train.py"), app[1], app[2]
    at.radio(key="where").set_value("flower").run()
    assert len(at.multiselect[0].options) == 6  # the algorithms a Flower federation runs
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
    assert run.spec["data"]["source"] == "flower" and run.spec["data"]["superlink"] == "127.0.0.1:9"
    assert run.spec["data"]["sites"] == 3 and run.spec["config"]["rounds"] == 2
    assert "Started 1 run(s)" in texts(at)


def test_apfl_keeps_its_own_engine_default_unless_changed(app):
    at, store, ids = open_page(app[0], "views/train.py"), app[1], app[2]
    at.multiselect[0].set_value(["apfl"])
    at.number_input(key="config-rounds").set_value(1)
    at.button[0].click().run()
    run = next(r for r in store.runs() if r.id not in ids.values())
    assert run.spec["config"]["momentum"] == 0.0


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


def test_compare_page(app):
    at, store, ids = app
    open_page(at, "views/compare.py")
    table = at.dataframe[0].value
    assert len(table) == len(QUICK_RUNS)
    assert {"mean F1 (weighted)", "worst site F1 (weighted)"} <= set(table.columns)
    assert len(at.get("plotly_chart")) == 2


def test_run_details_page(app):
    at, store, ids = app
    open_page(at, "views/run.py", ids["apfl"])
    final = at.dataframe[0].value
    assert list(final["site"])[-2:] == ["mean", "worst site"]
    assert len(at.get("plotly_chart")) == 2  # per-site curves and APFL's alpha


def test_lens_pages_say_what_to_do_without_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDCORE_STORE", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=60)
    for page in ("views/feature_shifts.py", "views/site_similarity.py", "views/site_weights.py",
                 "views/compare.py", "views/run.py"):
        open_page(at, page)
        assert at.info, page


def test_html_report_is_self_contained(finished_store):
    from dashboard.report import html_report

    store, ids = finished_store
    for run_id in ids.values():
        report = html_report(store.get(run_id))
        assert report.startswith("<!doctype html>") and "Scores at the last evaluated round" in report
        scripts = re.findall(r"<script[^>]*>", report)
        assert scripts and not any("src=" in tag for tag in scripts)  # plotly.js inline, nothing fetched
    ifedavg = html_report(store.get(ids["ifedavg"]))
    assert "Feature shifts at round 3" in ifedavg and "Injected problems" in ifedavg


SAMPLES = Path(__file__).resolve().parent.parent / "assets" / "sample_sites"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def test_upload_of_the_sample_csvs_shows_the_alignment_report(app):
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
    assert "`glucose` at **synthetic_east_clinic**" in shown  # the unit difference
    assert "semicolons" in shown and "'unknown'" in shown  # West's export, South's bad cells
    at.button(key="use").click().run()
    chosen = json.loads((store.root / ".dashboard.json").read_text())["data"]["ref"]
    assert chosen["source"] == "csv" and chosen["target"] == "diabetes" and len(chosen["files"]) == 4
    # ... and it trains: Train page, one short FedAvg run in a background job
    open_page(at, "views/train.py")
    at.multiselect[0].set_value(["fedavg"])
    at.number_input(key="config-rounds").set_value(2)
    at.button(key="start").click().run()
    run = next(r for r in store.runs() if r.spec["algorithm"] == "fedavg" and isinstance(r.spec["data"], dict))
    deadline = time.time() + 120
    while run.status["state"] in ("queued", "running") and time.time() < deadline:
        time.sleep(0.5)
    assert run.status["state"] == "done", run.status
    assert [s["name"] for s in run.federation["sites"]] == [f.stem for f in files]
    (store.root / ".dashboard.json").unlink()


def test_a_bad_upload_gets_a_specific_message_and_stores_nothing(app):
    at, store, _ = app
    open_page(at, "views/data.py")
    at.radio(key="source").set_value("Upload CSV files (one per site)").run()
    good = (SAMPLES / "synthetic_north_clinic.csv").read_bytes()
    at.file_uploader[0].set_value([("north.csv", good, "text/csv"), ("empty.csv", b"", "text/csv")]).run()
    assert not at.exception
    assert any("empty.csv" in e.value for e in at.error)
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
    assert any("'healthy'" in w.value and "single class" in w.value and "still takes part" in w.value
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
    assert "`chol` at **switzerland**" in texts(at)
    at.button(key="use").click().run()
    assert json.loads((store.root / ".dashboard.json").read_text())["data"]["ref"]["source"] == "heart"
    (store.root / ".dashboard.json").unlink()
