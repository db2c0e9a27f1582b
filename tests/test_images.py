"""Image federations: the CNN and torchvision backbones, the algorithms that train them, and
inDISCO's sharing and records, on small seeded synthetic images."""

import numpy as np
import pytest
import torch
from torch import nn

from data_adapters import load_federation
from fedcore.algorithms import REGISTRY, build_algorithm
from fedcore.engine import Simulation, TrainConfig
from fedcore.errors import DataError, SpecError
from fedcore.models import ImageClassifier, build_backbone
from tests.helpers import differing, make_federation, simulate as train

SMALL = {"source": "synthetic_scans", "images": 150, "size": 16, "split": "iid", "sites": 3}


@pytest.fixture(scope="module")
def images():
    return load_federation(SMALL, seed=0)


def simulate(algorithm, federation, params=None, **config):
    return train(algorithm, params, federation, **{"rounds": 2, "seed": 0, **config})


@pytest.mark.parametrize("algorithm", ["fedavg", "fedbn", "local", "centralized", "fedprox", "fedper", "adafed"])
def test_image_federations_train_with_the_small_cnn(images, algorithm):
    sim, history = simulate(algorithm, images, local_epochs=1)
    assert sim.executor.name == "per-site"
    assert isinstance(sim.model_for_site(0), ImageClassifier)
    for metrics in history[-1]["sites"].values():
        assert 0 <= metrics["balanced_accuracy"] <= 1 and 0 <= metrics["sensitivity"] <= 1
    assert sim.predict(sim.model_for_site(0), sim.test_sets[0][0]).shape == (len(sim.test_sets[0][1]), 2)


def test_fedbn_on_images_keeps_every_batchnorm_layer_local(images):
    sim, _ = simulate("fedbn", images, local_epochs=1)
    batch_norm = {f"{prefix}.{name}" for prefix, module in sim.models[0].named_modules()
                  if isinstance(module, nn.BatchNorm2d) for name in ("weight", "bias", "running_mean", "running_var")}
    assert batch_norm and differing(sim) == batch_norm


@pytest.mark.parametrize("variant", ["pretrained", "d", "f"])
def test_fedhealth2_measures_image_sites(images, variant):
    params = {"variant": variant, "pretrain_epochs": 2, "warmup_rounds": 1}
    sim, history = simulate("fedhealth2", images, params, local_epochs=1)
    weights = sim.algorithm.weights
    assert weights.shape == (3, 3) and np.allclose(weights.sum(1), 1) and np.allclose(np.diag(weights), 0.5)
    assert set(history[-1]["algorithm"]["nearest"]) == set(images.site_names)


def test_tabular_only_algorithms_refuse_images_and_indisco_refuses_tables(images):
    with pytest.raises(DataError, match=r"holds images \(1×16×16\); iFedAvg trains tables only. For images use: .*indisco-pm"):
        Simulation(images, build_algorithm("ifedavg"), TrainConfig(rounds=1))
    with pytest.raises(DataError, match="inDISCO PM trains images only. For tables use: .*ifedavg"):
        Simulation(make_federation(), build_algorithm("indisco-pm"), TrainConfig(rounds=1))
    with pytest.raises(SpecError, match="apply to image federations"):
        Simulation(make_federation(), build_algorithm("fedavg"), TrainConfig(rounds=1, backbone="resnet18"))


def test_the_small_cnn_pools_to_about_seven_by_seven():
    for side, expected in [(28, 7), (64, 8), (224, 7)]:
        backbone, channels = build_backbone("cnn", (1, side, side))
        assert backbone(torch.zeros(2, 1, side, side)).shape == (2, channels, expected, expected)
    backbone, _ = build_backbone("cnn", (3, 32, 32))
    assert backbone(torch.zeros(1, 3, 32, 32)).shape[1] == 128


def test_a_torchvision_backbone_loads_weights_only_from_a_local_file(tmp_path):
    import torchvision

    torch.manual_seed(3)
    reference = torchvision.models.resnet18(weights=None)
    path = tmp_path / "resnet18.pth"
    torch.save(reference.state_dict(), path)
    backbone, channels = build_backbone("resnet18", (1, 32, 32), str(path))
    assert channels == 512
    assert torch.equal(backbone.trunk[0].weight, reference.conv1.weight)
    assert backbone(torch.rand(2, 1, 32, 32)).shape == (2, 512, 1, 1)  # grey images become three channels
    with pytest.raises(SpecError, match="does not exist"):
        build_backbone("resnet18", (3, 32, 32), str(tmp_path / "missing.pth"))
    torch.save(torchvision.models.resnet34(weights=None).state_dict(), tmp_path / "resnet34.pth")
    with pytest.raises(SpecError, match="resnet34.pth does not fit resnet18"):
        build_backbone("resnet18", (3, 32, 32), str(tmp_path / "resnet34.pth"))
    torch.save(nn.Linear(2, 2), tmp_path / "module.pth")  # a pickled object, not a state dict
    with pytest.raises(SpecError, match="without running code"):
        build_backbone("resnet18", (3, 32, 32), str(tmp_path / "module.pth"))
    with pytest.raises(SpecError, match="cannot take 16×16 images"):
        build_backbone("vgg11", (3, 16, 16))


# -- inDISCO ----------------------------------------------------------------------------------
INDISCO = {"prototypes_per_class": 2, "prototype_dim": 8, "last_layer_epochs": 2, "explain_images": 4}


def test_gm_shares_everything(images):
    sim, _ = simulate("indisco-gm", images, INDISCO, local_epochs=1)
    assert differing(sim) == set()
    assert {"prototypes", "last_layer.weight", "add_on.0.weight"} <= set(sim.shared_names)
    assert any(name.startswith("features.") for name in sim.shared_names)


def test_pm_shares_only_prototypes_and_last_layer(images):
    sim = Simulation(images, build_algorithm("indisco-pm", INDISCO),
                     TrainConfig(**{**REGISTRY["indisco-pm"].config_defaults, "rounds": 2, "local_epochs": 1}))
    assert sim.shared_names == ["last_layer.weight", "prototypes"]
    sim.step()  # warm-up: no push, so the sites hold exactly the averaged prototypes and last layer
    assert differing(sim) & {"prototypes", "last_layer.weight"} == set()
    assert "add_on.0.weight" in differing(sim)
    averaged = {}
    original = sim.algorithm.push_and_fit

    def remember(sim_, index, which):  # the global prototypes each site receives before its push
        if which == "global":
            averaged[index] = sim_.models[index].prototypes.detach().clone()
        original(sim_, index, which)

    sim.algorithm.push_and_fit = remember
    sim.step()  # joint: each site pushes the global prototypes onto its own patches
    assert all(torch.equal(averaged[0], averaged[i]) for i in averaged)  # everyone received the same
    for index, model in enumerate(sim.models):
        from fedcore.models.protopnet import latents

        x, y = sim.train_sets[index]
        z = latents(model, x)
        patches = z.permute(0, 2, 3, 1).reshape(len(x), -1, z.shape[1])
        for j, p in enumerate(model.prototypes.detach()):
            own = patches[y == int(model.prototype_class[j])].reshape(-1, z.shape[1])
            assert ((own - p) ** 2).sum(1).min() < 1e-10  # a patch of the site's own images of its class
    assert "prototypes" in differing(sim)


def test_lm_shares_nothing_and_cm_trains_one_model(images):
    lm, _ = simulate("indisco-lm", images, INDISCO, local_epochs=1, rounds=1)
    assert lm.shared_names == [] and "prototypes" in differing(lm)
    cm, history = simulate("indisco-cm", images, INDISCO, local_epochs=1, rounds=1)
    assert len(cm.models) == 1 and set(history[-1]["sites"]) == set(images.site_names)


def test_indisco_records_every_sites_view_of_local_and_global_prototypes():
    federation = load_federation({**SMALL, "size": 28, "inject": ["stamp:site2"]}, seed=0)
    sim, history = simulate("indisco-gm", federation, INDISCO, local_epochs=1)
    scalars, arrays = sim.algorithm.record(sim)
    n_sites, n_protos = 3, 4
    assert arrays["prototype_class"].tolist() == [0, 0, 1, 1]
    assert arrays["image_size"].tolist() == [28, 28] and arrays["stamp_box"].tolist() == [1, 8, 1, 8]
    assert arrays["stamped_site"].tolist() == [False, True, False]
    assert arrays["test_pixels"].shape == (n_sites, 4, 1, 28, 28) and arrays["test_pixels"].dtype == np.uint8
    for kind in ("local", "global"):
        assert arrays[f"{kind}_source_box"].shape == (n_sites, n_protos, 4)
        assert arrays[f"{kind}_source_heat"].shape == (n_sites, n_protos, 28, 28)
        assert arrays[f"{kind}_test_top"].shape == (n_sites, 4, n_protos)  # top ten, or all when fewer
        assert arrays[f"{kind}_test_box"].shape == (n_sites, 4, n_protos, 4)
        assert arrays[f"{kind}_last_layer"].shape == (n_sites, 2, n_protos)
        boxes = arrays[f"{kind}_source_box"]
        assert ((boxes[..., 0] < boxes[..., 1]) & (boxes[..., 2] < boxes[..., 3])).all()
        # a source patch is an image of the prototype's own class at that site
        for site, data in enumerate(federation.sites):
            labels = data.y_train.numpy()[arrays[f"{kind}_source_image"][site]]
            assert labels.tolist() == arrays["prototype_class"].tolist()
        similarity = arrays[f"{kind}_test_top_similarity"]
        assert (np.diff(similarity, axis=-1) <= 1e-6).all()  # most activated first
    assert set(scalars.test_on_stamp) == {"local", "global"}
    assert set(scalars.local_model) == set(federation.site_names)
    assert history[-1]["algorithm"]["stamp"]["sites"] == ["site2"]


# -- the command line ---------------------------------------------------------------------------
def run_cli(store, *args):
    from application.cli import main

    return main(["run", "--store", str(store), "-q", *args])


def test_cli_trains_indisco_pm_on_medmnist_with_a_stamp_and_show_presents_it(tmp_path, shared_data, capsys):
    from application.cli import main
    from fedcore.store import RunStore

    npz = shared_data / "medmnist" / "breastmnist.npz"
    assert run_cli(tmp_path, "--data", f"npz:{npz}", "--split", "iid", "--sites", "4", "--inject", "stamp:site1",
                   "--algorithm", "indisco-pm", "--rounds", "2", "--local-epochs", "1", "--prototypes-per-class", "2",
                   "--prototype-dim", "8", "--last-layer-epochs", "1", "--explain-images", "2") == 0
    out = capsys.readouterr().out
    assert "sensitivity" in out and "specificity" in out
    assert "Prototype boxes and the stamp (stamped: site1, class 'normal, benign')" in out
    (run,) = RunStore(tmp_path).runs()
    assert run.spec.params["prototypes_per_class"] == 2 and run.spec.config["loss_reduction"] == "mean"
    assert main(["show", "--store", str(tmp_path), run.id]) == 0
    shown = capsys.readouterr().out
    assert "Local models (as each site sent them" in shown and "local box share" in shown
    assert run.load_arrays(2)["global_source_box"].shape == (4, 4, 4)


def test_cli_trains_image_folders(tmp_path, capsys):
    from PIL import Image

    rng = np.random.default_rng(0)
    for site in ("north", "south"):
        for label, brightness in (("healthy", 60), ("sick", 190)):
            folder = tmp_path / "images" / site / label
            folder.mkdir(parents=True)
            for k in range(20):
                pixels = np.clip(rng.normal(brightness, 30, (16, 16)), 0, 255).astype(np.uint8)
                Image.fromarray(pixels).save(folder / f"{k}.png")
    store = tmp_path / "runs"
    assert run_cli(store, "--data", f"images:{tmp_path / 'images'}", "-a", "fedavg,indisco-lm", "--rounds", "1",
                   "--local-epochs", "1", "--prototypes-per-class", "2", "--prototype-dim", "8") == 0
    out = capsys.readouterr().out
    assert out.count("finished after round 1") == 2 and "north" in out and "south" in out


def test_the_stamped_sites_local_prototypes_look_at_the_stamp_far_more_often_than_clean_sites_and_global_ones():
    """The bias experiment, small and seeded: four sites of synthetic scans, a stamp on site1's
    'spot' images; each site trains its ProtoPNet alone (LM) for a warm-up and one joint round.
    The stamped site's model decides by the stamp's corner: on a large share of its hold-out images
    the most activated prototype is boxed on the stamp's place, at the clean sites almost never.
    The global prototypes of a GM run with the same settings look elsewhere on site1's images too:
    the federation does not learn the one site's shortcut.
    (Seeded: at this scale whether the boxes land on the corner, or beside it, depends on the
    initialisation; with this seed they land on it.)"""
    federation = load_federation({"source": "synthetic_scans", "images": 1200, "split": "iid", "sites": 4,
                                  "inject": ["stamp:site1"]}, seed=0)
    _, history = simulate("indisco-lm", federation, rounds=2)
    on_stamp = history[-1]["algorithm"]["test_on_stamp"]["local"]
    assert on_stamp["site1"] >= 0.3
    assert max(on_stamp[site] for site in ("site2", "site3", "site4")) <= 0.05
    _, history = simulate("indisco-gm", federation, rounds=2)
    assert history[-1]["algorithm"]["test_on_stamp"]["global"]["site1"] <= 0.05
