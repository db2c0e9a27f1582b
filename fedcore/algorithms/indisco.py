"""inDISCO (Naumova et al., "My-This-Your-That"): federated ProtoPNet, so that each site can see
on its own images where its local prototypes and the federation's global prototypes look.

Model: ProtoPNet (fedcore/models/protopnet.py) on the engine's image backbone.

Each round, at every site (ProtoPNet's stages, each with its own Adam optimiser):
    rounds 1..warm_rounds  warm-up: backbone frozen; add-on layers and prototypes train
    later rounds           joint: backbone, add-on layers and prototypes train; then push (every
                           prototype becomes the nearest latent patch of a training image of its
                           own class) and `last_layer_epochs` of last-layer-only training
    -> these are the site's LOCAL prototypes, which it sends
Server, uniform mean:
    indisco-gm  everything: prototypes, last layer, add-on layers and backbone (GM)
    indisco-pm  prototypes and last layer only; each site then pushes the GLOBAL prototypes onto
                its own nearest patches and retrains its last layer: a personalised model (PM)
    indisco-lm  nothing, each site alone (LM)      indisco-cm  one model on the pooled data (CM)

Learning rates are ProtoPNet's, per part (lr_*), scaled by the engine's decay schedule; the
engine's lr and momentum do not apply (Adam), its weight_decay applies to backbone and add-on.

Records at evaluated rounds, per site and kind of prototype (local: as sent; global: after the
server's step; LM has only local, CM only its pooled model's, recorded as global): every
prototype's source patch on the site's own training images (the nearest patch of an image of
its class), its box and heat map; a fixed set of the site's test images with their ten most
activated prototypes (similarity, box, heat map) and the last layer; with an injected stamp, the
share of each box that lies on it. GM and PM also record the local models' scores.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fedcore.algorithms.base import Algorithm, FedAvgParams, Records, param
from fedcore.algorithms.context import Need
from fedcore.records import Prototypes
from fedcore.training import train_locally
from fedcore.errors import SpecError
from fedcore.interpret.prototype_boxes import (
    DEFAULT_PERCENTILE,
    ON_STAMP_SHARE,
    box_overlap,
    high_activation_boxes,
    spread_over_classes,
    stamp_region,
)
from fedcore.metrics import classification_metrics
from fedcore.models.protopnet import (
    LossWeights,
    ProtoPNet,
    latents,
    nearest_patches,
    nearest_similarities,
    prototype_terms,
    push,
    similarity,
)
from fedcore.seeding import derive_seed

# Which parts each stage trains; the parts' names are ProtoPNet's attributes.
STAGES = {"warm": ("add_on", "prototypes"), "joint": ("features", "add_on", "prototypes"), "last": ("last_layer",)}
PARTS = ("features", "add_on", "prototypes", "last_layer")
DECAYED = ("features", "add_on")  # the reference applies weight decay to these
TOP = 10  # prototypes listed per test image, as in the reference's local analysis
DISPLAY_SIDE = 64  # stored images and heat maps are at most this many pixels wide
SCORES = ("balanced_accuracy", "sensitivity", "specificity")
INDEX_VIEWS = ("test_top", "test_pred", "holdout_top")  # padded with -1


@dataclass
class InDISCOParams(FedAvgParams):
    prototypes_per_class: int = param(10, "Prototypes per class (ProtoPNet and inDISCO: 10).")
    prototype_dim: int = param(128, "Length D of a prototype: the channels of the add-on layers.")
    warm_rounds: int = param(1, "Rounds of warm-up (backbone frozen) before joint training and pushes.")
    last_layer_epochs: int = param(20, "Epochs of last-layer-only training after each push.")
    lr_features: float = param(1e-4, "Adam learning rate of the backbone (joint stage).")
    lr_add_on: float = param(3e-3, "Adam learning rate of the add-on layers.")
    lr_prototypes: float = param(3e-3, "Adam learning rate of the prototypes.")
    lr_last_layer: float = param(1e-4, "Adam learning rate of the last layer (after a push).")
    cluster: float = param(0.8, "Weight of the cluster cost (patches near a prototype of their class).")
    separation: float = param(0.08, "Weight of the separation cost (subtracted: away from other classes).")
    l1: float = param(1e-4, "Weight of the L1 penalty on last-layer connections to the wrong class.")
    box_percentile: float = param(DEFAULT_PERCENTILE, "A box holds the pixels at or above this percentile of "
                                                      "the upsampled activation map.")
    explain_images: int = param(12, "Test images per site whose most activated prototypes are recorded.")

    def __post_init__(self) -> None:
        if min(self.prototypes_per_class, self.prototype_dim, self.explain_images) < 1:
            raise SpecError("inDISCO: prototypes_per_class, prototype_dim and explain_images must be at least 1.")
        if min(self.warm_rounds, self.last_layer_epochs) < 0:
            raise SpecError("inDISCO: warm_rounds and last_layer_epochs cannot be negative.")
        rates = (self.lr_features, self.lr_add_on, self.lr_prototypes, self.lr_last_layer)
        if min(rates) < 0 or min(self.cluster, self.separation, self.l1) < 0:
            raise SpecError("inDISCO: learning rates and loss weights cannot be negative.")
        if not 0 < self.box_percentile <= 100:
            raise SpecError(f"inDISCO: box_percentile must be in (0, 100], not {self.box_percentile}.")


class InDISCO(Algorithm):
    """What the four share: ProtoPNet, its stages, and the records. Subclasses say what is shared."""

    Params = InDISCOParams
    Record = Prototypes
    inputs = ("image",)
    # ProtoPNet's loss is a mean over the batch; five local epochs a round (inDISCO: 5 warm-up, then 10).
    config_defaults = {"rounds": 8, "local_epochs": 5, "batch_size": 32, "loss_reduction": "mean",
                       "weight_decay": 1e-3}
    # The kinds of prototypes a site compares: 'local' (as it sends them), 'global' (after the server).
    kinds: ClassVar[tuple[str, ...]] = ("local", "global")

    def needs(self) -> frozenset[Need]:
        # records every site's prototypes on its own images (and PM pushes after the server's step)
        return super().needs() | {Need.SITE_ROWS_AT_SERVER_STEP}

    def build_model(self, ctx) -> nn.Module:
        return ProtoPNet(*ctx.make_backbone(), ctx.federation.n_classes, self.params.prototypes_per_class,
                         self.params.prototype_dim)

    def setup(self, ctx) -> None:
        self.weights = LossWeights(self.params.cluster, self.params.separation, self.params.l1)
        self.optimizers: dict[tuple[int, str], torch.optim.Optimizer] = {}
        self.views: dict[str, dict[str, np.ndarray]] = {}
        self.local_scores: dict[str, dict[str, float]] = {}
        self.stamp = stamp_region(ctx.federation.ground_truth)
        self.shown = [spread_over_classes(s.y_test.numpy(), self.params.explain_images) for s in ctx.federation.sites]

    def stage(self, round_: int) -> str:
        return "warm" if round_ <= self.params.warm_rounds else "joint"

    # -- local training ---------------------------------------------------------------------
    def local_optimizer(self, ctx, site: int, lr: float, sgd: torch.optim.Optimizer) -> torch.optim.Optimizer:
        return self._optimizer(ctx, site, self.stage(ctx.round))

    def _optimizer(self, ctx, index: int, stage: str) -> torch.optim.Optimizer:
        """Model `index`'s Adam for a stage (kept across rounds), with only that stage's parts trainable."""
        model = ctx.models[index]
        for part in PARTS:
            getattr(model, part).requires_grad_(part in STAGES[stage])
        if (index, stage) not in self.optimizers:
            rates = {"features": self.params.lr_features, "add_on": self.params.lr_add_on,
                     "prototypes": self.params.lr_prototypes, "last_layer": self.params.lr_last_layer}
            groups = [{"params": _parameters(getattr(model, part)), "lr": rates[part], "base_lr": rates[part],
                       "weight_decay": ctx.config.weight_decay if part in DECAYED else 0.0}
                      for part in STAGES[stage]]
            self.optimizers[index, stage] = torch.optim.Adam(groups)
        optimizer = self.optimizers[index, stage]
        for group in optimizer.param_groups:
            group["lr"] = group["base_lr"] * ctx.config.lr_factor(ctx.round)
        return optimizer

    def loss(self, ctx, site: int, model: ProtoPNet, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits, nearest = model.logits_and_distances(x)
        return ctx.base_loss(F.log_softmax(logits, -1), y, site) + prototype_terms(model, nearest, y, self.weights)

    def before_aggregation(self, ctx) -> None:
        if self.stage(ctx.round) == "joint":
            for index in range(len(ctx.models)):
                self.push_and_fit(ctx, index, "local")
        if "local" in self.kinds and ctx.config.is_evaluated(ctx.round):
            self.views["local"] = self._views(ctx)
            if "global" in self.kinds:  # the models each site sends, scored before the server's step
                self.local_scores = {name: {k: v for k, v in classification_metrics(
                    y, ctx.predict(ctx.models[i], x)).items() if k in SCORES}
                    for i, (name, (x, y)) in enumerate(zip(ctx.site_names, ctx.test_sets))}

    def push_and_fit(self, ctx, index: int, which: str) -> None:
        """Push model `index`'s prototypes onto its own training images, then train its last layer
        alone on the prototype similarities of those images (the network before it is fixed)."""
        model = ctx.models[index]
        x, y = ctx.train_sets[index]
        z = latents(model, x)
        push(model, z, y)
        if self.params.last_layer_epochs == 0:
            return
        activations = nearest_similarities(model, z)
        seed = derive_seed(ctx.config.seed, ctx.site_label(index), ctx.round, which, "last-layer")
        train_locally(model.last_layer, self._optimizer(ctx, index, "last"), activations, y,
                      functools.partial(self._last_layer_loss, ctx, index), ctx.config.batch_size,
                      self.params.last_layer_epochs, seed)

    def _last_layer_loss(self, ctx, index: int, layer: nn.Linear, activations: torch.Tensor,
                         y: torch.Tensor) -> torch.Tensor:
        l1 = self.weights.l1 * ctx.models[index].wrong_class_l1()
        return ctx.base_loss(F.log_softmax(layer(activations), -1), y, index) + l1

    # -- records --------------------------------------------------------------------------
    def record(self, ctx) -> Records:
        if "global" in self.kinds:
            self.views["global"] = self._views(ctx)
        arrays = {f"{kind}_{name}": value for kind in self.kinds for name, value in self.views[kind].items()}
        first = ctx.federation.sites[0]
        arrays["prototype_class"] = ctx.models[0].prototype_class.cpu().numpy()
        arrays["image_size"] = np.array(first.x_test.shape[-2:])
        arrays.update(self._shown_images(ctx))
        record = Prototypes(stage=self.stage(ctx.round), kinds=list(self.kinds),
                            prototypes=int(arrays["prototype_class"].size))
        if self.stamp is not None:
            region, sites, label = self.stamp
            arrays["stamp_box"] = np.array(region)
            arrays["stamped_site"] = np.array([name in sites for name in ctx.site_names])
            record.stamp = {"sites": sites, "class": label, "box": list(region), "on_stamp_share": ON_STAMP_SHARE}
            overlap = stamp_summary(arrays, self.kinds, ctx.site_names)
            record.test_on_stamp, record.stamp_overlap = overlap["test_on_stamp"], overlap["stamp_overlap"]
            record.prototypes_on_stamp = overlap["prototypes_on_stamp"]
        if self.local_scores:
            record.local_model = self.local_scores
        return record, arrays

    def _site_images(self, ctx, site: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A federation site's training images on the device (the pooled model has no own site)."""
        if not self.pooled:
            return ctx.train_sets[site]
        data = ctx.federation.sites[site]
        return data.x_train.to(ctx.device), data.y_train.to(ctx.device)

    def _shown_images(self, ctx) -> dict[str, np.ndarray]:
        rows = _pad([torch.as_tensor(r) for r in self.shown], -1)
        holdout = _pad([y for _, y in ctx.test_sets], -1)
        labels = _pad([y[torch.as_tensor(r, device=y.device)] for r, (_, y) in zip(self.shown, ctx.test_sets)], -1)
        pixels = _pad([_display(x[torch.as_tensor(r, device=x.device)]) for r, (x, _) in zip(self.shown, ctx.test_sets)],
                      0)
        return {"test_rows": rows, "test_label": labels, "test_pixels": pixels, "holdout_label": holdout}

    def _views(self, ctx) -> dict[str, np.ndarray]:
        """Every federation site's view of its current model's prototypes, stacked over sites."""
        per_site = []
        for site, rows in enumerate(self.shown):
            x_test = ctx.test_sets[site][0]
            per_site.append(self._site_view(ctx.model_for_site(site), *self._site_images(ctx, site), x_test,
                                            torch.as_tensor(rows, device=x_test.device)))
        views = {name: _pad([v[name] for v in per_site], -1 if name in INDEX_VIEWS else 0) for name in per_site[0]}
        if self.stamp is not None:
            for part in ("source", "test", "holdout"):
                views[f"{part}_overlap"] = box_overlap(views[f"{part}_box"], self.stamp[0])
        return views

    @torch.no_grad()
    def _site_view(self, model: ProtoPNet, x: torch.Tensor, y: torch.Tensor, x_test: torch.Tensor,
                   shown: torch.Tensor) -> dict:
        """Where each prototype looks on one site's images: its source patch on the training images,
        the box of the most activated prototype on every hold-out image, the ten most activated on
        the `shown` hold-out images (tensors on the device; numpy out)."""
        size = tuple(x.shape[-2:])
        z = latents(model, x)
        image, patch, _ = nearest_patches(model, z, y)
        found = image >= 0
        source = image.clamp(min=0)
        source_maps = ((z[source] - model.prototypes[:, :, None, None]) ** 2).sum(1)  # m × h × w
        source_heat = _upsample(similarity(source_maps)[:, None], size)[:, 0]
        source_box = high_activation_boxes(source_heat.cpu().numpy(), self.params.box_percentile)
        source_box[~found.cpu().numpy()] = -1
        holdout_top, holdout_box = [], []
        for start in range(0, len(x_test), 256):
            distance = model.distance_maps(latents(model, x_test[start : start + 256]))
            best = distance.flatten(2).min(-1).values.argmin(-1)  # the most activated prototype
            holdout_top.append(best)
            maps = _upsample(similarity(distance[torch.arange(len(best)), best])[:, None], size)[:, 0]
            holdout_box.append(high_activation_boxes(maps.cpu().numpy(), self.params.box_percentile))
        distance = model.distance_maps(latents(model, x_test[shown]))  # T × m × h × w
        activation = similarity(distance.flatten(2).min(-1).values)  # T × m
        top = activation.argsort(-1, descending=True)[:, :TOP]
        top_maps = distance.gather(1, top[..., None, None].expand(-1, -1, *distance.shape[2:]))
        top_heat = _upsample(similarity(top_maps), size)
        numpy = lambda t: t.detach().cpu().numpy()  # noqa: E731
        return {
            "source_image": numpy(image),
            "source_patch": numpy(patch),
            "source_similarity": numpy(similarity(source_maps.flatten(1).min(1).values)),
            "source_box": source_box,
            "source_pixels": _display(x[source]),
            "source_heat": _display_maps(source_heat),
            "last_layer": numpy(model.last_layer.weight),
            "test_pred": numpy(model.last_layer(activation).argmax(-1)),
            "test_top": numpy(top),
            "test_top_similarity": numpy(activation.gather(1, top)),
            "test_box": high_activation_boxes(top_heat.cpu().numpy(), self.params.box_percentile),
            "test_heat": _display_maps(top_heat),
            "holdout_top": numpy(torch.cat(holdout_top)),
            "holdout_box": np.concatenate(holdout_box),
        }


def stamp_summary(arrays: dict[str, np.ndarray], kinds: tuple[str, ...], sites: list[str]) -> dict[str, dict]:
    """Per kind and site: the share of its hold-out images whose most activated prototype's box lies
    on the stamp (`test_on_stamp`), the mean share of those boxes on it (`stamp_overlap`), and how
    many prototypes have their source patch on it (`prototypes_on_stamp`)."""
    out: dict[str, dict] = {"test_on_stamp": {}, "stamp_overlap": {}, "prototypes_on_stamp": {}}
    valid = arrays["holdout_label"] >= 0
    for kind in kinds:
        holdout = arrays[f"{kind}_holdout_overlap"]
        source = arrays[f"{kind}_source_overlap"]
        found = arrays[f"{kind}_source_image"] >= 0
        out["test_on_stamp"][kind] = {name: float((holdout[i][valid[i]] >= ON_STAMP_SHARE).mean())
                                      for i, name in enumerate(sites)}
        out["stamp_overlap"][kind] = {name: float(holdout[i][valid[i]].mean()) for i, name in enumerate(sites)}
        out["prototypes_on_stamp"][kind] = {name: int((source[i][found[i]] >= ON_STAMP_SHARE).sum())
                                            for i, name in enumerate(sites)}
    return out


class InDISCOGM(InDISCO):
    name = "indisco-gm"
    title = "inDISCO GM"
    summary = "Federated ProtoPNet, global model: the server averages everything (prototypes, last layer, backbone)."


class InDISCOPM(InDISCO):
    name = "indisco-pm"
    title = "inDISCO PM"
    summary = ("Federated ProtoPNet, personalised: the server averages prototypes and last layer; each site pushes "
               "them onto its own images and retrains its last layer.")

    def is_local(self, name: str, module: nn.Module) -> bool:
        return not (name == "prototypes" or name.startswith("last_layer."))

    def after_aggregation(self, ctx) -> None:
        if self.stage(ctx.round) == "joint":
            for index in range(len(ctx.models)):
                self.push_and_fit(ctx, index, "global")


class InDISCOLM(InDISCO):
    name = "indisco-lm"
    title = "inDISCO LM"
    summary = "ProtoPNet at each site alone (inDISCO's local baseline): nothing is shared."
    kinds = ("local",)

    def is_local(self, name: str, module: nn.Module) -> bool:
        return True


class InDISCOCM(InDISCO):
    name = "indisco-cm"
    title = "inDISCO CM"
    summary = "One ProtoPNet on all sites' pooled images (inDISCO's centralised baseline)."
    pooled = True
    kinds = ("global",)


def _parameters(part: nn.Module | nn.Parameter) -> list[nn.Parameter]:
    return [part] if isinstance(part, nn.Parameter) else list(part.parameters())


def _upsample(maps: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Activation maps (N × k × h × w) at the image's size, bicubic (the reference's cv2.INTER_CUBIC)."""
    return F.interpolate(maps, size=size, mode="bicubic", align_corners=False)


def _rescale(maps: torch.Tensor) -> torch.Tensor:
    """Each map (last two dimensions) to [0, 1], as the reference's heat overlay."""
    low = maps.amin((-2, -1), keepdim=True)
    high = maps.amax((-2, -1), keepdim=True)
    return (maps - low) / (high - low).clamp(min=1e-12)


def _display(images: torch.Tensor) -> np.ndarray:
    """Images in [0, 1] (N × C × H × W) as bytes, at most DISPLAY_SIDE pixels wide."""
    side = max(images.shape[-2:])
    if side > DISPLAY_SIDE:
        scale = DISPLAY_SIDE / side
        size = (max(1, round(images.shape[-2] * scale)), max(1, round(images.shape[-1] * scale)))
        images = F.interpolate(images.float(), size=size, mode="area")
    return (images.clamp(0, 1) * 255).round().to(torch.uint8).cpu().numpy()


def _display_maps(maps: torch.Tensor) -> np.ndarray:
    """Activation maps (... × H × W), each rescaled to [0, 1], as bytes at the display size."""
    flat = _display(_rescale(maps).reshape(-1, 1, *maps.shape[-2:]))[:, 0]
    return flat.reshape(*maps.shape[:-2], *flat.shape[-2:])


def _pad(parts: list, fill: float) -> np.ndarray:
    """Per-site arrays of different first lengths stacked over sites, padded with `fill`."""
    parts = [p.detach().cpu().numpy() if isinstance(p, torch.Tensor) else np.asarray(p) for p in parts]
    longest = max(len(p) for p in parts)
    out = np.full((len(parts), longest, *parts[0].shape[1:]), fill, dtype=parts[0].dtype)
    for i, part in enumerate(parts):
        out[i, : len(part)] = part
    return out
