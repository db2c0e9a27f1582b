"""Where a prototype looks: the box rule of ProtoPNet / inDISCO, and how much a box covers a stamp.

Box: upsample the prototype's activation (similarity) map to the image's size (bicubic; done
where the map is computed), take the `percentile`-th percentile of the upsampled map as the
threshold, and return the smallest rectangle holding every pixel at or above it. Boxes are
(row0, row1, col0, col1) with the ends exclusive, in image pixels.

Stamp overlap: the share of a box's area that the stamp's box covers (1: the box lies on the
stamp; 0: elsewhere). A prototype counts as *on the stamp* when the share is at least
ON_STAMP_SHARE. Sites without a stamp are measured against the same region, so the numbers say
how often a site's prototypes look where the stamp is (or would be).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedcore.injected import InjectedProblem

DEFAULT_PERCENTILE = 95.0
ON_STAMP_SHARE = 0.5
Box = tuple[int, int, int, int]


def high_activation_box(activation: np.ndarray, percentile: float = DEFAULT_PERCENTILE) -> Box:
    """The smallest box holding every pixel of a 2-D map at or above its `percentile`-th percentile."""
    activation = np.asarray(activation, dtype=np.float64)
    hot = activation >= np.percentile(activation, percentile)
    rows, cols = np.flatnonzero(hot.any(axis=1)), np.flatnonzero(hot.any(axis=0))
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def high_activation_boxes(maps: np.ndarray, percentile: float = DEFAULT_PERCENTILE) -> np.ndarray:
    """Boxes of a stack of maps (... × H × W) -> ... × 4 integers."""
    maps = np.asarray(maps)
    flat = maps.reshape(-1, *maps.shape[-2:])
    boxes = np.array([high_activation_box(m, percentile) for m in flat], dtype=np.int64).reshape(-1, 4)
    return boxes.reshape(*maps.shape[:-2], 4)


def box_overlap(boxes: np.ndarray, region: Sequence[int]) -> np.ndarray:
    """Share of each box's area (boxes ... × 4) inside `region` (row0, row1, col0, col1)."""
    boxes = np.asarray(boxes, dtype=np.float64)
    r0, r1, c0, c1 = (float(v) for v in region)
    height = np.clip(np.minimum(boxes[..., 1], r1) - np.maximum(boxes[..., 0], r0), 0, None)
    width = np.clip(np.minimum(boxes[..., 3], c1) - np.maximum(boxes[..., 2], c0), 0, None)
    area = (boxes[..., 1] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 2])
    return np.where(area > 0, height * width / np.maximum(area, 1e-12), 0.0)


def stamp_region(ground_truth: Sequence[InjectedProblem]) -> tuple[Box, list[str], str | None] | None:
    """The injected stamp's box (row0, row1, col0, col1), the stamped sites and the stamped class,
    from a federation's ground truth; None without a stamp. Every stamp sits in the same place."""
    stamps = [entry for entry in ground_truth if entry.kind == "stamp" and entry.box is not None]
    if not stamps:
        return None
    return stamps[0].box.region, [entry.site for entry in stamps], stamps[0].label


def spread_over_classes(labels: np.ndarray, count: int) -> np.ndarray:
    """Up to `count` row indices taking the classes in turn — the first image of each class, then
    the second, ... — in the order of the rows: a fixed, balanced choice of images to show."""
    labels = np.asarray(labels)
    rank = np.zeros(len(labels), dtype=np.int64)
    for cls in np.unique(labels):
        rows = np.flatnonzero(labels == cls)
        rank[rows] = np.arange(len(rows))
    order = np.lexsort((labels, rank))  # by rank, then class
    return order[:count]
