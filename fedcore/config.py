"""The engine's settings, shared by every algorithm: a plain dataclass, readable without torch
(the command line, the dashboard's forms and the spec validation all read it) — and `param()`,
the one way a setting or an algorithm's parameter is declared: its default, help, choices and
bounds, which the command line, the forms and `check_params` all read."""

from __future__ import annotations

import math
import numbers
from dataclasses import Field, asdict, dataclass, field, fields
from typing import Any

from fedcore.errors import SpecError

BACKBONES = ("cnn", "resnet18", "resnet34", "resnet50", "densenet121", "vgg11", "vgg16")
EXECUTIONS = ("auto", "compiled", "batched", "per-site")


MAX_HIDDEN_WIDTH = 65_536  # units of one hidden layer: beyond it a table model is a typo, not a choice


def param(default: Any, help: str, choices: tuple[Any, ...] | None = None,
          bounds: tuple[float | None, float | None] | None = None) -> Any:
    """A documented parameter. Its type is its default's: a float must be a finite number, an
    int a whole number, a tuple of ints holds whole numbers each. `bounds` is the closed range
    (low, high) a number (each of a tuple's) must lie in; None leaves that side open."""
    return field(default=default, metadata={"help": help, "choices": choices, "bounds": bounds})


def value_problem(f: Field, value: Any) -> str | None:
    """What is wrong with `value` for the parameter `f` (its declared type, choices and bounds),
    or None. A string '0.1' is no number here: specs and forms give numbers as numbers."""
    default, choices, bounds = f.default, f.metadata.get("choices"), f.metadata.get("bounds")
    if choices:
        return None if value in choices else f"{f.name} must be one of {list(choices)}, not {value!r}."
    if isinstance(default, bool):
        return None if isinstance(value, bool) else f"{f.name} must be true or false, not {value!r}."
    if isinstance(default, tuple):
        if not isinstance(value, (tuple, list)) or not all(_is_whole(v) for v in value):
            return f"{f.name} must be a list of whole numbers, not {value!r}."
        if bounds and not all(_within(v, bounds) for v in value):
            return f"{f.name}: each width must be {range_text(bounds)}, not {list(value)}."
        return None
    if isinstance(default, int):
        if not _is_whole(value):
            return f"{f.name} must be a whole number, not {value!r}."
    elif isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return f"{f.name} must be a number, not {value!r}."
        if not math.isfinite(value):
            return f"{f.name} must be a finite number, not {value}."
    else:
        return None
    if not bounds or _within(value, bounds):
        return None
    if tuple(bounds) == (0, None):
        return f"{f.name} cannot be negative ({value})."
    return f"{f.name} must be {range_text(bounds)}, not {value}."


def check_params(params: Any, title: str = "") -> None:
    """SpecError naming the first field of the dataclass instance `params` whose value its
    declaration refuses (`value_problem`)."""
    for f in fields(params):
        problem = value_problem(f, getattr(params, f.name))
        if problem:
            raise SpecError(f"{title}: {problem}" if title else problem)


def _is_whole(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _within(value: float, bounds: tuple[float | None, float | None]) -> bool:
    low, high = bounds
    return (low is None or value >= low) and (high is None or value <= high)


def range_text(bounds: tuple[float | None, float | None]) -> str:
    """'from 0 to 1', 'at least 1', 'at most 5': a declared range in words."""
    low, high = bounds
    if high is None:
        return f"at least {low:,g}"
    if low is None:
        return f"at most {high:,g}"
    return f"from {low:,g} to {high:,g}"


@dataclass
class TrainConfig:
    """Engine settings shared by all algorithms; defaults are the iFedAvg paper's protocol."""

    rounds: int = param(1000, "Communication rounds.", bounds=(1, None))
    local_epochs: int = param(1, "Passes over a site's training rows per round.", bounds=(1, None))
    batch_size: int = param(16, "Rows per SGD step.", bounds=(1, None))
    lr: float = param(0.002, "SGD learning rate at round 1.", bounds=(0.0, None))
    momentum: float = param(0.5, "SGD momentum; each site keeps its own buffer across rounds.", bounds=(0.0, None))
    lr_decay: float = param(0.9, "Factor applied to the learning rate at each decay step (above 0).",
                            bounds=(0.0, 1.0))
    lr_decay_every: int = param(
        0, "Rounds between decay steps; 0 means rounds/50 (the paper decays 50 times per run).", bounds=(0, None)
    )
    weight_decay: float = param(0.0, "L2 penalty of the SGD optimiser.", bounds=(0.0, None))
    hidden: tuple[int, ...] = param((128, 64), "Tables: widths of the MLP's hidden layers.",
                                    bounds=(1, MAX_HIDDEN_WIDTH))
    dropout: float = param(0.2, "Tables: dropout rate after f_in and after each hidden layer of the MLP "
                                   "(below 1).", bounds=(0.0, 1.0))
    backbone: str = param(
        "cnn",
        "Images: the feature extractor. 'cnn' is a small CNN with BatchNorm trained from scratch; the others "
        "are torchvision networks (their convolutional part), pretrained only with backbone_weights.",
        BACKBONES,
    )
    backbone_weights: str = param(
        "", "Images: a local file with the backbone's weights (a PyTorch state dict, e.g. torchvision's "
            "ImageNet file); nothing is downloaded. Empty: random initialisation."
    )
    class_weighting: str = param(
        "inverse",
        "Loss class weights: 'inverse' prevalence of each site's own training rows (paper), "
        "or 'none'.",
        ("inverse", "none"),
    )
    loss_reduction: str = param(
        "sum", "NLL over a batch: 'sum' (iFedAvg reference) or 'mean'.", ("sum", "mean")
    )
    eval_every: int = param(
        0, "Evaluate every k rounds; 0 means every round up to 200 rounds, else about 200 times.", bounds=(0, None)
    )
    execution: str = param(
        "auto",
        "'batched' trains all sites as one computation in torch (the MLP family), 'compiled' the same "
        "rounds with the compiled C round (the CPU; algorithms whose local loss is the plain NLL), "
        "'per-site' one model after another; 'auto' picks compiled, else batched, wherever they can run.",
        EXECUTIONS,
    )
    processes: int = param(
        0,
        "Processes that train a batched round's sites in parallel, one torch thread each (the CPU, Linux); "
        "0 picks one per torch thread, keeping at least 8 sites in each. Results do not depend on it.",
        bounds=(0, None),
    )
    seed: int = param(0, "Seeds the hold-out split, initialisation, batch order and dropout.")
    device: str = param("auto", "'auto' (CUDA when present), 'cpu' or 'cuda'.", ("auto", "cpu", "cuda"))

    def __post_init__(self) -> None:
        check_params(self)
        self.hidden = tuple(int(h) for h in self.hidden)
        # The open ends of two closed ranges: a decay of 0 stops learning after the first step,
        # a dropout of 1 drops every unit.
        if self.lr_decay == 0:
            raise SpecError(f"lr_decay must be above 0, not {self.lr_decay}.")
        if self.dropout == 1:
            raise SpecError(f"dropout must be below 1, not {self.dropout}.")

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
