"""The pages under the security rules (Streamlit's AppTest): what each role sees and may do, the
sign-in and refusal screens, the data roots on the Data and Train pages, hostile names shown as
text, and formula cells in the CSV a page hands out."""

import io
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from application.runner import execute, resolve_spec
from fedcore.store import RunStore
from tests.helpers import open_page, remove_started_runs, unescaped

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
ROLE_ORDER = ["viewer", "analyst", "admin"]
EVIL_HOST = "198.51.100.7"  # TEST-NET-2: nothing answers there, and nothing here may ask
SECRETS = {
    "auth": {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "a-test-cookie-secret-0123456789",
             "client_id": "fedcore", "client_secret": "not-secret",
             "server_metadata_url": "http://localhost:9400/.well-known/openid-configuration"},
    "roles": {"admin": ["boss@hospital.test"], "analyst": ["group:fl-analysts"], "viewer": ["@hospital.test"]},
}
# What Streamlit's cookie holds: the ID token's claims, among them its issuer and issue time.
ISSUED = {"iss": "http://localhost:9400", "iat": int(time.time())}
USERS = {
    "viewer": {"is_logged_in": True, "email": "nurse@hospital.test", "sub": "nurse", **ISSUED},
    "analyst": {"is_logged_in": True, "email": "ana@hospital.test", "sub": "ana", "groups": ["fl-analysts"], **ISSUED},
    "admin": {"is_logged_in": True, "email": "boss@hospital.test", "sub": "boss", **ISSUED},
}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = RunStore(tmp_path_factory.mktemp("security") / "runs")
    execute(store.create(resolve_spec({"algorithm": "fedavg", "config": {"rounds": 2}})))
    return store


@pytest.fixture
def make_app(store, monkeypatch, tmp_path):
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    monkeypatch.setenv("FEDCORE_MAX_JOBS", "1")
    monkeypatch.setenv("FEDCORE_DATA_DIRS", str(tmp_path / "data"))
    keep = [run.id for run in store.runs()]

    def make(user=None, secrets=SECRETS):
        at = AppTest.from_file(APP, default_timeout=60)
        if secrets:
            at.secrets = secrets
        if user is not None:
            at.user = user
        return at

    yield make
    remove_started_runs(store, keep)


def texts(at):
    return " ".join(unescaped(m.value) for m in [*at.title, *at.markdown, *at.caption, *at.info, *at.warning,
                                                 *at.success, *at.error])


def labels(at):
    return [b.label for b in at.button]


def test_a_signed_out_visitor_sees_only_the_sign_in(make_app):
    at = make_app({"is_logged_in": False})
    at.run()
    assert labels(at) == ["Sign in"]
    assert "Runs (" not in texts(at) and not at.dataframe
    at.switch_page("views/run.py").run()  # a deep link does not get past the sign-in either
    assert labels(at) == ["Sign in"] and not at.dataframe


def test_a_signed_in_person_without_a_role_is_told_so(make_app):
    at = make_app({"is_logged_in": True, "email": "someone@elsewhere.test", "sub": "someone", **ISSUED})
    at.run()
    assert "someone@elsewhere.test, who has no role" in texts(at)
    assert labels(at) == ["Sign out"] and not at.dataframe


def test_signing_out_in_one_tab_ends_the_sign_in_in_every_other(make_app):
    """The probe: a second tab kept its admin role after sign-out in the first, and deleted a run.
    (A copy of the cookie in another browser carries the same claims, so it is the same case.)"""
    admin = {**USERS["admin"], "sub": "boss-two-tabs"}  # a person of this test's own: sign-outs are kept
    first, second = make_app(admin), make_app(admin)
    first.run(), second.run()
    assert "Signed in as boss@hospital.test · admin" in texts(second)
    first.button(key="sign_out").click().run()
    second.run()  # the other tab's next page: signed out, told why
    assert "You signed out (in this or another window)" in texts(second) and labels(second) == ["Sign in"]
    assert not second.dataframe
    second.switch_page("views/run.py").run()
    assert labels(second) == ["Sign in"] and not second.dataframe
    fresh = make_app({**admin, "iat": int(time.time()) + 2})  # signed in again: a new token
    fresh.run()
    assert "Signed in as boss@hospital.test · admin" in texts(fresh)


def test_an_old_sign_in_is_over(make_app):
    at = make_app({**USERS["viewer"], "iat": int(time.time()) - 12 * 3600 - 60})
    at.run()
    assert "Your sign-in is more than 12 hours old; sign in again." in texts(at) and labels(at) == ["Sign in"]


@pytest.mark.parametrize("claims, shown", [
    ({"email_verified": "false"}, "the claim 'email_verified' is text, not true or false"),
    ({"groups": 5}, "the claim 'groups' is a number, not a list of group names"),
    ({"groups": {"fl-analysts": False}}, "the claim 'groups' is an object, not a list of group names"),
    ({"iat": None}, "the claim 'iat' (when the sign-in was issued) is missing"),
])
def test_a_claim_of_the_wrong_type_shows_why_and_grants_nothing(make_app, claims, shown):
    at = make_app({**USERS["analyst"], **claims})
    at.run()
    assert not at.exception
    assert shown in texts(at) and "gives no role" in texts(at)
    assert labels(at) == ["Sign out"] and not at.dataframe


def test_an_incomplete_sign_in_setup_stops_the_app(make_app):
    at = make_app(USERS["admin"], {"auth": {"redirect_uri": "http://localhost:8501/oauth2callback"}})
    at.run()
    assert "Sign-in is set up incompletely ([auth] lacks cookie_secret)" in texts(at)
    assert not at.button and not at.dataframe


def test_local_mode_on_another_address_shows_nothing(make_app):
    at = make_app(secrets=None)
    before = st.get_option("server.address")
    st.config.set_option("server.address", "0.0.0.0")
    try:
        at.run()
    finally:
        st.config.set_option("server.address", before)
    assert "no sign-in set up, and it listens on '0.0.0.0' without sign-in" in texts(at)
    assert not at.button and not at.dataframe


def test_local_mode_says_so_and_may_do_everything(make_app):
    at = open_page(make_app(secrets=None), "views/settings.py")
    assert "Local mode: no sign-in; served on this machine only (127.0.0.1)" in texts(at)
    assert at.title[0].value == "Access and data folders"


@pytest.mark.parametrize("role", ["viewer", "analyst", "admin"])
def test_each_role_sees_what_it_may_do(make_app, store, role):
    run_id = store.runs()[-1].id
    at = open_page(make_app(USERS[role]), "views/run.py", run=run_id)
    assert f"Signed in as {USERS[role]['email']} · {role}" in texts(at)
    assert ("Re-run with the same settings" in labels(at)) is (role != "viewer")
    assert "Download every round's per-site scores (CSV)" in [b.label for b in at.get("download_button")]
    at = open_page(make_app(USERS[role]), "views/runs.py")
    assert any("Train iFedAvg on the demo data" in label for label in labels(at)) is (role != "viewer")
    for page, action, allowed_from in (("views/train.py", "train", "analyst"), ("views/data.py", "choose data", "analyst"),
                                       ("views/settings.py", "settings", "admin")):
        allowed = ROLE_ORDER.index(role) >= ROLE_ORDER.index(allowed_from)
        if allowed:
            assert open_page(make_app(USERS[role]), page).title[0].value in ("Train", "Data", "Access and data folders")
        else:  # not in the navigation, so no link or URL reaches it ...
            at = make_app(USERS[role])
            at.run()
            with pytest.raises(ValueError, match="Could not find a navigation page"):
                at.switch_page(page)
        # ... and the page itself refuses (it checks first, whatever led to it)
        at = AppTest.from_file(str(ROOT / page), default_timeout=60)
        at.secrets, at.user = SECRETS, USERS[role]
        at.run()
        refusal = f"Your role ({role}) may not {action} here; that needs the {allowed_from} role"
        assert (refusal in texts(at)) is not allowed, (page, role)
        assert bool(at.title) is allowed


def test_the_settings_page_lists_roles_and_data_folders(make_app, tmp_path):
    at = open_page(make_app(USERS["admin"]), "views/settings.py")
    roles = at.dataframe[1].value.set_index("role")
    assert roles.loc["analyst", "who (from [roles] in the secrets file)"] == "group:fl-analysts"
    assert roles.loc["viewer", "may"] == "view, export"
    folders = at.dataframe[2].value
    assert str(tmp_path / "data") in list(folders["folder"]) and "uploads" in list(folders["why"])
    assert "not-secret" not in str([d.value.to_dict() for d in at.dataframe])  # the client secret is never shown


def test_the_data_page_refuses_a_file_outside_the_data_folders_without_showing_it(make_app, tmp_path):
    (tmp_path / "data").mkdir()
    outside = tmp_path / "private.csv"
    outside.write_text("password;secret\nhunter2;1\n")
    at = open_page(make_app(USERS["analyst"]), "views/data.py")
    at.radio(key="source").set_value("A dataset on this machine").run()
    assert f"Data folders this dashboard may read: {tmp_path / 'data'}" in texts(at)
    at.selectbox(key="dataset").set_value("Another folder or file…").run()
    for kind, path in (("har", "/etc/passwd"), ("heart", "/etc"), ("vehicle", str(outside)),
                       ("har", f"{tmp_path / 'data'}/../private.csv"), ("images", "/root")):
        at.selectbox(key="kind").set_value(kind)
        at.text_input(key="path").set_value(path).run()
        assert not at.exception
        assert any("outside the data folders this dashboard may read" in unescaped(e.value) for e in at.error), path
        assert "root:x" not in texts(at) and "hunter2" not in texts(at) and "password" not in texts(at)
        assert "use" not in [b.key for b in at.button]


def test_the_train_page_refuses_flower_server_data_outside_the_data_folders(make_app, store):
    before = {run.id for run in store.runs()}
    at = open_page(make_app(USERS["analyst"]), "views/train.py")
    at.radio(key="where").set_value("flower").run()
    at.text_input(key="superlink").set_value("127.0.0.1:9")
    at.text_input(key="server_data").set_value("csv:/etc/passwd,target=x")
    at.multiselect[0].set_value(["fedavg"])
    at.button(key="start").click().run()
    assert "/etc/passwd is outside the data folders this dashboard may read" in texts(at)
    assert {run.id for run in store.runs()} == before  # nothing was created


# -- hostile names ---------------------------------------------------------------------------------

IMAGE = f"![c](http://{EVIL_HOST}/column.png)"
SITES = [f"![s](http://{EVIL_HOST}/site.png)", "**Bold** <b>Hospital</b>", f"[click](http://{EVIL_HOST}/)"]
CATEGORIES = [f"<img src=http://{EVIL_HOST}/category.png>", f"www.{EVIL_HOST}.example", "=HYPERLINK(\"x\")"]
FORMULA_COLUMN = f"=HYPERLINK(\"http://{EVIL_HOST}\",\"open\")"


def hostile_table() -> bytes:
    """Three sites named with Markdown and HTML, a column named like an image, categories that differ
    between sites (one an <img>), one site with that column a hundred times larger (a 'unit'), and
    gaps in a column named like a spreadsheet formula."""
    rng = np.random.default_rng(0)
    rows = []
    for i, site in enumerate(SITES):
        for r in range(60):
            rows.append({"site": site, "age": rng.normal(60, 10), IMAGE: rng.normal(5, 1) * (100 if i == 2 else 1),
                         "ward": CATEGORIES[r % 2] if i == 0 else CATEGORIES[2],
                         FORMULA_COLUMN: np.nan if r % 5 == 0 else rng.normal(),
                         "outcome": "yes" if r % 3 == 0 else "no"})
    buffer = io.StringIO()
    pd.DataFrame(rows).to_csv(buffer, index=False)
    return buffer.getvalue().encode()


def test_hostile_names_are_shown_as_text_and_exported_without_formulas(make_app, monkeypatch):
    captured = {}
    draw = st.download_button

    def record(label, data, file_name=None, *args, **kwargs):
        captured[file_name] = data
        return draw(label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", record)
    at = open_page(make_app(USERS["analyst"]), "views/data.py")
    at.radio(key="source").set_value("Upload CSV files (one per site)").run()
    at.file_uploader[0].set_value([("hostile.csv", hostile_table(), "text/csv")]).run()
    at.radio(key="layout").set_value("a column names the site").run()
    at.selectbox(key="site_column").set_value("site").run()
    at.selectbox(key="target").set_value("outcome").run()
    assert not at.exception, at.exception
    elements = [*at.markdown, *at.caption, *at.info, *at.warning, *at.success, *at.error]
    shown = texts(at)
    # each hostile name reaches the page, as the text it is ...
    assert IMAGE in shown and SITES[2] in shown and CATEGORIES[0] in shown
    assert any(IMAGE in unescaped(w.value) and SITES[2] in unescaped(w.value)
               and "looks like values 100 times the others'" in unescaped(w.value) for w in at.warning)
    assert any(CATEGORIES[0] in unescaped(w.value) and "different categories" in unescaped(w.value) for w in at.warning)
    # ... and no element carries it as Markdown or HTML: an image, a link, a tag, bold, an auto-link
    for element in elements:
        body = re.sub(r"(`+).*?\1", "", element.value)  # code spans are literal text
        for raw in ("![", "](", "<img", "<b>", "**Bold", f"www.{EVIL_HOST}", f"http://{EVIL_HOST}"):
            # present only behind a backslash, which makes its first character plain text
            assert all(m.start() > 0 and body[m.start() - 1] == "\\" for m in re.finditer(re.escape(raw), body)), \
                (raw, element.value)
    missing = pd.read_csv(io.BytesIO(captured["missing-values.csv"]))
    assert list(missing["feature"]) == ["'" + FORMULA_COLUMN]  # a formula no more
    assert list(missing.columns[1:]) == SITES and np.allclose(missing[SITES].to_numpy(), 0.2)  # numbers stay numbers


def test_who_may_see_rows_is_a_setting_of_the_deployment():
    from dashboard.access.auth import may_see_rows, rows_role

    assert rows_role({}) == "analyst"  # the default
    assert [may_see_rows(role, {}) for role in ROLE_ORDER] == [False, True, True]
    assert [may_see_rows(role, {"rows": "viewer"}) for role in ROLE_ORDER] == [True, True, True]
    assert [may_see_rows(role, {"rows": "admin"}) for role in ROLE_ORDER] == [False, False, True]
    assert [may_see_rows(role, {"rows": "nobody"}) for role in ROLE_ORDER] == [False, False, False]
    assert not may_see_rows("admin", {"rows": "everyone"})  # a value it does not know: nobody (fails closed)
    assert not may_see_rows(None, {"rows": "viewer"})


@pytest.mark.parametrize("role, rows, shown", [("viewer", None, False), ("analyst", None, True),
                                               ("analyst", "admin", False), ("admin", "admin", True)])
def test_a_sites_rows_are_drawn_and_exported_only_for_roles_allowed_to_see_rows(make_app, store, role, rows, shown):
    run = next((r for r in store.runs() if r.spec.algorithm == "ifedavg"), None)
    if run is None:
        run = store.create(resolve_spec({"algorithm": "ifedavg", "config": {"rounds": 2}}))
        execute(run)
    secrets = {**SECRETS, "roles": {**SECRETS["roles"], **({"rows": rows} if rows else {})}}
    at = open_page(make_app(USERS[role], secrets), "views/feature_shifts.py", run=run.id)
    assert not at.exception, at.exception
    downloads = [b.label for b in at.get("download_button")]
    assert any(label.startswith("Every site's values of") for label in downloads) is shown
    assert ("A site's rows are shown only to roles this deployment allows to see rows" in texts(at)) is not shown
    assert any(label.startswith("Heatmap cells") for label in downloads)  # the statistics, for every role
    if shown:
        assert "each site's own rows, training and hold-out, under its name" in texts(at)
