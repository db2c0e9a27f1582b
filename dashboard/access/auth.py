"""Who may do what: sign-in through Streamlit's OpenID Connect (`st.login`, `st.user`), roles
from the `[roles]` section of the secrets file, and the one check every page and button uses.

Rules:
- Sign-in is set up when the secrets file (`.streamlit/secrets.toml`, or the files of Streamlit's
  `secrets.files` option) has a complete `[auth]` section: redirect_uri, cookie_secret, and a
  provider's client_id, client_secret and server_metadata_url (at the top of the section, or in
  a named provider's subsection). Then every page needs a signed-in user with a role.
- Without it the dashboard is in *local mode*: no sign-in, the person at this machine may do
  everything, and it serves only on a loopback address (127.0.0.1, ::1, localhost). On any other
  address it refuses to show a page and says why.
- Roles, each allowed what the ones before it are: viewer (the lenses, the check-up, run details,
  exports), analyst (choosing and uploading data, training, re-running, cancelling), admin
  (deleting runs, the settings page).
- `[roles]` lists who has each role: an e-mail address (any case), `@domain` for every address
  of that domain, `group:NAME` for members of a group the identity provider puts in the claim
  named by `groups_claim` (default `groups`), `sub:ID` for a subject identifier, or `*` for
  everyone who signs in. E-mail entries match only when the provider has not marked the address
  unverified (`email_verified = false`). A signed-in person with no matching entry gets no access.
- Claims are read by their type: a claim of another (`email_verified` as text, `groups` as a
  number or an object) refuses with a message and grants nothing.
- A sign-in ends on sign-out everywhere and after `[sessions] max_hours` (dashboard/access/sessions.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

from dashboard.access import sessions
from dashboard.presenters.safe_text import md
from dashboard.access.sessions import ClaimError, described
from fedcore.store import RunStore

ROLES = ("viewer", "analyst", "admin")
# What each role adds to the ones before it.
PERMISSIONS = {
    "viewer": ("view", "export"),
    "analyst": ("choose data", "train", "cancel"),
    "admin": ("delete", "settings"),
}
PROVIDER_KEYS = ("client_id", "client_secret", "server_metadata_url")
DEFAULT_GROUPS_CLAIM = "groups"


def may(role: str | None, action: str) -> bool:
    """Whether `role` may do `action` (an action of PERMISSIONS)."""
    if action not in {a for actions in PERMISSIONS.values() for a in actions}:
        raise ValueError(f"unknown action {action!r}")
    if role not in ROLES:
        return False
    return any(action in PERMISSIONS[r] for r in ROLES[: ROLES.index(role) + 1])


def least_role(action: str) -> str:
    """The first role allowed `action` (for messages)."""
    return next(role for role in ROLES if may(role, action))


def role_for(claims: Mapping[str, Any], roles: Mapping[str, Any]) -> str | None:
    """The highest role whose `[roles]` entries match the signed-in person's claims, or None.
    Each claim is read by its type (`ClaimError` for one of another type: it refuses)."""
    email = _text_claim(claims, "email").lower()
    verified = claims.get("email_verified")
    if verified is not None and not isinstance(verified, bool):
        raise ClaimError(f"the claim 'email_verified' is {described(verified)}, not true or false")
    if verified is False:
        email = ""
    groups_claim = str(roles.get("groups_claim") or DEFAULT_GROUPS_CLAIM)
    groups = _groups_claim(claims.get(groups_claim), groups_claim)
    subject = _text_claim(claims, "sub")

    def matches(entry: str) -> bool:
        entry = entry.strip()
        if entry == "*":
            return True
        if entry.startswith("group:"):
            return entry[len("group:"):] in groups
        if entry.startswith("sub:"):
            return bool(subject) and entry[len("sub:"):] == subject
        if entry.startswith("@"):
            return bool(email) and email.endswith(entry.lower())
        return bool(email) and email == entry.lower()

    granted = None
    for role in ROLES:
        entries = roles.get(role) or []
        if any(matches(str(e)) for e in ([entries] if isinstance(entries, str) else entries)):
            granted = role
    return granted


def _text_claim(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ClaimError(f"the claim '{name}' is {described(value)}, not text")
    return value.strip()


def _groups_claim(value: Any, name: str) -> set[str]:
    """A groups claim: a list of names (or one name); anything else refuses, so that no shape of
    claim can be read as a membership it does not state."""
    if value is None:
        return set()
    if isinstance(value, str):
        return {value}
    if not isinstance(value, list):
        raise ClaimError(f"the claim '{name}' is {described(value)}, not a list of group names")
    odd = next((item for item in value if not isinstance(item, str)), None)
    if odd is not None:
        raise ClaimError(f"the claim '{name}' holds {described(odd)}, not only group names")
    return set(value)


def auth_problem(secrets: Mapping[str, Any]) -> str | None:
    """None when `secrets` set up sign-in completely, else what is missing. No `[auth]` at all is
    reported too (as local mode's reason)."""
    auth = secrets.get("auth")
    if not isinstance(auth, Mapping) or not auth:
        return "no [auth] section in the secrets file"
    missing = [key for key in ("redirect_uri", "cookie_secret") if not auth.get(key)]
    if missing:
        return f"[auth] lacks {', '.join(missing)}"
    if not str(auth["redirect_uri"]).endswith("/oauth2callback"):
        return "[auth] redirect_uri must end with /oauth2callback"
    if not providers(auth):
        return f"[auth] names no provider with {', '.join(PROVIDER_KEYS)}"
    try:
        sessions.max_hours(secrets)
    except ValueError as error:
        return str(error)
    return None


def providers(auth: Mapping[str, Any]) -> list[str]:
    """The providers `st.login` can use: 'default' for keys at the top of `[auth]`, else the name
    of every subsection that has them all."""
    names = ["default"] if all(auth.get(k) for k in PROVIDER_KEYS) else []
    return names + [name for name, section in auth.items()
                    if isinstance(section, Mapping) and all(section.get(k) for k in PROVIDER_KEYS)]


def is_loopback(address: str | None) -> bool:
    """Whether a server address only accepts connections from this machine. Empty means every
    interface (Streamlit's default), so not loopback."""
    host = (address or "").strip().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


LOCAL_NAMES = ("localhost", "127.0.0.1", "[::1]")


def local_address_problem(host: str | None, origin: str | None, port: int, address: str | None = None) -> str | None:
    """Why a request to the local-mode dashboard does not come from a page of this machine's
    dashboard, or None: its Host must be one of this machine's names (or the loopback `address`
    it listens on) with `port`, and its Origin, when the browser sends one, the same over http.
    A host name that an attacker's DNS points at 127.0.0.1 (DNS rebinding) arrives as Host."""
    served = (address or "").strip()
    names = {*LOCAL_NAMES, *([f"[{served.strip('[]')}]" if ":" in served else served] if is_loopback(served) else [])}
    allowed = {f"{name}:{port}" for name in names} | (names if port == 80 else set())
    if (host or "").lower() not in allowed:
        return f"this dashboard answers only to http://localhost:{port} and http://127.0.0.1:{port}, not to " \
               f"the host name {host!r}"
    if origin is not None and origin.lower() not in {f"http://{name}" for name in allowed}:
        return f"a page of {origin!r} may not use this dashboard"
    return None


# -- in the running app ------------------------------------------------------------------------

@dataclass(frozen=True)
class Access:
    """This session's access: `mode` is 'local', 'signed in', 'signed out' (`problem`: why, when
    a sign-in ended), 'no role', 'refused' (a claim of the wrong type), 'exposed' (local mode on
    a non-loopback address), 'foreign page' (local mode opened under another host name or from
    another page's origin) or 'misconfigured'."""

    mode: str
    role: str | None = None
    who: str = ""
    problem: str = ""

    def may(self, action: str) -> bool:
        return may(self.role, action)


def read_secrets() -> dict[str, Any]:
    """The secrets as a plain dict; empty when there is no secrets file."""
    try:
        return st.secrets.to_dict()
    except FileNotFoundError:  # Streamlit's 'no secrets found' error is one
        return {}


def current_access() -> Access:
    secrets = read_secrets()
    problem = auth_problem(secrets)
    if "auth" not in secrets:
        address = st.get_option("server.address")
        if is_loopback(address):
            # The launcher's LocalOnly (dashboard/access/guard.py) refuses such a page before it loads; this
            # is the same rule for `streamlit run app.py` (no headers at all: a test's bare session).
            headers = st.context.headers
            problem = headers and local_address_problem(headers.get("Host"), headers.get("Origin"),
                                                        int(st.get_option("server.port")), address)
            if problem:
                return Access("foreign page", problem=problem)
            return Access("local", role=ROLES[-1], who="this machine")
        return Access("exposed", problem=f"it listens on '{address or 'every interface'}' without sign-in")
    if problem:
        return Access("misconfigured", problem=problem)
    if not st.user.get("is_logged_in"):
        return Access("signed out")
    claims = st.user.to_dict()
    who = next((str(claims[k]) for k in ("email", "name", "sub") if isinstance(claims.get(k), str) and claims[k]), "")
    try:
        over = sessions.ended(claims, RunStore().root, sessions.max_hours(secrets))
        role = None if over else role_for(claims, secrets.get("roles") or {})
    except ClaimError as error:
        return Access("refused", who=who, problem=str(error))
    if over:
        return Access("signed out", who=who, problem=over)
    return Access("signed in" if role else "no role", role=role, who=who)


def allowed(action: str) -> bool:
    """Whether this session may do `action`: pages hide what this says no to."""
    return current_access().may(action)


def require(action: str) -> None:
    """Stop the page with a message unless this session may do `action`; every page calls it
    first."""
    access = current_access()
    if not access.may(action):
        st.error(f"Your role ({access.role or 'none'}) may not {action} here; that needs the "
                 f"{least_role(action)} role. Ask the dashboard's administrator.")
        st.stop()


def gate(pages: Callable[[], Sequence[Any]] = tuple) -> Access:
    """Run before the navigation: a sign-in page for a signed-out visitor, a refusal for a
    signed-in one without a role or for an exposed local mode (each stops the app, with every
    st.Page of the app, `pages()`, registered but hidden); otherwise who is signed in, and the
    sign-out button, in the sidebar."""
    access = current_access()
    if access.mode in ("signed in", "local"):
        with st.sidebar:
            if access.mode == "local":
                st.caption("Local mode: no sign-in; served on this machine only (127.0.0.1). "
                           "README, *Security*, says how to share it.")
            else:
                st.caption(f"Signed in as {md(access.who)} · {access.role}")
                sign_out_button()
        return access
    # The pages, hidden: a deep link finds its page (and stops here), and a tab whose sign-in just
    # ended (here or in another tab) does not keep the navigation its last page drew.
    every = list(pages())
    if every:
        st.navigation(every, position="hidden")
    st.title("Federated interoperability dashboard")
    if access.mode == "signed out":
        if access.problem:
            st.info(access.problem)
        st.markdown("Sign in with your organisation's account to see the runs and their lenses.")
        auth = read_secrets()["auth"]
        for name in providers(auth):
            label = "Sign in" if name == "default" else f"Sign in with {md(name)}"
            if st.button(label, type="primary", key=f"sign_in_{name}"):
                st.login() if name == "default" else st.login(name)
    elif access.mode == "no role":
        st.warning(f"You are signed in as {md(access.who)}, who has no role in this dashboard. "
                   "Ask its administrator to add you under [roles] in the secrets file.")
        sign_out_button()
    elif access.mode == "refused":
        st.warning(f"Your identity provider's answer cannot be read safely ({md(access.problem)}), so this dashboard "
                   "gives no role. Ask its administrator to check the provider's claims (README, *Security*).")
        sign_out_button()
    elif access.mode == "foreign page":
        st.error(f"Refused: {md(access.problem)}.")
    elif access.mode == "exposed":
        st.error(f"This dashboard has no sign-in set up, and {md(access.problem)}: anyone who reaches "
                 "it could read, train and delete. Serve it on 127.0.0.1 (the default of `make run`) or set up "
                 "sign-in (README, *Security*).")
    else:
        st.error(f"Sign-in is set up incompletely ({md(access.problem)}); README, *Security*, "
                 "shows a complete [auth] section.")
    st.stop()


def sign_out_button() -> None:
    """Sign out here and everywhere: the sign-out is recorded on the server first (ending this
    person's sign-ins in every tab and browser, `dashboard.access.sessions`), then Streamlit's own
    sign-out clears this browser's cookie and the provider's session."""
    if st.button("Sign out", key="sign_out"):
        claims = st.user.to_dict()
        try:
            sessions.sign_out(claims, RunStore().root, sessions.max_hours(read_secrets()))
        except (ClaimError, ValueError):
            pass  # claims that cannot name the person granted nothing to end
        st.logout()


def visible(pages: Sequence[tuple[Any, str]], access: Access) -> list[Any]:
    """The pages (each with the action it needs) this access may open."""
    return [page for page, action in pages if access.may(action)]


# -- rows ------------------------------------------------------------------------------------------
# A site's rows (its values, its images) are shown only to roles this deployment allows: `[roles]`
# `rows = "analyst"` (the default), "viewer", "admin" or "nobody". Everyone else sees the statistics
# the sites released (the check-up, the lenses), never a row.
ROWS_KEY, DEFAULT_ROWS_ROLE = "rows", "analyst"


def rows_role(roles: Mapping[str, Any]) -> str | None:
    """The least role allowed to see rows (None: nobody; an unknown value counts as nobody: fails closed)."""
    value = str(roles.get(ROWS_KEY) or DEFAULT_ROWS_ROLE).strip().lower()
    return value if value in ROLES else None


def may_see_rows(role: str | None, roles: Mapping[str, Any]) -> bool:
    """Whether `role` may see a site's rows under this deployment's `[roles]`."""
    least = rows_role(roles)
    return least is not None and role in ROLES and ROLES.index(role) >= ROLES.index(least)


def can_see_rows() -> bool:
    """Whether this session may see a site's rows (pages ask before drawing or exporting one)."""
    return may_see_rows(current_access().role, read_secrets().get("roles") or {})


def rows_refused() -> str:
    """What a page says instead of a site's rows."""
    least = rows_role(read_secrets().get("roles") or {})
    who = f"the {least} role and above" if least else "no role"
    return (f"A site's rows are shown only to roles this deployment allows to see rows ({who}); yours sees the "
            "statistics the sites released: the check-up and the lenses.")
