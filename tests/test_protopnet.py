"""ProtoPNet's parts: shapes, the loss terms, push, and the box rule on hand-made activation maps."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fedcore.injected import InjectedProblem, StampBox
from fedcore.interpret.prototype_boxes import (
    box_overlap,
    high_activation_box,
    high_activation_boxes,
    spread_over_classes,
    stamp_region,
)
from fedcore.models import ProtoPNet, build_backbone
from fedcore.models.protopnet import LossWeights, latents, nearest_patches, prototype_terms, push, similarity


def small_net(n_classes=3, per_class=2, dim=16, side=28, channels=1):
    torch.manual_seed(0)
    return ProtoPNet(*build_backbone("cnn", (channels, side, side)), n_classes, per_class, dim)


def test_forward_shapes_and_log_probabilities():
    model = small_net().eval()
    x = torch.rand(5, 1, 28, 28)
    logits, nearest = model.logits_and_distances(x)
    assert logits.shape == (5, 3) and nearest.shape == (5, 6)
    assert model.latent(x).shape == (5, 16, 7, 7)
    assert model.distance_maps(model.latent(x)).shape == (5, 6, 7, 7)
    assert torch.allclose(model(x).exp().sum(1), torch.ones(5))
    assert (nearest >= 0).all()


def test_distances_are_squared_l2_and_similarity_is_the_log_ratio():
    model = small_net()
    z = torch.rand(2, 16, 7, 7)
    expected = ((z[:, None] - model.prototypes[None, :, :, None, None]) ** 2).sum(2)
    assert torch.allclose(model.distance_maps(z), expected, atol=1e-5)
    d = torch.tensor([0.0, 1.0, 10.0])
    assert torch.allclose(similarity(d), torch.log((d + 1) / (d + 1e-4)))


def test_last_layer_starts_at_one_and_minus_a_half_and_prototypes_have_classes():
    model = small_net(n_classes=3, per_class=2)
    assert model.prototype_class.tolist() == [0, 0, 1, 1, 2, 2]
    weight = model.last_layer.weight.detach().numpy()
    assert model.last_layer.bias is None
    for k in range(3):
        for j in range(6):
            assert weight[k, j] == (1.0 if j // 2 == k else -0.5)
    assert model.wrong_class_l1().item() == pytest.approx(0.5 * 12)  # 12 wrong-class connections of |-0.5|


def test_cluster_and_separation_terms_follow_their_definitions():
    model = small_net(n_classes=2, per_class=2, dim=4)
    nearest = torch.tensor([[1.0, 3.0, 0.5, 2.0],   # class 0: own prototypes 0, 1 -> cluster 1.0; others 2, 3 -> 0.5
                            [4.0, 2.0, 6.0, 5.0]])  # class 1: own 2, 3 -> cluster 5.0; others 0, 1 -> 2.0
    y = torch.tensor([0, 1])
    only_cluster = prototype_terms(model, nearest, y, LossWeights(cluster=1.0, separation=0.0, l1=0.0))
    only_separation = prototype_terms(model, nearest, y, LossWeights(cluster=0.0, separation=1.0, l1=0.0))
    assert only_cluster.item() == pytest.approx((1.0 + 5.0) / 2)
    assert only_separation.item() == pytest.approx(-(0.5 + 2.0) / 2)
    only_l1 = prototype_terms(model, nearest, y, LossWeights(cluster=0.0, separation=0.0, l1=1.0))
    assert only_l1.item() == pytest.approx(model.wrong_class_l1().item())


def test_the_loss_trains_every_part_that_it_should():
    model = small_net()
    x, y = torch.rand(6, 1, 28, 28), torch.tensor([0, 1, 2, 0, 1, 2])
    logits, nearest = model.logits_and_distances(x)
    loss = F.cross_entropy(logits, y) + prototype_terms(model, nearest, y, LossWeights())
    loss.backward()
    for part in (model.prototypes, model.add_on[0].weight, model.last_layer.weight,
                 next(model.features.parameters())):
        assert part.grad is not None and part.grad.abs().sum() > 0


def test_push_replaces_every_prototype_by_a_latent_patch_of_its_own_class():
    model = small_net(n_classes=3, per_class=2).eval()
    x = torch.rand(12, 1, 28, 28)
    y = torch.tensor([0, 1, 2, 1, 0, 2, 2, 1, 0, 0, 1, 2])
    z = latents(model, x)
    before = model.prototypes.detach().clone()
    # brute force: the nearest own-class patch of every prototype, before pushing
    patches = z.permute(0, 2, 3, 1).reshape(len(x), -1, z.shape[1])  # image × patch × D
    expected = []
    for j, p in enumerate(before):
        own = (y == j // 2).nonzero().flatten()
        distance = ((patches[own] - p) ** 2).sum(-1)  # own images × patches
        flat = int(distance.flatten().argmin())
        expected.append(patches[own[flat // patches.shape[1]], flat % patches.shape[1]])
    image, patch = push(model, z, y)
    after = model.prototypes.detach()
    for j in range(6):
        assert y[image[j]] == j // 2  # a patch of its own class
        assert torch.equal(after[j], z[image[j], :, patch[j] // 7, patch[j] % 7])  # exactly that latent patch
        assert torch.allclose(after[j], expected[j])  # and the nearest one
    assert not torch.equal(after, before)


def test_a_class_without_images_keeps_its_prototypes():
    model = small_net(n_classes=3, per_class=2).eval()
    x, y = torch.rand(4, 1, 28, 28), torch.tensor([0, 1, 0, 1])
    before = model.prototypes.detach().clone()
    image, _ = push(model, latents(model, x), y)
    assert image[4:].tolist() == [-1, -1]
    assert torch.equal(model.prototypes[4:], before[4:])
    assert nearest_patches(model, latents(model, x), y)[0][:4].ge(0).all()


def test_box_of_a_single_hot_block():
    activation = np.zeros((28, 28))
    activation[3:10, 10:17] = 1.0  # 49 hot pixels, more than 5 % of 784: the 95th percentile is 1
    assert high_activation_box(activation) == (3, 10, 10, 17)
    activation[3:10, 10:17] = 0.0
    activation[3:8, 10:16] = 1.0  # 30 hot pixels, under 5 %: the percentile is 0 and every pixel is above it
    assert high_activation_box(activation) == (0, 28, 0, 28)


def test_box_holds_every_pixel_above_the_percentile():
    activation = np.zeros((20, 20))
    activation[2, 3] = 5.0
    activation[15, 11] = 4.0
    activation[:, :] += np.linspace(0, 1e-3, 400).reshape(20, 20)  # no ties below the hot pixels
    # the 99.5th percentile of 400 values keeps the top two pixels: the box spans both
    assert high_activation_box(activation, 99.5) == (2, 16, 3, 12)
    assert high_activation_box(activation, 100) == (2, 3, 3, 4)


def test_box_on_a_smooth_bump_and_many_maps_at_once():
    rows, cols = np.mgrid[0:32, 0:32]
    bump = np.exp(-((rows - 20) ** 2 + (cols - 8) ** 2) / 8.0)
    r0, r1, c0, c1 = high_activation_box(bump)
    assert r0 < 20 < r1 and c0 < 8 < c1 and (r1 - r0) * (c1 - c0) <= 0.1 * 32 * 32
    maps = np.stack([bump, bump.T])
    boxes = high_activation_boxes(maps[None])
    assert boxes.shape == (1, 2, 4)
    assert tuple(boxes[0, 1]) == (c0, c1, r0, r1)


def test_box_overlap_is_the_share_of_the_box_on_the_region():
    stamp = (1, 8, 1, 8)
    boxes = np.array([[1, 8, 1, 8], [0, 4, 0, 4], [10, 20, 10, 20], [4, 12, 4, 8]])
    assert box_overlap(boxes, stamp).tolist() == pytest.approx([1.0, 9 / 16, 0.0, 16 / 32])


def test_stamp_region_from_ground_truth():
    truth = [InjectedProblem("a", "f", "offset"), InjectedProblem("s1", None, "stamp", label="1", box=StampBox(1, 1, 7))]
    assert stamp_region(truth) == ((1, 8, 1, 8), ["s1"], "1")
    assert stamp_region(truth[:1]) is None


def test_shown_images_take_the_classes_in_turn():
    labels = np.array([1, 1, 0, 1, 2, 0])
    assert spread_over_classes(labels, 4).tolist() == [2, 0, 4, 5]
    assert sorted(spread_over_classes(labels, 10).tolist()) == list(range(6))
