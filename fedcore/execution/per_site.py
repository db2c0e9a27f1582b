"""Site after site: each site's model (a torch module whose tensors are views of the stacked
state) trains with its own optimiser through `fedcore.training.train_locally`. Any model, any
algorithm: this is the path that defines what the others compute, and what a Flower site runs."""

from __future__ import annotations

import functools

import torch

from fedcore.execution.base import Executor, Sets, Trainee
from fedcore.metrics import pad_sites
from fedcore.training import train_locally


class PerSite(Executor):
    name = "per-site"
    runs = frozenset({"loss", "penalty", "local_optimizer", "class_weights"})

    def __init__(self, sim: Trainee) -> None:
        super().__init__(sim)
        config = sim.config
        # Each site's SGD; its momentum persists across rounds (the algorithm may use another optimiser).
        self.optimizers = [
            torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay)
            for model in sim.models
        ]

    @property
    def description(self) -> str:
        return "site by site"

    def train_round(self, lr: float) -> list[float]:
        return [self.train_site(site, lr) for site in range(len(self.sim.models))]

    def train_site(self, site: int, lr: float) -> float:
        """One site's local update of this round (a Flower site runs this)."""
        sim, algorithm = self.sim, self.sim.algorithm
        x, y = sim.train_sets[site]
        return train_locally(
            sim.models[site], algorithm.local_optimizer(sim, site, lr, self.optimizers[site]), x, y,
            functools.partial(algorithm.loss, sim, site), sim.config.batch_size, sim.config.local_epochs,
            sim.local_seed(site),
        )

    def log_probs(self, sets: Sets) -> torch.Tensor:
        return predict_models(self.sim, sets)

    @torch.no_grad()
    def predict_each(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([self.sim.predict(model, x) for model in self.sim.models])


def predict_models(sim: Trainee, sets: Sets) -> torch.Tensor:
    """Each site's model (for a pooled model, the one model) on that site's rows, padded [sites, rows, classes]."""
    return pad_sites([sim.predict(sim.model_for_site(site), x) for site, (x, _) in enumerate(sets)])[0]
