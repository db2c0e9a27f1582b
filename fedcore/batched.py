"""All sites of a round trained as one computation (the MLP family).

Every parameter is held once for all sites, stacked along a first `sites` dimension, so one
batched matrix product serves every site's layer. Each step takes the k-th mini-batch of every
site (in the same order the per-site path uses), padded to the batch size with a mask of real
rows. For the round the sites are ordered by how many steps they take, so a site with fewer
batches simply drops out of the tail of the order: the last steps compute the first sites only, on
views of the stacked tensors, and SGD with momentum updates only the sites that took part in the
step, exactly as their own optimiser would.

Differences from the per-site path are those of floating-point order, plus dropout: the masks
here are drawn for all sites at once, so they differ from (but are distributed like) the per-site
path's. With dropout 0 both paths give the same weights up to rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.sgd import sgd

from fedcore.models import MLP

BATCH_NORM_MOMENTUM = 0.1  # nn.BatchNorm1d's default


def supports(model: nn.Module) -> bool:
    """Whether this model can be trained batched (our MLP, with or without BatchNorm)."""
    layer_types = (nn.Dropout, nn.Linear, nn.BatchNorm1d, nn.Tanh)
    return type(model) is MLP and all(isinstance(layer, layer_types) for layer in model.body)


class DropoutMasks:
    """Seeded dropout masks. On the CPU each decision compares 16 random bits from numpy's PCG64
    with a threshold (four decisions per 64-bit draw, keep probability exact to 1/65536): many
    times faster than torch's CPU generator for the many small masks a round needs. On a GPU
    they come from torch's generator."""

    def __init__(self, device: torch.device, seed: int) -> None:
        self.device = device
        if device.type == "cpu":
            self.bits = np.random.PCG64(seed)
        else:
            self.torch = torch.Generator(device=device).manual_seed(seed)

    def keep(self, shape: torch.Size, p: float) -> torch.Tensor:
        """Boolean mask, True with probability 1 - p."""
        if self.device.type == "cpu":
            n = int(np.prod(shape))
            sixteen_bits = self.bits.random_raw((n + 3) // 4).view(np.uint16)[:n]
            return torch.from_numpy(sixteen_bits.reshape(tuple(shape)) < round((1 - p) * 65536))
        return torch.rand(shape, generator=self.torch, device=self.device) >= p


class _Linear(torch.autograd.Function):
    """Every site's linear layer at once: x [sites, rows, in] @ weight[sites, out, in]^T + bias.

    Autograd of `baddbmm(bias, x, weight.transpose)` would hand back the weight's gradient
    transposed (strided), which makes every later pass over it slow; here it is computed in the
    weight's own layout."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        x, weight = ctx.saved_tensors
        grad_x = torch.bmm(grad_out, weight) if ctx.needs_input_grad[0] else None
        grad_weight = torch.bmm(grad_out.transpose(1, 2), x)
        return grad_x, grad_weight, grad_out.sum(1)


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
                # A product with a 0 / 1/(1-p) mask: several times cheaper than torch.where forward
                # and backward on the CPU, and equal to it up to rounding.
                h = h * dropout.keep(h.shape, layer.p).to(h.dtype).mul_(1 / (1 - layer.p))
        elif isinstance(layer, nn.Linear):
            h = _Linear.apply(h, state[f"{name}.weight"], state[f"{name}.bias"])
        elif isinstance(layer, nn.BatchNorm1d):
            h = _batch_norm(h, valid, state, name, layer.eps, train)
        else:  # the activation
            h = layer(h)
    logits = _Linear.apply(h, state["head.weight"], state["head.bias"])
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


class BatchPlan(NamedTuple):
    """A round's mini-batches for all sites, the sites ordered by how many steps they take (most
    first), so that the sites still training at any step are a prefix of that order."""

    rows: torch.Tensor  # [steps, sites, batch] row indices (0 where padded), sites in `order`
    valid: torch.Tensor  # [steps, sites, batch] which of them are real rows
    order: torch.Tensor  # [sites] site index at each position
    active: list[int]  # sites training at each step: the first active[k] of `order`


def batch_plan(orders: list[list[torch.Tensor]], batch_size: int, minimum: int, device: torch.device) -> BatchPlan:
    """Step k holds every site's k-th mini-batch from its per-epoch row orders (epochs one after
    the other); a batch of fewer than `minimum` rows is skipped, as the per-site path skips it."""
    per_site = []
    for epochs in orders:
        padded = torch.cat([F.pad(order, (0, -len(order) % batch_size), value=-1) for order in epochs])
        batches = padded.view(-1, batch_size)
        per_site.append(batches[(batches >= 0).sum(1) >= minimum])
    n_steps = torch.tensor([len(batches) for batches in per_site])
    order = torch.argsort(n_steps, descending=True, stable=True)
    rows = torch.full((int(n_steps.max()), len(orders), batch_size), -1, dtype=torch.long)
    for position, site in enumerate(order.tolist()):
        rows[: n_steps[site], position] = per_site[site]
    active = (n_steps[:, None] > torch.arange(len(rows))).sum(0).tolist()
    rows = rows.to(device)
    return BatchPlan(rows.clamp(min=0), rows >= 0, order.to(device), active)


def _permute_sites_(tensors: list[torch.Tensor], order: torch.Tensor) -> None:
    """In place, for every tensor: row i <- row order[i] (first dimension = sites)."""
    for tensor in tensors:
        tensor.copy_(tensor.index_select(0, order))


class SiteSGD:
    """SGD with momentum and weight decay on stacked parameters, where a step involves only the
    first n sites: their parameters and momentum move, the others' stay (as their own optimisers
    would). Each step updates every tensor in one fused pass over that prefix."""

    def __init__(self, parameters: Mapping[str, torch.Tensor], momentum: float, weight_decay: float) -> None:
        self.parameters = dict(parameters)
        self.momentum, self.weight_decay = momentum, weight_decay
        self.buffers = {name: torch.zeros_like(p) for name, p in self.parameters.items()} if momentum else {}

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor], lr: float, n: int) -> None:
        """`grads` of the first n sites' parameters, in the order of `parameters`."""
        sgd(
            [parameter[:n] for parameter in self.parameters.values()],
            [grad.contiguous() for grad in grads],  # the fused kernel needs dense gradients
            [buffer[:n] for buffer in self.buffers.values()] or [None] * len(grads),
            fused=True, weight_decay=self.weight_decay, momentum=self.momentum, lr=lr,
            dampening=0.0, nesterov=False, maximize=False,
        )


def train_round(
    model: MLP,
    state: Mapping[str, torch.Tensor],
    optimizer: SiteSGD,
    data: tuple[torch.Tensor, torch.Tensor],
    orders: list[list[torch.Tensor]],
    step_loss: Callable[..., torch.Tensor],
    batch_size: int,
    lr: float,
) -> torch.Tensor:
    """One round of local training for all sites; returns each site's mean loss per batch.

    `state` holds every site's tensors stacked (parameters and buffers, each tensor once), `data`
    every site's training rows padded to one length ([sites, rows, D], [sites, rows]);
    `step_loss(state, x, y, valid, sites, params)` gives the loss [n] of one step for the sites in
    it (`sites` None: all of them in their own order, else their indices), from their tensors
    `state` (trainable ones: `params`).

    For the round, the sites' rows of every tensor are put in the plan's order (most steps first),
    so that a step in which some sites have no batch left computes the others on views of the
    tensors' first rows, with no copies; the original order is restored at the end.
    """
    x_all, y_all = data
    n_sites = x_all.shape[0]
    minimum = 2 if any(isinstance(layer, nn.BatchNorm1d) for layer in model.body) else 1  # as per site
    plan = batch_plan(orders, batch_size, minimum, x_all.device)
    reordered = not torch.equal(plan.order, torch.arange(n_sites, device=x_all.device))
    in_place = [*state.values(), *optimizer.buffers.values()]
    if reordered:
        _permute_sites_(in_place, plan.order)
    # Rows picked by position in the sites' rows laid end to end: index_select is several times
    # faster than indexing by (site, row) pairs.
    x_rows, y_rows, per_site = x_all.flatten(0, 1), y_all.flatten(0, 1), x_all.shape[1]
    totals = torch.zeros(n_sites, device=x_all.device)
    for step_rows, step_valid, n in zip(plan.rows, plan.valid, plan.active):
        sites = plan.order[:n]
        picked = (sites[:, None] * per_site + step_rows[:n]).flatten()
        step_state = {name: value[:n] for name, value in state.items()}
        params = {name: step_state[name].detach().requires_grad_(True) for name in optimizer.parameters}
        step_state.update(params)
        losses = step_loss(step_state, x_rows.index_select(0, picked).view(n, batch_size, *x_all.shape[2:]),
                           y_rows.index_select(0, picked).view(n, batch_size),
                           step_valid[:n], sites if reordered or n < n_sites else None, params)
        grads = torch.autograd.grad(losses.sum(), list(params.values()))
        optimizer.step(list(grads), lr, n)
        totals[:n] += losses.detach()
    steps_taken = torch.tensor(plan.active, device=x_all.device)[:, None] > torch.arange(n_sites, device=x_all.device)
    mean_loss = totals / steps_taken.sum(0).clamp(min=1)
    if reordered:
        inverse = torch.argsort(plan.order)
        _permute_sites_(in_place, inverse)
        mean_loss = mean_loss[inverse]
    return mean_loss
