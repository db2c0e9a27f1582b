"""Pages a clinician and a demo presenter read, in a real browser (Debian Chromium + Playwright) at
1280 and 1920 px, one dashboard server for the module: Compare with a cancelled and a failed run in
the store, a failed run's lens page, the Runs page's name-and-tags editor, and the Check-up page
(a new check-up shown at once, no toolbar over the grid's headers). Screenshots go to
test-artifacts/ for a person to look at."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from dashboard.presenters.record_tables import run_name
from fedcore.checkup import plans
from application.checkup_jobs import start_checkup
from application.runner import execute, resolve_spec
from fedcore.store import RunStore
from tests.browser_helpers import (ARTIFACTS, figure, figure_selector, need_chromium, open_page, serving,
                                   wait_until_run_ended)

pytestmark = pytest.mark.browser  # `make test-browser` (CI runs it), apart from `make test` for its 10 minutes

WIDTHS = (1280, 1920)
FAILURE = "site 'Oak District' has no rows left after the split"


def finished(store: RunStore, spec: dict, name: str = ""):
    run = store.create(resolve_spec({"data": "demo", **spec}))
    execute(run)
    assert run.status.state == "done", run.status
    if name:
        run.set_identity(name, [])
    return run


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A store with three finished runs on the demo, one cancelled after recording more rounds than
    they have (its planned 20 000 rounds cut short), one failed after its first rounds, and a
    check-up of the demo's data lens; a dashboard serving it."""
    need_chromium()
    store = RunStore(tmp_path_factory.mktemp("pages") / "runs")
    runs = {"slow": finished(store, {"algorithm": "fedavg", "config": {"rounds": 6}}),
            "fast": finished(store, {"algorithm": "fedavg", "config": {"rounds": 6, "lr": 0.01}}),
            "ifedavg": finished(store, {"algorithm": "ifedavg", "config": {"rounds": 8}})}
    cancelled = finished(store, {"algorithm": "fedavg", "config": {"rounds": 30, "lr": 0.05}}, "long run, cancelled")
    cancelled.update_status(state="cancelled", total_rounds=20000)
    failed = finished(store, {"algorithm": "ifedavg", "config": {"rounds": 12, "seed": 1}}, "broken run")
    failed.update_status(state="failed", total_rounds=100, error=FAILURE)
    stopped_early = store.create(resolve_spec({"algorithm": "ifedavg", "data": "demo", "config": {"rounds": 5}}))
    stopped_early.mark_started(5)
    stopped_early.mark_finished("failed", FAILURE)
    runs.update(cancelled=cancelled, failed=failed, stopped_early=stopped_early)
    plan = start_checkup(store, "demo", train=False)
    with serving(store.root) as url:
        yield url, store, runs, plan


PLOT_TRACES = "plot => plot.data.map(t => ({name: t.name, colour: (t.line || {}).color || (t.marker || {}).color}))"


def test_compare_takes_finished_runs_keeps_each_runs_colour_and_says_what_differs(server, browser):
    url, store, runs, _ = server
    ARTIFACTS.mkdir(exist_ok=True)
    for width in WIDTHS:
        page = open_page(browser, f"{url}/compare", width, "Learning curves")
        page.locator(".js-plotly-plot").nth(1).wait_for(timeout=60_000)
        curves = page.locator(".js-plotly-plot").nth(1).evaluate(PLOT_TRACES)
        # the newest finished run of each setting, never the cancelled or the failed one
        chosen = {t["name"].split(", ")[0] for t in curves}  # 'fedavg #2, mean', 'fedavg #2, worst'...
        # (the two FedAvg runs differ only in an engine setting: one of them, the newer, stands for both)
        assert run_name(runs["ifedavg"]) in chosen and len(chosen) == 2 and \
            chosen - {run_name(runs["ifedavg"])} <= {run_name(runs["fast"]), run_name(runs["slow"])}, chosen
        x_range = page.locator(".js-plotly-plot").nth(1).evaluate("plot => plot._fullLayout.xaxis.range")
        assert x_range[1] < 9  # the x-axis spans the runs shown (6 and 8 rounds), not the cancelled run's 30
        before = {t["name"]: t["colour"] for t in curves}
        # the table of differences (open: two settings), a setting in words (its cells: the canvas's hidden grid)
        page.get_by_text(re.compile("What differs between these runs")).first.wait_for()
        page.get_by_text("rounds", exact=True).first.wait_for(state="attached", timeout=30_000)
        assert page.get_by_text("config.lr").count() == 0 and page.get_by_text("config.rounds").count() == 0
        page.screenshot(path=str(ARTIFACTS / f"compare-{width}.png"), full_page=True)
        # add the cancelled run: it says it was cancelled, and no run changes colour
        page.locator('[data-testid="stMultiSelect"] input').first.click()
        page.keyboard.type("long run")
        option = page.get_by_role("option", name=re.compile(r"long run, cancelled.*\(cancelled\)"))
        option.wait_for(timeout=30_000)  # listed with its state
        assert page.get_by_role("option", name=re.compile("broken run.*\\(failed\\)")).count() == 0  # typed away
        option.click()
        page.keyboard.press("Escape")
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 2 && "
                               "document.querySelectorAll('.js-plotly-plot')[1].data.length == 6", timeout=60_000)
        page.get_by_text("Green marks the best finished run").wait_for(timeout=30_000)
        after = {t["name"]: t["colour"] for t in page.locator(".js-plotly-plot").nth(1).evaluate(PLOT_TRACES)}
        assert all(after[name] == colour for name, colour in before.items()), (before, after)
        assert {"long run, cancelled, mean", "long run, cancelled, worst"} <= set(after)
        page.screenshot(path=str(ARTIFACTS / f"compare-with-cancelled-{width}.png"), full_page=True)
        page.close()


def test_a_failed_runs_lens_page_says_it_failed_and_why(server, browser):
    url, store, runs, _ = server
    for width in WIDTHS:
        page = open_page(browser, f"{url}/feature_shifts?run={runs['stopped_early'].id}", width,
                         "failed before its first evaluated round")
        assert page.get_by_text("Waiting for the first evaluated round").count() == 0
        assert page.get_by_text(FAILURE).count() >= 1
        page.screenshot(path=str(ARTIFACTS / f"failed-lens-{width}.png"), full_page=True)
        page.close()


def covered(page, locator) -> bool:
    """Whether something else is drawn over the middle of an element (what a click there would hit)."""
    return not locator.evaluate("""element => {
        const box = element.getBoundingClientRect();
        const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
        return hit === element || element.contains(hit);
    }""")


def test_the_tag_list_leaves_save_in_reach(server, browser):
    url, store, runs, _ = server
    for width in WIDTHS:
        # (open_page waits for the end of the page's first run, which re-draws the expander closed)
        page = open_page(browser, f"{url}/run?run={runs['slow'].id}", width, "of each site on its own hold-out")
        page.get_by_text("Name and tags").first.click()
        tags = page.locator('[data-testid="stMultiSelect"] input').first
        chip = page.locator("[data-tag]", has_text="baseline").first
        # the expander re-mounts what it holds as it opens: text typed or an Enter pressed then is
        # dropped (a test types that fast, a person does not), so add the tag until it is there
        for _ in range(10):
            tags.click()
            tags.fill("")  # what a dropped or partly dropped try left
            page.keyboard.type("baseline")
            page.wait_for_timeout(500)
            if tags.input_value() != "baseline":
                continue
            page.keyboard.press("Enter")  # a new tag: the list stays open for the next one
            try:
                chip.wait_for(timeout=5_000)
                break
            except PlaywrightTimeout:
                continue
        chip.wait_for(timeout=30_000)
        wait_until_run_ended(page)  # the new tag's run: a click during it may be lost (the list stays open)
        save = page.locator("button", has_text=re.compile(r"^Save$")).first
        assert not covered(page, save)
        page.screenshot(path=str(ARTIFACTS / f"tags-open-{width}.png"), full_page=False)
        save.click()  # the list still open: the first click reaches the button
        deadline = time.time() + 30
        while store.get(runs["slow"].id).identity.tags != ["baseline"]:
            assert time.time() < deadline, store.get(runs["slow"].id).identity
            time.sleep(0.3)
        runs["slow"].set_identity("", [])
        page.close()


def test_the_checkup_page_shows_a_new_checkup_at_once_and_no_toolbar_covers_the_grid(server, browser):
    url, store, runs, plan = server
    for width in WIDTHS:
        page = open_page(browser, f"{url}/checkup?checkup={plan.id}", width, "Findings, strongest first", 2400)
        grid = figure(page, "checkup_grid")
        grid.locator("g.annotation").first.wait_for(timeout=90_000)  # drawn (on a loaded machine: a while)
        page.wait_for_function("selector => [...(document.querySelector(selector)"
                               "?.querySelectorAll('g.xtick text') ?? [])]"
                               ".some(t => t.getBoundingClientRect().width > 0)",
                               arg=figure_selector("checkup_grid"), timeout=90_000)
        grid.hover()  # the chart's toolbar shows while the pointer is over the chart
        page.wait_for_timeout(500)
        toolbar = grid.locator(".modebar").first.bounding_box()
        for header in grid.locator("g.xtick text").all():
            box = header.bounding_box()
            assert box["x"] + box["width"] <= toolbar["x"] or box["y"] >= toolbar["y"] + toolbar["height"] or \
                box["x"] >= toolbar["x"] + toolbar["width"] or box["y"] + box["height"] <= toolbar["y"], \
                (header.text_content(), box, toolbar)
        page.screenshot(path=str(ARTIFACTS / f"checkup-grid-{width}.png"), full_page=False)
        if width != WIDTHS[0]:  # starting one takes a while on a loaded machine: once is enough
            page.close()
            continue
        # a new check-up is shown as soon as it starts
        known = {p.id for p in plans(store)}
        page.get_by_text("Start a check-up").first.click()
        start = page.get_by_role("button", name="Start the check-up")
        start.wait_for(timeout=30_000)
        wait_until_run_ended(page)
        # On a loaded machine a click could go unanswered (1 run in 5 here beside 4 busy processes,
        # before and after the dashboard's one-timer change; cause not found): clicked once more
        # after 30 s. What this test asks, that the new check-up is shown at once, is unchanged.
        for attempt in range(2):
            start.click()
            deadline = time.time() + 30
            while not {p.id for p in plans(store)} - known and time.time() < deadline:
                time.sleep(0.5)
            if {p.id for p in plans(store)} - known:
                break
        [new] = {p.id for p in plans(store)} - known
        page.wait_for_url(re.compile(f".*checkup={new}.*"), timeout=60_000)
        page.get_by_text("Findings, strongest first").wait_for(timeout=60_000)
        picker = page.locator('[data-testid="stSelectbox"]').filter(has_text="Check-up").locator("input").first
        page.wait_for_function(f"[...document.querySelectorAll('[data-testid=stSelectbox] input')].some(e => "
                               f"e.value.includes('{new}'))", timeout=30_000)
        assert new in picker.input_value() and plan.id not in picker.input_value(), picker.input_value()
        page.screenshot(path=str(ARTIFACTS / f"checkup-new-{width}.png"), full_page=False)
        page.close()
