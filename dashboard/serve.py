"""Serve the dashboard to other machines, or refuse: the Docker image's command.

    python -m dashboard.serve --address 0.0.0.0 [--port 8501] [--secrets FILE]

A non-loopback address needs sign-in (dashboard/auth.py): without a complete `[auth]` section in
the secrets file this prints what is missing and exits 2 before anything listens. With one, it
starts Streamlit on that address with `browser.serverAddress` and `browser.serverPort` taken from
the sign-in's redirect_uri, so that Streamlit never asks an outside service for this machine's
address (it does when no address is set), and CORS and XSRF checks know the public name.
`--check` only checks. `make run` (Streamlit on 127.0.0.1, local mode) does not need this.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from urllib.parse import urlparse

from dashboard.auth import auth_problem, is_loopback

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


def streamlit_command(address: str, port: int, secrets: dict, files: list[str] | None) -> list[str]:
    command = [sys.executable, "-m", "streamlit", "run", str(APP), "--server.address", address,
               "--server.port", str(port)]
    for file in files or []:
        command += ["--secrets.files", file]
    redirect = urlparse(str((secrets.get("auth") or {}).get("redirect_uri") or ""))
    if redirect.hostname:
        public_port = redirect.port or (443 if redirect.scheme == "https" else 80)
        command += ["--browser.serverAddress", redirect.hostname, "--browser.serverPort", str(public_port)]
    return command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboard.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8501)
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
    command = streamlit_command(args.address, args.port, secrets, args.secrets)
    os.execv(command[0], command)
    return 0  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main())
