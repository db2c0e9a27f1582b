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

Problems of the raw values, in original units (what a site's export gets wrong; the check-up's
detection suite injects them), each drawn from the site's own seeded stream:
    shift:SITE:FEATURE:SDS       AMOUNT times the feature's SD over all sites added to the raw values
    spread:SITE:FEATURE:FACTOR   the values spread FACTOR times as wide around the site's mean
    code:SITE:FEATURE:SHARE      999 written for a SHARE of the values (a missing-value code)
    outliers:SITE:FEATURE:SHARE  a SHARE of the values 100 times too large (entry errors)
    missing:SITE:FEATURE:SHARE   a SHARE of the values missing at random
    cap:SITE:FEATURE:QUANTILE    values above the site's QUANTILE recorded as it (a capped export)
    swap:SITE:FEATURE:OTHER      two continuous columns swapped (a mislabelled export)
    noise:SITE:SHARE             a SHARE of the labels redrawn at random among the classes
    stamp:SITE[:CLASS]           images: a small bright smiley in the top-left corner of every CLASS
                                 image (default: the last class), train and hold-out — the inDISCO
                                 bias experiment; the stamp's box is recorded

The dict form has the same fields: {"kind": "mnar", "site": ..., "feature": ..., "class": ...}.
Ground-truth entries have the demo's shape (site, feature, kind, detail) plus the amount, class,
or box where one applies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from data_adapters.tables.site_rows import RawFederation
from fedcore.errors import DataError
from fedcore.injected import InjectedProblem, StampBox
from fedcore.seeding import derive_seed

# short name -> ground-truth kind (the demo's names)
KINDS = {
    "offset": "offset",
    "scale": "scale",
    "unit": "unit",
    "mnar": "missing_not_at_random",
    "flip": "label_flip",
    "stamp": "stamp",
    "shift": "offset",
    "spread": "spread",
    "code": "missing_code",
    "outliers": "outliers",
    "missing": "missing_at_random",
    "cap": "capped",
    "swap": "swapped_columns",
    "noise": "label_noise",
}
TABLE_ONLY = ("offset", "scale", "unit", "mnar", "shift", "spread", "code", "outliers", "missing", "cap", "swap")
NEEDS_AMOUNT = ("offset", "scale", "unit", "shift", "spread", "code", "outliers", "missing", "cap", "noise")
CONTINUOUS_ONLY = ("offset", "scale", "unit", "shift", "spread", "code", "outliers", "cap", "swap")
SHARES = ("code", "outliers", "missing", "noise", "cap")  # amounts that are a share (0, 1]
MISSING_VALUE_CODE = 999.0
STAMP_MARGIN = 1  # pixels between the stamp and the image border


@dataclass(frozen=True)
class Injection:
    kind: str
    site: str
    feature: str | None = None
    amount: float | None = None
    label: str | None = None  # a class name (mnar: whose values stay; stamp: which images)
    other: str | None = None  # swap: the second column

    @property
    def before_standardisation(self) -> bool:
        return self.kind not in ("offset", "scale")


def parse_injection(spec: str | Mapping[str, Any]) -> Injection:
    """An Injection from 'kind:site[:feature][:amount or class]' or its dict form."""
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - {"kind", "site", "feature", "amount", "class", "other"})
        if unknown:
            raise DataError(f"Injection {dict(spec)} has unknown keys {unknown}; keys: kind, site, feature, amount, "
                            "class, other.")
        fields = {k: spec.get(k) for k in ("kind", "site", "feature", "amount", "class", "other")}
    else:
        parts = str(spec).split(":")
        kind = parts[0]
        names = {"flip": ("site",), "stamp": ("site", "class"), "mnar": ("site", "feature", "class"),
                 "noise": ("site", "amount"), "swap": ("site", "feature", "other")}.get(
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
    if kind in SHARES and not 0 < amount <= 1:
        raise DataError(f"Injection {spec!r}: the share must be in (0, 1], not {amount:g}.")
    if kind == "swap" and not fields.get("other"):
        raise DataError(f"Injection {spec!r}: swap needs the second column (swap:SITE:FEATURE:OTHER).")
    label = fields.get("class")
    return Injection(kind, str(fields["site"]), fields.get("feature") or None, amount, str(label) if label else None,
                     str(fields["other"]) if fields.get("other") else None)


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
        if injection.kind in CONTINUOUS_ONLY and raw.feature_kinds[features[0]] != "continuous":
            raise DataError(f"Injection {injection.kind} needs a continuous feature; '{injection.feature}' is "
                            f"{raw.feature_kinds[features[0]]}.")
    if injection.other is not None:
        other = raw.features_of(injection.other)
        if not other or raw.feature_kinds[other[0]] != "continuous" or other == raw.features_of(injection.feature):
            raise DataError(f"Injection swap: '{injection.other}' is no other continuous feature; the features are "
                            f"{', '.join(raw.feature_names)}.")
    if injection.label is not None and injection.label not in raw.class_names:
        raise DataError(f"Injection {injection.kind}: no class '{injection.label}'; the classes are "
                        f"{', '.join(raw.class_names)}.")


def inject_rows(
    injection: Injection, x: np.ndarray, y: np.ndarray, raw: RawFederation, standardization: str
) -> tuple[np.ndarray, np.ndarray, InjectedProblem]:
    """Apply an injection that acts on a site's rows before the split; returns (x, y, truth)."""
    x, y = x.copy(), y.copy()
    label = injection.label or raw.class_names[-1]
    cls = raw.class_names.index(label)
    features = raw.features_of(injection.feature) if injection.feature else []
    truth = _truth(injection, raw, features)
    rng = np.random.default_rng(derive_seed(injection.site, injection.kind, injection.feature or "", "inject"))
    if injection.kind in RAW_VALUE_PROBLEMS:
        x, y, detail = RAW_VALUE_PROBLEMS[injection.kind](injection, x, y, features, raw, rng)
        truth = replace(truth, amount=injection.amount, detail=detail, other=injection.other)
    elif injection.kind == "unit":
        x[:, features] *= injection.amount
        hidden = " (affine, so per-site standardisation removes it)" if standardization == "site" else ""
        truth = replace(truth, amount=injection.amount,
                        detail=f"{injection.feature} recorded in other units: raw values × {injection.amount:g}{hidden}")
    elif injection.kind == "mnar":
        x[np.ix_(y != cls, features)] = np.nan
        truth = replace(truth, label=label,
                        detail=f"{injection.feature} recorded only for '{label}' rows; missing for all others")
    elif injection.kind == "flip":
        y = len(raw.class_names) - 1 - y
        truth = replace(truth, detail=(
            f"labels '{raw.class_names[0]}' and '{raw.class_names[1]}' swapped for every row"
            if len(raw.class_names) == 2 else "labels reversed for every row: class k became class K-1-k"
        ))
    else:
        box = stamp_box(x.shape[2], x.shape[3])
        x[y == cls] = stamped(x[y == cls], box)
        truth = replace(truth, label=label, box=StampBox(**box),
                        detail=f"a {box['size']}×{box['size']} smiley stamped at row {box['row']}, column "
                               f"{box['col']} on every '{label}' image (train and hold-out)")
    return x, y, truth


def _shift(injection, x, y, features, raw, rng):
    pooled = np.concatenate([site.x[:, features[0]] for site in raw.sites])
    amount = injection.amount * float(np.nanstd(pooled))
    x[:, features] += amount
    return x, y, f"{injection.feature} {amount:+.4g} in its raw values ({injection.amount:+g} SD over all sites)"


def _spread(injection, x, y, features, raw, rng):
    centre = np.nanmean(x[:, features], axis=0)
    x[:, features] = centre + (x[:, features] - centre) * injection.amount
    return x, y, f"{injection.feature} spread {injection.amount:g} times as wide around the site's mean"


def _rows(rng, n: int, share: float) -> np.ndarray:
    return rng.permutation(n)[: max(1, round(share * n))]


def _code(injection, x, y, features, raw, rng):
    x[_rows(rng, len(x), injection.amount)[:, None], features] = MISSING_VALUE_CODE
    return x, y, f"{MISSING_VALUE_CODE:g} written for {injection.amount:.0%} of {injection.feature}'s values"


def _outliers(injection, x, y, features, raw, rng):
    x[_rows(rng, len(x), injection.amount)[:, None], features] *= 100
    return x, y, f"{injection.amount:.0%} of {injection.feature}'s values 100 times too large"


def _missing(injection, x, y, features, raw, rng):
    x[_rows(rng, len(x), injection.amount)[:, None], features] = np.nan
    return x, y, f"{injection.amount:.0%} of {injection.feature}'s values missing at random"


def _cap(injection, x, y, features, raw, rng):
    cap = np.nanquantile(x[:, features], injection.amount, axis=0)
    x[:, features] = np.minimum(x[:, features], cap)
    return x, y, f"{injection.feature} capped at its {injection.amount:.0%} quantile ({float(cap[0]):.4g})"


def _swap(injection, x, y, features, raw, rng):
    other = raw.features_of(injection.other)
    x[:, features + other] = x[:, other + features]
    return x, y, f"columns {injection.feature} and {injection.other} swapped"


def _noise(injection, x, y, features, raw, rng):
    rows = _rows(rng, len(y), injection.amount)
    y[rows] = rng.integers(0, len(raw.class_names), len(rows))
    return x, y, f"{injection.amount:.0%} of the labels redrawn at random"


RAW_VALUE_PROBLEMS = {"shift": _shift, "spread": _spread, "code": _code, "outliers": _outliers, "missing": _missing,
                      "cap": _cap, "swap": _swap, "noise": _noise}


def inject_inputs(injection: Injection, x: np.ndarray, raw: RawFederation, standardization: str) -> tuple[np.ndarray, InjectedProblem]:
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
    return x, replace(_truth(injection, raw, features), amount=injection.amount, detail=detail)


def _truth(injection: Injection, raw: RawFederation, features: list[int]) -> InjectedProblem:
    """The ground-truth entry's head. `feature` is always one of the federation's feature names
    (what the lenses index by); a categorical column lists all its one-hot features too."""
    truth = InjectedProblem(site=injection.site, feature=None, kind=KINDS[injection.kind])
    if features:
        truth = replace(truth, feature=raw.feature_names[features[0]])
        if len(features) > 1:
            truth = replace(truth, column=injection.feature, features=tuple(raw.feature_names[j] for j in features))
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
