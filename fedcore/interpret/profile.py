"""Federated statistics of a table: what each site can share about its own rows without moving one.

Each site summarises its rows in their *original units* (before any standardisation: a unit error
is visible there and nowhere else once each site has standardised itself). `STATISTICS` declares
every array once: the group whose row count governs it, the rule the site's disclosure policy
releases it by, its axes and what it reveals about the rows (`disclosure.Statistic`); `ARRAYS` is
its names. No statistic is a single row's value: there is no minimum or maximum (one patient's
value), and the shares at the minimum and maximum are shares, not the values.

Every site releases its statistics at its disclosure policy (`fedcore.interpret.disclosure`): no
statistic of fewer rows than its minimum count, quantiles from blocks of at least that many values
(so the 1 and 99 % ones, and all beyond the outermost blocks, stay unreleased), values and shares
rounded, optionally noised; means, SDs and quantiles of values drawn in to the far-out fences
(their share beyond is `far_share`). `site_profile` computes one site's summary (a Flower site runs it on
its own rows and sends the arrays); `Profile` stacks every site's, is stored with a run
(`profile.npz`, arrays only) and is what the check-up's data lens compares
(`fedcore.interpret.data_checks`). A statistic a site did not release (its policy withheld it, or
the profile was recorded before it existed) is NaN, with the reason in `Profile.withheld`; the
check-up shows such a cell as *not testable*.
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedcore.interpret.disclosure import (DEFAULT_POLICY, GROUPS, Groups, Policy, Statistic, describe_policy,
                                          dp_noise, location, release, sorted_sd)

PROBABILITIES = np.array([0.01, *np.round(np.arange(0.05, 0.951, 0.05), 2), 0.99])
SENTINELS = np.array([-999.0, -99.0, -9.0, -1.0, 0.0, 9.0, 99.0, 999.0, 9999.0])
FAR_OUT_IQRS = 3.0  # Tukey's "far out": beyond the quartiles by 3 interquartile ranges
# The steps a value may be recorded at (1, 2 and 5 times a power of ten, ascending). A value's
# *step* is the coarsest of them it is a multiple of: 120 is on 20 (and so on 10, 5, 2, 1), 0.35 on
# 0.05. Any two steps' least common multiple is a step again, so a value on a step is exactly one
# whose own step is a multiple of it (`ON_STEP`), and each site's histogram of its values' own steps
# says how many lie on every step. Its bins: zero (on every step), finer than the first step, the steps.
RESOLUTION_STEPS = np.array([m * 10.0**e for e in range(-6, 7) for m in (1, 2, 5)])
ZERO, FINER = 0, 1
# [own step, step]: a value whose own step is the first lies on the second
ON_STEP = np.isclose(np.round(RESOLUTION_STEPS[:, None] / RESOLUTION_STEPS[None, :]),
                     RESOLUTION_STEPS[:, None] / RESOLUTION_STEPS[None, :], rtol=0, atol=1e-9) \
    & (RESOLUTION_STEPS[:, None] >= RESOLUTION_STEPS[None, :])
# A value is on a step within 4 single-precision rounding errors (a value stored as float32 is still
# on its step) where the step is at least 2^-18 of it (16 of those errors); below, only where it is
# a multiple to double precision (a large whole number, a value written with many digits).
STEP_TOLERANCE = 2.0**-22
FINEST_RATIO = 2.0**18
EXACT = 2.0**-50  # 4 double-precision rounding errors

__all__ = ["ARRAYS", "FEATURE", "GROUPS", "NOT_RECORDED", "PROBABILITIES", "RESOLUTION_STEPS", "SENTINELS",
           "STATISTICS", "Profile", "SiteProfile", "on_steps", "profile_federation", "site_profile", "summed_on_steps"]

FEATURE, BY_CLASS = ("feature",), ("class", "feature")
# Every array of a profile, declared once. `disclosure.release` applies a site's policy to exactly
# these; an array not declared here never leaves a site.
STATISTICS: dict[str, Statistic] = {
    "rows": Statistic("site", "size", (), "how many rows the site has"),
    "class_counts": Statistic("class", "count", ("class",), "how many of the site's rows are of each class"),
    "observed": Statistic("site", "cell_count", FEATURE,
                          "in how many rows each feature is recorded (so how many lack it)"),
    "observed_by_class": Statistic("class", "cell_count", BY_CLASS, "the same within each class"),
    "mean": Statistic("feature", "location", FEATURE, "the centre of a feature's values"),
    "sd": Statistic("feature", "location", FEATURE, "how widely a feature's values vary"),
    "mean_by_class": Statistic("feature × class", "location", BY_CLASS,
                               "the centre of a feature's values within each class"),
    "sd_by_class": Statistic("feature × class", "location", BY_CLASS, "how widely they vary within each class"),
    "quantiles": Statistic("feature", "location", ("probability", "feature"),
                           "a feature's distribution: the value below which a given share of its values lie, at "
                           "the probabilities its policy's resolution allows"),
    "quantiles_by_class": Statistic("feature × class", "location", ("class", "probability", "feature"),
                                    "the same within each class"),
    "integer_share": Statistic("feature", "share", FEATURE, "the share of a feature's values that are whole numbers"),
    "step_shares": Statistic("feature", "share", ("step", "feature"),
                             "how finely a feature is recorded: the share of its values whose step (the coarsest of "
                             "1, 2, 5 × a power of ten they are a multiple of) is each step, of those that are 0 and "
                             "of those finer than 1e-6 (how round the values are, not which values)"),
    "sentinel_counts": Statistic("feature", "cell_count", ("code", "feature"),
                                 "how many of a feature's values are exactly each usual missing-value code (SENTINELS)"),
    "correlation": Statistic("feature pairs", "correlation", ("continuous", "continuous"),
                             "how two continuous features vary together, over the rows that have both"),
    "rank_correlation": Statistic("feature pairs", "correlation", ("continuous", "continuous"),
                                  "how two continuous features rise and fall together in rank order (Spearman's), "
                                  "over the rows that have both: the same pairs as the correlation, less of the values"),
    "top_share": Statistic("feature", "share", FEATURE,
                           "the share of a feature's values at its most common value (not the value)"),
    "min_share": Statistic("feature", "share", FEATURE,
                           "the share of a feature's values equal to its minimum (not the minimum)"),
    "max_share": Statistic("feature", "share", FEATURE,
                           "the share of a feature's values equal to its maximum (not the maximum)"),
    "far_share": Statistic("feature", "share", FEATURE,
                           f"the share of a feature's values beyond its quartiles by {FAR_OUT_IQRS:g} interquartile "
                           "ranges (how many are far out, not which or where)"),
    "far_above_share": Statistic("feature", "share", FEATURE,
                                 "the share of a feature's values above its upper far-out fence (of those far out, "
                                 "how many lie above rather than below: not which, nor how far)"),
    "duplicate_rows": Statistic("site", "cell_count", (),
                                "how many rows repeat an earlier row exactly (features and label), not which"),
    "order_correlation": Statistic("feature", "correlation", FEATURE,
                                   "how a continuous feature's values rise or fall along the order of the site's rows "
                                   "(Spearman's correlation with the row's place, within each class, pooled): whether "
                                   "they drift over the recording, not any row's value or place"),
}
ARRAYS = tuple(STATISTICS)
NOT_RECORDED = "not in this profile (recorded before this statistic was shared)"
DP_TOO_FEW = "not shared under differential privacy (too few values for a range to clip them to)"


@dataclass
class SiteProfile:
    """What one site releases: its statistics (ARRAYS), statistic -> why a part of it was withheld
    (its NaN entries), and the policy it released them at (None: as computed, no policy)."""

    arrays: dict[str, np.ndarray]
    withheld: dict[str, str] = field(default_factory=dict)
    policy: dict[str, Any] | None = None


def site_profile(x: np.ndarray, y: np.ndarray, n_classes: int, continuous: Sequence[int],
                 policy: Policy | None = DEFAULT_POLICY) -> SiteProfile:
    """One site's summary of its rows x [rows, features] (NaN = missing, original units) with class
    indices y, as its disclosure `policy` releases it (None: as computed, unprotected: only for
    measuring what the policy costs); `continuous`: the features whose correlations are kept.
    Values so large that their sums overflow (1e308) give infinite or NaN moments: statistics the
    check-up cannot test."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        computed, pairs = _site_profile(x, y, n_classes, continuous)
        if policy is None:
            return SiteProfile(computed)
        site_quantiles = computed["quantiles"]  # as computed: the fences' quartiles
        fenced = _fenced(x, site_quantiles)
        noise = dp_noise(fenced, policy)
        computed["mean"], computed["sd"], computed["quantiles"] = location(fenced, PROBABILITIES, policy, noise)
        # each class drawn in to its own fences (`_fenced`)
        per_class = [location(_fenced(x[y == k], computed["quantiles_by_class"][k], site_quantiles),
                              PROBABILITIES, policy, noise) for k in range(n_classes)]
        for a, name in enumerate(("mean", "sd", "quantiles")):
            computed[f"{name}_by_class"] = np.stack([released[a] for released in per_class])
        groups = Groups(len(x), computed["class_counts"], computed["observed"], computed["observed_by_class"], pairs)
        arrays, withheld = release(computed, STATISTICS, groups, policy, noise)
    if noise is not None:  # a feature too small for a range: its values are withheld under the noise
        ranged = np.isfinite(noise.low) | (computed["observed"] < policy.min_count)
        for name, declared in STATISTICS.items():
            if declared.kind == "location" and not ranged.all():
                arrays[name] = arrays[name].copy()
                arrays[name][..., ~ranged] = np.nan
                withheld[name] = "; ".join(dict.fromkeys(filter(None, (withheld.get(name), DP_TOO_FEW))))
    return SiteProfile(arrays, withheld, policy.to_dict())


def _fenced(x: np.ndarray, quantiles: np.ndarray, site: np.ndarray | None = None) -> np.ndarray:
    """x with each feature's far-out values (beyond its quartiles by FAR_OUT_IQRS interquartile
    ranges, where it has a spread) drawn in to those fences: what a policy's means, SDs and quantile
    blocks are computed from. A far-out value is one row's, and the likeliest to be known: its share
    is released (`far_share`), never its size (one wild value in a block's mean or in the SD would
    give its value away), and it does not drag the quantiles of the rest.

    x one class's rows, with the `site`'s quantiles: fenced by the class's own quantiles, so that
    its released statistics are the class's whatever the site's other classes (the site's fences
    cut a minority class's ordinary values: MNIST as a table, a site of mostly ones, a 4's grey
    level mid-image lay beyond them and its class means came out a third of the truth; and they
    made a class's SD depend on the site's class mix, which the checks within classes compare). A
    class of mostly one value (no interquartile range) is fenced by the first wider central range
    that has one (10-90 %, 5-95 %, 1-99 %; `_fences`), and one of nearly a single value by the
    site's."""
    low, high = _fences(quantiles, None if site is None else (~np.isnan(x)).sum(0))
    if site is not None:
        site_low, site_high = _fences(site)
        low, high = np.where(np.isinf(low), site_low, low), np.where(np.isinf(high), site_high, high)
    return np.where(np.isnan(x), x, np.clip(x, low, high))


FENCE_RANGES = ((0.25, 0.75), (0.1, 0.9), (0.05, 0.95), (0.01, 0.99))  # the quartiles first


def _fences(quantiles: np.ndarray, counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """[features] each: the far-out fences (±inf without a spread): the quartiles less and plus
    FAR_OUT_IQRS interquartile ranges. With the `counts` of values they are quantiles of: where the
    quartiles tie, the first wider central range of FENCE_RANGES with a width, the same way — one
    whose quantiles rest on neither extreme value (a quantile read between the largest two values
    holds a share of the largest, and a fence from it would give a wild value's size away)."""
    low, high = np.full(quantiles.shape[1], -np.inf), np.full(quantiles.shape[1], np.inf)
    for lower, upper in FENCE_RANGES if counts is not None else FENCE_RANGES[:1]:
        q_low, q_high = (quantiles[int(np.flatnonzero(np.isclose(PROBABILITIES, p))[0])] for p in (lower, upper))
        width = q_high - q_low
        inside = True if counts is None else np.ceil(upper * (counts - 1) - 1e-9) <= counts - 2
        with np.errstate(invalid="ignore"):
            fresh = np.isinf(low) & np.isfinite(width) & (width > 0) & inside
        low = np.where(fresh, q_low - FAR_OUT_IQRS * width, low)
        high = np.where(fresh, q_high + FAR_OUT_IQRS * width, high)
    return low, high


def _site_profile(x: np.ndarray, y: np.ndarray, n_classes: int, continuous: Sequence[int]
                  ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every statistic as computed, and the row counts of the correlations' pairs."""
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
                                                    "far_share", "far_above_share"))
    per_class = [_summary(x[y == k], shares=False) for k in range(n_classes)]
    for name in ("mean", "sd", "quantiles"):
        out[f"{name}_by_class"] = np.stack([summary[name] for summary in per_class])
    steps = _steps(x)
    with np.errstate(invalid="ignore"):
        out["step_shares"] = np.where(out["observed"] > 0, steps / np.maximum(out["observed"], 1), np.nan)
        # whole numbers: the values on step 1 (zeros among them), from the same histogram
        whole = steps[ZERO] + summed_on_steps(steps)[RESOLUTION_STEPS == 1][0]
        out["integer_share"] = np.where(out["observed"] > 0, whole / np.maximum(out["observed"], 1), np.nan)
    out["sentinel_counts"] = np.stack([(x == value).sum(0) for value in SENTINELS])
    out["correlation"], pairs = _correlation(x[:, list(continuous)])
    out["rank_correlation"], _ = _correlation(_ranks(x[:, list(continuous)]))
    out["duplicate_rows"] = np.array(_duplicate_rows(x, y))
    out["order_correlation"] = _order_correlation(x, y, n_classes, continuous)
    return out, pairs


def _steps(x: np.ndarray) -> np.ndarray:
    """[bins, features]: how many of each column's values have each step (`RESOLUTION_STEPS`; bins
    ZERO, FINER, then the steps). Each decade keeps only the values on its power of ten (or too
    large for it to be told), so a column of measured decimals is read once."""
    n_bins = 2 + len(RESOLUTION_STEPS)
    columns = np.broadcast_to(np.arange(x.shape[1]), x.shape)
    recorded = np.isfinite(x)
    counts = np.zeros((n_bins, x.shape[1]), dtype=np.int64)
    counts[ZERO] = (recorded & (x == 0)).sum(0)
    values, where = x[recorded & (x != 0)], columns[recorded & (x != 0)]
    bins = np.full(values.shape, FINER)
    alive = np.arange(values.size)
    for decade in range(len(RESOLUTION_STEPS) // 3):
        power = RESOLUTION_STEPS[3 * decade]
        ratio = values[alive] / power
        told = np.abs(ratio) < FINEST_RATIO
        tolerance = np.where(told, STEP_TOLERANCE, EXACT)
        on = _whole(ratio, tolerance)
        # on this power of ten: its step is here (1, 2 or 5 of it) unless it is on the next power too
        ratio, tolerance = ratio[on], tolerance[on]
        bins[alive[on]] = 2 + 3 * decade + np.where(_whole(ratio / 5, tolerance), 2,
                                                    np.where(_whole(ratio / 2, tolerance), 1, 0))
        alive = alive[on | ~told]
    counts += np.bincount(bins * x.shape[1] + where, minlength=n_bins * x.shape[1]).reshape(n_bins, x.shape[1])
    return counts


def on_steps(step_shares: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """From step histograms [..., bins, features] (`step_shares`): the share of the values not 0
    that lie on each step [..., steps, features], and the share of values not 0 [..., features]."""
    shares = np.asarray(step_shares, dtype=np.float64)
    off_zero = 1 - shares[..., ZERO, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        return summed_on_steps(shares) / off_zero[..., None, :], off_zero


def summed_on_steps(per_bin: np.ndarray) -> np.ndarray:
    """[..., steps, features]: per step, the sum over the histogram's bins [..., bins, features] whose
    own step lies on it (`ON_STEP`), of a count, a share or anything else kept per bin."""
    return np.einsum("...bf,bk->...kf", np.asarray(per_bin, dtype=np.float64)[..., FINER + 1:, :],
                     ON_STEP.astype(np.float64))


def _whole(ratio: np.ndarray, tolerance: np.ndarray | float) -> np.ndarray:
    return np.abs(ratio - np.round(ratio)) <= tolerance * np.maximum(1.0, np.abs(ratio))


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
    sd = sorted_sd(ordered, counts)
    out = {"mean": mean, "sd": sd, "quantiles": quantiles}
    if shares:
        out.update(_point_shares(ordered, counts))
        low, high = _fences(quantiles)
        with np.errstate(invalid="ignore"):
            above = x > high
            for name, beyond in (("far_share", (x < low) | above), ("far_above_share", above)):
                out[name] = np.where((counts > 0) & np.isfinite(low), beyond.sum(0) / np.maximum(counts, 1),
                                     np.where(counts > 0, 0.0, np.nan))
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


def _order_correlation(x: np.ndarray, y: np.ndarray, n_classes: int, continuous: Sequence[int]) -> np.ndarray:
    """[features]: each continuous feature's Spearman correlation with the order of the rows, within
    each class (a class's observed values ranked, against their places among its rows), pooled
    over the classes of 4 values or more as one correlation of the places and ranks each centred
    within its class (NaN elsewhere). Within classes: a file sorted by its label (the ill patients
    last) moves every feature that goes with the label along the rows, and says nothing about how
    the values were recorded. Pooled as one correlation, not on Fisher's z per class: a class of 5
    values is in perfect order once in 60 by chance, and its z of ±7 (r = ±1) then took the pooled
    correlation of a site of 15 rows to −0.92 where its rows were dealt at random."""
    out = np.full(x.shape[1], np.nan)
    columns = list(continuous)
    if not columns or not len(x):
        return out
    products, place_squares, rank_squares = (np.zeros(len(columns)) for _ in range(3))
    for k in range(n_classes):
        values = x[y == k][:, columns]
        observed = ~np.isnan(values)
        usable = observed.sum(0) >= 4
        place = np.where(observed, np.cumsum(observed, axis=0), np.nan)  # its place among the observed values
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a column with no values in the class
            a, b = (v - np.nanmean(v, axis=0) for v in (place, _ranks(values)))
        products += np.where(usable, np.nansum(a * b, axis=0), 0.0)
        place_squares += np.where(usable, np.nansum(a**2, axis=0), 0.0)
        rank_squares += np.where(usable, np.nansum(b**2, axis=0), 0.0)
    squares = place_squares * rank_squares
    with np.errstate(invalid="ignore", divide="ignore"):
        out[columns] = np.where(squares > 1e-12, products / np.sqrt(squares), np.nan)
    return out


def _ranks(x: np.ndarray) -> np.ndarray:
    """Each column's values as their ranks among its observed values (ties: their mean rank; NaN
    stays NaN), for Spearman's correlations: one row far out moves a Pearson correlation of a
    hundred rows anywhere (vehicle's sensors hold rows 10-30 interquartile ranges from the
    median: dealt to sites at random, the site that drew one looked as if its channel had lost its
    relations), and moves a rank correlation little. Ranked once over each column's observed
    rows, not again per pair: a pair's correlation over the rows both have is of those ranks."""
    from scipy import stats

    return stats.rankdata(x, axis=0, nan_policy="omit") if x.size else x.astype(np.float64)


def _correlation(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pearson correlations of the columns over pairwise complete rows (NaN where fewer than 3 rows
    or no spread), all pairs at once: sums over the rows where both columns are observed; and those
    rows' counts (what a policy's minimum applies to)."""
    if x.shape[0] >= 3 and not np.isnan(x).any():  # every pair complete: one product of the centred columns
        centred = x - x.mean(0)
        squares = (centred**2).sum(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = (centred.T @ centred) / np.sqrt(np.outer(squares, squares))
        spread = squares > 1e-12 * x.shape[0]
        return (np.where(spread[:, None] & spread[None, :], np.clip(out, -1, 1), np.nan),
                np.full((x.shape[1], x.shape[1]), float(x.shape[0])))
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
    return np.where((n >= 3) & (spread > 1e-12 * np.maximum(n, 1)), np.clip(out, -1, 1), np.nan), n


@dataclass
class Profile:
    """Every site's summary (`site_profile`), stacked over sites, with the names that say what
    the axes are, and what each site withheld at which policy."""

    sites: list[str]
    features: list[str]
    kinds: list[str]
    columns: list[str]  # the input column each feature came from (a categorical gives several one-hot features)
    classes: list[str]
    arrays: dict[str, np.ndarray]  # ARRAYS, each [sites, ...]; NaN where a site did not release it
    units: dict[str, str] = field(default_factory=dict)  # feature -> unit, where the data say
    # site -> statistic -> why its values are NaN there (withheld by the site's disclosure policy, not recorded)
    withheld: dict[str, dict[str, str]] = field(default_factory=dict)
    # site -> the policy it released at (`Policy.to_dict`; None: as computed); a site not in it: not recorded
    policies: dict[str, dict[str, Any] | None] = field(default_factory=dict)

    @classmethod
    def of_sites(cls, per_site: Sequence[Mapping[str, np.ndarray] | SiteProfile], sites: Sequence[str],
                 features: Sequence[str], kinds: Sequence[str], columns: Sequence[str], classes: Sequence[str],
                 units: Mapping[str, str] | None = None, withheld: Mapping[str, Mapping[str, str]] | None = None,
                 policies: Mapping[str, Mapping[str, Any] | None] | None = None) -> Profile:
        """Stacked over sites (each a site's arrays, or its `SiteProfile` with what it withheld and
        its policy); a statistic a site did not send is NaN there, withheld as NOT_RECORDED (a
        site running an older version)."""
        reasons = {site: dict(r) for site, r in (withheld or {}).items()}
        recorded = {site: (dict(p) if isinstance(p, Mapping) else None) for site, p in (policies or {}).items()}
        empty = _unreleased(len(features), len(classes), [j for j, kind in enumerate(kinds) if kind == "continuous"])
        arrays = {}
        summaries = []
        for site, summary in zip(sites, per_site):
            if isinstance(summary, SiteProfile):
                reasons.setdefault(site, {}).update(summary.withheld)
                recorded[site] = summary.policy
                summary = summary.arrays
            summaries.append(summary)
        for name in ARRAYS:
            stacked = []
            for site, summary in zip(sites, summaries):
                if name in summary:
                    stacked.append(np.asarray(summary[name]).reshape(empty[name].shape))
                else:
                    stacked.append(empty[name])
                    reasons.setdefault(site, {}).setdefault(name, NOT_RECORDED)
            arrays[name] = np.stack(stacked) if stacked else empty[name][None][:0]
        return cls(list(sites), list(features), list(kinds), list(columns or features), list(classes), arrays,
                   dict(units or {}), {site: r for site, r in reasons.items() if r}, recorded)

    @property
    def continuous(self) -> list[int]:
        """The features whose correlations the profile keeps (in `correlation`'s order)."""
        return [j for j, kind in enumerate(self.kinds) if kind == "continuous"]

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(name)

    def policy_text(self, site: str) -> str:
        """The policy `site` released its statistics at, in words."""
        if site not in self.policies:
            return "not recorded (released before disclosure control)"
        return describe_policy(self.policies[site])

    def site_meta(self, site: str) -> dict[str, Any]:
        """What one site sends with its arrays: the names, its own policy and what it withheld."""
        return {**self.meta(), "policies": {site: self.policies.get(site)},
                "withheld": {site: self.withheld.get(site, {})}}

    def meta(self) -> dict[str, Any]:
        return {"sites": self.sites, "features": self.features, "kinds": self.kinds, "columns": self.columns,
                "classes": self.classes, "units": self.units, "probabilities": PROBABILITIES.tolist(),
                "sentinels": SENTINELS.tolist(), "withheld": self.withheld, "policies": self.policies}

    def to_npz(self) -> bytes:
        """The profile as one npz (arrays, and the names as a JSON string array): nothing pickled.
        Its numbers as released (float64): a stored check-up then answers as the Data page and
        `inspect` do from the same statistics, to the last cell (float32 moved shares by 1e-8 and
        made cells on the false discovery line come and go). Made once: a profile is not changed
        after it is made (a check-up's runs share one, each storing it)."""
        made = self.__dict__.get("_npz")
        if made is None:
            buffer = io.BytesIO()
            np.savez_compressed(buffer, meta=np.array(json.dumps(self.meta())), **self.arrays)
            made = self.__dict__["_npz"] = buffer.getvalue()
        return made

    @classmethod
    def from_npz(cls, data: Mapping[str, np.ndarray]) -> Profile:
        """A stored profile; statistics it lacks (stored before they existed) are NaN, withheld as
        NOT_RECORDED at every site."""
        meta = json.loads(str(data["meta"]))
        stored = {name: np.asarray(data[name], dtype=np.float64 if data[name].dtype.kind == "f" else data[name].dtype)
                  for name in ARRAYS if name in data}
        per_site = [{name: value[i] for name, value in stored.items()} for i in range(len(meta["sites"]))]
        withheld, policies = read_disclosure(meta)
        return cls.of_sites(per_site, meta["sites"], meta["features"], meta["kinds"], meta["columns"],
                            meta["classes"], meta.get("units") or {}, withheld, policies)


def read_disclosure(meta: Mapping[str, Any]) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, Any] | None]]:
    """What the sites of a profile's (or one site's) meta say they withheld (site -> statistic ->
    reason) and the policies they released at (none: a profile from before disclosure control,
    whose sites released everything as computed). Entries of another shape are left out."""
    withheld, policies = meta.get("withheld"), meta.get("policies")
    reasons = {str(site): {str(name): str(why) for name, why in entries.items() if isinstance(why, str)}
               for site, entries in (withheld.items() if isinstance(withheld, dict) else []) if isinstance(entries, dict)}
    recorded = {str(site): (policy if isinstance(policy, dict) else None)
                for site, policy in (policies.items() if isinstance(policies, dict) else [])}
    return reasons, recorded


def _unreleased(n_features: int, n_classes: int, continuous: Sequence[int]) -> dict[str, np.ndarray]:
    """Every statistic of one site, all NaN, in its shape (what a site that did not send it counts as)."""
    template, _ = _site_profile(np.zeros((0, n_features)), np.zeros(0, dtype=np.int64), n_classes, continuous)
    return {name: np.full(np.shape(value), np.nan) for name, value in template.items()}


def profile_federation(sites: Sequence[tuple[str, np.ndarray, np.ndarray]], features: Sequence[str],
                       kinds: Sequence[str], columns: Sequence[str], classes: Sequence[str],
                       units: Mapping[str, str] | None = None, policy: Policy | None = DEFAULT_POLICY) -> Profile:
    """The profile of every (name, x, y) site, as if each had computed and sent its own, every
    site releasing at `policy` (None: as computed, unprotected: for measuring the policy's cost)."""
    continuous = [j for j, kind in enumerate(kinds) if kind == "continuous"]
    return Profile.of_sites([site_profile(x, y, len(classes), continuous, policy) for _, x, y in sites],
                            [name for name, _, _ in sites], features, kinds, columns, classes, units)
