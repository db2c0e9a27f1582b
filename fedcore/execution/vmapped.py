"""The batched step computed by the model's own modules: `torch.func.vmap` over the sites of
`functional_call(model, one site's tensors)`, with autograd for the gradients over the stacked
parameters. Nothing about the network is written here: a new layer kind, a model an algorithm
builds around the MLP (APFL's mixture), or an algorithm's own loss trains batched as the
per-site path defines it, from the one definition in `fedcore.models` and `fedcore.algorithms`.

Where the model holds an MLP that the hand-written pass computes (`stacked.supports`: checked
against the module), each call of that MLP is computed by the pass for all sites at once, as one
autograd node with its own backward: APFL's two networks a step then cost what they cost on the
hand-written path, and only what is the algorithm's own (its mixture, its loss) runs op by op.

What a site computes is exactly its own step of the per-site path: the algorithm's `loss`, with
the site's model, on the site's real rows of the step (no padding: a step's sites are run in
groups of equal batch size, as BatchNorm and a mean loss see every row of a batch). Two things
differ from the per-site path, as on the hand-written batched path (`fedcore.execution.stacked`):
the floating-point order, and dropout, whose masks come from each site's own random stream
(`stacked.DropoutMasks`: the same draws as the hand-written pass and the compiled round), given
to the model's `fedcore.models.Dropout` layers with the call.

An algorithm's own `loss` runs here only where it is marked `batchable` (`fedcore.algorithms.base`):
a function of the model's tensors and one site's rows. What the first step finds it cannot do (a
Python branch on a tensor's value, a random draw of its own, a dropout layer run twice in a step)
stops the run there with the reason, never a silently different step: a loss needs the algorithm's
state of the round (set by its setup and start of the round), so it is first run then.
"""

from __future__ import annotations

import copy
import functools
import itertools
from typing import NamedTuple

import torch
from torch import nn
from torch.func import functional_call, vmap

from fedcore.errors import SpecError
from fedcore.execution import stacked
from fedcore.execution.base import Trainee
from fedcore.execution.stacked import DropoutMasks
from fedcore.models import MLP, Dropout, Tanh, tanh_by_sigmoid


class _SiteLoss(nn.Module):
    """The algorithm's loss of one site's batch, as a module holding the model, so that
    functional_call puts one site's tensors into the model for the whole of the loss (which may
    call the model, or parts of it, several times and read its parameters)."""

    def __init__(self, sim: Trainee, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.sim = sim

    def forward(self, x: torch.Tensor, y: torch.Tensor, site: torch.Tensor) -> torch.Tensor:
        return self.sim.algorithm.loss(self.sim, site, self.model, x, y)


class _HandWrittenMLP(torch.autograd.Function):
    """One site's MLP under vmap, computed for all the sites at once by the hand-written pass
    (`stacked.forward`, its own autograd node): vmap hands this rule every tensor with its sites'
    dimension, and autograd, outside vmap, records the pass as it records any operation."""

    @staticmethod
    def forward(mlp: MLP, train: bool, names: list[str], n_masks: int, x: torch.Tensor,
                *tensors: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("the hand-written MLP node runs under the module path's vmap only")

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        pass

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # autograd sees the pass's own node (under vmap), never this one
        raise RuntimeError("the hand-written MLP node runs under the module path's vmap only")

    @staticmethod
    def vmap(info, in_dims, mlp: MLP, train: bool, names: list[str], n_masks: int, x: torch.Tensor,
             *tensors: torch.Tensor):
        def sites_first(tensor: torch.Tensor, dim: int | None) -> torch.Tensor:
            return tensor.expand(info.batch_size, *tensor.shape) if dim is None else tensor.movedim(dim, 0)

        x, *stacked_tensors = (sites_first(tensor, dim) for tensor, dim in zip((x, *tensors), in_dims[4:]))
        masks, values = stacked_tensors[:n_masks], stacked_tensors[n_masks:]
        valid = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)  # a group's rows: none padded
        return stacked.forward(mlp, dict(zip(names, values)), x, valid, train, masks=masks), 0


def _through_the_pass(mlp: MLP, x: torch.Tensor) -> torch.Tensor:
    """MLP.forward for one site under vmap, by the hand-written pass (its masks as given to its Dropout layers)."""
    tensors = {name: value for name, value in itertools.chain(mlp.named_parameters(), mlp.named_buffers())
               if not name.endswith(".mask")}
    masks = []
    if mlp.training and stacked.spec(mlp).dropout > 0:
        masks = [layer.mask for layer in mlp.body if isinstance(layer, Dropout)]
        if any(mask is None for mask in masks):
            raise RuntimeError("an MLP trained on the module path was given no dropout masks")
    return _HandWrittenMLP.apply(mlp, mlp.training, list(tensors), len(masks), x, *masks, *tensors.values())


def _for_vmap(model: nn.Module) -> nn.Module:
    """`model` as the module path runs it: every MLP in it that the hand-written pass computes run
    by the pass, and every other tanh as its formula's plain operations (the MLP's tanh node is
    written the old way, which torch.func cannot run)."""
    for module in model.modules():
        if type(module) is MLP and stacked.supports(module):
            module.forward = functools.partial(_through_the_pass, module)
        elif isinstance(module, Tanh):
            module.forward = functools.partial(tanh_by_sigmoid, in_place=False)
    return model


class _Mask(NamedTuple):
    tensor: str  # "model.<layer>.mask": the tensor functional_call gives the layer
    width: int
    rate: float


def _masks_used(sim: Trainee, model: nn.Module) -> list[_Mask]:
    """The dropout layers one training step of `model` runs, in the order it runs them (their
    masks are drawn in that order), found by running the loss once on two rows."""
    dropouts = [(name, layer) for name, layer in model.named_modules() if isinstance(layer, Dropout) and layer.p > 0]
    calls: list[tuple[str, tuple[int, ...], float]] = []
    hooks = [layer.register_forward_pre_hook(lambda layer, args, name=name: calls.append((name, args[0].shape, layer.p)))
             for name, layer in dropouts]
    x, y = (part[:1].expand(2, *part.shape[1:]) for part in sim.train_sets[0])
    try:
        with torch.random.fork_rng(devices=[]):
            _SiteLoss(sim, model.train())(x, y, torch.tensor(0, device=x.device))
    finally:
        for hook in hooks:
            hook.remove()
    names = [name for name, _, _ in calls]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise SpecError(f"{sim.algorithm.title}'s loss runs the dropout layers {', '.join(twice)} more than once in a "
                        "step, which the batched path does not (one mask each a step); train it with execution "
                        "'per-site'.")
    if any(len(shape) != 2 for _, shape, _ in calls):
        raise SpecError(f"{sim.algorithm.title}'s model drops out more than [rows, features]: train it with execution "
                        "'per-site'.")
    return [_Mask(f"model.{name}.mask", shape[1], rate) for name, shape, rate in calls]


def why_not(sim: Trainee) -> str:
    """Why the model's own modules cannot train `sim`'s sites batched ('' when they can, as far
    as can be told before the first step)."""
    unmasked = [name for name, layer in sim.initial.named_modules()
                if isinstance(layer, nn.Dropout) and layer.p > 0 and not isinstance(layer, Dropout)]
    if unmasked:
        return (f"{sim.algorithm.title}'s dropout layers {', '.join(unmasked)} draw from torch's generator "
                "(fedcore.models.Dropout takes each site's own masks)")
    cumulative = [name for name, layer in sim.initial.named_modules()
                  if isinstance(layer, nn.modules.batchnorm._BatchNorm) and layer.momentum is None]
    if cumulative:  # its average weighs a batch by a Python number of the batches seen, which vmap cannot batch
        return f"{sim.algorithm.title}'s BatchNorm layers {', '.join(cumulative)} average cumulatively (momentum None)"
    return ""


class ModulePass:
    """One step of every site's local training, and every site's model run forward, computed by
    a copy of the simulation's model under vmap."""

    def __init__(self, sim: Trainee, dropout: DropoutMasks) -> None:
        self.sim = sim
        self.model = _for_vmap(copy.deepcopy(sim.initial))
        self.site_loss = _SiteLoss(sim, self.model)
        self.dropout = dropout
        self.masks: list[_Mask] | None = None  # found at the first step
        self._losses = vmap(self._one_loss, randomness="error")
        self._forward = vmap(self._one_forward, randomness="error")

    def _one_loss(self, tensors: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                  site: torch.Tensor) -> torch.Tensor:
        return functional_call(self.site_loss, tensors, (x, y, site))

    def _one_forward(self, tensors: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(self.model, tensors, (x,))

    def step(self, state: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, valid: torch.Tensor,
             sites: torch.Tensor | None, names: list[str]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Each site's loss [n] and the gradients of the tensors `names` (in that order), for one
        step of the n sites whose tensors are `state` ([n, ...]) on their batches x, y ([n, batch,
        ...], the first valid.sum(1) rows of each real); `sites`: their indices (None: 0..n-1)."""
        if self.masks is None:
            self.masks = _masks_used(self.sim, copy.deepcopy(self.sim.initial))
            try:
                return self._step(state, x, y, valid, sites, names)
            except Exception as error:  # vmap's own message says what it cannot run
                raise SpecError(f"{self.sim.algorithm.title}'s loss does not run under torch.func.vmap "
                                f"({type(error).__name__}: {error}); train it with execution 'per-site'.") from error
        return self._step(state, x, y, valid, sites, names)

    def _step(self, state: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, valid: torch.Tensor,
              sites: torch.Tensor | None, names: list[str]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        n, rows = x.shape[:2]
        sites = torch.arange(n, device=x.device) if sites is None else sites
        leaves = {name: state[name].detach().requires_grad_(True) for name in names}
        tensors = {f"model.{name}": value for name, value in {**state, **leaves}.items()}
        if self.masks:
            drawn = self.dropout.scaled(sites.tolist(), rows, [m.width for m in self.masks], [m.rate for m in self.masks])
            tensors.update({mask.tensor: value.to(device=x.device, dtype=x.dtype) for mask, value in zip(self.masks, drawn)})
        self.model.train()
        counts = valid.sum(1)
        sizes = counts.unique().tolist()
        if len(sizes) == 1:  # one batch size for all (most steps): the tensors as they are
            size = sizes[0]
            losses = self._losses(self._rows(tensors, size), x[:, :size], y[:, :size], sites)
            total = losses.sum()
        else:
            losses, total = torch.zeros(n, dtype=x.dtype, device=x.device), 0.0
            for size in sizes:
                members = (counts == size).nonzero().squeeze(1)
                part = {name: value.index_select(0, members) for name, value in tensors.items()}
                group = self._losses(self._rows(part, size), x[members, :size], y[members, :size], sites[members])
                losses[members] = group.detach()
                total = total + group.sum()
                with torch.no_grad():  # what the step changed in place (BatchNorm's statistics), back to its sites
                    for name in state.keys() - leaves.keys():
                        state[name].index_copy_(0, members, part[f"model.{name}"])
        grads = torch.autograd.grad(total, list(leaves.values()), allow_unused=True)
        return losses.detach(), [torch.zeros_like(leaf) if grad is None else grad for leaf, grad in zip(leaves.values(), grads)]

    def _rows(self, tensors: dict[str, torch.Tensor], size: int) -> dict[str, torch.Tensor]:
        """The tensors with every dropout mask cut to the first `size` rows of a batch."""
        return {name: value[:, :size] if name.endswith(".mask") else value for name, value in tensors.items()}

    @torch.no_grad()
    def forward(self, state: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """Every site's log-probabilities [n, rows, classes] on its rows x [n, rows, ...], in
        evaluation mode (a table model computes each row on its own there, so padded rows do
        not touch the others)."""
        self.model.eval()
        return self._forward(state, x)
