"""In a real browser, local mode: the Data page refuses a server file outside the data folders
without showing a byte of it, and shows a dataset whose column and category names are Markdown
images, links and HTML as plain text — no image fetched, no link, no tag; its CSV export carries
no formula. Every request to a host other than this machine is blocked and recorded.
Screenshots go to test-artifacts/."""

import re
import time

import numpy as np
import pandas as pd
import pytest

from tests.browser_helpers import ARTIFACTS, launch, open_page

pytestmark = pytest.mark.browser  # `make test-browser` (CI runs it), apart from `make test` for its 10 minutes

EVIL_HOST = "198.51.100.7"  # TEST-NET-2: the route below blocks it; nothing may ask for it
IMAGE_COLUMN = f"![c](http://{EVIL_HOST}/column.png)"
LINK_CATEGORY = f"[open](http://{EVIL_HOST}/)"
HTML_CATEGORY = f"<img src=http://{EVIL_HOST}/category.png>"
FORMULA_COLUMN = f'=HYPERLINK("http://{EVIL_HOST}","open")'


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    """A data folder (FEDCORE_DATA_DIRS, set before the dashboard starts) holding a vehicle-layout
    table: three sensors, a column named like a Markdown image (a hundred times larger at sensor
    3: a 'unit'), categories that differ between sensors (a link, an <img>), gaps in a column named
    like a spreadsheet formula."""
    root = tmp_path / "data"
    root.mkdir()
    rng = np.random.default_rng(0)
    rows = [{"sensor": s, "y": 1 if r % 3 == 0 else -1, "f000": rng.normal(), IMAGE_COLUMN: rng.normal(5, 1) * (100 if s == 3 else 1),
             "ward": (LINK_CATEGORY, HTML_CATEGORY)[r % 2] if s == 1 else "general",
             FORMULA_COLUMN: np.nan if r % 5 == 0 else rng.normal()}
            for s in (1, 2, 3) for r in range(40)]
    pd.DataFrame(rows).to_csv(root / "hostile_by_sensor.csv", index=False)
    monkeypatch.setenv("FEDCORE_DATA_DIRS", str(root))
    return root


def test_server_files_are_refused_and_hostile_names_are_text(data_root, dashboard, browser, tmp_path):
    url, _ = dashboard
    ARTIFACTS.mkdir(exist_ok=True)
    outside: list[str] = []

    def only_this_machine(route):
        if re.sub(r":\d+$", "", route.request.url.split("/")[2]) in ("localhost", "127.0.0.1"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context = browser.new_context(accept_downloads=True)
    context.route("**/*", only_this_machine)
    page = open_page(context, f"{url}/data", 1280, "Local mode: no sign-in", 1400)
    page.get_by_text("A dataset on this machine").click()
    page.get_by_text(f"Data folders this dashboard may read: {data_root}").wait_for(timeout=30_000)
    page.get_by_label("Path (inside one of the data folders above)").fill("/etc/passwd")
    page.keyboard.press("Enter")
    page.get_by_text("/etc/passwd is outside the data folders this dashboard may read").wait_for(timeout=30_000)
    body = page.locator("body").inner_text()
    assert "root:x" not in body and "/bin/bash" not in body
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 1000})
        page.wait_for_timeout(300)  # the layout settles on the new width
        page.screenshot(path=str(ARTIFACTS / f"data-roots-refused-{width}.png"), full_page=True)

    # A table inside the data folder, with hostile names.
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Layout").locator("div[role=combobox], input").first.click()
    page.get_by_role("option", name="vehicle sensor network").click()
    page.get_by_label("Path (inside one of the data folders above)").fill(str(data_root / "hostile_by_sensor.csv"))
    page.keyboard.press("Enter")
    page.get_by_text("has different categories").first.wait_for(timeout=60_000)
    # the one site in another unit, named with the factor that maps it (before: a location warning)
    page.get_by_text(re.compile(r"makes it match the other sites|matches the other sites")).first.wait_for(
        timeout=30_000)
    main = page.locator('[data-testid="stMain"]')
    text = main.inner_text().replace("\u2060", "")
    assert IMAGE_COLUMN in text and LINK_CATEGORY in text and HTML_CATEGORY in text  # shown, as text
    assert main.locator(f'img[src*="{EVIL_HOST}"]').count() == 0
    assert main.locator(f'a[href*="{EVIL_HOST}"]').count() == 0
    assert main.locator('[data-testid="stMarkdownContainer"] img').count() == 0
    # no link in any text but the headings' own anchors (href="#...")
    assert main.locator('[data-testid="stMarkdownContainer"] a:not([href^="#"])').count() == 0
    assert main.locator('[data-testid="stElementToolbarButton"]').filter(has_text="Download").count() == 0
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 1000})
        page.wait_for_timeout(300)
        page.screenshot(path=str(ARTIFACTS / f"data-hostile-names-{width}.png"), full_page=True)
    with page.expect_download() as download:
        page.get_by_role("button", name="Download the missing-value shares (CSV)").click()
    exported = pd.read_csv(download.value.path())
    assert list(exported["feature"]) == ["'" + FORMULA_COLUMN]  # a formula no more
    assert np.allclose(exported.iloc[0, 1:].astype(float), 0.2)  # and the shares stay numbers
    context.close()
    assert outside == []


REBIND_HOST = "rebind.attacker.test"  # an attacker's name that its DNS points at 127.0.0.1 (Chromium maps it)


def test_a_foreign_host_name_pointed_at_this_machine_gets_no_app(dashboard, playwright):
    """DNS rebinding: a page of http://rebind.attacker.test:PORT whose name resolves to 127.0.0.1
    reached the whole admin app of a local dashboard. Now it gets a refusal, and its scripts
    cannot open the app's WebSocket under the dashboard's own name either; the dashboard's own
    address still serves the app."""
    url, _ = dashboard
    port = url.rsplit(":", 1)[1]
    ARTIFACTS.mkdir(exist_ok=True)
    socket = """port => new Promise(done => {
        const ws = new WebSocket(`ws://localhost:${port}/_stcore/stream`);
        ws.onopen = () => { ws.close(); done('open'); };
        ws.onclose = () => done('closed');
    })"""
    browser = launch(playwright, [f"--host-resolver-rules=MAP {REBIND_HOST} 127.0.0.1"])
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    response = page.goto(f"http://{REBIND_HOST}:{port}/")
    assert response.status == 403 and "Refused: this dashboard answers only to" in page.inner_text("body")
    page.wait_for_timeout(1500)  # nothing else arrives: no app, no WebSocket
    assert page.locator('[data-testid="stSidebarNavLink"]').count() == 0
    assert page.evaluate(socket, port) == "closed"  # its Origin names the attacker's page
    page.screenshot(path=str(ARTIFACTS / "rebinding-refused-1280.png"), full_page=True)
    for host in ("localhost", "127.0.0.1"):
        page.goto(f"http://{host}:{port}/")
        page.get_by_text("Which site has which problem?").wait_for(timeout=60_000)
        assert page.locator('[data-testid="stSidebarNavLink"]').count() > 5
    assert page.evaluate(socket, port) == "open"  # the same socket from the dashboard's own page
    browser.close()


def test_a_download_address_is_not_served_once_its_page_is_closed(dashboard, browser):
    """The probe: a download's address, copied, kept working after its page was closed. Now it is
    served while the page that shows it is open, and refused once that page has gone."""
    import urllib.error
    import urllib.request

    from application.runner import execute, resolve_spec

    url, store = dashboard
    run = store.create(resolve_spec({"algorithm": "fedavg", "config": {"rounds": 2}}))
    execute(run)

    def status(address: str) -> int:
        try:
            return urllib.request.urlopen(address, timeout=10).status
        except urllib.error.HTTPError as error:
            return error.code

    context = browser.new_context(accept_downloads=True)
    page = open_page(context, f"{url}/run?run={run.id}", 1280, "Download every round's per-site scores (CSV)")
    button = page.get_by_role("button", name="Download every round's per-site scores (CSV)")
    button.wait_for(timeout=60_000)
    with page.expect_download() as download:
        button.click()
    address = download.value.url
    assert "/media/" in address and status(address) == 200  # the page is open: served
    context.close()  # the page closes, and its WebSocket with it
    deadline = time.time() + 20
    while status(address) == 200 and time.time() < deadline:
        time.sleep(0.5)
    assert status(address) == 404
