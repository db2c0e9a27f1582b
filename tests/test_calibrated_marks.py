"""The Feature shifts heatmap's calibrated marks (issue 17, item 2): a site check-up's findings in
place of the paper's 2-SD marks, every tested cell's q on hover; never a q the check-up did not
compute. Known inputs for the pure function (dashboard.presenters.figures.calibrated_cells), a real check-up
of two replicate iFedAvg runs for the page (AppTest, both ways)."""

import html
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.presenters.figures import calibrated_cells
from dashboard.presenters.lenses import shift_view
from dashboard.presenters.registry import CHECKUP
from fedcore.checkup import add_runs, create_plan
from fedcore.glossary import technical_first
from fedcore.interpret.findings import Finding
from application.runner import execute, resolve_spec
from fedcore.store import RunStore
from tests.helpers import unescaped

APP = str(Path(__file__).resolve().parent.parent / "app.py")
PAGE = "views/feature_shifts.py"


def finding(site, feature, layer, p, q, material=True, kind="feature_shift", lens="feature shifts",
            explained_by=None):
    made = Finding(site, lens, kind, feature, "a message", p, 0.5, "", evidence={"layer": layer}, material=material)
    made.q, made.explained_by = q, explained_by
    return made


def test_calibrated_cells_mark_the_checkups_findings_and_carry_every_q():
    findings = [
        finding("A", "age", "b_in", p=0.002, q=0.01),  # a finding: marked
        finding("B", "age", "b_in", p=0.04, q=0.2),  # q ≥ 0.05: not marked
        finding("A", "temp", "b_in", p=0.004, q=0.049, explained_by="unit"),  # just under: marked
        finding("B", "temp", "b_in", p=0.01, q=0.05),  # at the rate: not marked
        finding("C", "age", "b_in", p=0.0001, q=0.003, material=False),  # too small to matter
        finding("C", "temp", "w_in", p=0.0001, q=0.0004),  # another layer: not on b_in
        finding("C", "temp", None, p=0.0001, q=0.0004, kind="location", lens="data profile"),  # another lens
        finding("D", "age", "b_in", p=0.0001, q=0.0004),  # a site the heatmap does not draw
    ]
    cells = calibrated_cells(findings, "b_in", ["A", "B", "C"], ["age", "temp"])
    assert cells.marked.tolist() == [[True, True], [False, False], [False, False]]
    np.testing.assert_array_equal(cells.q, [[0.01, 0.049], [0.2, 0.05], [0.003, np.nan]])
    np.testing.assert_array_equal(cells.p, [[0.002, 0.004], [0.04, 0.01], [0.0001, np.nan]])
    assert cells.notes[0, 0] == "check-up: q = 0.010, p = 0.002 · marked O: a finding"
    assert cells.notes[0, 1] == ("check-up: q = 0.049, p = 0.004 · marked O: a finding (the check-up names it "
                                 "more exactly: unit or scale)")
    assert cells.notes[1, 0] == "check-up: q = 0.200, p = 0.040 · not marked"
    assert cells.notes[1, 1] == "check-up: q = 0.050, p = 0.010 · not marked"
    assert cells.notes[2, 0] == "check-up: q = 0.003, p < 0.001 · not marked: unlikely chance, but too small to matter"
    assert cells.notes[2, 1] == "not tested by the check-up"
    w_in = calibrated_cells(findings, "w_in", ["A", "B", "C"], ["age", "temp"])
    assert w_in.marked.tolist() == [[False, False], [False, False], [False, True]]


def test_calibrated_cells_put_a_sites_output_finding_on_its_whole_w_out_row_and_nothing_on_b_out():
    findings = [finding("B", None, None, p=0.0002, q=0.001, kind="output_shift", lens="labels"),
                finding("A", None, None, p=0.3, q=0.6, kind="output_shift", lens="labels")]
    sites, classes = ["A", "B"], ["class: no", "class: yes"]
    w_out = calibrated_cells(findings, "w_out", sites, classes)
    assert w_out.marked.tolist() == [[False, False], [True, True]]
    np.testing.assert_array_equal(w_out.q, [[0.6, 0.6], [0.001, 0.001]])
    b_out = calibrated_cells(findings, "b_out", sites, classes)
    assert not b_out.marked.any() and np.isnan(b_out.q).all()


# -- a real check-up over two replicate runs, on the page -----------------------------------------------
@pytest.fixture(scope="module")
def checked_up(tmp_path_factory):
    """Two iFedAvg replicates on the demo data, in a check-up; a third run in none."""
    store = RunStore(tmp_path_factory.mktemp("calibrated") / "runs")
    replicates = []
    for seed in (0, 1):
        run = store.create(resolve_spec({"algorithm": "ifedavg", "config": {"rounds": 150, "seed": seed}}))
        execute(run)
        replicates.append(run)
    alone = store.create(resolve_spec({"algorithm": "ifedavg", "config": {"rounds": 5, "seed": 2}}))
    execute(alone)
    sites = replicates[0].federation.site_names
    plan = create_plan(store, "demo", "the demo", None, sites)
    add_runs(plan, "feature_shifts", [run.id for run in replicates])
    return store, plan, replicates, alone


@pytest.fixture
def app(checked_up, monkeypatch):
    store, plan, replicates, alone = checked_up
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    monkeypatch.setenv("FEDCORE_MAX_JOBS", "1")
    return checked_up


def open_feature_shifts(run_id, calibrated, layer="b_in"):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.query_params["run"] = run_id
    at.switch_page(PAGE)
    at.run()
    at.radio(key="layer").set_value(layer)
    at.radio(key="marks").set_value("calibrated" if calibrated else "paper").run()
    assert not at.exception, at.exception
    return at


def heatmap(at):
    (chart,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("heatmap") or "heatmap" in c.proto.id]
    return json.loads(chart.proto.spec)


def o_marks(spec):
    return {(a["y"], a["x"]) for a in spec["layout"].get("annotations", []) if a.get("text") == "<b>O</b>"}


def hover(spec):
    (cells,) = [t for t in spec["data"] if t.get("type") == "scatter" and t.get("customdata") is not None]
    return [row[0] for row in cells["customdata"]]


def texts(at):
    return " ".join(unescaped(str(m.value)) for m in [*at.markdown, *at.caption, *at.info, *at.warning])


def test_the_page_shows_the_checkups_findings_as_marks_with_every_q_on_hover(app):
    store, plan, replicates, alone = app
    result = plan.evaluate(store)
    expected = {(f.site, f.feature) for f in result.findings
                if f.kind == "feature_shift" and f.evidence["layer"] == "w_in" and f.significant}
    assert expected, "the demo's injected feature problems should give the check-up findings to mark"
    assert any(f.kind == "feature_shift" and f.evidence["layer"] == "w_in" and not f.significant
               for f in result.findings)  # and cells it does not mark
    at = open_feature_shifts(replicates[0].id, calibrated=True, layer="w_in")
    spec = heatmap(at)
    assert o_marks(spec) == expected
    notes = hover(spec)
    assert len(notes) == len(result.sites) * len(replicates[0].federation.feature_names)
    assert all(re.search(r"check-up: q (=|&lt;) ", note) for note in notes)  # every cell: its q
    assert f"the check-up reports {len(expected)} cells" in texts(at)
    assert "q below 0.05 over every cell it tested" in spec["layout"]["title"]["text"]

    paper = heatmap(open_feature_shifts(replicates[0].id, calibrated=False, layer="w_in"))
    marks = shift_view(replicates[0], replicates[0].array_rounds()[-1], "w_in")  # the 2-SD rule's
    assert o_marks(paper) == {(s, f) for s, f, o in zip(marks.table["site"], marks.table["feature"], marks.table["O"]) if o}
    assert o_marks(paper) != o_marks(spec)
    assert all(re.search(r"check-up: q (=|&lt;) ", note) for note in hover(paper))  # the q on hover either way


def test_the_page_explains_and_links_where_no_checkup_calibrates_the_run(app):
    store, plan, replicates, alone = app
    paper = heatmap(open_feature_shifts(alone.id, calibrated=False))
    at = open_feature_shifts(alone.id, calibrated=True)
    assert "This run belongs to no check-up yet, so the marks shown are the paper's" in texts(at)
    assert [link.proto.page for link in at.get("page_link") if "check-up" in link.proto.label.lower()] == \
        [Path(CHECKUP.path).stem]  # the Site check-up page (st.navigation names a page by its file)
    spec = heatmap(at)
    assert o_marks(spec) == o_marks(paper)  # the paper's marks, unchanged
    assert not any(re.search(r"\bq (=|&lt;) ", note) for note in hover(spec))  # no q is made up


def test_the_output_shift_has_no_calibrated_marks_and_says_so(app):
    store, plan, replicates, alone = app
    at = open_feature_shifts(replicates[0].id, calibrated=True, layer="b_out")
    assert "the output shift (b_out) has no calibrated test" in texts(at)
    w_out = open_feature_shifts(replicates[0].id, calibrated=True, layer="w_out")
    assert all(math.isfinite(q) for q in shift_view(replicates[0], replicates[0].array_rounds()[-1], "w_out",
                                                      checkup=plan.evaluate(store).findings).table["check-up q"])
    assert "each site's mean output scale (w_out)" in texts(w_out)


def test_the_feature_shifts_page_says_the_words_first_and_names_its_runs(app):
    """What a clinician reads on Feature shifts (the layers' guide, the calibration's captions, the
    heatmap's title and hover): the plain words before each technical name, runs by name, not id."""
    store, plan, replicates, alone = app
    run_ids = [run.id for run in store.runs()]
    for layer in ("b_in", "w_in", "w_out", "b_out"):
        at = open_feature_shifts(replicates[0].id, calibrated=True, layer=layer)
        spec = heatmap(at)
        shown = " ".join([texts(at), spec["layout"]["title"]["text"], *hover(spec)])
        shown = re.sub(r"<[^>]+>", " ", html.unescape(shown))
        assert technical_first(shown) == [], (layer, technical_first(shown))
        assert not [run_id for run_id in run_ids if run_id in shown], layer
