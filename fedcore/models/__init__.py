"""Models: the paper's MLP (with optional BatchNorm), iFedAvg's affine layers, image backbones and
their classifier, and ProtoPNet."""

from fedcore.models.affine import Affine
from fedcore.models.cnn import BACKBONES, ImageClassifier, SmallCNN, build_backbone
from fedcore.models.mlp import MLP
from fedcore.models.protopnet import ProtoPNet

__all__ = ["BACKBONES", "Affine", "ImageClassifier", "MLP", "ProtoPNet", "SmallCNN", "build_backbone"]
