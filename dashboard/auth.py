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
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

from dashboard.safe_text import md

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
    """The highest role whose `[roles]` entries match the signed-in person's claims, or None."""
    email = str(claims.get("email") or "").strip().lower()
    if claims.get("email_verified") is False:
        email = ""
    groups = claims.get(str(roles.get("groups_claim") or DEFAULT_GROUPS_CLAIM)) or []
    groups = {str(g) for g in ([groups] if isinstance(groups, str) else groups)}
    subject = str(claims.get("sub") or "")

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


# -- in the running app ------------------------------------------------------------------------

@dataclass(frozen=True)
class Access:
    """This session's access: `mode` is 'local', 'signed in', 'signed out', 'no role', 'exposed'
    (local mode on a non-loopback address) or 'misconfigured'."""

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
            return Access("local", role=ROLES[-1], who="this machine")
        return Access("exposed", problem=f"it listens on '{address or 'every interface'}' without sign-in")
    if problem:
        return Access("misconfigured", problem=problem)
    if not st.user.get("is_logged_in"):
        return Access("signed out")
    claims = st.user.to_dict()
    who = str(claims.get("email") or claims.get("name") or claims.get("sub") or "")
    role = role_for(claims, secrets.get("roles") or {})
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


def gate() -> Access:
    """Run before the navigation: a sign-in page for a signed-out visitor, a refusal for a
    signed-in one without a role or for an exposed local mode (each stops the app); otherwise
    who is signed in, and the sign-out button, in the sidebar."""
    access = current_access()
    if access.mode in ("signed in", "local"):
        with st.sidebar:
            if access.mode == "local":
                st.caption("Local mode: no sign-in; served on this machine only (127.0.0.1). "
                           "README, *Security*, says how to share it.")
            else:
                st.caption(f"Signed in as {md(access.who)} · {access.role}")
                if st.button("Sign out", key="sign_out"):
                    st.logout()
        return access
    st.title("Federated interoperability dashboard")
    if access.mode == "signed out":
        st.markdown("Sign in with your organisation's account to see the runs and their lenses.")
        auth = read_secrets()["auth"]
        for name in providers(auth):
            label = "Sign in" if name == "default" else f"Sign in with {md(name)}"
            if st.button(label, type="primary", key=f"sign_in_{name}"):
                st.login() if name == "default" else st.login(name)
    elif access.mode == "no role":
        st.warning(f"You are signed in as {md(access.who)}, who has no role in this dashboard. "
                   "Ask its administrator to add you under [roles] in the secrets file.")
        if st.button("Sign out", key="sign_out"):
            st.logout()
    elif access.mode == "exposed":
        st.error(f"This dashboard has no sign-in set up, and {md(access.problem)}: anyone who reaches "
                 "it could read, train and delete. Serve it on 127.0.0.1 (the default of `make run`) or set up "
                 "sign-in (README, *Security*).")
    else:
        st.error(f"Sign-in is set up incompletely ({md(access.problem)}); README, *Security*, "
                 "shows a complete [auth] section.")
    st.stop()


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
