"""Sign-in end to end: a real OpenID Connect provider on loopback (oidc-provider-mock), the dashboard
started by the launcher the Docker image uses, and Chromium signing in as people of each role:
each sees only what the role allows, and signs out. Every request to a host other than this
machine is blocked and recorded. Screenshots go to test-artifacts/ for a person to look at."""

import re
import time
from urllib.parse import quote

import pytest

from application.runner import execute, resolve_spec
from fedcore.store import RunStore
from tests.browser_helpers import ARTIFACTS, free_port, need_chromium, serving, wait_until_run_ended

pytestmark = pytest.mark.browser  # `make test-browser` (CI runs it), apart from `make test` for its 10 minutes

PEOPLE = {
    "viewer": ("nurse@hospital.test", {"email": "nurse@hospital.test", "name": "Nora Nurse"}),
    "analyst": ("ana@hospital.test", {"email": "ana@hospital.test", "name": "Ana Lyst", "groups": ["fl-analysts"]}),
    "admin": ("boss@hospital.test", {"email": "boss@hospital.test", "name": "Bo Ss"}),
    None: ("stranger@elsewhere.test", {"email": "stranger@elsewhere.test"}),
}
ALWAYS = ["Runs", "Site check-up", "Feature shifts (iFedAvg)", "Site similarity (FedHealth2)", "Site weights (AdaFed)",
          "Prototypes (inDISCO)", "Compare", "Run details"]
PAGES = {"viewer": ALWAYS, "analyst": [*ALWAYS[:2], "Data", "Train", *ALWAYS[2:]],
         "admin": [*ALWAYS[:2], "Data", "Train", *ALWAYS[2:], "Access and data folders"]}
# The mock provider's own pages link a stylesheet on a CDN; the route below blocks it (nothing
# leaves this machine). Any other outside request fails the test.
PROVIDER_STYLESHEET = "cdn.jsdelivr.net"


@pytest.fixture
def provider():
    need_chromium()
    import httpx
    from oidc_provider_mock import run_server_in_thread

    with run_server_in_thread(port=free_port()) as server:
        url = f"http://localhost:{server.server_port}"
        for sub, claims in PEOPLE.values():
            assert httpx.put(f"{url}/users/{quote(sub)}", json=claims).status_code == 204
        yield url


@pytest.fixture
def dashboard_with_sign_in(provider, tmp_path):
    """The dashboard served with sign-in through `provider` (as the Docker image's launcher serves
    it), over a store holding one finished run: its address and the store."""
    store = RunStore(tmp_path / "runs")
    execute(store.create(resolve_spec({"algorithm": "fedavg", "config": {"rounds": 2}})))
    port = free_port()
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f"""
[auth]
redirect_uri = "http://localhost:{port}/oauth2callback"
cookie_secret = "a-long-random-test-cookie-secret-0123456789"
client_id = "fedcore-dashboard"
client_secret = "test-client-secret"
server_metadata_url = "{provider}/.well-known/openid-configuration"

[roles]
admin = ["boss@hospital.test"]
analyst = ["group:fl-analysts"]
viewer = ["@hospital.test"]
""")
    with serving(store.root, port=port, args=["--address", "127.0.0.1", "--secrets", str(secrets)],
                 log=tmp_path / "server.log"):
        yield f"http://localhost:{port}", store  # the host of the redirect_uri: the sign-in cookie is set for it


def shown_text(page, part: str) -> str:
    """The text of the element holding `part`, as read (without the invisible word joiners that
    keep an address from becoming a link)."""
    element = page.get_by_text(re.compile(re.escape(part))).first
    element.wait_for(timeout=60_000)
    return element.inner_text().replace("\u2060", "")


def nav_links(page) -> list[str]:
    links = page.locator('[data-testid="stSidebarNavLink"]')
    links.first.wait_for(timeout=30_000)
    return [text.split("\n")[-1].strip() for text in links.all_inner_texts()]  # after the icon's name


def sign_in(page, url: str, sub: str) -> None:
    page.goto(url)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_placeholder("sub").fill(sub)  # the provider's own form
    page.get_by_role("button", name="Authorize").click()
    page.wait_for_url(re.compile(re.escape(url) + r"/?(\?.*)?$"), timeout=30_000)
    wait_until_run_ended(page)


def present(page, name, expected: bool) -> bool:
    """Whether a button shows, waiting for it where it should (the page arrives in pieces)."""
    button = page.get_by_role("button", name=name)
    if expected:
        try:
            button.first.wait_for(timeout=30_000)
        except Exception:  # noqa: BLE001 - a timeout: it is absent, and the assertion says so
            return False
    return button.count() > 0


def select_first_run(page) -> None:
    """Tick the first row of the runs table (its cells are drawn on a canvas)."""
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.wait_for(timeout=30_000)
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)  # the row marker of row 1, under the header
    page.get_by_role("button", name="Details").wait_for(timeout=30_000)


def test_sign_in_each_role_sees_what_it_may_and_signs_out(dashboard_with_sign_in, browser):
    url, store = dashboard_with_sign_in
    ARTIFACTS.mkdir(exist_ok=True)
    outside: list[str] = []

    def only_this_machine(route):
        host = re.sub(r":\d+$", "", route.request.url.split("/")[2])
        if host in ("localhost", "127.0.0.1", "[::1]"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    # Signed out: the sign-in and nothing else.
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.route("**/*", only_this_machine)
    page = context.new_page()
    page.goto(url)
    page.get_by_role("button", name="Sign in").wait_for(timeout=60_000)
    assert page.locator('[data-testid="stSidebarNavLink"]').count() == 0
    assert page.get_by_text("Runs (").count() == 0
    page.screenshot(path=str(ARTIFACTS / "auth-signed-out-1280.png"), full_page=True)
    context.close()

    for role in ("viewer", "analyst", "admin"):
        sub, claims = PEOPLE[role]
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.route("**/*", only_this_machine)
        page = context.new_page()
        sign_in(page, url, sub)
        assert shown_text(page, "Signed in as") == f"Signed in as {claims['email']} · {role}"
        assert nav_links(page) == PAGES[role]
        page.get_by_text("Runs (1)").wait_for(timeout=30_000)
        assert present(page, re.compile("Train iFedAvg on the demo data"), role != "viewer") is (role != "viewer")
        select_first_run(page)
        assert present(page, "Re-run with the same settings", role != "viewer") is (role != "viewer")
        assert present(page, "Delete", role == "admin") is (role == "admin")
        for width in (1280, 1920):
            page.set_viewport_size({"width": width, "height": 900})
            page.wait_for_timeout(300)  # the layout settles on the new width (nothing to wait for in the DOM)
            page.screenshot(path=str(ARTIFACTS / f"auth-{role}-{width}.png"), full_page=True)
        if role == "admin":
            page.get_by_role("link", name="Access and data folders").click()
            page.get_by_text("Data folders").first.wait_for(timeout=30_000)
            page.get_by_text("Groups are read from the claim groups").wait_for(timeout=30_000)
            page.screenshot(path=str(ARTIFACTS / "auth-admin-settings-1920.png"), full_page=True)
        # Sign out: through the provider's end-session page, back to the sign-in.
        page.get_by_role("button", name="Sign out").click()
        page.get_by_role("button", name="End session").click()
        page.get_by_role("button", name="Sign in").wait_for(timeout=60_000)
        page.goto(url)  # the session is gone, not just hidden
        page.get_by_role("button", name="Sign in").wait_for(timeout=60_000)
        assert page.locator('[data-testid="stSidebarNavLink"]').count() == 0
        context.close()

    # Signed in, but not listed under [roles]: told so, shown nothing.
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.route("**/*", only_this_machine)
    page = context.new_page()
    sign_in(page, url, PEOPLE[None][0])
    assert "stranger@elsewhere.test, who has no role" in shown_text(page, "who has no role")
    assert page.locator('[data-testid="stSidebarNavLink"]').count() == 0
    page.screenshot(path=str(ARTIFACTS / "auth-no-role-1280.png"), full_page=True)
    context.close()
    assert [u for u in outside if PROVIDER_STYLESHEET not in u] == []


def test_signing_out_ends_the_other_tabs_and_every_copy_of_the_cookie(dashboard_with_sign_in, browser):
    """The probe: after sign-out, a second tab that stayed open kept admin and deleted a run, and a
    cookie copied before sign-out still gave admin in a fresh browser (a 30-day cookie, nothing
    ended on the server). Now both are signed out, told why; the cookie lasts a sign-in (12 h)."""
    url, store = dashboard_with_sign_in
    sub, claims = PEOPLE["admin"]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    first = context.new_page()
    sign_in(first, url, sub)
    assert shown_text(first, "Signed in as") == f"Signed in as {claims['email']} · admin"
    cookie = next(c for c in context.cookies() if c["name"] == "_streamlit_user")
    assert cookie["httpOnly"] and abs(cookie["expires"] - (time.time() + 12 * 3600)) < 120  # not 30 days
    copied = context.cookies()
    second = context.new_page()  # a second tab of the same browser, open before the sign-out
    second.goto(url)
    assert shown_text(second, "Signed in as") == f"Signed in as {claims['email']} · admin"
    first.bring_to_front()
    first.get_by_role("button", name="Sign out").click()
    first.get_by_role("button", name="End session").click()
    first.get_by_role("button", name="Sign in").wait_for(timeout=60_000)
    second.bring_to_front()
    second.get_by_role("link", name="Run details").click()  # the open tab's next step: no reload
    second.get_by_text("You signed out (in this or another window)").wait_for(timeout=60_000)
    # the page draws the notice before its button: counted at once, the button was once not there yet
    second.get_by_role("button", name="Sign in").wait_for(timeout=60_000)
    # absence is counted once the page's script run has ended: counted at once, a navigation drawn
    # late in the run would not be there yet
    wait_until_run_ended(second)
    assert second.get_by_role("button", name="Sign in").count() == 1
    assert second.locator('[data-testid="stSidebarNavLink"]').count() == 0
    second.screenshot(path=str(ARTIFACTS / "auth-other-tab-after-sign-out-1280.png"), full_page=True)
    context.close()

    stolen = browser.new_context(viewport={"width": 1280, "height": 900})  # the cookie copied before
    stolen.add_cookies(copied)
    page = stolen.new_page()
    page.goto(url)
    page.get_by_text("You signed out (in this or another window)").wait_for(timeout=60_000)
    wait_until_run_ended(page)
    assert page.locator('[data-testid="stSidebarNavLink"]').count() == 0
    stolen.close()

    again = browser.new_context(viewport={"width": 1280, "height": 900})  # signing in again works
    page = again.new_page()
    time.sleep(1.1)  # a new token's issue time is a later second than the sign-out
    sign_in(page, url, sub)
    assert shown_text(page, "Signed in as") == f"Signed in as {claims['email']} · admin"
    again.close()
    assert len(store.runs()) == 1  # nothing deleted
