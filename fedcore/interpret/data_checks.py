"""The check-up's data lens: every site's profile (`profile.Profile`, original units) against the
other sites', check by check. Each check states its statistic, its null and what makes a finding
material (large enough to matter, whatever the p-value):

location       per continuous feature, the site's median in units of the feature's within-site SD
               (the median over sites of each site's robust SD: the mean of the
               normal-scaled widths of its central 50, 60, 70 and 80 %), leave-one-out predictive t
               with variances moderated across features (`calibration.leave_one_out`); material
               when it lies 0.25 SD or more from the others' mean.
spread         the log of the site's robust SD, the same way; material when the ratio to the
               others' is at least 1.25 (or at most 0.8).
unit           where location or spread is material: a conversion of the catalogue
               (`units.match_conversion`) that maps the site's quantiles onto the others' mean
               quantiles; its p is the smaller of the two (Bonferroni, × 2). Failing that,
swapped_columns the site's values of this feature look like the others' of another feature and
               its values of that feature like the others' of this one.
shape          two summaries of a distribution's shape that location and spread leave out, from the
               quantiles: its skew (Bowley's, (q75 + q25 - 2 q50) / (q75 - q25)) and the weight of
               its tails (log of (q95 - q05) / (q75 - q25)); leave-one-out t on each, moderated
               across features; material when the skew differs by 0.15 or the tail ratio by a
               factor 1.3 (a skewed, capped, rounded or two-humped site where the others are not).
missing_code   a usual missing-value code (0, -1, 9, 99, 999, ...) taking 2 % or more of a
               continuous feature's values at the site (5 or more), lying outside every other
               site's 1-99 % range; p: binomial, the site's count against the others' rate of it
               (at least half a value in all their rows).
missingness    the logit of the site's missing share, leave-one-out t moderated across features
               (one-sided, more missing); material from 5 percentage points and twice the odds.
missing_by_class the spread over classes of the logit of the missing share within the site,
               leave-one-out t (one-sided, larger); material when the classes' missing shares
               differ by 20 percentage points or more.
category_codes the share of a categorical column's rows at the site in categories no other site
               uses; binomial against half a row in all the others' rows; material from 5 %.
label_relation per feature, the site's class means in within-class SDs (two classes: the
               standardised difference, last class minus first; more: projected on the direction
               the other sites' class means show); leave-one-out t, two-sided; material from a
               difference of 0.3 that reverses the others' relation (where theirs is 0.2 or more)
               or leaves less than a third of it (a stronger relation is no incompatibility).
labels_permuted for the site as a whole: over the features the others show related to the label
               (|standardised difference| ≥ 0.2), how often renaming the site's classes (the best
               permutation; two classes: swapping them) fits the others better than its own
               labels; binomial against 1/2, × the number of permutations tried; material when
               3 or more features and three quarters of them say so.
labels_weak    how strongly the site's features relate to its labels relative to the others'
               (median ratio over those features), leave-one-out t over sites, one-sided (weaker);
               material when below one half.

The profile's correlations are not a check of their own: sites differ in how their features vary
together for reasons no one would call an error (HAR's subjects move differently), and what an
export error does to them (swapped columns) the location and spread checks see first.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterator
from statistics import NormalDist

import numpy as np
from scipy import stats

from fedcore.interpret import not_shared
from fedcore.interpret.calibration import leave_one_out, one_sided
from fedcore.interpret.findings import Finding
from fedcore.interpret.profile import PROBABILITIES, SENTINELS, Profile
from fedcore.interpret.units import discrepancy, match_conversion

LENS = "data profile"
LOWER, MEDIAN, UPPER = (int(np.flatnonzero(np.isclose(PROBABILITIES, p))[0]) for p in (0.25, 0.5, 0.75))
# The robust SD averages the normal-scaled widths of the central 50 %, 60 %, 70 % and 80 %: as robust
# as the interquartile range to up to 10 % of wild values on either side, and about twice as efficient
# (on the demo's clean sites the IQR alone put one site's SD 20 % below the others' by chance).
CENTRAL = [(int(np.flatnonzero(np.isclose(PROBABILITIES, p))[0]), int(np.flatnonzero(np.isclose(PROBABILITIES, 1 - p))[0]),
            2 * NormalDist().inv_cdf(1 - p)) for p in (0.10, 0.15, 0.20, 0.25)]
MIN_SHIFT, MIN_SPREAD_RATIO, MIN_SKEW, MIN_TAIL_RATIO = 0.25, 1.25, 0.15, 1.3
MIN_CODE_SHARE, MIN_CODE_COUNT = 0.02, 5
MIN_MISSING, MIN_CLASS_MISSING_GAP = 0.05, 0.2
MIN_CATEGORY_SHARE, MIN_RELATION_GAP, INFORMATIVE = 0.05, 0.3, 0.2
CHI2_1_MEDIAN = float(stats.chi2.median(1))
MIN_DISTINCT_QUANTILES = 5  # a discrete feature's step-shaped quantiles say nothing about units
EXPLAIN_BELOW = 0.01  # p-value under which a shifted or wider feature is tried against conversions and other columns
MAX_PERMUTED_CLASSES = 6  # 720 orders; beyond, only swaps of two classes are tried


def robust_sd(quantiles: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """[sites, features] robust SD from quantiles [sites, PROBABILITIES, features]: the mean of the
    normal-scaled widths of the central 50-80 % (CENTRAL); the plain SD where those are all 0."""
    central_sd = np.mean([(quantiles[:, high] - quantiles[:, low]) / width for low, high, width in CENTRAL], axis=0)
    return np.where(central_sd > 0, central_sd, sd)


def others_mean(values: np.ndarray) -> np.ndarray:
    """[sites, ...] the mean of the other sites' values, each site's left out; a value a site did
    not share (NaN: its disclosure policy) is left out of the others' too."""
    known = np.isfinite(values)
    total, count = np.where(known, values, 0).sum(0, keepdims=True), known.sum(0, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (total - np.where(known, values, 0)) / (count - known)


def check_profile(profile: Profile) -> list[Finding]:
    """Every check's findings (not yet decided: `findings.decide` sets q-values); a cell a site's
    disclosure policy left untestable says so (`not_shared.mark`)."""
    with warnings.catch_warnings():  # a statistic no site (or one site only) shared is NaN, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        checks = Checks(profile)
        return not_shared.mark(profile, [*checks.values(), *checks.missing_codes(), *checks.missingness(),
                                         *checks.category_codes(), *checks.label_relations(), *checks.labels()],
                               LENS)


class Checks:
    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.sites = profile.sites
        self.n = len(profile.sites)
        self.continuous = profile.continuous
        self.robust_sd = robust_sd(profile.quantiles, profile.sd)  # [sites, features]
        with np.errstate(invalid="ignore"):
            positive = np.where(self.robust_sd > 0, self.robust_sd, np.nan)
        self.yardstick = np.nanmedian(positive, axis=0) if self.n else np.array([])  # [features]

    def unit(self, j: int) -> str:
        return self.profile.units.get(self.profile.features[j], "")

    def value(self, j: int, x: float) -> str:
        unit = self.unit(j)
        return f"{x:.4g}{' ' + unit if unit else ''}"

    # -- location, spread, units, shape ---------------------------------------------------------
    def values(self) -> Iterator[Finding]:
        p, q = self.profile, self.profile.quantiles
        cols = self.continuous
        if not cols or self.n < 3:
            return
        scale = self.yardstick[cols]
        median = q[:, MEDIAN][:, cols]
        location_dev, location_t, location_p = leave_one_out(median / scale)
        log_sd = np.log(np.where(self.robust_sd[:, cols] > 0, self.robust_sd[:, cols], np.nan))
        spread_dev, spread_t, spread_p = leave_one_out(log_sd)
        other_quantiles = others_mean(q)  # [sites, probabilities, features]
        skew, tails = self._shape(q[:, :, cols])
        skew_dev, _, skew_p = leave_one_out(skew)
        tail_dev, _, tail_p = leave_one_out(tails)
        for i, site in enumerate(self.sites):
            for c, j in enumerate(cols):
                name = p.features[j]
                others_median = float(np.nanmean(np.delete(median[:, c], i)))
                shifted = abs(location_dev[i, c]) >= MIN_SHIFT
                widened = abs(spread_dev[i, c]) >= math.log(MIN_SPREAD_RATIO)
                evidence = {"median": float(median[i, c]), "others_median": others_median,
                            "sd": float(self.robust_sd[i, j]), "others_sd": float(np.exp(np.nanmean(np.delete(log_sd[:, c], i)))),
                            "quantiles": q[i, :, j].tolist(), "others_quantiles": other_quantiles[i, :, j].tolist()}
                strong = min(np.nan_to_num(location_p[i, c], nan=1.0), np.nan_to_num(spread_p[i, c], nan=1.0)) < EXPLAIN_BELOW
                if (shifted or widened) and strong:
                    explained = self._explain(i, j, other_quantiles[i, :, j], scale[c])
                    if explained is not None:
                        kind, message = explained
                        yield Finding(site, LENS, kind, name, message,
                                      min(1.0, 2 * float(np.nanmin([location_p[i, c], spread_p[i, c]]))),
                                      float(location_dev[i, c]), "within-site SDs", evidence=evidence)
                yield Finding(site, LENS, "location", name,
                              f"{site}'s {name}: median {self.value(j, median[i, c])} against "
                              f"{self.value(j, others_median)} at the other sites "
                              f"({location_dev[i, c]:+.2f} within-site SDs)",
                              float(location_p[i, c]), float(location_dev[i, c]), "within-site SDs",
                              evidence=evidence, material=bool(shifted))
                ratio = math.exp(spread_dev[i, c]) if np.isfinite(spread_dev[i, c]) else float("nan")
                yield Finding(site, LENS, "spread", name,
                              f"{site}'s {name} varies {ratio:.2g} times as much as at the other sites "
                              f"(SD {self.value(j, self.robust_sd[i, j])} against {self.value(j, evidence['others_sd'])})",
                              float(spread_p[i, c]), ratio, "SD ratio", evidence=evidence, material=bool(widened))
                others_skew = float(np.nanmean(np.delete(skew[:, c], i)))
                yield Finding(site, LENS, "shape", name,
                              f"{site}'s {name} is skewed differently from the other sites' (skew {skew[i, c]:+.2f} "
                              f"against {others_skew:+.2f}: capped, logged or mixed values?)",
                              float(skew_p[i, c]), float(skew_dev[i, c]), "Bowley skew", evidence=evidence,
                              material=bool(abs(skew_dev[i, c]) >= MIN_SKEW))
                ratio = math.exp(tail_dev[i, c]) if np.isfinite(tail_dev[i, c]) else float("nan")
                yield Finding(site, LENS, "shape", name,
                              f"{site}'s {name} has {'heavier' if ratio > 1 else 'lighter'} tails than the other "
                              f"sites' ({ratio:.2g} times their 5-95 % range for the same middle half: "
                              f"{'outliers or mixed units' if ratio > 1 else 'capped, binned or two groups'}?)",
                              float(tail_p[i, c]), ratio, "tail ratio", evidence=evidence,
                              material=bool(abs(tail_dev[i, c]) >= math.log(MIN_TAIL_RATIO)))

    def _explain(self, i: int, j: int, others: np.ndarray, scale: float) -> tuple[str, str] | None:
        """A unit conversion, else another column, that makes site i's values of feature j match
        (for features whose quantiles are more than a few steps, at the site and the others)."""
        p, site, name = self.profile, self.sites[i], self.profile.features[j]
        site_q = p.quantiles[i, :, j]
        if not (self.robust_sd[i, j] > 0 and len(np.unique(site_q)) >= MIN_DISTINCT_QUANTILES
                and len(np.unique(np.round(others, 12))) >= MIN_DISTINCT_QUANTILES):
            return None
        match = match_conversion(name, site_q, others, scale)
        if match is not None and match.conversion is not None:
            return "unit", match.describe(site, name)
        swapped = self._swapped_with(i, j)
        if swapped is not None:  # before an unexplained factor: swapped columns on other scales look like one
            return "swapped_columns", (f"{site}'s {name} and {p.features[swapped]} look swapped: each matches the "
                                       f"other sites' values of the other column (a mislabelled export?)")
        return ("unit", match.describe(site, name)) if match is not None else None

    def _swapped_with(self, i: int, j: int) -> int | None:
        """A continuous feature k such that site i's values of j look like the others' of k and its
        values of k like the others' of j (both ways: one-way look-alikes abound among features on
        similar scales), each match at least 4 times closer than to its own column."""
        p = self.profile
        q = p.quantiles
        others = others_mean(q)[i]  # [probabilities, features]
        for k in self.continuous:
            if k == j or not (self.yardstick[k] > 0 and self.yardstick[j] > 0):
                continue
            pairs = ((j, k), (k, j))
            if all(discrepancy(q[i, :, a], others[:, b], self.yardstick[b]) <= 0.25
                   and discrepancy(q[i, :, a], others[:, a], self.yardstick[a])
                   >= 4 * max(discrepancy(q[i, :, a], others[:, b], self.yardstick[b]), 0.05) for a, b in pairs):
                return k
        return None

    @staticmethod
    def _shape(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """[sites, features] Bowley skew and log tail ratio from quantiles [sites, probabilities, features]."""
        low, median, high = q[:, LOWER], q[:, MEDIAN], q[:, UPPER]
        q05, q95 = q[:, 1], q[:, -2]
        with np.errstate(invalid="ignore", divide="ignore"):
            iqr = np.where(high - low > 0, high - low, np.nan)
            skew = (high + low - 2 * median) / iqr
            tails = np.log((q95 - q05) / iqr)
        return skew, np.where(np.isfinite(tails), tails, np.nan)

    # -- missing values --------------------------------------------------------------------------
    def missing_codes(self) -> Iterator[Finding]:
        p = self.profile
        counts, observed = p.sentinel_counts, p.observed  # [sites, codes, features], [sites, features]
        q05, q95 = p.quantiles[:, 1], p.quantiles[:, -2]
        for i, site in enumerate(self.sites):
            others = [k for k in range(self.n) if k != i]
            if not others:
                return
            for j in self.continuous:
                if not observed[i, j] > 0 or not self.yardstick[j] > 0:  # NaN: not shared (disclosure)
                    continue
                n_site = int(observed[i, j])
                if not np.isfinite(counts[i, :, j]).all():
                    continue
                # the values most other sites have: their typical 5-95 % range, 2 SDs wider
                low = float(np.nanmedian(q05[others, j])) - 2 * self.yardstick[j]
                high = float(np.nanmedian(q95[others, j])) + 2 * self.yardstick[j]
                for v, code in enumerate(SENTINELS):
                    count = int(counts[i, v, j])
                    if count < MIN_CODE_COUNT or count / n_site < MIN_CODE_SHARE:
                        continue
                    with np.errstate(invalid="ignore", divide="ignore"):
                        shares = counts[others, v, j] / observed[others, j]
                    rate = max(float(np.nanmedian(shares)) if np.isfinite(shares).any() else 0.0,
                               0.5 / max(float(observed[others, j].sum()), 1.0))
                    p_value = float(stats.binom.sf(count - 1, n_site, min(rate, 1.0)))
                    name = p.features[j]
                    yield Finding(site, LENS, "missing_code", name,
                                  f"{site}'s {name} is {code:g} in {count / n_site:.0%} of its values; most other "
                                  f"sites' values lie between {self.value(j, np.nanmedian(q05[others, j]))} and "
                                  f"{self.value(j, np.nanmedian(q95[others, j]))}: {code:g} looks like a code for "
                                  "'missing'", p_value, count / n_site, "share of values",
                                  evidence={"code": float(code), "count": count},
                                  material=bool(code < low or code > high))

    def missingness(self) -> Iterator[Finding]:
        """Counts at one site against the others' pooled rate, over-dispersed binomial: the
        dispersion φ (how much more sites differ than binomial sampling makes them) is estimated
        from every site and feature at once (median squared Pearson residual over that of χ²₁),
        so real practice differences between sites widen the yardstick for all."""
        p = self.profile
        rows = p.rows.astype(np.float64)[:, None]
        missing = rows - p.observed
        share = missing / np.maximum(rows, 1)
        # a site that did not share its counts (NaN: its disclosure policy) is left out of the others'
        known = np.isfinite(missing)
        others_missing = np.nansum(missing, 0, keepdims=True) - np.where(known, missing, 0)
        others_rows = np.where(known, rows, 0).sum(0, keepdims=True) - np.where(known, rows, 0)
        rate = (others_missing + 0.5) / (others_rows + 1.0)
        residual = (missing - rows * rate) / np.sqrt(rows * rate * (1 - rate))
        dispersion = max(1.0, float(np.median(np.nan_to_num(residual) ** 2)) / CHI2_1_MEDIAN) if residual.size else 1.0
        p_more = stats.norm.sf(residual / math.sqrt(dispersion))
        by_class_rows = p.class_counts[:, :, None].astype(np.float64)
        by_class_missing = by_class_rows - p.observed_by_class
        chi2, df = _class_dependence(by_class_missing, by_class_rows)
        with np.errstate(invalid="ignore"):
            # features with nothing (or everything) missing show no dependence on the class either
            per_df = np.where(np.isfinite(chi2), chi2 / df, 0.0)
            class_dispersion = max(1.0, float(np.median(per_df)) / CHI2_1_MEDIAN) if per_df.size else 1.0
            class_p = stats.chi2.sf(chi2 / class_dispersion, df)
            class_share = np.where(by_class_rows > 0, by_class_missing / np.maximum(by_class_rows, 1), np.nan)
        for i, site in enumerate(self.sites):
            for j, name in enumerate(p.features):
                others_share = float(rate[i, j])
                more = share[i, j] - others_share
                odds = (share[i, j] / max(1 - share[i, j], 1e-9)) / (others_share / max(1 - others_share, 1e-9))
                yield Finding(site, LENS, "missingness", name,
                              f"{site}'s {name} is missing in {share[i, j]:.0%} of its rows against {others_share:.0%} "
                              "at the other sites", float(p_more[i, j]), float(more), "share of rows",
                              material=bool(more >= MIN_MISSING and odds >= 2))
                if not np.isfinite(class_p[i, j]):
                    continue
                shares = [class_share[i, k, j] for k in range(len(p.classes))]
                gap = float(np.nanmax(shares) - np.nanmin(shares))
                listed = ", ".join(f"'{c}' {v:.0%}" for c, v in zip(p.classes, shares) if np.isfinite(v))
                yield Finding(site, LENS, "missing_by_class", name,
                              f"{site}'s {name} is missing for some classes and not others ({listed}): missing not "
                              "at random?", float(class_p[i, j]), gap, "gap in missing share",
                              material=bool(gap >= MIN_CLASS_MISSING_GAP))

    # -- categories -----------------------------------------------------------------------------
    def category_codes(self) -> Iterator[Finding]:
        p = self.profile
        groups: dict[str, list[int]] = {}
        for j, (kind, column) in enumerate(zip(p.kinds, p.columns)):
            if kind == "categorical":
                groups.setdefault(column, []).append(j)
        for column, members in groups.items():
            share = p.mean[:, members]  # [sites, categories]: each one-hot feature's share of 1
            used = np.nan_to_num(share) * p.observed[:, members] > 0
            for i, site in enumerate(self.sites):
                others = [k for k in range(self.n) if k != i]
                if not others:
                    return
                unused = ~used[others].any(0)
                mass = float(np.nansum(share[i, unused]))
                if not np.isfinite(p.observed[i, members[0]]):  # not shared (disclosure): not testable
                    continue
                rows = int(round(mass * p.observed[i, members[0]]))
                if rows == 0:
                    continue
                n_others = float(p.observed[others, members[0]].sum())
                p_value = float(stats.binom.sf(rows - 1, int(p.observed[i, members[0]]), 0.5 / max(n_others, 1.0)))
                theirs = [self._category(p.features[m], column) for m, u in zip(members, used[others].any(0)) if u]
                mine = [self._category(p.features[m], column) for m, u in zip(members, unused & used[i]) if u]
                yield Finding(site, LENS, "category_codes", column,
                              f"{site}'s {column} uses {', '.join(map(repr, mine))} ({mass:.0%} of its rows), which no "
                              f"other site uses; they use {', '.join(map(repr, theirs))}", p_value, mass,
                              "share of rows", evidence={"site_codes": mine, "other_codes": theirs},
                              material=mass >= MIN_CATEGORY_SHARE)

    @staticmethod
    def _category(feature: str, column: str) -> str:
        return feature[len(column) + 1:] if feature.startswith(column + "=") else feature

    # -- labels ---------------------------------------------------------------------------------
    def _class_profiles(self) -> np.ndarray:
        """[sites, classes, features]: each class's mean in the site's within-class SDs, centred on
        the site's mean of the class means (NaN where a class is absent)."""
        p = self.profile
        with np.errstate(invalid="ignore", divide="ignore"):
            weights = p.observed_by_class.astype(np.float64)
            within = np.sqrt(np.nansum(np.nan_to_num(p.sd_by_class) ** 2 * np.maximum(weights - 1, 0), axis=1)
                             / np.maximum(weights.sum(1) - weights.shape[1], 1))
            means = p.mean_by_class
            centred = means - np.nanmean(means, axis=1, keepdims=True)
            return centred / np.where(within > 0, within, np.nan)[:, None, :]

    def _consensus(self, profiles: np.ndarray, i: int) -> np.ndarray:
        """[classes, features]: the other sites' median class profile (a median, so that one other
        site with wrong labels does not turn the pattern a site is compared with)."""
        others = np.delete(profiles, i, axis=0)
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmedian(others, axis=0) if others.size else np.full(profiles.shape[1:], np.nan)

    def _relation(self, profiles: np.ndarray) -> np.ndarray:
        """[sites, features]: each site's class profile along the direction the others show (two
        classes: last minus first class)."""
        n_classes = profiles.shape[1]
        relation = np.full((self.n, profiles.shape[2]), np.nan)
        for i in range(self.n):
            if n_classes == 2:
                relation[i] = profiles[i, 1] - profiles[i, 0]
                continue
            consensus = self._consensus(profiles, i)
            norm = np.sqrt(np.nansum(consensus**2, axis=0))
            with np.errstate(invalid="ignore", divide="ignore"):
                relation[i] = np.nansum(profiles[i] * consensus, axis=0) / np.where(norm > 0, norm, np.nan)
        return relation

    def label_relations(self) -> Iterator[Finding]:
        p = self.profile
        if self.n < 3 or len(p.classes) < 2:
            return
        relation = self._relation(self._class_profiles())
        deviation, t, p2 = leave_one_out(relation)
        first, last = p.classes[0], p.classes[-1]
        for i, site in enumerate(self.sites):
            for j, name in enumerate(p.features):
                if not np.isfinite(relation[i, j]):
                    continue
                others = float(np.nanmean(np.delete(relation[:, j], i)))
                reverses = np.sign(relation[i, j]) != np.sign(others) and abs(others) >= INFORMATIVE
                how = "reverses" if reverses else "differs"
                what = (f"'{last}' minus '{first}': {relation[i, j]:+.2f} SD against {others:+.2f}" if len(p.classes) == 2
                        else f"{relation[i, j]:+.2f} against {others:+.2f} along the others' class pattern")
                ratio = relation[i, j] / others if others else float("nan")
                weaker = abs(others) >= INFORMATIVE and 0 <= ratio < 1 / 3
                yield Finding(site, LENS, "label_relation", name,
                              f"{site}'s {name} relates to the label differently from the other sites ({how}; {what})",
                              float(p2[i, j]), float(deviation[i, j]), "SDs",
                              material=bool(abs(deviation[i, j]) >= MIN_RELATION_GAP and (reverses or weaker)))

    def labels(self) -> Iterator[Finding]:
        """Site-level label checks over the features the others show related to the label."""
        p = self.profile
        n_classes = len(p.classes)
        if self.n < 3 or n_classes < 2:
            return
        profiles = self._class_profiles()
        relation = self._relation(profiles)
        agreement = np.full(self.n, np.nan)  # Fisher z of the correlation with the others' class pattern
        strength = np.full(self.n, np.nan)
        informative_of: list[np.ndarray] = []
        for i in range(self.n):
            consensus = self._consensus(profiles, i)
            spread = np.nanmax(np.abs(consensus), axis=0) if consensus.size else np.array([])
            informative = np.flatnonzero(np.isfinite(spread) & (spread >= INFORMATIVE) & np.isfinite(profiles[i]).all(0))
            informative_of.append(informative)
            if informative.size < 3:
                continue
            mine, theirs = profiles[i][:, informative].ravel(), consensus[:, informative].ravel()
            if mine.std() > 0 and theirs.std() > 0:
                agreement[i] = np.arctanh(np.clip(np.corrcoef(mine, theirs)[0, 1], -0.999999, 0.999999))
            with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                others_relation = np.nanmedian(np.delete(relation, i, axis=0), axis=0)
                strength[i] = float(np.nanmedian(relation[i, informative] / others_relation[informative]))
        _, agree_t, agree_p2 = leave_one_out(agreement)
        agree_p = one_sided(agree_t, agree_p2, -1)[:, 0]
        _, weak_t, weak_p2 = leave_one_out(strength)
        weak_p = one_sided(weak_t, weak_p2, -1)[:, 0]
        for i, site in enumerate(self.sites):
            if np.isfinite(agreement[i]):
                r = float(np.tanh(agreement[i]))
                order, wins, m, tried = self._best_renaming(profiles, i, informative_of[i])
                # within the site: renaming fits better in more features than chance (binomial, × the
                # renamings tried); with few sites the comparison across sites alone has little power
                p_renamed = min(1.0, float(stats.binom.sf(wins - 1, m, 0.5)) * tried) if m else 1.0
                p_reversed = self._reversal_p(i, relation, informative_of[i]) if n_classes == 2 else 1.0
                if n_classes == 2:
                    what = f"'{p.classes[0]}' and '{p.classes[1]}' look swapped"
                else:
                    pairs = [f"'{p.classes[k]}' → '{p.classes[order[k]]}'" for k in range(n_classes) if order[k] != k]
                    what = "its classes look renamed (" + ", ".join(pairs) + ")" if pairs else "its classes relate to the features differently"
                yield Finding(site, LENS, "labels_permuted", None,
                              f"{site}'s labels look wrong: {what} — its features relate to its labels the other way "
                              f"round from the other sites (correlation {r:+.2f} with their pattern over {m} features; "
                              f"renamed, {wins} of the {m} match better)",
                              min(1.0, 3 * min(float(np.nan_to_num(agree_p[i], nan=1.0)), p_renamed, p_reversed)), r,
                              "correlation with the others' pattern", evidence={"order": list(order), "features": m},
                              material=bool(r < 0 or (m >= 3 and wins / max(m, 1) >= 0.75)))
            if np.isfinite(strength[i]) and strength[i] > 0:
                yield Finding(site, LENS, "labels_weak", None,
                              f"{site}'s features relate to its labels {strength[i]:.0%} as strongly as at the other "
                              "sites: are its labels noisy, or defined differently?", float(weak_p[i]),
                              float(strength[i]), "relative strength", material=bool(strength[i] < 0.5))

    def _reversal_p(self, i: int, relation: np.ndarray, informative: np.ndarray) -> float:
        """Two classes: how far site i's label relations point against the others' direction.
        The projection of its standardised class differences on the others' mean direction, over
        the informative features, is tested for being below 0 with its sampling SD from the site's
        own class counts (sqrt(1/n0 + 1/n1) per feature, times sqrt(m): as if the m features were
        perfectly correlated, so never too small)."""
        if informative.size == 0:
            return 1.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            others = np.nanmedian(np.delete(relation, i, axis=0), axis=0)[informative]
        mine = relation[i, informative]
        keep = np.isfinite(others) & np.isfinite(mine)
        norm = float(np.sqrt((others[keep] ** 2).sum()))
        n0, n1 = (float(c) for c in self.profile.class_counts[i][:2])
        if not keep.any() or norm == 0 or min(n0, n1) < 1:
            return 1.0
        projection = float((mine[keep] * others[keep]).sum()) / norm
        sd = math.sqrt(1 / n0 + 1 / n1) * math.sqrt(keep.sum())
        return float(stats.norm.cdf(projection / sd))

    def _best_renaming(self, profiles: np.ndarray, i: int, informative: np.ndarray
                       ) -> tuple[tuple[int, ...], int, int, int]:
        """The renaming of site i's classes (not the identity) that fits the others' class pattern
        best, in how many of the m informative features it fits better than its own labels, m, and
        how many renamings were tried."""
        n_classes = profiles.shape[1]
        orders = (list(itertools.permutations(range(n_classes))) if n_classes <= MAX_PERMUTED_CLASSES
                  else [_swap(n_classes, a, b) for a, b in itertools.combinations(range(n_classes), 2)])
        consensus = self._consensus(profiles, i)[:, informative]
        own = ((profiles[i][:, informative] - consensus) ** 2).sum(0)
        best, wins = tuple(range(n_classes)), -1
        for order in orders:
            if list(order) == list(range(n_classes)):
                continue
            count = int((((profiles[i][list(order)][:, informative] - consensus) ** 2).sum(0) < own).sum())
            if count > wins:
                best, wins = order, count
        return best, max(wins, 0), int(informative.size), len(orders) - 1


def _swap(n: int, a: int, b: int) -> tuple[int, ...]:
    order = list(range(n))
    order[a], order[b] = b, a
    return tuple(order)


def _class_dependence(missing: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pearson χ² of missing × class within each site and feature, and its degrees of freedom
    (classes present - 1); NaN where nothing or everything is missing."""
    present = rows > 0
    total_rows = rows.sum(1)
    total_missing = missing.sum(1)
    rate = total_missing / np.maximum(total_rows, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected_missing = rows * rate[:, None]
        expected_observed = rows * (1 - rate[:, None])
        terms = np.where(present, (missing - expected_missing) ** 2 / expected_missing
                         + ((rows - missing) - expected_observed) ** 2 / expected_observed, 0.0)
    df = present.sum(1) - 1.0
    defined = (rate > 0) & (rate < 1) & (df > 0)
    return np.where(defined, terms.sum(1), np.nan), np.where(df > 0, df, np.nan)
