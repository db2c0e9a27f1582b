"""What an executor is: how one round of every site's local training runs, and how the sites'
models are run forward for scores. The engine holds one executor and never asks which it is.

An executor computes the local update the per-site path defines (`fedcore.training`: the
algorithm's `loss` with the site's optimiser), and an algorithm's training hooks decide which
executors may run it. Each executor names the hooks it computes (`runs`), and those it computes
only where the algorithm marks its definition `batchable` (`runs_batchable`: a loss written for
one site that can run for all sites at once under torch.func.vmap); an algorithm that overrides
any other training hook runs elsewhere (or, when that executor was asked for, is refused with the
reason) — never with a silently different loss.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

import torch
from torch import nn

from fedcore.config import TrainConfig
from fedcore.federation import Federation
from fedcore.metrics import pad_sites, site_metrics

if TYPE_CHECKING:
    from fedcore.algorithms.base import Algorithm

Sets = Sequence[tuple[torch.Tensor, torch.Tensor]]


class Trainee(Protocol):
    """What an executor reads of the federation it trains (the in-process Simulation)."""

    algorithm: Algorithm
    config: TrainConfig
    device: torch.device
    round: int
    site_names: list[str]
    train_sizes: list[int]
    federation: Federation
    stacked: dict[str, torch.Tensor]
    models: list[nn.Module]
    initial: nn.Module
    train_sets: list[tuple[torch.Tensor, torch.Tensor]]
    test_sets: list[tuple[torch.Tensor, torch.Tensor]]

    def adopt(self, stacked: dict[str, torch.Tensor]) -> None: ...

    def loss_weights(self) -> torch.Tensor | None: ...

    def local_seed(self, site: int) -> int: ...

    def site_label(self, site: int) -> str: ...

    def model_for_site(self, site: int) -> nn.Module: ...

    def predict(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor: ...


def unsupported_hooks(algorithm: Algorithm, runs: frozenset[str], runs_batchable: frozenset[str] = frozenset()
                      ) -> list[str]:
    """The training hooks `algorithm` overrides that an executor running `runs`, and
    `runs_batchable` where the algorithm's definition is marked batchable, would not compute."""
    return sorted(hook for hook in algorithm.overridden_training_hooks()
                  if hook not in runs and not (hook in runs_batchable and algorithm.is_batchable(hook)))


class Executor(ABC):
    """Every site's local update of a round, and the sites' models run forward."""

    name: ClassVar[str]
    # The training hooks this executor computes as the per-site path defines them.
    runs: ClassVar[frozenset[str]]
    # ... and those it computes where the algorithm marks its definition `batchable`.
    runs_batchable: ClassVar[frozenset[str]] = frozenset()
    processes = 1

    def __init__(self, sim: Trainee) -> None:
        self.sim = sim

    @classmethod
    def why_not(cls, sim: Trainee) -> str:
        """Why this executor cannot train `sim` ('' when it can)."""
        hooks = unsupported_hooks(sim.algorithm, cls.runs, cls.runs_batchable)
        if hooks:
            unmarked = [hook for hook in hooks if hook in cls.runs_batchable]
            return (f"{sim.algorithm.title} overrides {', '.join(hooks)}, which the {cls.name} path does not compute"
                    + (f" (it computes {', '.join(unmarked)} where marked @batchable: see fedcore.algorithms.base)"
                       if unmarked else ""))
        return ""

    @property
    def description(self) -> str:
        """How rounds are trained, for a person: the run page shows it."""
        return self.name

    @abstractmethod
    def train_round(self, lr: float) -> list[float]:
        """Every site's local update of the round (the algorithm's start of the round has run);
        each trained model's mean loss per batch."""

    @abstractmethod
    def log_probs(self, sets: Sets) -> torch.Tensor:
        """The first len(sets) models' log-probabilities on their own rows, padded to one length
        [sites, rows, classes]."""

    @abstractmethod
    def predict_each(self, x: torch.Tensor) -> torch.Tensor:
        """Every site's model on the same rows x: log-probabilities [sites, rows, classes]."""

    def evaluate(self, sets: Sets | None = None) -> dict[str, dict[str, float]]:
        """Every site's model scored on its own hold-out, or on `sets` (one (x, y) per site)."""
        sets = self.sim.test_sets if sets is None else sets
        y, valid = pad_sites([y for _, y in sets])
        return dict(zip(self.sim.site_names, site_metrics(y, self.log_probs(sets), valid)))

    def scope(self) -> contextlib.AbstractContextManager:
        """Held around a whole round and around scoring (e.g. the thread count worker processes need)."""
        return contextlib.nullcontext()
