"""Image models: a feature extractor (backbone) that maps images to a feature map, and the
classifier that pools it.

    backbone:   images N×C×H×W -> feature map N×channels×h×w
                'cnn' (default): a small CNN with BatchNorm trained from scratch, blocks of
                conv3×3 -> BatchNorm -> ReLU -> max-pool until the map is about 7×7, then one more
                conv3×3 -> BatchNorm -> ReLU; works from 28×28 to 224×224, grey or colour.
                torchvision networks by name (ResNet, DenseNet, VGG): their convolutional part,
                pretrained weights only from a local file (nothing is downloaded).
    classifier: backbone -> global average pool (`embed`) -> Linear `head` -> log_softmax

ProtoPNet (models/protopnet.py) puts its prototype layer on the same backbones.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from fedcore.config import BACKBONES
from fedcore.errors import SpecError

# torchvision constructor -> how to take its convolutional part
TORCHVISION = {
    "resnet18": "resnet", "resnet34": "resnet", "resnet50": "resnet",
    "densenet121": "densenet", "vgg11": "vgg", "vgg16": "vgg",
}
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
TARGET_SIDE = 7  # the small CNN pools until its feature map is about this wide (ProtoPNet's 7×7)


class SmallCNN(nn.Module):
    """conv-BN-ReLU-pool blocks (32, 64, 128, 128, ... channels) down to about 7×7, then conv-BN-ReLU."""

    def __init__(self, in_channels: int, image_side: int, width: int = 32, max_width: int = 128) -> None:
        super().__init__()
        n_pools = max(1, round(math.log2(max(image_side, TARGET_SIDE) / TARGET_SIDE)))
        layers: list[nn.Module] = []
        channels = in_channels
        for block in range(n_pools):
            out = min(width * 2**block, max_width)
            layers += [nn.Conv2d(channels, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU(),
                       nn.MaxPool2d(2)]
            channels = out
        out = min(width * 2**n_pools, max_width)
        layers += [nn.Conv2d(channels, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU()]
        self.layers = nn.Sequential(*layers)
        self.out_channels = out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class TorchvisionFeatures(nn.Module):
    """The convolutional part of a torchvision network. Grey images are repeated to three channels
    and every image is normalised with ImageNet's mean and SD, as the pretrained weights expect."""

    def __init__(self, name: str, weights: str | None) -> None:
        super().__init__()
        import torchvision

        network = getattr(torchvision.models, name)(weights=None)  # never a download
        if weights:
            load_weights(network, weights, name)
        family = TORCHVISION[name]
        if family == "resnet":
            self.trunk = nn.Sequential(*list(network.children())[:-2])  # without avgpool and fc
        elif family == "densenet":
            self.trunk = nn.Sequential(network.features, nn.ReLU())
        else:
            self.trunk = network.features
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        return self.trunk((x - self.mean) / self.std)


def build_backbone(name: str, input_shape: tuple[int, ...], weights: str | None = None) -> tuple[nn.Module, int]:
    """(backbone, channels of its feature map) for images of `input_shape` (C, H, W)."""
    if name not in BACKBONES:
        raise SpecError(f"Unknown backbone '{name}'; choose one of {', '.join(BACKBONES)}.")
    channels, height, width = input_shape
    if name == "cnn":
        backbone: nn.Module = SmallCNN(channels, min(height, width))
        if weights:
            load_weights(backbone, weights, name)
    else:
        if channels not in (1, 3):
            raise SpecError(f"{name} takes grey or colour images, not {channels} channels.")
        backbone = TorchvisionFeatures(name, weights)
    was_training = backbone.training
    try:
        with torch.no_grad():
            out = backbone.eval()(torch.zeros(1, *input_shape))
    except RuntimeError as error:
        raise SpecError(f"{name} cannot take {height}×{width} images ({error}); use larger images "
                        "(the data option size=N resizes image folders) or the 'cnn' backbone.") from None
    finally:
        backbone.train(was_training)
    return backbone, int(out.shape[1])


def load_weights(module: nn.Module, path: str, name: str) -> None:
    """Load a state dict from a local file into `module` (its classifier's weights may be in the file
    too); refuse files that would need unpickling code, and files that do not fit."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise SpecError(f"backbone_weights: {file} does not exist (weights are only read from a local file).")
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - any unreadable file gets the same message
        raise SpecError(f"backbone_weights: {file.name} is not a PyTorch state dict that can be read without "
                        f"running code from the file ({type(error).__name__}).") from None
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise SpecError(f"backbone_weights: {file.name} holds no state dict (parameter name -> tensor).")
    state = {_current_key(key.removeprefix("module.")): value for key, value in state.items()}
    try:
        missing, unexpected = module.load_state_dict(state, strict=False)
    except RuntimeError as error:
        raise SpecError(f"backbone_weights: {file.name} does not fit {name}: {str(error).splitlines()[-1].strip()}") \
            from None
    if missing or unexpected:
        listed = "; ".join(f"{what} {', '.join(keys[:3])}" + (" …" if len(keys) > 3 else "")
                           for what, keys in (("lacks", missing), ("has extra", unexpected)) if keys)
        raise SpecError(f"backbone_weights: {file.name} does not fit {name} ({listed}); is it a {name} state dict?")


# Older DenseNet files (torchvision's own ImageNet weights among them) name 'norm.1' what the
# current modules call 'norm1'; torchvision renames them the same way when it loads them.
_OLD_DENSENET_KEY = re.compile(r"^(.*denselayer\d+\.(?:norm|relu|conv))\.((?:[12])\.(?:weight|bias|running_mean|running_var))$")


def _current_key(key: str) -> str:
    match = _OLD_DENSENET_KEY.match(key)
    return match.group(1) + match.group(2) if match else key


class ImageClassifier(nn.Module):
    """backbone -> global average pool -> Linear head; returns log-probabilities."""

    def __init__(self, features: nn.Module, channels: int, n_classes: int) -> None:
        super().__init__()
        self.features = features
        self.head = nn.Linear(channels, n_classes)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The classifier's input (FedHealth2's d-variant takes its statistics at `head`)."""
        return F.adaptive_avg_pool2d(self.features(x), 1).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.head(self.embed(x)), dim=-1)

    def linear_names(self) -> list[str]:
        """Qualified names of the Linear layers (FedPer keeps the last ones at each site)."""
        return [name for name, module in self.named_modules() if isinstance(module, nn.Linear)]
