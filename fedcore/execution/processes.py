"""An executor that splits a batched round's sites among processes, one torch thread each; it
wraps the batched or compiled executor, which trains this process's share.

A round's local training is a long chain of small steps; on a CPU a good share of each step is
per-operation overhead that one Python process runs on one core, whatever its number of torch
threads. Splitting the sites into contiguous groups and training each group in its own process
puts every core to work on the whole step, not just on its matrix products.

The simulation keeps every site's tensors in one block of anonymous shared memory. The first group
trains in the simulation's own process; every other group trains in a worker forked from it,
which sees those tensors as its own and trains its sites' rows of them in place, as the simulation
of a federation of just its sites (with its own momentum), which the engine builds for it. Like a Flower site, a worker receives
with each round its number, the learning rate and the class weights the server chose, and runs
the algorithm's start of the round itself. The server's part (aggregation, the algorithm's server
hooks) stays in the simulation's process, which asks every worker to run its own sites' models
where the server needs all of them (the hold-out evaluation, AdaFed's scoring). Each site's
batches and dropout masks come from its own seeded streams, so the split changes nothing but
floating-point rounding.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import multiprocessing
import os
import sys
import traceback
import weakref
from collections.abc import Callable, Iterator
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any, Protocol

import torch

from fedcore.algorithms.base import AtSite
from fedcore.config import TrainConfig
from fedcore.errors import SpecError
from fedcore.execution.base import Executor, Sets, Trainee
from fedcore.execution.batched import Batched


class Group(Protocol):
    """The simulation of one group of sites, as a worker runs it (built by the engine)."""

    algorithm: Any
    round: int
    executor: Executor

    def evaluate(self, sets: Sets | None = None) -> dict[str, dict[str, float]]: ...

    def predict_each(self, x: torch.Tensor) -> torch.Tensor: ...


# (first site, last site + 1, its engine settings) -> the simulation of those sites on their rows of
# the stacked tensors, as the engine builds it
GroupFactory = Callable[[int, int, TrainConfig], Group]

SITES_PER_PROCESS = 8  # below this a worker's share is too small to repay its messages
_ALIGN = 64  # bytes: each tensor in the shared block starts on a cache line


def can_fork() -> bool:
    """Workers are forked (they inherit the sites' data instead of receiving it), so this is
    Linux only, and not from a daemonic process (which may not have children)."""
    return sys.platform.startswith("linux") and not multiprocessing.current_process().daemon


def count(setting: int, n_sites: int, on_cpu: bool) -> int:
    """How many processes train a batched round: `setting` when given (0 = automatic: one per
    torch thread, keeping at least SITES_PER_PROCESS sites in each)."""
    if setting > 1 and not (on_cpu and can_fork()):
        where = "on the CPU" if can_fork() else "on Linux (worker processes are forked)"
        raise SpecError(f"processes={setting} splits sites among processes only {where}; use processes 1 or 0 (auto).")
    if setting:
        return max(1, min(setting, n_sites))
    if not (on_cpu and can_fork()):
        return 1
    return max(1, min(torch.get_num_threads(), n_sites // SITES_PER_PROCESS))


def split(sizes: list[int], groups: int) -> list[int]:
    """Bounds [0, ..., len(sizes)] of `groups` contiguous, non-empty groups of sites with about
    equal training rows each (a group's work grows with its rows)."""
    cumulative, bounds = list(itertools.accumulate(sizes)), [0]
    for group in range(1, groups):
        target = cumulative[-1] * group / groups
        candidates = range(bounds[-1] + 1, len(sizes) - (groups - group) + 1)
        bounds.append(min(candidates, key=lambda bound: abs(cumulative[bound - 1] - target)))
    return [*bounds, len(sizes)]


def shared(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Copies of these CPU tensors in one block of anonymous shared memory, which processes forked
    later see, and write, as their own (unlike /dev/shm, its size is not capped by a mount)."""
    offsets, end = [], 0
    for value in tensors.values():
        offsets.append(end)
        end += -(-value.numel() * value.element_size() // _ALIGN) * _ALIGN
    block = mmap.mmap(-1, max(end, _ALIGN))
    copies = {}
    for (name, value), offset in zip(tensors.items(), offsets):
        copy = torch.frombuffer(block, dtype=value.dtype, count=value.numel(), offset=offset).view(value.shape)
        copies[name] = copy.copy_(value)
    return copies


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class Workers:
    """The processes training every group but the first; `bounds` as `split` gives them."""

    def __init__(self, sim: Trainee, bounds: list[int], make_group: GroupFactory, execution: str) -> None:
        self.bounds = bounds
        context = multiprocessing.get_context("fork")
        self.connections: list[Connection] = []
        self.pending = False  # replies not collected yet (this process stopped waiting for them)
        self.processes: list[multiprocessing.process.BaseProcess] = []
        for first, last in itertools.pairwise(bounds[1:]):
            ours, theirs = context.Pipe()
            names = sim.site_names[first:last]
            process = context.Process(target=_serve, args=(make_group, sim.config, first, last, execution, theirs,
                                                           list(self.connections)),
                                      daemon=True, name=f"fedcore worker for sites {names[0]} to {names[-1]}")
            process.start()
            theirs.close()
            self.connections.append(ours)
            self.processes.append(process)
        # Workers end when the simulation is collected, or with this process at the latest.
        weakref.finalize(sim, _close, self.connections, self.processes, os.getpid())

    def start_round(self, round_: int, lr: float, class_weights: torch.Tensor | None) -> None:
        """Every worker trains its sites for this round (while this process trains the first group)."""
        # numpy arrays, not tensors: pickled by value (torch would pass tensors through /dev/shm)
        self._send([("train", round_, lr, None if class_weights is None else class_weights[first:last].cpu().numpy())
                    for first, last in itertools.pairwise(self.bounds[1:])])

    def finish_round(self) -> list[float]:
        """The workers' sites' mean training losses, in site order, once they are done."""
        return [loss for losses in self._collect() for loss in losses]

    def start_evaluation(self) -> None:
        """Every worker scores its sites' models on their own hold-outs."""
        self._send([("evaluate",)] * len(self.connections))

    def finish_evaluation(self) -> dict[str, dict[str, float]]:
        """The workers' sites' metrics, by site name, in site order."""
        return {site: metrics for scores in self._collect() for site, metrics in scores.items()}

    def start_prediction(self, x: torch.Tensor) -> None:
        """Every worker runs its sites' models on the rows x (e.g. AdaFed's server test set)."""
        self._send([("predict", x.cpu().numpy())] * len(self.connections))

    def finish_prediction(self) -> list[torch.Tensor]:
        """The workers' log-probabilities [their sites, rows, classes], in site order."""
        return [torch.from_numpy(log_prob) for log_prob in self._collect()]

    def _send(self, messages: list[tuple]) -> None:
        if self.pending:  # the replies to work this process gave up waiting for: not this work's
            self._collect()
        self.pending = True
        for connection, message in zip(self.connections, messages):
            self._call(connection, connection.send, message)

    def _collect(self) -> list:
        """Every worker's reply (all read before any failure is raised, so none is left behind)."""
        self.pending = False
        replies = [self._call(connection, connection.recv) for connection in self.connections]
        for process, (outcome, value) in zip(self.processes, replies):
            if outcome == "failed":
                raise RuntimeError(f"The {process.name} failed:\n{value}")
        return [value for _, value in replies]

    def _call(self, connection: Connection, action: Callable[..., Any], *args: Any) -> Any:
        try:
            return action(*args)
        except (EOFError, OSError) as error:
            process = self.processes[self.connections.index(connection)]
            process.join(timeout=1)
            raise RuntimeError(f"The {process.name} stopped (exit code {process.exitcode}); was it killed, "
                               "or out of memory?") from error


def _close(connections: list[Connection], processes: list, owner: int) -> None:
    if os.getpid() != owner:
        # a worker of a later simulation, forked while this one was still uncollected, holds a copy
        # of it: these workers are not its children, and their pipes are the owner's to close
        return
    for connection in connections:
        with contextlib.suppress(OSError):
            connection.send(None)
            connection.close()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.terminate()


def _serve(make_group: GroupFactory, sim_config: TrainConfig, first: int, last: int, execution: str,
           connection: Connection, inherited: list[Connection]) -> None:
    """A worker: the simulation of sites first..last-1 on their rows of the shared tensors, training
    one round per message until the simulation's process closes the pipe or sends None."""
    for other in inherited:  # other workers' pipes: holding them open would hide that process's exit
        other.close()
    torch.set_num_threads(1)
    try:
        try:
            config = replace(sim_config, processes=1, execution=execution)  # one process, the same executor
            group, failure = make_group(first, last, config), ""
        except Exception:  # noqa: BLE001 - reported to the simulation's process at its first message
            group, failure = None, traceback.format_exc()
        algorithm = group.algorithm if group else None
        while (message := connection.recv()) is not None:
            try:
                if group is None:
                    raise RuntimeError(f"Setting up this worker's sites failed:\n{failure}")
                if message[0] == "evaluate":
                    connection.send(("done", group.evaluate()))
                    continue
                if message[0] == "predict":
                    connection.send(("done", group.predict_each(torch.from_numpy(message[1])).numpy()))
                    continue
                _, round_, lr, class_weights = message
                group.algorithm = AtSite(algorithm, None if class_weights is None else torch.from_numpy(class_weights))
                group.round = round_
                group.algorithm.start_round(group)
                connection.send(("done", group.executor.train_round(lr)))
            except Exception:  # noqa: BLE001 - the simulation's process raises it with this traceback
                connection.send(("failed", traceback.format_exc()))
    except (EOFError, KeyboardInterrupt):  # the simulation's process is gone, or Ctrl-C reached us too
        pass


class Processes(Executor):
    """The first group of sites trains in this process with `kind` (batched or compiled), every
    other group in a worker forked at round 1. Results equal one process's up to rounding."""

    def __init__(self, sim: Trainee, kind: type[Batched], groups: int, make_group: GroupFactory) -> None:
        super().__init__(sim)
        self.bounds = split(sim.train_sizes, groups)
        sim.adopt(shared(sim.stacked))  # before the inner executor takes its views of the tensors
        self.inner = kind(sim, first=self.bounds[1])
        self.name, self.runs = kind.name, kind.runs
        self.processes = groups
        self.make_group = make_group
        self.workers: Workers | None = None  # started at round 1

    @property
    def description(self) -> str:
        return f"{self.inner.description}, split among {self.processes} processes"

    def scope(self) -> contextlib.AbstractContextManager:
        """This process too works on one torch thread: a second thread, idle between its parallel
        regions, would spin on a core a worker needs."""
        return torch_threads(1)

    def train_round(self, lr: float) -> list[float]:
        if self.workers is None:
            self.workers = Workers(self.sim, self.bounds, self.make_group, self.inner.name)
        self.workers.start_round(self.sim.round, lr, self.sim.algorithm.class_weights(self.sim))
        return self.inner.train_round(lr) + self.workers.finish_round()

    def log_probs(self, sets: Sets) -> torch.Tensor:
        return self.inner.log_probs(sets)

    def evaluate(self, sets: Sets | None = None) -> dict[str, dict[str, float]]:
        """With workers, each scores its own sites' hold-outs."""
        if sets is not None or self.workers is None:
            return self.inner.evaluate(sets)
        self.workers.start_evaluation()
        first = self.bounds[1]
        return {**self.inner.evaluate(self.sim.test_sets[:first]), **self.workers.finish_evaluation()}

    @torch.no_grad()
    def predict_each(self, x: torch.Tensor) -> torch.Tensor:
        """With workers, each runs its own sites' models."""
        if self.workers is None:
            return self.inner.predict_each(x)
        self.workers.start_prediction(x)
        return torch.cat([self.inner.predict_first(self.bounds[1], x), *self.workers.finish_prediction()])
