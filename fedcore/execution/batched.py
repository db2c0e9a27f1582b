"""All sites of a round as one computation in torch (`fedcore.execution.stacked`): the MLP family.

Each step takes every site's next mini-batch (the per-site path's batch order), one hand-written
forward and backward pass for all of them, and SGD with momentum on the stacked parameters. Where
the loss is the plain class-weighted NLL its gradient is written in closed form; an algorithm with
a penalty, or a loss of its own stated for stacked sites (`batched_loss`), goes through autograd.
"""

from __future__ import annotations

import torch

from fedcore.algorithms.base import Algorithm
from fedcore.execution import stacked
from fedcore.execution.base import Executor, Sets, Trainee
from fedcore.execution.per_site import predict_models
from fedcore.metrics import pad_sites
from fedcore.seeding import derive_seed
from fedcore.training import batch_orders


class Batched(Executor):
    name = "batched"
    runs = frozenset({"penalty", "class_weights", "batched_loss", "batched_template", "prediction_state"})

    def __init__(self, sim: Trainee, first: int | None = None) -> None:
        """Trains the first `first` sites (all by default; with worker processes, this process's share)."""
        super().__init__(sim)
        self.first = len(sim.models) if first is None else first
        self.template = sim.algorithm.batched_template(sim.initial)
        own = self.own_tensors(self.first)
        trainable = {n: own[n] for n, p in sim.initial.named_parameters() if p.requires_grad}
        self.optimizer = stacked.SiteSGD(trainable, sim.config.momentum, sim.config.weight_decay)
        self.padded_train = tuple(pad_sites(part)[0] for part in zip(*sim.train_sets))
        # One stream per site for the whole run, named after the site like its other streams.
        self.dropout = stacked.DropoutMasks(sim.device, [
            derive_seed(sim.config.seed, sim.site_label(site), "batched-dropout") for site in range(len(sim.models))
        ])
        self._padded_test_x: torch.Tensor | None = None

    @classmethod
    def why_not(cls, sim: Trainee) -> str:
        if not stacked.supports(sim.algorithm.batched_template(sim.initial)):
            return f"{sim.algorithm.title}'s model is not the MLP the {cls.name} path computes"
        return super().why_not(sim)

    @property
    def description(self) -> str:
        return "all sites batched (torch)"

    def own_tensors(self, n: int) -> dict[str, torch.Tensor]:
        """The first n sites' rows of every stacked tensor (views)."""
        stacked_ = self.sim.stacked
        return stacked_ if n == len(self.sim.models) else {name: value[:n] for name, value in stacked_.items()}

    def orders(self) -> list[list[torch.Tensor]]:
        """This round's batch order of each of this executor's sites (as the per-site path's)."""
        sim = self.sim
        return [batch_orders(len(y), sim.config.local_epochs, sim.local_seed(site))
                for site, (_, y) in enumerate(sim.train_sets[: self.first])]

    def own_data(self) -> tuple[torch.Tensor, torch.Tensor]:
        return tuple(part[: self.first] for part in self.padded_train)

    def own_loss_weights(self) -> torch.Tensor | None:
        weights = self.sim.loss_weights()
        return None if weights is None else weights[: self.first]

    def train_round(self, lr: float) -> list[float]:
        losses = stacked.train_round(self.template, self.own_tensors(self.first), self.optimizer, self.own_data(),
                                     self.orders(), self._step, self.sim.config.batch_size, lr)
        return losses.tolist()

    def _step(self, state, x, y, valid, sites) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """One batched step of the sites in it: their losses and their trainable tensors' gradients."""
        sim, algorithm = self.sim, self.sim.algorithm
        listed, names = None if sites is None else sites.tolist(), list(self.optimizer.parameters)
        weights = sim.loss_weights()
        weights = weights[sites] if weights is not None and sites is not None else weights
        if plain_nll(algorithm):
            return stacked.nll_step(self.template, state, x, y, valid, weights, sim.config.loss_reduction,
                                    self.dropout, listed, names)
        params = {name: state[name].detach().requires_grad_(True) for name in names}
        state = {**state, **params}

        def run(tensors: dict[str, torch.Tensor]) -> torch.Tensor:
            return stacked.forward(self.template, tensors, x, valid, train=True, dropout=self.dropout, sites=listed)

        losses = algorithm.batched_loss(sim, state, run, y, valid, sites, params)
        return losses.detach(), list(torch.autograd.grad(losses.sum(), list(params.values())))

    def log_probs(self, sets: Sets) -> torch.Tensor:
        if self.sim.algorithm.pooled:  # one model for every site's rows
            return predict_models(self.sim, sets)
        y, valid = pad_sites([y for _, y in sets])
        tests = self.sim.test_sets
        if len(sets) <= len(tests) and all(a is b for a, b in zip(sets, tests)):  # hold-outs: padded once
            if self._padded_test_x is None:
                self._padded_test_x = pad_sites([x for x, _ in tests])[0]
            x = self._padded_test_x[: len(sets), : valid.shape[1]]
        else:
            x = pad_sites([x for x, _ in sets])[0]
        return self.forward(len(sets), x, valid)

    @torch.no_grad()
    def predict_each(self, x: torch.Tensor) -> torch.Tensor:
        return self.predict_first(len(self.sim.models), x)

    def predict_first(self, n: int, x: torch.Tensor) -> torch.Tensor:
        """The first n sites' models on the same rows x."""
        return self.forward(n, x.expand(n, *x.shape), torch.ones(n, len(x), dtype=torch.bool, device=x.device))

    @torch.no_grad()
    def forward(self, n: int, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """The first n sites' log-probabilities on their rows x [n, rows, D] (those `valid`), in
        evaluation mode."""
        return stacked.forward(self.template, self.prediction_state(n), x, valid, train=False)

    def prediction_state(self, n: int) -> dict[str, torch.Tensor]:
        return self.sim.algorithm.prediction_state(self.own_tensors(n))


def plain_nll(algorithm: Algorithm) -> bool:
    """Whether the algorithm's batched loss is the plain class-weighted NLL (no penalty, no loss of
    its own): its gradient is then written in closed form instead of asking autograd."""
    return not algorithm.overridden_training_hooks() & {"penalty", "batched_loss"}
