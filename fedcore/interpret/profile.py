"""Federated statistics of a table: what each site can share about its own rows without moving one.

Each site summarises its rows in their *original units* (before any standardisation: a unit error
is visible there and nowhere else once each site has standardised itself), per feature and per
class:
    rows and class counts; observed (non-missing) values, overall and per class;
    mean and SD, overall and per class;
    21 quantiles (1 %, 5 %, 10 %, ..., 95 %, 99 %: no minimum or maximum, which would be one
    patient's value), overall and per class;
    the share of whole-number values; how often each usual missing-value code occurs (-999, -99,
    -9, -1, 0, 9, 99, 999, 9999);
    the correlations between its continuous features (pairwise complete rows).
`site_profile` computes one site's summary (a Flower site runs it on its own rows and sends the
arrays); `Profile` stacks every site's, is stored with a run (`profile.npz`, arrays only) and is
what the check-up's data lens compares (`fedcore.interpret.checkup`).
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

PROBABILITIES = np.array([0.01, *np.round(np.arange(0.05, 0.951, 0.05), 2), 0.99])
SENTINELS = np.array([-999.0, -99.0, -9.0, -1.0, 0.0, 9.0, 99.0, 999.0, 9999.0])
ARRAYS = ("rows", "class_counts", "observed", "observed_by_class", "mean", "sd", "mean_by_class", "sd_by_class",
          "quantiles", "quantiles_by_class", "integer_share", "sentinel_counts", "correlation")


def site_profile(x: np.ndarray, y: np.ndarray, n_classes: int, continuous: Sequence[int]) -> dict[str, np.ndarray]:
    """One site's summary of its rows x [rows, features] (NaN = missing, original units) with class
    indices y; `continuous`: the features whose correlations are kept."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    n_rows, n_features = x.shape
    observed = ~np.isnan(x)
    out: dict[str, np.ndarray] = {
        "rows": np.array(n_rows),
        "class_counts": np.bincount(y, minlength=n_classes),
        "observed": observed.sum(0),
        "observed_by_class": np.stack([observed[y == k].sum(0) for k in range(n_classes)]),
    }
    out["mean"], out["sd"], out["quantiles"] = _moments(x)
    per_class = [_moments(x[y == k]) for k in range(n_classes)]
    out["mean_by_class"] = np.stack([m for m, _, _ in per_class])
    out["sd_by_class"] = np.stack([s for _, s, _ in per_class])
    out["quantiles_by_class"] = np.stack([q for _, _, q in per_class])
    with np.errstate(invalid="ignore"):
        whole = np.where(observed, np.isclose(x, np.round(x)), False).sum(0)
        out["integer_share"] = np.where(out["observed"] > 0, whole / np.maximum(out["observed"], 1), np.nan)
    out["sentinel_counts"] = np.stack([(x == value).sum(0) for value in SENTINELS])
    out["correlation"] = _correlation(x[:, list(continuous)])
    return out


def _moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column over its observed values: mean, SD (ddof 1) and the PROBABILITIES quantiles
    (NaN where a column has too few values)."""
    n_features = x.shape[1]
    counts = (~np.isnan(x)).sum(0)
    if not len(x):
        return np.full(n_features, np.nan), np.full(n_features, np.nan), np.full((len(PROBABILITIES), n_features), np.nan)
    with warnings.catch_warnings():  # all-NaN columns: NaN is the answer, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.where(counts > 0, np.nanmean(x, axis=0), np.nan)
        sd = np.where(counts > 1, np.nanstd(x, axis=0, ddof=1), np.nan)
        if counts.min() == len(x):  # nothing missing: one sort of every column
            quantiles = np.quantile(x, PROBABILITIES, axis=0)
        else:
            quantiles = np.nanquantile(x, PROBABILITIES, axis=0)
    return mean, sd, np.where(counts > 0, quantiles, np.nan)


def _correlation(x: np.ndarray) -> np.ndarray:
    """Pearson correlations of the columns over pairwise complete rows (NaN where fewer than 3 rows
    or no spread), all pairs at once: sums over the rows where both columns are observed."""
    observed = (~np.isnan(x)).astype(np.float64)
    values = np.nan_to_num(x)
    n = observed.T @ observed  # rows where both are observed
    sums = values.T @ observed  # [j, k]: sum of column j over the rows where k is observed too
    squares = (values**2).T @ observed
    products = values.T @ values
    with np.errstate(invalid="ignore", divide="ignore"):
        covariance = products - sums * sums.T / n
        spread = (squares - sums**2 / n) * (squares - sums**2 / n).T
        out = covariance / np.sqrt(spread)
    return np.where((n >= 3) & (spread > 1e-12 * np.maximum(n, 1)), np.clip(out, -1, 1), np.nan)


@dataclass
class Profile:
    """Every site's summary (`site_profile`), stacked over sites, with the names that say what
    the axes are."""

    sites: list[str]
    features: list[str]
    kinds: list[str]
    columns: list[str]  # the input column each feature came from (a categorical gives several one-hot features)
    classes: list[str]
    arrays: dict[str, np.ndarray]  # ARRAYS, each [sites, ...]
    units: dict[str, str] = field(default_factory=dict)  # feature -> unit, where the data say

    @classmethod
    def of_sites(cls, per_site: Sequence[Mapping[str, np.ndarray]], sites: Sequence[str], features: Sequence[str],
                 kinds: Sequence[str], columns: Sequence[str], classes: Sequence[str],
                 units: Mapping[str, str] | None = None) -> Profile:
        arrays = {name: np.stack([np.asarray(p[name]) for p in per_site]) for name in ARRAYS}
        arrays["rows"] = arrays["rows"].reshape(len(per_site))  # a count per site (transports may add an axis)
        return cls(list(sites), list(features), list(kinds), list(columns or features), list(classes), arrays,
                   dict(units or {}))

    @property
    def continuous(self) -> list[int]:
        """The features whose correlations the profile keeps (in `correlation`'s order)."""
        return [j for j, kind in enumerate(self.kinds) if kind == "continuous"]

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(name)

    def meta(self) -> dict[str, Any]:
        return {"sites": self.sites, "features": self.features, "kinds": self.kinds, "columns": self.columns,
                "classes": self.classes, "units": self.units, "probabilities": PROBABILITIES.tolist(),
                "sentinels": SENTINELS.tolist()}

    def to_npz(self) -> bytes:
        """The profile as one npz (arrays, and the names as a JSON string array): nothing pickled."""
        buffer = io.BytesIO()
        np.savez_compressed(buffer, meta=np.array(json.dumps(self.meta())),
                            **{name: value.astype(np.float32) if value.dtype.kind == "f" else value
                               for name, value in self.arrays.items()})
        return buffer.getvalue()

    @classmethod
    def from_npz(cls, data: Mapping[str, np.ndarray]) -> Profile:
        meta = json.loads(str(data["meta"]))
        arrays = {name: np.asarray(data[name], dtype=np.float64 if data[name].dtype.kind == "f" else data[name].dtype)
                  for name in ARRAYS}
        return cls(meta["sites"], meta["features"], meta["kinds"], meta["columns"], meta["classes"], arrays,
                   meta.get("units") or {})


def profile_federation(sites: Sequence[tuple[str, np.ndarray, np.ndarray]], features: Sequence[str],
                       kinds: Sequence[str], columns: Sequence[str], classes: Sequence[str],
                       units: Mapping[str, str] | None = None) -> Profile:
    """The profile of every (name, x, y) site, as if each had computed and sent its own."""
    continuous = [j for j, kind in enumerate(kinds) if kind == "continuous"]
    return Profile.of_sites([site_profile(x, y, len(classes), continuous) for _, x, y in sites],
                            [name for name, _, _ in sites], features, kinds, columns, classes, units)
