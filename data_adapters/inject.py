"""Shift injection with recorded ground truth: known problems put into one site's data, so the
lenses can be checked against the truth.

    offset:SITE:FEATURE:AMOUNT   add AMOUNT to a continuous feature after standardisation
                                 (in standard deviations when standardised), train and hold-out
    scale:SITE:FEATURE:FACTOR    multiply a continuous feature by FACTOR after standardisation
    unit:SITE:FEATURE:FACTOR     multiply the raw values by FACTOR (a unit change such as
                                 mg/dL -> mmol/L); affine, so per-site standardisation removes it
    mnar:SITE:FEATURE[:CLASS]    FEATURE recorded only for rows of CLASS (default: the last class,
                                 the positive one) and missing for all others: missing not at random
    flip:SITE                    labels flipped: class k becomes class K-1-k (two classes: swapped)
    stamp:SITE[:CLASS]           images: a small bright smiley in the top-left corner of every CLASS
                                 image (default: the last class), train and hold-out — the inDISCO
                                 bias experiment; the stamp's box is recorded

The dict form has the same fields: {"kind": "mnar", "site": ..., "feature": ..., "class": ...}.
Ground-truth entries have the demo's shape (site, feature, kind, detail) plus the amount, class,
or box where one applies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from data_adapters.sites import RawFederation
from fedcore.errors import DataError

# short name -> ground-truth kind (the demo's names)
KINDS = {
    "offset": "offset",
    "scale": "scale",
    "unit": "unit",
    "mnar": "missing_not_at_random",
    "flip": "label_flip",
    "stamp": "stamp",
}
TABLE_ONLY = ("offset", "scale", "unit", "mnar")
NEEDS_AMOUNT = ("offset", "scale", "unit")
STAMP_MARGIN = 1  # pixels between the stamp and the image border


@dataclass(frozen=True)
class Injection:
    kind: str
    site: str
    feature: str | None = None
    amount: float | None = None
    label: str | None = None  # a class name (mnar: whose values stay; stamp: which images)

    @property
    def before_standardisation(self) -> bool:
        return self.kind not in ("offset", "scale")


def parse_injection(spec: str | Mapping[str, Any]) -> Injection:
    """An Injection from 'kind:site[:feature][:amount or class]' or its dict form."""
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - {"kind", "site", "feature", "amount", "class"})
        if unknown:
            raise DataError(f"Injection {dict(spec)} has unknown keys {unknown}; keys: kind, site, feature, amount, class.")
        fields = {k: spec.get(k) for k in ("kind", "site", "feature", "amount", "class")}
    else:
        parts = str(spec).split(":")
        kind = parts[0]
        names = {"flip": ("site",), "stamp": ("site", "class"), "mnar": ("site", "feature", "class")}.get(
            kind, ("site", "feature", "amount")
        )
        if len(parts) - 1 > len(names):
            raise DataError(f"Injection '{spec}' has too many parts; {kind} takes {':'.join(n.upper() for n in names)}.")
        fields = {"kind": kind, **dict(zip(names, parts[1:]))}
    kind = fields["kind"]
    if kind not in KINDS:
        raise DataError(f"Unknown injection '{kind}' in {spec!r}; use one of {', '.join(KINDS)}.")
    if not fields.get("site"):
        raise DataError(f"Injection {spec!r} names no site.")
    if (kind in TABLE_ONLY) != bool(fields.get("feature")):
        raise DataError(f"Injection {spec!r}: {kind} " + ("needs a feature." if kind in TABLE_ONLY else "takes no feature."))
    amount = fields.get("amount")
    if (kind in NEEDS_AMOUNT) != (amount is not None and amount != ""):
        raise DataError(f"Injection {spec!r}: {kind} " + ("needs an amount." if kind in NEEDS_AMOUNT else "takes no amount."))
    try:
        amount = float(amount) if kind in NEEDS_AMOUNT else None
    except (TypeError, ValueError):
        raise DataError(f"Injection {spec!r}: the amount must be a number, not {amount!r}.") from None
    label = fields.get("class")
    return Injection(kind, str(fields["site"]), fields.get("feature") or None, amount, str(label) if label else None)


def check(injection: Injection, raw: RawFederation) -> None:
    """DataError unless the injection fits the federation (site, feature, class, data kind)."""
    sites = [s.name for s in raw.sites]
    if injection.site not in sites:
        raise DataError(f"Injection {injection.kind}: no site '{injection.site}'; the sites are {', '.join(sites)}.")
    if raw.is_tabular == (injection.kind == "stamp"):
        raise DataError(f"Injection {injection.kind} applies to {'images' if injection.kind == 'stamp' else 'tables'} only.")
    if injection.feature is not None:
        features = raw.features_of(injection.feature)
        if not features:
            raise DataError(f"Injection {injection.kind}: no feature '{injection.feature}'; the features are "
                            f"{', '.join(raw.feature_names)}.")
        if injection.kind in NEEDS_AMOUNT and raw.feature_kinds[features[0]] != "continuous":
            raise DataError(f"Injection {injection.kind} needs a continuous feature; '{injection.feature}' is "
                            f"{raw.feature_kinds[features[0]]}.")
    if injection.label is not None and injection.label not in raw.class_names:
        raise DataError(f"Injection {injection.kind}: no class '{injection.label}'; the classes are "
                        f"{', '.join(raw.class_names)}.")


def inject_rows(
    injection: Injection, x: np.ndarray, y: np.ndarray, raw: RawFederation, standardization: str
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Apply an injection that acts on a site's rows before the split; returns (x, y, truth)."""
    x, y = x.copy(), y.copy()
    label = injection.label or raw.class_names[-1]
    cls = raw.class_names.index(label)
    features = raw.features_of(injection.feature) if injection.feature else []
    truth = _truth(injection, raw, features)
    if injection.kind == "unit":
        x[:, features] *= injection.amount
        hidden = " (affine, so per-site standardisation removes it)" if standardization == "site" else ""
        truth.update(amount=injection.amount,
                     detail=f"{injection.feature} recorded in other units: raw values × {injection.amount:g}{hidden}")
    elif injection.kind == "mnar":
        x[np.ix_(y != cls, features)] = np.nan
        truth.update({"class": label,
                      "detail": f"{injection.feature} recorded only for '{label}' rows; missing for all others"})
    elif injection.kind == "flip":
        y = len(raw.class_names) - 1 - y
        truth["detail"] = (
            f"labels '{raw.class_names[0]}' and '{raw.class_names[1]}' swapped for every row"
            if len(raw.class_names) == 2 else "labels reversed for every row: class k became class K-1-k"
        )
    else:
        box = stamp_box(x.shape[2], x.shape[3])
        x[y == cls] = stamped(x[y == cls], box)
        truth.update({"class": label, "box": box,
                      "detail": f"a {box['size']}×{box['size']} smiley stamped at row {box['row']}, column "
                                f"{box['col']} on every '{label}' image (train and hold-out)"})
    return x, y, truth


def inject_inputs(injection: Injection, x: np.ndarray, raw: RawFederation, standardization: str) -> tuple[np.ndarray, dict[str, Any]]:
    """Apply an offset or scale to a site's standardised inputs; returns (x, truth)."""
    x = x.copy()
    features = raw.features_of(injection.feature)
    units = "standard deviations" if standardization == "site" else "units"
    if injection.kind == "offset":
        x[:, features] += injection.amount
        detail = f"{injection.feature} shifted by {injection.amount:+g} {units} (after standardisation)"
    else:
        x[:, features] *= injection.amount
        detail = f"{injection.feature} multiplied by {injection.amount:g} (after standardisation)"
    return x, {**_truth(injection, raw, features), "amount": injection.amount, "detail": detail}


def _truth(injection: Injection, raw: RawFederation, features: list[int]) -> dict[str, Any]:
    """The ground-truth entry's head. `feature` is always one of the federation's feature names
    (what the lenses index by); a categorical column lists all its one-hot features too."""
    truth: dict[str, Any] = {"site": injection.site, "feature": None, "kind": KINDS[injection.kind]}
    if features:
        truth["feature"] = raw.feature_names[features[0]]
        if len(features) > 1:
            truth.update(column=injection.feature, features=[raw.feature_names[j] for j in features])
    return truth


def stamp_box(height: int, width: int) -> dict[str, int]:
    """Top-left box of a stamp about a fifth of the image side (at least 7 pixels, the smallest
    size at which the face reads as a face)."""
    size = max(7, round(min(height, width) / 5))
    if size + STAMP_MARGIN > min(height, width):
        raise DataError(f"Images of {height}×{width} pixels are too small for a {size}-pixel stamp.")
    return {"row": STAMP_MARGIN, "col": STAMP_MARGIN, "size": size}


def stamped(images: np.ndarray, box: dict[str, int]) -> np.ndarray:
    """Images (N×C×H×W in [0, 1]) with a bright smiley on a dark square at `box`: the square makes
    it stand out on bright and dark images alike; colour images get a yellow face."""
    out = images.copy()
    r, c, size = box["row"], box["col"], box["size"]
    patch = out[:, :, r : r + size, c : c + size]
    patch[:] = 0.0
    colour = np.array([1.0, 1.0, 0.0] if images.shape[1] == 3 else [1.0] * images.shape[1])
    patch[:, :, smiley(size)] = colour[None, :, None]
    return out


def smiley(size: int) -> np.ndarray:
    """size×size boolean mask of a face: ring, two eyes, a smile."""
    row, col = np.mgrid[0:size, 0:size] + 0.5  # pixel centres
    centre = size / 2
    radius = np.hypot(row - centre, col - centre)
    stroke = max(1.0, size / 8)
    ring = np.abs(radius - (centre - stroke / 2)) <= stroke / 2
    eye = max(0.75, size * 0.09)
    eyes = (np.hypot(row - 0.37 * size, col - 0.33 * size) <= eye) | (np.hypot(row - 0.37 * size, col - 0.67 * size) <= eye)
    smile = (np.abs(radius - 0.27 * size) <= stroke / 2) & (row > centre + 0.08 * size)
    return ring | eyes | smile
