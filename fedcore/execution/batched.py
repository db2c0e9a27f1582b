"""All sites of a round as one computation in torch: every model an algorithm builds for a table.

Each step takes every site's next mini-batch (the per-site path's batch order), and SGD with
momentum moves the stacked parameters (`fedcore.execution.stacked.train_round`). The step's
forward and backward pass is computed one of two ways, chosen once per run:

    hand-written   the MLP's forward and backward written out for all sites at once
                   (`fedcore.execution.stacked`): the fast path, for the paper's MLP where its
                   pass is checked to compute the module (`stacked.supports`) and the loss is the
                   default one; the class-weighted NLL's gradient in closed form, and a penalty
                   through autograd
    module         the model's own modules under torch.func.vmap, with autograd
                   (`fedcore.execution.vmapped`): any table model (APFL's mixture, a layer the
                   hand-written pass does not know), and an algorithm's own loss where it marks
                   it `batchable`

Both give the per-site path's weights up to rounding (dropout apart: its masks come from each
site's own stream, the same on both).
"""

from __future__ import annotations

import torch

from fedcore.algorithms.base import Algorithm
from fedcore.execution import stacked, vmapped
from fedcore.execution.base import Executor, Sets, Trainee
from fedcore.execution.per_site import predict_models
from fedcore.metrics import pad_sites
from fedcore.seeding import derive_seed
from fedcore.training import batch_orders, weighted_nll


class Batched(Executor):
    name = "batched"
    runs = frozenset({"penalty", "class_weights"})
    runs_batchable = frozenset({"loss"})

    def __init__(self, sim: Trainee, first: int | None = None) -> None:
        """Trains the first `first` sites (all by default; with worker processes, this process's share)."""
        super().__init__(sim)
        self.first = len(sim.models) if first is None else first
        own = self.own_tensors(self.first)
        trainable = {n: own[n] for n, p in sim.initial.named_parameters() if p.requires_grad}
        self.optimizer = stacked.SiteSGD(trainable, sim.config.momentum, sim.config.weight_decay)
        self.padded_train = tuple(pad_sites(part)[0] for part in zip(*sim.train_sets))
        # One stream per site for the whole run, named after the site like its other streams.
        self.dropout = stacked.DropoutMasks(sim.device, [
            derive_seed(sim.config.seed, sim.site_label(site), "batched-dropout") for site in range(len(sim.models))
        ])
        self.template = sim.initial
        self.module = None if hand_written(sim) else vmapped.ModulePass(sim, self.dropout)
        self._padded_test_x: torch.Tensor | None = None

    @classmethod
    def why_not(cls, sim: Trainee) -> str:
        return super().why_not(sim) or cls.why_not_model(sim)

    @classmethod
    def why_not_model(cls, sim: Trainee) -> str:
        """Why this executor cannot compute `sim`'s model and loss ('' when it can)."""
        if not sim.federation.is_tabular:
            return f"the {cls.name} path stacks the sites' table rows; images train site by site"
        return "" if hand_written(sim) else vmapped.why_not(sim)

    @property
    def description(self) -> str:
        how = "the model's own layers under vmap" if self.module else "hand-written MLP pass"
        return f"all sites batched (torch, {how})"

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
        names = list(self.optimizer.parameters)
        if self.module:
            return self.module.step(state, x, y, valid, sites, names)
        listed = None if sites is None else sites.tolist()
        weights = sim.loss_weights()
        weights = weights[sites] if weights is not None and sites is not None else weights
        if plain_nll(algorithm):
            return stacked.nll_step(self.template, state, x, y, valid, weights, sim.config.loss_reduction,
                                    self.dropout, listed, names)
        # The default loss, stacked: the class-weighted NLL plus the algorithm's penalty.
        params = {name: state[name].detach().requires_grad_(True) for name in names}
        log_prob = stacked.forward(self.template, {**state, **params}, x, valid, train=True, dropout=self.dropout,
                                   sites=listed)
        losses = weighted_nll(log_prob, y, valid, weights, sim.config.loss_reduction)[0] + algorithm.penalty(
            sim, params, slice(None) if sites is None else sites)
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
        if self.module:
            return self.module.forward(self.own_tensors(n), x)
        return stacked.forward(self.template, self.own_tensors(n), x, valid, train=False)


def hand_written(sim: Trainee) -> bool:
    """Whether the hand-written pass computes `sim`'s step: its model is the MLP the pass is
    checked to compute, and its loss the default one (the NLL, plus any penalty)."""
    return "loss" not in sim.algorithm.overridden_training_hooks() and stacked.supports(sim.initial)


def plain_nll(algorithm: Algorithm) -> bool:
    """Whether the algorithm's batched loss is the plain class-weighted NLL (no penalty, no loss of
    its own): its gradient is then written in closed form instead of asking autograd."""
    return not algorithm.overridden_training_hooks() & {"penalty", "loss"}
