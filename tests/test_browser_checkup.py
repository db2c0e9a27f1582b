"""The Check-up page in a real browser (Debian Chromium + Playwright): the demo's check-up (its data
lens) as a person sees it at 1280 and 1920 px, each grid cell a text the browser draws, the data
behind the strongest findings drawn too. Screenshots go to test-artifacts/ for a person to look at."""

import re

import pytest

from dashboard.presenters.checkup_view import evidence_figure
from dashboard.presenters.evidence_views import Evidence
from dashboard.presenters.figures import site_colors
from application.checkup_jobs import start_checkup
from fedcore.store import RunStore
from tests.browser_helpers import ARTIFACTS, figure, need_chromium, open_page, serving

pytestmark = pytest.mark.browser  # `make test-browser` (CI runs it), apart from `make test` for its 10 minutes

# The demo's injected problems, as the grid names them (KINDS' titles).
INJECTED = {"Cedar Community": "values shifted", "Elm Regional": "unit or scale",
            "Fir Valley": "missingness depends on the class", "Oak District": "labels look wrong"}


@pytest.fixture(scope="module")
def checkups(tmp_path_factory):
    """The demo's check-up (its data lens) twice, at the default disclosure policy and at a minimum
    of 350 rows, in one store; the dashboard serving it."""
    need_chromium()
    store = RunStore(tmp_path_factory.mktemp("checkups") / "runs")
    plain = start_checkup(store, "demo", train=False)
    withheld = start_checkup(store, "demo", train=False, disclosure={"min_count": 350})
    with serving(store.root) as url:
        yield url, store, plain, withheld


def test_the_demos_checkup_in_a_browser(checkups, browser):
    url, store, plan, _ = checkups
    result = plan.evaluate(store)
    evidence = Evidence(plan.profile, result.findings, site_colors(result.sites))
    shown_evidence = sum(evidence_figure(f, evidence) is not None for f in result.reported[:3])
    assert shown_evidence == 3  # Fir Valley's confusion by class, Oak's labels' pattern, Elm Regional's temperature
    ARTIFACTS.mkdir(exist_ok=True)
    for width in (1280, 1920):
        context = browser.new_context()  # (its requests are watched from the first)
        outside = []
        context.on("request", lambda request: outside.append(request.url)
                   if not request.url.startswith(url) and not request.url.startswith("data:") else None)
        # the page scrolls inside: tall
        page = open_page(context, f"{url}/checkup?checkup={plan.id}", width, "Findings, strongest first", 3000)
        grid = figure(page, "checkup_grid")
        grid.locator("g.annotation").first.wait_for(timeout=30_000)
        # each cell's words, as drawn (a wrapped title spans several lines of one annotation), at
        # the row of the site tick and the column of the lens tick nearest to it on the screen
        drawn = grid.locator("g.annotation text.annotation-text").evaluate_all(
            "notes => notes.map(n => { const box = n.getBoundingClientRect(); const lines = "
            "Array.from(n.querySelectorAll('tspan.line')).map(t => t.textContent); return [lines.length ? "
            "lines.join(' ') : n.textContent, box.x + box.width / 2, box.y + box.height / 2]; })")
        ticks = {axis: grid.locator(f"g.{axis}tick text").evaluate_all(
            "ticks => ticks.map(t => { const box = t.getBoundingClientRect(); "
            "return [t.textContent, box.x + box.width / 2, box.y + box.height / 2]; })") for axis in ("x", "y")}
        assert sorted(ticks["y"], key=lambda t: t[2])[0][0] == "Alder General"  # sites top to bottom, in order

        def nearest(axis: str, position: float) -> str:
            return min(ticks[axis], key=lambda t: abs(t[1 if axis == "x" else 2] - position))[0]

        cells = {(nearest("y", y), nearest("x", x)): " ".join(text.split()) for text, x, y in drawn}
        assert len(cells) == 8 * 5
        for site, title in INJECTED.items():
            assert cells[(site, "data profile")].startswith(title), (site, cells[(site, "data profile")])
        assert [cells[(site, "data profile")] for site, _, _ in ticks["y"] if site not in INJECTED] \
            == ["nothing found"] * 4
        assert {text for (_, lens), text in cells.items() if lens != "data profile"} == {"not checked"}
        # the grid and the data behind the first three findings (those a figure can show: not a site's labels)
        page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {1 + shown_evidence}",
                               timeout=30_000)
        assert page.locator(".js-plotly-plot").count() == 1 + shown_evidence
        page.get_by_text(re.compile("Elm Regional's temperature looks like °F")).first.wait_for()
        page.wait_for_timeout(1500)  # let the last figures settle
        page.screenshot(path=str(ARTIFACTS / f"checkup-{width}.png"), full_page=True)
        assert not outside, outside
        context.close()


def test_a_checkup_whose_sites_withheld_statistics_in_a_browser(checkups, browser):
    """The demo checked at a minimum of 350 rows: Oak District (340 rows) shares its size only, and its
    data-lens cell reads 'not testable: not shared (fewer than 350 rows)' as drawn; the page's
    'What each site shared' lists each site's policy and what it withheld."""
    url, store, _, plan = checkups
    ARTIFACTS.mkdir(exist_ok=True)
    for width in (1280, 1920):
        page = open_page(browser, f"{url}/checkup?checkup={plan.id}", width, "Findings, strongest first", 2400)
        grid = figure(page, "checkup_grid")
        grid.locator("g.annotation").first.wait_for(timeout=30_000)
        drawn = [" ".join(text.split()) for text in grid.locator("g.annotation text.annotation-text").evaluate_all(
            "notes => notes.map(n => Array.from(n.querySelectorAll('tspan.line')).map(t => t.textContent)"
            ".join(' ') || n.textContent)")]
        assert "not testable: not shared (fewer than 350 rows)" in drawn
        page.get_by_text("What each site shared (disclosure control)").click()
        shared = page.locator("[data-testid='stExpander']", has_text="What each site shared")
        shared.locator("[data-testid='stDataFrame']").wait_for(timeout=30_000)  # drawn on a canvas
        page.wait_for_timeout(1500)
        page.screenshot(path=str(ARTIFACTS / f"checkup-policy-{width}.png"), full_page=True)
        page.close()
