"""End to end in a real browser (Debian Chromium + Playwright): the dashboard served as `make run`
serves it, the one-click demo, training in a background job, the heatmap with its marks, and a
reload that finds the run still there. Screenshots go to test-artifacts/ for a person to look at."""

import re
import time

import pytest

from fedcore.store import RunStore
from tests.browser_helpers import (ARTIFACTS, ROOT, figure, in_the_servers_template, open_page, readability,
                                   wait_until_run_ended)

pytestmark = pytest.mark.browser  # `make test-browser` (CI runs it), apart from `make test` for its 10 minutes


def _marks(page, at_least: int = 2) -> int:
    """'O' annotations drawn in the heatmap's SVG, counted once `at_least` of them are there (a count
    taken as soon as the heatmap shows could find fewer: fails only if they never come)."""
    annotations = figure(page, "heatmap").locator("g.annotation text.annotation-text")
    marks = annotations.filter(has_text=re.compile(r"^O$"))
    marks.nth(at_least - 1).wait_for(timeout=30_000)
    return marks.count()


@pytest.mark.journey  # `make test-journeys` (CI runs it): the demo trained from the browser
def test_demo_to_heatmap_with_marks_and_reload(dashboard, browser):
    url, store = dashboard
    ARTIFACTS.mkdir(exist_ok=True)
    page = open_page(browser, url, 1400, "Train iFedAvg on the demo data", 1800)
    page.get_by_role("button", name=re.compile("Train iFedAvg on the demo data")).click()
    page.wait_for_url(re.compile(r".*/feature_shifts\?run=.*"), timeout=30_000)
    run = store.runs()[0]
    deadline = time.time() + 240
    while run.status.state != "done":
        assert run.status.state in ("queued", "running"), run.status
        assert time.time() < deadline, "training did not finish in time"
        time.sleep(1)
    # The page refreshes itself while the run trains, then settles on the final round, with nothing
    # left of the training's progress once that run of the page has ended.
    page.get_by_text("No training running.").wait_for(timeout=30_000)
    page.get_by_text("Round 150:").first.wait_for(timeout=30_000)
    page.get_by_text("Did the paper's 2-SD marks find the injected problems?").wait_for()
    wait_until_run_ended(page)
    assert page.get_by_text("Training now").count() == 0
    assert _marks(page) >= 2
    # The detection table (its cells are drawn on a canvas; AppTest checks their contents).
    assert page.locator('[data-testid="stDataFrame"]').count() >= 1
    page.screenshot(path=str(ARTIFACTS / "feature_shifts.png"), full_page=True)

    # Clicking a cell shows the data behind it: Fir Valley (5th of 8 sites) x confusion (12th of 12).
    cells = figure(page, "heatmap").locator(".nsewdrag").first.bounding_box()
    page.mouse.click(cells["x"] + cells["width"] * 11.5 / 12, cells["y"] + cells["height"] * 4.5 / 8)
    page.get_by_text("confusion: Fir Valley against all other sites").wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "feature_shifts_clicked.png"), full_page=True)

    page.reload()
    page.get_by_text("Round 150:").first.wait_for(timeout=60_000)
    assert f"run={run.id}" in page.url  # the chosen run survives the reload
    assert _marks(page) >= 2
    page.goto(url)
    page.get_by_text("Runs (1)").wait_for(timeout=30_000)  # still listed after all the reloads
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    page.screenshot(path=str(ARTIFACTS / "runs.png"), full_page=True)
    page.close()


def test_prototypes_page_draws_local_and_global_boxes(dashboard, browser):
    """A finished inDISCO GM run of a small bias experiment: the overlap chart, each test image with
    its local and global box, the prototypes, and one image's top prototypes, as a person sees them."""
    from application.runner import execute, resolve_spec

    url, store = dashboard
    run = store.create(resolve_spec({
        "algorithm": "indisco-gm",
        "data": {"source": "synthetic_scans", "images": 150, "split": "iid", "sites": 3, "inject": ["stamp:site1"]},
        "params": {"prototypes_per_class": 3, "prototype_dim": 16, "last_layer_epochs": 2, "explain_images": 6},
        "config": {"rounds": 2, "local_epochs": 1},
    }))
    execute(run)
    ARTIFACTS.mkdir(exist_ok=True)
    # the page scrolls inside: a tall view
    page = open_page(browser, f"{url}/prototypes?run={run.id}", 1400, "Boxes on the stamp, site by site", 3200)
    page.locator(".js-plotly-plot .bars").first.wait_for(timeout=30_000)  # the overlap chart is drawn
    images = page.locator('[data-testid="stImage"] img')
    images.first.wait_for(timeout=30_000)
    assert images.count() >= 6  # the site's test images, each with its local and global box
    assert page.get_by_text("site1 (stamped)").count() >= 1
    page.screenshot(path=str(ARTIFACTS / "prototypes.png"), full_page=True)
    page.get_by_role("tab", name="The prototypes").click()
    page.get_by_text("Local prototypes (as each site sent them in GM)").first.wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "prototypes_sources.png"), full_page=True)
    page.get_by_role("tab", name="One image, ten prototypes").click()
    page.get_by_text("Hold-out image", exact=True).wait_for(timeout=30_000)  # (tables are drawn on a canvas)
    page.locator("[data-testid=\"stDataFrame\"]").nth(2).wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "prototypes_one_image.png"), full_page=True)
    page.close()


@pytest.fixture(scope="module")
def readable_report_runs(tmp_path_factory):
    """iFedAvg, FedHealth2 and AdaFed on four CSV sites with long hospital names and a long first
    feature name (a rotated label of the first column reaches left, under the site names)."""
    import pandas as pd

    from application.runner import execute, resolve_spec

    folder = tmp_path_factory.mktemp("long_names")
    names = {"north": "St Mary's University Hospital North", "south": "Royal Infirmary South (Teaching)",
             "east": "Eastern District General Hospital", "west": "West Valley Community Clinic"}
    files = []
    for short, long in names.items():
        table = pd.read_csv(ROOT / "assets" / "sample_sites" / f"synthetic_{short}_clinic.csv", sep=None,
                            engine="python", decimal="," if short == "west" else ".")
        table = table.rename(columns={"age": "age_at_admission_in_completed_years", "systolic_bp": "systolic_blood_pressure"})
        path = folder / f"{long}.csv"
        table.to_csv(path, index=False)
        files.append(str(path))
    store = RunStore(folder / "runs")
    data = {"source": "csv", "files": files, "target": "diabetes", "exclude": ["glucose"]}
    runs = []
    for spec in ({"algorithm": "ifedavg", "config": {"rounds": 3}},
                 {"algorithm": "fedhealth2", "params": {"pretrain_epochs": 2}, "config": {"rounds": 2}},
                 {"algorithm": "adafed", "config": {"rounds": 3}}):
        run = store.create(resolve_spec({**spec, "data": data}))
        execute(run)
        runs.append(run)
    return runs


def test_the_html_report_is_readable_at_1280_and_1920(browser, readable_report_runs):
    """What a clinician shares: every heatmap's site and feature labels inside the figure, no axis
    title over tick labels; screenshots at both widths in test-artifacts/ for a person to look at."""
    from dashboard.presenters.report import html_report

    ARTIFACTS.mkdir(exist_ok=True)
    problems = []
    for run in readable_report_runs:
        path = ARTIFACTS / f"report-{run.spec.algorithm}.html"
        path.write_text(in_the_servers_template(lambda: html_report(run)), encoding="utf-8")
        for width in (1280, 1920):
            page = browser.new_page(viewport={"width": width, "height": 1000})
            page.goto(path.as_uri())
            found = readability(page, f"report-{run.spec.algorithm}-{width}")
            page.close()
            problems += [f"{run.spec.algorithm} at {width} px: {p}" for p in found["problems"]]
            expected = {"ifedavg": 4, "fedhealth2": 2, "adafed": 0}[run.spec.algorithm]
            assert len(found["heatmaps"]) == expected, found["heatmaps"]
            assert all(h["ticks"] >= 8 for h in found["heatmaps"]), found["heatmaps"]  # 4 sites and features
    assert not problems, "\n".join(problems)
