"""The engine's settings, shared by every algorithm: a plain dataclass, readable without torch
(the command line, the dashboard's forms and the spec validation all read it)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from fedcore.errors import SpecError

BACKBONES = ("cnn", "resnet18", "resnet34", "resnet50", "densenet121", "vgg11", "vgg16")
EXECUTIONS = ("auto", "compiled", "batched", "per-site")


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
        EXECUTIONS,
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
