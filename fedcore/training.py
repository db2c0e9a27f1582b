"""The local update of one model, step by step: what every per-site computation shares (the
per-site executor, a Flower site, FedHealth2's server pretraining, inDISCO's last-layer stage);
and the class-weighted NLL of stacked sites' rows, which the hand-written batched steps share."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from fedcore.models import min_batch_rows


def tensor_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters and buffers by qualified name (live tensors, not copies)."""
    return {**dict(model.named_parameters()), **dict(model.named_buffers())}


def batch_orders(n_rows: int, epochs: int, seed: int) -> list[torch.Tensor]:
    """A site's row order for each local epoch of one round (the same in every execution path)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randperm(n_rows, generator=generator) for _ in range(epochs)]


def train_locally(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor],
    batch_size: int,
    epochs: int,
    seed: int,
) -> float:
    """One model's local update; returns the mean loss per batch (as the loss is reduced).

    A pure function of (model, optimiser state, data, seed): batch order and dropout both come
    from `seed`, so a Flower client reproduces the simulation exactly.
    """
    model.train()
    torch.manual_seed(seed)
    min_rows = min_batch_rows(model)
    total, batches = 0.0, 0
    for order in batch_orders(len(y), epochs, seed):
        order = order.to(x.device)
        for start in range(0, len(y), batch_size):
            batch = order[start : start + batch_size]
            if len(batch) < min_rows:
                continue
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model, x[batch], y[batch])
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
            batches += 1
    return total / max(batches, 1)


def weighted_nll(log_prob: torch.Tensor, y: torch.Tensor, valid: torch.Tensor, weights: torch.Tensor | None,
                 reduction: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Each site's class-weighted NLL [sites] of its rows, and the weight of each row in it
    [sites, rows] (the loss's derivative along -log_prob at the row's class)."""
    nll = -log_prob.gather(-1, y[..., None]).squeeze(-1)
    row_weight = weights.gather(1, y) * valid if weights is not None else valid.to(nll.dtype)
    if reduction == "mean":
        row_weight = row_weight / row_weight.sum(1, keepdim=True).clamp(min=1e-12)
    return (row_weight * nll).sum(1), row_weight
