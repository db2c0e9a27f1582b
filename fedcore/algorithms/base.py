"""What an algorithm is: a handful of hooks the engine calls, defaulting to FedAvg.

An algorithm module states only what differs from FedAvg, the way its paper's algorithm box
does: which parameters never leave a site (`is_local`), how the server combines the rest
(`mixing`: row i holds the weights site i's new model gives every site's model), the class
weights of the local loss (`class_weights`) and any extra local loss term (`penalty`), a site
step before the server's (`before_aggregation`), any server step between rounds
(`after_aggregation`), and what it records (`record`). An algorithm that trains other parameters
in different rounds, or with another optimiser, says so in `local_optimizer`. The engine owns the
loop over rounds, devices, seeds, batching and evaluation. Hooks read only the typed context
(`fedcore.algorithms.context`); an algorithm that needs rows at the server says so in `needs`.

The training hooks (`TRAINING_HOOKS`) decide where an algorithm can train: the executors
(`fedcore.execution`) each compute some of them, and an algorithm runs only where everything it
overrides is computed. Every hook is written once, for the model as a module: the batched
executor runs the same `loss` for all sites at once under torch.func.vmap, where the algorithm
marks it `batchable` (as APFL does; an override left unmarked trains site by site). `penalty` is
called with one site's tensors, or with all sites' stacked (see its docstring).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from fedcore import records
from fedcore.algorithms.context import Context, Need, ServerContext
from fedcore.config import check_params, param, value_problem
from fedcore.errors import SpecError

# Hooks of the sites' local training: what decides which executors can train an algorithm.
TRAINING_HOOKS = ("loss", "penalty", "local_optimizer", "class_weights")


def batchable(hook: Callable[..., Any]) -> Callable[..., Any]:
    """Marks an algorithm's `loss` as one the batched executor may compute for all sites at once,
    by running it under torch.func.vmap over the sites' stacked tensors: a function of the model
    and one site's batch only. There, `model` holds one site's tensors (torch.func.functional_call)
    and `site` is a 0-dim index tensor, to be used only to index per-site tensors (the class
    weights, a stacked tensor's rows); no Python branch on a tensor's value, no random draw but
    through the model's dropout layers, and nothing changed outside the model. (A loss that vmap
    cannot run after all stops the run at its first batched step with the reason, never a
    silently different step: train it with execution 'per-site'.)"""
    hook.batchable = True  # type: ignore[attr-defined]
    return hook


@dataclass
class FedAvgParams:
    weighting: str = param(
        "uniform",
        "How the server weights sites when averaging: 'uniform' (the iFedAvg reference) or "
        "'samples' (by training rows, as in McMahan et al.).",
        ("uniform", "samples"),
    )


Records = tuple[records.Record, dict[str, np.ndarray]]

# Every algorithm by its command-line name: a subclass that states a `name` of its own registers itself
# when its module is imported (`fedcore.algorithms` imports every module of the package), so adding
# an algorithm is adding one file.
REGISTRY: dict[str, type[Algorithm]] = {}  # an evaluated round's record and its arrays


class Algorithm:
    """FedAvg (McMahan et al. 2017): every parameter is shared and averaged."""

    name: ClassVar[str] = "fedavg"
    title: ClassVar[str] = "FedAvg"
    summary: ClassVar[str] = "Averages every parameter of every site's model, affine layers too."
    Params: ClassVar[type] = FedAvgParams
    # Model variant: the paper's MLP, with BatchNorm for the algorithms built around it.
    batch_norm: ClassVar[bool] = False
    # Engine settings this algorithm's paper sets differently (applied unless the user sets them).
    config_defaults: ClassVar[dict[str, Any]] = {}
    # Centralized: one model trained on all sites' pooled training rows.
    pooled: ClassVar[bool] = False
    # The kinds of data it trains: 'table' (the MLP) and / or 'image' (a CNN backbone).
    inputs: ClassVar[tuple[str, ...]] = ("table", "image")
    # Which settings avoid what `needs` lists where it is not at hand (a real federation), if any.
    needs_hint: ClassVar[str] = ""
    # What it records at evaluated rounds (`fedcore.records`: the kind names the lens that shows it).
    Record: ClassVar[type[records.Record]] = records.Record

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in vars(cls):
            if REGISTRY.get(cls.name, cls) is not cls:
                raise TypeError(f"Two algorithms are called {cls.name!r}: {REGISTRY[cls.name].__qualname__} and "
                                f"{cls.__qualname__}.")
            REGISTRY[cls.name] = cls

    def __init__(self, params: Any = None) -> None:
        self.params = params if params is not None else self.Params()
        check_params(self.params, self.title)  # however they were made: declared types and bounds hold

    def needs(self) -> frozenset[Need]:
        """What the server side reads beyond the sites' models, with these parameters."""
        return frozenset({Need.POOLED_ROWS}) if self.pooled else frozenset()

    @classmethod
    def overridden_training_hooks(cls) -> frozenset[str]:
        """The training hooks this algorithm defines differently from FedAvg."""
        return frozenset(hook for hook in TRAINING_HOOKS if getattr(cls, hook) is not getattr(Algorithm, hook))

    @classmethod
    def is_batchable(cls, hook: str) -> bool:
        """Whether this algorithm's definition of `hook` is marked `batchable`."""
        return getattr(getattr(cls, hook), "batchable", False)

    # -- model ----------------------------------------------------------------------------
    def build_model(self, ctx: ServerContext) -> nn.Module:
        return ctx.make_model()

    def is_local(self, name: str, module: nn.Module) -> bool:
        """Whether parameter / buffer `name` (owned by `module`) never leaves its site."""
        return False

    # -- rounds ---------------------------------------------------------------------------
    def setup(self, ctx: ServerContext) -> None:
        """Once, after the models exist and before round 1."""

    def start_round(self, ctx: Context) -> None:
        """Before the sites' local updates of each round (e.g. remember the received models)."""

    def local_optimizer(self, ctx: Context, site: int, lr: float, sgd: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """The optimiser of a site's local update this round (per-site path): by default `sgd`, the
        site's own SGD (its momentum kept across rounds), at the schedule's learning rate `lr`."""
        for group in sgd.param_groups:
            group["lr"] = lr
        return sgd

    def class_weights(self, ctx: ServerContext) -> torch.Tensor | None:
        """Loss class weights [sites, classes] replacing the sites' own, or None to keep them."""
        return None

    def penalty(self, ctx: Context, params: dict[str, torch.Tensor],
                sites: int | slice | torch.Tensor) -> torch.Tensor | float:
        """Extra loss on the parameters of `sites`: a scalar for one site's tensors (`sites` an
        int, or a 0-dim index tensor when the batched executor runs `loss` under vmap), or one
        value per site for all sites' stacked tensors (`sites` a slice or a 1-dim index tensor that
        selects those sites' rows of any stacked tensor: the hand-written batched pass)."""
        return 0.0

    @batchable
    def loss(
        self, ctx: Context, site: int | torch.Tensor, model: nn.Module, x: torch.Tensor, y: torch.Tensor
    ) -> torch.Tensor:
        """One site's loss of one batch (the per-site path; the batched paths compute the same)."""
        return ctx.base_loss(model(x), y, site) + self.penalty(ctx, dict(model.named_parameters()), site)

    def mixing(self, ctx: ServerContext) -> torch.Tensor:
        """sites x sites weights for the shared parameters: new_i = sum_j M[i, j] * old_j."""
        n_sites = len(ctx.models)
        if self.params.weighting == "samples":
            sizes = torch.tensor([float(n) for n in ctx.train_sizes])
            return (sizes / sizes.sum()).expand(n_sites, n_sites).clone()
        return torch.full((n_sites, n_sites), 1.0 / n_sites)

    def before_aggregation(self, ctx: Context) -> None:
        """After every site's local update, before the server mixes: a further local step whose
        result is what the site sends, or a look at what each site learned on its own."""

    def after_aggregation(self, ctx: ServerContext) -> None:
        """Server-side step between rounds (AdaFed adapts its loss here)."""

    def record(self, ctx: ServerContext) -> Records:
        """The round's record (an instance of `Record`, stored as JSON) and arrays for its npz, at
        evaluated rounds."""
        return self.Record(), {}

    # -- what the server reads of the parameters that stay at the sites --------------------------
    # In one process the server side holds every tensor anyway; over Flower (application.flower) a site
    # sends exactly these, so what leaves a site is stated here, next to what stays local.
    def recorded_locals(self, ctx: ServerContext) -> list[str]:
        """Local tensors `record` reads (iFedAvg's b_in / w_in): sent at evaluated rounds, and
        only by sites whose configuration allows it."""
        return []

    def server_step_locals(self, ctx: ServerContext) -> list[str]:
        """Local tensors this round's `after_aggregation` reads (FedHealth2's f-variant BatchNorm
        statistics, once): sent with the round's update."""
        return []


def params_from_dict(algorithm: type[Algorithm], values: dict[str, Any]) -> Any:
    """Build an algorithm's Params from plain values, naming any unknown or invalid one."""
    known = {f.name: f for f in fields(algorithm.Params)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        listed = ", ".join(sorted(known)) or "none"
        raise SpecError(
            f"{algorithm.title} has no parameter {', '.join(unknown)}; its parameters: {listed}."
        )
    for key, value in values.items():
        problem = value_problem(known[key], value)
        if problem:
            raise SpecError(f"{algorithm.title}: {problem}")
    return algorithm.Params(**values)


class AtSite:
    """The algorithm as sites run it away from the server (a Flower site, or a process training a
    group of sites): its model, local loss and start of a round are the algorithm's own; its setup
    and the class weights it chooses belong to the server, whose choice ([sites, classes] for
    these sites, or None) arrives with the round."""

    def __init__(self, algorithm: Algorithm, class_weights: torch.Tensor | None) -> None:
        self._algorithm = algorithm
        self._class_weights = class_weights

    def __getattr__(self, name: str) -> Any:
        return getattr(self._algorithm, name)

    def setup(self, ctx: ServerContext) -> None:
        """The server's step; nothing to do at a site."""

    def class_weights(self, ctx: ServerContext) -> torch.Tensor | None:
        return self._class_weights
