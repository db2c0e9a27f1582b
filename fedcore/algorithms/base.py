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
overrides is computed. `penalty` and `class_weights` have one form for one site and for stacked
sites; an algorithm that overrides `loss` states the same for all sites stacked with
`batched_loss` (and, if its model is not the MLP itself, which network the batched path runs and
with which tensors it predicts), as APFL does, or it trains site by site.
"""

from __future__ import annotations

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
TRAINING_HOOKS = ("loss", "penalty", "batched_loss", "local_optimizer", "class_weights", "batched_template",
                  "prediction_state")


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
    def defining_class(cls, hook: str) -> type:
        """The class of this algorithm's hierarchy whose body defines `hook`."""
        return next(klass for klass in cls.__mro__ if hook in vars(klass))

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
        int), or one value per site for stacked tensors (`sites` a slice or an index tensor that
        selects those sites' rows of any stacked tensor)."""
        return 0.0

    def loss(
        self, ctx: Context, site: int, model: nn.Module, x: torch.Tensor, y: torch.Tensor
    ) -> torch.Tensor:
        """One site's loss of one batch (the per-site path; the batched path computes the same)."""
        return ctx.base_loss(model(x), y, site) + self.penalty(ctx, dict(model.named_parameters()), site)

    # -- the batched path (all sites' tensors stacked along a first dimension) -------------------
    def batched_template(self, model: nn.Module) -> nn.Module:
        """The network the batched path runs; the tensors come from the stacked state."""
        return model

    def batched_loss(self, ctx: Context, state: dict[str, torch.Tensor], run: Any, y: torch.Tensor,
                     valid: torch.Tensor, sites: torch.Tensor | None, params: dict[str, torch.Tensor]) -> torch.Tensor:
        """Each site's loss of one batched step, as `loss` computes it site by site. `run(tensors)`
        gives the template's log-probabilities on the step's rows with those tensors; `state`
        holds this step's sites' tensors (`sites`: their indices, None for all), `params` the
        trainable ones."""
        penalty = self.penalty(ctx, params, slice(None) if sites is None else sites)
        return ctx.batched_nll(run(state), y, valid, sites) + penalty

    def prediction_state(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The template's tensors a site predicts with (batched path)."""
        return state

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
    # In one process the server side holds every tensor anyway; over Flower (fedcore.flower) a site
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
