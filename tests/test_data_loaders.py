"""Real-dataset loaders on the real files in ../shared/data, and on small files in their
published layouts written here (the official HAR folder, IDX files, image folders)."""

import gzip
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from data_adapters import inspect_data, load_federation
from fedcore.errors import DataError

HEART_ROWS = {"cleveland": 303, "hungarian": 294, "switzerland": 123, "va": 200}


# -- heart disease -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def heart(shared_data):
    return f"heart:{shared_data / 'heart_disease' / 'canonical'}"


def test_heart_disease_four_hospitals(heart):
    report = inspect_data(heart)
    assert {s["site"]: s["rows"] for s in report.sites} == HEART_ROWS
    assert report.class_names == ["no disease", "disease"]
    assert report.sites[0]["class_counts"] == {"no disease": 164, "disease": 139}  # num > 0 = disease
    assert report.features["cp"] == {"kind": "categorical", "kind_from": "documented", "values": ["1", "2", "3", "4"]}
    assert report.missing_share["hungarian"]["ca"] == 0.9898  # '?' read as missing
    # Switzerland's cholesterol is 0 for every patient: not measured (the check-up's finding), not a shifted median
    chol = [(f["site"], f["kind"]) for f in report.findings if f["feature"] == "chol"]
    assert ("switzerland", "constant") in chol and "not measured?" in next(
        f["message"] for f in report.findings if (f["site"], f["feature"]) == ("switzerland", "chol"))
    federation = load_federation(heart)
    assert federation.site_names == list(HEART_ROWS)
    assert [s.n_train + s.n_test for s in federation.sites] == list(HEART_ROWS.values())
    assert federation.n_features == 22 and federation.feature_names[2:6] == ["cp=1", "cp=2", "cp=3", "cp=4"]
    assert "Andras Janosi" in federation.preprocessing["attribution"]
    assert not torch.isnan(federation.sites[1].x_train).any()


def test_heart_disease_severity_levels_and_the_combined_csv_agree(heart, shared_data):
    severity = inspect_data(f"{heart},binary=false")
    assert severity.class_names == ["0", "1", "2", "3", "4"]
    combined = inspect_data({"source": "csv", "files": [str(shared_data / "heart_disease" / "heart_disease_4sites.csv")],
                             "target": "num", "site_column": "site"})
    assert {s["site"]: s["rows"] for s in combined.sites} == HEART_ROWS
    assert combined.sites[0]["class_counts"] == severity.sites[0]["class_counts"]


# -- HAR ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def har_by_subject(shared_data):
    return load_federation(f"har:{shared_data / 'uci_har' / 'uci_har_time265_by_subject.csv.gz'}")


def test_har_by_subject_csv(har_by_subject):
    federation = har_by_subject
    assert len(federation.sites) == 30 and federation.site_names[0] == "subject 01"
    assert federation.n_features == 265 and set(federation.feature_kinds) == {"continuous"}
    assert federation.feature_names[:2] == ["tBodyAcc-mean()-X", "tBodyAcc-mean()-Y"]  # from features.txt
    assert federation.class_names == ["WALKING", "WALKING_UPSTAIRS", "WALKING_DOWNSTAIRS", "SITTING", "STANDING", "LAYING"]
    assert sum(s.n_train + s.n_test for s in federation.sites) == 10299
    assert federation.sites[0].n_train + federation.sites[0].n_test == 347
    assert "orig_split" not in federation.feature_names


def write_har_folder(root, subjects=(1, 2, 3), per_subject=30):
    """A small 'UCI HAR Dataset' folder: 4 features (one name repeated, as in the real list)."""
    folder = root / "UCI HAR Dataset"
    (folder / "train").mkdir(parents=True)
    (folder / "test").mkdir()
    (folder / "features.txt").write_text("1 tBodyAcc-mean()-X\n2 fBodyAcc-bandsEnergy()-1,8\n"
                                         "3 fBodyAcc-bandsEnergy()-1,8\n4 angle(X,gravityMean)\n")
    (folder / "activity_labels.txt").write_text("\n".join(f"{k} A{k}" for k in range(1, 7)))
    rng = np.random.default_rng(0)
    for part, part_subjects in (("train", subjects[:-1]), ("test", subjects[-1:])):
        subject = np.repeat(part_subjects, per_subject)
        y = np.tile(np.arange(1, 7), len(subject) // 6 + 1)[: len(subject)]
        x = rng.uniform(-1, 1, (len(subject), 4)) + y[:, None] * 0.1
        np.savetxt(folder / part / f"X_{part}.txt", x, fmt="%.7e")
        np.savetxt(folder / part / f"y_{part}.txt", y, fmt="%d")
        np.savetxt(folder / part / f"subject_{part}.txt", subject, fmt="%d")
    return root


def test_har_official_folder_layout(tmp_path):
    root = write_har_folder(tmp_path)
    for path in (root, root / "UCI HAR Dataset"):  # the folder itself, or the one holding it
        federation = load_federation(f"har:{path}")
        assert federation.site_names == ["subject 01", "subject 02", "subject 03"]  # train and test pooled
        assert federation.feature_names == ["tBodyAcc-mean()-X", "fBodyAcc-bandsEnergy()-1,8",
                                            "fBodyAcc-bandsEnergy()-1,8 [2]", "angle(X,gravityMean)"]
        assert federation.class_names[0] == "WALKING"
    (root / "UCI HAR Dataset" / "test" / "y_test.txt").unlink()
    with pytest.raises(DataError, match="y_test.txt is missing from the HAR folder"):
        load_federation(f"har:{root}")


# -- vehicle sensor network -----------------------------------------------------------------------
def test_vehicle_sensor_network_by_sensor(shared_data):
    federation = load_federation(f"vehicle:{shared_data / 'vehicle_sensor' / 'vehicle_ditto_train_by_sensor.csv.gz'}")
    assert len(federation.sites) == 23 and federation.site_names[:2] == ["sensor 00", "sensor 01"]
    assert federation.n_features == 100 and federation.class_names == ["-1", "+1"]
    assert min(s.n_train + s.n_test for s in federation.sites) == 7  # the smallest sensor takes part
    assert sum(s.n_train + s.n_test for s in federation.sites) == 1860


# -- MedMNIST npz ---------------------------------------------------------------------------------
def test_breastmnist_npz(shared_data):
    federation = load_federation(f"npz:{shared_data / 'medmnist' / 'breastmnist.npz'},sites=3")
    assert federation.input_shape == (1, 28, 28) and not federation.is_tabular and federation.feature_names == []
    assert federation.class_names == ["malignant", "normal, benign"]
    assert len(federation.sites) == 3
    assert sum(s.n_train + s.n_test for s in federation.sites) == 546 + 78  # train + val go to the sites
    x_server, y_server = federation.server_test
    assert tuple(x_server.shape) == (156, 1, 28, 28) and set(y_server.tolist()) == {0, 1}
    x = federation.sites[0].x_train
    assert x.dtype == torch.float32 and 0 <= float(x.min()) and float(x.max()) <= 1 and float(x.max()) > 0.5


def test_npz_without_the_expected_arrays_or_with_objects(tmp_path):
    np.savez(tmp_path / "plain.npz", images=np.zeros((3, 4, 4), np.uint8))
    with pytest.raises(DataError, match="plain.npz lacks train_images, train_labels, test_images, test_labels"):
        load_federation(f"npz:{tmp_path / 'plain.npz'}")
    np.savez(tmp_path / "objects.npz", train_images=np.array([{"a": 1}], dtype=object))
    with pytest.raises(DataError, match="objects.npz holds Python objects; only plain arrays are read"):
        load_federation(f"npz:{tmp_path / 'objects.npz'}")


# -- IDX ------------------------------------------------------------------------------------------
def idx_bytes(array):
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + b"".join(struct.pack(">I", d) for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


def write_idx(folder, prefix, images, labels, packed):
    for kind, array in (("images-idx3", images), ("labels-idx1", labels)):
        name = folder / f"{prefix}-{kind}-ubyte{'.gz' if packed else ''}"
        name.write_bytes(gzip.compress(idx_bytes(array)) if packed else idx_bytes(array))


@pytest.mark.parametrize("packed", [False, True])
def test_idx_files_written_here(tmp_path, packed):
    rng = np.random.default_rng(0)
    images, labels = rng.integers(0, 256, (120, 6, 5)), np.arange(120) % 10
    write_idx(tmp_path, "train", images, labels, packed)
    write_idx(tmp_path, "t10k", images[:30], labels[:30], packed)
    federation = load_federation(f"idx:{tmp_path},sites=2")
    assert federation.input_shape == (1, 6, 5) and federation.class_names == [str(k) for k in range(10)]
    assert sum(s.n_train + s.n_test for s in federation.sites) == 120  # train to the sites, t10k to the server
    assert len(federation.server_test[1]) == 30
    pixels = torch.cat([torch.cat([s.x_train, s.x_test]) for s in federation.sites]).flatten(1) * 255
    assert sorted(map(tuple, pixels.round().int().tolist())) == sorted(map(tuple, images.reshape(120, -1).tolist()))


def test_idx_real_mnist_test_set_and_broken_files(shared_data, tmp_path):
    report = inspect_data(f"idx:{shared_data / 'mnist'},sites=5,split=dirichlet:0.5")
    assert sum(s["n_train"] + s["n_test"] for s in report.sites) == 10_000 and len(report.class_names) == 10
    assert report.input_shape == [1, 28, 28]
    assert any("train-labels-idx1-ubyte.gz has no images file beside it" in w for w in report.warnings)
    single = load_federation(f"idx:{shared_data / 'mnist' / 't10k-images-idx3-ubyte.gz'},sites=2")
    assert sum(s.n_train + s.n_test for s in single.sites) == 10_000
    write_idx(tmp_path, "t10k", np.zeros((40, 4, 4)), np.arange(40) % 2, packed=False)
    images = tmp_path / "t10k-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:-7])
    with pytest.raises(DataError, match="t10k-images-idx3-ubyte should hold 656 bytes for shape \\(40, 4, 4\\) but has 649"):
        load_federation(f"idx:{tmp_path}")
    images.write_bytes(b"GIF89a....")
    with pytest.raises(DataError, match="is not an IDX file"):
        load_federation(f"idx:{tmp_path}")


def test_fashion_mnist_is_named_by_its_folder(tmp_path):
    folder = tmp_path / "fashion-mnist"
    folder.mkdir()
    write_idx(folder, "t10k", np.zeros((40, 4, 4)), np.arange(40) % 10, packed=True)
    assert load_federation(f"idx:{folder},sites=2").class_names[:2] == ["T-shirt/top", "Trouser"]


# Debian's dataset-fashion-mnist package (.ci/run installs it): the published IDX files.
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_FILES = [f"{part}-{kind}-ubyte.gz" for part in ("train", "t10k") for kind in ("images-idx3", "labels-idx1")]


@pytest.fixture(scope="module")
def fashion_mnist():
    if not all((FASHION_MNIST / name).is_file() for name in FASHION_MNIST_FILES):
        if os.environ.get("CI"):
            pytest.fail("Fashion-MNIST is missing; .ci/run installs Debian's dataset-fashion-mnist so this test "
                        "runs in CI.")
        pytest.skip("needs Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist)")
    return FASHION_MNIST


def test_idx_real_fashion_mnist_from_the_debian_package(fashion_mnist):
    federation = load_federation(f"idx:{fashion_mnist},sites=4")
    assert federation.name == "Fashion-MNIST (train, 60000 images)"
    assert federation.class_names == ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                                      "Sneaker", "Bag", "Ankle boot"]
    assert federation.input_shape == (1, 28, 28) and len(federation.sites) == 4
    train = torch.cat([torch.cat([s.y_train, s.y_test]) for s in federation.sites])
    x_server, y_server = federation.server_test
    assert len(train) == 60_000 and tuple(x_server.shape) == (10_000, 1, 28, 28)
    # The published sets are balanced over the 10 labels: 6000 training and 1000 test images each.
    assert torch.bincount(train, minlength=10).tolist() == [6000] * 10
    assert torch.bincount(y_server, minlength=10).tolist() == [1000] * 10
    assert 0 <= float(x_server.min()) and float(x_server.max()) <= 1


# -- image folders --------------------------------------------------------------------------------
def write_images(root, sites=("clinic_a", "clinic_b"), classes=("benign", "malignant"), n=12, size=(8, 8), mode="L"):
    from PIL import Image

    rng = np.random.default_rng(0)
    for site in sites:
        for cls in classes:
            (root / site / cls).mkdir(parents=True, exist_ok=True)
            for k in range(n):
                shape = (size[1], size[0], 3) if mode == "RGB" else (size[1], size[0])
                Image.fromarray(rng.integers(0, 256, shape).astype(np.uint8), mode).save(root / site / cls / f"{k}.png")
    return root


def test_image_folders(tmp_path):
    root = write_images(tmp_path)
    (root / "clinic_a" / "benign" / "notes.txt").write_text("not an image")
    federation = load_federation(f"images:{root}")
    assert federation.site_names == ["clinic_a", "clinic_b"] and federation.class_names == ["benign", "malignant"]
    assert federation.input_shape == (1, 8, 8)
    assert [s.n_train + s.n_test for s in federation.sites] == [24, 24]
    write_images(root, sites=("clinic_c",), n=12, size=(8, 8), mode="RGB")
    assert load_federation(f"images:{root}").input_shape == (3, 8, 8)  # one colour site makes all colour


def test_image_folders_of_different_sizes_need_a_size(tmp_path):
    root = write_images(tmp_path)
    write_images(root, sites=("clinic_c",), size=(10, 6))
    with pytest.raises(DataError, match=r"The images have different sizes: 8×8 \(clinic_a/benign/0.png\), "
                                        r"10×6 \(clinic_c/benign/0.png\); set size"):
        load_federation(f"images:{root}")
    assert load_federation(f"images:{root},size=16").input_shape == (1, 16, 16)
    (root / "clinic_a" / "benign" / "0.png").write_bytes(b"not a png")
    with pytest.raises(DataError, match="clinic_a/benign/0.png is not a readable image"):
        load_federation(f"images:{root},size=16")
