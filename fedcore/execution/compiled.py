"""The batched executor's rounds trained by the compiled C round (`fedcore.execution.kernels`):
the same batches, dropout streams, loss and SGD, one site's whole round at a time with its tensors
in the core's cache. For the plain class-weighted NLL only (its gradient is written in C), on the
CPU in float32, where a C compiler and torch's BLAS are at hand."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from fedcore.execution import kernels, stacked
from fedcore.execution.base import Trainee
from fedcore.execution.batched import Batched, hand_written
from fedcore.training import batch_orders, tensor_state


MLP_ONLY = "the compiled round computes the paper's MLP, with the layers its C code knows, only"


def why_not_here(device: torch.device, state: Mapping[str, torch.Tensor]) -> str:
    """Why the compiled round cannot train these tensors on this machine ('' when it can)."""
    if device.type != "cpu":
        return f"the compiled round runs on the CPU only, not {device.type}"
    if not kernels.supports(state):
        return "the compiled round needs float32 tensors"
    return kernels.unavailable()


class Compiled(Batched):
    name = "compiled"
    runs = frozenset({"class_weights"})
    runs_batchable = frozenset()

    @classmethod
    def why_not_model(cls, sim: Trainee) -> str:
        if not sim.federation.is_tabular or not hand_written(sim):
            return MLP_ONLY
        return why_not_here(sim.device, sim.stacked)

    @property
    def description(self) -> str:
        return "compiled rounds, each site's in turn"

    def train_round(self, lr: float) -> list[float]:
        config = self.sim.config
        losses = kernels.train_round(self.template, self.own_tensors(self.first), self.optimizer, self.own_data(),
                                     self.orders(), self.own_loss_weights(), config.loss_reduction, self.dropout,
                                     config.batch_size, lr)
        return losses.tolist()

    @torch.no_grad()
    def forward(self, n: int, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        return kernels.predict(self.template, self.own_tensors(n), x, valid.sum(1))


def train_as_one_site(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float, batch_size: int, epochs: int,
                seed: int) -> float:
    """`model` (one that `stacked.supports`) trained in place on its rows (x, y) by plain SGD on the
    mean NLL, as `fedcore.training.train_locally` trains it: the same batches (`batch_orders` of
    `seed`, every epoch in one plan), the same BatchNorm statistics. It is a federation of one
    site: the compiled round where it can run, else the batched executor's torch pass, both with
    one dropout stream seeded by `seed` (so every machine draws the same masks; they differ from
    the torch loop's but are distributed alike). Returns the mean loss per batch."""
    state = {name: tensor.detach()[None].clone() for name, tensor in tensor_state(model).items()}
    trainable = {name: state[name] for name, parameter in model.named_parameters() if parameter.requires_grad}
    optimizer = stacked.SiteSGD(trainable, 0.0, 0.0)
    dropout = stacked.DropoutMasks(x.device, [seed])
    data, orders = (x[None], y[None]), [batch_orders(len(y), epochs, seed)]
    if why_not_here(x.device, state):
        names = list(trainable)

        def step(tensors, x_step, y_step, valid, sites):
            return stacked.nll_step(model, tensors, x_step, y_step, valid, None, "mean", dropout,
                                    None if sites is None else sites.tolist(), names)

        loss = stacked.train_round(model, state, optimizer, data, orders, step, batch_size, lr)
    else:
        loss = kernels.train_round(model, state, optimizer, data, orders, None, "mean", dropout, batch_size, lr)
    with torch.no_grad():
        for name, tensor in tensor_state(model).items():
            tensor.copy_(state[name][0])
    return float(loss[0])
