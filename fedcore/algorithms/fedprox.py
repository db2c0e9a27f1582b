"""FedProx (Li et al. 2018): FedAvg plus a proximal term that keeps local models near the
model the site received this round: loss + (mu / 2) * ||w - w_received||^2 over shared weights."""

from dataclasses import dataclass

import torch

from fedcore.algorithms.base import Algorithm, FedAvgParams, param


@dataclass
class FedProxParams(FedAvgParams):
    mu: float = param(0.01, "Strength mu of the proximal term (mu / 2) * ||w - w_received||^2.",
                     bounds=(0.0, None))


class FedProx(Algorithm):
    name = "fedprox"
    title = "FedProx"
    summary = "FedAvg with a proximal term that limits how far each site drifts within a round."
    Params = FedProxParams

    def start_round(self, ctx) -> None:
        # What every site received this round, stacked over sites.
        self.received = {name: ctx.stacked[name].detach().clone() for name in ctx.shared_names}

    def penalty(self, ctx, params: dict[str, torch.Tensor], sites) -> torch.Tensor:
        stacked = not isinstance(sites, int)
        drift = 0.0
        for name, weight in params.items():
            if name in self.received:
                squared = (weight - self.received[name][sites]) ** 2
                drift = drift + (squared.flatten(1).sum(1) if stacked else squared.sum())
        return self.params.mu / 2 * drift
