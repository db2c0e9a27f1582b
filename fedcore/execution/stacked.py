"""Training all sites of a round as one computation: the round's plan (`train_round`, `batch_plan`),
SGD on stacked tensors (`SiteSGD`), each site's dropout stream (`DropoutMasks`), and the paper's
MLP written out by hand for all sites at once (`forward`, `nll_step`): the fast path the batched
executor (`fedcore.execution.batched`) runs in torch and the compiled one (`.compiled`) feeds to C.

Every parameter is held once for all sites, stacked along a first `sites` dimension, so one
batched matrix product serves every site's layer. Each step takes the k-th mini-batch of every
site (in the same order the per-site path uses), padded to the batch size with a mask of real
rows. For the round the sites are ordered by how many steps they take, so a site with fewer
batches simply drops out of the tail of the order: the last steps compute the first sites only, on
views of the stacked tensors, and SGD with momentum updates only the sites that took part in the
step, exactly as their own optimiser would.

The hand-written pass writes the MLP's forward layer by layer with its backward beside it, and
autograd sees it as one node: a round has many small steps, and per-operation bookkeeping would
otherwise cost about as much as the arithmetic. The network itself is the module's
(`fedcore.models.MLP`): the pass reads its layers, widths, BatchNorm's eps and momentum and the
dropout rate from it, and `supports` claims a model only where the pass is checked to compute the
module's forward; every other model trains on the module's own layers (`fedcore.execution.vmapped`).

Differences from the per-site path are those of floating-point order, plus dropout: here each
site's masks come from a stream of its own, drawn for all of a step's sites in one call, so they
differ from (but are distributed like) the per-site path's. With dropout 0 both paths give the same
weights up to rounding.
"""
from __future__ import annotations

import copy
import functools
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.sgd import sgd

from fedcore.models import MLP, Dropout, min_batch_rows, tanh_by_sigmoid
from fedcore.training import tensor_state, weighted_nll

def supports(model: nn.Module) -> bool:
    """Whether the hand-written pass computes this model: our MLP built of the layers it knows
    (Linear with a bias; BatchNorm with an affine transform, running statistics and a momentum;
    our Dropout, at one rate throughout, as one step draws all its masks at once), whose forward
    pass, checked once on random rows in training (BatchNorm's statistics and dropout masks
    included) and in evaluation, is the module's own. A change to the MLP the pass does not know
    of therefore sends training to the module's own batched path (`fedcore.execution.vmapped`),
    never to a different network."""
    if model not in _SUPPORTED:
        _SUPPORTED[model] = _knows_layers(model) and _computes_the_module(model)
    return _SUPPORTED[model]


_SUPPORTED: weakref.WeakKeyDictionary[nn.Module, bool] = weakref.WeakKeyDictionary()


def _knows_layers(model: nn.Module) -> bool:
    if type(model) is not MLP:
        return False
    for layer in model.body:
        if isinstance(layer, nn.BatchNorm1d):
            known = layer.affine and layer.track_running_stats and layer.momentum is not None
        elif isinstance(layer, nn.Linear):
            known = layer.bias is not None
        else:
            known = isinstance(layer, (Dropout, nn.Tanh))
        if not known:
            return False
    return len({layer.p for layer in model.body if isinstance(layer, nn.Dropout)}) <= 1


def _computes_the_module(model: MLP) -> bool:
    """The pass and the module's forward agree, in float64, on random tensors and rows."""
    probe = copy.deepcopy(model).double().cpu()  # where the model is (a GPU) does not change its math
    generator = torch.Generator().manual_seed(0)
    state = {}
    for name, value in tensor_state(probe).items():
        if value.is_floating_point():
            noise = torch.randn(value.shape, generator=generator, dtype=torch.float64)
            value = noise.abs() + 0.5 if name.endswith("running_var") else 1 + 0.3 * noise if name.endswith(".w") else noise
        state[name] = value.detach().clone()
    x = torch.randn(1, 5, probe.f_in.b.shape[0], generator=generator, dtype=torch.float64)
    masks = spec(probe).dropout > 0
    for train in (True, False):
        stacked_state = {name: value[None].clone() for name, value in state.items()}
        ours = forward(probe, stacked_state, x, torch.ones(1, 5, dtype=torch.bool), train,
                       DropoutMasks(torch.device("cpu"), [0]) if train and masks else None)
        given = {name: value.clone() for name, value in state.items()}
        if train and masks:
            dropouts = [name for name, layer in probe.named_modules() if isinstance(layer, Dropout)]
            drawn = DropoutMasks(torch.device("cpu"), [0]).scaled(
                [0], 5, [layer.width for layer in spec(probe).layers if layer.kind == "dropout"],
                [spec(probe).dropout] * len(dropouts))
            given.update({f"{name}.mask": mask[0].double() for name, mask in zip(dropouts, drawn)})
        probe.train(train)
        with torch.no_grad():
            theirs = torch.func.functional_call(probe, given, (x[0],))
        if not torch.allclose(ours[0], theirs, rtol=1e-7, atol=1e-9):
            return False
        if train and not all(torch.allclose(stacked_state[name][0], given[name]) for name in state
                             if name.endswith(("running_mean", "running_var", "num_batches_tracked"))):
            return False
    return True


class DropoutMasks:
    """Seeded dropout masks, one random stream per site, so that a site's masks depend on nothing
    but its seed: not on which other sites train beside it, nor on how the sites are split among
    processes (`fedcore.execution.processes`). On the CPU each decision compares 16 random bits from numpy's
    PCG64 with a threshold (four decisions per 64-bit draw, keep probability exact to 1/65536):
    many times faster than torch's CPU generator for the many small masks a round needs. On a GPU
    one torch generator (seeded with the first site's seed) serves all sites."""

    def __init__(self, device: torch.device, seeds: list[int]) -> None:
        self.device = device
        if device.type == "cpu":
            self.streams = [np.random.PCG64(seed) for seed in seeds]
        else:
            self.torch = torch.Generator(device=device).manual_seed(seeds[0])

    def keep(self, sites: list[int], shape: tuple[int, ...], p: float | Sequence[float]) -> torch.Tensor:
        """Masks [len(sites), *shape], one per site from its own stream, that are 1 with
        probability 1 - p, else 0 (`p` one rate, or one per position of the last dimension):
        uint8 on the CPU (torch converts uint8 to float about ten times faster than bool there),
        bool on a GPU."""
        if self.device.type != "cpu":
            rates = torch.as_tensor(p, dtype=torch.float32, device=self.device)
            return torch.rand((len(sites), *shape), generator=self.torch, device=self.device) >= rates
        n = int(np.prod(shape))
        draws = np.empty((len(sites), (n + 3) // 4), dtype=np.uint64)
        for row, site in enumerate(sites):
            draws[row] = self.streams[site].random_raw(draws.shape[1])
        sixteen_bits = draws.view(np.uint16)[:, :n].reshape(len(sites), *shape)
        below = np.vectorize(self.keep_below, otypes=[np.int32])(p) if np.ndim(p) else self.keep_below(p)
        return torch.from_numpy((sixteen_bits < below).view(np.uint8))

    @staticmethod
    def keep_below(p: float) -> int:
        """A unit is kept when its 16-bit draw is under this."""
        return round((1 - p) * 65536)

    @staticmethod
    def keep_scale(p: float) -> float:
        """What a kept unit is multiplied by, so that dropout leaves each unit's mean as it was."""
        return 1 / (1 - p)

    def stream_states(self) -> np.ndarray:
        """Every site's PCG64 state as uint64 [sites, 4]: state (low, high word), increment (low,
        high), for the compiled round (`fedcore.execution.kernels`) to draw the same masks from."""
        words = []
        for stream in self.streams:
            state = stream.state["state"]
            words.append([state[key] >> shift & (2**64 - 1) for key in ("state", "inc") for shift in (0, 64)])
        return np.array(words, dtype=np.uint64)

    def set_stream_states(self, states: np.ndarray) -> None:
        """Move every site's stream on to the state the compiled round left in `states`."""
        for stream, (low, high, _, _) in zip(self.streams, states.tolist()):
            full = stream.state
            full["state"]["state"] = high << 64 | low
            stream.state = full

    def scaled(self, sites: list[int], rows: int, widths: list[int], rates: list[float]) -> list[torch.Tensor]:
        """Masks [sites, rows, width] of 0 and 1 / (1 - p) for dropout layers of these widths and
        rates, all drawn in one call: one step's dropout for every layer."""
        if len(set(rates)) == 1:  # one threshold and one scale (all the compiled round draws)
            p, scale = rates[0], self.keep_scale(rates[0])
        else:
            p = [rate for width, rate in zip(widths, rates) for _ in range(width)]
            scale = torch.tensor([self.keep_scale(rate) for rate in p], device=self.device)
        mask = self.keep(sites, (rows, sum(widths)), p).to(torch.get_default_dtype())
        return list(mask.mul_(scale).split(widths, dim=-1))


class _Layer(NamedTuple):
    kind: str  # "affine", "dropout", "linear", "batch_norm", "tanh"
    tensors: tuple[str, ...] = ()  # its parameters' names in the state: (b, w) or (weight, bias)
    name: str = ""  # prefix of its tensors' names (BatchNorm's running statistics)
    width: int = 0  # dropout: width of the activations it drops
    eps: float = 0.0  # BatchNorm's
    momentum: float = 0.0  # BatchNorm's: how far a training step moves its running statistics


class _Spec(NamedTuple):
    layers: list[_Layer]
    names: list[str]  # every parameter the pass reads, in the order of the layers
    dropout: float  # the rate of every dropout layer


_SPECS: weakref.WeakKeyDictionary[MLP, _Spec] = weakref.WeakKeyDictionary()


def spec(model: MLP) -> _Spec:
    """The MLP as the sequence of layers the batched pass runs (worked out once per model)."""
    if model not in _SPECS:
        layers = [_Layer("affine", ("f_in.b", "f_in.w"), "f_in")]
        width, rate = model.f_in.b.shape[0], 0.0
        for index, layer in enumerate(model.body):
            name = f"body.{index}"
            if isinstance(layer, nn.Dropout):
                layers.append(_Layer("dropout", width=width))
                rate = layer.p
            elif isinstance(layer, nn.Linear):
                layers.append(_Layer("linear", (f"{name}.weight", f"{name}.bias"), name))
                width = layer.out_features
            elif isinstance(layer, nn.BatchNorm1d):
                layers.append(_Layer("batch_norm", (f"{name}.weight", f"{name}.bias"), name, eps=layer.eps,
                                     momentum=layer.momentum))
            else:
                layers.append(_Layer("tanh"))
        layers += [_Layer("linear", ("head.weight", "head.bias"), "head"), _Layer("affine", ("f_out.b", "f_out.w"), "f_out")]
        _SPECS[model] = _Spec(layers, [name for layer in layers for name in layer.tensors], rate)
    return _SPECS[model]


class _Pass:
    """One forward pass of every site's MLP with its backward written out: the whole network is one
    node for autograd, so a training step costs a few dozen tensor operations and no per-operation
    bookkeeping (each of a round's many steps is small, so that bookkeeping would otherwise cost
    as much as the arithmetic). The equations are those of the layers in `fedcore.models`."""

    def __init__(self, spec: _Spec, state: Mapping[str, torch.Tensor], x: torch.Tensor, valid: torch.Tensor,
                 train: bool, dropout: DropoutMasks | None, sites: list[int] | None,
                 masks: Sequence[torch.Tensor] | None = None) -> None:
        self.layers = spec.layers
        self.state, self.x, self.valid, self.train = state, x, valid, train
        self.masks: list[torch.Tensor] = list(masks) if train and masks is not None else []
        if train and spec.dropout > 0 and masks is None:
            widths = [layer.width for layer in self.layers if layer.kind == "dropout"]
            sites = list(range(x.shape[0])) if sites is None else sites
            self.masks = dropout.scaled(sites, x.shape[1], widths, [spec.dropout] * len(widths))
        self.saved: list[tuple[torch.Tensor, ...]] = []

    def forward(self, tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Log-probabilities [sites, rows, classes]; in training, keeps what the backward needs."""
        h = self.x
        masks = iter(self.masks)
        for layer in self.layers:
            saved: tuple[torch.Tensor, ...] = ()
            if layer.kind == "affine":  # (h + b) * w, feature by feature
                bias, weight = (tensors[name][:, None] for name in layer.tensors)
                shifted = h + bias
                h, saved = shifted * weight, (shifted,)
            elif layer.kind == "dropout":
                mask = next(masks, None)
                if mask is not None:
                    h, saved = h * mask, (mask,)
            elif layer.kind == "linear":
                weight, bias = (tensors[name] for name in layer.tensors)
                h, saved = torch.baddbmm(bias.unsqueeze(1), h, weight.transpose(1, 2)), (h,)
            elif layer.kind == "batch_norm":
                h, saved = self._batch_norm(h, layer, tensors)
            else:
                h = tanh_by_sigmoid(h)
                saved = (h,)
            self.saved.append(saved)
        log_prob = F.log_softmax(h, dim=-1)
        # Kept detached: the returned tensor will point back at this pass through its autograd
        # node, and keeping that very tensor here would make a cycle that holds every saved
        # tensor of the step until Python's cycle collector happens to run.
        self.saved.append((log_prob.detach(),))
        return log_prob

    def _batch_norm(self, h: torch.Tensor, layer: _Layer, tensors: Mapping[str, torch.Tensor]):
        """In training, each site normalises over its valid rows and updates its running statistics
        (sites with fewer than two valid rows are left untouched)."""
        weight, bias = (tensors[name][:, None] for name in layer.tensors)
        if not self.train:
            mean, variance = (self.state[f"{layer.name}.running_{s}"][:, None] for s in ("mean", "var"))
            return (h - mean) / torch.sqrt(variance + layer.eps) * weight + bias, ()
        mask = self.valid[..., None].to(h.dtype)
        rows = mask.sum(1, keepdim=True).clamp(min=1)
        mean = (h * mask).sum(1, keepdim=True) / rows
        centred = (h - mean) * mask
        variance = (centred**2).sum(1, keepdim=True) / rows
        inverse_std = torch.rsqrt(variance + layer.eps)
        normalised = centred * inverse_std
        updated = rows.squeeze(1) >= 2  # [sites, 1]
        unbiased = variance.squeeze(1) * rows.squeeze(1) / (rows.squeeze(1) - 1).clamp(min=1)
        for buffer, batch_value in (("running_mean", mean.squeeze(1)), ("running_var", unbiased)):
            running = self.state[f"{layer.name}.{buffer}"]
            blended = (1 - layer.momentum) * running + layer.momentum * batch_value
            running.copy_(torch.where(updated, blended, running))
        self.state[f"{layer.name}.num_batches_tracked"].add_(updated.squeeze(1).long())
        return normalised * weight + bias, (normalised, inverse_std, mask, rows)

    def backward(self, grad: torch.Tensor, wanted: set[str]) -> dict[str, torch.Tensor]:
        """Gradients of the `wanted` tensors, given the gradient of the output."""
        tensors, grads = self.state, {}
        # Layers below the lowest one with a wanted tensor need no gradient.
        lowest = min((index for index, layer in enumerate(self.layers) if wanted.intersection(layer.tensors)),
                     default=len(self.layers))
        (log_prob,) = self.saved[-1]
        g = grad - log_prob.exp() * grad.sum(-1, keepdim=True)
        for index in range(len(self.layers) - 1, lowest - 1, -1):
            layer, saved, below = self.layers[index], self.saved[index], index > lowest
            if layer.kind == "affine":
                (shifted,) = saved
                bias_name, weight_name = layer.tensors
                weight = tensors[weight_name]
                if weight_name in wanted:
                    grads[weight_name] = (g * shifted).sum(1).sum_to_size(weight.shape)
                if bias_name in wanted:
                    grads[bias_name] = g.sum(1) * weight
                g = g * weight[:, None] if below else g
            elif layer.kind == "dropout":
                g = g * saved[0] if saved else g
            elif layer.kind == "linear":
                (h,) = saved
                weight_name, bias_name = layer.tensors
                if weight_name in wanted:
                    grads[weight_name] = torch.bmm(g.transpose(1, 2), h)
                if bias_name in wanted:
                    grads[bias_name] = g.sum(1)
                g = torch.bmm(g, tensors[weight_name]) if below else g
            elif layer.kind == "batch_norm":
                normalised, inverse_std, mask, rows = saved
                weight_name, bias_name = layer.tensors
                if weight_name in wanted:
                    grads[weight_name] = (g * normalised).sum(1)
                if bias_name in wanted:  # padded rows too: their output is the bias alone
                    grads[bias_name] = g.sum(1)
                g_normalised = g * tensors[weight_name][:, None] * mask
                mean_g = g_normalised.sum(1, keepdim=True) / rows
                mean_g_normalised = (g_normalised * normalised).sum(1, keepdim=True) / rows
                g = (g_normalised - mean_g - normalised * mean_g_normalised) * inverse_std * mask
            else:
                g = torch.ops.aten.tanh_backward(g, saved[0])
        return grads


class _Network(torch.autograd.Function):
    """The batched pass as a single autograd node (its backward is `_Pass.backward`)."""

    @staticmethod
    def forward(ctx, run: _Pass, names: list[str], *tensors: torch.Tensor) -> torch.Tensor:
        ctx.run, ctx.names = run, names
        run.state = {**run.state, **dict(zip(names, tensors))}
        return run.forward(run.state)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        wanted = {name for name, needed in zip(ctx.names, ctx.needs_input_grad[2:]) if needed}
        grads = ctx.run.backward(grad, wanted)
        return None, None, *(grads.get(name) for name in ctx.names)


def forward(
    model: MLP,
    state: Mapping[str, torch.Tensor],
    x: torch.Tensor,
    valid: torch.Tensor,
    train: bool,
    dropout: DropoutMasks | None = None,
    sites: list[int] | None = None,
    masks: Sequence[torch.Tensor] | None = None,
) -> torch.Tensor:
    """Log-probabilities [sites, rows, classes] of every site's model on its rows x [sites, rows, D].
    In training, `dropout` draws each site's masks from its own stream (`sites`: the sites of x's
    rows, as indices of those streams; None: 0, 1, ...), or `masks` gives them (one [sites, rows,
    width] of 0 and 1 / (1 - p) per dropout layer).

    `state` maps the model's parameter and buffer names to stacked tensors. In training,
    BatchNorm normalises each site over its valid rows and updates that site's running
    statistics (sites with fewer than two valid rows are left untouched). Gradients reach the
    parameters through one hand-written backward.
    """
    network = spec(model)
    run = _Pass(network, state, x, valid, train, dropout, sites, masks)
    if torch.is_grad_enabled() and any(state[name].requires_grad for name in network.names):
        return _Network.apply(run, network.names, *(state[name] for name in network.names))
    with torch.no_grad():
        return run.forward(state)


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
    lengths = tuple(tuple(len(order) for order in epochs) for epochs in orders)
    slots, order, active = _layout(lengths, batch_size, minimum, device)
    laid_end_to_end = torch.cat([order for epochs in orders for order in epochs]).to(device)
    valid = slots >= 0
    return BatchPlan(torch.where(valid, laid_end_to_end[slots.clamp(min=0)], 0), valid, order, active)


@functools.lru_cache(maxsize=16)
def _layout(lengths: tuple[tuple[int, ...], ...], batch_size: int, minimum: int,
            device: torch.device) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """The shape of every round's plan for sites whose epochs have these numbers of rows (the same
    every round, so worked out once): for each [step, site position, row slot], which entry of
    all the sites' row orders laid end to end fills it (-1 for none); the sites' order; `active`."""
    per_site, start = [], 0
    for epochs in lengths:
        padded = []
        for length in epochs:
            padded.append(F.pad(torch.arange(start, start + length), (0, -length % batch_size), value=-1))
            start += length
        batches = torch.cat(padded).view(-1, batch_size)
        per_site.append(batches[(batches >= 0).sum(1) >= minimum])
    n_steps = torch.tensor([len(batches) for batches in per_site])
    order = torch.argsort(n_steps, descending=True, stable=True)
    slots = torch.full((int(n_steps.max()), len(lengths), batch_size), -1, dtype=torch.long)
    for position, site in enumerate(order.tolist()):
        slots[: n_steps[site], position] = per_site[site]
    active = (n_steps[:, None] > torch.arange(len(slots))).sum(0).tolist()
    return slots.to(device), order.to(device), active


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
        self.order: torch.Tensor | None = None  # the site at each position of the momentum (None: site order)
        self._prefixes: dict[int, tuple[list[torch.Tensor], list[torch.Tensor | None]]] = {}

    def arrange(self, order: torch.Tensor) -> None:
        """Put the momentum in this order of the sites (the parameters' order during a round). It
        stays so between rounds, as a round's order is the same from one round to the next."""
        current = torch.arange(len(order), device=order.device) if self.order is None else self.order
        if not torch.equal(current, order):
            _permute_sites_(list(self.buffers.values()), torch.argsort(current)[order])
            self.order = order

    def _prefix(self, n: int) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
        """Views of the first n sites' parameters and momentum (made once for each n)."""
        if n not in self._prefixes:
            self._prefixes[n] = ([parameter[:n] for parameter in self.parameters.values()],
                                 [buffer[:n] for buffer in self.buffers.values()] or [None] * len(self.parameters))
        return self._prefixes[n]

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor], lr: float, n: int) -> None:
        """`grads` of the first n sites' parameters, in the order of `parameters`."""
        parameters, buffers = self._prefix(n)
        sgd(
            parameters,
            [grad.contiguous() for grad in grads],  # the fused kernel needs dense gradients
            buffers,
            fused=True, weight_decay=self.weight_decay, momentum=self.momentum, lr=lr,
            dampening=0.0, nesterov=False, maximize=False,
        )


def nll_step(model: MLP, state: Mapping[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, valid: torch.Tensor,
             weights: torch.Tensor | None, reduction: str, dropout: DropoutMasks | None, sites: list[int] | None,
             names: list[str]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One training step whose loss is the plain class-weighted NLL: each site's loss [sites] and
    the gradients of the tensors `names`, with the loss's gradient written in closed form and the
    pass's own backward, bypassing autograd (whose bookkeeping costs a good share of a small step)."""
    run = _Pass(spec(model), state, x, valid, True, dropout, sites)
    log_prob = run.forward(state)
    losses, row_weight = weighted_nll(log_prob, y, valid, weights, reduction)
    grad = torch.zeros_like(log_prob).scatter_(-1, y[..., None], -row_weight[..., None])
    grads = run.backward(grad, set(names))
    return losses, [grads[name] for name in names]


def train_round(
    model: MLP,
    state: Mapping[str, torch.Tensor],
    optimizer: SiteSGD,
    data: tuple[torch.Tensor, torch.Tensor],
    orders: list[list[torch.Tensor]],
    step_grads: Callable[..., tuple[torch.Tensor, list[torch.Tensor]]],
    batch_size: int,
    lr: float,
) -> torch.Tensor:
    """One round of local training for all sites; returns each site's mean loss per batch.

    `state` holds every site's tensors stacked (parameters and buffers, each tensor once), `data`
    every site's training rows padded to one length ([sites, rows, D], [sites, rows]);
    `step_grads(state, x, y, valid, sites)` gives, for one step of the sites in it (`sites` None: all of
    them in their own order, else their indices) with their tensors `state`, each one's loss [n]
    and the gradients of the optimiser's parameters, in its order.

    For the round, the sites' rows of every tensor are put in the plan's order (most steps first),
    so that a step in which some sites have no batch left computes the others on views of the
    tensors' first rows, with no copies; the state's original order is restored at the end (the
    optimiser's momentum, which only this function reads, stays in the plan's order).
    """
    x_all, y_all = data
    n_sites = x_all.shape[0]
    plan = batch_plan(orders, batch_size, min_batch_rows(model), x_all.device)
    reordered = not torch.equal(plan.order, torch.arange(n_sites, device=x_all.device))
    if reordered:
        _permute_sites_(list(state.values()), plan.order)
    optimizer.arrange(plan.order)
    # Rows picked by position in the sites' rows laid end to end: index_select is several times
    # faster than indexing by (site, row) pairs.
    x_rows, y_rows = x_all.flatten(0, 1), y_all.flatten(0, 1)
    picked = plan.order[:, None] * x_all.shape[1] + plan.rows  # [steps, sites, batch]
    prefixes: dict[int, dict[str, torch.Tensor]] = {}  # the first n sites' tensors, by n
    totals = torch.zeros(n_sites, device=x_all.device)
    for step, n in enumerate(plan.active):
        if n not in prefixes:
            prefixes[n] = {name: value[:n] for name, value in state.items()}
        rows = picked[step, :n].flatten()
        losses, grads = step_grads(prefixes[n], x_rows.index_select(0, rows).view(n, batch_size, *x_all.shape[2:]),
                                   y_rows.index_select(0, rows).view(n, batch_size), plan.valid[step, :n],
                                   plan.order[:n] if reordered or n < n_sites else None)
        optimizer.step(grads, lr, n)
        totals[:n] += losses
    steps_taken = torch.tensor(plan.active, device=x_all.device)[:, None] > torch.arange(n_sites, device=x_all.device)
    mean_loss = totals / steps_taken.sum(0).clamp(min=1)
    if reordered:
        inverse = torch.argsort(plan.order)
        _permute_sites_(list(state.values()), inverse)
        mean_loss = mean_loss[inverse]
    return mean_loss
