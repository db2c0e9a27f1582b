"""ProtoPNet (Chen et al. 2019, "This looks like that"), as the inDISCO reference uses it.

    backbone -> add-on layers: 1×1 conv (-> D) ReLU, 1×1 conv (-> D) Sigmoid: latent patches z (D, h×w)
    prototypes p_1 .. p_m: D-vectors, `per_class` for each class (prototype j belongs to class j // per_class)
    d_j = min over the patches of ||z - p_j||²        similarity s_j = log((d_j + 1) / (d_j + 1e-4))
    logits = W s: the last layer (no bias), W[k, j] = 1 where p_j belongs to class k, else -0.5 at start

Loss: cross-entropy + 0.8·Clst − 0.08·Sep + 1e-4·‖W ⊙ (1 − identity)‖₁ where, over a batch,
Clst is the mean distance of an image's nearest patch to the nearest prototype of its class and
Sep the same for the prototypes of the other classes (pushed away). Push: every prototype becomes
the latent patch nearest to it among the training images of its own class.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

EPSILON = 1e-4  # in the similarity log((d + 1) / (d + eps))
WRONG_CLASS_WEIGHT = -0.5  # last-layer connection of a prototype to the classes it does not belong to


@dataclass(frozen=True)
class LossWeights:
    """ProtoPNet's coefficients; the separation term is subtracted."""

    cluster: float = 0.8
    separation: float = 0.08
    l1: float = 1e-4


class ProtoPNet(nn.Module):
    """Returns log-probabilities; `logits_and_distances` also gives each prototype's nearest distance."""

    def __init__(self, features: nn.Module, channels: int, n_classes: int, per_class: int = 10,
                 dim: int = 128) -> None:
        super().__init__()
        self.features = features
        self.add_on = nn.Sequential(nn.Conv2d(channels, dim, 1), nn.ReLU(), nn.Conv2d(dim, dim, 1), nn.Sigmoid())
        for layer in self.add_on:
            if isinstance(layer, nn.Conv2d):
                nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(layer.bias)
        n_prototypes = per_class * n_classes
        self.prototypes = nn.Parameter(torch.rand(n_prototypes, dim))  # in the Sigmoid's range, as the reference
        self.register_buffer("prototype_class", torch.arange(n_prototypes) // per_class)
        # classes × prototypes: 1 where the prototype belongs to the class
        self.register_buffer("identity", F.one_hot(self.prototype_class, n_classes).T.float())
        self.last_layer = nn.Linear(n_prototypes, n_classes, bias=False)
        with torch.no_grad():
            self.last_layer.weight.copy_(self.identity + WRONG_CLASS_WEIGHT * (1 - self.identity))

    def latent(self, x: torch.Tensor) -> torch.Tensor:
        return self.add_on(self.features(x))

    def distance_maps(self, z: torch.Tensor) -> torch.Tensor:
        """Squared L2 distance of every latent patch to every prototype: N × m × h × w."""
        p = self.prototypes
        patches = (z * z).sum(1, keepdim=True)
        cross = F.conv2d(z, p[:, :, None, None])
        return F.relu(patches - 2 * cross + (p * p).sum(1)[None, :, None, None])

    def logits_and_distances(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        nearest = self.distance_maps(self.latent(x)).flatten(2).min(-1).values  # N × m
        return self.last_layer(similarity(nearest)), nearest

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.logits_and_distances(x)[0], dim=-1)

    def wrong_class_l1(self) -> torch.Tensor:
        """‖W ⊙ (1 − identity)‖₁: the last layer's connections to the classes a prototype does not belong to."""
        return (self.last_layer.weight * (1 - self.identity)).abs().sum()


def similarity(distance: torch.Tensor) -> torch.Tensor:
    return torch.log((distance + 1) / (distance + EPSILON))


def prototype_terms(model: ProtoPNet, nearest: torch.Tensor, y: torch.Tensor, weights: LossWeights) -> torch.Tensor:
    """The loss beyond cross-entropy: weighted cluster, separation and L1 terms of one batch."""
    own = model.prototype_class[None] == y[:, None]  # N × m
    # The reference takes these minima as D - max((D - d) · mask), which equals them while d <= D
    # (latents and prototypes in [0, 1]^D); the masked minimum stays right when a prototype leaves it.
    cluster = nearest.masked_fill(~own, float("inf")).min(1).values.mean()
    separation = nearest.masked_fill(own, float("inf")).min(1).values.mean()
    return weights.cluster * cluster - weights.separation * separation + weights.l1 * model.wrong_class_l1()


@torch.no_grad()
def latents(model: ProtoPNet, x: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """Latent patches of every image (evaluation mode: BatchNorm running statistics)."""
    model.eval()
    return torch.cat([model.latent(x[start : start + batch_size]) for start in range(0, len(x), batch_size)])


@torch.no_grad()
def nearest_similarities(model: ProtoPNet, z: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """Each image's similarity to every prototype (its nearest patch): N × m."""
    return torch.cat([similarity(model.distance_maps(z[start : start + batch_size]).flatten(2).min(-1).values)
                      for start in range(0, len(z), batch_size)])


@torch.no_grad()
def nearest_patches(model: ProtoPNet, z: torch.Tensor, y: torch.Tensor,
                    batch_size: int = 256) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For every prototype, the nearest latent patch among the images of its own class:
    (image index, flat patch index row·w + column, squared distance); index -1 where no image of
    that class exists."""
    n_prototypes = model.prototypes.shape[0]
    best = torch.full((n_prototypes,), float("inf"), device=z.device)
    image = torch.full((n_prototypes,), -1, dtype=torch.long, device=z.device)
    patch = torch.zeros(n_prototypes, dtype=torch.long, device=z.device)
    patches = z.shape[2] * z.shape[3]
    for start in range(0, len(z), batch_size):
        distance = model.distance_maps(z[start : start + batch_size]).flatten(2)  # n × m × patches
        own = model.prototype_class[None] == y[start : start + batch_size, None]
        distance = distance.masked_fill(~own[..., None], float("inf"))
        value, where = distance.transpose(0, 1).flatten(1).min(1)  # over (image, patch) per prototype
        better = value < best
        best = torch.where(better, value, best)
        image = torch.where(better, start + where // patches, image)
        patch = torch.where(better, where % patches, patch)
    return image, patch, best


@torch.no_grad()
def push(model: ProtoPNet, z: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace every prototype by its nearest latent patch of its own class (prototypes of a class
    without images stay); returns (image index, flat patch index) of each."""
    image, patch, _ = nearest_patches(model, z, y)
    found = image >= 0
    width = z.shape[3]
    chosen = z[image[found], :, patch[found] // width, patch[found] % width]  # found × D
    model.prototypes[found] = chosen
    return image, patch
