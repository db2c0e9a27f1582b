"""What the server lets through before Streamlit sees a request: ASGI middleware around the app
(`st.App`), installed by the launcher every deployment uses (`python -m dashboard.serve`: `make
run`, the Docker image).

- `LocalOnly` (local mode): only requests addressed to this machine by name — Host
  `localhost`, `127.0.0.1` or `[::1]` (or the loopback address it listens on) with the port it
  serves, and, when a browser sends one, an Origin of the same — reach the app, its WebSocket,
  uploads and files. A page elsewhere whose host name an attacker points at 127.0.0.1 (DNS
  rebinding) sends its own name as Host: it gets 403, and its WebSocket is closed. Streamlit's
  `server.allowedHosts` ignores ports and covers only the WebSocket; its Origin check accepts
  any port of localhost.
- `LiveFilesOnly` and `sweep_files`: a file Streamlit serves under /media (downloads, images) is
  served only while a connected session shows it, and files no session shows are swept every
  SWEEP_SECONDS. Streamlit kept a download after its page closed until another session's run
  swept the store twice: with nobody else using the dashboard, a copied address stayed valid. A
  download made on a click (the HTML report, large CSVs) belongs to no session in Streamlit's
  table; it is served, and swept within two sweeps of being made.
- `CookieFlags` (sign-in): every cookie gets `Secure` when the public address is https (Streamlit
  leaves it off on purpose, for Safari on plain-http localhost), and the sign-in cookie lives no
  longer than a sign-in does (`[sessions] max_hours`, dashboard/access/sessions.py) instead of 30 days.

Streamlit 1.67's own pieces are used where it has no public word for them: the running runtime
(`streamlit.runtime.get_instance`) and which session shows which file (its media file manager's
table, read under its lock); Streamlit is pinned in requirements.txt, and the browser tests
(tests/test_browser_security.py) fail if they change.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from dashboard.access.auth import local_address_problem

Scope = dict[str, Any]
SIGN_IN_COOKIE = "_streamlit_user"  # and its chunks and the tokens' cookie: every name that starts so
MAX_AGE = re.compile(r"(?i)(;\s*max-age=)(\d+)")
SWEEP_SECONDS = 10


class LocalOnly:
    """Refuses every request whose Host or Origin names another machine (see the module)."""

    def __init__(self, app: Callable, address: str, port: Callable[[], int]) -> None:
        self.app, self.address, self.port = app, address, port

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = _headers(scope)
            problem = local_address_problem(headers.get("host"), headers.get("origin"), self.port(), self.address)
            if problem:
                await _refuse(scope, receive, send, 403, f"Refused: {problem}.\n")
                return
        await self.app(scope, receive, send)


class LiveFilesOnly:
    """Serves a file under /media only while a connected session shows it (see the module)."""

    def __init__(self, app: Callable, live: Callable[[str], bool] | None = None) -> None:
        self.app, self.live = app, live or servable

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":
            _, media, name = scope["path"].rpartition("/media/")
            if media and name and not self.live(os.path.splitext(name)[0]):
                await _refuse(scope, receive, send, 404, "No such file: it belonged to a page that is closed.\n")
                return
        await self.app(scope, receive, send)


class CookieFlags:
    """Adds Secure to every cookie (`secure`), and caps the sign-in cookie's Max-Age."""

    def __init__(self, app: Callable, secure: bool, sign_in_seconds: int) -> None:
        self.app, self.secure, self.sign_in_seconds = app, secure, sign_in_seconds

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def flagged(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [(key, self.cookie(value) if key.lower() == b"set-cookie" else value)
                                                  for key, value in message.get("headers", [])]}
            await send(message)

        await self.app(scope, receive, flagged)

    def cookie(self, header: bytes) -> bytes:
        text = header.decode("latin-1")
        if text.startswith(SIGN_IN_COOKIE):
            text = MAX_AGE.sub(lambda m: m.group(1) + str(min(int(m.group(2)), self.sign_in_seconds)), text)
        if self.secure and not re.search(r"(?i);\s*secure\b", text):
            text += "; Secure"
        return text.encode("latin-1")


def servable(file_id: str) -> bool:
    """Whether Streamlit's file `file_id` may be served: some connected session shows it, or no
    session does (a download made on a click, swept soon: see the module)."""
    from streamlit import runtime

    if not runtime.exists():
        return False
    instance = runtime.get_instance()
    files = instance.media_file_mgr
    with files._lock:
        showing = [session for session, shown in files._files_by_session_and_coord.items()
                   if file_id in shown.values()]
    return not showing or any(instance.is_active_session(session) for session in showing)


@asynccontextmanager
async def sweep_files(app: Any) -> AsyncIterator[None]:
    """While the app serves (an `st.App` lifespan): every SWEEP_SECONDS, Streamlit's own sweep of
    the files no session shows (a download is marked by one sweep and dropped by the next)."""
    from streamlit import runtime

    async def sweep() -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            if runtime.exists():
                runtime.get_instance().media_file_mgr.remove_orphaned_files()

    task = asyncio.create_task(sweep())
    try:
        yield
    finally:
        task.cancel()


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name (a repeated one: its first value)."""
    headers: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        headers.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    return headers


async def _refuse(scope: Scope, receive: Callable, send: Callable, status: int, text: str) -> None:
    if scope["type"] == "websocket":
        await receive()  # the handshake's connect event, then a close instead of an accept
        await send({"type": "websocket.close", "code": 1008})
        return
    body = text.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
