"""FedHealth 2 (Chen et al., later FedAP): similarity-weighted personalised aggregation with
local BatchNorm.

    1. Statistics per site, computed once: a model pretrained at the server (on a share of each
       site's training rows) runs frozen over the site's training rows; the per-channel mean and
       variance of the input of every BatchNorm layer describe the site.
       f-variant: no pretrained model; after `warmup_rounds` of FedBN each site's BatchNorm
       running means / variances are used instead. d-variant: the statistics of the
       classifier's input features.
    2. Distances d_ij between sites (diagonal-Gaussian Wasserstein) give weights w_ii = lambda,
       w_ij proportional to 1 / d_ij for j != i, each row summing to 1.
    3. Each round, site i receives sum_j w_ij theta_j for every non-BatchNorm parameter; its
       BatchNorm layers never leave it.

The pretrained model only measures the sites: federated training starts from the same
initial model as every other algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from fedcore.algorithms.base import Algorithm, Records, param
from fedcore.algorithms.context import Need
from fedcore.records import SiteSimilarity
from fedcore.algorithms.fedbn import is_batch_norm
from fedcore.errors import SpecError
from fedcore.interpret.similarity import Statistics, nearest_sites, site_distances, similarity_weights
from fedcore.seeding import derive_seed


@dataclass
class FedHealth2Params:
    lam: float = param(0.5, "lambda: the weight each site keeps for its own model (W's diagonal).",
                       bounds=(0.0, 1.0))
    variant: str = param(
        "pretrained",
        "Where the site statistics come from: 'pretrained' (BatchNorm inputs of a model trained on "
        "a server share), 'f' (BatchNorm running statistics after FedBN warm-up rounds), 'd' "
        "(classifier-input features of the pretrained model).",
        ("pretrained", "f", "d"),
    )
    server_share: float = param(0.3, "Share of each site's training rows (per class) to pretrain on.")
    pretrain_epochs: int = param(150, "Epochs of server pretraining.")
    pretrain_lr: float = param(0.01, "SGD learning rate of server pretraining.")
    pretrain_batch_size: int = param(32, "Batch size of server pretraining.")
    warmup_rounds: int = param(10, "f-variant: FedBN rounds before the statistics are taken.")

    def __post_init__(self) -> None:
        if not 0 < self.server_share < 1:
            raise SpecError(f"FedHealth2: server_share must be in (0, 1), not {self.server_share}.")
        if self.warmup_rounds < 1 or self.pretrain_epochs < 1 or self.pretrain_batch_size < 2:
            raise SpecError("FedHealth2: warmup_rounds and pretrain_epochs must be at least 1, "
                            "pretrain_batch_size at least 2.")


class FedHealth2(Algorithm):
    name = "fedhealth2"
    title = "FedHealth2"
    summary = "Each site averages mostly with the sites whose data look like its own; BatchNorm stays local."
    Params = FedHealth2Params
    batch_norm = True
    Record = SiteSimilarity
    needs_hint = ("Use its f-variant (variant 'f'): the sites send their BatchNorm statistics once, after the "
                  "warm-up rounds.")

    def needs(self) -> frozenset[Need]:
        # the pretrained model that measures the sites trains on a share of every site's rows
        return frozenset() if self.params.variant == "f" else frozenset({Need.POOLED_ROWS})

    def is_local(self, name: str, module: nn.Module) -> bool:
        return is_batch_norm(module)

    def setup(self, ctx) -> None:
        self.distance: np.ndarray | None = None
        self.weights: np.ndarray | None = None
        self.weights_round: int | None = None
        if self.params.variant == "f":
            if self.params.warmup_rounds >= ctx.config.rounds:
                raise SpecError(
                    f"FedHealth2 f-variant: warmup_rounds ({self.params.warmup_rounds}) must be "
                    f"fewer than rounds ({ctx.config.rounds})."
                )
            return
        pretrained = self._pretrain(ctx)
        statistic = classifier_input_statistics if self.params.variant == "d" else bn_input_statistics
        self._set_weights(ctx, [statistic(pretrained, x) for x, _ in ctx.train_sets])

    def _pretrain(self, ctx) -> nn.Module:
        x, y = ctx.server_share(self.params.server_share, "fedhealth2-server")
        seed = derive_seed(ctx.config.seed, "fedhealth2-pretrain")
        torch.manual_seed(seed)
        model = ctx.make_model().to(ctx.device)
        p = self.params
        ctx.train_at_server(model, x, y, p.pretrain_lr, p.pretrain_batch_size, p.pretrain_epochs, seed)
        return model.eval()

    def _set_weights(self, ctx, stats: list[Statistics]) -> None:
        self.distance = site_distances(stats)
        self.weights = similarity_weights(self.distance, self.params.lam)
        self.weights_round = ctx.round

    def after_aggregation(self, ctx) -> None:
        if self.params.variant == "f" and ctx.round == self.params.warmup_rounds:
            self._set_weights(ctx, [bn_running_statistics(m) for m in ctx.models])

    def server_step_locals(self, ctx) -> list[str]:
        if self.params.variant == "f" and ctx.round == self.params.warmup_rounds:
            return bn_running_statistic_names(ctx.models[0])
        return []

    def mixing(self, ctx) -> torch.Tensor:
        if self.weights is None:  # f-variant warm-up: plain FedBN
            n_sites = len(ctx.models)
            return torch.full((n_sites, n_sites), 1.0 / n_sites)
        return torch.as_tensor(self.weights)

    def record(self, ctx) -> Records:
        record = SiteSimilarity(lam=self.params.lam, variant=self.params.variant,
                                weights_from_round=self.weights_round)
        if self.weights is None:
            return record, {}
        record.nearest = nearest_sites(self.distance, ctx.site_names)
        return record, {"distance": self.distance, "weights": self.weights}


@torch.no_grad()
def bn_input_statistics(model: nn.Module, x: torch.Tensor, batch_size: int = 256) -> Statistics:
    """Per-channel mean and unbiased variance of every BatchNorm layer's input, pooled exactly
    over batches of the frozen model run on x."""
    layers = [m for m in model.modules() if is_batch_norm(m)]
    return _input_statistics(model, layers, x, batch_size)


@torch.no_grad()
def classifier_input_statistics(model: nn.Module, x: torch.Tensor, batch_size: int = 256) -> Statistics:
    """The same statistics for the input of the classifier (`model.head`): the d-variant."""
    return _input_statistics(model, [model.head], x, batch_size)


def bn_running_statistics(model: nn.Module) -> Statistics:
    """Each BatchNorm layer's running mean and variance (the f-variant's stand-in statistics)."""
    return [
        (m.running_mean.detach().cpu().numpy(), m.running_var.detach().cpu().numpy())
        for m in model.modules()
        if is_batch_norm(m)
    ]


def bn_running_statistic_names(model: nn.Module) -> list[str]:
    """The qualified names of the tensors `bn_running_statistics` reads."""
    return [f"{prefix}.{statistic}" for prefix, m in model.named_modules() if is_batch_norm(m)
            for statistic in ("running_mean", "running_var")]


def _input_statistics(model: nn.Module, layers: list[nn.Module], x: torch.Tensor, batch_size: int) -> Statistics:
    sums = [None] * len(layers)

    def accumulate(index: int):
        def hook(_module, inputs):
            z = inputs[0].detach().double()
            z = z.movedim(1, -1).reshape(-1, z.shape[1])  # rows x channels
            moments = torch.stack([torch.full_like(z[0], len(z)), z.sum(0), (z * z).sum(0)])
            sums[index] = moments if sums[index] is None else sums[index] + moments
        return hook

    handles = [layer.register_forward_pre_hook(accumulate(i)) for i, layer in enumerate(layers)]
    try:
        model.eval()
        for start in range(0, len(x), batch_size):
            model(x[start : start + batch_size])
    finally:
        for handle in handles:
            handle.remove()
    stats = []
    for count, total, squares in sums:
        mean = total / count
        variance = (squares - count * mean**2) / (count - 1).clamp(min=1)
        stats.append((mean.cpu().numpy(), variance.clamp(min=0).cpu().numpy()))
    return stats
