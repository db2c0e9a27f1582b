"""APFL (Deng et al. 2020): each site keeps a personal model v and a mixing weight alpha next to
the shared model w, and predicts with the mixture v_bar = alpha * v + (1 - alpha) * w.

Per step, as in the APFL algorithm: w descends its own loss; v and alpha descend the loss of
the mixture (w enters the mixture detached, so it is not pulled by it). Only w is averaged.
"""

import copy
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call

from fedcore.algorithms.base import Algorithm, FedAvgParams, Records, param
from fedcore.records import Mixture


@dataclass
class APFLParams(FedAvgParams):
    alpha: float = param(0.5, "Initial weight alpha of the personal model in the mixture.", bounds=(0.0, 1.0))
    adapt_alpha: bool = param(True, "Learn alpha per site by gradient descent; False keeps it fixed.")


def mixture(alpha: torch.Tensor, personal: dict[str, torch.Tensor], shared: dict[str, torch.Tensor],
            detach_shared: bool = False) -> dict[str, torch.Tensor]:
    """The mixed model's tensors alpha * v + (1 - alpha) * w, for one site (alpha a scalar) or for
    all sites stacked (alpha [sites]). alpha is clamped to [0, 1] in the forward pass with an
    identity gradient, so that a step can move it off 0 or 1 again."""
    alpha = alpha + (alpha.clamp(0.0, 1.0) - alpha).detach()
    mixed = {}
    for name, v in personal.items():
        w = shared[name].detach() if detach_shared else shared[name]
        a = alpha.reshape(alpha.shape + (1,) * (v.ndim - alpha.ndim))
        mixed[name] = a * v + (1 - a) * w
    return mixed


def _part(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {name[len(prefix):]: value for name, value in state.items() if name.startswith(prefix)}


class APFLModel(nn.Module):
    """w (`shared`), v (`personal`) and alpha; calling it gives the mixture's log-probabilities."""

    def __init__(self, shared: nn.Module, alpha: float) -> None:
        super().__init__()
        self.shared = shared
        self.personal = copy.deepcopy(shared)
        self.alpha = nn.Parameter(torch.tensor(float(alpha)))

    def mixture(self, x: torch.Tensor, detach_shared: bool = False) -> torch.Tensor:
        mixed = mixture(self.alpha, dict(self.personal.named_parameters()), dict(self.shared.named_parameters()),
                        detach_shared)
        return functional_call(self.personal, mixed, (x,))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mixture(x)


class APFL(Algorithm):
    name = "apfl"
    title = "APFL"
    summary = "Each site mixes a personal and the shared model with a learned weight alpha."
    Params = APFLParams
    Record = Mixture
    # The iFedAvg paper runs APFL without client momentum (its authors do not discuss it).
    config_defaults = {"momentum": 0.0}
    inputs = ("table",)  # its mixture is built on the MLP

    def build_model(self, ctx) -> nn.Module:
        model = APFLModel(ctx.make_mlp(), self.params.alpha)
        model.alpha.requires_grad_(self.params.adapt_alpha)
        return model

    def is_local(self, name: str, module: nn.Module) -> bool:
        return not name.startswith("shared.")

    def start_round(self, ctx) -> None:
        # APFL descends on alpha with a projection onto [0, 1]. Projected once a round (within a
        # round the mixture uses it clamped): left unprojected, alpha drifted far below 0 on HAR,
        # where the mixture is the shared model alone and alpha could not come back.
        with torch.no_grad():
            ctx.stacked["alpha"].clamp_(0.0, 1.0)

    def loss(self, ctx, site: int, model: APFLModel, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ctx.base_loss(model.shared(x), y, site) + ctx.base_loss(
            model.mixture(x, detach_shared=True), y, site
        )

    # -- the same, for all sites stacked (the batched path runs the personal MLP's network) ------
    def batched_template(self, model: APFLModel) -> nn.Module:
        return model.personal

    def batched_loss(self, ctx, state, run, y, valid, sites, params) -> torch.Tensor:
        shared = _part(state, "shared.")
        mixed = mixture(state["alpha"], _part(state, "personal."), shared, detach_shared=True)
        return ctx.batched_nll(run(shared), y, valid, sites) + ctx.batched_nll(run(mixed), y, valid, sites)

    def prediction_state(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return mixture(state["alpha"], _part(state, "personal."), _part(state, "shared."))

    def recorded_locals(self, ctx) -> list[str]:
        return ["alpha"]

    def record(self, ctx) -> Records:
        alpha = {
            name: float(model.alpha.detach().clamp(0, 1))
            for name, model in zip(ctx.site_names, ctx.models)
        }
        return Mixture(alpha), {"alpha": torch.tensor(list(alpha.values())).numpy()}

