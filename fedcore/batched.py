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
        else:
            h = torch.tanh(h)
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


class SiteSGD:
    """SGD with momentum and weight decay on stacked parameters, where a step may involve only
    some sites: their parameters and momentum move, the others' stay (as their own optimisers
    would). With every site in the step, torch's fused SGD updates each tensor in one pass."""

    def __init__(self, parameters: Mapping[str, torch.Tensor], momentum: float, weight_decay: float) -> None:
        self.parameters = dict(parameters)
        self.momentum, self.weight_decay = momentum, weight_decay
        tensors = list(self.parameters.values())
        self.fused = torch.optim.SGD(tensors, lr=0.0, momentum=momentum, weight_decay=weight_decay, fused=True)
        self.buffers = {name: torch.zeros_like(p) for name, p in self.parameters.items()}
        if momentum:
            for name, tensor in self.parameters.items():
                self.fused.state[tensor]["momentum_buffer"] = self.buffers[name]

    @torch.no_grad()
    def step(self, grads: Mapping[str, torch.Tensor], lr: float, sites: torch.Tensor | None) -> None:
        """`grads` are for every site (`sites` None) or for the listed sites only, in that order."""
        if sites is None:
            for name, parameter in self.parameters.items():
                parameter.grad = grads[name].contiguous()  # the fused kernel needs dense gradients
            self.fused.param_groups[0]["lr"] = lr
            self.fused.step()
            return
        for name, parameter in self.parameters.items():
            direction = grads[name]
            if self.weight_decay:
                direction = direction.add(parameter.index_select(0, sites), alpha=self.weight_decay)
            if self.momentum:
                direction = self.buffers[name].index_select(0, sites).mul_(self.momentum).add_(direction)
                self.buffers[name].index_copy_(0, sites, direction)
            parameter.index_add_(0, sites, direction, alpha=-lr)


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

    `data` holds every site's training rows padded to one length ([sites, rows, D], [sites, rows]);
    `step_loss(state, x, y, valid, sites, params)` gives the loss [n] of one step for the sites in
    it (`sites` None: all of them, else their indices), from their tensors `state` (trainable
    ones: `params`). A step in which some sites have no batch left computes only the others.
    """
    x_all, y_all = data
    n_sites = x_all.shape[0]
    rows, valid = batch_plan(orders, batch_size, x_all.device)
    minimum = 2 if any(isinstance(layer, nn.BatchNorm1d) for layer in model.body) else 1  # as per site
    everyone = torch.arange(n_sites, device=x_all.device)
    totals = torch.zeros(n_sites, device=x_all.device)
    steps_taken = torch.zeros_like(totals)
    for step_rows, step_valid in zip(rows, valid):
        active = step_valid.sum(1) >= minimum
        if bool(active.all()):
            sites, index, step_state, params = None, everyone, state, optimizer.parameters
        else:
            index = active.nonzero().squeeze(1)
            if len(index) == 0:
                continue
            sites, step_rows, step_valid = index, step_rows[index], step_valid[index]
            # This step's sites only: copies of their tensors, parameters as fresh leaves.
            step_state = {name: value.index_select(0, index) for name, value in state.items()}
            params = {name: step_state[name].detach().requires_grad_(True) for name in optimizer.parameters}
            step_state.update(params)
        losses = step_loss(step_state, x_all[index[:, None], step_rows], y_all[index[:, None], step_rows],
                           step_valid, sites, params)
        grads = torch.autograd.grad(losses.sum(), list(params.values()))
        optimizer.step(dict(zip(optimizer.parameters, grads)), lr, sites)
        if sites is not None:  # BatchNorm running statistics were updated on the copies
            for name, value in step_state.items():
                if name not in params:
                    state[name].index_copy_(0, sites, value)
        totals.index_add_(0, index, losses.detach())
        steps_taken.index_add_(0, index, torch.ones_like(losses.detach()))
    return totals / steps_taken.clamp(min=1)
