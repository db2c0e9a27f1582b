"""Starting Flower: a run against a SuperLink, and a whole federation on this machine.

`run_federation(run)` is how `application.runner.execute` trains a run whose data are a Flower
federation (`--data flower:HOST:PORT`): it starts the Flower App (`flwr run`) on that SuperLink
with the run's folder in its run config, follows the run's progress in the store while the
ServerApp records it, and stops the Flower run when it is cancelled.

`Loopback` starts a SuperLink and one SuperNode per site on 127.0.0.1, each a process of its own,
and stops every process it started: the demo (`make flower-demo`) and the tests use it.

Every Flower process gets telemetry and the update check off; the SuperLink installs no
dependencies at run time (the SuperNodes do not by default): what runs is what is installed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fedcore.errors import FedcoreError
from fedcore.store import Run, to_json

APP_DIR = Path(__file__).resolve().parent / "app"
REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # flwr, flower-superlink, flower-supernode of this environment
CONNECTION = "fedcore"  # the SuperLink connection's name in the temporary Flower config
QUIET = {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"}

Progress = Callable[[int, int, "dict[str, Any] | None"], None]


def flower_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a Flower process: this environment's tools first on PATH (Flower starts
    its helpers by name), fedcore importable, its own Flower home, telemetry off."""
    python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": python_path,
            "FLWR_HOME": str(home), **QUIET, **extra}


def connection_config(superlink: str) -> str:
    """The flwr CLI's connection to the SuperLink: TLS checked against the CA certificate in
    $FEDCORE_FLOWER_CA_CERT (a SuperLink started with --ssl-ca-certfile / --ssl-certfile /
    --ssl-keyfile), else without TLS (a SuperLink started with --insecure, as `make flower-demo`)."""
    ca = os.environ.get("FEDCORE_FLOWER_CA_CERT")
    security = f"root-certificates = {json.dumps(str(Path(ca).expanduser().resolve()))}" if ca else "insecure = true"
    return (f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
            f'address = {json.dumps(superlink)}\n{security}\n')


def run_federation(run: Run, progress: Progress | None = None) -> dict[str, Any]:
    """Train `run` on the Flower federation its data reference names; returns its summary."""
    spec = run.spec
    superlink = spec.flower.superlink  # a Flower reference, resolved when the run was made
    total = int(spec.rounds)
    with tempfile.TemporaryDirectory(prefix="fedcore-flwr-") as folder:
        home = Path(folder)
        (home / "config.toml").write_text(connection_config(superlink), encoding="utf-8")
        command = [str(BIN / "flwr"), "run", str(APP_DIR), CONNECTION, "--stream",
                   "--run-config", f"run-dir={json.dumps(str(run.path.resolve()))}"]
        with open(run.path / "flower.log", "ab") as log:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       env=flower_env(home), start_new_session=True)
            try:
                _follow(run, process, total, progress)
            except BaseException:  # cancelled (Ctrl-C, SIGTERM) or broken: the Flower run stops too
                _stop_flower_run(run, home)
                _end(process)
                raise
    status = run.raw_status()
    if status.state == "done":
        return to_json(run.summary) if run.summary is not None else {}
    if status.state == "failed":
        raise FedcoreError(status.error or "The Flower run failed.")
    raise FedcoreError(f"The Flower run ended without finishing (flwr exited with {process.returncode}); its "
                       f"output:\n{_tail(run.path / 'flower.log')}")


def _follow(run: Run, process: subprocess.Popen, total: int, progress: Progress | None) -> None:
    """Wait for `flwr run` to end, reporting each round the ServerApp finishes and each it records."""
    seen = (0, 0)
    while True:
        ended = process.poll() is not None
        status = run.raw_status()
        now = (status.round, status.recorded_round)
        if now != seen and progress is not None:
            records = run.rounds() if now[1] != seen[1] else []
            progress(now[0], total, to_json(records[-1]) if records else None)  # as the engine hands it
        seen = now
        if ended:
            return
        time.sleep(0.5)


def _stop_flower_run(run: Run, home: Path) -> None:
    flower_run = run.raw_status().flower_run or _started_run_id(run.path / "flower.log")
    if flower_run:
        subprocess.run([str(BIN / "flwr"), "stop", str(flower_run), CONNECTION], env=flower_env(home),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False)


def _started_run_id(log: Path) -> str | None:
    found = re.search(r"started run (\d+)", log.read_text(encoding="utf-8", errors="replace"))
    return found.group(1) if found else None


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


def _end(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Stop a process and everything it started (its own process group)."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def descendants(pid: int) -> list[int]:
    """Every living process below `pid` (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def node_config(values: Mapping[str, Any]) -> str:
    """--node-config text: key="value" pairs, TOML-quoted."""
    return " ".join(f"{key}={json.dumps(value)}" for key, value in values.items())


class Loopback:
    """A SuperLink and one SuperNode per site on 127.0.0.1, each its own process (group), with
    logs and Flower homes under `folder`; leaving the with-block stops all of them."""

    def __init__(self, sites: Sequence[Mapping[str, Any]], folder: Path, env: Mapping[str, str] | None = None) -> None:
        self.sites = list(sites)
        self.folder = Path(folder)
        self.env = dict(env or {})
        self.started: list[subprocess.Popen] = []
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"

    def __enter__(self) -> Loopback:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout_s: float = 60.0) -> None:
        self._spawn("superlink", [str(BIN / "flower-superlink"), "--insecure", "--disable-runtime-dependency-installation",
                                  "--host", "127.0.0.1", "--port", str(self.port)])
        self._wait_until_up(timeout_s)
        for k, values in enumerate(self.sites):
            self._spawn(f"supernode-{k + 1}", [
                str(BIN / "flower-supernode"), "--insecure", "--superlink", self.address,
                "--host", "127.0.0.1", "--port", str(free_port()), "--node-config", node_config(values),
            ])

    def stop(self) -> None:
        """End every process started here, and every process they started (Flower runs its helpers,
        e.g. flower-superexec, in sessions of their own)."""
        helpers = [pid for process in self.started for pid in descendants(process.pid)]
        for process in reversed(self.started):
            _end(process)
        for pid in helpers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def log(self, name: str) -> str:
        return _tail(self.folder / f"{name}.log", 40)

    def _spawn(self, name: str, command: list[str]) -> None:
        home = self.folder / name
        home.mkdir(parents=True, exist_ok=True)
        with open(self.folder / f"{name}.log", "ab") as log:
            self.started.append(subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=home,
                env=flower_env(home, **self.env), start_new_session=True,
            ))

    def _wait_until_up(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.started[0].poll() is not None:
                raise FedcoreError(f"The SuperLink stopped at start:\n{self.log('superlink')}")
            try:
                with urllib.request.urlopen(f"http://{self.address}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.3)
        raise FedcoreError(f"The SuperLink did not answer within {timeout_s:g} s:\n{self.log('superlink')}")
