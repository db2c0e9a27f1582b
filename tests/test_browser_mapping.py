"""The mapping step in a real browser (Debian Chromium + Playwright): four messy hospital exports
(`messy_exports.py`: another delimiter and encoding, a renamed column, a unit change, missing
codes, differing category codes, a trailing empty column) are uploaded, the suggestions accepted,
a model trained; the run holds the harmonised federation — every column kept, east's cholesterol
converted — and the same data reference (its data dictionary) run from the command line gives the
same federation. Screenshots at 1280 and 1920 px go to test-artifacts/ for a person to look at."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import numpy as np

from fedcore.interpret.profile import Profile
from fedcore.store import RunStore
from tests.messy_exports import CHOLESTEROL_MG_DL, FEATURES, SITES, write_messy_exports
from tests.test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, ROOT, dashboard  # noqa: F401 - the fixture

NAME = "Messy study"


def upload_and_map(page, url: str, files: list, width: int) -> None:
    page.goto(f"{url}/data")
    page.get_by_text("Upload CSV files (one per site)").click(timeout=90_000)  # the first page load may be slow
    page.locator("input[type=file]").first.set_input_files([str(f) for f in files])
    page.get_by_text("Mapping: one decision per problem").wait_for(timeout=90_000)
    page.get_by_label("Name of this data (shown wherever it is listed)").fill(NAME)
    page.keyboard.press("Enter")
    page.get_by_text("'Âge' at south looks like 'age'").wait_for(timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / f"mapping_suggested_{width}.png"), full_page=True)
    for _ in range(3):  # accepting a rename makes age comparable: its missing code is suggested next
        button = page.get_by_role("button", name=re.compile(r"Accept the \d+ undecided suggestion"))
        button.wait_for(timeout=60_000)
        if not button.is_enabled():
            break
        button.click()
        page.wait_for_timeout(2500)
    page.get_by_text("'age' at west is 999 in many rows").wait_for(timeout=60_000)
    # combined: no conflict left, and the check-up reads west's codes as what they are, values not measured
    page.get_by_text("No type conflicts or category differences.").wait_for(timeout=60_000)
    page.get_by_text("west / chol: west's chol is missing in 9% of its rows against 0% at the other sites").wait_for(
        timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / f"mapping_accepted_{width}.png"), full_page=True)
    page.get_by_text("Sites and class balance").first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / f"mapping_report_{width}.png"))


def test_messy_exports_are_mapped_trained_and_the_same_from_the_command_line(dashboard, tmp_path):  # noqa: F811
    from playwright.sync_api import sync_playwright

    url, store = dashboard
    files = write_messy_exports(tmp_path / "exports")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for width in (1280, 1920):
            page = browser.new_page(viewport={"width": width, "height": 3200})  # the page scrolls inside: a tall view
            upload_and_map(page, url, files, width)
            if width == 1920:
                page.get_by_role("button", name="Use this data for training").click()
                page.get_by_text(f"Training will use: {NAME}").wait_for(timeout=60_000)
                page.goto(f"{url}/train")
                rounds = page.get_by_label("rounds", exact=True)
                rounds.fill("5")
                rounds.press("Enter")
                page.wait_for_timeout(1500)
                page.get_by_role("button", name=re.compile(r"Start 1 run")).click()
                deadline = time.time() + 240
                while not store.runs() or store.runs()[0].status["state"] != "done":
                    assert not store.runs() or store.runs()[0].status["state"] in ("queued", "running"), \
                        store.runs()[0].status
                    assert time.time() < deadline, "training did not finish in time"
                    time.sleep(1)
                page.goto(url)  # the Runs page is the home page
                page.get_by_text(NAME).first.wait_for(state="attached", timeout=60_000)  # a table cell (canvas-drawn)
                page.screenshot(path=str(ARTIFACTS / "mapping_runs_listed.png"), full_page=True)
            page.close()
        browser.close()

    (run,) = store.runs()
    federation = run.federation
    assert federation["name"] == NAME and federation["feature_names"] == FEATURES  # every column kept
    assert [s["name"] for s in federation["sites"]] == list(SITES)
    recorded = federation["preprocessing"]["dictionary"]
    assert abs(recorded["content"]["sites"]["east"]["convert"]["chol"]["a"] - 1 / CHOLESTEROL_MG_DL) < 1e-9
    profile = Profile.from_npz(run.load_profile_arrays())
    chol = profile.features.index("chol")
    medians = profile.quantiles[:, 10, chol]
    assert np.all(np.abs(medians - 5.4) < 0.35), medians  # east's cholesterol in mmol/L, as the others'

    # The same data reference from the command line: the same federation.
    spec = tmp_path / "again.json"
    spec.write_text(json.dumps({"algorithm": "fedavg", "data": run.spec["data"], "config": {"rounds": 1}}))
    cli_store = RunStore(tmp_path / "cli-runs")
    done = subprocess.run([sys.executable, "-m", "fedcore", "run", "--spec", str(spec), "--store", str(cli_store.root)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (again,) = cli_store.runs()
    for key in ("name", "feature_names", "feature_kinds", "class_names", "sites", "preprocessing"):
        assert again.federation[key] == federation[key], key
    theirs = Profile.from_npz(again.load_profile_arrays())
    assert all(np.array_equal(profile.arrays[k], theirs.arrays[k], equal_nan=True) for k in profile.arrays)
