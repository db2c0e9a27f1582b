"""Local: each site trains on its own rows only; nothing is ever shared (the opt-out baseline)."""

from dataclasses import dataclass

from torch import nn

from fedcore.algorithms.base import Algorithm


@dataclass
class NoParams:
    """This algorithm has no parameters of its own."""


class Local(Algorithm):
    name = "local"
    title = "Local"
    summary = "Each site trains alone on its own data; nothing leaves the site."
    Params = NoParams

    def is_local(self, name: str, module: nn.Module) -> bool:
        return True
