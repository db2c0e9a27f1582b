"""The round loop: local updates, aggregation through the algorithm's hooks, evaluation, records.

One round, for every algorithm:
    1. each site trains its model for `local_epochs` on its own rows (SGD whose momentum persists
       across rounds, learning rate from the step schedule);
    2. the server mixes the shared parameters with the algorithm's mixing matrix;
    3. the algorithm's server step runs (e.g. AdaFed's adaptive loss);
    4. every k rounds, each site's model is scored on that site's own hold-out.

Every parameter and buffer is stored once for all sites, stacked along a first `sites`
dimension; each site's model is a module whose tensors are views into that stack. Mixing is
one in-place operation on the stack. How the sites' local training runs is the executor's
business (`fedcore.execution`): the engine holds one and calls it, whichever it is.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fedcore import execution
from fedcore.algorithms import REGISTRY
from fedcore.algorithms.base import Algorithm, AtSite
from fedcore.config import TrainConfig
from fedcore.errors import DataError, SpecError, TrainingError
from fedcore.federation import Federation, class_weights, stratified_holdout
from fedcore.metrics import LOWER_IS_BETTER, mean_and_worst
from fedcore.models import MLP, ImageClassifier, build_backbone
from fedcore.records import Record
from fedcore.seeding import derive_seed
from fedcore.training import tensor_state

__all__ = ["FederatedModels", "Simulation", "TrainConfig", "resolve_device", "round_record"]


def resolve_device(choice: str) -> torch.device:
    if choice == "cuda" and not torch.cuda.is_available():
        raise SpecError("CUDA was requested but no GPU is visible to PyTorch; use --device cpu or auto.")
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(choice)


def mix_(stacked: dict[str, torch.Tensor], names: Iterable[str], mixing: torch.Tensor) -> None:
    """In place, for every name: value[i] <- sum_j mixing[i, j] * value[j] (first dim = sites)."""
    # Where every site gets the same mixture (FedAvg and its kin), it is computed once.
    same_for_all = bool((mixing == mixing[:1]).all())
    for name in names:
        value = stacked[name]
        weights = mixing[:1] if same_for_all else mixing
        value.copy_(torch.tensordot(weights.to(device=value.device, dtype=value.dtype), value, dims=1).expand_as(value))


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
    sites' rows and their local training); so is the Flower server (`application.flower`), which
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
    """All sites of a federation trained on one machine, with the executor `fedcore.execution`
    picks for the algorithm, its model and the machine.

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
        self.executor = execution.choose(self, self._group)
        algorithm.setup(self)

    def _group(self, first: int, last: int, config: TrainConfig) -> Simulation:
        """The simulation of sites first..last-1 on their rows of this one's tensors, with `config`
        (what a group of sites trained elsewhere runs: `fedcore.execution`)."""
        names = self.site_names[first:last]
        federation = replace(self.federation, sites=self.federation.sites[first:last],
                             ground_truth=[g for g in self.federation.ground_truth if g.site in names])
        tensors = {name: value[first:last] for name, value in self.stacked.items()}
        return Simulation(federation, AtSite(self.algorithm, None), config, tensors=tensors)

    # -- what the algorithms' hooks use of the sites (the context's site side) ---------------------
    def loss_weights(self) -> torch.Tensor | None:
        """Class weights of every site's loss [sites, classes]: the algorithm's, else the sites'
        own inverse prevalence (paper), or None without class weighting."""
        weights = self.algorithm.class_weights(self)
        if weights is not None:
            return weights.to(self.device)
        return self.class_weights if self.config.class_weighting == "inverse" else None

    def base_loss(self, log_prob: torch.Tensor, y: torch.Tensor, site: int | torch.Tensor) -> torch.Tensor:
        """Class-weighted NLL of one site's batch (`site`: its index, a 0-dim tensor under vmap)."""
        weights = self.loss_weights()
        weight = weights[site] if weights is not None else None
        return F.nll_loss(log_prob, y, weight=weight, reduction=self.config.loss_reduction)

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

    def train_at_server(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float, batch_size: int,
                        epochs: int, seed: int) -> float:
        """`model` trained in place on rows the server holds (`server_share`): plain SGD on the mean
        NLL, by the fastest path that computes it (`execution.train_alone`)."""
        return execution.train_alone(model, x, y, lr, batch_size, epochs, seed)

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
        with self.executor.scope():
            self.algorithm.start_round(self)
            losses = dict(zip(map(self.site_label, range(len(self.models))), self.executor.train_round(lr)))
            _check_finite(self.round, losses)
            self.algorithm.before_aggregation(self)
            self.aggregate()
        return losses

    @torch.no_grad()
    def predict_each(self, x: torch.Tensor) -> torch.Tensor:
        """Every site's model on the same rows: log-probabilities [sites, rows, classes]."""
        with self.executor.scope():
            return self.executor.predict_each(x)

    @torch.no_grad()
    def evaluate(self, sets: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> dict[str, dict[str, float]]:
        """Every site's model scored on that site's own hold-out, or on `sets` (one (x, y) per
        site, e.g. a validation split)."""
        with self.executor.scope():
            return self.executor.evaluate(sets)

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
        record, arrays = self.algorithm.record(self)
        return round_record(self.round, elapsed, self.config.lr_at(self.round), train_loss, sites, record), arrays


def round_record(round_: int, elapsed: float, lr: float, train_loss: dict[str, float],
                 sites: dict[str, dict[str, float]], record: Record) -> dict[str, Any]:
    """One evaluated round's JSON record: every site's metrics on its own hold-out, their mean and
    worst site, and what the algorithm records (its typed record's stored form)."""
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
        "algorithm": record.to_json(),
    }


def _check_finite(round_: int, losses: dict[str, float]) -> None:
    """TrainingError naming the round and the sites whose training loss is no longer a number."""
    broken = {site: loss for site, loss in losses.items() if not math.isfinite(loss)}
    if broken:
        listed = ", ".join(f"{site} ({loss})" for site, loss in broken.items())
        raise TrainingError(
            f"Round {round_}: the training loss is not a finite number at {listed}; the model diverged "
            "(a learning rate too high, or features in very different units: try standardization "
            "'site' or a smaller lr). The rounds recorded before it are kept.")


def _check_inputs(federation: Federation, algorithm: Algorithm) -> None:
    """DataError unless the algorithm trains this kind of data (tables or images)."""
    kind = "table" if federation.is_tabular else "image"
    if kind in algorithm.inputs:
        return
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
