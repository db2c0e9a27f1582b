"""What an algorithm's hooks may use of the federation they run in: one typed interface.

Three things implement it:
    the in-process `fedcore.engine.Simulation`   everything below (the server and every site)
    the server of a Flower federation             `ServerContext`: no site's rows
    a Flower site                                 `Context` of a federation of that one site

A hook reads nothing else of its `ctx`; a test checks the algorithms' code against these members.
What an algorithm needs beyond the server side of a round (rows at the server, a test set of its
own) it declares with `Algorithm.needs`, and that decides where it can run: a Flower federation
offers only `Need.SERVER_TEST` (the server's own data), so an algorithm that needs a site's rows at
the server runs simulated only, and says why.
"""

from __future__ import annotations

import enum
from typing import Protocol

import torch
from torch import nn

from fedcore.config import TrainConfig
from fedcore.federation import Federation
from fedcore.models import MLP


class Need(enum.Enum):
    """Data an algorithm's server side reads beyond the sites' models (a reason it needs them)."""

    POOLED_ROWS = "a share of every site's training rows copied to the server"
    HOLDOUTS_AT_SERVER = "every site's hold-out rows at the server"
    SITE_ROWS_AT_SERVER_STEP = "each site's images in the server's step (its prototypes pushed onto them)"
    SERVER_TEST = "a test set of the server's own"


class ServerContext(Protocol):
    """The server side of a round: every hook may use these (a Flower server has nothing else)."""

    federation: Federation  # names, features, classes, ground truth, the server's test set (no rows at Flower)
    config: TrainConfig
    round: int
    device: torch.device
    site_names: list[str]
    train_sizes: list[int]  # training rows behind each model
    stacked: dict[str, torch.Tensor]  # every tensor of every site, [sites, ...]
    shared_names: list[str]  # what the server mixes
    local_names: list[str]  # what never leaves a site (at a Flower server: only what the sites sent)
    models: list[nn.Module]  # each site's model, its tensors views of `stacked`

    def make_model(self) -> nn.Module: ...

    def make_mlp(self, **overrides: object) -> MLP: ...

    def make_backbone(self) -> tuple[nn.Module, int]: ...

    def predict(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor: ...

    def predict_each(self, x: torch.Tensor) -> torch.Tensor: ...


class Context(ServerContext, Protocol):
    """The sites' side too: their rows and their local loss (a simulation, or a Flower site's own)."""

    train_sets: list[tuple[torch.Tensor, torch.Tensor]]
    test_sets: list[tuple[torch.Tensor, torch.Tensor]]

    def loss_weights(self) -> torch.Tensor | None: ...

    def base_loss(self, log_prob: torch.Tensor, y: torch.Tensor, site: int | torch.Tensor) -> torch.Tensor: ...

    def site_label(self, site: int) -> str: ...

    def model_for_site(self, site: int) -> nn.Module: ...

    def server_share(self, share: float, purpose: str) -> tuple[torch.Tensor, torch.Tensor]: ...

    def train_at_server(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float, batch_size: int,
                        epochs: int, seed: int) -> float: ...


def members(protocol: type) -> set[str]:
    """The attribute and method names a context protocol declares (its bases' included)."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls in (Protocol, object) or not getattr(cls, "_is_protocol", False):
            continue
        names |= set(getattr(cls, "__annotations__", {}))
        names |= {name for name, value in vars(cls).items() if callable(value) and not name.startswith("_")}
    return names
