"""Image sources; every image becomes C×H×W float32 in [0, 1] (C = 1 grey, 3 colour).

- MedMNIST `.npz` (train_/val_/test_ images and labels): train + val are the rows dealt out to
  the sites by a partitioner; test becomes the server's test set. Read with allow_pickle=False.
- MNIST / Fashion-MNIST IDX files (`*-images-idx3-ubyte[.gz]` with `*-labels-idx1-ubyte[.gz]`):
  a folder or one images file; with both train and t10k present, train goes to the sites and
  t10k to the server. Fashion-MNIST (the Debian package `dataset-fashion-mnist` installs it under
  /usr/share/datasets/fashion-mnist/) is recognised by "fashion" in its path, for class names.
- Image folders `ROOT/SITE/CLASS/*.png|jpg|jpeg`: one site per folder, classes = the union of
  class folder names. Images of different sizes need `size` (they are resized to size×size).
"""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path

import numpy as np

from data_adapters.tables.site_rows import RawFederation, RawSite
from fedcore.errors import DataError

MEDMNIST_CLASSES = {  # from MedMNIST's INFO (labels 0, 1, ...)
    "breastmnist": ("malignant", "normal, benign"),
    "pneumoniamnist": ("normal", "pneumonia"),
}
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                         "Sneaker", "Bag", "Ankle boot")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
GREY_MODES = ("1", "L", "LA", "I", "I;16", "F")
IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_npz(path: str, classes: list[str] | None = None) -> RawFederation:
    file = Path(path)
    try:
        with np.load(file, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except FileNotFoundError:
        raise DataError(f"{file} does not exist.") from None
    except ValueError:  # an object array that would need unpickling
        raise DataError(f"{file.name} holds Python objects; only plain arrays are read (no unpickling).") from None
    except (OSError, zipfile.BadZipFile):
        raise DataError(f"{file.name} is not a readable .npz archive.") from None
    missing = [key for key in ("train_images", "train_labels", "test_images", "test_labels") if key not in arrays]
    if missing:
        raise DataError(f"{file.name} lacks {', '.join(missing)}; it has {', '.join(arrays) or 'no arrays'} "
                        "(the MedMNIST layout is train_/val_/test_ images and labels).")
    parts = {}
    for part in ("train", "val", "test"):
        if f"{part}_images" in arrays:
            parts[part] = (_images(arrays[f"{part}_images"], f"{file.name}: {part}_images"),
                           _labels(arrays[f"{part}_labels"], f"{file.name}: {part}_labels"))
    x = np.concatenate([parts[p][0] for p in parts if p != "test"])
    y = np.concatenate([parts[p][1] for p in parts if p != "test"])
    names = _class_names(classes or MEDMNIST_CLASSES.get(file.stem.lower()), [y, parts["test"][1]], file.name)
    return RawFederation(
        name=f"{file.stem} ({'×'.join(map(str, x.shape[1:]))} images)",
        description=f"{file.name}: {len(y)} train + val images dealt out to the sites; {len(parts['test'][1])} "
                    "test images held by the server.",
        source="npz",
        sites=[RawSite("pooled", x, y)],
        class_names=names,
        natural_sites=False,
        server_test=parts["test"],
    )


def read_idx(path: str, classes: list[str] | None = None) -> RawFederation:
    location = Path(path)
    warnings: list[str] = []
    pairs = _idx_pairs(location, warnings)
    if not pairs:
        raise DataError(f"{location} holds no IDX image file with its labels file "
                        "(e.g. t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz).")
    loaded = {}
    for prefix, (images_file, labels_file) in pairs.items():
        images, labels = _read_idx_file(images_file), _read_idx_file(labels_file)
        if len(images) != len(labels):
            raise DataError(f"{images_file.name} has {len(images)} images but {labels_file.name} {len(labels)} labels.")
        loaded[prefix] = (_images(images, images_file.name), _labels(labels, labels_file.name))
    sites_part = "train" if "train" in loaded else next(iter(loaded))
    server = next((loaded[p] for p in loaded if p != sites_part), None)
    x, y = loaded[sites_part]
    default = FASHION_MNIST_CLASSES if "fashion" in str(location.resolve()).lower() else None
    names = _class_names(classes or default, [y] + ([server[1]] if server else []), location.name)
    return RawFederation(
        name=f"{'Fashion-MNIST' if default else 'MNIST'} ({sites_part}, {len(y)} images)",
        description=f"IDX files in {location.name}: {len(y)} '{sites_part}' images dealt out to the sites"
                    + (f"; {len(server[1])} others held by the server." if server else "."),
        source="idx",
        sites=[RawSite("pooled", x, y)],
        class_names=names,
        natural_sites=False,
        server_test=server,
        warnings=warnings,
    )


def read_image_folders(path: str, size: int = 0) -> RawFederation:
    root = Path(path)
    if not root.is_dir():
        raise DataError(f"{root} is not a folder of site folders (ROOT/SITE/CLASS/image.png).")
    site_dirs = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    files = {site.name: _image_files(site) for site in site_dirs}
    files = {site: found for site, found in files.items() if found}
    if not files:
        raise DataError(f"{root} has no SITE/CLASS/*.png or *.jpg images.")
    class_names = sorted({cls for found in files.values() for cls, _ in found})
    headers = {f: _image_header(f) for found in files.values() for _, f in found}  # (mode, size)
    colour = any(mode not in GREY_MODES for mode, _ in headers.values())
    sizes = {size_ for _, size_ in headers.values()}
    if len(sizes) > 1 and not size:
        example: dict[tuple[int, int], Path] = {}
        for file, (_, size_) in headers.items():
            example.setdefault(size_, file)  # the first image of each size
        listed = ", ".join(f"{w}×{h} ({example[(w, h)].relative_to(root)})" for w, h in sorted(sizes)[:3])
        raise DataError(f"The images have different sizes: {listed}; set size (e.g. size=64) to resize them all.")
    sites = []
    for site, found in files.items():
        pixels = [_pixels(file, "RGB" if colour else "L", size) for _, file in found]
        sites.append(RawSite(site, _images(np.stack(pixels), site),
                             np.array([class_names.index(cls) for cls, _ in found], dtype=np.int64)))
    return RawFederation(
        name=f"Image folders: {root.name}",
        description=f"{len(sites)} sites of {'colour' if colour else 'grey'} images from {root.name}/SITE/CLASS/.",
        source="images",
        sites=sites,
        class_names=class_names,
    )


def _image_header(file: Path) -> tuple[str, tuple[int, int]]:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(file) as image:
            return image.mode, image.size
    except (UnidentifiedImageError, OSError):
        raise DataError(f"{file} is not a readable image.") from None


def _pixels(file: Path, mode: str, size: int) -> np.ndarray:
    from PIL import Image

    with Image.open(file) as image:
        image = image.convert(mode)
        if size:
            image = image.resize((size, size), Image.BILINEAR)
        return np.asarray(image)


def _image_files(site: Path) -> list[tuple[str, Path]]:
    return [
        (cls.name, f)
        for cls in sorted(d for d in site.iterdir() if d.is_dir() and not d.name.startswith("."))
        for f in sorted(cls.iterdir())
        if f.suffix.lower() in IMAGE_SUFFIXES
    ]


def _images(array: np.ndarray, what: str) -> np.ndarray:
    """N×H×W (grey) or N×H×W×3 (colour) -> N×C×H×W float32 in [0, 1]."""
    if array.ndim == 3:
        array = array[:, None]
    elif array.ndim == 4 and array.shape[-1] in (1, 3):
        array = array.transpose(0, 3, 1, 2)
    else:
        raise DataError(f"{what}: expected images of shape N×H×W or N×H×W×3, got {array.shape} "
                        "(3-D volumes are not supported).")
    if array.dtype == np.uint8:
        return array.astype(np.float32) / 255.0
    array = array.astype(np.float32)
    if array.min() < 0 or array.max() > 1:
        raise DataError(f"{what}: pixel values must be 0-255 bytes or floats in [0, 1]; found {array.min()} to {array.max()}.")
    return array


def _labels(array: np.ndarray, what: str) -> np.ndarray:
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise DataError(f"{what}: expected one class per image, got labels of shape {array.shape} (multi-label?).")
    if not np.issubdtype(array.dtype, np.integer) or array.min() < 0:
        raise DataError(f"{what}: labels must be class numbers 0, 1, ...")
    return array.astype(np.int64)


def _class_names(given: tuple[str, ...] | list[str] | None, labels: list[np.ndarray], file: str) -> list[str]:
    n_classes = int(max(lab.max() for lab in labels)) + 1
    if given is None:
        return [str(k) for k in range(n_classes)]
    if len(given) < n_classes:
        raise DataError(f"{file}: labels go up to {n_classes - 1} but only {len(given)} class names are given.")
    return list(given)


def _idx_pairs(location: Path, warnings: list[str]) -> dict[str, tuple[Path, Path]]:
    """prefix ('train', 't10k') -> (images file, labels file)."""
    if location.is_file():
        labels = location.with_name(location.name.replace("images", "labels").replace("idx3", "idx1"))
        if not labels.is_file():
            raise DataError(f"{location.name} has no labels file beside it (expected {labels.name}).")
        return {location.name.split("-")[0]: (location, labels)}
    if not location.is_dir():
        raise DataError(f"{location} does not exist.")
    pairs = {}
    for labels in sorted(location.glob("*labels*idx1*")):
        images = labels.with_name(labels.name.replace("labels", "images").replace("idx1", "idx3"))
        if images.is_file():
            pairs[labels.name.split("-")[0].split(".")[0]] = (images, labels)
        else:
            warnings.append(f"{labels.name} has no images file beside it ({images.name}); it is not used.")
    return pairs


def _read_idx_file(file: Path) -> np.ndarray:
    data = file.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            raise DataError(f"{file.name} is a damaged gzip file.") from None
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] not in IDX_TYPES:
        raise DataError(f"{file.name} is not an IDX file (it does not start with the IDX magic number).")
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * k: 8 + 4 * k], "big") for k in range(dims))
    dtype = np.dtype(IDX_TYPES[data[2]])
    expected = 4 + 4 * dims + int(np.prod(shape)) * dtype.itemsize
    if len(data) != expected:
        raise DataError(f"{file.name} should hold {expected} bytes for shape {shape} but has {len(data)} (truncated?).")
    return np.frombuffer(data, dtype=dtype, offset=4 + 4 * dims).reshape(shape).astype(dtype.newbyteorder("="))
