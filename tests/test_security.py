"""The security rules on their own: data roots, Markdown escaping, CSV formula cells, roles, and the
launcher that refuses to serve other machines without sign-in. Pages: test_security_pages.py;
in a browser with a real OpenID provider: test_browser_auth.py."""

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dashboard.access.auth import ClaimError, auth_problem, is_loopback, may, providers, role_for
from dashboard.presenters.safe_text import code, csv_bytes, md, neutral_cell
from dashboard.serve import server_config
from data_adapters.references.roots import OutsideDataRoots, check_reference_roots, reference_paths, within_roots
from tests.browser_helpers import serving
from tests.helpers import unescaped

ROOT = Path(__file__).resolve().parent.parent

# -- data roots -----------------------------------------------------------------------------------


@pytest.fixture
def layout(tmp_path):
    """A root with a data file, a secret beside it, and links out of and within the root."""
    root, outside = tmp_path / "data", tmp_path / "private"
    (root / "study").mkdir(parents=True)
    outside.mkdir()
    (root / "study" / "site_a.csv").write_text("x,y\n1,0\n")
    (outside / "secret.csv").write_text("password,y\nhunter2,1\n")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    (root / "escape_file.csv").symlink_to(outside / "secret.csv")
    (root / "alias.csv").symlink_to(root / "study" / "site_a.csv")
    return root, outside


def test_paths_inside_a_root_are_allowed_resolved(layout):
    root, _ = layout
    assert within_roots(root / "study" / "site_a.csv", [root]) == (root / "study" / "site_a.csv").resolve()
    assert within_roots(str(root), [root]) == root.resolve()  # the root itself
    assert within_roots(root / "alias.csv", [root]) == (root / "study" / "site_a.csv").resolve()  # a link inside


@pytest.mark.parametrize("relative", ["../private/secret.csv", "study/../../private/secret.csv", "escape/secret.csv",
                                      "escape_file.csv", "escape"])
def test_dot_dot_and_links_that_leave_the_root_are_refused(layout, relative):
    root, _ = layout
    with pytest.raises(OutsideDataRoots, match="outside the data folders"):
        within_roots(f"{root}/{relative}", [root])


def test_absolute_paths_elsewhere_a_sibling_with_the_same_prefix_and_non_paths_are_refused(layout, tmp_path):
    root, _ = layout
    sibling = tmp_path / "data2"  # '/…/data2' starts with '/…/data' as text, not as a folder
    sibling.mkdir()
    for path in ("/etc/passwd", "/etc", str(sibling), "~", "", "a\x00b"):
        with pytest.raises(OutsideDataRoots):
            within_roots(path, [root])
    with pytest.raises(OutsideDataRoots, match="none are set up"):
        within_roots(root / "study" / "site_a.csv", [])


def test_a_relative_path_is_taken_from_the_working_directory(layout, monkeypatch):
    root, _ = layout
    monkeypatch.chdir(root / "study")
    assert within_roots("site_a.csv", [root]).name == "site_a.csv"
    with pytest.raises(OutsideDataRoots):
        within_roots("../../private/secret.csv", [root])


def test_every_path_of_a_reference_is_found(layout):
    root, outside = layout
    assert reference_paths("demo") == []
    assert reference_paths({"source": "synthetic_scans", "images": 100}) == []
    assert reference_paths("heart:/etc") == ["/etc"]
    assert reference_paths("csv:a.csv,b.csv,target=y,server_test=s.csv") == ["a.csv", "b.csv", "s.csv"]
    assert reference_paths({"source": "har", "path": "/root"}) == ["/root"]
    assert reference_paths({"source": "flower", "superlink": "127.0.0.1:9093", "server_data": "heart:/etc"}) == ["/etc"]
    assert reference_paths("flower:127.0.0.1:9093,server_data=npz:/srv/x.npz") == ["/srv/x.npz"]
    assert reference_paths({"source": "flower", "superlink": "127.0.0.1:9093"}) == []


@pytest.mark.parametrize("ref", [
    "heart:/etc", "har:/etc/passwd", "images:/root", "vehicle:{outside}/secret.csv",
    {"source": "csv", "files": ["{root}/study/site_a.csv", "{outside}/secret.csv"], "target": "y"},
    {"source": "csv", "files": ["{root}/study/site_a.csv"], "target": "y", "server_test": "{root}/escape_file.csv"},
    {"source": "idx", "path": "{root}/../private"},
    {"source": "flower", "superlink": "127.0.0.1:9093", "server_data": "csv:{outside}/secret.csv,target=y"},
])
def test_a_reference_outside_the_roots_is_refused_before_a_byte_is_read(layout, ref, opened):
    root, outside = layout

    def fill(value):
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value.format(root=root, outside=outside) if isinstance(value, str) else value

    with opened() as events, pytest.raises(OutsideDataRoots):
        check_reference_roots(fill(ref), [root])
    assert events == []  # nothing opened or listed anywhere


def test_a_reference_inside_the_roots_passes(layout, opened):
    root, _ = layout
    with opened() as events:
        check_reference_roots({"source": "csv", "files": [str(root / "study" / "site_a.csv")], "target": "y"}, [root])
        check_reference_roots("demo", [])
    assert events == []


@pytest.fixture(scope="session")
def opened():
    """A context manager recording every file opened and folder listed meanwhile (an audit hook:
    Python reports them all, whichever library asks)."""
    from contextlib import contextmanager

    recording: list[list] = []

    def hook(event, args):
        if recording and event in ("open", "os.listdir", "os.scandir") and args and args[0] is not None:
            recording[-1].append((event, str(args[0])))

    sys.addaudithook(hook)

    @contextmanager
    def record():
        events: list = []
        recording.append(events)
        try:
            yield events
        finally:
            recording.pop()

    return record


# -- Markdown escaping and CSV cells ------------------------------------------------------------

HOSTILE = ["![x](http://198.51.100.7/p.png)", "[click](https://198.51.100.7/)", "<img src=x onerror=alert(1)>",
           ":red[alarm] :material/home:", "$x^2$ and $$y$$", "**bold** _it_ ~~del~~", "# heading", "> quote",
           "- item", "www.example.org", "https://198.51.100.7/a", "alice@example.org", "a | b", "&lt;b&gt;",
           "back\\slash `tick`", "1. list"]


@pytest.mark.parametrize("text", HOSTILE)
def test_md_escapes_every_punctuation_mark_and_breaks_auto_links(text):
    escaped = md(text)
    assert unescaped(escaped) == text  # a person reads exactly the text
    for i, ch in enumerate(escaped):  # no Markdown punctuation is left unescaped
        if ch in r"""!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~""":
            backslashes = len(escaped[:i]) - len(escaped[:i].rstrip("\\"))
            assert backslashes % 2 == 1 or (ch == "\\" and escaped[i + 1:i + 2] in r"""!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~"""), \
                (text, escaped, i)
    for scheme in ("www", "http", "https"):
        assert f"{scheme}\\:" not in escaped and f"{scheme}\\." not in escaped  # a joiner breaks the auto-link
    assert "\\@" not in escaped or "\u2060\\@" in escaped


def test_md_known_answers():
    assert md("a*b_c") == "a\\*b\\_c"
    assert md("[x](y)") == "\\[x\\]\\(y\\)"
    assert md("see www.x.org") == "see www\u2060\\.x\\.org"
    assert md("https://x") == "https\u2060\\:\\/\\/x"
    assert md("a@b") == "a\u2060\\@b"
    assert md(0.5) == "0\\.5"


def test_code_spans_take_any_text():
    assert code("temp") == "`temp`"
    assert code("a`b") == "``a`b``"
    assert code("`x`") == "`` `x` ``"
    assert code("two\nlines") == "`two lines`"


def test_formula_cells_are_neutralised_and_numbers_stay_numbers():
    assert neutral_cell('=HYPERLINK("http://198.51.100.7","x")') == '\'=HYPERLINK("http://198.51.100.7","x")'
    for formula in ("+1+1", "-2+3", "@SUM(A1:A3)", "\tx", "\rx", "=1"):
        assert neutral_cell(formula) == "'" + formula
    for plain in ("-0.5", "+3", "-1e-3", "ward", "", "a=b"):
        assert neutral_cell(plain) == plain
    assert neutral_cell(-2.5) == -2.5
    frame = pd.DataFrame({"=cmd|' /C calc'!A0": ["=cmd|' /C calc'!A0", "-0.5", "@x"], "value": [-1.5, 2.0, -3.0],
                          "count": [1, -2, 3]})
    lines = csv_bytes(frame).decode().splitlines()
    assert lines == ["'=cmd|' /C calc'!A0,value,count", "'=cmd|' /C calc'!A0,-1.5,1", "-0.5,2.0,-2", "'@x,-3.0,3"]


def test_every_dashboard_csv_download_goes_through_csv_bytes():
    """One export path: no page writes CSV itself."""
    offenders = [str(p.relative_to(ROOT)) for folder in ("views", "dashboard") for p in (ROOT / folder).rglob("*.py")
                 if ".to_csv(" in p.read_text() and p.name != "safe_text.py"]
    assert offenders == []


# -- roles and sign-in configuration -------------------------------------------------------------

ROLES = {"admin": ["Boss@Hospital.test"], "analyst": ["group:fl-analysts", "sub:robot-7"], "viewer": ["@hospital.test"]}


@pytest.mark.parametrize("claims, role", [
    ({"email": "boss@hospital.test"}, "admin"),  # any case
    ({"email": "ana@hospital.test", "groups": ["fl-analysts"]}, "analyst"),  # the highest match wins
    ({"email": "outsider@else.test", "groups": ["fl-analysts"]}, "analyst"),
    ({"sub": "robot-7"}, "analyst"),
    ({"email": "nurse@hospital.test"}, "viewer"),
    ({"email": "nurse@hospital.test.evil.org"}, None),
    ({"email": "boss@hospital.test", "email_verified": False}, None),  # an unverified address matches nothing
    ({"email": "x@else.test", "groups": "fl-analysts-2"}, None),
    ({}, None),
])
def test_role_for(claims, role):
    assert role_for(claims, ROLES) == role


@pytest.mark.parametrize("claims, named", [
    ({"email": "boss@hospital.test", "email_verified": "false"}, "'email_verified' is text, not true or false"),
    ({"email": "boss@hospital.test", "email_verified": 0}, "'email_verified' is a number, not true or false"),
    ({"email": "ana@hospital.test", "groups": 5}, "'groups' is a number, not a list of group names"),
    ({"email": "ana@hospital.test", "groups": {"fl-analysts": False}}, "'groups' is an object, not a list of group"),
    ({"email": "ana@hospital.test", "groups": ["fl-analysts", 7]}, "'groups' holds a number, not only group names"),
    ({"email": ["boss@hospital.test"]}, "'email' is a list, not text"),
    ({"sub": 7, "groups": ["fl-analysts"]}, "'sub' is a number, not text"),
])
def test_a_claim_of_the_wrong_type_refuses_with_a_message_and_never_grants(claims, named):
    """The probe: email_verified "false" (text) granted the role; groups 5 raised a TypeError;
    groups {"fl-analysts": false} made an analyst."""
    with pytest.raises(ClaimError) as error:
        role_for(claims, ROLES)
    assert named in str(error.value)


# -- sessions: over on sign-out everywhere, and after max_hours ------------------------------------
NOW = 1_800_000_000.0
NURSE = {"iss": "https://id.hospital.test", "sub": "nurse", "iat": NOW - 60}


def test_a_sign_out_ends_every_sign_in_of_that_person_issued_before_it(tmp_path):
    from dashboard.access.sessions import ended, sign_out

    other = {**NURSE, "sub": "ana"}
    assert ended(NURSE, tmp_path, 12, NOW) is None and ended(other, tmp_path, 12, NOW) is None
    sign_out(NURSE, tmp_path, 12, NOW)
    assert "You signed out" in ended(NURSE, tmp_path, 12, NOW + 1)  # another tab, a copied cookie: same claims
    assert ended({**NURSE, "iat": NOW}, tmp_path, 12, NOW + 1)  # issued in the same second: over too
    assert ended(other, tmp_path, 12, NOW + 1) is None  # someone else's sign-in goes on
    assert ended({**NURSE, "iss": "https://elsewhere.test"}, tmp_path, 12, NOW + 1) is None  # another provider's
    assert ended({**NURSE, "iat": NOW + 5}, tmp_path, 12, NOW + 6) is None  # signed in again afterwards
    assert "nurse" not in (tmp_path / ".signed_out.json").read_text()  # hashes and times only


def test_a_sign_in_older_than_max_hours_is_over_and_old_records_are_dropped(tmp_path):
    from dashboard.access.sessions import ended, sign_out

    assert ended(NURSE, tmp_path, 12, NURSE["iat"] + 12 * 3600) is None
    assert "more than 12 hours old" in ended(NURSE, tmp_path, 12, NURSE["iat"] + 12 * 3600 + 1)
    sign_out(NURSE, tmp_path, 12, NOW)
    sign_out({**NURSE, "sub": "ana"}, tmp_path, 12, NOW + 13 * 3600)
    assert len(json.loads((tmp_path / ".signed_out.json").read_text())["signed_out"]) == 1


def test_a_damaged_sign_out_record_ends_every_sign_in_issued_before_it_was_found(tmp_path):
    from dashboard.access.sessions import ended

    (tmp_path / ".signed_out.json").write_text("{not json")
    assert "You signed out" in ended(NURSE, tmp_path, 12, NOW)
    assert ended({**NURSE, "iat": NOW + 1}, tmp_path, 12, NOW + 2) is None  # a fresh sign-in is fine
    assert json.loads((tmp_path / ".signed_out.json").read_text()) == {"signed_out": {"*": NOW}}


@pytest.mark.parametrize("claims, named", [({**NURSE, "iat": None}, "'iat' (when the sign-in was issued) is missing"),
                                           ({**NURSE, "iat": "1800000000"}, "'iat' (when the sign-in was issued) is text"),
                                           ({**NURSE, "sub": 5}, "'sub' is a number"),
                                           ({**NURSE, "iss": ["x"]}, "'iss' is a list")])
def test_a_sign_in_without_a_readable_issue_time_or_subject_refuses(tmp_path, claims, named):
    from dashboard.access.sessions import ClaimError, ended

    with pytest.raises(ClaimError, match=re.escape(named)):
        ended(claims, tmp_path, 12, NOW)


@pytest.mark.parametrize("value", [0, -1, 721, "12", True, float("nan")])
def test_max_hours_must_be_a_sensible_number_of_hours(value):
    assert "[sessions] max_hours must be a number of hours from 0.1 to 720" in auth_problem(
        {**COMPLETE, "sessions": {"max_hours": value}})


def test_groups_claim_and_everyone():
    assert role_for({"roles": ["fl-analysts"]}, {**ROLES, "groups_claim": "roles"}) == "analyst"
    assert role_for({"sub": "anyone"}, {"viewer": ["*"]}) == "viewer"
    assert role_for({"sub": "anyone"}, {"viewer": "*"}) == "viewer"


def test_each_role_may_what_the_ones_before_it_may():
    assert may("viewer", "view") and may("viewer", "export")
    assert not may("viewer", "train") and not may("viewer", "choose data") and not may("viewer", "cancel")
    assert may("analyst", "train") and may("analyst", "cancel") and may("analyst", "view")
    assert not may("analyst", "delete") and not may("analyst", "settings")
    assert may("admin", "delete") and may("admin", "settings") and may("admin", "train")
    assert not may(None, "view") and not may("guest", "view")
    with pytest.raises(ValueError):
        may("admin", "launch missiles")


COMPLETE = {"auth": {"redirect_uri": "https://fl.hospital.test/oauth2callback", "cookie_secret": "s" * 32,
                     "client_id": "fl", "client_secret": "x",
                     "server_metadata_url": "https://id.hospital.test/.well-known/openid-configuration"}}


def test_auth_problem_names_what_is_missing():
    assert auth_problem(COMPLETE) is None
    assert "no [auth]" in auth_problem({})
    assert "cookie_secret" in auth_problem({"auth": {k: v for k, v in COMPLETE["auth"].items() if k != "cookie_secret"}})
    assert "oauth2callback" in auth_problem({"auth": {**COMPLETE["auth"], "redirect_uri": "https://x/"}})
    no_provider = {k: v for k, v in COMPLETE["auth"].items() if k not in ("client_id",)}
    assert "no provider" in auth_problem({"auth": no_provider})
    named = {**no_provider, "keycloak": {k: COMPLETE["auth"][k] for k in ("client_id", "client_secret",
                                                                          "server_metadata_url")}}
    assert auth_problem({"auth": named}) is None and providers(named) == ["keycloak"]


@pytest.mark.parametrize("address, loopback", [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True),
                                               ("[::1]", True), ("localhost", True), ("0.0.0.0", False),
                                               ("::", False), ("", False), (None, False), ("192.0.2.1", False),
                                               ("fl.hospital.test", False)])
def test_is_loopback(address, loopback):
    assert is_loopback(address) is loopback


# -- the launcher ---------------------------------------------------------------------------------


def _serve(tmp_path, *args):
    env = {k: v for k, v in os.environ.items()}
    return subprocess.run([sys.executable, "-m", "dashboard.serve", *args], cwd=tmp_path, env={
        **env, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=120)


def test_the_launcher_refuses_every_interface_without_sign_in(tmp_path):
    result = _serve(tmp_path, "--address", "0.0.0.0", "--check")
    assert result.returncode == 2
    assert "Refusing to serve the dashboard on 0.0.0.0 without sign-in (no [auth] section" in result.stderr
    incomplete = tmp_path / "incomplete.toml"
    incomplete.write_text('[auth]\nredirect_uri = "https://fl.hospital.test/oauth2callback"\n')
    result = _serve(tmp_path, "--address", "0.0.0.0", "--secrets", str(incomplete), "--check")
    assert result.returncode == 2 and "lacks cookie_secret" in result.stderr


def test_the_launcher_serves_loopback_without_and_every_interface_with_sign_in(tmp_path):
    assert _serve(tmp_path, "--check").returncode == 0  # 127.0.0.1, local mode
    secrets = tmp_path / "secrets.toml"
    secrets.write_text("[auth]\n" + "".join(f'{k} = "{v}"\n' for k, v in COMPLETE["auth"].items()))
    result = _serve(tmp_path, "--address", "0.0.0.0", "--secrets", str(secrets), "--check")
    assert result.returncode == 0, result.stderr
    config = server_config("0.0.0.0", 8501, COMPLETE, [str(secrets)])
    assert config == {"server.address": "0.0.0.0", "server.port": 8501, "secrets.files": [str(secrets)],
                      "browser.serverAddress": "fl.hospital.test", "browser.serverPort": 443}


def test_streamlit_asks_no_outside_service_for_an_address_at_start_up():
    """The shipped config sets server.address and browser.serverAddress, so the start-up banner
    never calls Streamlit's external-IP lookup (checkip.amazonaws.com)."""
    code = """
import sys
from streamlit import config, net_util
from streamlit.web import bootstrap
calls = []
net_util._make_blocking_http_get = lambda url, timeout=5: calls.append(url)
net_util.get_internal_ip = lambda: calls.append('internal') or '10.0.0.1'
config.get_config_options(force_reparse=True)
assert config.get_option('server.headless') is True
bootstrap._print_url(False)
print('CALLS', calls)
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "CALLS []" in result.stdout
    assert "URL: http://localhost:8501" in re.sub("\x1b\\[[0-9;]*m", "", result.stdout)


GUARD = """
import socket, sys
LOG = sys.argv[1]
def local(host):
    return host in ('localhost', '0.0.0.0', '::', '::1') or host.startswith(('127.', '/'))
def hook(event, args):
    if event in ('socket.connect', 'socket.sendto', 'socket.getaddrinfo', 'socket.gethostbyname'):
        target = args[1] if event in ('socket.connect', 'socket.sendto') else args[0]
        if not local(str(target[0] if isinstance(target, tuple) else target)):
            with open(LOG, 'a') as log:
                log.write(f'{event} {target}\\n')
            raise OSError('outside network blocked by the test')
sys.addaudithook(hook)
sys.argv = [sys.argv[2], *sys.argv[3:]]  # the launcher (`make run`), as `python -m dashboard.serve` starts it
sys.path.insert(0, '.')
from dashboard.serve import main
sys.exit(main())
"""


def test_the_running_dashboard_contacts_no_outside_host(tmp_path):
    """Start the real server with every outside connection and name lookup blocked and logged
    (an audit hook: no packet leaves), load a page, and find the log empty."""
    guard, log, output = tmp_path / "guard.py", tmp_path / "outside.log", tmp_path / "server.log"
    guard.write_text(GUARD)
    launcher = [str(guard), str(log), str(ROOT / "dashboard" / "serve.py")]
    banner = re.compile(r"URL: http://localhost:(\d+)")
    with serving(tmp_path / "runs", launcher=launcher, env={"PYTHONUNBUFFERED": "1"}, log=output) as url:
        assert b"<html" in urllib.request.urlopen(f"{url}/", timeout=10).read().lower()
        deadline = time.time() + 30  # the start-up banner is printed once the server listens
        while not banner.search(re.sub("\x1b\\[[0-9;]*m", "", output.read_text())) and time.time() < deadline:
            time.sleep(0.2)
    assert not log.exists(), log.read_text()
    assert f"URL: http://localhost:{url.rsplit(':', 1)[1]}" in re.sub("\x1b\\[[0-9;]*m", "", output.read_text())


def test_flower_runs_check_the_superlink_certificate_when_one_is_given(monkeypatch, tmp_path):
    import tomllib

    from application.flower.launch import connection_config

    monkeypatch.delenv("FEDCORE_FLOWER_CA_CERT", raising=False)
    plain = tomllib.loads(connection_config("127.0.0.1:9093"))["superlink"]["fedcore"]
    assert plain == {"address": "127.0.0.1:9093", "insecure": True}  # the loopback demo
    monkeypatch.setenv("FEDCORE_FLOWER_CA_CERT", str(tmp_path / "ca.crt"))
    tls = tomllib.loads(connection_config("superlink.hospital.test:9093"))["superlink"]["fedcore"]
    assert tls == {"address": "superlink.hospital.test:9093", "root-certificates": str(tmp_path / "ca.crt")}


# -- names inside plotly figures ---------------------------------------------------------------
HOSTILE_SITE = "<a href='https://attacker.example/x'>Oak</a>"
HOSTILE_FEATURE = "temp<img src=https://attacker.example/p.png>"


def _figures_with_hostile_names():
    import numpy as np

    from dashboard.presenters import figures

    sites, features = ["Alder", HOSTILE_SITE], ["age", HOSTILE_FEATURE]
    colors = figures.site_colors(sites)
    curves = pd.DataFrame({"round": [1, 2, 1, 2], "site": [sites[0], sites[0], sites[1], sites[1]],
                           "f1": [0.5, 0.6, 0.4, 0.5]})
    values = pd.DataFrame({"site": [sites[0], sites[1]] * 10, "class": ["yes", "no"] * 10,
                           "value": np.arange(20.0)})
    return {
        "shift heatmap": figures.shift_heatmap(np.ones((2, 2)), np.zeros((2, 2)), np.eye(2, dtype=bool),
                                               np.array([True, False]), sites, features, "w_in", np.ones(2),
                                               np.ones(2)),
        "matrix heatmap": figures.matrix_heatmap(np.eye(2), sites, "distances", "Blues"),
        "site curves": figures.site_curves(curves, "f1", colors),
        "missing heatmap": figures.missing_heatmap(pd.DataFrame([[0.1, 0.0], [0.0, 0.2]], index=features,
                                                                columns=sites)),
        "feature distribution": figures.feature_distribution(values, HOSTILE_SITE, HOSTILE_FEATURE, colors),
    }


@pytest.mark.parametrize("name", ["shift heatmap", "matrix heatmap", "site curves", "missing heatmap",
                                  "feature distribution"])
def test_site_and_feature_names_are_drawn_as_text_in_figures(name):
    """Plotly reads HTML in tick labels, legend names and titles: a site called <a href=...> would
    be a link on every heatmap. Each figure carries the names escaped, and its marks still sit on
    the escaped categories."""
    figure = json.loads(_figures_with_hostile_names()[name].to_json())
    text = json.dumps(figure, ensure_ascii=False)  # plotly's JSON writes '<' as \u003c
    assert "<a href" not in text and "<img" not in text
    assert "&lt;a href" in text or "&lt;img" in text
    categories = {str(v) for trace in figure["data"] for axis in ("x", "y") for v in (trace.get(axis) or [])}
    for annotation in figure["layout"].get("annotations", []):
        for axis in ("x", "y"):
            if isinstance(annotation.get(axis), str) and annotation.get(f"{axis}ref", axis) in ("x", "y"):
                assert annotation[axis] in categories


# -- the server's guard (dashboard/access/guard.py), request by request -----------------------------------
def _asgi(middleware, scope, response_headers=()):
    """Send one request through `middleware` around an app that answers 200 with
    `response_headers`; returns (status or close code, headers, whether the app was reached)."""
    import asyncio

    reached, sent = [], []

    async def app(scope, receive, send):
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": list(response_headers)})
        await send({"type": "http.response.body", "body": b""})

    async def receive():
        return {"type": "websocket.connect"} if scope["type"] == "websocket" else {"type": "http.request"}

    async def send(message):
        sent.append(message)

    asyncio.run(middleware(app)(scope, receive, send))
    first = sent[0]
    return first.get("status", first.get("code")), dict(first.get("headers", [])), bool(reached)


def _scope(kind="http", path="/", **headers):
    return {"type": kind, "path": path, "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}


@pytest.mark.parametrize("kind", ["http", "websocket"])
@pytest.mark.parametrize("headers, allowed", [
    ({"host": "localhost:8501"}, True), ({"host": "127.0.0.1:8501", "origin": "http://localhost:8501"}, True),
    ({"host": "[::1]:8501"}, True),
    ({"host": "rebind.attacker.test:8501"}, False), ({"host": "rebind.attacker.test:8501", "origin":
                                                     "http://rebind.attacker.test:8501"}, False),
    ({"host": "localhost:8501", "origin": "http://rebind.attacker.test:8501"}, False),
    ({"host": "localhost:8501", "origin": "http://localhost:8888"}, False),  # another local app's page
    ({"host": "localhost:8501", "origin": "null"}, False), ({"host": "localhost:9999"}, False), ({}, False),
])
def test_local_mode_lets_through_only_this_machines_own_address(kind, headers, allowed):
    from dashboard.access.guard import LocalOnly

    code, _, reached = _asgi(lambda app: LocalOnly(app, "127.0.0.1", lambda: 8501), _scope(kind, **headers))
    assert reached is allowed and code == (200 if allowed else 403 if kind == "http" else 1008)


def test_files_under_media_are_served_only_when_servable():
    from dashboard.access.guard import LiveFilesOnly

    live = {"abc"}.__contains__
    assert _asgi(lambda app: LiveFilesOnly(app, live), _scope(path="/media/abc.csv"))[2] is True
    assert _asgi(lambda app: LiveFilesOnly(app, live), _scope(path="/media/def.csv"))[:1] == (404,)
    assert _asgi(lambda app: LiveFilesOnly(app, live), _scope(path="/_stcore/health"))[2] is True


@pytest.mark.parametrize("secure", [True, False])
def test_cookies_are_secure_over_https_and_the_sign_in_cookie_lasts_a_sign_in(secure):
    from dashboard.access.guard import CookieFlags

    cookies = [(b"set-cookie", b"_streamlit_user=abc; HttpOnly; Max-Age=2592000; Path=/; SameSite=lax"),
               (b"set-cookie", b"_streamlit_user_tokens_1=abc; HttpOnly; Max-Age=2592000; Path=/"),
               (b"set-cookie", b"_streamlit_user=; Max-Age=0; Path=/"),  # a deletion stays one
               (b"set-cookie", b"_streamlit_xsrf=x; Max-Age=2592000; Path=/"),
               (b"content-type", b"text/plain")]
    sent = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": cookies})

    async def send(message):
        sent.append(message)

    import asyncio
    asyncio.run(CookieFlags(app, secure=secure, sign_in_seconds=43200)(_scope(), None, send))
    out = [v.decode() for k, v in sent[0]["headers"] if k == b"set-cookie"]
    flag = "; Secure" if secure else ""
    assert out == ["_streamlit_user=abc; HttpOnly; Max-Age=43200; Path=/; SameSite=lax" + flag,
                   "_streamlit_user_tokens_1=abc; HttpOnly; Max-Age=43200; Path=/" + flag,
                   "_streamlit_user=; Max-Age=0; Path=/" + flag, "_streamlit_xsrf=x; Max-Age=2592000; Path=/" + flag]


# -- hover texts: escaped once, line breaks kept (issue 25) ----------------------------------------
QUOTED_SITE = 'North "A" & <b>Co</b>'
PLOTLY_ENTITIES = {"&lt;": "<", "&gt;": ">", "&amp;": "&", "&nbsp;": "\u00a0"}  # what plotly.js turns back


def plotly_reads(text: str) -> list[str]:
    """The lines plotly draws for a text: split at its <br>, its <b> tags dropped, the entities
    plotly.js knows read back (others, like &quot;, stay as written)."""
    lines = re.split(r"<br\s*/?>", text)
    lines = [re.sub(r"</?b>", "", line) for line in lines]
    return [re.sub("|".join(PLOTLY_ENTITIES), lambda m: PLOTLY_ENTITIES[m.group(0)], line) for line in lines]


def test_the_checkup_grids_hover_shows_names_as_written_on_separate_lines():
    """The probe: hovers showed a literal <br> (the text escaped after its line breaks were written)."""
    from dashboard.presenters.checkup_view import Cell, Grid, grid_figure
    from fedcore.interpret.findings import Finding

    finding = Finding(QUOTED_SITE, "data", "unit", "chol", "a message", 1e-6, q=1e-5)
    figure = grid_figure(Grid([QUOTED_SITE], ["data"], [[Cell("finding", [finding, finding])]]))
    (hover,) = figure.data[0].customdata[0]
    assert plotly_reads(hover) == [f"{QUOTED_SITE} · data:", *["unit or scale (chol), q < 0.001"] * 2]


def test_the_feature_shift_hover_shows_names_as_written(tmp_path):
    """The probe: a quote in a name showed as &quot; (escaped for HTML attributes, which plotly
    does not read back)."""
    from dashboard.presenters.lenses import shift_view
    from application.runner import execute, resolve_spec
    from fedcore.store import RunStore

    rng = np.random.default_rng(0)
    files = []
    for k in range(2):
        path = tmp_path / f"site{k}.csv"
        pd.DataFrame({"age": rng.normal(50, 9, 60), 'chol "mg"': rng.normal(5, 1, 60),
                      "y": rng.integers(0, 2, 60)}).to_csv(path, index=False)
        files.append(str(path))
    spec = resolve_spec({"algorithm": "ifedavg", "config": {"rounds": 1}, "data": {
        "source": "csv", "files": files, "target": "y", "site_names": [QUOTED_SITE, "South"]}})
    run = RunStore(tmp_path / "runs").create(spec)
    execute(run)
    figure = shift_view(run, 1, "w_in").figure
    notes = [str(note[0]) for trace in figure.data if trace.customdata is not None for note in trace.customdata]
    first = plotly_reads(notes[0])
    assert first[0] == f"{QUOTED_SITE} · age", first
    assert plotly_reads(notes[1])[0] == f'{QUOTED_SITE} · chol "mg"'
    assert not any("&quot;" in note or "&lt;br" in note for note in notes)
