"""All sites of a round trained as one computation (the MLP family).

Every parameter is held once for all sites, stacked along a first `sites` dimension, so one
batched matrix product serves every site's layer. Each step takes the k-th mini-batch of every
site (in the same order the per-site path uses), padded to the batch size with a mask of real
rows; a site with fewer batches is masked out of the steps it does not have, and SGD with
momentum updates only the sites that took part in the step, exactly as their own optimiser would.

Differences from the per-site path are those of floating-point order, plus dropout: the masks
here are drawn for all sites at once, so they differ from (but are distributed like) the per-site
path's. With dropout 0 both paths give the same weights up to rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fedcore.models import MLP

BATCH_NORM_MOMENTUM = 0.1  # nn.BatchNorm1d's default


def supports(model: nn.Module) -> bool:
    """Whether this model can be trained batched (our MLP, with or without BatchNorm)."""
    layer_types = (nn.Dropout, nn.Linear, nn.BatchNorm1d, nn.Tanh)
    return type(model) is MLP and all(isinstance(layer, layer_types) for layer in model.body)


class DropoutMasks:
    """Seeded dropout masks. On the CPU they come from numpy's PCG64, several times faster than
    torch's CPU generator for the many small masks a round needs; on a GPU from torch's."""

    def __init__(self, device: torch.device, seed: int) -> None:
        self.device = device
        if device.type == "cpu":
            self.numpy = np.random.Generator(np.random.PCG64(seed))
        else:
            self.torch = torch.Generator(device=device).manual_seed(seed)

    def keep(self, shape: torch.Size, p: float) -> torch.Tensor:
        """Boolean mask, True with probability 1 - p."""
        if self.device.type == "cpu":
            return torch.from_numpy(self.numpy.random(tuple(shape), dtype=np.float32) >= p)
        return torch.rand(shape, generator=self.torch, device=self.device) >= p


def forward(
    model: MLP,
    state: Mapping[str, torch.Tensor],
    x: torch.Tensor,
    valid: torch.Tensor,
    train: bool,
    dropout: DropoutMasks | None = None,
) -> torch.Tensor:
    """Log-probabilities [sites, rows, classes] of every site's model on its rows x [sites, rows, D].

    `state` maps the model's parameter and buffer names to stacked tensors. In training,
    BatchNorm normalises each site over its valid rows and updates that site's running
    statistics (sites with fewer than two valid rows are left untouched).
    """
    h = (x + state["f_in.b"][:, None]) * state["f_in.w"][:, None]
    for index, layer in enumerate(model.body):
        name = f"body.{index}"
        if isinstance(layer, nn.Dropout):
            if train and layer.p > 0:
                h = torch.where(dropout.keep(h.shape, layer.p), h / (1 - layer.p), 0.0)
        elif isinstance(layer, nn.Linear):
            h = torch.baddbmm(state[f"{name}.bias"][:, None], h, state[f"{name}.weight"].transpose(1, 2))
        elif isinstance(layer, nn.BatchNorm1d):
            h = _batch_norm(h, valid, state, name, layer.eps, train)
        else:
            h = torch.tanh(h)
    logits = torch.baddbmm(state["head.bias"][:, None], h, state["head.weight"].transpose(1, 2))
    return F.log_softmax((logits + state["f_out.b"][:, None]) * state["f_out.w"][:, None], dim=-1)


def _batch_norm(h: torch.Tensor, valid: torch.Tensor, state: Mapping[str, torch.Tensor], name: str,
                eps: float, train: bool) -> torch.Tensor:
    weight, bias = state[f"{name}.weight"][:, None], state[f"{name}.bias"][:, None]
    if not train:
        mean, variance = state[f"{name}.running_mean"][:, None], state[f"{name}.running_var"][:, None]
        return (h - mean) / torch.sqrt(variance + eps) * weight + bias
    mask = valid[..., None].to(h.dtype)
    rows = mask.sum(1, keepdim=True).clamp(min=1)
    mean = (h * mask).sum(1, keepdim=True) / rows
    variance = (((h - mean) * mask) ** 2).sum(1, keepdim=True) / rows
    with torch.no_grad():
        updated = (rows.squeeze(1) >= 2)  # [sites, 1]
        unbiased = variance.squeeze(1) * rows.squeeze(1) / (rows.squeeze(1) - 1).clamp(min=1)
        for buffer, batch_value in (("running_mean", mean.squeeze(1)), ("running_var", unbiased)):
            running = state[f"{name}.{buffer}"]
            blended = (1 - BATCH_NORM_MOMENTUM) * running + BATCH_NORM_MOMENTUM * batch_value
            running.copy_(torch.where(updated, blended, running))
        state[f"{name}.num_batches_tracked"].add_(updated.squeeze(1).long())
    return (h - mean) / torch.sqrt(variance + eps) * weight + bias


def batch_plan(orders: list[list[torch.Tensor]], batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Row indices [steps, sites, batch] and their mask from each site's per-epoch row orders;
    step k holds every site's k-th mini-batch (epochs one after the other)."""
    per_site = []
    for epochs in orders:
        steps = [order[start:start + batch_size] for order in epochs for start in range(0, len(order), batch_size)]
        per_site.append(steps)
    n_steps = max(len(steps) for steps in per_site)
    rows = torch.full((n_steps, len(orders), batch_size), -1, dtype=torch.long)
    for site, steps in enumerate(per_site):
        for k, batch in enumerate(steps):
            rows[k, site, : len(batch)] = batch
    rows = rows.to(device)
    return rows.clamp(min=0), rows >= 0


class MaskedSGD:
    """SGD with momentum and weight decay on stacked parameters, per site: a site's parameters
    and momentum move only in the steps it takes part in (torch.optim.SGD's update otherwise).

    A site that is not taking part has a zero gradient (its loss is not in the step), so only
    the momentum's decay and the step itself need a per-site factor: three in-place passes."""

    def __init__(self, parameters: Mapping[str, torch.Tensor], momentum: float, weight_decay: float) -> None:
        self.parameters = dict(parameters)
        self.momentum, self.weight_decay = momentum, weight_decay
        self.buffers = {name: torch.zeros_like(p) for name, p in self.parameters.items()}

    @torch.no_grad()
    def step(self, grads: Mapping[str, torch.Tensor], lr: float, active: torch.Tensor) -> None:
        taking_part = active.to(next(iter(self.parameters.values())).dtype)
        decay = 1 + (self.momentum - 1) * taking_part  # momentum where active, 1 (unchanged) elsewhere
        step_size = lr * taking_part
        for name, parameter in self.parameters.items():
            shape = (-1,) + (1,) * (parameter.ndim - 1)
            grad = grads[name]
            if self.weight_decay:
                grad = grad.add(parameter * taking_part.view(shape), alpha=self.weight_decay)
            buffer = self.buffers[name]
            buffer.mul_(decay.view(shape)).add_(grad)
            parameter.addcmul_(buffer, step_size.view(shape), value=-1)


def train_round(
    model: MLP,
    state: Mapping[str, torch.Tensor],
    optimizer: MaskedSGD,
    data: tuple[torch.Tensor, torch.Tensor],
    orders: list[list[torch.Tensor]],
    site_loss: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    batch_size: int,
    lr: float,
    dropout: DropoutMasks,
) -> torch.Tensor:
    """One round of local training for all sites; returns each site's mean loss per batch.

    `data` holds every site's training rows padded to one length ([sites, rows, D], [sites, rows]);
    `site_loss(log_prob, y, valid)` gives each site's loss [sites] of one step (plus any penalty).
    """
    x_all, y_all = data
    rows, valid = batch_plan(orders, batch_size, x_all.device)
    minimum = 2 if any(isinstance(layer, nn.BatchNorm1d) for layer in model.body) else 1
    sites = torch.arange(x_all.shape[0], device=x_all.device)[:, None]
    totals = torch.zeros(x_all.shape[0], device=x_all.device)
    steps_taken = torch.zeros_like(totals)
    for step_rows, step_valid in zip(rows, valid):
        active = step_valid.sum(1) >= minimum
        if not bool(active.any()):
            continue
        step_valid = step_valid & active[:, None]
        log_prob = forward(model, state, x_all[sites, step_rows], step_valid, train=True, dropout=dropout)
        losses = site_loss(log_prob, y_all[sites, step_rows], step_valid)
        grads = torch.autograd.grad(losses[active].sum(), list(optimizer.parameters.values()))
        optimizer.step(dict(zip(optimizer.parameters, grads)), lr, active)
        totals += torch.where(active, losses.detach(), torch.zeros_like(totals))
        steps_taken += active
    return totals / steps_taken.clamp(min=1)
