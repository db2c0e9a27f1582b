"""Models: the paper's MLP (with optional BatchNorm), iFedAvg's affine layers, image backbones and
their classifier, and ProtoPNet."""

from fedcore.models.affine import Affine
from fedcore.models.cnn import BACKBONES, ImageClassifier, SmallCNN, build_backbone
from fedcore.models.mlp import MLP, Dropout, Tanh, min_batch_rows, tanh_by_sigmoid
from fedcore.models.protopnet import ProtoPNet

__all__ = [
           "BACKBONES",
           "MLP",
           "Affine",
           "Dropout",
           "ImageClassifier",
           "ProtoPNet",
           "SmallCNN",
           "Tanh",
           "build_backbone",
           "min_batch_rows",
           "tanh_by_sigmoid",
]
