"""Federated statistics of a table: what each site can share about its own rows without moving one.

Each site summarises its rows in their *original units* (before any standardisation: a unit error
is visible there and nowhere else once each site has standardised itself). `STATISTICS` declares
every array once: its name, the group whose row count governs it (a disclosure policy releases
each array by that group's size: `GROUPS`) and what it reveals about the rows; `ARRAYS` is its
names. No statistic is a single row's value: there is no minimum or maximum (one patient's value),
and the shares at the minimum and maximum are shares, not the values.

`site_profile` computes one site's summary (a Flower site runs it on its own rows and sends the
arrays); `Profile` stacks every site's, is stored with a run (`profile.npz`, arrays only) and is
what the check-up's data lens compares (`fedcore.interpret.data_checks`). A statistic a site did
not release (a disclosure policy withheld it, or the profile was recorded before it existed) is
NaN, with the reason in `Profile.withheld`; the check-up shows such a cell as *not testable*.
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
FAR_OUT_IQRS = 3.0  # Tukey's "far out": beyond the quartiles by 3 interquartile ranges

# The groups whose row count governs a statistic (a disclosure policy's minimum applies to it):
# the site's rows, the rows of one class, one feature's observed values (overall or within a
# class), and the rows where two features are both observed.
GROUPS = ("site", "class", "feature", "feature × class", "feature pairs")

# name -> (group, what it reveals about the site's rows). Every array of a profile, declared once.
STATISTICS: dict[str, tuple[str, str]] = {
    "rows": ("site", "how many rows the site has"),
    "class_counts": ("class", "how many rows each class has"),
    "observed": ("feature", "how many rows have a value of the feature (so how many lack one)"),
    "observed_by_class": ("feature × class", "the same within each class"),
    "mean": ("feature", "the mean of the feature's values"),
    "sd": ("feature", "the standard deviation of the feature's values"),
    "mean_by_class": ("feature × class", "the mean within each class"),
    "sd_by_class": ("feature × class", "the standard deviation within each class"),
    "quantiles": ("feature", "21 quantiles (1 %, 5 %, ..., 95 %, 99 %), linearly interpolated between sorted values"),
    "quantiles_by_class": ("feature × class", "the same quantiles within each class"),
    "integer_share": ("feature", "the share of the feature's values that are whole numbers"),
    "sentinel_counts": ("feature", "how many values equal each usual missing-value code (SENTINELS)"),
    "correlation": ("feature pairs", "the Pearson correlation of two continuous features over the rows that have both"),
    "top_share": ("feature", "the share of values at the feature's most common value (not the value)"),
    "min_share": ("feature", "the share of values equal to the site's minimum (not the minimum)"),
    "max_share": ("feature", "the share of values equal to the site's maximum (not the maximum)"),
    "far_share": ("feature", f"the share of values beyond the quartiles by {FAR_OUT_IQRS:g} interquartile ranges"),
    "duplicate_rows": ("site", "how many rows repeat an earlier row exactly (features and label), not which"),
}
ARRAYS = tuple(STATISTICS)
NOT_RECORDED = "not in this profile (recorded before this statistic was shared)"


def site_profile(x: np.ndarray, y: np.ndarray, n_classes: int, continuous: Sequence[int]) -> dict[str, np.ndarray]:
    """One site's summary of its rows x [rows, features] (NaN = missing, original units) with class
    indices y; `continuous`: the features whose correlations are kept. Values so large that their
    sums overflow (1e308) give infinite or NaN moments: statistics the check-up cannot test."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _site_profile(x, y, n_classes, continuous)


def _site_profile(x: np.ndarray, y: np.ndarray, n_classes: int, continuous: Sequence[int]) -> dict[str, np.ndarray]:
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
    overall = _summary(x)
    out.update((name, overall[name]) for name in ("mean", "sd", "quantiles", "top_share", "min_share", "max_share",
                                                    "far_share"))
    per_class = [_summary(x[y == k], shares=False) for k in range(n_classes)]
    for name in ("mean", "sd", "quantiles"):
        out[f"{name}_by_class"] = np.stack([summary[name] for summary in per_class])
    with np.errstate(invalid="ignore"):
        whole = np.where(observed, np.isclose(x, np.round(x)), False).sum(0)
        out["integer_share"] = np.where(out["observed"] > 0, whole / np.maximum(out["observed"], 1), np.nan)
    out["sentinel_counts"] = np.stack([(x == value).sum(0) for value in SENTINELS])
    out["correlation"] = _correlation(x[:, list(continuous)])
    out["duplicate_rows"] = np.array(_duplicate_rows(x, y))
    return out


def _summary(x: np.ndarray, shares: bool = True) -> dict[str, np.ndarray]:
    """Per column over its observed values, from one sort of every column: mean, SD (ddof 1), the
    PROBABILITIES quantiles (linear between sorted values, as np.quantile), and with `shares` the
    shares at the most common value, at the minimum and at the maximum, and beyond the far-out
    fences (NaN where a column has too few values)."""
    n, n_features = x.shape
    counts = (~np.isnan(x)).sum(0)
    ordered = np.sort(x, axis=0)  # NaN sorts last
    columns = np.arange(n_features)
    last = np.maximum(counts - 1, 0)
    quantiles = np.full((len(PROBABILITIES), n_features), np.nan)
    if n:
        for k, level in enumerate(PROBABILITIES):
            position = last * level
            low = np.floor(position).astype(np.int64)
            high = np.minimum(low + 1, last)
            fraction = position - low
            lower, upper = ordered[low, columns], ordered[high, columns]
            quantiles[k] = np.where(counts > 0, lower + (upper - lower) * fraction, np.nan)
    with warnings.catch_warnings():  # all-NaN columns: NaN is the answer, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.where(counts > 0, np.nanmean(x, axis=0), np.nan) if n else np.full(n_features, np.nan)
        sd = np.where(counts > 1, np.nanstd(x, axis=0, ddof=1), np.nan) if n else np.full(n_features, np.nan)
    out = {"mean": mean, "sd": sd, "quantiles": quantiles}
    if shares:
        out.update(_point_shares(ordered, counts))
        q25, q75 = (quantiles[int(np.flatnonzero(np.isclose(PROBABILITIES, p))[0])] for p in (0.25, 0.75))
        iqr = q75 - q25
        with np.errstate(invalid="ignore"):
            far = ((x < (q25 - FAR_OUT_IQRS * iqr)) | (x > (q75 + FAR_OUT_IQRS * iqr))).sum(0)
            out["far_share"] = np.where((counts > 0) & (iqr > 0), far / np.maximum(counts, 1), np.where(counts > 0, 0.0,
                                                                                                          np.nan))
    return out


def _point_shares(ordered: np.ndarray, counts: np.ndarray) -> dict[str, np.ndarray]:
    """The shares of each column's observed values at its most common value, at its minimum and at
    its maximum, from the column sorted (NaN last): the lengths of its runs of equal values."""
    n, n_features = ordered.shape
    if not n:
        return {name: np.full(n_features, np.nan) for name in ("top_share", "min_share", "max_share")}
    starts = np.ones((n, n_features), dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]  # NaN != NaN: every missing value is a run of its own
    run = np.cumsum(starts, axis=0) - 1  # run index within the column
    valid = ~np.isnan(ordered)
    lengths = np.bincount((run + np.arange(n_features) * n)[valid], minlength=n * n_features).reshape(n_features, n)
    columns = np.arange(n_features)
    last_run = run[np.maximum(counts - 1, 0), columns]
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.where(counts > 0, counts, np.nan)
        return {"top_share": lengths.max(1) / total, "min_share": lengths[:, 0] / total,
                "max_share": lengths[columns, last_run] / total}


def _duplicate_rows(x: np.ndarray, y: np.ndarray) -> int:
    """How many rows repeat an earlier row exactly (every feature, missing alike, and the label)."""
    if not len(x):
        return 0
    rows = np.column_stack([np.where(np.isnan(x), np.inf, x + 0.0), y.astype(np.float64)])  # + 0.0: -0 is 0
    keys = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
    return int(len(keys) - len(np.unique(keys)))


def _correlation(x: np.ndarray) -> np.ndarray:
    """Pearson correlations of the columns over pairwise complete rows (NaN where fewer than 3 rows
    or no spread), all pairs at once: sums over the rows where both columns are observed."""
    if x.shape[0] >= 3 and not np.isnan(x).any():  # every pair complete: one product of the centred columns
        centred = x - x.mean(0)
        squares = (centred**2).sum(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = (centred.T @ centred) / np.sqrt(np.outer(squares, squares))
        spread = squares > 1e-12 * x.shape[0]
        return np.where(spread[:, None] & spread[None, :], np.clip(out, -1, 1), np.nan)
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
    # site -> statistic -> why its values are NaN there (withheld by a disclosure policy, not recorded)
    withheld: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def of_sites(cls, per_site: Sequence[Mapping[str, np.ndarray]], sites: Sequence[str], features: Sequence[str],
                 kinds: Sequence[str], columns: Sequence[str], classes: Sequence[str],
                 units: Mapping[str, str] | None = None,
                 withheld: Mapping[str, Mapping[str, str]] | None = None) -> Profile:
        """Stacked over sites; a statistic a site did not send is NaN there, withheld as NOT_RECORDED
        (a site running an older version)."""
        reasons = {site: dict(r) for site, r in (withheld or {}).items()}
        empty = _unreleased(len(features), len(classes), [j for j, kind in enumerate(kinds) if kind == "continuous"])
        arrays = {}
        for name in ARRAYS:
            stacked = []
            for site, summary in zip(sites, per_site):
                if name in summary:
                    stacked.append(np.asarray(summary[name]).reshape(empty[name].shape))
                else:
                    stacked.append(empty[name])
                    reasons.setdefault(site, {}).setdefault(name, NOT_RECORDED)
            arrays[name] = np.stack(stacked) if stacked else empty[name][None][:0]
        return cls(list(sites), list(features), list(kinds), list(columns or features), list(classes), arrays,
                   dict(units or {}), reasons)

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
                "sentinels": SENTINELS.tolist(), "withheld": self.withheld}

    def to_npz(self) -> bytes:
        """The profile as one npz (arrays, and the names as a JSON string array): nothing pickled."""
        buffer = io.BytesIO()
        np.savez_compressed(buffer, meta=np.array(json.dumps(self.meta())),
                            **{name: value.astype(np.float32) if value.dtype.kind == "f" else value
                               for name, value in self.arrays.items()})
        return buffer.getvalue()

    @classmethod
    def from_npz(cls, data: Mapping[str, np.ndarray]) -> Profile:
        """A stored profile; statistics it lacks (stored before they existed) are NaN, withheld as
        NOT_RECORDED at every site."""
        meta = json.loads(str(data["meta"]))
        stored = {name: np.asarray(data[name], dtype=np.float64 if data[name].dtype.kind == "f" else data[name].dtype)
                  for name in ARRAYS if name in data}
        per_site = [{name: value[i] for name, value in stored.items()} for i in range(len(meta["sites"]))]
        return cls.of_sites(per_site, meta["sites"], meta["features"], meta["kinds"], meta["columns"],
                            meta["classes"], meta.get("units") or {}, meta.get("withheld") or {})


def _unreleased(n_features: int, n_classes: int, continuous: Sequence[int]) -> dict[str, np.ndarray]:
    """Every statistic of one site, all NaN, in its shape (what a site that did not send it counts as)."""
    template = site_profile(np.zeros((0, n_features)), np.zeros(0, dtype=np.int64), n_classes, continuous)
    return {name: np.full(np.shape(value), np.nan) for name, value in template.items()}


def profile_federation(sites: Sequence[tuple[str, np.ndarray, np.ndarray]], features: Sequence[str],
                       kinds: Sequence[str], columns: Sequence[str], classes: Sequence[str],
                       units: Mapping[str, str] | None = None) -> Profile:
    """The profile of every (name, x, y) site, as if each had computed and sent its own."""
    continuous = [j for j, kind in enumerate(kinds) if kind == "continuous"]
    return Profile.of_sites([site_profile(x, y, len(classes), continuous) for _, x, y in sites],
                            [name for name, _, _ in sites], features, kinds, columns, classes, units)
