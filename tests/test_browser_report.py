"""What a clinician shares, in a real browser (Debian Chromium + Playwright), without a server: the
check-up's self-contained HTML report, made the way the dashboard's server makes it (Streamlit's
plotly template is the default there), at 1280 and 1920 px and printed to PDF; and the evidence view
of every finding kind on one page. Every text inside its figure and covering no other, colours
kept (tests/browser_helpers.py's READABILITY). Screenshots and the PDF (its pages as PNG where
poppler's pdftoppm is installed) go to test-artifacts/ for a person to look at."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dashboard.presenters.checkup_view import evidence_figure
from dashboard.presenters.report import PRINT_WIDTH_PX, checkup_report, document
from dashboard.presenters.report_sections import figures_html
from application.checkup_jobs import start_checkup
from fedcore.store import RunStore
from tests import evidence_cases, test_checkup as planted
from tests.browser_helpers import ARTIFACTS, READABILITY, in_the_servers_template, readability

pytestmark = pytest.mark.browser  # `make test-browser` (CI runs it), apart from `make test` for its 10 minutes

WIDTHS = (1280, 1920)
# Long names, an ampersand, an accent: the grid's rows and the charts' axes must hold them.
SITES = ["St Mary's University Hospital North (Teaching)", "Royal Infirmary of the Southern Districts",
         "Eastern District General Hospital", "West Valley Community Clinic & Outpatients",
         "Hôpital Universitaire de Genève – Site Cluse-Roseraie", "Northern Regional Medical Centre"]
PROBLEMS = {1: "°F", 2: "999 for missing", 3: "flipped labels", 4: "missing for the well", 5: "own ward codes"}


def hospital_csv(path: Path) -> Path:
    """Six sites in one CSV (a site column), one problem at each of five of them (PROBLEMS)."""
    rng = np.random.default_rng(4)
    frames = []
    for k, site in enumerate(SITES):
        x, y = planted.site_rows(rng, 300)
        frame = pd.DataFrame(x[:, :6], columns=[*planted.CONTINUOUS, "smoker"])
        frame["ward"] = np.array(["icu", "medicine", "surgery"])[x[:, 6:].argmax(1)]
        if k == 1:
            frame["temperature"] = frame["temperature"] * 9 / 5 + 32
        if k == 2:
            frame.loc[rng.random(len(frame)) < 0.2, "glucose"] = 999
        if k == 3:
            y = 1 - y
        if k == 4:
            frame.loc[y == 0, "marker"] = np.nan
        if k == 5:
            frame["ward"] = frame["ward"].map({"icu": "W1", "medicine": "W2", "surgery": "W3"})
        frames.append(frame.assign(site=site, outcome=np.where(y == 1, "ill", "well")))
    pd.concat(frames).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def checkup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    store = RunStore(folder / "runs")
    data = {"source": "csv", "files": [str(hospital_csv(folder / "hospitals.csv"))], "site_column": "site",
            "target": "outcome", "name": "Six hospitals"}
    plan = start_checkup(store, data, train=False)
    return plan, store


def printed(page, name: str) -> dict:
    """The page as Chromium prints it: print media, each figure drawn again at the printed width
    (the report's own `beforeprint` handler), checked like the screen; and the PDF itself."""
    page.emulate_media(media="print")
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
    page.wait_for_timeout(500)
    found = page.evaluate(READABILITY)
    widths = page.evaluate("[...document.querySelectorAll('.js-plotly-plot')].map(p => p._fullLayout.width)")
    assert set(widths) == {PRINT_WIDTH_PX}, widths
    page.evaluate("window.dispatchEvent(new Event('afterprint'))")
    pdf = ARTIFACTS / f"{name}.pdf"  # (with print media: a screen media emulation would print the screen's styles)
    page.pdf(path=str(pdf), print_background=True, prefer_css_page_size=True)  # as the report asks: A4 landscape
    page.emulate_media(media=None)
    if shutil.which("pdftoppm"):  # the printed pages, for a person to look at
        subprocess.run(["pdftoppm", "-r", "70", "-png", "-l", "4", str(pdf), str(ARTIFACTS / f"{name}-page")],
                       check=True, timeout=120)
    return found


def test_the_checkup_report_reads_like_the_page_on_screen_and_printed(checkup, browser):
    plan, store = checkup
    result = plan.evaluate(store)
    found_at = {f.site for f in result.reported}
    assert found_at >= {SITES[k] for k in PROBLEMS}, [(f.site, f.kind) for f in result.reported]
    report = in_the_servers_template(lambda: checkup_report(plan, store))
    assert "#000001" not in report  # Streamlit's placeholder colours stay out of the file
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "checkup-report.html"
    path.write_text(report, encoding="utf-8")
    problems = []
    for width in WIDTHS:
        page = browser.new_page(viewport={"width": width, "height": 1000})
        page.goto(path.as_uri())
        found = readability(page, f"checkup-report-{width}")
        problems += [f"{width} px: {p}" for p in found["problems"]]
        # the grid (a heatmap with every site's name on its rows) and every finding's evidence
        assert len(found["heatmaps"]) == 1 and found["heatmaps"][0]["ticks"] >= len(SITES) + 5
        assert len(found["colours"]) == 1 + min(len(result.reported), 12)
        rows = page.locator(".js-plotly-plot").first.locator("g.ytick text").evaluate_all(
            "ticks => ticks.map(t => [t.getBoundingClientRect().top, t.textContent]).sort((a, b) => a[0] - b[0])"
            ".map(t => t[1])")
        assert rows == result.sites and set(rows) == set(SITES)  # whole, top to bottom
        if width == WIDTHS[0]:
            problems += [f"printed: {p}" for p in printed(page, "checkup-report-printed")["problems"]]
        page.close()
    assert not problems, "\n".join(problems)


def test_every_evidence_view_reads_in_a_browser(browser):
    cases = {**evidence_cases.data_cases(), **evidence_cases.model_cases()}
    sections = []
    for key, case in cases.items():
        figure = evidence_figure(case.finding, case.evidence)
        sections.append(f"<h2>{key}</h2>" + figures_html([figure]))
    path = ARTIFACTS / "evidence-views.html"
    ARTIFACTS.mkdir(exist_ok=True)
    path.write_text(in_the_servers_template(lambda: document("Every evidence view", sections)), encoding="utf-8")
    problems = []
    for width in WIDTHS:
        page = browser.new_page(viewport={"width": width, "height": 1000})
        page.goto(path.as_uri())
        found = readability(page, f"evidence-views-{width}")
        assert len(found["colours"]) == len(cases)
        problems += [f"{width} px: {p}" for p in found["problems"]]
        if width == WIDTHS[0]:
            problems += [f"printed: {p}" for p in printed(page, "evidence-views-printed")["problems"]]
        page.close()
    assert not problems, "\n".join(problems)
