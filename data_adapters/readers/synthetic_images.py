"""A declared-SYNTHETIC image data set made up in code, for demos where no image data is on disk.

Grey `size`×`size` "scans" — no real patient, no real scanner: a smooth noisy background, a
brighter oval "organ" near the centre, and, in class 'spot', one small bright round spot inside
the organ at a random place (class 'clear' has none). The top-left corner stays background, so a
stamp injected there (`stamp:SITE`) is the only thing that ever appears in that corner.
"""

from __future__ import annotations

import numpy as np

from data_adapters.tables.site_rows import RawFederation, RawSite
from fedcore.errors import DataError

CLASSES = ("clear", "spot")


def make_synthetic_scans(images: int = 1200, size: int = 28, contrast: float = 0.18, data_seed: int = 0) -> RawFederation:
    """`contrast`: how much brighter the spot is than the organ (the task is harder when it is faint)."""
    if images < 40 or not 16 <= size <= 256 or not 0 < contrast <= 1:
        raise DataError(f"synthetic_scans: images must be at least 40, size 16 to 256 and contrast in (0, 1] "
                        f"(got {images}, {size}, {contrast}).")
    rng = np.random.default_rng(data_seed)
    y = np.arange(images) % 2
    rng.shuffle(y)
    x = np.stack([_scan(rng, size, bool(label), contrast) for label in y])[:, None].astype(np.float32)
    return RawFederation(
        name=f"Synthetic scans ({size}×{size}, SYNTHETIC)",
        description=(f"SYNTHETIC images made up in code, not real scans: {images} grey {size}×{size} images of "
                     "an oval 'organ'; class 'spot' has a small bright spot inside it, class 'clear' none."),
        source="synthetic_scans",
        sites=[RawSite("pooled", x, y.astype(np.int64))],
        class_names=list(CLASSES),
        natural_sites=False,
        synthetic=True,
    )


def _scan(rng: np.random.Generator, size: int, spot: bool, contrast: float) -> np.ndarray:
    row, col = np.mgrid[0:size, 0:size] / size
    coarse = rng.normal(0, 1, (size // 4 + 1, size // 4 + 1))
    texture = np.kron(coarse, np.ones((4, 4)))[:size, :size]  # blocky low-frequency noise
    image = 0.25 + 0.04 * texture + 0.03 * rng.normal(0, 1, (size, size))
    centre = 0.55 + rng.uniform(-0.06, 0.06, 2)
    radii = rng.uniform(0.22, 0.3, 2)
    organ = ((row - centre[0]) / radii[0]) ** 2 + ((col - centre[1]) / radii[1]) ** 2 <= 1
    image[organ] += 0.25
    if spot:
        angle, reach = rng.uniform(0, 2 * np.pi), rng.uniform(0, 0.55)
        where = centre + reach * radii * np.array([np.sin(angle), np.cos(angle)])
        image[np.hypot(row - where[0], col - where[1]) <= max(1.5, size / 14) / size] += contrast
    return np.clip(image, 0, 1)
