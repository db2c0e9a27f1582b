"""Background jobs: every run trains in its own subprocess; the queue and all state live on disk.

The queue is the run store itself: a submitted run is written as 'queued', and `pump` starts
queued runs, oldest first, while fewer than `max_jobs` are running. Workers are detached from
the process that started them (their own session), so they survive a browser reload and a
restart of the dashboard server; a worker that dies reads as 'interrupted' with its last state.
When a worker finishes it pumps the queue itself, so queued runs start without any page open.

    python -m application.jobs RUN_ID --store DIR     (the worker; started by `pump`)
"""

from __future__ import annotations

import argparse
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fedcore.errors import Cancelled, FedcoreError, cancel_on_sigterm
from fedcore.store import NAME_LENGTH, Run, RunStore

ACTIVE = ("queued", "running")

_REPO_ROOT = Path(__file__).resolve().parent.parent
_children: list[subprocess.Popen] = []  # workers this process started, reaped on each pump


def max_jobs() -> int:
    """Concurrent workers: $FEDCORE_MAX_JOBS, else one per CPU core."""
    return max(1, int(os.environ.get("FEDCORE_MAX_JOBS") or os.cpu_count() or 1))


def submit(store: RunStore, spec: Mapping[str, Any], name: str | None = None, tags: Sequence[str] = ()) -> Run:
    """Validate a spec, queue it as a new run (with a name and tags, if given) and start it if a
    worker slot is free."""
    from application.runner import resolve_spec

    run = store.create(resolve_spec(spec), name=name, tags=tags)
    pump(store)
    return run


def rerun(store: RunStore, run: Run) -> Run:
    """Queue a new run with exactly the same specification (and tags; a named run's name, marked);
    FedcoreError if it is damaged."""
    from application.runner import SPEC_KEYS

    run.require("spec.json")
    identity = run.identity
    name = f"{identity.name} (re-run)"[:NAME_LENGTH] if identity.name else None
    spec = run.spec  # sound (required above): every key a spec is made from, as stored
    return submit(store, {key: getattr(spec, key) for key in SPEC_KEYS}, name, identity.tags)


def pump(store: RunStore) -> list[str]:
    """Start queued runs while a worker slot is free; returns the ids started.

    A damaged run never stops the queue: one whose status cannot be read is left alone, a
    queued one whose spec cannot be read is marked failed with what is wrong, and a start the
    disk refuses to record leaves the run queued for the next pump."""
    with _queue_lock(store):
        _reap_children()
        active, queued = 0, []
        for run in store.runs():
            stored, status = run.raw_status().state, run.status
            if stored == "running" and status.state == "interrupted":
                # Persist what readers already see, so a reused pid cannot revive it.
                run.mark_finished("interrupted", status.error)
            elif status.state == "running":
                active += 1
            elif stored == "queued":
                queued.append(run)
        started = []
        for run in sorted(queued, key=lambda r: r.id):
            if len(started) >= max_jobs() - active:
                break
            try:
                run.require("spec.json")
            except FedcoreError as error:
                run.mark_finished("failed", f"The run cannot start: {error}")
                continue
            if _start(run, store):
                started.append(run.id)
        return started


def _start(run: Run, store: RunStore) -> bool:
    """Launch a worker for a queued run and record it as running; whether it started."""
    try:
        process = _launch(run, store)
    except OSError as error:
        run.mark_finished("failed", f"The worker process could not start: {error}")
        return False
    try:
        run.update_status(state="running", pid=process.pid, host=socket.gethostname(),
                          heartbeat=time.time(), launched=time.time())
    except OSError:  # unrecorded, the run would start again at the next pump: stop it now
        process.kill()
        process.wait()
        return False
    return True


def cancel(run: Run) -> None:
    """Stop a run: a queued one never starts; a running worker gets SIGTERM and records
    'cancelled' itself, keeping everything it wrote so far."""
    status = run.status
    state = status.state
    if state == "queued":
        run.mark_finished("cancelled", "Cancelled before it started.")
    elif state == "running" and status.pid:
        try:
            os.kill(status.pid, signal.SIGTERM)
        except ProcessLookupError:
            run.mark_finished("interrupted", "The worker had already stopped.")
    # finished runs: nothing to do; a damaged status names no worker to stop


def delete(store: RunStore, run: Run) -> None:
    """Remove a run that is not training (finished, or damaged so that no worker is known)."""
    state = run.status.state
    if state in ACTIVE:
        raise FedcoreError(f"Run {run.id} is still {state}; cancel it before deleting.")
    store.delete(run.id)


def log_tail(run: Run, lines: int = 20) -> str:
    """The end of the worker's output (shown with a failed run)."""
    try:
        text = (run.path / "worker.log").read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _launch(run: Run, store: RunStore) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    env.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    with open(run.path / "worker.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "application.jobs", run.id, "--store", str(store.root.resolve())],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=env, cwd=_REPO_ROOT, start_new_session=True,
        )
    _children.append(process)
    return process


def _reap_children() -> None:
    _children[:] = [p for p in _children if p.poll() is None]


@contextmanager
def _queue_lock(store: RunStore) -> Iterator[None]:
    store.root.mkdir(parents=True, exist_ok=True)
    with open(store.root / ".queue.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _work(run_id: str, store_root: str) -> int:
    """The worker: train one run, then start whatever is queued next."""
    import torch

    from application.runner import execute

    store = RunStore(store_root)
    run = store.get(run_id)
    cancel_on_sigterm()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // max_jobs()))
    code = 0
    try:
        execute(run)
    except (Cancelled, KeyboardInterrupt):
        code = 130
    except Exception as error:  # noqa: BLE001 - already recorded in status.json by execute
        print(f"run failed: {type(error).__name__}: {error}", file=sys.stderr)
        code = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _record_final_status(run)
        pump(store)
    return code


def _record_final_status(run: Run) -> None:
    """`execute` retried a final status the disk refused; if it still could not be written, the
    log says what it was (a reader then sees 'interrupted' and the log's tail)."""
    if not run.flush_status():
        status = run.raw_status()
        print(f"Could not record the final state of run {run.id} (the disk refused every write): "
              f"{status.state}: {status.error}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m application.jobs", description="Run one queued job.")
    parser.add_argument("run_id")
    parser.add_argument("--store", required=True)
    args = parser.parse_args(argv)
    return _work(args.run_id, args.store)


if __name__ == "__main__":
    sys.exit(main())
