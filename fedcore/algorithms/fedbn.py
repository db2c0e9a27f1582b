"""FedBN (Li et al. 2021): every BatchNorm parameter and buffer stays at its site; the rest is
averaged as in FedAvg. BatchNorm layers are picked by module type, never by name."""

from torch import nn

from fedcore.algorithms.base import Algorithm


def is_batch_norm(module: nn.Module) -> bool:
    return isinstance(module, nn.modules.batchnorm._BatchNorm)


class FedBN(Algorithm):
    name = "fedbn"
    title = "FedBN"
    summary = "FedAvg on a model with BatchNorm (the MLP variant, or the image CNN), each site keeping its own BatchNorm layers."
    batch_norm = True

    def is_local(self, name: str, module: nn.Module) -> bool:
        return is_batch_norm(module)
