"""A batched round's sites split among processes train exactly what one process trains."""

import gc
import os
import signal

import pytest
import torch

from fedcore.execution import processes as site_groups
from fedcore.algorithms.fedavg import FedAvg
from fedcore.engine import Simulation, TrainConfig
from fedcore.errors import SpecError
from tests.helpers import assert_same_history, assert_same_tensors, make_federation
from tests.helpers import simulate as train

# Seven sites of different sizes (2 to 6 steps of 16 rows), so the groups differ in steps too.
SIZES = (40, 90, 60, 110, 75, 50, 100)
PARAMS = {"fedprox": {"mu": 0.5}, "fedhealth2": {"pretrain_epochs": 1}, "adafed": {"weight_rule": "power"}}


def simulate(algorithm: str, processes: int, rounds: int = 3, **config) -> tuple[Simulation, list]:
    settings = {"rounds": rounds, "execution": "batched", "processes": processes, "seed": 4, **config}
    return train(algorithm, PARAMS.get(algorithm), make_federation(rows=SIZES, n_classes=3), **settings)


@pytest.mark.parametrize("algorithm", ["ifedavg", "fedavg", "adafed", "fedprox", "apfl", "fedhealth2", "local"])
def test_sites_split_among_processes_train_what_one_process_trains(algorithm):
    """With dropout on: each site's masks come from its own stream, so the split changes nothing
    but rounding."""
    split, split_history = simulate(algorithm, processes=3)
    single, single_history = simulate(algorithm, processes=1)
    assert split.executor.processes == 3 and single.executor.processes == 1
    assert_same_tensors(split, single, atol=1e-5, rtol=1e-4)
    # every site scored (workers score theirs), every metric
    assert_same_history(split_history, single_history, loss_rel=1e-4, loss_abs=1e-5, metric_abs=1e-4)


def test_split_balances_training_rows_in_contiguous_non_empty_groups():
    assert site_groups.split([100] * 30, 2) == [0, 15, 30]
    assert site_groups.split([100] * 30, 1) == [0, 30]
    assert site_groups.split([1, 1, 100], 3) == [0, 1, 2, 3]
    bounds = site_groups.split([300, 10, 10, 10, 10, 10], 2)
    assert bounds == [0, 1, 6]
    sizes = [232, 202, 228, 212, 202, 217, 206, 181, 188, 194, 211, 214, 219, 216, 219, 245, 246, 243, 241, 237,
             273, 215, 249, 255, 274, 262, 251, 255, 230, 256]
    bounds = site_groups.split(sizes, 2)
    first, second = sum(sizes[: bounds[1]]), sum(sizes[bounds[1]:])
    assert abs(first - second) <= max(sizes)


def test_automatic_count_is_one_process_per_torch_thread_with_enough_sites(monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert site_groups.count(0, 30, on_cpu=True) == 2
    assert site_groups.count(0, 10, on_cpu=True) == 1  # fewer than 8 sites a process
    assert site_groups.count(0, 30, on_cpu=False) == 1
    assert site_groups.count(3, 30, on_cpu=True) == 3
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert site_groups.count(0, 300, on_cpu=True) == 1
    with pytest.raises(SpecError, match="only on the CPU"):
        site_groups.count(2, 30, on_cpu=False)


def test_processes_apply_to_the_batched_path_only():
    with pytest.raises(SpecError, match="applies to the batched and compiled paths"):
        Simulation(make_federation(), FedAvg(), TrainConfig(rounds=1, execution="per-site", processes=2))
    with pytest.raises(SpecError, match="processes cannot be negative"):
        TrainConfig(processes=-1)


class FailsInWorkers(FedAvg):
    parent = os.getpid()

    def start_round(self, sim) -> None:
        if os.getpid() != self.parent:
            raise ValueError("planted failure in a worker")


def test_a_failing_worker_says_why():
    sim = Simulation(make_federation(rows=SIZES), FailsInWorkers(), TrainConfig(rounds=2, processes=2))
    with pytest.raises(RuntimeError, match="planted failure in a worker"):
        sim.step()


def test_a_worker_whose_setup_fails_says_why(monkeypatch):
    def broken(sim, first, last, config):
        raise MemoryError("planted: no room for these sites")

    monkeypatch.setattr(Simulation, "_group", broken)  # the worker is forked with it
    sim = Simulation(make_federation(rows=SIZES), FedAvg(), TrainConfig(rounds=2, processes=2))
    with pytest.raises(RuntimeError, match="(?s)worker for sites .* failed.*Setting up.*no room for these sites"):
        sim.step()


def test_a_killed_worker_is_reported_not_waited_for():
    sim = Simulation(make_federation(rows=SIZES), FedAvg(), TrainConfig(rounds=3, processes=2))
    sim.step()
    worker = sim.executor.workers.processes[0]
    os.kill(worker.pid, signal.SIGKILL)
    worker.join(timeout=5)
    with pytest.raises(RuntimeError, match="stopped \\(exit code -9\\)"):
        sim.step()


def test_workers_end_with_their_simulation():
    sim = Simulation(make_federation(rows=SIZES), FedAvg(), TrainConfig(rounds=2, processes=3))
    sim.step()
    workers = list(sim.executor.workers.processes)
    assert len(workers) == 2 and all(worker.is_alive() for worker in workers)
    del sim
    gc.collect()
    for worker in workers:
        worker.join(timeout=10)
        assert not worker.is_alive() and worker.exitcode == 0
