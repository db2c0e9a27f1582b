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

Where the loss gives the same when run once on all the step's sites' stacked tensors (each
tensor with its sites' dimension first, the MLPs by the pass, the class-weighted NLL of each
site's real rows), it is run that way instead of under vmap: vmap's dispatch of every operation
and its one call per batch size in a round's last steps cost APFL about twice the time of a
round. Whether it does is checked once per run, at the first step, against vmap on the step's own
tensors with a row of one site cut and again without its last site (so that a loss that counts
rows, or reads a batch's length as its rows, is found); a loss that differs or fails there runs
under vmap for the whole run.

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
from fedcore.training import weighted_nll


class _SiteLoss(nn.Module):
    """The algorithm's loss of one site's batch, as a module holding the model, so that
    functional_call puts one site's tensors into the model for the whole of the loss (which may
    call the model, or parts of it, several times and read its parameters). `ctx`: what the loss
    is given as the simulation."""

    def __init__(self, sim: Trainee, model: nn.Module, ctx: object | None = None) -> None:
        super().__init__()
        self.model = model
        self.sim = sim
        self.ctx = sim if ctx is None else ctx

    def forward(self, x: torch.Tensor, y: torch.Tensor, site: torch.Tensor) -> torch.Tensor:
        return self.sim.algorithm.loss(self.ctx, site, self.model, x, y)


class _Rows:
    """The real rows of a step run on the stacked tensors ([sites, rows]); None under vmap."""

    valid: torch.Tensor | None = None


class _StackedSites:
    """The simulation as a loss run once on all of a step's sites sees it: `base_loss` gives each
    site's class-weighted NLL of its real rows [sites] (as base_loss gives one site's), `site`
    being the sites' indices; everything else is the simulation's."""

    def __init__(self, sim: Trainee, rows: _Rows) -> None:
        self._sim = sim
        self._rows = rows

    def __getattr__(self, name: str):
        return getattr(self._sim, name)

    def base_loss(self, log_prob: torch.Tensor, y: torch.Tensor, site: torch.Tensor) -> torch.Tensor:
        weights = self._sim.loss_weights()
        return weighted_nll(log_prob, y, self._rows.valid, None if weights is None else weights[site],
                            self._sim.config.loss_reduction)[0]


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


def _through_the_pass(mlp: MLP, rows: _Rows, x: torch.Tensor) -> torch.Tensor:
    """MLP.forward by the hand-written pass (its masks as given to its Dropout layers): for one
    site under vmap, or for the stacked sites of a step run on them (`rows.valid` set)."""
    tensors = {name: value for name, value in itertools.chain(mlp.named_parameters(), mlp.named_buffers())
               if not name.endswith(".mask")}
    masks = []
    if mlp.training and stacked.spec(mlp).dropout > 0:
        masks = [layer.mask for layer in mlp.body if isinstance(layer, Dropout)]
        if any(mask is None for mask in masks):
            raise RuntimeError("an MLP trained on the module path was given no dropout masks")
    if rows.valid is not None:
        return stacked.forward(mlp, tensors, x, rows.valid, mlp.training, masks=masks)
    return _HandWrittenMLP.apply(mlp, mlp.training, list(tensors), len(masks), x, *masks, *tensors.values())


def _for_vmap(model: nn.Module, rows: _Rows) -> nn.Module:
    """`model` as the module path runs it: every MLP in it that the hand-written pass computes run
    by the pass, and every other tanh as its formula's plain operations (the MLP's tanh node is
    written the old way, which torch.func cannot run)."""
    for module in model.modules():
        if type(module) is MLP and stacked.supports(module):
            module.forward = functools.partial(_through_the_pass, module, rows)
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


def _trained(state: dict[str, torch.Tensor], names: list[str]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The trained tensors `names` of `state` as leaves of a new graph, and every tensor by its
    name in the loss module (`_SiteLoss`), those leaves among them."""
    leaves = {name: state[name].detach().requires_grad_(True) for name in names}
    return leaves, {f"model.{name}": value for name, value in {**state, **leaves}.items()}


def _gradients(total: torch.Tensor, leaves: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """d total / d each leaf (zeros for a tensor the loss does not use)."""
    grads = torch.autograd.grad(total, list(leaves.values()), allow_unused=True)
    return [torch.zeros_like(leaf) if grad is None else grad for leaf, grad in zip(leaves.values(), grads)]


class ModulePass:
    """One step of every site's local training, and every site's model run forward, computed by
    a copy of the simulation's model under vmap (or, where the loss is checked to give the same,
    once on the stacked tensors)."""

    def __init__(self, sim: Trainee, dropout: DropoutMasks) -> None:
        self.sim = sim
        self.rows = _Rows()
        self.model = _for_vmap(copy.deepcopy(sim.initial), self.rows)
        self.site_loss = _SiteLoss(sim, self.model)
        self.stacked_loss = _SiteLoss(sim, self.model, _StackedSites(sim, self.rows))
        self.dropout = dropout
        self.masks: list[_Mask] | None = None  # found at the first step
        self.on_stacked: bool | None = None  # the loss run once on the stacked tensors? (first step)
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
        n, rows = x.shape[:2]
        sites = torch.arange(n, device=x.device) if sites is None else sites
        masks = {}
        if self.masks is None:
            self.masks = _masks_used(self.sim, copy.deepcopy(self.sim.initial))
        if self.masks:
            drawn = self.dropout.scaled(sites.tolist(), rows, [m.width for m in self.masks], [m.rate for m in self.masks])
            masks = {mask.tensor: value.to(device=x.device, dtype=x.dtype) for mask, value in zip(self.masks, drawn)}
        if self.on_stacked is None:
            try:
                self.on_stacked = self._same_on_stacked(state, masks, x, y, valid, sites, names)
            except Exception as error:  # vmap's own message says what it cannot run
                raise SpecError(f"{self.sim.algorithm.title}'s loss does not run under torch.func.vmap "
                                f"({type(error).__name__}: {error}); train it with execution 'per-site'.") from error
        run = self._on_stacked if self.on_stacked else self._under_vmap
        return run(state, masks, x, y, valid, sites, names)

    def _same_on_stacked(self, state: dict[str, torch.Tensor], masks: dict[str, torch.Tensor], x: torch.Tensor,
                         y: torch.Tensor, valid: torch.Tensor, sites: torch.Tensor, names: list[str]) -> bool:
        """Whether the loss run once on the stacked tensors gives this step's losses, gradients and
        changed buffers as vmap gives them, on copies of the sites' tensors: all sites, the first
        site's last real row left out (rows of different counts, a padded row that must not
        count), and the first site alone (so that a loss that takes the count of sites for its
        count of rows differs in one of the two)."""
        cut, real = valid.clone(), int(valid[0].sum())
        if real > 2:  # (BatchNorm needs two rows)
            cut[0, real - 1] = False
        probes = [(slice(None), cut)] + ([(slice(0, 1), valid[:1])] if len(sites) > 1 else [])
        for part, part_valid in probes:
            copies = [{name: value[part].clone() for name, value in state.items()} for _ in range(2)]
            given = {name: value[part] for name, value in masks.items()}
            args = (x[part], y[part], part_valid, sites[part], names)
            expected = self._under_vmap(copies[0], given, *args)
            try:
                ours = self._on_stacked(copies[1], given, *args)
            except Exception:  # an operation that does not take the sites' dimension: vmap's
                return False
            scale = max(float(expected[0].abs().max()), *(float(g.abs().max()) for g in expected[1]), 1e-12)
            same = lambda a, b: a.shape == b.shape and torch.allclose(a, b, rtol=1e-4, atol=1e-5 * scale)  # noqa: E731
            if not (same(ours[0], expected[0]) and all(map(same, ours[1], expected[1]))
                    and all(torch.allclose(copies[1][name], copies[0][name], rtol=1e-4, atol=1e-6)
                            for name in state if name not in names)):
                return False
        return True

    def _on_stacked(self, state: dict[str, torch.Tensor], masks: dict[str, torch.Tensor], x: torch.Tensor,
                    y: torch.Tensor, valid: torch.Tensor, sites: torch.Tensor, names: list[str]
                    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The step with the loss run once on all sites' stacked tensors (padded rows left out by
        the pass and by base_loss)."""
        leaves, tensors = _trained(state, names)
        self.model.train()
        self.rows.valid = valid
        try:
            losses = functional_call(self.stacked_loss, {**tensors, **masks}, (x, y, sites))
        finally:
            self.rows.valid = None
        if losses.shape != (len(sites),):
            raise ValueError(f"the loss of {len(sites)} stacked sites has the shape {tuple(losses.shape)}")
        return losses.detach(), _gradients(losses.sum(), leaves)

    def _under_vmap(self, state: dict[str, torch.Tensor], masks: dict[str, torch.Tensor], x: torch.Tensor,
                    y: torch.Tensor, valid: torch.Tensor, sites: torch.Tensor, names: list[str]
                    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The step with the loss run for one site under vmap, the sites in groups of equal batch size."""
        n = x.shape[0]
        leaves, tensors = _trained(state, names)
        tensors.update(masks)
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
        return losses.detach(), _gradients(total, leaves)

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
