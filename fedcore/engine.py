"""The round loop: local updates, aggregation through the algorithm's hooks, evaluation, records.

One round, for every algorithm:
    1. each site trains its model for `local_epochs` on its own rows (SGD whose momentum persists
       across rounds, learning rate from the step schedule);
    2. the server mixes the shared parameters with the algorithm's mixing matrix;
    3. the algorithm's server step runs (e.g. AdaFed's adaptive loss);
    4. every k rounds, each site's model is scored on that site's own hold-out.

Every parameter and buffer is stored once for all sites, stacked along a first `sites`
dimension; each site's model is a module whose tensors are views into that stack. Mixing is
one in-place operation on the stack. Local training either runs site after site on those
modules (any model) or as one batched computation over the stack (`fedcore.batched`, the MLP
family): the same algorithm, the same batch order, chosen automatically.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fedcore import batched, kernels, site_groups
from fedcore.errors import DataError, SpecError
from fedcore.federation import Federation, class_weights, stratified_holdout
from fedcore.metrics import LOWER_IS_BETTER, mean_and_worst, pad_sites, site_metrics
from fedcore.models import BACKBONES, MLP, ImageClassifier, build_backbone, min_batch_rows
from fedcore.seeding import derive_seed

if TYPE_CHECKING:
    from fedcore.algorithms.base import Algorithm


def _setting(default: Any, help: str, choices: tuple[Any, ...] | None = None) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass
class TrainConfig:
    """Engine settings shared by all algorithms; defaults are the iFedAvg paper's protocol."""

    rounds: int = _setting(1000, "Communication rounds.")
    local_epochs: int = _setting(1, "Passes over a site's training rows per round.")
    batch_size: int = _setting(16, "Rows per SGD step.")
    lr: float = _setting(0.002, "SGD learning rate at round 1.")
    momentum: float = _setting(0.5, "SGD momentum; each site keeps its own buffer across rounds.")
    lr_decay: float = _setting(0.9, "Factor applied to the learning rate at each decay step.")
    lr_decay_every: int = _setting(
        0, "Rounds between decay steps; 0 means rounds/50 (the paper decays 50 times per run)."
    )
    weight_decay: float = _setting(0.0, "L2 penalty of the SGD optimiser.")
    hidden: tuple[int, ...] = _setting((128, 64), "Tables: widths of the MLP's hidden layers.")
    dropout: float = _setting(0.2, "Tables: dropout rate after f_in and after each hidden layer of the MLP.")
    backbone: str = _setting(
        "cnn",
        "Images: the feature extractor. 'cnn' is a small CNN with BatchNorm trained from scratch; the others "
        "are torchvision networks (their convolutional part), pretrained only with backbone_weights.",
        BACKBONES,
    )
    backbone_weights: str = _setting(
        "", "Images: a local file with the backbone's weights (a PyTorch state dict, e.g. torchvision's "
            "ImageNet file); nothing is downloaded. Empty: random initialisation."
    )
    class_weighting: str = _setting(
        "inverse",
        "Loss class weights: 'inverse' prevalence of each site's own training rows (paper), "
        "or 'none'.",
        ("inverse", "none"),
    )
    loss_reduction: str = _setting(
        "sum", "NLL over a batch: 'sum' (iFedAvg reference) or 'mean'.", ("sum", "mean")
    )
    eval_every: int = _setting(
        0, "Evaluate every k rounds; 0 means every round up to 200 rounds, else about 200 times."
    )
    execution: str = _setting(
        "auto",
        "'batched' trains all sites as one computation in torch (the MLP family), 'compiled' the same "
        "rounds with the compiled C round (the CPU; algorithms whose local loss is the plain NLL), "
        "'per-site' one model after another; 'auto' picks compiled, else batched, wherever they can run.",
        ("auto", "compiled", "batched", "per-site"),
    )
    processes: int = _setting(
        0,
        "Processes that train a batched round's sites in parallel, one torch thread each (the CPU, Linux); "
        "0 picks one per torch thread, keeping at least 8 sites in each. Results do not depend on it.",
    )
    seed: int = _setting(0, "Seeds the hold-out split, initialisation, batch order and dropout.")
    device: str = _setting("auto", "'auto' (CUDA when present), 'cpu' or 'cuda'.", ("auto", "cpu", "cuda"))

    def __post_init__(self) -> None:
        self.hidden = tuple(int(h) for h in self.hidden)
        positive = ("rounds", "local_epochs", "batch_size")
        for name in positive:
            if int(getattr(self, name)) < 1:
                raise SpecError(f"{name} must be at least 1, not {getattr(self, name)}.")
        for name in ("lr", "momentum", "weight_decay", "lr_decay_every", "eval_every", "dropout", "processes"):
            if getattr(self, name) < 0:
                raise SpecError(f"{name} cannot be negative ({getattr(self, name)}).")
        if not 0 < self.lr_decay <= 1:
            raise SpecError(f"lr_decay must be in (0, 1], not {self.lr_decay}.")
        if self.dropout >= 1:
            raise SpecError(f"dropout must be below 1, not {self.dropout}.")
        for f in fields(self):
            choices = f.metadata.get("choices")
            if choices and getattr(self, f.name) not in choices:
                raise SpecError(f"{f.name} must be one of {list(choices)}, not {getattr(self, f.name)!r}.")

    @property
    def evaluation_interval(self) -> int:
        return self.eval_every or (1 if self.rounds <= 200 else math.ceil(self.rounds / 200))

    def is_evaluated(self, round_: int) -> bool:
        return round_ % self.evaluation_interval == 0 or round_ == self.rounds

    def lr_at(self, round_: int) -> float:
        """StepLR stepped once per round: lr * decay ** ((round - 1) // every)."""
        return self.lr * self.lr_factor(round_)

    def lr_factor(self, round_: int) -> float:
        """The schedule's factor at a round (algorithms with their own learning rates scale them by it)."""
        every = self.lr_decay_every or max(1, self.rounds // 50)
        return self.lr_decay ** ((round_ - 1) // every)

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["hidden"] = list(self.hidden)
        return values


def resolve_device(choice: str) -> torch.device:
    if choice == "cuda" and not torch.cuda.is_available():
        raise SpecError("CUDA was requested but no GPU is visible to PyTorch; use --device cpu or auto.")
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(choice)


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
    """One site's local update; returns the mean loss per batch (as the loss is reduced).

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


def mix_(stacked: dict[str, torch.Tensor], names: Iterable[str], mixing: torch.Tensor) -> None:
    """In place, for every name: value[i] <- sum_j mixing[i, j] * value[j] (first dim = sites)."""
    # Where every site gets the same mixture (FedAvg and its kin), it is computed once.
    same_for_all = bool((mixing == mixing[:1]).all())
    for name in names:
        value = stacked[name]
        weights = mixing[:1] if same_for_all else mixing
        value.copy_(torch.tensordot(weights.to(device=value.device, dtype=value.dtype), value, dims=1).expand_as(value))


def tensor_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters and buffers by qualified name (live tensors, not copies)."""
    return {**dict(model.named_parameters()), **dict(model.named_buffers())}


def owners(model: nn.Module) -> dict[str, nn.Module]:
    """Qualified parameter / buffer name -> the module that directly owns it."""
    owned = {}
    for prefix, module in model.named_modules():
        for local in [*module._parameters, *module._buffers]:
            owned[f"{prefix}.{local}" if prefix else local] = module
    return owned


def _alias(model: nn.Module, stacked: dict[str, torch.Tensor], site: int) -> None:
    """Make every parameter and buffer of `model` a view of its site's slice of `stacked`."""
    for prefix, module in model.named_modules():
        for name, parameter in list(module._parameters.items()):
            if parameter is not None:
                view = stacked[f"{prefix}.{name}" if prefix else name][site]
                module._parameters[name] = nn.Parameter(view, requires_grad=parameter.requires_grad)
        for name, buffer in list(module._buffers.items()):
            if buffer is not None:
                module._buffers[name] = stacked[f"{prefix}.{name}" if prefix else name][site]


class FederatedModels:
    """Every site's model, its tensors stacked along a first `sites` dimension, and the server side
    of a round: what the algorithms' hooks read. The in-process Simulation is one (it adds the
    sites' rows and their local training); so is the Flower server (`fedcore.flower`), which
    holds the sites' names and sizes but none of their rows.
    """

    def __init__(self, federation: Federation, algorithm: Algorithm, config: TrainConfig,
                 train_sizes: list[int], tensors: dict[str, torch.Tensor] | None = None) -> None:
        self.federation = federation
        self.algorithm = algorithm
        self.config = config
        self.device = resolve_device(config.device)
        self.round = 0
        self.site_names = federation.site_names
        _check_inputs(federation, algorithm)
        self.train_sizes = train_sizes  # training rows behind each model (one model for pooled data)

        torch.manual_seed(derive_seed(config.seed, "init"))
        self.initial = algorithm.build_model(self).to(self.device)
        self.models = [copy.deepcopy(self.initial) for _ in train_sizes]
        self.adopt(tensors or {
            name: value.detach().unsqueeze(0).repeat(len(train_sizes), *([1] * value.ndim))
            for name, value in tensor_state(self.initial).items()
        })
        owned = owners(self.initial)
        self.local_names = sorted(n for n in self.stacked if algorithm.is_local(n, owned[n]))
        self.shared_names = sorted(
            n for n in self.stacked if n not in self.local_names and self.stacked[n].is_floating_point()
        )

    def adopt(self, stacked: dict[str, torch.Tensor]) -> None:
        """Hold every site's tensors in `stacked` (each site's model a view of its rows)."""
        self.stacked = stacked
        for site, model in enumerate(self.models):
            _alias(model, stacked, site)
        self.states = [tensor_state(m) for m in self.models]

    def make_model(self) -> nn.Module:
        """The federation's model: the MLP for tables, the backbone with a classifier for images."""
        if self.federation.is_tabular:
            return self.make_mlp()
        return ImageClassifier(*self.make_backbone(), self.federation.n_classes)

    def make_backbone(self) -> tuple[nn.Module, int]:
        """The configured image backbone and the channels of its feature map."""
        if self.federation.is_tabular:
            raise DataError(f"'{self.federation.name}' is a table; {self.algorithm.title} needs images.")
        return build_backbone(self.config.backbone, self.federation.input_shape, self.config.backbone_weights or None)

    def make_mlp(self, **overrides: Any) -> MLP:
        if not self.federation.is_tabular:
            raise DataError(f"'{self.federation.name}' holds images; {self.algorithm.title}'s MLP needs a table.")
        if self.config.backbone != "cnn" or self.config.backbone_weights:
            raise SpecError("backbone and backbone_weights apply to image federations; "
                            f"'{self.federation.name}' is a table (the MLP takes hidden and dropout).")
        options = dict(
            hidden=self.config.hidden,
            dropout=self.config.dropout,
            batch_norm=self.algorithm.batch_norm,
        )
        options.update(overrides)
        return MLP(self.federation.n_features, self.federation.n_classes, **options)

    def aggregate(self) -> None:
        """The server side of a round, after the sites' local updates: the shared parameters are
        mixed with the algorithm's mixing matrix, then the algorithm's server step runs."""
        if self.shared_names and len(self.models) > 1:
            with torch.no_grad():
                mix_(self.stacked, self.shared_names, self.algorithm.mixing(self))
        self.algorithm.after_aggregation(self)

    @torch.no_grad()
    def predict(self, model: nn.Module, x: torch.Tensor, batch_size: int = 512) -> torch.Tensor:
        """Log-probabilities in evaluation mode (dropout off, BatchNorm running statistics), in
        batches so that large images fit in memory."""
        model.eval()
        return torch.cat([model(x[start : start + batch_size]) for start in range(0, len(x), batch_size)])

    @torch.no_grad()
    def predict_each(self, x: torch.Tensor) -> torch.Tensor:
        """Every site's model on the same rows: log-probabilities [sites, rows, classes]."""
        return torch.stack([self.predict(model, x) for model in self.models])


class Simulation(FederatedModels):
    """All sites of a federation trained on one machine (in one process, or with the batched path
    on several cores, its sites split among processes: `fedcore.site_groups`).

    `tensors`: the sites' stacked tensors to train in place (a worker's rows of another
    simulation's); by default they start from the seeded initialisation."""

    def __init__(self, federation: Federation, algorithm: Algorithm, config: TrainConfig,
                 tensors: dict[str, torch.Tensor] | None = None) -> None:
        sizes = [site.n_train for site in federation.sites]
        super().__init__(federation, algorithm, config, [sum(sizes)] if algorithm.pooled else sizes, tensors)
        to_device = lambda t: t.to(self.device)  # noqa: E731
        self.test_sets = [(to_device(s.x_test), to_device(s.y_test)) for s in federation.sites]
        if algorithm.pooled:
            self.train_sets = [tuple(map(to_device, federation.pooled_train()))]
        else:
            self.train_sets = [(to_device(s.x_train), to_device(s.y_train)) for s in federation.sites]
        self.class_weights = torch.stack([
            class_weights(y, federation.n_classes) for _, y in self.train_sets
        ]).to(self.device)
        self.workers: site_groups.Workers | None = None  # processes training other sites: started at round 1
        self.execution = self._choose_execution(self.initial)
        self.compiled = False  # the batched path's rounds trained by the compiled C round
        if self.execution == "batched":
            self._prepare_batched(self.initial)
        else:
            if config.processes > 1:
                raise SpecError(f"processes={config.processes} applies to the batched path; {algorithm.title} "
                                "trains here one site after another (use processes 1 or 0).")
            self.optimizers = [self.make_optimizer(m) for m in self.models]
        algorithm.setup(self)

    def _choose_execution(self, model: nn.Module) -> str:
        possible = self.algorithm.batchable and batched.supports(self.algorithm.batched_template(model))
        if self.config.execution in ("batched", "compiled") and not possible:
            raise SpecError(f"{self.algorithm.title} with this model cannot be trained batched; "
                            "use execution 'per-site' or 'auto'.")
        return "batched" if possible and self.config.execution != "per-site" else "per-site"

    def _prepare_batched(self, model: nn.Module) -> None:
        self.template = self.algorithm.batched_template(model)
        groups = site_groups.count(self.config.processes, len(self.models), self.device.type == "cpu")
        # Bounds of the groups of sites each process trains; this process trains the first.
        self.bounds = site_groups.split(self.train_sizes, groups)
        if groups > 1:
            self.adopt(site_groups.shared(self.stacked))
        own = self._first_sites(self.bounds[1])
        trainable = {n: own[n] for n, p in model.named_parameters() if p.requires_grad}
        self.optimizer = batched.SiteSGD(trainable, self.config.momentum, self.config.weight_decay)
        self.padded_train = tuple(pad_sites(part)[0] for part in zip(*self.train_sets))
        # One stream per site for the whole run, named after the site like its other streams.
        self.dropout = batched.DropoutMasks(self.device, [
            derive_seed(self.config.seed, self.site_label(site), "batched-dropout") for site in range(len(self.models))
        ])
        why_not = self._why_not_compiled()
        if self.config.execution == "compiled" and why_not:
            raise SpecError(f"{self.algorithm.title} cannot use the compiled round here: {why_not}; "
                            "use execution 'batched' or 'auto'.")
        self.compiled = self.config.execution in ("auto", "compiled") and not why_not

    def _why_not_compiled(self) -> str:
        """Why the compiled C round cannot train this simulation's batched rounds ('' if it can)."""
        if not self.algorithm.plain_loss:
            return "its local loss is not the plain class-weighted NLL"
        if self.device.type != "cpu":
            return f"it runs on the CPU only, not {self.device.type}"
        if not kernels.supports(self.stacked):
            return "its tensors are not float32"
        return kernels.unavailable()

    @property
    def path(self) -> str:
        """How rounds are trained: 'compiled', 'batched' or 'per-site'."""
        return "compiled" if self.compiled else self.execution

    # -- building blocks algorithms use -------------------------------------------------------
    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(
            model.parameters(),
            lr=self.config.lr,
            momentum=self.config.momentum,
            weight_decay=self.config.weight_decay,
        )

    def loss_weights(self) -> torch.Tensor | None:
        """Class weights of every site's loss [sites, classes]: the algorithm's, else the sites'
        own inverse prevalence (paper), or None without class weighting."""
        weights = self.algorithm.class_weights(self)
        if weights is not None:
            return weights.to(self.device)
        return self.class_weights if self.config.class_weighting == "inverse" else None

    def base_loss(self, log_prob: torch.Tensor, y: torch.Tensor, site: int) -> torch.Tensor:
        """Class-weighted NLL of one site's batch."""
        weights = self.loss_weights()
        weight = weights[site] if weights is not None else None
        return F.nll_loss(log_prob, y, weight=weight, reduction=self.config.loss_reduction)

    def batched_nll(self, log_prob: torch.Tensor, y: torch.Tensor, valid: torch.Tensor,
                    sites: torch.Tensor | None) -> torch.Tensor:
        """Each site's class-weighted NLL of one batched step, as base_loss computes it site by
        site; `sites`: the step's sites (None: all)."""
        return batched.weighted_nll(log_prob, y, valid, self._step_weights(sites), self.config.loss_reduction)[0]

    def _step_weights(self, sites: torch.Tensor | None) -> torch.Tensor | None:
        weights = self.loss_weights()
        return weights[sites] if weights is not None and sites is not None else weights

    def _step(self, state, x, y, valid, sites) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """One batched step of the sites in it: their losses and their trainable tensors' gradients."""
        listed, names = None if sites is None else sites.tolist(), list(self.optimizer.parameters)
        if self.algorithm.plain_loss:
            return batched.nll_step(self.template, state, x, y, valid, self._step_weights(sites),
                                    self.config.loss_reduction, self.dropout, listed, names)
        params = {name: state[name].detach().requires_grad_(True) for name in names}
        state = {**state, **params}

        def run(tensors: dict[str, torch.Tensor]) -> torch.Tensor:
            return batched.forward(self.template, tensors, x, valid, train=True, dropout=self.dropout, sites=listed)

        losses = self.algorithm.batched_loss(self, state, run, y, valid, sites, params)
        return losses.detach(), list(torch.autograd.grad(losses.sum(), list(params.values())))

    def server_share(self, share: float, purpose: str) -> tuple[torch.Tensor, torch.Tensor]:
        """A stratified `share` of every site's training rows, pooled at the server (copies: the
        rows stay in the sites' training data). `purpose` keeps different uses' draws apart."""
        xs, ys = [], []
        for name, (x, y) in zip(self.site_names, self.train_sets):
            rng = np.random.default_rng(derive_seed(self.config.seed, name, purpose))
            _, rows = stratified_holdout(y.cpu().numpy(), max(1, round(share * len(y))), rng)
            rows = torch.as_tensor(rows, device=y.device)
            xs.append(x[rows])
            ys.append(y[rows])
        return torch.cat(xs), torch.cat(ys)

    def model_for_site(self, site: int) -> nn.Module:
        """The model a site uses for prediction (the single pooled model for Centralized)."""
        return self.models[0 if self.algorithm.pooled else site]

    def local_seed(self, site: int) -> int:
        return derive_seed(self.config.seed, self.site_label(site), self.round, "local")

    def site_label(self, site: int) -> str:
        """The trained dataset's name; the pooled set is named after all its sites."""
        return "+".join(self.site_names) if self.algorithm.pooled else self.site_names[site]

    # -- one round ------------------------------------------------------------------------
    def step(self) -> dict[str, float]:
        """Run the next round; returns each trained model's mean training loss."""
        self.round += 1
        lr = self.config.lr_at(self.round)
        with self._threads():
            self.algorithm.start_round(self)
            if self.execution == "batched":
                losses = self._train_batched_groups(lr)
            else:
                losses = [self.train_site(site, lr) for site in range(len(self.models))]
            self.algorithm.before_aggregation(self)
            self.aggregate()
        return {self.site_label(site): loss for site, loss in enumerate(losses)}

    def _threads(self) -> contextlib.AbstractContextManager:
        """With worker processes, this one too works on one torch thread: a second thread, idle
        between its parallel regions, would spin on a core a worker needs."""
        return site_groups.torch_threads(1) if self.processes > 1 else contextlib.nullcontext()

    def train_site(self, site: int, lr: float) -> float:
        """One site's local update of this round (the per-site path; a Flower site runs this)."""
        optimizer = self.algorithm.local_optimizer(self, site, lr)
        x, y = self.train_sets[site]
        return train_locally(
            self.models[site], optimizer, x, y, functools.partial(self.algorithm.loss, self, site),
            self.config.batch_size, self.config.local_epochs, self.local_seed(site),
        )

    @property
    def processes(self) -> int:
        """Processes that train the sites (the batched path may split them among several)."""
        return len(self.bounds) - 1 if self.execution == "batched" else 1

    def _train_batched_groups(self, lr: float) -> list[float]:
        """Every site's local update: the first group here, the others in the worker processes."""
        if self.processes == 1:
            return self.train_batched_sites(lr)
        if self.workers is None:
            self.workers = site_groups.Workers(self, self.bounds)
        self.workers.start_round(self.round, lr, self.algorithm.class_weights(self))
        return self.train_batched_sites(lr) + self.workers.finish_round()

    def train_batched_sites(self, lr: float) -> list[float]:
        """This process's sites' local update (the batched path): those of its first group."""
        own = self.bounds[1]
        orders = [
            batch_orders(len(y), self.config.local_epochs, self.local_seed(site))
            for site, (_, y) in enumerate(self.train_sets[:own])
        ]
        data = tuple(part[:own] for part in self.padded_train)
        if self.compiled:
            weights = self.loss_weights()
            losses = kernels.train_round(self.template, self._first_sites(own), self.optimizer, data, orders,
                                         None if weights is None else weights[:own], self.config.loss_reduction,
                                         self.dropout, self.config.batch_size, lr)
        else:
            losses = batched.train_round(
                self.template, self._first_sites(own), self.optimizer, data, orders,
                self._step, self.config.batch_size, lr,
            )
        return losses.tolist()

    @torch.no_grad()
    def predict_each(self, x: torch.Tensor) -> torch.Tensor:
        """Every site's model on the same rows (with worker processes, each runs its own sites')."""
        if self.execution != "batched":
            return super().predict_each(x)
        if self.workers is None:
            return self._predict_first(len(self.models), x)
        self.workers.start_prediction(x)
        with self._threads():
            return torch.cat([self._predict_first(self.bounds[1], x), *self.workers.finish_prediction()])

    def _predict_first(self, n: int, x: torch.Tensor) -> torch.Tensor:
        return self._batched_predict(n, x.expand(n, *x.shape), torch.ones(n, len(x), dtype=torch.bool, device=x.device))

    def _batched_predict(self, n: int, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """The first n sites' log-probabilities on their rows x [n, rows, D] (those `valid`; the
        compiled round leaves the others at 0)."""
        state = self.algorithm.prediction_state(self._first_sites(n))
        if self.compiled:
            return kernels.predict(self.template, state, x, valid.sum(1))
        return batched.forward(self.template, state, x, valid, train=False)

    def _first_sites(self, n: int) -> dict[str, torch.Tensor]:
        """The first n sites' rows of every stacked tensor (views)."""
        return self.stacked if n == len(self.models) else {name: value[:n] for name, value in self.stacked.items()}

    @torch.no_grad()
    def evaluate(self, sets: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> dict[str, dict[str, float]]:
        """Every site's model scored on that site's own hold-out, or on `sets` (one (x, y) per
        site, e.g. a validation split), all sites in one pass (with worker processes, each
        scores its own sites' hold-outs)."""
        with self._threads():
            if sets is not None:
                return self._scores(sets)
            if self.workers is None:
                return self._scores(self.test_sets, self._padded_test_x)
            self.workers.start_evaluation()
            first = self.bounds[1]
            return {**self._scores(self.test_sets[:first], self._padded_test_x[:first]),
                    **self.workers.finish_evaluation()}

    def _scores(self, sets: list[tuple[torch.Tensor, torch.Tensor]], x: torch.Tensor | None = None
                ) -> dict[str, dict[str, float]]:
        """Metrics of the first len(sets) sites' models on these rows (`x`: their rows padded,
        when already built)."""
        y, valid = pad_sites([y for _, y in sets])
        if self.execution == "batched" and not self.algorithm.pooled:
            x = pad_sites([x for x, _ in sets])[0] if x is None else x[:, : valid.shape[1]]
            log_prob = self._batched_predict(len(sets), x, valid)
        else:
            log_prob = pad_sites([self.predict(self.model_for_site(s), xs) for s, (xs, _) in
                                  enumerate(sets)])[0]
        return dict(zip(self.site_names, site_metrics(y, log_prob, valid)))

    @functools.cached_property
    def _padded_test_x(self) -> torch.Tensor:
        """The hold-outs' rows padded to one length, built once (evaluated every round)."""
        return pad_sites([x for x, _ in self.test_sets])[0]

    def run(
        self, on_round: Callable[[int, dict[str, Any] | None, dict[str, Any]], None] | None = None
    ) -> list[dict[str, Any]]:
        """All rounds; `on_round(round, record or None, arrays)` after each (record when evaluated)."""
        history = []
        started = time.perf_counter()
        while self.round < self.config.rounds:
            train_loss = self.step()
            record, arrays = None, {}
            if self.config.is_evaluated(self.round):
                record, arrays = self.round_record(train_loss, time.perf_counter() - started)
                history.append(record)
            if on_round is not None:
                on_round(self.round, record, arrays)
        return history

    def round_record(self, train_loss: dict[str, float], elapsed: float) -> tuple[dict, dict]:
        sites = self.evaluate()
        scalars, arrays = self.algorithm.record(self)
        return round_record(self.round, elapsed, self.config.lr_at(self.round), train_loss, sites, scalars), arrays


def round_record(round_: int, elapsed: float, lr: float, train_loss: dict[str, float],
                 sites: dict[str, dict[str, float]], algorithm_scalars: dict[str, Any]) -> dict[str, Any]:
    """One evaluated round's JSON record: every site's metrics on its own hold-out, their mean and
    worst site, and what the algorithm records."""
    mean, worst = mean_and_worst(sites)
    return {
        "round": round_,
        "elapsed_s": round(elapsed, 3),
        "lr": lr,
        "train_loss": train_loss,
        "sites": sites,
        "mean": mean,
        "worst": worst,
        "worst_site": {m: _worst_site(sites, m) for m in mean},
        "algorithm": algorithm_scalars,
    }


def _check_inputs(federation: Federation, algorithm: Algorithm) -> None:
    """DataError unless the algorithm trains this kind of data (tables or images)."""
    kind = "table" if federation.is_tabular else "image"
    if kind in algorithm.inputs:
        return
    from fedcore.algorithms import REGISTRY

    able = ", ".join(cls.name for cls in REGISTRY.values() if kind in cls.inputs)
    held = "a table of features" if kind == "table" else f"images ({'×'.join(map(str, federation.input_shape))})"
    raise DataError(f"'{federation.name}' holds {held}; {algorithm.title} trains "
                    f"{' or '.join(k + 's' for k in algorithm.inputs)} only. For {kind}s use: {able}.")


def _worst_site(sites: dict[str, dict[str, float]], metric: str) -> str | None:
    valid = {name: v[metric] for name, v in sites.items() if not math.isnan(v[metric])}
    if not valid:
        return None
    pick = max if metric in LOWER_IS_BETTER else min
    return pick(valid, key=valid.get)
