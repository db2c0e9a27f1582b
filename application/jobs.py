"""Background jobs: runs train in worker subprocesses; the queue and all state live on disk.

The queue is the run store itself: a submitted run is written as 'queued', and `pump` starts
queued runs, oldest first, while fewer than `max_jobs` are running. Workers are detached from
the process that started them (their own session), so they survive a browser reload and a
restart of the dashboard server; a worker that dies reads as 'interrupted' with its last state.
When a worker finishes a run it claims the next queued one and trains it in the same process
(imports and the data already read are not paid again), and when none is left it pumps the queue
itself, so queued runs start without any page open.

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

from fedcore.errors import Cancelled, FedcoreError
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
    return _fill(store, claim=False)[1]


def _fill(store: RunStore, claim: bool) -> tuple[Run | None, list[str]]:
    """`pump`'s work; with `claim`, the first queued run that can start is this process's own
    (recorded as running with its pid, for the worker to train next) before workers are started
    for the rest of the free slots. Returns the claimed run (or None) and the ids started."""
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
        claimed, started = None, []
        for run in sorted(queued, key=lambda r: r.id):
            if (claimed is not None) + len(started) >= max_jobs() - active:
                break
            try:
                run.require("spec.json")
            except FedcoreError as error:
                run.mark_finished("failed", f"The run cannot start: {error}")
                continue
            if claim and claimed is None:
                if _record_start(run, os.getpid()):
                    claimed = run
            elif _start(run, store):
                started.append(run.id)
        return claimed, started


def _start(run: Run, store: RunStore) -> bool:
    """Launch a worker for a queued run and record it as running; whether it started."""
    try:
        process = _launch(run, store)
    except OSError as error:
        run.mark_finished("failed", f"The worker process could not start: {error}")
        return False
    if _record_start(run, process.pid):
        return True
    process.kill()  # unrecorded, the run would start again at the next pump: stop it now
    process.wait()
    return False


def _record_start(run: Run, pid: int) -> bool:
    """Record a queued run as running in process `pid`; whether the disk took it."""
    try:
        run.update_status(state="running", pid=pid, host=socket.gethostname(), heartbeat=time.time(),
                          launched=time.time())
    except OSError:
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
            # which run the signal is for: a worker trains one run after another, and this one may
            # have finished (the worker moving on) between reading its status and the signal
            run.update_status(cancel_requested=time.time())
        except OSError:
            pass  # unrecorded, the signal still stops the worker's run (`_Worker.on_sigterm`)
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
    """The worker: train its run, then the queued runs it can claim, one after another, in this
    process (a fresh process for each run paid 5-6 s of imports and data loading: HAR's); when
    none is left, or a SIGTERM came between two runs, start whatever is queued for the free slots
    and stop. Returns the last run's exit code."""
    import torch

    from application.runner import execute

    store = RunStore(store_root)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // max_jobs()))
    worker = _Worker(store.get(run_id))
    signal.signal(signal.SIGTERM, worker.on_sigterm)
    code = 0
    try:
        while worker.current is not None and not worker.stop:
            run = worker.current
            try:
                worker.training = True
                execute(run)
                code = 0
            except (Cancelled, KeyboardInterrupt):
                code = 130
            except Exception as error:  # noqa: BLE001 - already recorded in status.json by execute
                print(f"run failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
                code = 1
            finally:
                worker.training = False
            if run.raw_status().state == "running":  # stopped before `execute` recorded anything
                run.mark_finished("cancelled", "Stopped before it started.")
            worker.finished(run)
            if not _record_final_status(run) or worker.stop:
                break  # a status still 'running' in this process reads stopped once the worker is
            worker.current = _fill(store, claim=True)[0]
            if worker.current is not None:
                _log_to(worker.current)
        if worker.current is not None:  # claimed, then a SIGTERM before it trained
            worker.give_back(worker.current)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        pump(store)
    return code


class _Worker:
    """The run a worker trains now and those it finished, for its SIGTERM handler. A cancel
    (`cancel` records `cancel_requested` before signalling) stops the run it was asked for and no
    other: one that arrives after its run finished is ignored. Any other SIGTERM (`kill`) stops
    the run being trained, or, between two runs, the worker."""

    def __init__(self, run: Run) -> None:
        self.current: Run | None = run
        self.training = False
        self.stop = False
        self._finished: list[Run] = []

    def finished(self, run: Run) -> None:
        self.current = None
        self._finished.append(run)

    def on_sigterm(self, signum: int, frame: object) -> None:
        if not _cancel_requested(self.current) and any(map(_cancel_requested, self._finished)):
            return  # a cancel of a run this worker has finished, too late for it and not for this one
        if self.training:
            raise Cancelled("terminated")
        self.stop = True

    def give_back(self, run: Run) -> None:
        """A claimed run this worker will not train: cancelled if that was asked, else queued again."""
        if _cancel_requested(run):
            run.mark_finished("cancelled", "Cancelled before it started.")
        else:
            try:
                run.update_status(state="queued")
            except OSError:
                pass  # it reads interrupted once this worker has stopped


def _cancel_requested(run: Run | None) -> bool:
    return run is not None and run.raw_status().cancel_requested is not None


def _log_to(run: Run) -> None:
    """Send this process's output to `run`'s worker.log (where `_launch` sends a new worker's)."""
    sys.stdout.flush()
    sys.stderr.flush()
    with open(run.path / "worker.log", "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)


def _record_final_status(run: Run) -> bool:
    """`execute` retried a final status the disk refused; if it still could not be written, the
    log says what it was (a reader then sees 'interrupted' and the log's tail, once this worker
    has stopped). Whether it was written."""
    if run.flush_status():
        return True
    status = run.raw_status()
    print(f"Could not record the final state of run {run.id} (the disk refused every write): "
          f"{status.state}: {status.error}", file=sys.stderr, flush=True)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m application.jobs", description="Run one queued job.")
    parser.add_argument("run_id")
    parser.add_argument("--store", required=True)
    args = parser.parse_args(argv)
    return _work(args.run_id, args.store)


if __name__ == "__main__":
    sys.exit(main())
