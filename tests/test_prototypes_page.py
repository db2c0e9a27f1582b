"""The Prototypes (inDISCO) page through Streamlit's AppTest, on a store with small finished LM, PM
and GM runs of the bias experiment (synthetic images, a stamp on site1)."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from application.runner import execute, resolve_spec
from fedcore.store import RunStore
from tests.helpers import remove_started_runs, unescaped

APP = str(Path(__file__).resolve().parent.parent / "app.py")
DATA = {"source": "synthetic_scans", "images": 150, "size": 28, "split": "iid", "sites": 3, "inject": ["stamp:site1"]}
PARAMS = {"prototypes_per_class": 3, "prototype_dim": 16, "last_layer_epochs": 2, "explain_images": 6}
CONFIG = {"rounds": 2, "local_epochs": 1}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    store = RunStore(tmp_path_factory.mktemp("store") / "runs")
    ids = {}
    for algorithm in ("indisco-lm", "indisco-pm", "indisco-gm"):  # GM last: the newest, the page's default
        run = store.create(resolve_spec({"algorithm": algorithm, "data": DATA, "params": PARAMS, "config": CONFIG}))
        execute(run)
        ids[algorithm] = run.id
    return store, ids


@pytest.fixture
def app(finished, monkeypatch, tmp_path):
    store, ids = finished
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    monkeypatch.setenv("FEDCORE_MAX_JOBS", "1")
    monkeypatch.setenv("FEDCORE_DATA_DIRS", str(tmp_path))  # no data set on this 'machine'
    at = AppTest.from_file(APP, default_timeout=90)
    yield at, store, ids
    remove_started_runs(store, list(ids.values()))  # stop and remove anything a test started


def open_prototypes(at, run_id=None):
    at.run()
    if run_id:
        at.query_params["run"] = run_id
    at.switch_page("views/prototypes.py")
    at.run()
    assert not at.exception, at.exception
    return at


def texts(at):
    """Every text element as a person reads it."""
    return " ".join(unescaped(m.value) for m in [*at.markdown, *at.caption, *at.info, *at.warning, *at.success, *at.error])


def test_the_page_shows_the_overlap_per_site_and_the_boxes(app):
    at, store, ids = app
    open_prototypes(at, ids["indisco-gm"])
    assert at.title[0].value == "Prototypes (inDISCO)"
    assert at.radio(key="local_source").value == "each site alone (LM run)"
    table = at.dataframe[0].value
    assert list(table["site"]) == ["site1", "site2", "site3"] and list(table["stamped"]) == ["yes", "no", "no"]
    # the page's numbers are the runs' recorded numbers: local from the LM run, global from GM
    for role, run_id in (("local", ids["indisco-lm"]), ("global", ids["indisco-gm"])):
        record = store.get(run_id).rounds()[-1].algorithm
        assert np.allclose(table[f"{role}: images on stamp"], [record.test_on_stamp[role][s]
                                                               for s in table["site"]])
        assert np.allclose(table[f"{role}: box share"], [record.stamp_overlap[role][s] for s in table["site"]])
        assert all(re.fullmatch(r"\d+/6", value) for value in table[f"{role}: prototypes"])
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [trace["name"] for trace in chart["data"]] == ["Local prototypes (LM: each site alone)",
                                                          "Global prototypes (GM: after the server averaged)"]
    images = list(at.image)
    shown = [unescaped(c) for image in images for c in image.captions]  # first tab: each test image, local and global box
    assert sum(c.startswith("hold-out image") for c in shown) == 6 and any("local: P" in c and "global: P" in c
                                                                         for c in shown)
    prototypes = [i for i in images if i.captions and i.captions[0].startswith("P0")]
    assert len(prototypes) == 2 and len(prototypes[0].captions) == 6  # local and global, every prototype
    assert "Synthetic images: SYNTHETIC images made up in code" in texts(at)


def test_site_and_image_pickers_and_the_top_prototypes(app):
    at, store, ids = app
    open_prototypes(at, ids["indisco-gm"])
    at.selectbox(key="site").set_value(2).run()
    assert not at.exception
    at.selectbox(key="image").set_value(at.selectbox(key="image").options[1]).run()
    assert not at.exception
    tops = [d.value for d in at.dataframe if "rank" in d.value]
    assert len(tops) == 2 and list(tops[0]["rank"]) == list(range(1, 7))  # all six prototypes, most activated first
    assert (np.diff(tops[0]["similarity"].to_numpy()) <= 1e-6).all()
    assert any(c.startswith("connection to") for c in tops[0].columns)


def test_gm_pm_switch(app):
    at, store, ids = app
    open_prototypes(at, ids["indisco-gm"])
    switch = at.get("segmented_control")[0]
    assert set(switch.options) == {"GM (everything averaged)", "PM (prototypes and last layer averaged)"}
    switch.set_value("indisco-pm").run()
    assert at.selectbox(key="run_picker").value == ids["indisco-pm"]
    names = [trace["name"] for trace in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]]
    assert names[1] == "Global prototypes (PM: averaged, pushed onto this site's images)"
    at.radio(key="local_source").set_value("as each site sent them (PM run)").run()
    names = [trace["name"] for trace in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]]
    assert names == ["Local prototypes (as each site sent them in PM)",
                     "Global prototypes (PM: averaged, pushed onto this site's images)"]


def test_the_bias_preset_starts_lm_gm_and_pm_on_declared_synthetic_data(app):
    at, store, ids = app
    open_prototypes(at)
    assert at.selectbox(key="preset_data").value.startswith("SYNTHETIC scans made up in code")
    assert "SYNTHETIC images: made up in code" in texts(at)
    at.button(key="preset").click().run()
    assert not at.exception
    new = [r for r in store.runs() if r.id not in ids.values()]
    assert sorted(r.spec.algorithm for r in new) == ["indisco-gm", "indisco-lm", "indisco-pm"]
    gm = next(r for r in new if r.spec.algorithm == "indisco-gm")
    assert at.selectbox(key="run_picker").value == gm.id  # the page follows the new GM run
    for run in new:
        assert run.spec.data["source"] == "synthetic_scans" and run.spec.data["inject"] == ["stamp:site1"]


def test_the_bias_preset_offers_the_medmnist_files_on_this_machine(app, shared_data, monkeypatch):
    from dashboard.widgets.bias_experiment import preset_choices

    monkeypatch.setenv("FEDCORE_DATA_DIRS", str(shared_data / "medmnist"))
    found = {label: data for label, (data, synthetic) in preset_choices().items() if not synthetic}
    assert {Path(d["path"]).name for d in found.values()} == {"breastmnist.npz", "pneumoniamnist.npz"}
    assert all(d["inject"] == ["stamp:site1"] and "found on this machine" in label for label, d in found.items())


def test_without_runs_the_page_offers_the_preset(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDCORE_STORE", str(tmp_path / "runs"))
    monkeypatch.setenv("FEDCORE_DATA_DIRS", str(tmp_path))
    at = open_prototypes(AppTest.from_file(APP, default_timeout=60))
    assert at.button(key="preset") and "No inDISCO run yet" in texts(at)


def test_fedhealth2_on_images_uses_the_same_similarity_page(finished, monkeypatch):
    store, _ = finished
    small = {**DATA, "size": 16, "inject": []}
    run = store.create(resolve_spec({"algorithm": "fedhealth2", "data": small, "params": {"pretrain_epochs": 2},
                                     "config": {"rounds": 1}}))
    execute(run)
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.query_params["run"] = run.id
    at.switch_page("views/site_similarity.py")
    at.run()
    assert not at.exception
    weights = json.loads(at.get("plotly_chart")[1].proto.spec)["data"][0]
    assert len(weights["x"]) == 3 and "BatchNorm inputs of a server-pretrained model" in texts(at)
    store.delete(run.id)


def test_html_report_of_an_indisco_run_draws_the_boxes_and_the_overlap(finished):
    from dashboard.presenters.report import html_report
    from dashboard.presenters.report_sections import IMAGES_PER_SITE

    store, ids = finished
    run = store.get(ids["indisco-pm"])
    # for a reader not allowed to see rows (the default): the statistics, none of the sites' images
    withheld = html_report(run)
    assert "Hold-out images whose most activated prototype" in withheld and not re.findall(r"<img ", withheld)
    assert "Each site's images are its rows: this report leaves them out" in withheld
    report = html_report(run, rows=True)
    assert "Prototypes at round 2" in report and "Hold-out images whose most activated prototype" in report
    assert [f"<h3>{s}</h3>" in report for s in ("site1 (stamped)", "site2", "site3")] == [True] * 3
    images = re.findall(r"<img [^>]*src='([^']*)'", report)
    assert images and all(src.startswith("data:image/png;base64,") for src in images)  # nothing fetched
    recorded = sum(min(IMAGES_PER_SITE, int((rows >= 0).sum())) for rows in run.load_arrays(2)["test_rows"])
    assert len(images) == recorded
    record = run.rounds()[-1].algorithm.test_on_stamp["global"]
    assert f"{record['site1']:.2f}" in report  # the overlap table carries the recorded numbers
