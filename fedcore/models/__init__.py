"""Models: the paper's MLP (with optional BatchNorm) and iFedAvg's affine layers."""

from fedcore.models.affine import Affine
from fedcore.models.mlp import MLP

__all__ = ["Affine", "MLP"]
