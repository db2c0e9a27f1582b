"""FedProx (Li et al. 2018): FedAvg plus a proximal term that keeps local models near the
model the site received this round: loss + (mu / 2) * ||w - w_received||^2 over shared weights."""

from dataclasses import dataclass

import torch
from torch import nn

from fedcore.algorithms.base import Algorithm, FedAvgParams, param


@dataclass
class FedProxParams(FedAvgParams):
    mu: float = param(0.01, "Strength mu of the proximal term (mu / 2) * ||w - w_received||^2.")


class FedProx(Algorithm):
    name = "fedprox"
    title = "FedProx"
    summary = "FedAvg with a proximal term that limits how far each site drifts within a round."
    Params = FedProxParams

    def __init__(self, params=None) -> None:
        super().__init__(params)
        self.received: dict[int, dict[str, torch.Tensor]] = {}

    def start_local(self, sim, site: int) -> None:
        state = sim.states[site]
        self.received[site] = {n: state[n].detach().clone() for n in sim.shared_names}

    def loss(self, sim, site: int, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        received = self.received[site]
        drift = sum(
            ((weight - received[name]) ** 2).sum()
            for name, weight in model.named_parameters()
            if name in received
        )
        return super().loss(sim, site, model, x, y) + self.params.mu / 2 * drift
