"""The worker's SIGTERM rule (`application.jobs._Worker`), without processes: a cancel stops the run
it was asked for and no other; any other SIGTERM stops the run being trained, or between two runs
the worker, which gives a claimed run back."""

import time

import pytest

from application import jobs
from application.runner import resolve_spec
from fedcore.errors import Cancelled
from fedcore.store import RunStore


@pytest.fixture
def runs(tmp_path):
    store = RunStore(tmp_path / "runs")
    done, current = (store.create(resolve_spec({"algorithm": "fedavg", "config": {"rounds": 2}})) for _ in range(2))
    done.mark_finished("done")
    current.update_status(state="running")
    worker = jobs._Worker(done)
    worker.finished(done)
    worker.current = current
    return worker, done, current


def test_a_cancel_of_the_run_being_trained_stops_it(runs):
    worker, _, current = runs
    worker.training = True
    current.update_status(cancel_requested=time.time())
    with pytest.raises(Cancelled):
        worker.on_sigterm(15, None)


def test_a_cancel_of_a_finished_run_is_ignored_even_while_another_trains(runs):
    worker, done, _ = runs
    worker.training = True
    done.update_status(cancel_requested=time.time())
    assert worker.on_sigterm(15, None) is None and not worker.stop


def test_a_plain_sigterm_stops_the_training_run_and_between_runs_the_worker(runs):
    worker, _, current = runs
    worker.training = True
    with pytest.raises(Cancelled):
        worker.on_sigterm(15, None)
    worker.training = False
    worker.on_sigterm(15, None)
    assert worker.stop
    worker.give_back(current)  # claimed, never trained: queued again for another worker
    assert current.raw_status().state == "queued"


def test_a_claimed_run_cancelled_before_it_trained_ends_cancelled(runs):
    worker, _, current = runs
    current.update_status(cancel_requested=time.time())
    worker.on_sigterm(15, None)
    assert worker.stop
    worker.give_back(current)
    assert current.status.state == "cancelled" and "before it started" in current.status.error
