"""Every page renders every run in every state, for every algorithm family (tests/store_states.py
builds the store), the check-up page every check-up fed by runs in each state; the HTML reports
too. And the pages that do not train start without torch."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.presenters.registry import CHECKUP, LENSES, RUN_DETAILS
from fedcore.checkup import Plan
from fedcore.store import RunStore
from tests import store_states
from tests.store_states import STATES
from tests.helpers import open_page, unescaped

# `make test-states` (CI runs it): about 150 CPU-seconds, apart from `make test` for its 10 minutes
pytestmark = pytest.mark.states

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
WAITING = {"queued": "queued", "starting": "starting", "no round yet": "running", "failed": "failed",
           "cancelled": "cancelled", "interrupted": "interrupted"}


@pytest.fixture(scope="module")
def every_state(tmp_path_factory):
    root = tmp_path_factory.mktemp("states") / "runs"
    return RunStore(root), store_states.build(root)


@pytest.fixture(scope="module")
def checkups(every_state):
    store, ids = every_state
    return store_states.build_checkups(store, ids)


@pytest.fixture
def app(every_state, monkeypatch, tmp_path):
    store, ids = every_state
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    monkeypatch.setenv("FEDCORE_MAX_JOBS", "1")  # the 'running' runs fill it: nothing queued starts
    monkeypatch.setenv("FEDCORE_DATA_DIRS", str(tmp_path))
    return AppTest.from_file(APP, default_timeout=120), store, ids


def texts(at):
    """What a person reads on the page (user-supplied text is escaped Markdown: dashboard.presenters.safe_text)."""
    return " ".join(unescaped(str(m.value)) for m in [*at.markdown, *at.caption, *at.info, *at.warning, *at.success,
                                           *at.error, *at.text])


def progress_texts(at):
    return " ".join(unescaped(p.proto.text) for p in at.get("progress"))


def render(at, page, run_id=None, **query):
    """The page for the run (or what `query` names), in a new session (as a link or a reload opens it)."""
    return open_page(AppTest.from_file(APP, default_timeout=120), page, run_id, **query)


def test_every_lens_page_renders_its_runs_in_every_state(app):
    at, store, ids = app
    for (family, state), run_id in ids.items():
        lens = LENSES.get(family)
        page = lens.page if lens is not None else RUN_DETAILS
        at = render(at, page.path, run_id)
        assert at.query_params["run"] == run_id, (family, state)  # the page shows this run
        shown = progress_texts(at)
        assert WAITING[state] in shown, (family, state, shown)
        shown = texts(at).lower()
        if state in ("queued", "starting", "no round yet") and page != RUN_DETAILS:
            assert "waiting for the first evaluated round" in shown or "not computed yet" in shown, \
                (family, state, texts(at))
        if state in ("cancelled", "failed") and page != RUN_DETAILS:  # stopped: it says so, and never 'waiting'
            assert f"{state} before its first evaluated round" in shown and "waiting for" not in shown, \
                (family, state, texts(at))
        if state == "failed":
            assert any("site 'north' has no rows left" in unescaped(e.value) for e in at.error), (family, texts(at))


def test_run_details_renders_every_run_in_every_state(app):
    at, store, ids = app
    for (family, state), run_id in ids.items():
        at = render(at, RUN_DETAILS.path, run_id)
        assert at.title[0].value == "Run details"
        assert WAITING[state] in progress_texts(at), (family, state)
        if state == "interrupted":  # one evaluated round: each site's score is drawn as a point
            curves = json.loads(at.get("plotly_chart")[0].proto.spec)
            assert all(trace["mode"] in ("markers", "lines+markers") for trace in curves["data"])


def test_the_runs_page_lists_and_acts_on_runs_in_every_state(app):
    at, store, ids = app
    at.run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert len(table) == len(ids) + len(store_states.SIBLINGS)
    by_id = dict(zip(table["run id"], table["round"]))
    for (family, state), run_id in ids.items():
        expected = {"queued": "queued", "starting": "starting", "no round yet": "starting",
                    "cancelled": "0/1", "failed": "0/1", "interrupted": "1/1"}[state]
        assert by_id[run_id] == expected, (family, state, by_id[run_id])
    rows = list(table["run id"])
    for (family, state), run_id in ids.items():
        at.session_state["runs_table"] = {"selection": {"rows": [rows.index(run_id)], "columns": []}}
        at.run()
        assert not at.exception, (family, state, at.exception)
        keys = [b.key for b in at.button]
        assert ("cancel-confirm" in keys) == (state in ("queued", "starting", "no round yet")), (family, state, keys)


def test_the_checkup_page_renders_checkups_fed_by_runs_in_every_state(app, checkups):
    at, store, ids = app
    for (kind, state), plan_id in checkups.items():
        at = render(at, CHECKUP.path, checkup=plan_id)
        assert at.query_params["checkup"] == plan_id, (kind, state)  # the page shows this check-up
        shown = texts(at)
        if state in ("queued", "starting", "no round yet"):
            assert "Still training for" in shown, (kind, state, shown)
            assert WAITING[state].split()[0] in progress_texts(at) or state != "queued", (kind, state)
        else:  # failed, cancelled, interrupted: not pending; each lens it fed stays unchecked, and says so
            assert "Still training for" not in shown, (kind, state)
            assert shown.count("its lens stays unchecked") == (4 if kind == "table" else 1), (kind, state, shown)
        if state == "failed":
            assert "site 'north' has no rows left" in shown, (kind, shown)
        grid = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]  # sites x lenses
        assert len(grid["y"]) == len(Plan(store.root / "checkups" / plan_id).contents.sites), (kind, state)
        assert ("prototypes" in grid["x"]) == (kind == "image"), (kind, state, grid["x"])  # its lenses


@pytest.mark.parametrize("page", ["views/compare.py", "views/data.py", "views/train.py"])
def test_the_other_pages_render_beside_runs_in_every_state(app, page):
    at, store, ids = app
    render(at, page)


def test_the_html_report_of_every_run_and_checkup_in_every_state(every_state, checkups):
    from plotly.offline import get_plotlyjs

    from dashboard.presenters.report import checkup_report, html_report

    library = get_plotlyjs()[:2000]
    store, ids = every_state
    for (kind, state), plan_id in checkups.items():
        report = checkup_report(Plan(store.root / "checkups" / plan_id), store)
        assert report.startswith("<!doctype html>") and "Plotly.newPlot" in report, (kind, state)
    for (family, state), run_id in ids.items():
        report = html_report(store.get(run_id))
        assert report.startswith("<!doctype html>"), (family, state)
        own, _, checkup = report.partition("<h2>Check-up:")  # the run's own part, then the check-up it feeds
        assert bool(checkup) == (family in store_states.CHECKUP_ROLES), (family, state)
        if state == "interrupted":  # figures only where something was recorded
            assert "Plotly.newPlot" in own, (family, state)
        else:
            assert "Plotly.newPlot" not in own, (family, state)
        # plotly.js once, in the head, where there is a figure to draw
        head = report.split("<body>")[0]
        assert report.count(library) == head.count(library) == ("Plotly.newPlot" in report), (family, state)


PAGES_WITHOUT_TORCH = ["views/runs.py", "views/run.py", "views/compare.py", "views/site_similarity.py",
                       "views/site_weights.py", "views/checkup.py"]


def test_the_pages_that_do_not_train_start_without_torch(every_state):
    """In a fresh process (the state of a freshly started dashboard), rendering these pages for runs of
    every family, with records and without, loads no torch: torch made the first page after a
    restart slow."""
    store, ids = every_state
    shown = [run_id for (family, state), run_id in ids.items() if state in ("queued", "interrupted")]
    script = f"""
import sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({APP!r}, default_timeout=120)
at.run()  # the app's first page (the runs page); then each page with each run
for page in {PAGES_WITHOUT_TORCH!r}:
    for run_id in {shown!r}:
        at.query_params["run"] = run_id
        at.switch_page(page)
        at.run()
        assert not at.exception, (page, run_id, at.exception)
print("torch" in sys.modules, "data_adapters" in sys.modules)
"""
    env = {**os.environ, "FEDCORE_STORE": str(store.root), "FEDCORE_MAX_JOBS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["False", "False"], done.stdout


def test_the_store_holds_every_family_in_every_state(every_state):
    store, ids = every_state
    assert {store.get(i).spec.record for i in ids.values()} == set(store_states.FAMILIES)
    assert len(ids) == len(store_states.FAMILIES) * len(store_states.STATES)


# -- every page for every role (issue 25): a viewer met StreamlitPageNotFoundError on five pages of an
# empty store, each linking to Data or Train, which a viewer's navigation lacks.
ROLES = ("viewer", "analyst", "admin")
RUN_PAGES = {page.path: family for family, lens in LENSES.items() if lens.page != RUN_DETAILS
             for page in [lens.page]} | {RUN_DETAILS.path: "none"}


def navigation(role: str) -> list[str]:
    """The pages a role's navigation lists (the shell's own sections, filtered by the role)."""
    from dashboard.access.auth import may
    from dashboard.widgets.shell import SECTIONS

    return [page.path for pages in SECTIONS.values() for page in pages if may(role, page.action)]


def as_role(role: str, root: Path, monkeypatch) -> AppTest:
    from tests.test_security_pages import SECRETS, USERS

    monkeypatch.setenv("FEDCORE_STORE", str(root))
    at = AppTest.from_file(APP, default_timeout=120)
    at.secrets, at.user = SECRETS, USERS[role]
    return at


def test_every_page_link_goes_through_the_role_aware_helper():
    """One way to link a page (dashboard.widgets.common.page_link), which draws a link only where the role
    may follow it: no page calls Streamlit's page_link itself."""
    calls = {str(p.relative_to(ROOT)): p.read_text().count(".page_link(") for folder in ("views", "dashboard")
             for p in (ROOT / folder).rglob("*.py")}
    assert {file: n for file, n in calls.items() if n} == {"dashboard/widgets/common.py": 1}  # the helper's own call


def test_the_navigation_differs_by_role():  # what the next two tests go through
    assert len(navigation("viewer")) == 8 and "views/train.py" not in navigation("viewer")
    assert len(navigation("analyst")) == 10 and len(navigation("admin")) == 11


@pytest.mark.parametrize("role", ROLES)
def test_every_page_of_every_role_opens_in_an_empty_store(role, monkeypatch, tmp_path):
    for page in navigation(role):
        at = open_page(as_role(role, tmp_path / "runs", monkeypatch), page)
        assert "needs the" not in texts(at) or role != "admin", (role, page, texts(at))


@pytest.mark.parametrize("role", ["viewer", "analyst"])
def test_every_page_of_every_role_opens_beside_runs_in_every_state(every_state, role, monkeypatch):
    """Each page a role's navigation lists, for a run in each state where the page shows one run (a
    lens page its family's run, Run details a FedAvg run), once where it shows them all. (Local
    mode, everything allowed, is the tests above.)"""
    store, ids = every_state
    for page in navigation(role):
        family = RUN_PAGES.get(page)
        for state in STATES if family else [None]:
            run_id = ids[family, state] if family else None
            at = open_page(as_role(role, store.root, monkeypatch), page, run_id)
            if run_id:
                assert at.query_params["run"] == run_id, (role, page, state)
