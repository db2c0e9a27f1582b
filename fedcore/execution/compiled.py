"""The batched executor's rounds trained by the compiled C round (`fedcore.execution.kernels`):
the same batches, dropout streams, loss and SGD, one site's whole round at a time with its tensors
in the core's cache. For the plain class-weighted NLL only (its gradient is written in C), on the
CPU in float32, where a C compiler and torch's BLAS are at hand."""

from __future__ import annotations

import torch

from fedcore.execution import kernels
from fedcore.execution.base import Trainee
from fedcore.execution.batched import Batched, hand_written


class Compiled(Batched):
    name = "compiled"
    runs = frozenset({"class_weights"})
    runs_batchable = frozenset()

    @classmethod
    def why_not_model(cls, sim: Trainee) -> str:
        if not sim.federation.is_tabular or not hand_written(sim):
            return "the compiled round computes the paper's MLP, with the layers its C code knows, only"
        if sim.device.type != "cpu":
            return f"the compiled round runs on the CPU only, not {sim.device.type}"
        if not kernels.supports(sim.stacked):
            return "the compiled round needs float32 tensors"
        return kernels.unavailable()

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
