"""The MLP of the iFedAvg paper (Table 5), optionally with BatchNorm for FedBN / FedHealth2.

    f_in -> Dropout -> Linear(D,128) [-> BN] -> Tanh -> Dropout -> Linear(128,64) [-> BN] -> Tanh
         -> Dropout -> Linear(64,K) (`head`) -> f_out -> log_softmax

Every algorithm uses this same architecture; they differ only in which parts stay at a site.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from fedcore.models.affine import Affine


def tanh_by_sigmoid(x: torch.Tensor, in_place: bool = True) -> torch.Tensor:
    """tanh(x) as 2 * sigmoid(2x) - 1 (see `Tanh`); the hand-written batched pass computes it here
    too. `in_place` reuses the sigmoid's output (not where autograd keeps it for the backward)."""
    y = torch.sigmoid(x * 2)
    return y.mul_(2).sub_(1) if in_place else y * 2 - 1


def min_batch_rows(model: nn.Module) -> int:
    """The fewest rows a training mini-batch may have: BatchNorm cannot normalise a single row,
    so with it a one-row batch is skipped (in every execution path alike)."""
    return 2 if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()) else 1


class _SigmoidTanh(torch.autograd.Function):
    # One autograd node for the three operations. (Written the old way, without setup_context: on
    # a site's batch that costs about 20 us less a call than a torch.func-ready node, where a step
    # is about 500 us; under torch.func the batched executor runs the formula's plain operations.)
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = tanh_by_sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad_out, y)


class Tanh(nn.Tanh):
    """tanh computed as 2 * sigmoid(2x) - 1: equal to it up to rounding, and on the CPU several
    times faster than torch's own tanh (about 80 against 270 us for a [30, 16, 128] batch on one
    core), which the simulation runs twice per step."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _SigmoidTanh.apply(x)


class Dropout(nn.Dropout):
    """nn.Dropout whose mask a caller may supply for one call, as the tensor `mask` among
    torch.func.functional_call's tensors (0 or 1 / (1 - p), the shape of the input): the batched
    executor draws every site's masks from a random stream of the site's own
    (`fedcore.execution.stacked.DropoutMasks`), so that they depend on nothing but the site's
    seed. Without one (a site's own training) it is nn.Dropout, drawing from torch's generator."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__(p)
        self.register_buffer("mask", None, persistent=False)  # not stored, not stacked: None but for a call

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = self._buffers["mask"] if self.training else None  # (the dict itself: a site's step calls this thrice)
        return x * mask if mask is not None else F.dropout(x, self.p, self.training, self.inplace)


class MLP(nn.Module):
    """Returns log-probabilities (the paper pairs log_softmax with an NLL loss)."""

    def __init__(
        self,
        n_features: int,
        n_classes: int,
        hidden: Sequence[int] = (128, 64),
        dropout: float = 0.2,
        batch_norm: bool = False,
        scalar_w_out: bool = False,
    ) -> None:
        super().__init__()
        self.f_in = Affine(n_features)
        layers: list[nn.Module] = []
        width = n_features
        for size in hidden:
            layers += [Dropout(dropout), nn.Linear(width, size)]
            if batch_norm:
                layers.append(nn.BatchNorm1d(size))
            layers.append(Tanh())
            width = size
        layers.append(Dropout(dropout))
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, n_classes)
        self.f_out = Affine(n_classes, scalar_weight=scalar_w_out)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The classifier's input (FedHealth2's d-variant takes its statistics here)."""
        return self.body(self.f_in(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.f_out(self.head(self.features(x))), dim=-1)

    def linear_names(self) -> list[str]:
        """Qualified names of the Linear layers, input side first (FedPer picks the last ones)."""
        return [name for name, module in self.named_modules() if isinstance(module, nn.Linear)]
