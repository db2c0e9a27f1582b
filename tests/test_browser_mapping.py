"""The mapping step in a real browser (Debian Chromium + Playwright): two sets of four messy hospital
exports (`messy_exports.py`: made-up ones, and the four UCI heart-disease hospitals' real rows)
are finished in the app without editing a file — the target chosen where one site spells it
otherwise, the suggestions accepted, the questions the data cannot decide answered, one decision
made by hand — then trained; the run holds the harmonised federation: every feature at every site,
in one unit. The draft survives a reload. The same data reference (its data dictionary) run from
the command line gives the same federation. Screenshots at 1280 and 1920 px go to test-artifacts/
for a person to look at."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from fedcore.interpret.profile import Profile
from fedcore.store import RunStore
from tests.messy_exports import (CHOLESTEROL_MG_DL, FEATURES, HEART_FEATURES, HEART_SITES, SITES, write_heart_exports,
                                 write_messy_exports)
from tests.browser_helpers import ARTIFACTS, ROOT, open_page, wait_until_run_ended

pytestmark = pytest.mark.journey  # `make test-journeys` (CI runs it): each trains, a minute or two


def upload(browser, url: str, width: int, files: list):
    """The Data page at `width` px with `files` uploaded, once the mapping step shows its first step."""
    page = open_page(browser, f"{url}/data", width, "Upload CSV files (one per site)", 3200)
    page.get_by_text("Upload CSV files (one per site)").click()
    page.get_by_text("One CSV per site (the file name becomes").wait_for(timeout=90_000)
    page.wait_for_timeout(1500)  # a draft kept from before shows its files: let that run finish first
    page.locator("input[type=file][multiple]").first.set_input_files([str(f) for f in files])  # the site files' uploader
    page.get_by_text(f"Name of this data").wait_for(timeout=90_000)
    page.get_by_text(f"Continuing with the files you uploaded").wait_for(state="detached", timeout=90_000)
    page.get_by_text("1 · What to predict").wait_for(timeout=90_000)
    return page


def settle(page) -> None:
    """Wait until the page's run after the last change has ended: the change asks for the run at
    once, a short wait lets it begin, and the page's script state says when it has ended
    (Streamlit's status widget shows only once a run has taken a while: a short one passed unseen)."""
    page.wait_for_timeout(500)
    wait_until_run_ended(page, 120_000)


def accept_all(page) -> None:
    """Accept every suggestion, pass after pass (accepting a rename makes a column comparable: its
    codes and units are suggested next), until the button stays disabled on a settled page."""
    from playwright.sync_api import TimeoutError as Timeout

    quiet = 0
    for _ in range(12):
        settle(page)
        button = page.get_by_role("button", name=re.compile(r"Accept the \d+ undecided suggestion"))
        button.wait_for(timeout=60_000)
        if not button.is_enabled():  # nothing left, or the next pass's suggestions not drawn yet: look twice
            quiet += 1
            if quiet == 2:
                return
            page.wait_for_timeout(2000)
            continue
        quiet = 0
        try:
            button.click(timeout=10_000)
        except Timeout:  # a run in between disabled it: look again
            continue
    raise AssertionError("suggestions kept coming")


def answer(page, question: str, choice: str) -> None:
    """Pick `choice` in the question whose text contains `question`."""
    box = page.locator("[data-testid='stLayoutWrapper']").filter(has_text=question).filter(has_text="Your answer").first
    box.locator("label").filter(has_text=choice).first.click()
    settle(page)


def select(page, label: str, option) -> None:
    from playwright.sync_api import TimeoutError as Timeout

    named = page.locator("[data-testid='stWidgetLabel']").filter(has_text=re.compile(f"^{re.escape(label)}$"))
    box = page.locator("[data-testid='stSelectbox']").filter(has=named).first
    for attempt in range(4):  # a run that ends after the click redraws the box and closes its list: open it again
        box.locator("div[role=combobox], input").first.click()
        try:
            page.get_by_role("option", name=option).first.click(timeout=15_000)
            break
        except Timeout:
            if attempt == 3:
                raise
            settle(page)
    settle(page)


def train(page, url: str, store, name: str) -> None:
    page.get_by_role("button", name="Use this data for training").click()
    page.get_by_text(f"Training will use: {name}").wait_for(timeout=60_000)
    page.goto(f"{url}/train")
    rounds = page.get_by_label("rounds", exact=True)
    rounds.fill("2")
    rounds.press("Enter")
    page.wait_for_timeout(1500)
    before = len(store.runs())
    page.get_by_role("button", name=re.compile(r"Start 1 run")).click()
    deadline = time.time() + 240
    while len(store.runs()) == before or store.runs()[0].status.state != "done":
        assert len(store.runs()) == before or store.runs()[0].status.state in ("queued", "running"), \
            store.runs()[0].status
        assert time.time() < deadline, "training did not finish in time"
        time.sleep(1)


def medians(run, feature: str) -> np.ndarray:
    profile = Profile.from_npz(run.load_profile_arrays())
    return profile.quantiles[:, 10, profile.features.index(feature)]


# Two tests, one per set of exports (each about a minute), so that two test workers can take one each.
def test_made_up_messy_exports_are_finished_in_the_browser_and_trained(dashboard, browser, tmp_path):
    url, store = dashboard
    made_up = write_messy_exports(tmp_path / "made-up")
    ARTIFACTS.mkdir(exist_ok=True)
    # Set 1 at 1280 px: suggestions, one question.
    page = upload(browser, url, 1280, made_up)
    page.get_by_label("Name of this data (shown wherever it is listed)").fill("Made-up study")
    page.keyboard.press("Enter")
    page.get_by_text("south has no column 'outcome'").wait_for(timeout=60_000)  # step 1 found 'Outcome'
    page.get_by_text("Accept the", exact=False).first.wait_for(timeout=60_000)  # step 2 drawn
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "mapping_suggested_1280.png"), full_page=True)
    accept_all(page)
    page.get_by_text("'systolic_pressure' at west has the values").wait_for(timeout=60_000)
    train(page, url, store, "Made-up study")
    page.close()
    made_up_run = store.runs()[0]
    # every feature at every site, in one unit
    federation = made_up_run.federation
    assert federation.name == "Made-up study" and federation.feature_names == FEATURES
    assert federation.site_names == list(SITES)
    recorded = federation.preprocessing.stored["dictionary"]["content"]
    assert abs(recorded["sites"]["east"]["convert"]["chol"]["a"] - 1 / CHOLESTEROL_MG_DL) < 1e-9
    assert np.all(np.abs(medians(made_up_run, "chol") - 5.4) < 0.35)  # east's cholesterol in mmol/L too
    assert np.all(np.abs(medians(made_up_run, "sbp") - 132) < 10)  # west's systolic_pressure is sbp


def test_the_heart_hospitals_exports_are_finished_in_the_browser_trained_and_run_again_from_the_command_line(
        dashboard, browser, tmp_path):
    url, store = dashboard
    heart = write_heart_exports(tmp_path / "heart")
    ARTIFACTS.mkdir(exist_ok=True)
    # Set 2 at 1920 px: the target spelled 'Disease' at one site, questions, a value map by hand.
    page = upload(browser, url, 1920, heart)
    page.get_by_label("Name of this data (shown wherever it is listed)").fill("Heart study")
    page.keyboard.press("Enter")
    page.get_by_text("switzerland has no column 'disease': which of its columns is it?").wait_for(timeout=60_000)
    page.get_by_text("switzerland: its values 0, 1, 2, 3, 4").wait_for(timeout=60_000)  # positive 1-4 pre-filled
    accept_all(page)
    answer(page, "va's oldpeak", "÷ 10 (a factor of 10")
    for column, kind in (("restecg", "categorical: one input per value"), ("slope", "categorical: one input per value"),
                         ("'ca': whole numbers", "continuous: one number")):
        answer(page, column, kind)
    # hungarian writes sex M/F where the others write 1/0: a value map, by hand
    select(page, "Column", re.compile(r"^sex — at every site"))
    select(page, "At", "hungarian")
    page.get_by_text("value map", exact=True).click()
    settle(page)
    select(page, "'F' means", "0")
    select(page, "'M' means", "1")
    page.get_by_text("At hungarian, 'sex': ").first.wait_for(timeout=30_000)  # what it changes, before it applies
    page.get_by_role("button", name="Apply this decision").click()
    page.get_by_text("value map · sex · hungarian").wait_for(timeout=60_000)
    settle(page)
    # a fresh form for the next decision: what it shows is what it reads (the first column, a rename)
    form = page.locator("[data-testid='stSelectbox']").filter(
        has=page.locator("[data-testid='stWidgetLabel']").filter(has_text=re.compile("^Column$"))).first
    assert form.locator("input").input_value().startswith("age — at every site")
    page.get_by_text("Becomes the study's column (columns the site(s) do not have)").wait_for(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "mapping_decided_1920.png"), full_page=True)
    page.reload()  # the draft is kept: files, choices and decisions come back
    page.get_by_text("Continuing with the files you uploaded").wait_for(timeout=90_000)
    page.get_by_text("value map · sex · hungarian").wait_for(timeout=60_000)
    page.get_by_text("No type conflicts or category differences.").wait_for(
        timeout=60_000)
    settle(page)
    page.locator("[data-testid='stDataFrame']").first.wait_for(timeout=60_000)  # the report's tables drawn
    page.get_by_text("Sites and class balance").first.scroll_into_view_if_needed()
    page.wait_for_timeout(1500)
    page.screenshot(path=str(ARTIFACTS / "mapping_report_1920.png"))
    train(page, url, store, "Heart study")
    page.close()

    page = open_page(browser, f"{url}/data", 1280, "Upload CSV files (one per site)", 3200)  # the same draft
    page.get_by_text("Upload CSV files (one per site)").click()
    page.get_by_text("value map · sex · hungarian").wait_for(timeout=90_000)
    page.screenshot(path=str(ARTIFACTS / "mapping_decided_1280.png"), full_page=True)
    page.close()

    heart_run = store.runs()[0]
    # every feature at every site, in one unit
    federation = heart_run.federation
    assert federation.feature_names == HEART_FEATURES and federation.site_names == list(HEART_SITES)
    profile = Profile.from_npz(heart_run.load_profile_arrays())
    observed = dict(zip(profile.features, profile.observed.T))
    for feature in HEART_FEATURES:  # every site has every feature, but Switzerland's never-measured cholesterol
        assert (observed[feature][[0, 1, 3]] > 0).all(), feature
    assert observed["chol"][2] == 0 and observed["thalach"][2] > 100
    chol = medians(heart_run, "chol")[[0, 1, 3]]
    assert np.all((chol > 180) & (chol < 300)), chol  # mg/dL at cleveland, hungarian and va
    assert np.all(medians(heart_run, "oldpeak") < 2.5) and np.all(medians(heart_run, "thalach") > 100)
    assert federation.class_names == ["0", "1"]

    # The same data reference from the command line: the same federation.
    spec = tmp_path / "again.json"
    spec.write_text(json.dumps({"algorithm": "fedavg", "data": heart_run.spec.data, "config": {"rounds": 1}}))
    cli_store = RunStore(tmp_path / "cli-runs")
    done = subprocess.run([sys.executable, "-m", "fedcore", "run", "--spec", str(spec), "--store", str(cli_store.root)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (again,) = cli_store.runs()
    for key in ("name", "feature_names", "feature_kinds", "class_names", "sites", "preprocessing"):
        assert getattr(again.federation, key) == getattr(federation, key), key
