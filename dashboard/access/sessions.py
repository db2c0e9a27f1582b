"""Sign-ins that end when they should: on sign-out, for every tab and every copy of the cookie,
and after a working day.

Streamlit's sign-in (`st.login`, 1.67) keeps the identity provider's ID-token claims in a signed
cookie, `_streamlit_user`, valid for 30 days; each browser tab reads it once, when it connects,
and keeps what it read for as long as it stays open. `st.logout` deletes the cookie in the
browser that asks and clears that one tab: another open tab, or a copy of the cookie taken
before, stayed signed in (the probe deleted a run from a second tab after signing out). So the
server decides, on every page it draws:

- a sign-in is as old as its ID token's issue time (the `iat` claim, which OpenID Connect
  requires); one older than `max_hours` (`[sessions]` in the secrets file, default 12) is over;
- a sign-out records the person (a hash of the provider's `iss` and `sub`) and the moment in
  `<store>/.signed_out.json`; a sign-in issued at or before that person's last sign-out is
  over, in every tab and browser. Records older than `max_hours` are dropped: every sign-in
  they could end is over by its age anyway.

A damaged record file fails closed: it is replaced by one that ends every sign-in issued before
that moment (everyone signs in again). What the file holds is hashes and times, no name or
address.
"""

from __future__ import annotations

import fcntl
import hashlib
import math
import time
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fedcore.shapes import MapOf, NUMBER, Record, kind_of, required
from fedcore.store import atomic_write_json, read_json

FILE = ".signed_out.json"
EVERYONE = "*"  # a record that ends every sign-in issued before it (a damaged file's replacement)
DEFAULT_MAX_HOURS = 12.0
MAX_HOURS_RANGE = (0.1, 720.0)  # six minutes to Streamlit's own 30 days
SHAPE = Record({"signed_out": required(MapOf(NUMBER))})


class ClaimError(ValueError):
    """A claim of the identity provider's missing where it is needed, or of the wrong type: it
    grants nothing, and the message names the claim and what it held in words (a number, text,
    missing), never its value."""


def described(value: Any) -> str:
    return "missing" if value is None else kind_of(value)


def max_hours(secrets: Mapping[str, Any]) -> float:
    """How long a sign-in lasts, from `[sessions] max_hours`; ValueError naming what is wrong."""
    section = secrets.get("sessions") or {}
    value = section.get("max_hours", DEFAULT_MAX_HOURS) if isinstance(section, Mapping) else None
    low, high = MAX_HOURS_RANGE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(f"[sessions] max_hours must be a number of hours from {low:g} to {high:g}")
    return float(value)


def person(claims: Mapping[str, Any]) -> str:
    """Who signed in, as the records name them: a hash of the provider (iss) and subject (sub)."""
    subject, issuer = claims.get("sub"), claims.get("iss", "")
    if not isinstance(subject, str) or not subject:
        raise ClaimError(f"the claim 'sub' is {described(subject)}, not the subject's identifier")
    if not isinstance(issuer, str):
        raise ClaimError(f"the claim 'iss' is {described(issuer)}, not the provider's address")
    return hashlib.sha256(f"{issuer}\n{subject}".encode()).hexdigest()[:32]


def issued_at(claims: Mapping[str, Any]) -> float:
    value = claims.get("iat")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ClaimError(f"the claim 'iat' (when the sign-in was issued) is {described(value)}, not a time")
    return float(value)


def ended(claims: Mapping[str, Any], root: Path, hours: float, now: float | None = None) -> str | None:
    """Why this sign-in is over (a sentence for the person), or None while it lasts.
    ClaimError when the claims cannot say."""
    now = time.time() if now is None else now
    issued, who = issued_at(claims), person(claims)
    if now - issued > hours * 3600:
        return f"Your sign-in is more than {hours:g} hours old; sign in again."
    records = _records(root, now)
    if issued <= max(records.get(who, -math.inf), records.get(EVERYONE, -math.inf)):
        return "You signed out (in this or another window), which ends this sign-in too; sign in again."
    return None


def sign_out(claims: Mapping[str, Any], root: Path, hours: float, now: float | None = None) -> None:
    """End every sign-in of this person issued until now, everywhere."""
    now = time.time() if now is None else now
    who = person(claims)
    with _locked(root):
        records = _records(root, now)
        records[who] = max(now, records.get(who, now))
        _write(root, {key: at for key, at in records.items() if now - at <= hours * 3600})


def _records(root: Path, now: float) -> dict[str, float]:
    path = root / FILE
    if not path.exists():
        return {}
    value = read_json(path, None, SHAPE)
    if value is None:  # damaged: end every sign-in issued until now, and start the file again
        records = {EVERYONE: now}
        _write(root, records)
        return records
    return dict(value["signed_out"])


def _write(root: Path, records: Mapping[str, float]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_json(root / FILE, {"signed_out": dict(records)})


@contextmanager
def _locked(root: Path):
    """One sign-out at a time writes the records (two at once would lose one)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / (FILE + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
