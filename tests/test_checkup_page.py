"""The Check-up page (views/checkup.py) through Streamlit's AppTest, and its exports: a store with
no check-up, the demo's check-up with only the data lens, with small finished runs of every model
lens, with runs still training, a Flower-like run's federation, an image federation, and a
federation whose names are Markdown, HTML and spreadsheet formulas.

Known answers: the demo federation records the four problems injected into it (its ground truth);
each must show at its site, in the lens that sees it, and the sites without one must show
nothing in the data lens."""

import html
import io
import json
import os
import re
import shutil
import statistics
import socket
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from data_adapters import load_federation
from dashboard.widgets.common import format_duration
from dashboard.presenters.record_tables import run_name
from dashboard.presenters.checkup_view import (DATA_LENS, NOT_CHECKED, NOTHING_FOUND, NO_DATA_LENS, REACHED, TRAINING,
                                              TYPICAL, evidence_figure)
from fedcore.interpret.data_checks import location_reach
from fedcore.interpret import checks
from dashboard.presenters.report import checkup_report, html_report
from fedcore.checkup import add_runs, plans
from application.checkup_jobs import start_checkup
from fedcore.glossary import COLUMNS, technical_first
from fedcore.interpret.findings import KINDS
from fedcore.interpret.profile import PROBABILITIES
from application.runner import execute, resolve_spec
from fedcore.store import RunStore, atomic_write_json, to_json
from tests.helpers import open_page, remove_started_runs, unescaped
from tests.test_dashboard import plotted

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
PAGE = "views/checkup.py"
# The demo's injected problems, as the data lens names them (fedcore.interpret.findings.KINDS).
INJECTED_AS = {"offset": "location", "unit": "unit", "missing_not_at_random": "missing_by_class",
               "label_flip": "labels_permuted"}
SMALL_RUNS = {  # role -> specs: a few rounds each, enough for the demo's flipped labels to show
    "feature_shifts": [{"algorithm": "ifedavg", "params": {"local_f_out": True, "scalar_w_out": True},
                        "config": {"rounds": 3, "seed": seed}} for seed in (0, 1)],
    "shared_model": [{"algorithm": "fedavg", "config": {"rounds": 3}}],
    "contribution": [{"algorithm": "adafed", "config": {"rounds": 2}}],
    "similarity": [{"algorithm": "fedhealth2", "params": {"variant": "f", "warmup_rounds": 1},
                    "config": {"rounds": 2}}],
}
IMAGES = {"source": "synthetic_scans", "images": 150, "size": 28, "split": "iid", "sites": 3, "inject": ["stamp:site1"]}
PROTOTYPE_PARAMS = {"prototypes_per_class": 3, "prototype_dim": 16, "last_layer_epochs": 2, "explain_images": 6}


def demo_truth() -> dict[str, str]:
    """site -> the finding kind its injected problem should be found as."""
    return {g.site: INJECTED_AS[g.kind] for g in load_federation("demo", 0).ground_truth}


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory):
    """The demo's check-up with only the data lens, and one with small finished runs of every model lens."""
    store = RunStore(tmp_path_factory.mktemp("checkup") / "runs")
    data_only = start_checkup(store, "demo", train=False)
    full = start_checkup(store, "demo", train=False)
    for role, specs in SMALL_RUNS.items():
        runs = [store.create(resolve_spec({**spec, "data": "demo"})) for spec in specs]
        for run in runs:
            execute(run)
            assert run.status.state == "done", run.status
        add_runs(full, role, [run.id for run in runs])
    return store, {"data only": data_only.id, "full": full.id}


@pytest.fixture
def app(demo_store, monkeypatch):
    store, ids = demo_store
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    monkeypatch.setenv("FEDCORE_MAX_JOBS", "1")
    keep = [run.id for run in store.runs()]
    yield AppTest.from_file(APP, default_timeout=120), store, ids
    remove_started_runs(store, keep)


@pytest.fixture
def downloads(monkeypatch):
    """What every st.download_button a page draws would hand the browser: file name -> bytes."""
    captured = {}
    draw = st.download_button

    def record(label, data, file_name=None, *args, **kwargs):
        captured[file_name] = data() if callable(data) else data
        return draw(label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", record)
    return captured


def open_checkup(at, checkup_id=None, **query):
    return open_page(at, PAGE, **({"checkup": checkup_id} if checkup_id else {}), **query)


def texts(at):
    return " ".join(unescaped(m.value) for m in [*at.markdown, *at.caption, *at.info, *at.warning, *at.success,
                                                 *at.error])


def charts(at) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def grid_cells(at) -> dict[tuple[str, str], str]:
    """(site, lens) -> the text written in the grid's cell, as a person reads it."""
    grid = charts(at)[0]
    cells = {}
    for note in grid["layout"]["annotations"]:
        text = re.sub(r"<[^>]+>", " ", note["text"].replace("<br>", " "))
        cells[(html.unescape(note["y"]), note["x"])] = html.unescape(" ".join(text.split()))
    return cells


def links(at) -> list[tuple[str, str, str]]:
    """(label, page, query) of every page link drawn."""
    return [(unescaped(link.proto.label), link.proto.page, link.proto.query_string) for link in at.get("page_link")]


# -- no check-up, starting one -----------------------------------------------------------------
def test_without_a_checkup_the_page_says_how_to_start_one(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDCORE_STORE", str(tmp_path / "runs"))
    at = open_checkup(AppTest.from_file(APP, default_timeout=60))
    assert at.title[0].value == "Site check-up"
    assert "No check-up yet. Start one above" in texts(at)
    assert "Start the check-up" in [b.label for b in at.button]
    assert any(page == "data" for _, page, _ in links(at))
    assert not at.get("plotly_chart")


def test_starting_a_checkup_shows_the_data_lens_at_once_and_the_model_lenses_training(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs")
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    monkeypatch.setenv("FEDCORE_MAX_JOBS", "1")
    at = open_checkup(AppTest.from_file(APP, default_timeout=120))
    try:
        assert at.checkbox(key="checkup_train").value is False  # the data lens first: seconds, not minutes
        at.checkbox(key="checkup_train").check()
        at.number_input(key="checkup_rounds").set_value(2000)  # long enough to be still training below
        at.number_input(key="checkup_replicates").set_value(2).run()
        # nothing finished in this store yet: the benchmark's pace, 2 iFedAvg runs and 3 others of 2000 rounds
        benchmark = 2000 * (2 * 0.031 + 0.033 + 0.053 + 0.033)
        assert f"About {format_duration(benchmark)} of training" in texts(at) and "benchmark" in texts(at)
        at.button(key="checkup_start").click().run()
        assert not at.exception, at.exception
        [plan] = plans(store)
        assert at.query_params["checkup"] == [plan.id] or at.query_params["checkup"] == plan.id
        roles = plan.contents.runs
        assert {role: len(ids) for role, ids in roles.items()} == {"feature_shifts": 2, "shared_model": 1,
                                                                  "contribution": 1, "similarity": 1}
        assert [store.get(i).spec.rounds for ids in roles.values() for i in ids] == [2000] * 5
        cells = grid_cells(at)
        for site, kind in demo_truth().items():
            assert cells[(site, "data profile")].startswith(KINDS[kind]), (site, cells[(site, "data profile")])
        assert {cells[(site, lens)] for site in demo_truth() for lens in ("feature shifts", "labels", "contribution",
                                                                         "similarity")} == {TRAINING}
        shown = texts(at)
        assert "Still training for: contribution, feature shifts, labels, similarity" in shown
        assert len(at.get("progress")) >= 5  # a bar per run (and the sidebar's)
    finally:
        remove_started_runs(store, [])


# -- the demo: data lens only ------------------------------------------------------------------
def test_the_data_lens_names_the_demos_four_problems_at_their_sites_and_nothing_else(app):
    at, store, ids = app
    open_checkup(at, ids["data only"])
    cells = grid_cells(at)
    truth = demo_truth()
    sites = load_federation("demo", 0).site_names
    assert {site for site, _ in cells} == set(sites)
    assert {lens for _, lens in cells} == {"data profile", "feature shifts", "labels", "contribution", "similarity"}
    for site in sites:
        data = cells[(site, "data profile")]
        if site in truth:
            assert data.startswith(KINDS[truth[site]]) and re.search(r"q (<|=) 0\.\d+", data), (site, data)
        else:
            assert data == NOTHING_FOUND, (site, data)
        assert {cells[(site, lens)] for lens in ("feature shifts", "labels", "contribution", "similarity")} \
            == {NOT_CHECKED}
    shown = texts(at)
    result = next(p for p in plans(store) if p.id == ids["data only"]).evaluate(store)
    assert (f"**{len(result.reported)} findings** at a 5% false discovery rate · 8 sites · "
            f"{result.tested} cells tested") in shown
    # the ranked list: every finding's site, title and message, strongest first
    ranked = [m for m in (unescaped(m.value) for m in at.markdown) if re.match(r"\*\*\d+\. ", m)]
    assert len(ranked) == len(result.reported) == 4
    for line, finding in zip(ranked, result.reported):
        assert line.startswith(f"**{result.reported.index(finding) + 1}. {finding.site}**") and finding.title in line
        assert finding.message in shown
    assert "Elm Regional's temperature looks like °F" in shown
    assert "How the check-up decides (calibration)" in [e.label for e in at.expander]


def test_the_first_findings_draw_their_data_in_its_units(app):
    at, store, ids = app
    open_checkup(at, ids["data only"])
    plan = next(p for p in plans(store) if p.id == ids["data only"])
    result = plan.evaluate(store)
    unit = next(f for f in result.reported if f.kind == "unit")
    figures = charts(at)[1:]  # the first three findings show their data: every kind has a view
    assert len(figures) == 3
    figure = next(f for f in figures if "temperature" in f["layout"]["title"]["text"])
    # the °F site as it records it, on an axis in °F; converted (× 5/9 − 17.78) among the others in °C
    assert "°F" in figure["layout"]["xaxis"]["title"]["text"] and "°C" in figure["layout"]["xaxis2"]["title"]["text"]
    boxes = [t for t in figure["data"] if t["type"] == "box"]
    recorded = next(b for b in boxes if b["xaxis"] == "x")
    converted = next(b for b in boxes if b["xaxis"] == "x2" and b["y"][0] == "Elm Regional, converted")
    elm = plan.profile.sites.index("Elm Regional")
    median = plan.profile.quantiles[elm, list(np.round(PROBABILITIES, 2)).index(0.5), plan.profile.features.index(
        "temperature")]
    assert np.isclose(recorded["median"][0], median) and 90 < median < 110
    assert np.isclose(converted["median"][0], (median - 32) * 5 / 9) and 35 < converted["median"][0] < 40
    assert np.isclose(unit.evidence["a"], 5 / 9) and unit.evidence["site_unit"] == "°F"
    others = [b for b in boxes if b["xaxis"] == "x2" and b is not converted]
    assert len(others) == 7 and all(35 < b["median"][0] < 40 and b["marker"]["color"] == "#9aa5b1" for b in others)
    missing = next(f for f in figures if "missing" in f["layout"]["title"]["text"])
    bars = {t["name"]: plotted(t["x"]) for t in missing["data"]}
    fir = load_federation("demo", 0).site_names.index("Fir Valley")
    assert bars["outcome: no sepsis"][fir] == 1.0 and bars["outcome: sepsis"][fir] == 0.0  # 'only for sick patients'
    assert len({t["marker"]["color"] for t in missing["data"]}) == 2  # a colour per outcome


def test_every_tested_cell_is_listed_with_p_and_q(app):
    at, store, ids = app
    open_checkup(at, ids["data only"])
    result = next(p for p in plans(store) if p.id == ids["data only"]).evaluate(store)
    # the page's headers in words, the technical name after (the glossary's); the CSV keeps the names
    every = at.dataframe[-1].value.rename(columns={words: name for name, words in COLUMNS.items()})
    assert {"q", "p", "effect", "effect unit"} <= set(every.columns)
    assert len(every) == len(result.findings) > 100
    assert every["reported"].sum() == len(result.reported)
    assert (every.loc[every["reported"], "q"] < 0.05).all()
    assert set(every.loc[~every["reported"], "site"]) >= {"Alder General", "Pine County"}  # what was not found, too
    tested = every["not testable"] == ""
    assert tested.sum() == result.tested
    assert every.loc[tested, "q"].between(0, 1).all() and (every.loc[tested, "q"] >= every.loc[tested, "p"] - 1e-12).all()
    # a cell that could not be tested is listed with its reason, never with a p-value that looks like a pass
    assert every.loc[~tested, "p"].isna().all() and every.loc[~tested, "q"].isna().all()
    assert np.allclose(every["q"], [f.q for f in result.findings], equal_nan=True)
    assert np.allclose(every["p"], [f.p for f in result.findings], equal_nan=True)


# -- every lens, from small finished runs --------------------------------------------------------
def test_finished_runs_fill_every_lens_and_link_to_their_pages(app):
    at, store, ids = app
    open_checkup(at, ids["full"])
    cells = grid_cells(at)
    truth = demo_truth()
    # every lens looked at every site
    assert not any(text in (NOT_CHECKED, TRAINING) for text in cells.values())
    for site, kind in truth.items():
        assert cells[(site, "data profile")].startswith(KINDS[kind]), (site, cells[(site, "data profile")])
    # the flipped labels at Oak District: a shared model scores worse than guessing there, and AdaFed's
    # server scores its model lowest
    # (the data lens found the swap too: the labels lens's cell says it agrees, and stays visible)
    assert cells[("Oak District", "labels")].startswith(KINDS["shared_model_reversed"])
    assert "agrees with the data lens" in cells[("Oak District", "labels")]
    assert cells[("Oak District", "contribution")].startswith(KINDS["low_contribution"])
    assert all(cells[(site, "labels")] == NOTHING_FOUND for site in truth if site != "Oak District")
    plan = next(p for p in plans(store) if p.id == ids["full"])
    # a lens with a significant finding at a site never says 'nothing found' there: a finding another
    # lens explains stays visible in its own cell, agreeing (the calibrated heatmap marks the same cells)
    result = plan.evaluate(store)
    for (site, lens), text in cells.items():
        mine = [f for f in result.findings if (f.site, f.lens) == (site, lens) and f.significant]
        assert not mine or not text.startswith(NOTHING_FOUND), (site, lens, text)
        if mine and all(f.explained_by for f in mine) and {checks.BY_KIND[f.explained_by].lens for f in mine} == {
                DATA_LENS}:
            assert "agrees with the data lens" in text, (site, lens, text)
    # the drill-downs: each model-lens finding links to its run's lens page
    roles = plan.contents.runs
    shown = links(at)
    fedavg, adafed = roles["shared_model"][0], roles["contribution"][0]
    assert any(page == "run" and query == f"run={fedavg}" and "Oak District" in label
               for label, page, query in shown), shown
    assert any(page == "site_weights" and query == f"run={adafed}" for _, page, query in shown)
    assert "ROC AUC" in texts(at) and "Oak District's own test rows kept aside (hold-out)" in texts(at)


def test_lenses_still_training_show_as_such_and_fill_in_when_their_run_finishes(demo_store, tmp_path, monkeypatch):
    source, ids = demo_store
    store = RunStore(tmp_path / "runs")
    shutil.copytree(source.root, store.root)
    plan = next(p for p in plans(store) if p.id == ids["full"])
    similarity = store.get(plan.contents.runs["similarity"][0])
    status = to_json(similarity.raw_status())  # as stored, written back below
    # 'running', written by a process that is alive (this one): nothing may start or stop it
    similarity.update_status(state="running", pid=os.getpid(), host=socket.gethostname())
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = open_checkup(AppTest.from_file(APP, default_timeout=120), plan.id)
    try:
        cells = grid_cells(at)
        assert {cells[(site, "similarity")] for site in demo_truth()} == {TRAINING}
        assert cells[("Oak District", "labels")].startswith(KINDS["shared_model_reversed"])  # the other lenses stay
        assert "Still training for: similarity" in texts(at)
        assert any(f"{run_name(similarity)} for the similarity lens: running" in unescaped(p.proto.text)
                   for p in at.get("progress"))
    finally:
        atomic_write_json(similarity.path / "status.json", status)  # done again
    at.run()
    cells = grid_cells(at)
    assert TRAINING not in {cells[(site, "similarity")] for site in demo_truth()}
    assert "Still training" not in texts(at)


def test_a_failed_run_leaves_its_lens_unchecked_and_says_why(demo_store, tmp_path, monkeypatch):
    source, ids = demo_store
    store = RunStore(tmp_path / "runs")
    shutil.copytree(source.root, store.root)
    plan = next(p for p in plans(store) if p.id == ids["full"])
    adafed = store.get(plan.contents.runs["contribution"][0])
    (adafed.path / "rounds.jsonl").unlink()
    adafed.mark_finished("failed", "diverged at round 2 (site Oak District)")
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = open_checkup(AppTest.from_file(APP, default_timeout=120), plan.id)
    cells = grid_cells(at)
    assert {cells[(site, "contribution")] for site in demo_truth()} == {NOT_CHECKED}
    assert f"{run_name(adafed)} for the contribution lens: failed" in texts(at) and "diverged at round 2" in texts(at)
    assert "Still training" not in texts(at)


# -- a Flower run's federation ---------------------------------------------------------------------
def flower_like(store: RunStore, run_id: str, profile: bool = True) -> str:
    """A copy of a finished run that looks like a Flower run: a flower: data reference, the flower
    block in its federation record, and (unless not `profile`) the profile its sites sent."""
    source = store.get(run_id)
    new_id = run_id.rsplit("-", 1)[0] + "-f10w" + ("" if profile else "n0p")
    shutil.copytree(source.path, store.root / new_id)
    run = store.get(new_id)
    atomic_write_json(run.path / "spec.json", {**to_json(run.spec), "run_id": new_id, "data": "flower:127.0.0.1:9092,sites=8"})
    federation = to_json(run.federation)
    federation["flower"] = {"superlink": "127.0.0.1:9092", "sites": {name: {"share_local": True}
                                                                   for name in run.federation.site_names}}
    atomic_write_json(run.path / "federation.json", federation)
    if not profile:
        (run.path / "profile.npz").unlink()
    return new_id


def test_a_flower_runs_federation_is_checked_up_from_what_its_sites_sent(demo_store, tmp_path, monkeypatch):
    source, ids = demo_store
    store = RunStore(tmp_path / "runs")
    shutil.copytree(source.root, store.root)
    full = next(p for p in plans(store) if p.id == ids["full"])
    flower = flower_like(store, full.contents.runs["feature_shifts"][0])
    before = {p.id for p in plans(store)}
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = open_checkup(AppTest.from_file(APP, default_timeout=120), run=flower)  # as Run details links it
    assert at.radio(key="checkup_source").value == "run" and at.selectbox(key="checkup_run").value == flower
    at.button(key="checkup_from_run").click().run()
    assert not at.exception, at.exception
    [plan] = [p for p in plans(store) if p.id not in before]
    assert plan.contents.runs == {"feature_shifts": [flower]} and store.runs()  # nothing trained
    assert "Flower federation at 127.0.0.1:9092" in plan.contents.label
    cells = grid_cells(at)
    for site, kind in demo_truth().items():
        assert cells[(site, "data profile")].startswith(KINDS[kind])
    assert all(cells[(site, "feature shifts")] not in (NOT_CHECKED, TRAINING) for site in demo_truth())
    assert {cells[(site, "contribution")] for site in demo_truth()} == {NOT_CHECKED}
    assert {cells[(site, "similarity")] for site in demo_truth()} == {NOT_CHECKED}


def test_a_flower_run_whose_sites_kept_their_statistics_has_no_data_lens(demo_store, tmp_path, monkeypatch):
    source, ids = demo_store
    store = RunStore(tmp_path / "runs")
    shutil.copytree(source.root, store.root)
    full = next(p for p in plans(store) if p.id == ids["full"])
    flower = flower_like(store, full.contents.runs["shared_model"][0], profile=False)
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = open_checkup(AppTest.from_file(APP, default_timeout=120), run=flower)
    at.button(key="checkup_from_run").click().run()
    cells = grid_cells(at)
    assert {cells[(site, "data profile")] for site in demo_truth()} == {NO_DATA_LENS}
    assert cells[("Oak District", "labels")].startswith(KINDS["shared_model_reversed"])
    assert "agrees" not in cells[("Oak District", "labels")]  # no data lens to agree with: a finding of its own
    assert "No data lens: the sites did not share their statistics" in texts(at)


# -- images --------------------------------------------------------------------------------------
def test_an_image_federation_has_labels_and_prototypes_and_says_it_has_no_data_lens(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs")
    plan = start_checkup(store, IMAGES, train=False)
    runs = {"shared_model": store.create(resolve_spec({"algorithm": "fedavg", "data": IMAGES,
                                                       "config": {"rounds": 2}})),
            "prototypes": store.create(resolve_spec({"algorithm": "indisco-lm", "data": IMAGES,
                                                     "params": PROTOTYPE_PARAMS,
                                                     "config": {"rounds": 2, "local_epochs": 1}}))}
    for role, run in runs.items():
        execute(run)
        add_runs(plan, role, [run.id])
    assert plan.kind == "image" and plan.profile is None
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = open_checkup(AppTest.from_file(APP, default_timeout=120), plan.id)
    cells = grid_cells(at)
    assert {lens for _, lens in cells} == {"data profile", "labels", "prototypes"}
    assert {cells[(site, "data profile")] for site in ("site1", "site2", "site3")} == {NO_DATA_LENS}
    assert all(cells[(site, lens)] not in (NOT_CHECKED, TRAINING) for site in ("site1", "site2", "site3")
               for lens in ("labels", "prototypes"))
    assert "No data lens: these are images" in texts(at)
    result = plan.evaluate(store)
    assert set(result.sources) == {"labels", "prototypes"}
    for site in ("site1", "site2", "site3"):  # the page shows what the check-up found, or that it found nothing
        found = result.cell(site, "prototypes")
        if found is None:
            assert cells[(site, "prototypes")] == NOTHING_FOUND
        else:
            assert cells[(site, "prototypes")].startswith(found.title)


# -- exports -------------------------------------------------------------------------------------
def test_the_findings_grid_and_html_report_carry_the_findings(app, downloads):
    at, store, ids = app
    open_checkup(at, ids["full"])
    plan = next(p for p in plans(store) if p.id == ids["full"])
    result = plan.evaluate(store)
    findings = pd.read_csv(io.BytesIO(downloads[f"checkup-{plan.id}-findings.csv"]))
    assert list(findings["rank"]) == list(range(1, len(result.reported) + 1))
    assert list(findings["site"]) == [f.site for f in result.reported]
    assert list(findings["finding"]) == [f.title for f in result.reported]
    assert np.allclose(findings["q"], [f.q for f in result.reported]) and (findings["q"] < 0.05).all()
    assert list(findings["message"]) == [f.message for f in result.reported]
    runs = plan.contents.runs
    assert set(findings.loc[findings["lens"] == "labels", "source"]) <= {", ".join(runs["feature_shifts"]),
                                                                         *runs["shared_model"]}
    grid = pd.read_csv(io.BytesIO(downloads[f"checkup-{plan.id}-grid.csv"]))
    assert list(grid.columns) == ["site", "data profile", "feature shifts", "labels", "contribution", "similarity"]
    truth = demo_truth()
    for _, row in grid.iterrows():
        assert row["data profile"].startswith(KINDS[truth[row["site"]]]) if row["site"] in truth \
            else row["data profile"] == NOTHING_FOUND
    every = pd.read_csv(io.BytesIO(downloads[f"checkup-{plan.id}-every-cell.csv"]))
    assert len(every) == len(result.findings) and every["reported"].sum() == len(result.reported)
    report = downloads[f"checkup-{plan.id}.html"].decode()
    scripts = re.findall(r"<script[^>]*>", report)
    assert report.startswith("<!doctype html>") and scripts and not any("src=" in tag for tag in scripts)
    for finding in result.reported:
        assert html.escape(finding.message) in report
    assert "Every tested cell" in report and "q-value" in report


def test_a_runs_html_report_has_the_checkup_it_feeds(demo_store):
    store, ids = demo_store
    plan = next(p for p in plans(store) if p.id == ids["full"])
    fedavg = store.get(plan.contents.runs["shared_model"][0])
    report = html_report(fedavg)
    assert "<h2>Check-up: demo</h2>" in report
    assert "Oak District" in report and KINDS["labels_permuted"] in report
    alone = store.create(resolve_spec({"algorithm": "fedavg", "data": "demo", "config": {"rounds": 1}}))
    execute(alone)
    try:
        assert "Check-up" not in html_report(alone)
    finally:
        shutil.rmtree(alone.path)
    whole = checkup_report(plan, store)
    scripts = re.findall(r"<script[^>]*>", whole)
    assert "<h1>Check-up: demo</h1>" in whole and scripts and not any("src=" in tag for tag in scripts)


# -- hostile names ---------------------------------------------------------------------------------
EVIL_HOST = "198.51.100.7"  # TEST-NET-2: nothing answers there, and nothing here may ask
SITES = [f"![s](http://{EVIL_HOST}/site.png)", "**Bold** <b>Hospital</b>", f"[click](http://{EVIL_HOST}/)",
         "=HYPERLINK(\"x\")"]
IMAGE = f"![c](http://{EVIL_HOST}/column.png)"
TAG = "<a href='http://198.51.100.7'>lab</a>"


def hostile_csv(path: Path) -> Path:
    """Four sites named with Markdown, HTML and a formula; a column named like an image, one site's
    values of it a hundred times larger; a column named with a link tag, 999 for 'missing' at another
    site; the formula site's ages missing for every 'yes'."""
    rng = np.random.default_rng(0)
    rows = []
    for i, site in enumerate(SITES):
        for r in range(120):
            outcome = r % 3 == 0
            rows.append({"site": site, "age": np.nan if i == 3 and outcome else rng.normal(60, 10),
                         IMAGE: rng.normal(5, 1) * (100 if i == 1 else 1),
                         TAG: 999.0 if i == 2 and r % 4 == 0 else rng.normal(2 + outcome, 1),
                         "outcome": "yes" if outcome else "no"})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_hostile_names_are_text_on_the_page_in_the_figures_and_the_exports(tmp_path, monkeypatch, downloads):
    store = RunStore(tmp_path / "runs")
    (tmp_path / "data").mkdir()
    data = {"source": "csv", "files": [str(hostile_csv(tmp_path / "data" / "sites.csv"))], "site_column": "site",
            "target": "outcome", "standardization": "site"}
    plan = start_checkup(store, data, train=False)
    result = plan.evaluate(store)
    assert {f.site for f in result.reported} >= set(SITES[1:])  # the problems are found, names and all
    assert {f.feature for f in result.reported} >= {IMAGE, TAG}
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = open_checkup(AppTest.from_file(APP, default_timeout=120), plan.id)
    shown = texts(at)
    assert SITES[1] in shown and IMAGE in shown and TAG in shown  # each reaches the page as the text it is ...
    for element in [*at.markdown, *at.caption, *at.info, *at.warning, *at.success, *at.error]:
        body = re.sub(r"(`+).*?\1", "", element.value)
        for raw in ("![", "](", "<a ", "<b>", "**Bold", f"http://{EVIL_HOST}"):
            # ... present only behind a backslash, which makes its first character plain text
            assert all(m.start() > 0 and body[m.start() - 1] == "\\" for m in re.finditer(re.escape(raw), body)), \
                (raw, element.value)
    for figure in charts(at):  # plotly draws <a>, <b>, <br> in its texts: the names are escaped there
        spec = json.dumps(figure)
        assert "<b>Hospital" not in spec and "<a href" not in spec
    assert "&lt;b&gt;Hospital&lt;/b&gt;" in json.dumps(charts(at)[0])
    findings = pd.read_csv(io.BytesIO(downloads[f"checkup-{plan.id}-findings.csv"]))
    assert "'" + SITES[3] in set(findings["site"]) and SITES[3] not in set(findings["site"])
    assert not any(str(v).startswith(("=", "+", "@")) for v in findings.to_numpy().ravel())
    every = pd.read_csv(io.BytesIO(downloads[f"checkup-{plan.id}-every-cell.csv"]))
    assert "'" + SITES[3] in set(every["site"]) and SITES[3] not in set(every["site"])
    report = checkup_report(plan, store)
    assert "<b>Hospital</b>" not in report and TAG not in report and "&lt;b&gt;Hospital&lt;/b&gt;" in report


# -- roles ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("role", ["viewer", "analyst"])
def test_a_viewer_reads_checkups_and_an_analyst_may_start_them(demo_store, monkeypatch, role):
    from tests.test_security_pages import SECRETS, USERS

    store, ids = demo_store
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = AppTest.from_file(APP, default_timeout=120)
    at.secrets, at.user = SECRETS, USERS[role]
    open_checkup(at, ids["data only"])
    assert grid_cells(at)[("Elm Regional", "data profile")].startswith(KINDS["unit"])  # both read it
    may_start = role == "analyst"
    assert ("Start a check-up" in [e.label for e in at.expander]) is may_start
    assert ("Start the check-up" in [b.label for b in at.button]) is may_start
    assert "The findings (CSV)" in [b.label for b in at.get("download_button")]  # exports are a viewer's too
    run_id = next(p for p in plans(store) if p.id == ids["full"]).contents.runs["shared_model"][0]
    at.query_params["run"] = run_id
    at.switch_page("views/run.py")
    at.run()
    assert any(label == "Check up this run's federation" for label, _, _ in links(at)) is may_start


def test_a_site_that_withheld_its_statistics_is_a_not_testable_cell_with_the_reason(tmp_path, monkeypatch):
    """The demo checked at a minimum of 350 rows: Oak District (340 rows) shares its size only, and its
    data-lens cell says 'not testable: not shared (fewer than 350 rows)'; Cedar Community (80 patients
    with sepsis) withholds its per-class statistics, so its label tests are listed as not testable with
    the reason, while its other tests run; the page and the HTML report say what each site shared at
    which policy."""
    from dashboard.presenters.checkup_view import NOT_TESTABLE, findings_frame, grid, sharing_frame

    reason = "not shared (fewer than 350 rows)"
    store = RunStore(tmp_path / "runs")
    plan = start_checkup(store, "demo", train=False, disclosure={"min_count": 350})
    assert plan.contents.disclosure == {"min_count": 350, "dp_epsilon": None}
    result = plan.evaluate(store)
    table = grid(result, "table")
    cell = dict(zip(table.sites, table.cells))["Oak District"][table.lenses.index("data profile")]
    assert cell.state == NOT_TESTABLE and cell.text == f"not testable: {reason}"
    cedar = [f for f in result.findings if f.site == "Cedar Community" and f.untestable]
    assert {f.kind for f in cedar} >= {"label_relation", "labels_permuted", "labels_weak", "missing_by_class",
                                       "class_balance"}
    assert all(np.isnan(f.p) and not f.significant for f in cedar)
    assert {f.untestable for f in cedar if f.kind in ("label_relation", "labels_permuted", "class_balance")} == {reason}
    # 380 values make one block of at least 350: its median is shared, its shape is not
    assert {f.untestable for f in cedar if f.kind == "shape"} == {
        "not shared at the resolution this check reads (5%, 25%, 50%, 75%, 95%): its median only, too few values "
        "for blocks further out"}
    assert any(f.site == "Cedar Community" and f.kind == "location" and np.isfinite(f.p) for f in result.findings)
    # Elm Regional's °F is still found, as a shift: its one block gives too few quantiles to name a unit
    assert any(f.site == "Elm Regional" and f.feature == "temperature" for f in result.reported)
    every = findings_frame(result.findings)
    assert (every["not testable"] == reason).sum() == sum(f.untestable == reason for f in result.findings) > 0
    shared = sharing_frame(plan.profile).set_index("site")
    assert shared.loc["Oak District", "why"] == reason
    # no site has 350 patients with sepsis: every site keeps its per-class statistics, the larger class by complement
    assert shared.loc["Alder General", "why"] == reason
    assert "mean by class" in shared.loc["Alder General", "what"].split("; ")  # all of it: no class listed
    assert shared.loc["Alder General", "fewest rows per statistic"] == "350"
    assert shared.loc["Alder General", "noise (ε per release)"] == "none"
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = open_checkup(AppTest.from_file(APP, default_timeout=60), plan.id)
    assert not at.exception, at.exception
    assert grid_cells(at)[("Oak District", "data profile")] == f"not testable: {reason}"
    assert "What each site shared (disclosure control)" in [e.label for e in at.expander]
    assert "Disclosure control: the sites released statistics of at least 350 rows" in texts(at)
    report = checkup_report(plan, store)
    assert "What each site shared" in report and reason in report


# -- plain words -----------------------------------------------------------------------------------
def test_nothing_found_says_how_far_a_column_would_have_to_shift(app, downloads):
    """What a 'nothing found' covers, on the page, in its CSV and in the report: per site and
    column the distance its median would have to sit from the others' to be reported
    (`data_checks.location_reach`). Known answer against the check-up's own decisions: a column
    found shifted now sits at least that far, every other one nearer (to the 0.05-SD grid); the
    units column is the distance × one within-site SD; one summary row per site with the median."""
    at, store, ids = app
    open_checkup(at, ids["data only"])
    plan = next(p for p in plans(store) if p.id == ids["data only"])
    result, profile = plan.evaluate(store), plan.profile
    found = location_reach(profile, result.findings)
    assert len(found) == 8 * len(profile.continuous)
    assert "What “nothing found” covers: how far a column would have to shift to be reported" in \
        [e.label for e in at.expander]
    assert "which is not the same as nothing differing there" in texts(at)  # said under the grid
    every = pd.read_csv(io.BytesIO(downloads[f"checkup-{plan.id}-reach.csv"]))
    assert len(every) == len(found) and set(every["site"]) == set(result.sites)
    by_cell = {(r.site, r.feature): r for r in found}
    for _, row in every.iterrows():
        reach = by_cell[(row["site"], row["column"])]
        assert row[REACHED] == pytest.approx(round(reach.distance, 2)) and reach.distance >= 0.25
        assert (row["shifted now"] == "yes") == (abs(reach.now) >= reach.distance - 0.05) == reach.found
        assert row["that is, in the column's units"].startswith(f"± {reach.distance * reach.sd:.3g}")
    shifted = [f for f in result.findings if f.kind == "location" and f.significant]
    assert shifted and {(f.site, f.feature) for f in shifted} == {k for k, r in by_cell.items() if r.found}
    summary = next(d.value for d in at.dataframe if "nearest" in d.value.columns)
    assert list(summary["site"]) == list(dict.fromkeys(r.site for r in found))
    for _, row in summary.iterrows():
        assert float(row[TYPICAL]) == pytest.approx(statistics.median(r.distance for r in found if r.site == row["site"]),
                                                    abs=0.006)
    report = checkup_report(plan, store)
    assert "What “nothing found” covers" in report and html.escape(summary.iloc[0]["nearest"]) in report


def test_a_clinician_reads_the_words_first_and_runs_by_their_names(app):
    """The check-up page and its report, every lens filled in: no technical name before its plain
    words (the glossary's), no run id where a run is meant (the findings' sources and links), the
    tables' headers in words."""
    at, store, ids = app
    open_checkup(at, ids["full"])
    if any(toggle.key == "checkup_all" for toggle in at.toggle):  # every finding, not the first few
        at.toggle(key="checkup_all").set_value(True).run()
    plan = next(p for p in plans(store) if p.id == ids["full"])
    run_ids = [run_id for role_ids in plan.contents.runs.values() for run_id in role_ids]
    shown = texts(at) + " ".join(label for label, _, _ in links(at))
    assert technical_first(shown) == [], technical_first(shown)
    assert not [run_id for run_id in run_ids if run_id in shown]
    headers = list(at.dataframe[-1].value.columns)
    assert COLUMNS["q"] in headers and not [h for h in headers if technical_first(h)]
    report = checkup_report(plan, store)
    text = html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"(?s)<script.*?</script>", " ", report)))
    assert technical_first(text) == [], technical_first(text)
    assert not [run_id for run_id in run_ids if run_id in text]


def test_a_checkup_queues_its_slowest_runs_first_and_each_lens_keeps_its_own(tmp_path, monkeypatch):
    """Six jobs on two slots start in the order they are queued: AdaFed (0.053 s a round in the
    benchmark, the slowest) goes first, not fifth, so it does not run alone at the end; every lens
    still reads the runs of its own algorithm. A store's own finished runs set the order instead."""
    from application import checkup_jobs

    store = RunStore(tmp_path / "runs")
    submitted = []

    def submit(store_, spec):
        run = store_.create(spec)
        submitted.append((spec["algorithm"], run.id))
        return run

    monkeypatch.setattr(checkup_jobs.jobs, "submit", submit)
    plan = start_checkup(store, "demo", rounds=2)
    assert [algorithm for algorithm, _ in submitted] == ["adafed", "fedavg", "fedhealth2", "ifedavg", "ifedavg",
                                                        "ifedavg"]  # the benchmark's paces, ties as listed
    ids = dict(plan.contents.runs)
    assert [store.get(i).spec.algorithm for i in ids["contribution"]] == ["adafed"]
    assert [store.get(i).spec.seed for i in ids["feature_shifts"]] == [0, 1, 2]
    assert [store.get(i).spec.algorithm for i in ids["similarity"]] == ["fedhealth2"]

    monkeypatch.setattr(checkup_jobs, "round_paces", lambda store_, data: {"ifedavg": (0.2, "")})
    submitted.clear()
    start_checkup(store, "demo", rounds=2)
    assert [algorithm for algorithm, _ in submitted][:3] == ["ifedavg"] * 3
