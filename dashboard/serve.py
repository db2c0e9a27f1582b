"""Serve the dashboard — on this machine, or to others with sign-in — or refuse: `make run` and
the Docker image's command.

    python -m dashboard.serve [--address 127.0.0.1] [--port 8501] [--secrets FILE] [--check]

A non-loopback address needs sign-in (dashboard/access/auth.py): without a complete `[auth]` section in
the secrets file this prints what is missing and exits 2 before anything listens. With one, it
serves on that address with `browser.serverAddress` and `browser.serverPort` taken from the
sign-in's redirect_uri, so that Streamlit never asks an outside service for this machine's
address (it does when no address is set), and CORS and XSRF checks know the public name.

The app is served as Streamlit's ASGI app (`st.App`) with the middleware of dashboard/access/guard.py:
in local mode only pages of this machine's own address reach it (no DNS rebinding); files under
/media are served while the session that shows them is open; with sign-in over https every
cookie is Secure and the sign-in cookie lasts as long as a sign-in does. `--check` only checks.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dashboard.access import sessions
from dashboard.access.auth import auth_problem, is_loopback
from dashboard.access.guard import CookieFlags, LiveFilesOnly, LocalOnly, sweep_files

APP = Path(__file__).resolve().parent.parent / "app.py"
EXIT_REFUSED = 2


def read_secrets(files: list[str] | None) -> dict:
    """The secrets Streamlit will read: `files`, or its default places (~/.streamlit and
    ./.streamlit); empty when there are none."""
    from streamlit import config
    from streamlit.runtime.secrets import Secrets

    if files:
        config.set_option("secrets.files", files)
    try:
        return Secrets().to_dict()
    except FileNotFoundError:
        return {}


def server_config(address: str, port: int | None, secrets: dict, files: list[str] | None) -> dict[str, Any]:
    """Streamlit's settings for this deployment (the rest come from .streamlit/config.toml). No
    port: Streamlit's 8501, or the next free one."""
    config: dict[str, Any] = {"server.address": address}
    if port is not None:
        config["server.port"] = port
    if files:
        config["secrets.files"] = files
    redirect = urlparse(str((secrets.get("auth") or {}).get("redirect_uri") or ""))
    if redirect.hostname:
        config["browser.serverAddress"] = redirect.hostname
        config["browser.serverPort"] = redirect.port or (443 if redirect.scheme == "https" else 80)
    return config


def middleware(address: str, secrets: dict) -> list:
    """The guard's middleware for this deployment (dashboard/access/guard.py), outermost first."""
    from starlette.middleware import Middleware
    from streamlit import config

    signed_in = auth_problem(secrets) is None
    stack = [Middleware(LiveFilesOnly)]
    if signed_in:
        secure = urlparse(str(secrets["auth"]["redirect_uri"])).scheme == "https"
        stack.insert(0, Middleware(CookieFlags, secure=secure,
                                   sign_in_seconds=int(sessions.max_hours(secrets) * 3600)))
    else:  # local mode (a non-loopback address without sign-in never gets here)
        stack.insert(0, Middleware(LocalOnly, address=address, port=lambda: int(config.get_option("server.port"))))
    return stack


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboard.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="the port (default 8501, or the next free one)")
    parser.add_argument("--secrets", action="append", help="a secrets.toml to read (default: Streamlit's places)")
    parser.add_argument("--check", action="store_true", help="only check; start nothing")
    args = parser.parse_args(argv)
    secrets = read_secrets(args.secrets)
    problem = auth_problem(secrets)
    if problem and not is_loopback(args.address):
        print(f"Refusing to serve the dashboard on {args.address} without sign-in ({problem}).\n"
              "Anyone who reaches it could upload, train and delete. Set up sign-in in .streamlit/secrets.toml "
              "([auth] and [roles], README 'Security'; in Docker mount it at /app/.streamlit/secrets.toml), "
              "or serve on 127.0.0.1.", file=sys.stderr)
        return EXIT_REFUSED
    if args.check:
        print(f"OK: {'sign-in is set up' if not problem else 'local mode on a loopback address'}.")
        return 0
    import streamlit as st

    st.App(APP, middleware=middleware(args.address, secrets), lifespan=sweep_files).run(
        config=server_config(args.address, args.port, secrets, args.secrets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
