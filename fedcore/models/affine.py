"""iFedAvg's element-wise affine layer: f(x) = (x + b) * w, the identity at initialisation."""

from __future__ import annotations

import torch
from torch import nn


class Affine(nn.Module):
    """Adds a bias then multiplies by a weight, feature by feature (no mixing of features).

    `scalar_weight=True` gives a single weight for all outputs: iFedAvg's scalar `w_out`, which
    turns a site's flipped labels into one large negative number.
    """

    def __init__(self, dim: int, scalar_weight: bool = False) -> None:
        super().__init__()
        self.b = nn.Parameter(torch.zeros(dim))
        self.w = nn.Parameter(torch.ones(1 if scalar_weight else dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Add first, then multiply (reference order), so b lives in the input's own units.
        return (x + self.b) * self.w
