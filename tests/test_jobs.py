"""Background jobs: real worker subprocesses, a queue with a limit, cancel, crash recovery."""

import os
import signal
import time

import pytest

from application import jobs
from fedcore.errors import FedcoreError
from fedcore.store import RunStore

# `make test-processes` (CI runs it): real worker and writer processes, about 110 CPU-seconds,
# apart from `make test` for its 10 minutes on 2 cores
pytestmark = pytest.mark.processes

QUICK = {"algorithm": "fedavg", "config": {"rounds": 2}}
LONG = {"algorithm": "ifedavg", "config": {"rounds": 2000, "eval_every": 1}}


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDCORE_MAX_JOBS", "1")
    store = RunStore(tmp_path / "runs")
    yield store
    for run in store.runs():  # never leave workers behind
        jobs.cancel(run)


def wait_for(predicate, timeout=90.0, interval=0.2):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError("timed out")


def test_a_submitted_run_trains_in_its_own_detached_process(store):
    run = jobs.submit(store, QUICK)
    pid = run.raw_status().pid
    assert pid != os.getpid() and os.getsid(pid) != os.getsid(0)  # survives the server's session
    wait_for(lambda: run.status.state == "done")
    assert len(run.rounds()) == 2 and run.summary.round == 2


def test_queue_respects_the_limit_and_starts_the_next_run_by_itself(store):
    first = jobs.submit(store, QUICK)
    second = jobs.submit(store, QUICK)
    assert first.raw_status().state == "running"
    assert second.raw_status().state == "queued"
    # Nobody pumps from here on: the finishing worker starts the queued run.
    wait_for(lambda: second.status.state == "done", timeout=120)
    assert first.status.state == "done"


def test_cancel_a_running_and_a_queued_run(store):
    running = jobs.submit(store, LONG)
    queued = jobs.submit(store, QUICK)
    wait_for(lambda: len(running.rounds()) >= 2)
    jobs.cancel(queued)
    assert queued.status.state == "cancelled"
    jobs.cancel(running)
    wait_for(lambda: running.status.state == "cancelled")
    assert "Stopped by the user" in running.status.error
    assert len(running.rounds()) >= 2


def test_a_killed_worker_is_shown_interrupted_and_the_queue_moves_on(store):
    doomed = jobs.submit(store, LONG)
    waiting = jobs.submit(store, QUICK)
    wait_for(lambda: len(doomed.rounds()) >= 1)
    os.kill(doomed.raw_status().pid, signal.SIGKILL)
    wait_for(lambda: doomed.status.state == "interrupted")
    jobs.pump(store)  # e.g. the next page view
    assert doomed.raw_status().state == "interrupted"  # persisted, not only derived
    wait_for(lambda: waiting.status.state == "done", timeout=120)


def test_rerun_repeats_the_spec_and_delete_refuses_active_runs(store):
    run = jobs.submit(store, {"algorithm": "adafed", "params": {"weight_rule": "power"}, "config": {"rounds": 2}})
    with pytest.raises(FedcoreError, match="cancel it before deleting"):
        jobs.delete(store, run)
    wait_for(lambda: run.status.state == "done")
    again = jobs.rerun(store, run)
    assert again.id != run.id
    asked = [(r.spec.algorithm, r.spec.data, r.spec.params, r.spec.config) for r in (again, run)]
    assert asked[0] == asked[1]
    wait_for(lambda: again.status.state == "done")
    jobs.delete(store, run)
    assert [r.id for r in store.runs()] == [again.id]


def test_a_failing_run_keeps_its_error_and_log(store):
    run = jobs.submit(store, {"algorithm": "fedhealth2", "params": {"variant": "f", "warmup_rounds": 5},
                              "config": {"rounds": 3}})
    wait_for(lambda: run.status.state == "failed")
    assert "warmup_rounds" in run.status.error
    assert "warmup_rounds" in jobs.log_tail(run)


def test_a_worker_trains_the_queued_runs_one_after_another_and_each_as_if_alone(store):
    first = jobs.submit(store, QUICK)
    second = jobs.submit(store, QUICK)  # the same spec: trained after another, it must come out the same
    wait_for(lambda: second.status.state == "done", timeout=120)
    assert second.raw_status().pid == first.raw_status().pid  # claimed by the first run's worker
    assert second.raw_status().started_at >= first.raw_status().started_at
    assert [r.mean for r in second.rounds()] == [r.mean for r in first.rounds()]
    assert second.summary.sites == first.summary.sites
    assert (second.path / "worker.log").exists()


def test_a_cancel_that_arrives_after_its_run_finished_does_not_stop_the_next_one(store):
    finished = jobs.submit(store, QUICK)
    training = jobs.submit(store, LONG)
    wait_for(lambda: len(training.rounds()) >= 2)
    worker = training.raw_status().pid
    assert worker == finished.raw_status().pid and finished.status.state == "done"
    # what `cancel(finished)` does when it read 'running' a moment before the run ended
    finished.update_status(cancel_requested=time.time())
    os.kill(worker, signal.SIGTERM)
    trained = len(training.rounds())
    wait_for(lambda: len(training.rounds()) >= trained + 3)
    assert training.status.state == "running" and finished.status.state == "done"
    jobs.cancel(training)
    wait_for(lambda: training.status.state == "cancelled")
    assert "Stopped by the user" in training.status.error
