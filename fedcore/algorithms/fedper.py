"""FedPer (Arivazhagan et al. 2019): base layers shared, the last layer(s) personal.

The personal part is the last `personal_layers` Linear layers plus the output layer f_out.
"""

from dataclasses import dataclass

from torch import nn

from fedcore.algorithms.base import Algorithm, FedAvgParams, param
from fedcore.errors import SpecError


@dataclass
class FedPerParams(FedAvgParams):
    personal_layers: int = param(1, "How many of the last Linear layers each site keeps (with f_out).")


class FedPer(Algorithm):
    name = "fedper"
    title = "FedPer"
    summary = "Shared base layers, personal last layer(s) at each site."
    Params = FedPerParams

    def build_model(self, ctx) -> nn.Module:
        model = ctx.make_model()
        linear = model.linear_names()
        if not 1 <= self.params.personal_layers <= len(linear):
            raise SpecError(
                f"FedPer: personal_layers must be between 1 and {len(linear)} for this model, "
                f"not {self.params.personal_layers}."
            )
        self.personal_modules = {*linear[-self.params.personal_layers :], "f_out"}
        return model

    def is_local(self, name: str, module: nn.Module) -> bool:
        return name.rsplit(".", 1)[0] in self.personal_modules
