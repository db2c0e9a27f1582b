"""Feature preprocessing as in the iFedAvg paper: standardise continuous features, then encode
missing values (continuous -> 0, i.e. the mean; binary -> 0.5).

Standardisation is either per site (each site uses its own mean / SD: the paper's setting, which
also hides any affine unit error) or against reference values every site agrees on, such as a
consortium's data dictionary (unit errors and offsets then stay in the data for the model, and
for iFedAvg's heatmaps, to see).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from fedcore.errors import DataError

STANDARDIZE_MODES = ("site", "reference", "none")

MISSING_CODE = 0.5  # a missing binary / categorical value: never a real value of theirs (0 or 1)


def standardize(
    x: np.ndarray,
    kinds: Sequence[str],
    mode: str = "site",
    reference: dict[int, tuple[float, float]] | None = None,
) -> np.ndarray:
    """Z-score the continuous columns of one site's table (NaN = missing, left as NaN).

    `reference` maps a column index to (mean, sd) for mode 'reference'.
    """
    if mode not in STANDARDIZE_MODES:
        raise DataError(f"Standardization must be one of {', '.join(STANDARDIZE_MODES)}, not '{mode}'.")
    out = np.array(x, dtype=np.float64, copy=True)
    if mode == "none":
        return out
    values = reference if mode == "reference" else fit_standardization(out, kinds)
    for j, (mean, sd) in values.items():
        out[:, j] = (out[:, j] - mean) / (sd if sd > 0 else 1.0)
    return out


def fit_standardization(x: np.ndarray, kinds: Sequence[str]) -> dict[int, tuple[float, float]]:
    """(mean, population SD) of every continuous column over its observed (non-NaN) rows.

    Fit on a site's training rows and pass the result as `reference` to standardise its
    hold-out with the same values, so no hold-out statistics leak into training.
    """
    values = {}
    for j, kind in enumerate(kinds):
        if kind != "continuous":
            continue
        observed = x[:, j][~np.isnan(x[:, j])]
        mean = float(observed.mean()) if observed.size else 0.0
        sd = float(observed.std()) if observed.size > 1 else 0.0
        values[j] = (mean, sd)
    return values


def scales_record(
    values: Mapping[str, Mapping[int, tuple[float, float]]], feature_names: Sequence[str]
) -> dict[str, dict[str, list[float]]]:
    """For the federation's preprocessing record: per site, every standardised feature's [mean, sd]
    as applied (an SD of 0 divides by 1) — what turns a standardised value, or a correction the
    model learned, back into the data's own units (`fedcore.original_units`)."""
    return {site: {feature_names[j]: [float(mean), float(sd if sd > 0 else 1.0)] for j, (mean, sd) in by_column.items()}
            for site, by_column in values.items()}


def encode_missing(x: np.ndarray, kinds: Sequence[str]) -> np.ndarray:
    """Missing continuous -> 0 (after standardisation), missing binary / categorical -> 0.5."""
    fill = np.array([0.0 if kind == "continuous" else MISSING_CODE for kind in kinds])
    return np.where(np.isnan(x), fill, x)
