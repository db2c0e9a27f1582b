"""The check-up's data lens: every site's profile (`profile.Profile`, original units) against the
other sites', check by check. Each check is declared once in `checks.CHECKS` (kind, title, family,
statistic, null, what makes it material and its limits, the statistics it needs, what one cell is)
and computed here by the `Checks` method its declaration names; `check_profile` runs them in the
registry's order. The declarations are the specification (the README's check table is made from
them); what follows is how the statistics are built.

Scales. A continuous feature's yardstick is its within-site SD: the median over sites of each
site's robust SD (the mean of the normal-scaled widths of its central 50, 60, 70 and 80 %: as
robust as the IQR to 10 % wild values on either side, about twice as efficient). Positions are
medians in that yardstick, spreads are logs of robust SDs, shares are counts.

Three nulls serve every check (`calibration`): the leave-one-out predictive t over sites with
variances moderated across features (location, spread, shape, distribution, correlation, relation
to the label, label strength, class balance); the over-dispersed binomial of a count against the
other sites' pooled rate, the dispersion (how much more sites differ than binomial sampling makes
them) estimated from every site and item at once as the median squared Pearson residual over that
of χ²₁ (missingness, constant columns, point masses, implausible values, duplicated rows); exact
binomials where a count meets a rate no site should have (missing codes, unknown categories,
renamed labels).

Explanations. Where the location or spread of a feature differs materially with p < 0.01, a
conversion of the catalogue (`units.match_conversion`) is tried on the site's quantiles against the
others' mean quantiles; failing that, a pair of columns whose values fit the others' of each other
(swapped); failing that, a clean factor. Where no site-level conversion names a column, pairs of
sites whose medians and spreads differ by one catalogue factor are named without a culprit
(`unit_pair`: the only unit check with two sites).

Cells. A categorical column's one-hot parts are one cell of the checks that look at every feature
(missingness, its relation to the label, a constant column): one finding per source column. A cell
whose statistics are NaN (a site withheld them, `Profile.withheld`; no values; too few rows) or
whose statistic cannot be formed (a column without spread has no log SD) is *not testable* with
its reason; with fewer sites than a check needs, every site's cell of it is.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from statistics import NormalDist
from typing import Any

import numpy as np
from scipy import stats

from fedcore.interpret import checks
from fedcore.interpret.calibration import (OUTLIER_P, fisher_z, leave_one_out, leave_one_out_predicted, one_sided,
                                          smallest_reported)
from fedcore.glossary import plain
from fedcore.interpret.checks import BY_KIND, Check, limit
from fedcore.interpret.disclosure import ROUNDING, Policy, block_probabilities, block_starts, share_noise_scale
from fedcore.interpret.findings import FDR, Finding, pool
from fedcore.interpret.profile import (FEATURE, PROBABILITIES, RESOLUTION_STEPS, SENTINELS, STATISTICS, ZERO, Profile,
                                      on_steps, summed_on_steps)
from fedcore.interpret.release_noise import BlockNoise, block_noise, class_noise, noisy_sites, quantile_variance
from fedcore.interpret.sampling import (Moments, common_quantiles, fenced_kurtosis, median_along_first,
                                        rank_correlation_moments, sampling_moments)
from fedcore.interpret.unit_conversions import Match, column_factors, discrepancy, fits_between, match_conversion

SPEARMAN_Z_VARIANCE = 1.06  # n - 3 times the variance of Fisher's z of a Spearman correlation (Fieller et al. 1957)
LENS = checks.DATA
LOWER, MEDIAN, UPPER = (int(np.flatnonzero(np.isclose(PROBABILITIES, p))[0]) for p in (0.25, 0.5, 0.75))
Q05, Q95, Q99 = (int(np.flatnonzero(np.isclose(PROBABILITIES, p))[0]) for p in (0.05, 0.95, 0.99))
CENTRAL = [(int(np.flatnonzero(np.isclose(PROBABILITIES, p))[0]), int(np.flatnonzero(np.isclose(PROBABILITIES, 1 - p))[0]),
            2 * NormalDist().inv_cdf(1 - p)) for p in (0.10, 0.15, 0.20, 0.25)]
CHI2_1_MEDIAN = float(stats.chi2.median(1))
MAX_PERMUTED_CLASSES = 6  # 720 orders; beyond, only swaps of two classes are tried
IQR_TO_SD = 1.349  # the IQR of a normal distribution in SDs
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)  # SD of a sample median over that of the mean (normal)
MAX_SUSPECTS = 4  # sites whose renaming is tried as the explanation of the others' (`_likely_relabelled`)
# the cached statistics built from the class profiles (recomputed when a site's classes are renamed)
LABEL_CACHES = ("class_profiles", "consensus", "relation", "relation_variance", "_relation_weights", "relation_noise",
                "_class_noise", "_compared", "_labels", "permuted_evidence", "labels_suspect")
NO_PATTERN = ("fewer than 3 features tell its classes apart in the other sites' pattern (the others' class "
              "patterns cancel, or their features do not relate to the label)")
# what a difference that is a site's class mix is, and is not (the class mix's and a point mass's words)
MIX_NOT_RECORDING = "a different mix of patients or labels, not a recording problem"
COULD_NOT = "the other sites' statistics needed to compare it are missing or withheld"
# the weakest relation to the labels `labels_weak` tests, as a share of the others' (its log bounded
# below: a site whose features no longer relate to its labels, or the other way round, is as weak
# as a twentieth of the others, so that one such site does not take the whole scale)
WEAKEST = 0.05


def robust_sd(quantiles: np.ndarray, sd: np.ndarray, some_widths: bool = False) -> np.ndarray:
    """[sites, features] robust SD from quantiles [sites, PROBABILITIES, features]: the mean of the
    normal-scaled widths of the central 50-80 % (CENTRAL; `some_widths`: of those that are
    finite); the plain SD where those are all 0, or not released (a disclosure policy's
    resolution gives a small group its median only); NaN where neither is (withheld, or no
    values)."""
    widths = [(quantiles[:, high] - quantiles[:, low]) / width for low, high, width in CENTRAL]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        central_sd = np.nanmean(widths, axis=0) if some_widths else np.mean(widths, axis=0)
    return np.where(central_sd > 0, central_sd, sd)


def tied_middle(quantiles: np.ndarray) -> np.ndarray:
    """[sites, features]: where a site's central widths (those `robust_sd` reads) are released and
    one of them is 0 — half or more of its values at one value (a block of an image blank in most
    rows, a marker mostly 0). Its robust SD is then a width across the edge of that mass, or the
    plain SD of the few values off it: either jumps with a handful of rows (an MNIST block blank in
    88 % of one site's rows and 91 % of another's: 0.04 against 7 grey levels), so a spread read off
    it is no measure to compare sites by. The share at the value is (`point_mass`, `constant`)."""
    widths = np.stack([quantiles[:, high] - quantiles[:, low] for low, high, _ in CENTRAL])
    with np.errstate(invalid="ignore"):
        return (np.isfinite(widths) & (widths <= 0)).any(axis=0)


CODE_BLEND = 0.05  # the least share of values next to a missing code that its released quantiles may blend
ONE_VALUE = 1.5  # a site's shares at its minimum and at its maximum sum to 2 where they are one value (≤ 1 else; rounding aside)
MAX_CODE_PASSES = 5  # judgements of the missing codes against references without the last one's (`Checks._codes`)


def without_codes(quantiles: np.ndarray, below: float, above: float, blend: float) -> np.ndarray:
    """[PROBABILITIES] a site's quantiles of its values other than missing codes that hold a share
    `below` of them under all of them and `above` over all of them, read from its released
    quantiles: Q'(p) = Q(below + p·(1 − below − above)), linear between released ones. NaN where
    that falls outside the released quantiles, or within `blend` of a code's share (a quantile
    released as a block's mean mixes the code with values there)."""
    kept = 1.0 - below - above
    finite = np.isfinite(quantiles)
    if kept <= 0 or finite.sum() < 2:
        return np.full(len(PROBABILITIES), np.nan)
    source = below + PROBABILITIES * kept
    out = np.interp(source, PROBABILITIES[finite], quantiles[finite], left=np.nan, right=np.nan)
    near = ((below > 0) & (source < below + blend)) | ((above > 0) & (source > 1.0 - above - blend))
    return np.where(near, np.nan, out)


def unit_readable(quantiles: np.ndarray | None, reference: np.ndarray, sd: float) -> bool:
    """Whether a unit may be read from quantiles against a reference's: both have `unit`'s
    'distinct' number of distinct values, and a spread (sd > 0). A discrete feature's step-shaped
    quantiles (a 0/1/2 code, a mostly-zero count) fit a factor by accident: ÷ 1000 for a code
    whose others' median is 0. The check-up's unit check and the mapping step's read this."""
    distinct = limit("unit", "distinct")
    if quantiles is None:
        return False
    released, reference = quantiles[np.isfinite(quantiles)], reference[np.isfinite(reference)]  # a policy's resolution
    return (bool(sd > 0) and len(np.unique(released)) >= distinct
            and len(np.unique(np.round(reference, 12))) >= distinct)


def check_profile(profile: Profile) -> list[Finding]:
    """Every data check's findings, in the registry's order (not yet decided: `findings.decide`
    sets q-values), with a *not testable* cell wherever a check could not be computed."""
    lens = Checks(profile)
    return [finding for check in checks.of_lens(LENS) for finding in lens.run(check)]


def location_reach(profile: Profile, findings: Sequence[Finding]) -> list[Reach]:
    """What each site's 'nothing found' covers for its columns' medians: per tested location cell
    of the decided `findings` (the check-up's, q-values set), how far from the other sites its
    median would have to sit to be reported (`Checks.location_reach`)."""
    return Checks(profile).location_reach(findings)


REACH_GRID = np.round(np.arange(0.05, 20.0001, 0.05), 2)  # within-site SDs, searched for the smallest reported


@dataclass(frozen=True)
class Reach:
    """How far a site's median of a column would have to sit from the other sites' for the
    location check to report it, the rest of the federation as it is."""

    site: str
    feature: str
    distance: float  # within-site SDs from the others' mean; inf: not within REACH_GRID (20 SDs)
    sd: float  # one within-site SD in the column's units (the location check's yardstick)
    now: float  # where the site's median sits now, within-site SDs from the others' (signed)
    found: bool  # the location cell is significant now (reported, or explained by a more specific finding)

    @property
    def distance_text(self) -> str:
        return reach_text(self.distance)

    def to_dict(self) -> dict[str, Any]:
        """For JSON: a distance beyond the searched grid is null, with `beyond` its end."""
        finite = math.isfinite(self.distance)
        return {"site": self.site, "feature": self.feature, "distance": self.distance if finite else None,
                "beyond": None if finite else float(REACH_GRID[-1]), "sd": self.sd, "now": self.now,
                "found": self.found}


def reporting_threshold(findings: Sequence[Finding], kind: str) -> dict[tuple[str, str | None], float]:
    """(site, feature) -> the p at or below which each tested cell of `kind` in the decided
    `findings` would be reported beside the other cells of its pool (`findings.pool`: its family at
    its site): with R of the pool's N tested cells rejected, Benjamini–Hochberg's line for one more
    rejection, FDR × (R + 1) / N (the cell's own rejection, if it is one, not counted twice)."""
    tested: Counter[tuple[str, str]] = Counter()
    rejected: Counter[tuple[str, str]] = Counter()
    for f in findings:
        if f.family == checks.family(kind):
            tested[pool(f)] += f.tested
            rejected[pool(f)] += f.q < FDR
    return {(f.site, f.feature): FDR * (rejected[pool(f)] - (f.q < FDR) + 1) / max(tested[pool(f)], 1)
            for f in findings if f.kind == kind and f.tested}


def reach_text(distance: float) -> str:
    """A distance of `Reach` as people read it: two decimals, or 'beyond' the searched grid's end."""
    return f"{distance:.2f}" if math.isfinite(distance) else f"beyond {REACH_GRID[-1]:g}"


@dataclass(frozen=True)
class SiteReach:
    """Over one site's continuous columns: how far a column's median would have to sit to be
    reported, typically (the median) and at its nearest and farthest column."""

    site: str
    columns: int
    median: float
    nearest: Reach
    farthest: Reach

    def to_text(self) -> str:
        return (f"{self.site}: {reach_text(self.median)} over {self.columns} columns (nearest "
                f"{self.nearest.feature}: {self.nearest.distance_text}; farthest {self.farthest.feature}: "
                f"{self.farthest.distance_text})")


def reach_by_site(found: Sequence[Reach]) -> list[SiteReach]:
    """`location_reach` summarised per site, in the order the sites first appear."""
    out = []
    for site in dict.fromkeys(r.site for r in found):
        mine = sorted((r for r in found if r.site == site), key=lambda r: r.distance)
        out.append(SiteReach(site, len(mine), float(np.median([r.distance for r in mine])), mine[0], mine[-1]))
    return out


@dataclass(frozen=True)
class Item:
    """One cell's column of a check: a feature, or a categorical column's one-hot features."""

    name: str | None  # None: the site as a whole
    members: tuple[int, ...]


def others_mean(values: np.ndarray) -> np.ndarray:
    """Along axis 0 (sites): the mean of the other sites' finite values (NaN where none)."""
    finite = np.isfinite(values)
    filled = np.where(finite, values, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (filled.sum(0, keepdims=True) - filled) / (finite.sum(0, keepdims=True) - finite)
    return np.where(np.isfinite(out), out, np.nan)


def others_median(values: np.ndarray) -> np.ndarray:
    """Along axis 0 (sites): the median of the other sites' finite values (NaN where none), from
    one sort: a site's own value is taken out of the order statistics it would have shifted."""
    n = values.shape[0]
    ordered = np.sort(values, axis=0)  # NaN last
    count = np.isfinite(values).sum(0, keepdims=True)  # finite values per cell
    rank = np.argsort(np.argsort(values, axis=0, kind="stable"), axis=0, kind="stable")  # each site's place
    own = np.isfinite(values)
    k = count - own  # the other sites' finite values
    low, high = (k - 1) // 2, k // 2  # median positions among the others' sorted values
    outs = []
    for position in (low, high):
        shifted = position + (own & (position >= rank))  # past the site's own place: one further on
        outs.append(np.take_along_axis(ordered, np.clip(shifted, 0, n - 1), axis=0))
    return np.where(k > 0, (outs[0] + outs[1]) / 2, np.nan)


def share_excess(count: np.ndarray, total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[sites, items] one-sided p-values of a share above the other sites' spread of it, and their
    mean share: the leave-one-out t on the logit of each share ((count + 0.5) / (total - count +
    0.5): defined at 0 and at every row), moderated across items, the site's own binomial variance
    of its logit added to the prediction's. Where sites differ in a share for reasons of their own
    (a sensor's shares at its floor, HAR's subjects), the others' spread says how much they do."""
    count, total = np.asarray(count, dtype=np.float64), np.asarray(total, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        logit = np.where(total > 0, np.log((count + 0.5) / (total - count + 0.5)), np.nan)
        share = np.where(total > 0, count / total, np.nan)
        sampling = 1 / (count + 0.5) + 1 / (total - count + 0.5)  # the logit's binomial variance at the site
    _, t, p2 = leave_one_out(logit, own_variance=np.where(np.isfinite(sampling), sampling, 0.0))
    return one_sided(t, p2, +1), others_mean(share)


def over_dispersed_excess(count: np.ndarray, total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[sites, items] one-sided p-values of counts above the other sites' pooled rate, and that rate.
    Binomial with over-dispersion: the dispersion is the median squared Pearson residual of every
    site and item over that of χ²₁ (at least 1), so sites that differ more than sampling makes them
    widen the yardstick for all, and one broken site does not."""
    count, total = np.asarray(count, dtype=np.float64), np.asarray(total, dtype=np.float64)
    finite = np.isfinite(count) & np.isfinite(total)
    c, n = np.where(finite, count, 0.0), np.where(finite, total, 0.0)
    rate = (c.sum(0, keepdims=True) - c + 0.5) / (n.sum(0, keepdims=True) - n + 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        residual = np.where(finite & (n > 0), (c - n * rate) / np.sqrt(n * rate * (1 - rate)), np.nan)
    squares = residual[np.isfinite(residual)] ** 2
    dispersion = max(1.0, float(np.median(squares)) / CHI2_1_MEDIAN) if squares.size else 1.0
    return stats.norm.sf(residual / math.sqrt(dispersion)), rate


def random_effects_excess(count: np.ndarray, total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[sites, items] one-sided p-values of a share above the other sites' pooled rate, and that
    rate. Random effects (DerSimonian–Laird's moments, left one out): the other sites' shares vary
    by their binomial sampling plus a between-site variance τ² (what they show beyond sampling, 0
    where sampling explains it); the site's share is compared with their rate on its own sampling
    variance plus τ² and the rate's, t with the others' count − 1 degrees of freedom. Unlike a
    dispersion factor, τ² does not grow with a site's rows: a large site that differs as much as
    the others do is not singled out, and none of the others' zeros make a site's excess look
    ordinary.

    A count is whole and a small site's is a few: of a rate of 0.1 %, one tie among a site's 9
    values is a share of 11 %, 10 binomial SEs above it (t: p < 10⁻⁹), while such a tie comes by
    chance once in 110. The p-value is the larger of the t's and the exact tail of the count,
    beta-binomial with the same mean and variance (binomial where the others show no τ²)."""
    count, total = np.asarray(count, dtype=np.float64), np.asarray(total, dtype=np.float64)
    finite = np.isfinite(count) & np.isfinite(total) & (total > 0)
    c, n = np.where(finite, count, 0.0), np.where(finite, total, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(finite, c / np.maximum(n, 1), 0.0)
        m = finite.sum(0, keepdims=True) - finite  # the other sites, per cell
        rate = (c.sum(0, keepdims=True) - c + 0.5) / (n.sum(0, keepdims=True) - n + 1.0)
        mean = (share.sum(0, keepdims=True) - share) / m
        squares = ((share**2).sum(0, keepdims=True) - share**2 - m * mean**2) / (m - 1)
        sampling = rate * (1 - rate) * ((np.where(finite, 1 / np.maximum(n, 1), 0.0)).sum(0, keepdims=True)
                                        - np.where(finite, 1 / np.maximum(n, 1), 0.0)) / m
        tau2 = np.maximum(squares - sampling, 0.0)
        variance = rate * (1 - rate) / np.maximum(n, 1) + tau2 * (1 + 1 / m) \
            + rate * (1 - rate) / (n.sum(0, keepdims=True) - n + 1.0)
        t = (share - rate) / np.sqrt(variance)
        p = np.fmax(stats.t.sf(t, np.maximum(m - 1, 1)), _count_tail(c, n, rate, variance))
    return np.where(finite & (m >= 2), p, np.nan), np.where(m >= 1, rate, np.nan)


def _count_tail(count: np.ndarray, total: np.ndarray, rate: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """P(a count of `total` at least `count`) for a share of mean `rate` and variance `variance`
    (≥ the binomial's): beta-binomial, its intra-class correlation the variance beyond the
    binomial's as a share of rate·(1 − rate). NaN where undefined."""
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.clip(rate, 1e-12, 1 - 1e-12)
        spread = rate * (1 - rate)
        rho = np.clip((variance - spread / np.maximum(total, 1)) / spread, 1e-9, 1 - 1e-9)
        size = 1 / rho - 1
        return stats.betabinom.sf(np.rint(count) - 1, np.rint(total).astype(np.int64), rate * size, (1 - rate) * size)


@dataclass(frozen=True)
class MissingCodes:
    """`Checks._codes`: the missing codes judged against references without them."""
    reference: np.ndarray  # [sites, probabilities, features] the quantiles the other sites are compared with
    set_aside: np.ndarray  # [sites, features] a measured column whose judged codes are out of its reference
    judged: np.ndarray  # [sites, codes, features] the codes judged material
    rule: dict[str, np.ndarray]  # `Checks._code_rule` against `reference`, its material the judged codes


# Under differential privacy a share is tested only where its noise's SD is at most this many of
# its binomial standard errors (the tests count the binomial variance alone: it then grows by at most
# a quarter); set with the rule, not fitted.
NOISE_AT_MOST = ROUNDING
NOISY = ("not tested: under differential privacy (ε = {epsilon:g} per release) the noise on this share is "
         "larger than half its sampling error, so a difference would be the noise's")


def beyond_noise(profile: Profile) -> Profile:
    """`profile` with every share a site released under differential privacy set aside (NaN, its
    reason in `withheld`) where the noise added to it is larger than the tests allow for
    (NOISE_AT_MOST): shares near 0 or 1, and those of any but very large groups. Post-processing of
    what was released (its size and the policy, both public), so it reveals nothing more. The
    profile itself where no site added noise."""
    noisy = noisy_sites(profile)
    if not noisy:
        return profile
    shares = [name for name, declared in STATISTICS.items() if declared.kind == "share"]
    arrays = {**profile.arrays, **{name: np.array(profile.arrays[name], dtype=np.float64) for name in shares}}
    withheld = {site: dict(r) for site, r in profile.withheld.items()}
    for i, (epsilon_of_share, policy) in noisy.items():
        n = np.maximum(profile.observed[i].astype(np.float64), 1)  # every share's group is a feature's values
        noise_sd = math.sqrt(2) * share_noise_scale(n, epsilon_of_share)
        reason, reasons = NOISY.format(epsilon=policy.dp_epsilon), withheld.setdefault(profile.sites[i], {})
        for name in shares:
            values = arrays[name][i]
            share = np.clip(values, 1 / n, 1 - 1 / n)  # a share of 0 or 1 is tested as one of a single row
            with np.errstate(invalid="ignore"):
                drop = np.isfinite(values) & (noise_sd > NOISE_AT_MOST * np.sqrt(share * (1 - share) / n))
            if STATISTICS[name].axes != FEATURE:  # a histogram (steps × features) is read whole per feature
                drop = np.broadcast_to(drop.any(tuple(range(drop.ndim - 1)), keepdims=True), drop.shape)
            if drop.any():
                values[drop] = np.nan
                reasons[name] = f"{reasons[name]}; or {reason}" if name in reasons else reason
    return replace(profile, arrays=arrays, withheld={site: r for site, r in withheld.items() if r})


class Checks:
    """The data lens over one profile: a method per check of the registry (`checks.CHECKS`,
    `function`), each yielding its findings; `run` adds the not-testable cells. Shares too noisy to
    test are set aside first (`beyond_noise`)."""

    def __init__(self, profile: Profile) -> None:
        profile = beyond_noise(profile)
        self.profile = profile
        self.sites = profile.sites
        self.index = {site: i for i, site in enumerate(profile.sites)}
        self.n = len(profile.sites)
        self.continuous = profile.continuous
        self.robust_sd = robust_sd(profile.quantiles, profile.sd)  # [sites, features]
        self.tied_middle = tied_middle(profile.quantiles)  # [sites, features]
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            positive = np.where(self.robust_sd > 0, self.robust_sd, np.nan)
            self.yardstick = np.nanmedian(positive, axis=0) if self.n else np.array([])  # [features]

    # -- running a check ---------------------------------------------------------------------------
    def run(self, check: Check) -> list[Finding]:
        """The check's findings; every cell it could not test is one with its reason (p NaN)."""
        if len(self.profile.classes) < check.min_classes:
            return []
        if self.n < check.min_sites:
            reason = f"needs at least {check.min_sites} sites to compare, this federation has {self.n}"
            return [self.not_testable(check, site, None, reason) for site in self.sites]
        unavailable = self._unavailable(check)
        found = []
        for finding in getattr(self, check.function)():
            withheld = unavailable.get((finding.site, finding.feature))
            if withheld or not finding.tested:  # a statistic it needs is missing, or NaN: say why
                finding = self.not_testable(check, finding.site, finding.feature,
                                            withheld or finding.untestable or COULD_NOT)
            found.append(finding)
        if unavailable:
            covered = {(f.site, f.feature) for f in found}
            found += [self.not_testable(check, site, item, reason) for (site, item), reason in unavailable.items()
                      if (site, item) not in covered]
        return found

    def not_testable(self, check: Check, site: str, item: str | None, reason: str) -> Finding:
        what = f"{site}'s {item}" if item is not None else site
        return Finding(site, LENS, check.kind, item, f"{what}: '{check.title}' could not be tested ({reason})",
                       float("nan"), material=False, untestable=reason)

    def items(self, scope: str) -> list[Item]:
        """The cells' columns of a scope (`checks.SCOPES`)."""
        return self._items[scope]

    @cached_property
    def _items(self) -> dict[str, list[Item]]:
        p = self.profile
        by_column: dict[str, list[int]] = {}
        for j, (kind, column) in enumerate(zip(p.kinds, p.columns)):
            if kind == "categorical":
                by_column.setdefault(column, []).append(j)
        features: list[Item] = []
        for j, (kind, column) in enumerate(zip(p.kinds, p.columns)):
            if kind != "categorical":
                features.append(Item(p.features[j], (j,)))
            elif by_column[column][0] == j:
                features.append(Item(column, tuple(by_column[column])))
        return {"continuous": [Item(p.features[j], (j,)) for j in self.continuous], "feature": features,
                "column": [Item(column, tuple(members)) for column, members in by_column.items()],
                "discrete": [item for item in features if p.kinds[item.members[0]] != "continuous"],
                "site": [Item(None, ())]}

    def _available(self, name: str, quantiles: Sequence[float] = (), some_classes: bool = False) -> np.ndarray:
        """[sites, features]: where statistic `name` is there (finite) at each site: every entry of
        a feature's (each class's, each code's; of a statistic with quantiles, those at the
        probabilities `quantiles`); a site-wide or per-class statistic at every feature; a feature
        with correlations where any is. `some_classes`: of a per-class statistic, at least two
        classes' entries (`Check.classes`)."""
        key = (name, tuple(quantiles), some_classes)
        memo = self.__dict__.setdefault("_availability", {})
        if key not in memo:
            axes = STATISTICS[name].axes
            finite = np.isfinite(self.profile.arrays[name].astype(np.float64))  # [sites, *axes]
            if "probability" in axes:
                finite = np.take(finite, [_probability(p) for p in quantiles], axis=1 + axes.index("probability"))
            if some_classes and "class" in axes:  # classes with every entry there: at least two
                finite = finite.sum(axis=1 + axes.index("class")) >= 2
                axes = tuple(axis for axis in axes if axis != "class")
            n_features = len(self.profile.features)
            if "feature" in axes:
                mask = np.moveaxis(finite, 1 + axes.index("feature"), -1).reshape(self.n, -1, n_features).all(1)
            elif "continuous" in axes:
                mask = np.ones((self.n, n_features), dtype=bool)
                mask[:, self.continuous] = finite.any(2) if finite.size else True
            else:
                mask = np.repeat(finite.reshape(self.n, -1).all(1, keepdims=True), n_features, axis=1)
            memo[key] = mask
        return memo[key]

    def _unavailable(self, check: Check) -> dict[tuple[str, str | None], str]:
        """(site, cell's column) -> why a statistic the check needs is missing there."""
        if not check.needs:
            return {}
        some = check.classes == "some"
        available = np.logical_and.reduce([self._available(name, check.quantiles, some) for name in check.needs])
        out = {}
        for item in self.items(check.scope):
            if item.members:
                missing = ~available[:, list(item.members)].all(1)
            else:  # the site as a whole: over the features it has them for, untestable without any
                missing = ~available.any(1)
            members = list(item.members) or list(range(len(self.profile.features)))
            for i in np.flatnonzero(missing):
                out[(self.sites[i], item.name)] = self._reason(int(i), members, check)
        return out

    def _reason(self, i: int, members: Sequence[int], check: Check) -> str:
        site = self.sites[i]
        for name in check.needs:
            if self._available(name, check.quantiles, check.classes == "some")[i, members].all():
                continue
            axes = STATISTICS[name].axes
            withheld = self.profile.withheld.get(site, {}).get(name)
            if check.classes == "some" and "class" in axes:
                finite = np.isfinite(self.profile.arrays[name][i].astype(np.float64))
                if finite.reshape(finite.shape[0], -1).all(1).any():  # one class's there, no other's
                    return "only one class's statistics at this site" + (f" (the others': {withheld})"
                                                                         if withheld else "")
            if "probability" in axes and self._available(name, _RELEASED)[i, members].all():
                return _resolution(self.profile.arrays[name][i], axes, members, check.quantiles)
            if withheld:
                return withheld
            if "feature" in axes and not (self.profile.observed[i, members] > 0).any():
                return "no values of it at this site"
            if "class" in axes and "feature" in axes:
                empty = [c for k, c in enumerate(self.profile.classes)
                         if not (self.profile.observed_by_class[i, k, members] > 1).all()]
                if empty:
                    return f"too few values of it in class {', '.join(map(repr, empty))} at this site"
            return "too few values at this site to compute it"
        return COULD_NOT

    # -- words ----------------------------------------------------------------------------------
    def unit(self, j: int) -> str:
        return self.profile.units.get(self.profile.features[j], "")

    def value(self, j: int, x: float) -> str:
        unit = self.unit(j)
        return f"{x:.4g}{' ' + unit if unit else ''}"

    # -- the values of continuous features -----------------------------------------------------
    @cached_property
    def others_quantiles(self) -> np.ndarray:
        """[sites, probabilities, features]: the other sites' mean quantiles."""
        return others_mean(self.reference_quantiles)

    @cached_property
    def _values(self) -> dict[str, np.ndarray]:
        """Location, spread and shape of every continuous feature, each site against the others."""
        cols = self.continuous
        q = self.profile.quantiles[:, :, cols]
        scale = self.yardstick[cols]
        median = q[:, MEDIAN]
        tied = self.tied_middle[:, cols]  # no spread to compare, in no other site's reference either
        with np.errstate(invalid="ignore", divide="ignore"):
            log_sd = np.log(np.where((self.robust_sd[:, cols] > 0) & ~tied, self.robust_sd[:, cols], np.nan))
        skew, tails = _shape(q)
        # what the other sites are compared with: their values without material missing codes
        rq, read = self.reference_quantiles[:, :, cols], self.codes_read_as_missing[:, cols]
        with np.errstate(invalid="ignore", divide="ignore"):
            sd = robust_sd(rq, np.full(read.shape, np.nan), some_widths=True)  # the plain SD holds the codes
            ref_log_sd = np.where(read & ~tied_middle(rq), np.log(np.where(sd > 0, sd, np.nan)), log_sd)
        ref_skew, ref_tails = _shape(rq)
        left_out = self.not_a_reference[:, cols]
        reference = self._others_mean
        location = (median / scale, rq[:, MEDIAN] / scale)  # tested as; counted as in the others' references
        out = {"scale": scale, "median": median, "log_sd": log_sd, "skew": skew, "tails": tails,
               "others_median": reference(rq[:, MEDIAN]), "others_sd": np.exp(reference(ref_log_sd)),
               "others_skew": reference(ref_skew), "location_compared": (location[0], left_out, location[1])}
        # each statistic at each site: what it reads at the site's count of values where nothing
        # differs, against what it reads at a large site (a site of 10 to 19 rows releases one block,
        # its mean as its median), and its own variance: by sampling at that count, both drawn
        # (`sampling`), and by the noise its release adds (`release_noise`; 0 without). The others'
        # spread holds their own variances already, so a test adds the site's beyond their mean
        # (`excess_variance`) and takes their spread as no less than that mean
        sd = self.profile.sd[:, cols]
        of_quantiles = {"location": lambda q, rows: q[:, MEDIAN] / scale,
                        "spread": lambda q, rows: np.log(np.where(tied[rows], np.nan, robust_sd(q, sd[rows]))),
                        "skew": lambda q, rows: _shape(q)[0], "tail": lambda q, rows: _shape(q)[1]}
        # (each with the variance of the side of the others' mean it lies on: a small site's log SD
        # of a clustered feature varies more below than above)
        sampled = sampling_moments(self.profile, cols, scale, rq, QUANTILE_STATISTICS)
        for name, values, references in (("location", *location),
                                          ("spread", log_sd, ref_log_sd), ("skew", skew, ref_skew),
                                          ("tail", tails, ref_tails)):
            drawn = sampled[name]
            offset = out[f"{name}_offset"] = drawn.offset
            with np.errstate(invalid="ignore", divide="ignore"):
                noise = quantile_variance(self.profile, of_quantiles[name], cols, self._block_noise)
                out[f"{name}_own"], out[f"{name}_least"] = self.drawn_variances(
                    values - offset, self._others_mean(references - offset), drawn, noise)
            out[f"{name}_dev"], out[f"{name}_t"], out[f"{name}_p"] = leave_one_out(
                values - offset, suspect=left_out, reference=references - offset, own_variance=out[f"{name}_own"],
                least_variance=out[f"{name}_least"])
        return out

    @cached_property
    def _block_noise(self) -> BlockNoise | None:
        """The noise on the continuous features' block means (`release_noise.block_noise`; None
        without), read once for every statistic of their quantiles."""
        return block_noise(self.profile, self.continuous)

    @cached_property
    def _class_noise(self) -> tuple[np.ndarray, np.ndarray]:
        """`release_noise.class_noise`: what the noise adds to each class's mean and variance."""
        return class_noise(self.profile)

    @classmethod
    def drawn_variances(cls, values: np.ndarray, others: np.ndarray, drawn: Moments, noise: np.ndarray | float = 0.0
                        ) -> tuple[np.ndarray, np.ndarray]:
        """What a leave-one-out test of a drawn statistic (`sampling`) adds to the other sites'
        spread, and the least it takes their spread as: the site's own variance beyond theirs, of
        the side of the others' mean (`others`) its value lies on (a skewed statistic's two sides
        differ), with the release's `noise`; and the mean of theirs."""
        side = np.where(values < others, drawn.below, drawn.above)
        return (cls.excess_variance(side + noise, drawn.variance + noise),
                np.nan_to_num(others_mean(drawn.variance + noise)))

    @staticmethod
    def excess_variance(variance: np.ndarray, others: np.ndarray | None = None) -> np.ndarray:
        """[sites, ...] how much more own variance (by sampling, by noise) a site's statistic has than
        the other sites' on average (0 where less): what a leave-one-out test adds to its variance.
        The spread of the other sites' statistics holds their own variance already, so adding a
        site's whole own variance would count it twice where every site has the same; a small site
        among large ones has more, which that spread does not hold. `others`: the variances the
        other sites' spread holds, where the site's is another (one side's of a skewed statistic)."""
        return np.nan_to_num(np.maximum(variance - others_mean(variance if others is None else others), 0.0))

    def _others_mean(self, values: np.ndarray) -> np.ndarray:
        """[sites, continuous]: the other sites' mean of a statistic of the continuous features,
        the cells `not_a_reference` left out."""
        return others_mean(np.where(self.not_a_reference[:, self.continuous], np.nan, values))

    def _evidence(self, i: int, c: int) -> dict[str, Any]:
        """What a drill-down of site i's continuous feature c shows (shared by its findings)."""
        memo = self.__dict__.setdefault("_evidence_memo", {})
        if (i, c) not in memo:
            v, j = self._values, self.continuous[c]
            memo[(i, c)] = {"median": float(v["median"][i, c]), "others_median": float(v["others_median"][i, c]),
                            "sd": float(self.robust_sd[i, j]), "others_sd": float(v["others_sd"][i, c]),
                            "quantiles": self.profile.quantiles[i, :, j].tolist(),
                            "others_quantiles": self.others_quantiles[i, :, j].tolist()}
        return memo[(i, c)]

    def location(self) -> Iterator[Finding]:
        v, (shifted, _) = self._values, self._material_differences
        for i, site in enumerate(self.sites):
            for c, j in enumerate(self.continuous):
                name, dev = self.profile.features[j], v["location_dev"][i, c]
                yield Finding(site, LENS, "location", name,
                              f"{site}'s {name}: median {self.value(j, v['median'][i, c])} against "
                              f"{self.value(j, v['others_median'][i, c])} at the other sites, "
                              f"{abs(dev):.2f} {plain('within-site SDs')} {'higher' if dev > 0 else 'lower'} "
                              f"({dev:+.2f} within-site SDs{self._at_its_size(i, c, 'location')})",
                              float(v["location_p"][i, c]), float(dev),
                              "within-site SDs", evidence=self._evidence(i, c), material=bool(shifted[i, c]))

    def location_reach(self, findings: Sequence[Finding]) -> list[Reach]:
        """Per tested location cell of the decided `findings`: the smallest distance of the site's
        median from the others' mean (within-site SDs) at which the cell would be reported — large
        enough to matter (the check's material shift), and its p at the threshold Benjamini–
        Hochberg sets beside its pool's other cells (R of them rejected, N tested: FDR × (R + 1)
        / N makes it one more), the way `calibration.smallest_reported` follows the move through
        the check's own null."""
        v, features = self._values, self.profile.features
        cells = {(f.site, f.feature): f for f in findings if f.kind == "location" and f.tested}
        threshold = reporting_threshold(findings, "location")
        needed = np.zeros(v["location_p"].shape)
        for (i, site), (c, j) in itertools.product(enumerate(self.sites), enumerate(self.continuous)):
            if (site, features[j]) in cells:
                needed[i, c] = threshold[(site, features[j])]
        values, suspect, reference = v["location_compared"]
        distance = smallest_reported(values, needed, REACH_GRID, suspect=suspect, reference=reference)
        floor = limit("location", "shift")
        return [Reach(site, features[j], max(floor, float(distance[i, c])), float(v["scale"][c]),
                      float(v["location_dev"][i, c]), cells[(site, features[j])].significant)
                for (i, site), (c, j) in itertools.product(enumerate(self.sites), enumerate(self.continuous))
                if (site, features[j]) in cells and not np.isnan(distance[i, c])]  # inf: beyond the grid

    def spread(self) -> Iterator[Finding]:
        v, (_, widened) = self._values, self._material_differences
        for i, site in enumerate(self.sites):
            for c, j in enumerate(self.continuous):
                name, dev = self.profile.features[j], v["spread_dev"][i, c]
                ratio = as_ratio(dev)
                yield Finding(site, LENS, "spread", name,
                              f"{site}'s {name} varies {ratio:.2g} times as much as at the other sites "
                              f"(SD {self.value(j, self.robust_sd[i, j])} against {self.value(j, v['others_sd'][i, c])}"
                              f"{self._at_its_size(i, c, 'spread')})",
                              float(v["spread_p"][i, c]), ratio, "SD ratio", evidence=self._evidence(i, c),
                              material=bool(widened[i, c]),
                              untestable=self._spread_untestable(i, j))

    def _at_its_size(self, i: int, c: int, name: str) -> str:
        """What a finding's message adds where site i's size alone moves its statistic `name` of
        continuous feature c (`sampling`'s offset, counted in the deviation): "" where it does not
        by a twentieth of an SD, or 5 % of the spread."""
        offset, count = self._values[f"{name}_offset"][i, c], self.profile.observed[i, self.continuous[c]]
        if not np.isfinite(count) or not np.isfinite(offset):  # a count the site withheld: no offset drawn
            return ""
        rows = int(count)
        if name == "location" and abs(offset) >= 0.05:
            return f"; where nothing differs a site of {rows} values reads {offset:+.2f} SDs from a large one's, counted"
        if name == "spread" and abs(offset) >= math.log(1.05):
            return (f"; where nothing differs a site of {rows} values reads {math.exp(offset):.2g} times a large "
                    f"one's spread, counted")
        return ""

    def _spread_untestable(self, i: int, j: int) -> str:
        """Why site i's spread of feature j cannot be compared ("" where it can)."""
        if self.robust_sd[i, j] == 0:
            return "its values do not vary at this site"
        if self.tied_middle[i, j]:
            return (f"half or more of its values sit at one value, so its spread jumps with a few rows; "
                    f"'{BY_KIND['point_mass'].title}' compares that share")
        return ""

    def shape(self) -> Iterator[Finding]:
        v, (skewed, tailed) = self._values, self._material_shapes
        for i, site in enumerate(self.sites):
            for c, j in enumerate(self.continuous):
                name, evidence = self.profile.features[j], self._evidence(i, c)
                flat = "" if np.isfinite(v["skew"][i, c]) else "its middle half is one value at this site"
                yield Finding(site, LENS, "shape", name,
                              f"{site}'s {name} is skewed differently from the other sites' (skew {v['skew'][i, c]:+.2f} "
                              f"against {v['others_skew'][i, c]:+.2f}: capped, logged or mixed values?)",
                              float(v["skew_p"][i, c]), float(v["skew_dev"][i, c]), "Bowley skew", evidence=evidence,
                              material=bool(skewed[i, c]), untestable=flat)
                dev = v["tail_dev"][i, c]
                ratio = as_ratio(dev)
                yield Finding(site, LENS, "shape", name,
                              f"{site}'s {name} has {'heavier' if ratio > 1 else 'lighter'} tails than the other "
                              f"sites' ({ratio:.2g} times their 5-95 % range for the same middle half: "
                              f"{'outliers or mixed units' if ratio > 1 else 'capped, binned or two groups'}?)",
                              float(v["tail_p"][i, c]), ratio, "tail ratio", evidence=evidence,
                              material=bool(tailed[i, c]), untestable=flat)

    # -- against related features ---------------------------------------------------------------
    @cached_property
    def related(self) -> list[list[int]]:
        """Per continuous feature (continuous indices): the features it is predicted from — those
        it correlates with most within the sites (the median over sites of each site's correlation,
        |r| ≥ 'related'), at most 'partners' and at most n − 5 (the regression over the other sites
        keeps 2 degrees of freedom)."""
        most, least = int(limit("location_related", "partners")), limit("location_related", "related")
        r = self.profile.correlation  # [sites, continuous, continuous]
        allowed = min(most, self.n - 5)  # the checks' min_sites (6) is where this reaches 1
        if r.shape[1] < 2 or allowed < 1:
            return [[] for _ in self.continuous]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            typical = np.abs(np.nan_to_num(np.nanmedian(r, axis=0)))
        np.fill_diagonal(typical, 0.0)
        order = np.argsort(-typical, axis=1, kind="stable")[:, :allowed]
        return [[int(k) for k in row if typical[c, k] >= least] for c, row in enumerate(order)]

    @cached_property
    def _predicted(self) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Location and spread (as `_values`) of every site against what the other sites' relation
        to the related features predicts: (deleted residual, t, p)."""
        v, left_out = self._values, self.not_a_reference[:, self.continuous]
        return {"location": leave_one_out_predicted(v["median"] / v["scale"] - v["location_offset"], self.related,
                                                    suspect=left_out, own_variance=v["location_own"]),
                "spread": leave_one_out_predicted(v["log_sd"] - v["spread_offset"], self.related, suspect=left_out,
                                                  own_variance=v["spread_own"])}

    @cached_property
    def related_names(self) -> list[str]:
        """Per continuous feature: its related features' names, as a finding says them."""
        return [", ".join(self.profile.features[self.continuous[k]] for k in row) for row in self.related]

    def location_related(self) -> Iterator[Finding]:
        """Per continuous feature with related features: the site's median against the other sites'
        regression of it on the related features' medians."""
        v, (residual, _, p) = self._values, self._predicted["location"]
        shift = limit("location_related", "shift")
        for i, site in enumerate(self.sites):
            for c, j in enumerate(self.continuous):
                if not self.related[c]:
                    continue  # nothing it goes with: the plain location check is its test
                name, dev = self.profile.features[j], residual[i, c]
                predicted = v["median"][i, c] - dev * v["scale"][c]
                yield Finding(site, LENS, "location_related", name,
                              f"{site}'s {name}: median {self.value(j, v['median'][i, c])} against "
                              f"{self.value(j, predicted)} that the other sites' relation to its related features "
                              f"({self.related_names[c]}) predicts for it, {abs(dev):.2f} {plain('within-site SDs')} "
                              f"{'higher' if dev > 0 else 'lower'} ({dev:+.2f} within-site SDs)",
                              float(p[i, c]), float(dev), "within-site SDs",
                              evidence={**self._evidence(i, c), "predicted_median": float(predicted),
                                        "related": self.related_names[c]},
                              material=bool(abs(dev) >= shift))

    def spread_related(self) -> Iterator[Finding]:
        """Per continuous feature with related features: the site's log SD against the other sites'
        regression of it on the related features' log SDs."""
        v, (residual, _, p) = self._values, self._predicted["spread"]
        ratio_limit = limit("spread_related", "ratio")
        for i, site in enumerate(self.sites):
            for c, j in enumerate(self.continuous):
                if not self.related[c]:
                    continue
                name, dev = self.profile.features[j], residual[i, c]
                ratio = as_ratio(dev)
                predicted = self.robust_sd[i, j] / ratio if ratio > 0 else float("nan" if np.isnan(ratio) else "inf")
                yield Finding(site, LENS, "spread_related", name,
                              f"{site}'s {name} varies {ratio:.2g} times as much as the other sites' relation to its "
                              f"related features ({self.related_names[c]}) predicts (SD "
                              f"{self.value(j, self.robust_sd[i, j])} against {self.value(j, predicted)} predicted)",
                              float(p[i, c]), ratio, "SD ratio",
                              evidence={**self._evidence(i, c), "predicted_sd": float(predicted),
                                        "related": self.related_names[c]},
                              material=bool(abs(dev) >= math.log(ratio_limit)),
                              untestable=self._spread_untestable(i, j))

    def distribution(self) -> Iterator[Finding]:
        """The omnibus: how far the site's quantiles lie from the others' (median over sites:
        another broken site does not move the reference), whatever the way."""
        cols, q = self.continuous, self.profile.quantiles
        reference = others_median(self.reference_quantiles[:, :, cols])
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            distance = np.nanmean(np.abs(q[:, :, cols] - reference), axis=1) / self.yardstick[cols]
            log_distance = np.log(np.where(distance > 0, distance, np.nan))
        left_out = self.not_a_reference[:, cols]

        def log_distance_of(quantiles: np.ndarray, rows: np.ndarray) -> np.ndarray:
            with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return np.log(np.nanmean(np.abs(quantiles - reference[rows]), axis=1) / self.yardstick[cols])

        noise = self.excess_variance(quantile_variance(self.profile, log_distance_of, cols, self._block_noise))
        dev, t, p2 = leave_one_out(log_distance, suspect=left_out, own_variance=noise)
        p = one_sided(t, p2, +1)
        typical = np.exp(self._others_mean(log_distance))
        at_least = limit("distribution", "distance")
        for i, site in enumerate(self.sites):
            for c, j in enumerate(cols):
                name = self.profile.features[j]
                yield Finding(site, LENS, "distribution", name,
                              f"{site}'s {name} is distributed differently from the other sites' (its quantiles lie "
                              f"{distance[i, c]:.2f} within-site SDs from theirs on average; the other sites lie "
                              f"{typical[i, c]:.2f} from each other)", float(p[i, c]), float(distance[i, c]),
                              "within-site SDs",
                              evidence=self._evidence(i, c), material=bool(distance[i, c] >= at_least))

    # -- the values within classes -------------------------------------------------------------
    @cached_property
    def _within_classes(self) -> dict[str, np.ndarray]:
        """[sites, continuous] each: every continuous feature at each site against what its class mix
        predicts from every site's classes: its mean less the class means' (the median over the
        sites of each class's mean) weighted by its own class counts, in within-class SDs (the median
        over the sites of each site's); and the log of its SD within classes against the classes'
        (the median over the sites of each class's variance, pooled with its own class counts).
        Sites of one population that differ in their class mix — label skew, a hospital with more
        patients ill — differ in their medians and spreads; in these they do not. Each is tested
        leave-one-out, its own sampling variance added (the spread's with its classes' tails:
        `pooled_log_sd_variance`); a column never measured at a site
        (`not_a_reference`) and a site whose labels look wrong are in no other site's reference."""
        p, cols = self.profile, list(self.continuous)
        means, sds = p.mean_by_class[:, :, cols].astype(np.float64), p.sd_by_class[:, :, cols].astype(np.float64)
        counts = p.observed_by_class[:, :, cols].astype(np.float64)
        suspect = self.not_a_reference[:, cols] | self.labels_suspect[:, None]
        released = np.isfinite(means) & np.isfinite(sds) & (counts > 1)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            reference = np.where(released & ~suspect[:, None, :], 1.0, np.nan)
            class_mean = np.nanmedian(reference * means, axis=0)  # [classes, continuous]
            class_variance = np.nanmedian(reference * sds**2, axis=0)
            weight = np.where(released & np.isfinite(class_mean + class_variance)[None], counts, 0.0)
            freedom = np.where(weight > 0, weight - 1, 0.0)  # each class's n - 1
            rows, degrees = weight.sum(1), freedom.sum(1)
            yardstick = np.nanmedian(np.where(suspect, np.nan, within_class_sd(p)[:, cols]), axis=0)
            mean = (weight * np.nan_to_num(means)).sum(1) / rows
            predicted = (weight * np.nan_to_num(class_mean)[None]).sum(1) / rows
            location = (mean - predicted) / yardstick
            # of a mean of class means: each class's variance / n, weighted by n
            location_variance = (weight * np.nan_to_num(sds) ** 2).sum(1) / rows**2 / yardstick**2
            pooled = pooled_variance(sds**2, freedom)
            predicted_variance = np.broadcast_to(class_variance, sds.shape)  # [sites, classes, continuous]
            predicted_pooled = pooled_variance(predicted_variance, freedom)
            log_ratio = 0.5 * np.log(pooled / predicted_pooled)
            # the pooled log SD's own variance, with each class's tails (a heavy-tailed class's SD of
            # 10 values often misses its tail: vehicle's rows dealt to its sensors, a 21-row sensor's
            # SDs within classes were 0.3 to 0.5 times the others' in 28 features at once, where
            # normal theory's variance was used): each class's kurtosis that of the class's common
            # distribution (the median over the sites of its released quantiles), as fenced
            class_quantiles = np.where(suspect[:, None, None, :], np.nan, p.quantiles_by_class[:, :, :, cols])
            kurtosis = np.stack([fenced_kurtosis(common_quantiles(class_quantiles[:, k]))
                                 for k in range(class_quantiles.shape[1])])  # [classes, continuous]
            spread_variance = pooled_log_sd_variance(freedom, predicted_variance, np.broadcast_to(kurtosis, sds.shape))
            testable = (rows > 0) & (degrees > 0) & np.isfinite(yardstick)[None]
            location = np.where(testable & np.isfinite(location), location, np.nan)
            # a column mostly at one value has no spread to compare (`tied_middle`), within its classes either
            log_ratio = np.where(testable & np.isfinite(log_ratio) & ~self.tied_middle[:, cols], log_ratio, np.nan)
            # the site's mix of every site's classes as a whole: its mean and SD (within and between
            # the classes), against the other sites' (the median of theirs)
            mix_sd = np.sqrt((weight * np.nan_to_num(class_variance + class_mean**2)[None]).sum(1) / rows - predicted**2)
            mix_shift = (predicted - others_median(predicted)) / self.yardstick[cols][None]
            mix_log_ratio = np.log(mix_sd / others_median(mix_sd))
            # what the noise of a release adds: to the weighted class means, and to the pooled variance's log
            mean_noise, variance_noise = (a[:, :, cols] for a in self._class_noise)
            location_noise = (weight**2 * mean_noise).sum(1) / rows**2 / yardstick**2
            spread_noise = 0.25 * (freedom**2 * variance_noise).sum(1) / degrees**2 / pooled**2
        out = {"mean": mean, "predicted": predicted, "sd": np.sqrt(pooled), "predicted_sd": np.sqrt(predicted_pooled),
               "shift": location, "log_ratio": log_ratio, "mix_shift": mix_shift, "mix_log_ratio": mix_log_ratio}
        for name, values, own, noise in (("location", location, location_variance, location_noise),
                                         ("spread", log_ratio, spread_variance, spread_noise)):
            out[f"{name}_dev"], _, out[f"{name}_p"] = leave_one_out(
                values, own_variance=np.nan_to_num(own) + self.excess_variance(noise), suspect=suspect)
        return out

    def location_within(self) -> Iterator[Finding]:
        w, shift = self._within_classes, limit("location_within", "shift")
        for i, site in enumerate(self.sites):
            for c, j in enumerate(self.continuous):
                name, dev = self.profile.features[j], w["location_dev"][i, c]
                yield Finding(site, LENS, "location_within", name,
                              f"{site}'s {name}: within its classes, {abs(dev):.2f} times the usual spread within a class "
                              f"{'higher' if dev > 0 else 'lower'} than at the other sites (its mean "
                              f"{self.value(j, w['mean'][i, c])} against {self.value(j, w['predicted'][i, c])} from "
                              f"every site's means of its classes, weighted by its class counts; {dev:+.2f} "
                              "within-class SDs)", float(w["location_p"][i, c]), float(dev), "within-class SDs",
                              material=bool(abs(dev) >= shift))

    def spread_within(self) -> Iterator[Finding]:
        w, ratio_limit = self._within_classes, limit("spread_within", "ratio")
        for i, site in enumerate(self.sites):
            for c, j in enumerate(self.continuous):
                name, dev = self.profile.features[j], w["spread_dev"][i, c]
                ratio = as_ratio(dev)
                yield Finding(site, LENS, "spread_within", name,
                              f"{site}'s {name} varies {ratio:.2g} times as much within its classes as at the other "
                              f"sites (SD within its classes {self.value(j, w['sd'][i, c])} against "
                              f"{self.value(j, w['predicted_sd'][i, c])} from every site's SDs of its classes)",
                              float(w["spread_p"][i, c]), ratio, "SD ratio",
                              material=bool(abs(dev) >= math.log(ratio_limit)), untestable=self._spread_untestable(i, j))

    # -- explanations: the class mix, units and swapped columns ---------------------------------
    @cached_property
    def _explanations(self) -> dict[tuple[int, int], tuple[str, str, Any]]:
        """(site, continuous index) -> (kind, message, the conversion's match or the swap partner)
        where a feature's values differ: by its class mix wherever a cell of the location, spread,
        shape or far-out share is material (its p is those cells' own), by a unit or a swap where
        the median or spread differs materially and strongly (p < the unit check's `tried`: a
        conversion searched for in a weak difference fits by chance)."""
        v = self._values
        if self.n < 3:
            return {}
        shifted, widened = self._material_differences
        strong = (shifted | widened) & (np.fmin(v["location_p"], v["spread_p"]) < limit("unit", "tried"))
        out = {}
        for i, c in zip(*np.nonzero(self._material_values.any(0))):
            explained = self._explain(int(i), self.continuous[c], v["scale"][c], bool(strong[i, c]))
            if explained is not None:
                out[(int(i), int(c))] = explained
        return out

    @cached_property
    def _material_differences(self) -> tuple[np.ndarray, np.ndarray]:
        """[sites, continuous] twice: whether the median differs by the location check's material
        size, and the spread by the spread check's (what those checks call material, and what the
        explanations are asked of)."""
        v = self._values
        return (np.abs(v["location_dev"]) >= limit("location", "shift"),
                np.abs(v["spread_dev"]) >= math.log(limit("spread", "ratio")))

    @cached_property
    def _material_shapes(self) -> tuple[np.ndarray, np.ndarray]:
        """[sites, continuous] twice: whether the skew, and the tails, differ by the shape check's
        material sizes."""
        v = self._values
        return (np.abs(v["skew_dev"]) >= limit("shape", "skew"),
                np.abs(v["tail_dev"]) >= math.log(limit("shape", "tails")))

    @cached_property
    def _material_values(self) -> np.ndarray:
        """[5, sites, continuous]: whether the cells of the location, the spread, the skew, the
        tails and the far-out share are material (what the class mix is asked to explain)."""
        return np.stack([*self._material_differences, *self._material_shapes, self._far_out["material"]])

    @cached_property
    def _value_tests(self) -> np.ndarray:
        """[5, sites, continuous]: the p of those cells, in the same order (the class mix's p)."""
        v = self._values
        return np.stack([v["location_p"], v["spread_p"], v["skew_p"], v["tail_p"], self._far_out["p"]])

    def _explain(self, i: int, j: int, scale: float, strong: bool) -> tuple[str, str, Any] | None:
        """Site i's class mix, else (where the difference is `strong`) a unit conversion, else
        another column, that makes its values of feature j match the others' (a unit or a column
        for features whose quantiles are more than a few steps, at the site and the others): the
        kind, the message, and what its evidence adds (the conversion y = a·x + b and the units it
        names; the other column)."""
        p, site, name = self.profile, self.sites[i], self.profile.features[j]
        if self._as_its_class_mix_predicts(i, j):
            w, c = self._within_classes, self.continuous.index(j)
            return "class_mix", (f"{site}'s {name} differs from the other sites' as its mix of classes predicts "
                                 f"({self._mix_words(i)}): "
                                 f"within its classes its values are the other sites' (mean "
                                 f"{self.value(j, w['mean'][i, c])} against {self.value(j, w['predicted'][i, c])} from "
                                 f"every site's means of its classes, SD within them {self.value(j, w['sd'][i, c])} "
                                 f"against {self.value(j, w['predicted_sd'][i, c])}): {MIX_NOT_RECORDING}"), None
        site_q, others = p.quantiles[i, :, j], self.others_quantiles[i, :, j]
        if not strong or not unit_readable(site_q, others, self.robust_sd[i, j]):
            return None
        match = match_conversion(name, site_q, others, scale)
        if match is not None and match.conversion is not None:
            return "unit", match.describe(site, name), match
        swapped = self._swapped_with(i, j)
        if swapped is not None:  # before an unexplained factor: swapped columns on other scales look like one
            return "swapped_columns", (f"{site}'s {name} and {p.features[swapped]} look swapped: each matches the "
                                       f"other sites' values of the other column (a mislabelled export?)"), swapped
        return ("unit", match.describe(site, name), match) if match is not None else None

    def _mix_words(self, i: int) -> str:
        """How site i's class mix differs, in words: its most different class's share of its rows
        against the other sites' (`_most_different_class`)."""
        k, mine, theirs = self._most_different_class(i)
        return f"{mine:.0%} of its rows are '{self.profile.classes[k]}' against {theirs:.0%} at the other sites"

    def _most_different_class(self, i: int) -> tuple[int, float, float]:
        """The class whose share of site i's rows differs most from the other sites' (the median of
        theirs), its share there and theirs (a class whose count a site withheld: no share)."""
        counts = self.profile.class_counts.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            shares = counts / np.nansum(counts, axis=1, keepdims=True)
        theirs = others_median(shares)[i]
        k = int(np.nanargmax(np.abs(shares[i] - theirs)))
        return k, float(shares[i, k]), float(theirs[k])

    def _as_its_class_mix_predicts(self, i: int, j: int) -> bool:
        """Whether site i's feature j, whose median, spread, shape or far-out share differs, is
        within its classes what the other sites' are: its mean and its SD within classes against
        what its class mix predicts (`_within_classes`) both below the checks within classes'
        material sizes. A site's
        values are a mixture of its classes'; where each class's are the others', what differs is
        the mixture (MNIST's sites by label: a block 15 grey levels against 0.6 at a site of
        digits 2-4). Not where classes are not compared (none, or their statistics withheld)."""
        if len(self.profile.classes) < BY_KIND["location_within"].min_classes:
            return False
        w, c = self._within_classes, self.continuous.index(j)
        shift, log_ratio = w["shift"][i, c], w["log_ratio"][i, c]
        alike = bool(np.isfinite(shift) and np.isfinite(log_ratio) and abs(shift) < limit("location_within", "shift")
                     and abs(log_ratio) < math.log(limit("spread_within", "ratio")))
        # and the mix accounts for the differences: the mix alone (every site's classes in the site's
        # proportions) moves the mean or the SD from the other sites' by a material size, and each
        # material difference seen runs the way the mix moves it. A site of the others' mix has no
        # class mix to explain anything (a skewed column's median moves while its mean and SD stay).
        # The size is asked of one of the two: the mix's SD is an SD, the spread seen a robust one,
        # and a mixture's tails move the two apart (tests/test_within_classes.py, 80 % of one class: SD
        # 0.84 times the others', robust SD 0.57 times)
        v, (shifted, widened) = self._values, self._material_differences
        moved = ((w["mix_shift"][i, c], v["location_dev"][i, c], limit("location", "shift"), shifted[i, c]),
                 (w["mix_log_ratio"][i, c], v["spread_dev"][i, c], math.log(limit("spread", "ratio")), widened[i, c]))
        seen = [(mix, dev, size) for mix, dev, size, differs in moved if differs]
        # a shape or far-out share alone (a column mostly at 0, its middle half one value: a block
        # of MNIST's digits 26 times the others' tails at a site of 61 % '1's): the mix moves either
        movers = seen or [(mix, dev, size) for mix, dev, size, _ in moved]
        return (alike and all(np.isfinite(mix) and np.sign(mix) == np.sign(dev) for mix, dev, _ in seen)
                and any(abs(mix) >= size for mix, _, size in movers))

    def _swapped_with(self, i: int, j: int) -> int | None:
        """A continuous feature k such that site i's values of j look like the others' of k and its
        values of k like the others' of j (both ways: one-way look-alikes abound among features on
        similar scales), each match at least IMPROVEMENT times closer than to its own column (the
        discrepancies of `units.discrepancy`, for every k at once)."""
        fit, closer = limit("swapped_columns", "fit"), limit("swapped_columns", "closer")
        k = np.array([k for k in self.continuous if k != j and self.yardstick[k] > 0], dtype=np.int64)
        if not k.size or not self.yardstick[j] > 0:
            return None
        j_as_k, k_as_j, j_as_j, k_as_k = self.values_as(i, j, k)
        with np.errstate(invalid="ignore"):
            both = ((j_as_k <= fit) & (j_as_j >= closer * np.maximum(j_as_k, 0.05))
                    & (k_as_j <= fit) & (k_as_k >= closer * np.maximum(k_as_j, 0.05)))
        found = np.flatnonzero(both)
        return int(k[found[0]]) if found.size else None

    def _values_contradict(self, i: int, j: int, k: int, tolerance: float) -> bool:
        """Whether site i's values say features j and k are not exchanged: either lies farther from
        the others' values of the other column than from its own column's, and more than
        `tolerance` SD from them (NaN, nothing released: nothing said)."""
        j_as_k, k_as_j, j_as_j, k_as_k = (float(v[0]) for v in self.values_as(i, j, np.array([k])))
        return bool(j_as_k > max(j_as_j, tolerance) or k_as_j > max(k_as_k, tolerance))

    def values_as(self, i: int, j: int, k: np.ndarray) -> tuple[np.ndarray, ...]:
        """How far site i's values of feature j lie from the other sites' of each feature k, its
        values of k from the others' of j, and each from the others' of its own column: the median
        distance over the quantiles both released, in the compared column's within-site SDs
        (`units.discrepancy`, for every k at once; NaN where none is released)."""
        q, others, scale = self.profile.quantiles[i], self.others_quantiles[i], self.yardstick
        k = np.atleast_1d(k)
        with np.errstate(invalid="ignore", divide="ignore"):
            j_as_k = median_along_first(np.abs(q[:, [j]] - others[:, k])) / scale[k]
            k_as_j = median_along_first(np.abs(q[:, k] - others[:, [j]])) / scale[j]
            j_as_j = np.full(k.shape, float(median_along_first(np.abs(q[:, [j]] - others[:, [j]]))[0]) / scale[j])
            k_as_k = median_along_first(np.abs(q[:, k] - others[:, k])) / scale[k]
        return j_as_k, k_as_j, j_as_j, k_as_k

    def _explained(self, kind: str) -> Iterator[Finding]:
        v = self._values
        for (i, c), (found, message, detail) in sorted(self._explanations.items()):
            if found != kind:
                continue
            j = self.continuous[c]
            evidence = dict(self._evidence(i, c))
            if kind == "unit":
                conversion = detail.conversion
                evidence.update(_conversion(detail), conversion=conversion.pair() if conversion else None,
                                name=f"{conversion.pair()} ({conversion.formula()})" if conversion else None)
            elif kind == "swapped_columns":
                evidence["other_feature"] = self.profile.features[detail]
            # a unit or a swap is read off the shift and the spread together (the smaller p, × 2); the
            # class mix names what the material cells are (the smaller p of those, × their number):
            # the median's and the spread's where either is, else the shape's and the far-out share's
            tests = np.array([v["location_p"][i, c], v["spread_p"][i, c]])
            if kind == "class_mix":
                named = self._material_values[:, i, c].copy()
                if named[:2].any():  # the median or the spread: those, not the shape they carry
                    named[2:] = False
                tests = self._value_tests[:, i, c][named]
            yield Finding(self.sites[i], LENS, kind, self.profile.features[j], message,
                          min(1.0, len(tests) * float(np.nanmin(tests))),
                          float(v["location_dev"][i, c]), "within-site SDs", evidence=evidence)

    def unit_conversions(self) -> Iterator[Finding]:
        return self._explained("unit")

    def class_mix(self) -> Iterator[Finding]:
        return self._explained("class_mix")

    def swapped_columns(self) -> Iterator[Finding]:
        return self._explained("swapped_columns")

    def unit_pairs(self) -> Iterator[Finding]:
        """Pairs of sites whose column differs by a catalogue factor, naming no culprit, for the
        columns no site-level unit finding names (`units.fits_between`)."""
        p, q = self.profile, self.profile.quantiles
        named = {self.continuous[c] for (_, c), (kind, _, _) in self._explanations.items() if kind == "unit"}
        swapped = {(i, self.continuous[c]) for (i, c), (kind, _, _) in self._explanations.items()
                   if kind == "swapped_columns"}  # its values are another column's: no unit to compare
        fewest = limit("unit_pair", "values")
        # a pair is tested on its own standard errors, not against the other sites' spread: the noise
        # of each release adds its whole variance (`release_noise`)
        median_noise = quantile_variance(p, lambda quantiles, rows: quantiles[:, MEDIAN], self.continuous,
                                         self._block_noise)
        for c, j in enumerate(self.continuous):
            if j in named:
                continue
            median, iqr, count = q[:, MEDIAN, j], q[:, UPPER, j] - q[:, LOWER, j], p.observed[:, j]
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                # positive amounts: the 5 % quantile, or the lowest a small group's policy released
                low = np.where(np.isfinite(q[:, Q05, j]), q[:, Q05, j], np.nanmin(q[:, :, j], axis=1))
                usable = np.flatnonzero((count >= fewest) & (low >= 0) & (median > 0) & (iqr > 0))
            if len(usable) < 2:
                continue
            name, factors = p.features[j], column_factors(p.features[j])
            with np.errstate(divide="ignore", invalid="ignore"):
                log_se = np.hypot(MEDIAN_EFFICIENCY * (iqr / IQR_TO_SD) / (median * np.sqrt(count)),
                                  np.sqrt(median_noise[:, c]) / median)
            pairs: dict[int, list[dict[str, Any]]] = {}
            for a, b in itertools.combinations(usable, 2):
                if (a, j) in swapped or (b, j) in swapped:
                    continue
                fit = fits_between(median[a], iqr[a], int(count[a]), median[b], iqr[b], int(count[b]), factors)
                if fit is None or self._same_unit_within_classes(a, b, j, math.log(median[a] / median[b])):
                    continue
                z = math.log(median[a] / median[b]) / math.hypot(log_se[a], log_se[b])
                larger, smaller = (a, b) if median[a] >= median[b] else (b, a)
                pair = {"column": name, "sites": [self.sites[larger], self.sites[smaller]],
                        "medians": [round(float(median[larger]), 4), round(float(median[smaller]), 4)],
                        "factor": round(fit[0], 3), "spread_factor": round(fit[1], 3), "conversions": fit[2],
                        "p": float(2 * stats.norm.sf(abs(z)))}
                pairs.setdefault(int(a), []).append(pair)
                pairs.setdefault(int(b), []).append(pair)
            for i, found in sorted(pairs.items()):
                partners = [self.index[pair["sites"][0] if pair["sites"][1] == self.sites[i] else pair["sites"][1]]
                            for pair in found]
                if any(len(pairs[k]) > len(found) for k in partners):
                    continue  # a partner differs so from more sites than this one does: the odd one is there
                odd_one = len(found) >= 2 and all(len(pairs[k]) == 1 for k in partners)
                site = self.sites[i]
                strongest = min(found, key=lambda pair: pair["p"])
                (larger, smaller), others = strongest["sites"], [
                    pair["sites"][1] if pair["sites"][0] == site else pair["sites"][0] for pair in found
                    if pair is not strongest]
                yield Finding(site, LENS, "unit_pair", name,
                              f"values of {name} at {larger} are about {strongest['factor']:.3g} times those at "
                              f"{smaller} (medians {strongest['medians'][0]:.4g} and {strongest['medians'][1]:.4g}, spreads "
                              f"×{strongest['spread_factor']:.3g}), as a unit difference would make them "
                              f"({'; '.join(strongest['conversions'])}?)"
                              + (f"; {site} differs so from {', '.join(others)} too" if others else "")
                              + (f". The sites it differs from agree among themselves: {site}'s unit is the odd one"
                                 if odd_one else ". The data cannot tell which site's unit is the intended one"),
                              min(1.0, strongest["p"] * (len(usable) - 1)), float(strongest["factor"]), "factor",
                              evidence={"pairs": found})

    def _same_unit_within_classes(self, a: int, b: int, j: int, log_ratio: float) -> bool:
        """Whether sites a and b's class means of feature j say that their values share a unit,
        where their medians differ by `log_ratio` (a factor of the catalogue): over the classes
        both hold (at least the pair's fewest values each, positive means), the median log ratio
        of their class means lies nearer 0 than `log_ratio`. A unit multiplies every class's values;
        a different mix of classes moves the medians by a factor of its own (MNIST's sites by label:
        a block's median 4.7 times another site's, its classes' means 1.01-1.13 times). Nothing
        to compare (no classes, or their means withheld): nothing said."""
        p, fewest = self.profile, limit("unit_pair", "values")
        observed = p.observed_by_class
        mean_a, mean_b = p.mean_by_class[a, :, j].astype(np.float64), p.mean_by_class[b, :, j].astype(np.float64)
        with np.errstate(invalid="ignore"):
            both = ((observed[a, :, j] >= fewest) & (observed[b, :, j] >= fewest) & (mean_a > 0) & (mean_b > 0))
        if not both.any():
            return False
        within = float(np.median(np.log(mean_a[both] / mean_b[both])))
        return abs(within) < abs(within - log_ratio)

    # -- recording: constant columns, point masses, codes, categories, duplicates, far-out values --
    @cached_property
    def _one_value(self) -> dict[str, np.ndarray]:
        """Per site and feature-scope item: the share of its rows at its most common value (a
        categorical column: its largest category), its observed rows, whether that makes the column
        one value at the site where the other sites' vary (`varies_there`: their most common value
        holds at most the check's `others` share), and whether it is the constant check's material
        size (that, or a column nearly one value at the others too whose values off it are `fewer`
        times fewer at the site; the class mix is asked in `constant`)."""
        p = self.profile
        items = self.items("feature")
        share = np.full((self.n, len(items)), np.nan)
        observed = np.zeros((self.n, len(items)))
        for c, item in enumerate(items):
            j = item.members[0]
            if len(item.members) > 1 or p.kinds[j] == "categorical":  # a categorical column: its largest category
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    share[:, c] = np.nanmax(p.mean[:, list(item.members)], axis=1)
            else:
                share[:, c] = p.top_share[:, j]
            observed[:, c] = p.observed[:, j]
        others_share = others_median(share)
        at_least, others_at_most, fewest, fewer = (limit("constant", k) for k in ("share", "others", "count", "fewer"))
        with np.errstate(invalid="ignore"):
            one_value = (share >= at_least) & (share * observed >= fewest)
            # where the others' column is nearly one value too (a binary marker, 90 % 'no'), the values
            # off it are the measure: at least what the site may keep off it, `fewer` times the site's
            off_others = 1 - others_share
            nearly_one_there = (off_others >= 1 - at_least) & (off_others >= fewer * (1 - share))
            varies_there = one_value & (others_share <= others_at_most)
        return {"share": share, "observed": observed, "others_share": others_share, "varies_there": varies_there,
                "material": varies_there | (one_value & nearly_one_there)}

    @cached_property
    def not_a_reference(self) -> np.ndarray:
        """[sites, features]: a continuous feature that is one value at the site where the other
        sites' vary (a column never measured, a dead sensor: the constant check's material cells).
        Its values are no reference for the other sites' — 0 for every patient's cholesterol at one
        hospital is not a cholesterol the others' should be compared with — so every check of
        values leaves it out of the others' references (it is still tested, and reported as one
        value)."""
        out = np.zeros((self.n, len(self.profile.features)), dtype=bool)
        continuous = set(self.continuous)
        for c, item in enumerate(self.items("feature")):
            if len(item.members) == 1 and item.members[0] in continuous:
                out[:, item.members[0]] = self._one_value["varies_there"][:, c]
        return out

    @cached_property
    def reference_quantiles(self) -> np.ndarray:
        """[sites, probabilities, features]: the quantiles other sites are compared with: NaN where
        `not_a_reference`, and a column's values other than its material missing codes where it has
        some (`without_codes`). A quarter of a hospital's cholesterol recorded as 0 puts its 5-25 %
        quantiles at 0 and pulls its median down: no unit factor maps another site's quantiles
        onto those, and every site's location is compared with a mean it lowers. The site itself
        is still tested on what it released, and its code reported."""
        return self._codes.reference

    @cached_property
    def _codes(self) -> MissingCodes:
        """The missing codes as judged at the fixed point (`MissingCodes`): the references without
        them, the columns they were set aside from, the codes judged, and the rule as it stands
        against those references, which the findings report.

        The codes are judged against references without the codes themselves: a code two sites use
        (0 for a missing cholesterol at two hospitals) puts each one's 5 % quantile at the code, and
        each would make the other's look plausible. A code is set aside from its site's reference
        values where it is material against references with every code in (the one judgement of
        before), or where it sits apart from the site's other values (`_apart`: VA's 0 against
        cholesterols from about 150); each judgement is then made against references without those
        the one before found material, until it no longer changes. A code at the edge of a site's
        values (HAR's features at their normalised -1, a CRP of 0) is set aside only if found
        material with every code in: set aside for a first look, such codes at a few sites narrow
        the others' references until every site's is material. Never-measured cells are in no
        reference: their codes are judged (and reported) against the others' references as they
        stand, and set nothing aside."""
        unmeasured = self.not_a_reference
        quantiles = np.where(unmeasured[:, None, :], np.nan, self.profile.quantiles)
        first = self._code_rule(quantiles)
        shares = np.nan_to_num(first["shares"])  # [sites, codes, features]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            low = SENTINELS[None, :, None] < self.profile.quantiles[:, None, MEDIAN]  # below the site's median
        may = (first["material"] | self._apart(quantiles, shares, low, first["tested"])
               | (first["tested"] & unmeasured[:, None, :]))
        judged, seen = may, []
        while True:
            below = np.where(judged & low, shares, 0.0).sum(1)  # [sites, features]
            above = np.where(judged & ~low, shares, 0.0).sum(1)
            set_aside = ((below + above) > 0) & ~unmeasured
            reference = quantiles.copy()
            for i, j in zip(*np.nonzero(set_aside)):
                reference[i, :, j] = without_codes(quantiles[i, :, j], float(below[i, j]), float(above[i, j]),
                                                   self._blend(i, j))
            rule = self._code_rule(reference, set_aside.any(0))
            material = rule["material"] & may
            if any((material == earlier).all() for earlier in seen) or len(seen) >= MAX_CODE_PASSES:
                return MissingCodes(reference, set_aside, judged, {**rule, "material": material})
            seen.append(judged := material)

    def _apart(self, quantiles: np.ndarray, shares: np.ndarray, low: np.ndarray, tested: np.ndarray) -> np.ndarray:
        """[sites, codes, features]: a tested code at least "apart" robust SDs from the nearest of the
        site's other values (its quantiles without the code, `without_codes`), in the SDs of those."""
        apart = limit("missing_code", "apart")
        out = np.zeros(tested.shape, dtype=bool)
        for i, v, j in zip(*np.nonzero(tested)):
            share, below = float(shares[i, v, j]), bool(low[i, v, j])
            rest = without_codes(quantiles[i, :, j], share if below else 0.0, 0.0 if below else share, self._blend(i, j))
            finite = rest[np.isfinite(rest)]
            if finite.size < 2:
                continue
            spread = float(robust_sd(rest[None, :, None], np.array([[np.nan]]), some_widths=True)[0, 0])
            nearest = finite.min() if below else finite.max()
            out[i, v, j] = spread > 0 and abs(nearest - SENTINELS[v]) >= apart * spread
        return out

    @cached_property
    def codes_read_as_missing(self) -> np.ndarray:
        """[sites, features]: a continuous feature with material missing codes at the site: in the
        other sites' references as its values without them (`reference_quantiles`). Not a column
        never measured there (its one value may be a code too): that is in no reference."""
        return self._codes.set_aside

    def _blend(self, i: int, j: int) -> float:
        """The share of site i's values of feature j around a released quantile that it may blend
        (a disclosure policy's blocks of at least min_count values), at least one step of
        PROBABILITIES."""
        policy = self.profile.policies.get(self.sites[i]) or {}
        observed = float(self.profile.observed[i, j])
        return max(CODE_BLEND, float(policy.get("min_count") or 0) / observed if observed > 0 else 1.0)

    def constant(self) -> Iterator[Finding]:
        items = self.items("feature")
        one = self._one_value
        share, observed, others_share = one["share"], one["observed"], one["others_share"]
        p_more, rate = over_dispersed_excess(share * observed, observed)
        for i, site in enumerate(self.sites):
            for c, item in enumerate(items):
                if not np.isfinite(share[i, c]):
                    continue
                value, reading, number = self._constant_words(i, item, share[i, c])
                material, mix = bool(one["material"][i, c]), float("nan")
                if material:
                    # a site of mostly one class holds that class's one value (MNIST's site of 61 % '1's:
                    # a corner block blank in 97 % of its rows, 89 % at the others)
                    mix = self.share_of_class_mix(i, item)
                    material = not self.as_class_mix(float(share[i, c]), mix)
                if np.isfinite(mix) and not material:
                    reading = (f"as its mix of classes predicts ({mix:.0%} from the other sites' share of each "
                               f"class there, in its proportions; {self._mix_words(i)}): {MIX_NOT_RECORDING}")
                yield Finding(site, LENS, "constant", item.name,
                              f"{site}'s {item.name} {'is ' + value if value else 'has one value'} in "
                              f"{share[i, c]:.0%} of its rows, where the other sites' most common value holds "
                              f"{others_share[i, c]:.0%} of theirs: {reading}", float(p_more[i, c]),
                              float(share[i, c]), "share at one value",
                              evidence={"share": float(share[i, c]), "others_share": float(others_share[i, c]),
                                        "value": value, "not_measured": number,
                                        **({"class_mix_share": mix} if np.isfinite(mix) else {})},
                              material=material)

    def _constant_words(self, i: int, item: Item, share: float) -> tuple[str, str, float | None]:
        """Which value a (nearly) constant column holds, from statistics already shared (a
        category's share; the median, once the value holds more than half the rows: '' where
        neither says), how it reads, and the value where it reads 'not measured' (else None): a
        value outside the other sites' 5-95 % ranges, or a usual missing-value code (SENTINELS)
        the other sites record in under the missing-code share of their values — 0 for every
        patient's cholesterol is not measured, 0 vessels at one site where the others record 0
        vessels as often as not is a real value. The mapping step's 'never measured' reads this."""
        p, j = self.profile, item.members[0]
        if p.kinds[j] == "categorical":
            top = int(np.nanargmax(p.mean[i, list(item.members)]))
            category = Checks._category(p.features[item.members[top]], item.name or "")
            return f"'{category}'", "not recorded, or a default?", None
        if p.kinds[j] != "continuous" or not (share > 0.5 and np.isfinite(p.quantiles[i, MEDIAN, j])):
            return "", "not recorded, a default, or a dead sensor?", None
        value = float(p.quantiles[i, MEDIAN, j])
        others = [k for k in range(self.n) if k != i]
        with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            low, high = np.nanmin(p.quantiles[others, Q05, j]), np.nanmax(p.quantiles[others, Q95, j])
            code = np.flatnonzero(SENTINELS == value)
            rare = bool(code.size) and float(np.nanmedian(
                p.sentinel_counts[others, code[0], j] / p.observed[others, j])) < limit("missing_code", "share")
        if rare or not (low <= value <= high):
            return self.value(j, value), "a value the other sites rarely record — not measured?", value
        return self.value(j, value), "a dead sensor, a default, or a column not filled?", None

    def point_mass(self) -> Iterator[Finding]:
        p, cols = self.profile, self.continuous
        observed = p.observed[:, cols].astype(np.float64)
        where = ("min", "max", "top")  # the extremes first: at the same mass as the most common value they say more
        shares = np.stack([p.min_share[:, cols], p.max_share[:, cols], p.top_share[:, cols]])  # [3, sites, cols]
        # Tested: the values tied with it beyond the one that is always there (a continuous column's
        # minimum holds 1/n of a site's rows: a share that differs with n alone). The column's own
        # spread of ties between sites (rounding, a floor every subject reaches) is the yardstick.
        ties = np.maximum(np.rint(shares * observed) - 1, 0)
        # a site of one value (its minimum is its maximum: the two shares overlap) has no extremes
        # apart from it, neither to test nor in the others' rates: its share is its most common
        # value's, against the others' most common value's (an MNIST block blank in every row of one
        # site, in 99.9 % of the others', is not 'saturated at the top' against their maximum's 0.1 %)
        one_value = shares[0] + shares[1] >= ONE_VALUE
        ties[:2] = np.where(one_value[None], np.nan, ties[:2])
        tests = [random_effects_excess(tied, np.maximum(observed - 1, 0)) for tied in ties]
        p_values = np.stack([t[0] for t in tests])
        others = np.stack([t[1] for t in tests])
        best = np.argmin(np.nan_to_num(p_values, nan=2.0), axis=0)  # [sites, cols]: the first of equals
        repeated = repeated_quantiles(p.quantiles[:, :, cols])
        excess, ratio = limit("point_mass", "excess"), limit("point_mass", "ratio")
        for i, site in enumerate(self.sites):
            for c, j in enumerate(cols):
                k = best[i, c]
                share, rate, p_value = float(shares[k, i, c]), float(others[k, i, c]), float(p_values[k, i, c])
                material = share - rate >= excess and share >= ratio * rate
                # beyond the others' rate, and beyond what the site's mix of classes predicts: a site
                # of mostly one class holds that class's mass (MNIST by label: a site of 61 % '1's has
                # 37 % of a block's grey levels at 0, the others 5 %; the '1's leave that block blank).
                # Beyond it either way: the excess, or the values off the mass `ratio` times fewer than
                # the mix leaves (a block the mix leaves at 0 in 97 % of its rows, at 0 in every row:
                # its other values are gone)
                mix = self.mass_of_class_mix(i, j, where[k]) if material else float("nan")
                as_mix = self.as_class_mix(share, mix)
                words = self._mass_words(i, j, where[k], share, rate, repeated[i, c], mix if as_mix else None)
                yield Finding(site, LENS, "point_mass", p.features[j], words,
                              min(1.0, 3 * p_value), share - rate, "share of values",
                              evidence={"where": where[k], "share": share, "others_share": rate,
                                        "shares": {w: float(s) for w, s in zip(where, shares[:, i, c])},
                                        **({"class_mix_share": mix} if np.isfinite(mix) else {})},
                              material=bool(material and not as_mix))

    @staticmethod
    def as_class_mix(share: float, mix: float) -> bool:
        """Whether a site's `share` of values at one value is what its class mix predicts (`mix`,
        `mass_of_class_mix`; NaN: unknown, so no): within the point mass's excess of it, and with the
        values off it fewer than `ratio` times fewer than the mix leaves (a block the mix leaves at 0
        in 97 % of its rows, at 0 in every row, is a dead channel)."""
        excess, ratio = limit("point_mass", "excess"), limit("point_mass", "ratio")
        return bool(np.isfinite(mix) and share - mix < excess and ratio * (1 - share) >= 1 - mix)

    def mass_of_class_mix(self, i: int, j: int, where: str) -> float:
        """The share of site i's values of feature j at its minimum, maximum or repeated value
        (`where`: "min", "max", "top") that its mix of classes predicts: each class's share at that
        value at the other sites (`tied_share` of their quantiles of the class, the median over the
        sites that released them and are a reference) weighted by the site's own count of the
        class's values. NaN where the site has under two classes released, or the value is not
        seen in its shared quantiles. A class no other site released counts as holding none (the
        prediction errs low: a mass is explained only by classes seen holding it)."""
        p = self.profile
        if len(p.classes) < 2:
            return float("nan")
        q = p.quantiles[i, :, j]
        shared = np.flatnonzero(np.isfinite(q))
        if not shared.size:
            return float("nan")
        value = {"min": q[shared[0]], "max": q[shared[-1]],
                 "top": repeated_quantiles(q[None, :, None])[0, 0]}[where]
        if not np.isfinite(value):
            return float("nan")
        reference = self._mix_reference(i, j)
        tied = np.full((len(reference), len(p.classes)), np.nan)
        for r, s in enumerate(reference):
            policy = p.policies.get(self.sites[s])
            fewest = Policy.from_settings(policy).min_count if policy is not None else 0
            for k in range(len(p.classes)):
                n = p.observed_by_class[s, k, j]
                # under a policy, a class of fewer values than its minimum shares no quantiles
                starts = block_starts(int(n), fewest) if policy is not None and n >= fewest else None
                tied[r, k] = tied_share(p.quantiles_by_class[s, k, :, j], float(value), starts)
        return self._in_its_proportions(i, j, tied)

    def share_of_class_mix(self, i: int, item: Item) -> float:
        """The share of site i's rows at a feature-scope item's most common value (a binary
        column's value, a categorical column's largest category) that its mix of classes predicts:
        each class's share of it at the other sites (their means by class) in the site's
        proportions; a continuous feature's as `mass_of_class_mix`. NaN as there."""
        p, j = self.profile, item.members[0]
        if len(item.members) == 1 and p.kinds[j] == "continuous":
            return self.mass_of_class_mix(i, j, "top")
        members = list(item.members)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            if len(members) > 1 or p.kinds[j] == "categorical":
                top = members[int(np.nanargmax(p.mean[i, members]))]
                by_class = p.mean_by_class[:, :, top]
            else:  # a binary column: its share at 1, or at 0
                by_class = p.mean_by_class[:, :, j] if p.mean[i, j] >= 0.5 else 1 - p.mean_by_class[:, :, j]
        return self._in_its_proportions(i, j, by_class[self._mix_reference(i, j)])

    def _mix_reference(self, i: int, j: int) -> list[int]:
        """The sites whose classes' statistics of feature j predict site i's from its class mix."""
        return [s for s in range(self.n) if s != i and not self.not_a_reference[s, j] and not self.labels_suspect[s]]

    def _in_its_proportions(self, i: int, j: int, by_class: np.ndarray) -> float:
        """A share each class holds at the reference sites ([sites, classes]; the median over them,
        a class none released counting as holding none), weighted by site i's own count of the
        class's values of feature j; NaN where it has under two classes released."""
        counts = np.nan_to_num(self.profile.observed_by_class[i, :, j].astype(np.float64))
        if (counts > 0).sum() < 2:
            return float("nan")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            each = np.nan_to_num(np.nanmedian(by_class, axis=0)) if len(by_class) else np.zeros(len(counts))
        return float((counts * each).sum() / counts.sum())

    def _mass_words(self, i: int, j: int, where: str, share: float, rate: float, value: float,
                    mix: float | None = None) -> str:
        """`value`: the value two neighbouring shared quantiles show (NaN: none; 'about' it where the
        site's disclosure policy rounded them); `mix`: the share its class mix predicts, where that
        is what the share is."""
        site, name = self.sites[i], self.profile.features[j]
        about = "about " if self.profile.policies.get(site) is not None else ""
        at = f" ({about}{self.value(j, value)})" if np.isfinite(value) else ""
        if mix is not None:
            return (f"{site}'s {name}: {share:.0%} of its values sit at its {'one value' if where == 'top' else where + 'imum'}"
                    f"{at} against {rate:.1%} at the other sites, as its mix of classes predicts ({mix:.0%} from the other "
                    f"sites' share of each class there, in its proportions; {self._mix_words(i)}): {MIX_NOT_RECORDING}")
        if where == "min":
            how = f"at its minimum{at}: clipped at the bottom, zero-filled, or dropouts?"
        elif where == "max":
            how = f"at its maximum{at}: saturated or clipped at the top?"
        else:
            how = f"at one value inside its range{at}: a default, or a code for 'missing' outside the usual list?"
        return f"{site}'s {name}: {share:.0%} of its values sit {how} (the other sites: {rate:.1%})"

    def _code_rule(self, reference: np.ndarray, cleaned: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The missing-code check against the other sites' `reference` quantiles [sites,
        probabilities, features]: per site, usual code (SENTINELS) and feature, its share of the
        site's values, whether it is tested (a continuous feature, enough values at the code) and
        whether it is material — outside the values most other sites have (their typical 5-95 %
        range, 2 SDs wider: the sites' median robust SD), or a negative code
        where no other site has a quantile below 0. `cleaned` [features]: those whose references had
        codes set aside, whose band's SD is read from the references (else the yardstick)."""
        p = self.profile
        counts, observed = p.sentinel_counts, p.observed  # [sites, codes, features], [sites, features]
        lowest, highest = others_median(reference[:, Q05]), others_median(reference[:, Q95])  # [sites, features]
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            shares = counts / observed[:, None, :]
            released_low = np.nanmin(reference, axis=1)  # [sites, features]: each site's lowest released quantile
        # some other site released quantiles of the feature, and none of them is below 0
        negative, released = released_low < 0, np.isfinite(released_low)
        never_negative = (negative.sum(0) - negative == 0) & (released.sum(0) - released > 0)
        continuous = np.zeros(len(p.features), dtype=bool)
        continuous[self.continuous] = True
        codes = SENTINELS[None, :, None]
        below_zero = (codes < 0) & never_negative[:, None, :]
        # the band's SD from the same references: codes widen a site's quartiles (a cholesterol 0 in 44 % of
        # a hospital's rows: 139 against 51 without), and the SD they widen would take the code in
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            band = self.yardstick
            if cleaned is not None and cleaned.any():
                spread = robust_sd(reference, np.full(reference[:, 0].shape, np.nan), some_widths=True)
                band = np.where(cleaned, np.nanmedian(np.where(spread > 0, spread, np.nan), axis=0), band)
            tested = ((counts >= limit("missing_code", "count")) & (shares >= limit("missing_code", "share"))
                      & (continuous & (self.yardstick > 0))[None, None])
            outside = ((codes < (lowest - 2 * band)[:, None]) | (codes > (highest + 2 * band)[:, None]))
        return {"shares": shares, "lowest": lowest, "highest": highest, "below_zero": below_zero,
                "tested": tested, "material": tested & (outside | below_zero)}

    def missing_codes(self) -> Iterator[Finding]:
        p = self.profile
        counts, observed = p.sentinel_counts, p.observed
        rule = self._codes.rule
        lowest, highest = rule["lowest"], rule["highest"]
        # the value's rate where it is no code: a site that writes the same code (or never measured
        # the column) would make each other's share look usual
        as_values = np.where(self._codes.judged | self.not_a_reference[:, None, :], np.nan, rule["shares"])
        others_rate = others_median(as_values)  # [sites, codes, features]
        others_rows = np.nansum(observed, 0, keepdims=True) - np.nan_to_num(observed)
        for i, v, j in zip(*np.nonzero(rule["tested"])):
            site, name, code = self.sites[i], p.features[j], SENTINELS[v]
            count, n_site = int(counts[i, v, j]), int(observed[i, j])
            nowhere_negative = ", and no other site has a quantile below 0" if rule["below_zero"][i, v, j] else ""
            rate = max(float(np.nan_to_num(others_rate[i, v, j])), 0.5 / max(float(others_rows[i, j]), 1.0))
            yield Finding(site, LENS, "missing_code", name,
                          f"{site}'s {name} is {code:g} in {count / n_site:.0%} of its values; most other "
                          f"sites' values lie between {self.value(j, lowest[i, j])} and "
                          f"{self.value(j, highest[i, j])}{nowhere_negative}: "
                          f"{code:g} looks like a code for 'missing'",
                          float(stats.binom.sf(count - 1, n_site, min(rate, 1.0))), count / n_site,
                          "share of values", evidence={"code": float(code), "count": count},
                          material=bool(rule["material"][i, v, j]))

    def category_codes(self) -> Iterator[Finding]:
        p = self.profile
        at_least = limit("category_codes", "share")
        for item in self.items("column"):
            members, column = list(item.members), item.name or ""
            share = p.mean[:, members]  # [sites, categories]: each one-hot feature's share of 1
            used = np.nan_to_num(share) * np.nan_to_num(p.observed[:, members]) > 0
            for i, site in enumerate(self.sites):
                others = [k for k in range(self.n) if k != i]
                unused = ~used[others].any(0)
                mass = float(np.nansum(share[i, unused]))
                n_site = int(np.nan_to_num(p.observed[i, members[0]]))
                rows = int(round(mass * n_site))
                if rows == 0:
                    continue
                n_others = float(np.nansum(p.observed[others, members[0]]))
                p_value = float(stats.binom.sf(rows - 1, n_site, 0.5 / max(n_others, 1.0)))
                theirs = [self._category(p.features[m], column) for m, u in zip(members, used[others].any(0)) if u]
                mine = [self._category(p.features[m], column) for m, u in zip(members, unused & used[i]) if u]
                yield Finding(site, LENS, "category_codes", column,
                              f"{site}'s {column} uses {', '.join(map(repr, mine))} ({mass:.0%} of its rows), which no "
                              f"other site uses; they use {', '.join(map(repr, theirs))}", p_value, mass,
                              "share of rows", evidence={"site_codes": mine, "other_codes": theirs},
                              material=mass >= at_least)

    def category_shares(self) -> Iterator[Finding]:
        """Each yes/no or categorical column's shares against the other sites' (a reversed coding,
        categories mapped differently, another population): the logit of each tested share, its
        binomial variance at the site added (a category no site uses much ties the others near 0),
        leave-one-out over the sites and moderated across every tested category; a column's
        smallest p × its categories tested (a yes/no column's share of yes says both)."""
        p = self.profile
        items = self.items("discrete")
        tested = [list(item.members) if len(item.members) > 2 else [item.members[-1]] for item in items]
        cols = [j for members in tested for j in members]
        if not cols:
            return
        share = p.mean[:, cols].astype(np.float64)
        n = p.observed[:, cols].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            count = share * n
            logit = np.log((count + 0.5) / (n - count + 0.5))
            own = 1 / (count + 0.5) + 1 / (n - count + 0.5)
        _, _, p_two = leave_one_out(logit, own_variance=own)
        others = others_mean(share)
        gap, odds_limit = limit("category_share", "gap"), limit("category_share", "odds")
        start = 0
        for item, members in zip(items, tested):
            cells = list(range(start, start + len(members)))
            start += len(members)
            k = max(len(item.members), 2)  # a yes/no column: two values
            for i, site in enumerate(self.sites):
                p_cells = p_two[i, cells]
                if not np.isfinite(p_cells).any():
                    yield Finding(site, LENS, "category_share", item.name, "", float("nan"),
                                  untestable="its shares are not released here, or at too few other sites")
                    continue
                with np.errstate(invalid="ignore", divide="ignore"):
                    apart = np.abs(share[i, cells] - others[i, cells])
                    odds = np.exp(np.abs(logit[i, cells] - np.log(others[i, cells] / (1 - others[i, cells]))))
                far = np.nan_to_num(apart) >= gap * 2 / k
                c = int(np.nanargmax(np.where(np.isfinite(apart), apart, -1)))
                j = cols[cells[c]]
                mix = self._in_its_proportions(i, j, p.mean_by_class[self._mix_reference(i, j), :, j])
                apart_enough = bool(np.any(far & (np.nan_to_num(odds) >= odds_limit)))
                as_mix = apart_enough and bool(np.isfinite(mix) and abs(share[i, cells[c]] - mix) < gap * 2 / k)
                material = apart_enough and not as_mix
                category = self._value_name(item, j)
                reading = (f"as its mix of classes predicts ({mix:.0%} from the other sites' share in each class, in "
                           f"its proportions; {self._mix_words(i)}): {MIX_NOT_RECORDING}" if as_mix else
                           "another population, or a coding that differs (a yes/no reversed, categories mapped "
                           "otherwise)?")
                yield Finding(site, LENS, "category_share", item.name,
                              f"{site}'s {item.name}: {category} in {share[i, cells[c]]:.0%} of its rows, against "
                              f"{others[i, cells[c]]:.0%} at the other sites (on average): {reading}",
                              min(1.0, float(np.nanmin(p_cells)) * int(np.isfinite(p_cells).sum())),
                              float(share[i, cells[c]] - others[i, cells[c]]), f"share of {category}",
                              evidence={"category": category, "share": float(share[i, cells[c]]),
                                        "others_share": float(others[i, cells[c]]),
                                        **({"class_mix_share": mix} if np.isfinite(mix) else {})},
                              material=material)

    def _value_name(self, item: Item, j: int) -> str:
        """How a finding names the value of a discrete column that feature j holds: a category
        ('asymptomatic'), or a yes/no column's 1 ('sex = 1')."""
        if self.profile.kinds[j] == "categorical":
            return repr(self._category(self.profile.features[j], item.name or ""))
        return f"'{item.name} = 1'"

    @staticmethod
    def _category(feature: str, column: str) -> str:
        return feature[len(column) + 1:] if feature.startswith(column + "=") else feature

    def precision(self) -> Iterator[Finding]:
        # a cell only where the other sites record the column in whole numbers: elsewhere whole and
        # decimal values mix by nature (a 0-255 grey level's block means, an SD-scaled score), and
        # their shares say nothing about how a site recorded its values
        p, cols = self.profile, self.continuous
        observed = p.observed[:, cols].astype(np.float64)
        decimals = np.rint((1 - p.integer_share[:, cols]) * observed)  # NaN where withheld
        p_more, _ = random_effects_excess(decimals, observed)
        at_least, fewest, whole = (limit("precision", k) for k in ("share", "count", "others"))
        known = np.isfinite(decimals)
        counted, rows = np.where(known, decimals, 0.0), np.where(known, observed, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = decimals / observed
            rate = (counted.sum(0) - counted) / (rows.sum(0) - rows)  # the other sites' share, pooled
        for i, site in enumerate(self.sites):
            for c, j in enumerate(cols):
                if not rate[i, c] <= whole:
                    continue
                name, mine, others = p.features[j], float(share[i, c]), float(rate[i, c])
                yield Finding(site, LENS, "precision", name,
                              f"{mine:.0%} of {site}'s {name} values have decimals, where the other sites record "
                              f"whole numbers ({f'{others:.1%}' if others > 0 else 'none'} with decimals): converted from another unit, corrected "
                              "by a factor or an offset, or not the values as measured?",
                              float(p_more[i, c]), mine - others, "share of values",
                              evidence={"share": mine, "others_share": others},
                              material=bool(mine >= at_least and decimals[i, c] >= fewest))

    def resolution(self) -> Iterator[Finding]:
        # a site's step: the coarsest of the 1-2-5 ladder holding `whole` of its values that are not
        # 0 (zeros lie on every step and say nothing of it); its count on that step against the other
        # sites' counts on the same step. A cell only where the site has such a step (values measured
        # to more digits than the ladder's finest have none) and enough values off 0 to tell it
        p, cols = self.profile, self.continuous
        shares, observed = p.step_shares[:, :, cols], p.observed[:, cols].astype(np.float64)
        share_on, share_off_zero = on_steps(shares)  # NaN where withheld
        off_zero = observed * share_off_zero  # [sites, cols]: values not 0
        on = share_on * off_zero[:, None]  # [sites, steps, cols]: of them on each step
        whole, others_at_most, step_sd, fewest = (limit("resolution", k) for k in ("whole", "others", "step", "count"))
        enough = np.isfinite(off_zero) & (off_zero >= fewest)
        # within what a release's rounding may hide (each bin off by up to half its rounding step, in
        # values): a column mostly 0 has few values off it, and a bin rounded to the column's count
        # could otherwise move a step that holds them all below `whole`
        slack = ROUNDING / 2 * np.sqrt(np.clip(shares * (1 - shares), 0, None) * observed[:, None])
        on_slack = summed_on_steps(slack)
        with np.errstate(invalid="ignore", divide="ignore"):
            held = enough[:, None] & (on + on_slack >= whole * (off_zero - slack[:, ZERO])[:, None] - 1e-9)
        has_step = held.any(1)
        # only the columns where some site has a step are tested (none where every site measures finer)
        some = has_step.any(0)
        if not some.any():
            return
        has_step, held, on = has_step[:, some], held[:, :, some], on[:, :, some]
        enough, off_zero, cols = enough[:, some], off_zero[:, some], np.asarray(cols)[some]
        step = np.where(has_step, len(RESOLUTION_STEPS) - 1 - np.argmax(held[:, ::-1], axis=1), 0)  # the coarsest
        # every step's test at once ([sites, steps × cols]), each site then read at its own step
        sites, steps = len(self.sites), len(RESOLUTION_STEPS)
        tested = np.where(enough[:, None], on, np.nan).reshape(sites, -1)
        totals = np.broadcast_to(np.where(enough, off_zero, np.nan)[:, None], on.shape).reshape(sites, -1)
        p_all, rate_all = (a.reshape(sites, steps, -1) for a in random_effects_excess(tested, totals))
        at = step[:, None]
        p_more, others = (np.take_along_axis(a, at, axis=1)[:, 0] for a in (p_all, rate_all))
        mine = np.take_along_axis(on, at, axis=1)[:, 0]
        for i, site in enumerate(self.sites):
            for c, j in enumerate(cols):
                if not has_step[i, c]:
                    continue
                name, size = p.features[j], float(RESOLUTION_STEPS[step[i, c]])
                share, rate = min(float(mine[i, c] / off_zero[i, c]), 1.0), float(others[i, c])
                in_sd = size / self.yardstick[j] if self.yardstick[j] > 0 else float("nan")
                yield Finding(site, LENS, "resolution", name,
                              f"{share:.0%} of {site}'s {name} values (those not 0) are multiples of "
                              f"{self.value(j, size)}, against {rate:.0%} at the other sites: rounded, read from a "
                              "coarser scale or device, or converted from another unit?",
                              float(p_more[i, c]), share - rate, "share of values on the step",
                              evidence={"step": size, "share": share, "others_share": rate, "step_sd": in_sd},
                              material=bool(rate <= others_at_most and in_sd >= step_sd))

    def row_order(self) -> Iterator[Finding]:
        # the statistic is a rank correlation with the rows' place, so its sampling error is known
        # from the site's count alone (Spearman's on Fisher's z: about 1.06 / (n - 3), Fieller et al.
        # 1957; n less 3 per class, as pooled); the other sites' own orders (a file kept by date,
        # by ward) are the spread the site is compared with
        p, cols = self.profile, self.continuous
        r = p.order_correlation[:, cols]
        z = fisher_z(r)
        classes = np.where(np.isfinite(p.class_counts), p.class_counts >= 4, True).sum(1)[:, None]
        count = p.observed[:, cols].astype(np.float64) - 3 * classes
        own = np.where(count > 0, SPEARMAN_Z_VARIANCE / np.maximum(count, 1), np.nan)
        _, _, p_value = leave_one_out(np.where(count > 0, z, np.nan), own_variance=np.nan_to_num(own))
        others = np.tanh(others_mean(z))
        change = (r - others) * math.sqrt(12)  # a straight trend's change over the rows, in SDs of the values
        at_least = limit("row_order", "change")
        for i, site in enumerate(self.sites):
            for c, j in enumerate(cols):
                name, mine, theirs = p.features[j], float(r[i, c]), float(others[i, c])
                moved = float(change[i, c])
                yield Finding(site, LENS, "row_order", name,
                              f"{site}'s {name} {'rises' if moved > 0 else 'falls'} along the order of its rows "
                              f"(rank correlation with the row's place {mine:+.2f} within its classes, against "
                              f"{theirs:+.2f} at the other sites): about {abs(moved):.1f} SD from its first row to "
                              "its last. If the rows are in the order they were recorded, a device drifting or a "
                              "change partway through; if the file was sorted by this column, nothing is wrong",
                              float(p_value[i, c]), moved, "SDs over the rows",
                              evidence={"value": mine, "others": theirs},
                              material=bool(abs(moved) >= at_least))

    def duplicates(self) -> Iterator[Finding]:
        p = self.profile
        count, rows = p.duplicate_rows.astype(np.float64)[:, None], p.rows.astype(np.float64)[:, None]
        p_more, rate = over_dispersed_excess(count, rows)
        at_least, fewest, ratio = (limit("duplicates", k) for k in ("share", "count", "ratio"))
        for i, site in enumerate(self.sites):
            if not (np.isfinite(count[i, 0]) and rows[i, 0] > 0):
                continue
            share = float(count[i, 0] / rows[i, 0])
            yield Finding(site, LENS, "duplicates", None,
                          f"{int(count[i, 0])} of {site}'s {int(rows[i, 0])} rows ({share:.1%}) repeat another row "
                          f"exactly, against {float(rate[i, 0]):.1%} at the other sites: exported twice, or merged "
                          "with a copy?", float(p_more[i, 0]), share, "share of rows",
                          evidence={"count": int(count[i, 0]), "rows": int(rows[i, 0]),
                                    "others_share": float(rate[i, 0])},
                          material=bool(share >= at_least and count[i, 0] >= fewest and share >= ratio * rate[i, 0]))

    @cached_property
    def _far_out(self) -> dict[str, np.ndarray]:
        """[sites, continuous] each: the share of a site's values far out (`far_share`), its
        one-sided p against the other sites' and their mean share, and whether it is material (the
        range check's size)."""
        p, cols = self.profile, self.continuous
        observed = p.observed[:, cols].astype(np.float64)
        far = p.far_share[:, cols]
        p_more, rate = share_excess(far * observed, observed)
        at_least, fewest, ratio = (limit("range", k) for k in ("share", "count", "ratio"))
        with np.errstate(invalid="ignore"):
            material = (far >= at_least) & (far * observed >= fewest) & (far >= ratio * rate)
        return {"share": far, "p": p_more, "rate": rate, "material": material}

    def implausible_values(self) -> Iterator[Finding]:
        p, cols, out = self.profile, self.continuous, self._far_out
        far, p_more, rate = out["share"], out["p"], out["rate"]
        others_q99 = others_median(self.reference_quantiles[:, Q99, cols])
        for i, site in enumerate(self.sites):
            for c, j in enumerate(cols):
                name, share = p.features[j], float(far[i, c])
                yield Finding(site, LENS, "range", name,
                              f"{share:.1%} of {site}'s {name} values lie far outside its own middle range (beyond "
                              f"the quartiles by 3 interquartile ranges) against {float(rate[i, c]):.2%} at the other "
                              f"sites{self._q99_words(i, j, others_q99[i, c])}: implausible values (a unit slip "
                              "in some rows, spikes)?", float(p_more[i, c]), share, "share of values",
                              evidence=self._evidence(i, c) if np.isfinite(share) else {},
                              material=bool(out["material"][i, c]))

    def _q99_words(self, i: int, j: int, others: float) -> str:
        """'; its 99 % quantile is X against Y' where both are shared ('' where a disclosure policy
        keeps it: it rests on 1 % of the rows)."""
        mine = self.profile.quantiles[i, Q99, j]
        if not (np.isfinite(mine) and np.isfinite(others)):
            return ""
        return f"; its 99 % quantile is {self.value(j, mine)} against {self.value(j, others)}"

    # -- missing values ------------------------------------------------------------------------
    def missingness(self) -> Iterator[Finding]:
        """Counts at one site against the others' pooled rate, over-dispersed binomial."""
        p = self.profile
        items = self.items("feature")
        first = [item.members[0] for item in items]
        rows = p.rows.astype(np.float64)[:, None]
        missing = rows - p.observed[:, first]
        share = missing / np.maximum(rows, 1)
        p_more, rate = over_dispersed_excess(missing, np.repeat(rows, len(first), axis=1))
        more_limit, odds_limit = limit("missingness", "more"), limit("missingness", "odds")
        for i, site in enumerate(self.sites):
            for c, item in enumerate(items):
                others_share = float(rate[i, c])
                more = share[i, c] - others_share
                odds = (share[i, c] / max(1 - share[i, c], 1e-9)) / (others_share / max(1 - others_share, 1e-9))
                yield Finding(site, LENS, "missingness", item.name,
                              f"{site}'s {item.name} is missing in {share[i, c]:.0%} of its rows against "
                              f"{others_share:.0%} at the other sites", float(p_more[i, c]), float(more),
                              "share of rows", material=bool(more >= more_limit and odds >= odds_limit))

    def missing_by_class(self) -> Iterator[Finding]:
        """The χ² of missing × class within each site, its dispersion from every site and feature."""
        p = self.profile
        items = self.items("feature")
        first = [item.members[0] for item in items]
        by_class_rows = p.class_counts[:, :, None].astype(np.float64)
        by_class_missing = by_class_rows - p.observed_by_class[:, :, first]
        chi2, df = _class_dependence(by_class_missing, by_class_rows)
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            # features with nothing (or everything) missing show no dependence on the class either
            per_df = np.where(np.isfinite(chi2), chi2 / df, 0.0)
            class_dispersion = max(1.0, float(np.median(per_df)) / CHI2_1_MEDIAN) if per_df.size else 1.0
            class_p = stats.chi2.sf(chi2 / class_dispersion, df)
            class_share = np.where(by_class_rows > 0, by_class_missing / np.maximum(by_class_rows, 1), np.nan)
        gap_limit = limit("missing_by_class", "gap")
        for i, site in enumerate(self.sites):
            for c, item in enumerate(items):
                if not np.isfinite(class_p[i, c]):
                    continue  # nothing or everything missing: no dependence to test
                shares = [class_share[i, k, c] for k in range(len(p.classes))]
                gap = float(np.nanmax(shares) - np.nanmin(shares))
                listed = ", ".join(f"'{name}' {v:.0%}" for name, v in zip(p.classes, shares) if np.isfinite(v))
                yield Finding(site, LENS, "missing_by_class", item.name,
                              f"{site}'s {item.name} is missing for some classes and not others ({listed}): missing "
                              "not at random?", float(class_p[i, c]), gap, "gap in missing share",
                              material=bool(gap >= gap_limit))

    # -- labels ---------------------------------------------------------------------------------
    @cached_property
    def class_profiles(self) -> np.ndarray:
        """[sites, classes, features]: each class's mean in the site's within-class SDs, centred on
        the site's mean of the class means (NaN where a class is absent)."""
        p = self.profile
        within = within_class_sd(p)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            means = p.mean_by_class
            centred = means - np.nanmean(means, axis=1, keepdims=True)
            return centred / np.where(within > 0, within, np.nan)[:, None, :]

    @cached_property
    def consensus(self) -> np.ndarray:
        """[sites, classes, features]: for each site, the other sites' median class profile (a
        median, so that one other site with wrong labels does not turn the pattern a site is
        compared with). Where sites lack classes (a federation split by label), profiles centred on
        different classes do not line up: the median is then taken of profiles placed against the
        pattern itself (`class_pattern`)."""
        profiles = self.class_profiles
        if np.isfinite(profiles).all():  # every class everywhere: the first median is the fixed point
            return others_median(profiles)
        return np.stack([class_pattern(np.delete(profiles, i, axis=0)) for i in range(self.n)])

    @cached_property
    def relation(self) -> np.ndarray:
        """[sites, features]: each site's class profile along the direction the others show (two
        classes: last minus first class)."""
        profiles = self.class_profiles
        n_classes = profiles.shape[1]
        relation = np.full((self.n, profiles.shape[2]), np.nan)
        for i in range(self.n):
            if n_classes == 2:
                relation[i] = profiles[i, 1] - profiles[i, 0]
                continue
            consensus = self.consensus[i]
            norm = np.sqrt(np.nansum(consensus**2, axis=0))
            with np.errstate(invalid="ignore", divide="ignore"):
                relation[i] = np.nansum(profiles[i] * consensus, axis=0) / np.where(norm > 0, norm, np.nan)
            # a site without some classes has a relation over fewer of them: not comparable
            relation[i, ~np.isfinite(profiles[i]).all(0)] = np.nan
        return relation

    @cached_property
    def relation_variance(self) -> np.ndarray:
        """[sites, features]: the sampling variance of each site's `relation`, a standardised
        difference of class means: Σ w²/n over its classes (w: the class's weight in the relation)
        plus relation² / 2N. A site of 8 rows shows a class difference of several SDs by chance."""
        counts = self.profile.observed_by_class.astype(np.float64)  # [sites, classes, features]
        with np.errstate(invalid="ignore", divide="ignore"):
            per_class = np.where(counts > 0, self._relation_weights**2 / counts, 0.0)
            total = counts.sum(1)
            variance = per_class.sum(1) + self.relation**2 / (2 * np.maximum(total, 1))
        return np.where(np.isfinite(variance), variance, 0.0)

    @cached_property
    def _relation_weights(self) -> np.ndarray:
        """[sites, classes, features] each class mean's weight in the site's `relation` (two classes:
        1 each; more: the others' pattern, of unit length)."""
        counts = self.profile.observed_by_class
        if counts.shape[1] == 2:
            return np.ones(counts.shape)
        consensus = self.consensus
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.nan_to_num(consensus / np.sqrt(np.nansum(consensus**2, axis=1, keepdims=True)))

    @cached_property
    def relation_noise(self) -> np.ndarray:
        """[sites, features] the variance the noise of a site's release adds to its `relation`: its
        class means' (`release_noise.class_noise`) in its within-class SDs, weighted as the relation
        weighs them. 0 without noise."""
        if not noisy_sites(self.profile):
            return np.zeros(self.relation.shape)
        within = within_class_sd(self.profile)
        with np.errstate(invalid="ignore", divide="ignore"):
            variance = (self._relation_weights**2 * self._class_noise[0]).sum(1) / within**2
        return np.where(np.isfinite(variance), variance, 0.0)

    def label_relations(self) -> Iterator[Finding]:
        p = self.profile
        if len(p.classes) < 2:
            return
        relation = self.relation
        own = self.relation_variance + self.excess_variance(self.relation_noise)
        deviation, t, p2 = leave_one_out(relation, own_variance=own, suspect=self.labels_suspect)
        others_relation = others_mean(relation)
        first, last = p.classes[0], p.classes[-1]
        gap, informative, share = (limit("label_relation", k) for k in ("gap", "informative", "share"))
        for i, site in enumerate(self.sites):
            for item in self.items("feature"):
                cells = []
                for j in item.members:
                    if not np.isfinite(relation[i, j]):
                        continue
                    others = float(others_relation[i, j])
                    reverses = np.sign(relation[i, j]) != np.sign(others) and abs(others) >= informative
                    how = "reverses" if reverses else "differs"
                    what = (f"'{last}' minus '{first}': {relation[i, j]:+.2f} SD against {others:+.2f}"
                            if len(p.classes) == 2 else
                            f"{relation[i, j]:+.2f} against {others:+.2f} along the others' class pattern")
                    if not reverses and abs(relation[i, j]) > abs(others):
                        how = "stronger" if abs(others) >= informative else "a relation where the others show none"
                    named = self._member_name(item, j)
                    cells.append(Finding(site, LENS, "label_relation", item.name,
                                         f"{site}'s {named} relates to the label differently from the other sites "
                                         f"({how}; {what})", float(p2[i, j]), float(deviation[i, j]), "SDs",
                                         # weaker, reversed, stronger, or one the others do not have:
                                         # a class-dependent artefact (a device used for one class) is all
                                         # of these, depending on its direction
                                         material=bool(abs(deviation[i, j]) >= max(gap, share * abs(others)))))
                if cells:
                    yield _strongest_category(cells)

    def _member_name(self, item: Item, j: int) -> str:
        """Feature j as a cell of `item` names it: the feature, or its column and category."""
        if len(item.members) == 1:
            return self.profile.features[j]
        return f"{item.name} ('{self._category(self.profile.features[j], item.name or '')}')"

    def class_shifts(self) -> Iterator[Finding]:
        """Per feature and class (three classes or more): the class's place at the site against
        the other sites' for that class — one class's values shifted (a device or a protocol used
        for that class only), which a projection on the others' class pattern can miss."""
        # three classes or more (`min_classes`): with two, the centred profiles are ± half the class
        # difference, which label_relations tests
        p = self.profile
        profiles, deviation, p2 = self._class_places  # [sites, classes, features] each
        gap = limit("class_shift", "gap")
        for i, site in enumerate(self.sites):
            for item in self.items("feature"):
                cells = []
                for j in item.members:
                    tested = np.isfinite(p2[i, :, j])
                    if not tested.any():
                        continue
                    k = int(np.argmin(np.where(tested, p2[i, :, j], np.inf)))
                    named = self._member_name(item, j)
                    others = profiles[i, k, j] - deviation[i, k, j]
                    cells.append(Finding(
                        site, LENS, "class_shift", item.name,
                        f"{site}'s {named}: its '{p.classes[k]}' rows lie {profiles[i, k, j]:+.2f} within-class SDs "
                        f"from the middle of its classes, against {others:+.2f} at the other sites (one class's "
                        "values shifted: a device or a protocol used for that class?)",
                        min(1.0, float(p2[i, k, j]) * int(tested.sum())), float(deviation[i, k, j]),
                        "within-class SDs", evidence={"class": p.classes[k]},
                        material=bool(abs(deviation[i, k, j]) >= gap)))
                if cells:
                    yield _strongest_category(cells)

    @cached_property
    def _class_places(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """[sites, classes, features] each: every class's place at each site in the frame the site is
        compared in, its deviation from the other sites' places there and its two-sided p
        (`leave_one_out` over the sites of each class). A site's class profile is centred on its own
        classes; a federation split by label (a site without some classes) is compared in the frame of
        the tested site's classes: every other site is re-centred on them, a class it lacks placed
        where the sites' pattern puts it (`class_pattern`) relative to its classes. Without that, a
        site lacking one class made the check untestable everywhere. With every class at every site
        there is one frame, the profiles as they are."""
        profiles = self.class_profiles
        has = np.isfinite(profiles).any(2)  # [sites, classes]
        places, deviation, p2 = (np.full(profiles.shape, np.nan) for _ in range(3))
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            pattern = class_pattern(profiles)
            pattern = pattern - np.nanmean(pattern, axis=0, keepdims=True)
            # a class a site lacks, where the pattern puts it relative to the classes it has
            filled = np.where(np.isfinite(profiles), profiles,
                              pattern[None] + np.nanmean(profiles - pattern[None], axis=1, keepdims=True))
            # each class mean's sampling variance in within-class SDs, 1/n: a class of 12 rows at a
            # site is off by 0.3 SD by chance, and label skew makes such classes common
            noise = np.where(np.isfinite(profiles), 1.0 / np.maximum(self.profile.observed_by_class, 1), np.nan)
            for frame in {tuple(np.flatnonzero(row)) for row in has if row.sum() >= 2}:
                classes = list(frame)
                own = (has[:, classes].all(1) & (has.sum(1) == len(classes)))  # sites of this frame
                recentred = np.where(own[:, None, None], profiles,
                                     profiles - np.nanmean(filled[:, classes], axis=1, keepdims=True))
                # of a place (a class mean less the mean of the frame's class means), at the frame's sites
                m = len(classes)
                spread = np.nansum(noise[:, classes], axis=1) / m**2  # [sites, features]
                for k in classes:
                    own_variance = (1 - 2 / m) * np.nan_to_num(noise[:, k]) + spread
                    tested = leave_one_out(recentred[:, k, :], own_variance=own_variance, suspect=self.labels_suspect)
                    places[own, k] = recentred[own, k]
                    deviation[own, k], p2[own, k] = tested[0][own], tested[2][own]
        return places, deviation, p2

    @cached_property
    def _compared(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Per site: the classes it is compared over (those it released, at least two, that the
        others show), its class profiles and the others' pattern over them, both centred on those
        classes [compared classes, features] (a site split off by label is compared over the
        classes it has), and the others' pattern of every class, centred the same way."""
        out = []
        for i in range(self.n):
            mine, pattern = self.class_profiles[i], self.consensus[i]
            classes = np.flatnonzero(np.isfinite(mine).any(1) & np.isfinite(pattern).any(1))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                mine = mine[classes] - np.nanmean(mine[classes], axis=0, keepdims=True)
                pattern = pattern - np.nanmean(pattern[classes], axis=0, keepdims=True)
            out.append((classes, mine, pattern[classes], pattern))
        return out

    @cached_property
    def _labels(self) -> dict[str, Any]:
        """Site-level label statistics over the features the others show related to the label,
        over the classes each site is compared over (`_compared`)."""
        agreement = np.full(self.n, np.nan)  # Fisher z of the correlation with the others' class pattern
        slope = np.full((self.n, self.class_profiles.shape[2]), np.nan)  # the site's pattern / the others'
        informative_of: list[np.ndarray] = []
        least = limit("labels_permuted", "informative")
        for i, (classes, mine, theirs, _) in enumerate(self._compared):
            if classes.size < 2:  # nothing to compare
                informative_of.append(np.array([], dtype=np.int64))
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                spread = np.nanmax(np.abs(theirs), axis=0)
            informative = np.flatnonzero(np.isfinite(spread) & (spread >= least) & np.isfinite(mine).all(0))
            informative_of.append(informative)
            if informative.size < 3:
                continue
            with np.errstate(invalid="ignore", divide="ignore"):
                slope[i, informative] = ((mine * theirs).sum(0) / (theirs**2).sum(0))[informative]
            mine, theirs = mine[:, informative].ravel(), theirs[:, informative].ravel()
            if mine.std() > 0 and theirs.std() > 0:
                agreement[i] = fisher_z(np.corrcoef(mine, theirs)[0, 1])
        # relative to how strongly the other sites' own patterns follow theirs (a median pattern is
        # smoother than any one site's)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            relative = slope / others_median(slope)
            strength = np.array([float(np.nanmedian(relative[i, informative])) if informative.size else np.nan
                                 for i, informative in enumerate(informative_of)])
        strength[~np.isfinite(agreement)] = np.nan
        _, agree_t, agree_p2 = leave_one_out(agreement)
        return {"agreement": agreement, "strength": strength, "informative": informative_of,
                "agree_p": one_sided(agree_t, agree_p2, -1)[:, 0], "weak_p": weakness_p(strength)}

    def labels_permuted(self) -> Iterator[Finding]:
        p, n_classes = self.profile, len(self.profile.classes)
        if n_classes < 2:
            return
        least, share = limit("labels_permuted", "features"), limit("labels_permuted", "share")
        evidence = {i: e for i, e in enumerate(self.permuted_evidence) if e is not None}
        wrong = self._likely_relabelled(evidence)
        strong = limit("labels_permuted", "strength")
        for i, site in enumerate(self.sites):
            judged_with, judged = "", self
            if wrong is not None and i != wrong[0] and (again := wrong[1].permuted_evidence[i]) is not None:
                evidence[i], judged = again, wrong[1]
                judged_with = (f"; judged with {self.sites[wrong[0]]}'s classes taken as renamed, as its own labels "
                               "look wrong and that explains the other sites best")
            if i not in evidence:
                if np.isfinite(self.class_profiles[i]).any():  # released: the comparison itself failed
                    yield Finding(site, LENS, "labels_permuted", None, "", float("nan"), untestable=NO_PATTERN)
                continue
            p_value, order, wins, m, r = evidence[i]
            if n_classes == 2:
                what = f"'{p.classes[0]}' and '{p.classes[1]}' look swapped"
            else:
                pairs = [f"'{p.classes[k]}' → '{p.classes[order[k]]}'" for k in range(n_classes) if order[k] != k]
                what = ("its classes look renamed (" + ", ".join(pairs) + ")" if pairs
                        else "its classes relate to the features differently")
            compared = self._labels["informative"][i].size
            # renamed labels keep the features' class differences, in another order; labels that say
            # nothing (all redrawn) leave them flat, whose direction then is chance (it read as
            # 'swapped' for every second such site): only a renaming that restores a relation as
            # strong as the others' is one
            looks_renamed = r < 0 or (m >= least and wins / max(m, 1) >= share)
            renamed = judged.renamed_strength(i, order) if looks_renamed else float("nan")
            restores = not np.isfinite(renamed) or renamed >= strong
            yield Finding(site, LENS, "labels_permuted", None,
                          f"{site}'s labels look wrong: {what}"
                          + (" — its features relate to its labels the other way round from the other sites"
                             if r < 0 else "")
                          + f" (renamed, {wins} of the {m} features that tell those classes apart match the other "
                          f"sites' pattern better; as labelled, correlation {r:+.2f} with their pattern over "
                          f"{compared} features{judged_with})",
                          p_value, r, "correlation with the others' pattern",
                          evidence={"order": list(order), "features": m,
                                    **({"renamed_strength": renamed} if np.isfinite(renamed) else {})},
                          material=bool(looks_renamed and restores))

    def renamed_strength(self, i: int, order: Sequence[int]) -> float:
        """Site i's relation to its labels with its classes renamed by `order` (its class k taken as
        order[k]), as a share of the others' (`_labels`' strength; NaN where not comparable)."""
        checks = self if list(order) == sorted(order) else self._relabelled(i, order)
        return float(checks._labels["strength"][i])

    @cached_property
    def labels_suspect(self) -> np.ndarray:
        """[sites] whose labels look wrong or noisy beyond doubt before any correction (p below
        the two passes' OUTLIER_P): no reference for the other sites' relations to the label, as a
        site whose labels are noisy would widen every other site's yardstick. Only beyond doubt: a
        borderline site going in and out of the references would move every other site's cells."""
        permuted = np.array([e is not None and e[0] < OUTLIER_P for e in self.permuted_evidence])
        return permuted | (np.nan_to_num(self._labels["weak_p"], nan=1.0) < OUTLIER_P)

    @cached_property
    def permuted_evidence(self) -> list[tuple[float, tuple[int, ...], int, int, float] | None]:
        """[sites] each site's `_permuted_evidence` (its renaming search runs once per site)."""
        return [self._permuted_evidence(i) for i in range(self.n)]

    def _permuted_evidence(self, i: int) -> tuple[float, tuple[int, ...], int, int, float] | None:
        """Site i's evidence that its classes are renamed: (p, the best renaming's order, its wins
        of m features, the correlation with the others' pattern as labelled); None when the site
        has nothing to compare. p is the smallest of three tests (× 3): the agreement with the
        others' pattern against the other sites' agreements, the best renaming (binomial × the
        renamings tried: within the site, so that few sites still have power) and, with two
        classes, the reversal projection."""
        labels = self._labels
        if not np.isfinite(labels["agreement"][i]):
            return None
        order, wins, m, tried, p_best = self._best_renaming(i, labels["informative"][i])
        p_renamed = min(1.0, p_best * tried)
        p_reversed = (self._reversal_p(i, self.relation, labels["informative"][i]) if len(self.profile.classes) == 2
                      else 1.0)
        p_value = min(1.0, 3 * min(float(np.nan_to_num(labels["agree_p"][i], nan=1.0)), p_renamed, p_reversed))
        return p_value, order, wins, m, float(np.tanh(labels["agreement"][i]))

    def _likely_relabelled(self, evidence: dict[int, tuple]) -> tuple[int, Checks] | None:
        """The site whose labels look wrong and, set right, explain the other sites best, and the
        checks with its classes renamed (None: leaving the labels as they are explains them best).
        A site with wrong labels is part of every other site's reference: with few sites a correct
        site looks wrong against it (with two comparable sites, each against the other), or the
        others' pattern cancels and a site cannot be compared at all. Each suspect's renaming is
        undone in turn, and the choice (or none) after which the fewest other sites still look
        wrong, then the fewest cannot be compared, then the least evidence is left (the sum of
        their -log p), is taken — the labels' analogue of leaving an outlier out of the references
        (`leave_one_out`). A choice must leave fewer sites looking wrong or not comparable than
        the next best, or evidence "margin" times smaller (in p); otherwise (two comparable
        sites, each explaining the other) nothing tells which one is wrong: none is taken, and
        both sites' findings stand."""
        suspect = limit("labels_permuted", "suspect")
        suspects = sorted((i for i, e in evidence.items() if e[0] < suspect and list(e[1]) != sorted(e[1])
                           and len(set(e[1])) == len(e[1])), key=lambda i: evidence[i][0])
        if not suspects:
            return None

        def left(judged: dict[int, tuple | None], j: int) -> tuple[int, int, float]:
            others = [e for i, e in judged.items() if i != j]
            p_values = [e[0] for e in others if e is not None]
            return (sum(v < suspect for v in p_values), sum(e is None for e in others),
                    -float(np.sum(np.log(np.maximum(p_values, 1e-300)))))

        comparable = [i for i in range(self.n) if np.isfinite(self.class_profiles[i]).any()]
        choices: list[tuple[tuple[int, int, float], int | None, Checks | None]] = [
            (left({i: evidence.get(i) for i in comparable}, suspects[0]), None, None)]
        for j in suspects[:MAX_SUSPECTS]:
            renamed = self._relabelled(j, evidence[j][1])
            choices.append((left({i: renamed.permuted_evidence[i] for i in comparable}, j), j, renamed))
        choices.sort(key=lambda choice: choice[0])
        (score, j, renamed), runner_up = choices[0], choices[1][0]
        # two sites that explain each other as well (no third site to tell): both stay suspect
        clear = score[:2] < runner_up[:2] or runner_up[2] - score[2] >= math.log(limit("labels_permuted", "margin"))
        return (j, renamed) if j is not None and clear else None

    def _relabelled(self, j: int, order: Sequence[int]) -> Checks:
        """These checks with site j's classes renamed by `order` (its class k taken as order[k]):
        only the label statistics built from the class profiles are recomputed."""
        copy = object.__new__(Checks)
        copy.__dict__.update({k: v for k, v in self.__dict__.items() if k not in LABEL_CACHES})
        profiles = self.class_profiles.copy()
        profiles[j] = np.nan
        for k, target in enumerate(order):
            profiles[j, target] = self.class_profiles[j, k]
        copy.__dict__["class_profiles"] = profiles
        return copy

    def labels_weak(self) -> Iterator[Finding]:
        if len(self.profile.classes) < 2:
            return
        labels, below = self._labels, limit("labels_weak", "ratio")
        for i, site in enumerate(self.sites):
            strength = labels["strength"][i]
            if np.isfinite(strength):
                how = (f"relate to its labels {strength:.0%} as strongly as at the other sites" if strength > 0 else
                       f"no longer relate to its labels as at the other sites ({strength:+.0%} of their strength)")
                # none at all is the weakest relation (all labels redrawn): a pattern that runs the
                # other way is the permuted-labels check's, which explains this one where it finds it
                yield Finding(site, LENS, "labels_weak", None,
                              f"{site}'s features {how}: are its labels noisy, or defined differently?",
                              float(labels["weak_p"][i]), float(strength), "relative strength",
                              material=bool(strength < below))

    def class_balance(self) -> Iterator[Finding]:
        p = self.profile
        n_classes = len(p.classes)
        if n_classes < 2:
            return
        counts, rows = p.class_counts.astype(np.float64), p.rows.astype(np.float64)[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            share = counts / rows
            logit = np.log((counts + 0.5) / (rows - counts + 0.5))
            sampling = 1 / (counts + 0.5) + 1 / (rows - counts + 0.5)  # the logit's binomial variance at the site
        tested = [n_classes - 1] if n_classes == 2 else list(range(n_classes))  # two classes: one share says both
        deviation, _, p2 = leave_one_out(logit[:, tested], own_variance=self.excess_variance(sampling[:, tested]))
        others_share = others_mean(share)
        # the gap for two classes; with k classes a class's share is about 1/k, so its gap scales with
        # 2/k (HAR's six activities at about 17 % each: leaving out 80 % of one class moved its share
        # 13 points, at 5 times the odds, and never reached 15)
        gap, odds_limit = limit("class_balance", "gap") * 2 / n_classes, limit("class_balance", "odds")
        for i, site in enumerate(self.sites):
            if not np.isfinite(p2[i]).any():
                continue
            with np.errstate(invalid="ignore", divide="ignore"):  # a class no other site has: odds infinite
                odds = np.exp(np.abs(logit[i] - np.log(others_share[i] / np.maximum(1 - others_share[i], 1e-9))))
                material = bool(np.any((np.abs(share[i] - others_share[i]) >= gap) & (odds >= odds_limit)))
            k = int(np.nanargmax(np.abs(share[i] - others_share[i])))
            released = np.isfinite(share[i])  # a class too small to release is left out, and said so
            mine = ", ".join(f"'{c}' {v:.0%}" for c, v, r in zip(p.classes, share[i], released) if r)
            theirs = ", ".join(f"'{c}' {v:.0%}" for c, v, r in zip(p.classes, others_share[i], released) if r)
            unreleased = [f"'{c}'" for c, r in zip(p.classes, released) if not r]
            yield Finding(site, LENS, "class_balance", None,
                          f"{site}'s classes: {mine}, against {theirs} at the other sites (on average)"
                          + (f"; {', '.join(unreleased)} not released at this site (too few rows)" if unreleased else "")
                          + ": another population, another label definition, or rows of one class lost?",
                          min(1.0, float(np.nanmin(p2[i])) * int(np.isfinite(p2[i]).sum())),
                          float(share[i, k] - others_share[i, k]),
                          f"share of '{p.classes[k]}'", evidence={"shares": share[i].tolist(),
                                                                  "others_shares": others_share[i].tolist()},
                          material=material)

    def _reversal_p(self, i: int, relation: np.ndarray, informative: np.ndarray) -> float:
        """Two classes: how far site i's label relations point against the others' direction.
        The projection of its standardised class differences on the others' mean direction, over
        the informative features, is tested for being below 0 with its sampling SD from the site's
        own class counts: sqrt(1/n0 + 1/n1) per feature, combined over the features with the
        absolute values of the site's correlations between them (1 where a pair's correlation was
        not released: as if perfectly correlated, so never too small)."""
        if informative.size == 0:
            return 1.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            others = np.nanmedian(np.delete(relation, i, axis=0), axis=0)[informative]
        mine = relation[i, informative]
        keep = np.isfinite(others) & np.isfinite(mine)
        norm = float(np.sqrt((others[keep] ** 2).sum()))
        n0, n1 = (float(c) for c in np.nan_to_num(self.profile.class_counts[i][:2]))
        if not keep.any() or norm == 0 or min(n0, n1) < 1:
            return 1.0
        projection = float((mine[keep] * others[keep]).sum()) / norm
        weights = np.abs(others[keep]) / norm
        together = weights @ self._correlation_bound(i, informative[keep]) @ weights
        return float(stats.norm.cdf(projection / math.sqrt((1 / n0 + 1 / n1) * together)))

    def _correlation_bound(self, i: int, features: np.ndarray) -> np.ndarray:
        """[features, features]: |correlation| between each pair at site i where the site released
        it, else 1 (the bound that holds for any pair)."""
        bound = np.ones((features.size, features.size))
        correlation = getattr(self.profile, "correlation", None)
        if correlation is None or not len(correlation):
            return bound
        position = {j: c for c, j in enumerate(self.continuous)}
        at = np.array([position.get(int(j), -1) for j in features])
        known = at >= 0
        block = np.abs(correlation[i][np.ix_(at[known], at[known])])
        bound[np.ix_(known, known)] = np.where(np.isfinite(block), block, 1.0)
        np.fill_diagonal(bound, 1.0)
        return bound

    def _best_renaming(self, i: int, informative: np.ndarray) -> tuple[tuple[int, ...], int, int, int, float]:
        """The renaming of site i's classes that fits the others' class pattern best: a reordering
        of the classes it is compared over (not the identity), or one of them taking the name of a
        class the site has none of (its rows are another class's, under this class's name). Judged
        over the informative features that tell the classes it moves apart (the others' pattern
        at least the "informative" limit apart among them): in how many of those m it fits better
        than the site's own labels (a binomial against a coin; the smallest p wins). Returns the
        order of every class (order[k]: the class that site class k looks like), the wins, m, how
        many renamings were tried, and the binomial p."""
        classes, mine, _, pattern = self._compared[i]
        n = classes.size
        order = list(range(pattern.shape[0]))
        others = [int(c) for c in np.flatnonzero(np.isfinite(pattern).any(1)) if c not in classes]
        reorders = [classes[list(perm)] for perm in (itertools.permutations(range(n)) if n <= MAX_PERMUTED_CLASSES
                                                     else (_swap(n, a, b) for a, b in itertools.combinations(range(n), 2)))
                    if list(perm) != list(range(n))]
        taken = [np.where(np.arange(n) == a, c, classes) for a in range(n) for c in others]
        targets = np.array(reorders + taken, dtype=np.int64).reshape(-1, n)  # [renamings, compared classes]
        if not len(targets) or not informative.size:
            return tuple(order), 0, 0, len(targets), 1.0
        # contiguous copies: a column selection is strided, and the renamings' arrays built from it
        # below took 3-5 times as long
        mine, pattern = np.ascontiguousarray(mine[:, informative]), np.ascontiguousarray(pattern[:, informative])
        # each compared class's squared distance to every class's pattern, once: a renaming's is a
        # pick of n of them (six classes are 719 renamings)
        distance = (mine[:, None] - pattern[None]) ** 2  # [compared classes, every class, features]
        own = distance[np.arange(n), classes].sum(0)
        renamed = distance[np.arange(n)[None], targets].sum(1)  # [renamings, features]
        # the classes a renaming moves, from and to: their pattern's range per feature says whether
        # the feature tells them apart (fmax/fmin skip a class the others' pattern lacks a value for);
        # renamings that move the same classes share it, so it is taken once per such set
        moved = targets != classes[None]
        among = np.zeros((len(targets), pattern.shape[0]), dtype=bool)  # [renamings, every class]
        renaming, position = np.nonzero(moved)
        among[renaming, classes[position]] = among[renaming, targets[moved]] = True
        sets, of_renaming = np.unique(among, axis=0, return_inverse=True)
        highest = np.fmax.reduce(np.where(sets[:, :, None], pattern[None], -np.inf), axis=1)
        lowest = np.fmin.reduce(np.where(sets[:, :, None], pattern[None], np.inf), axis=1)
        tells = ((highest - lowest) >= limit("labels_permuted", "informative"))[of_renaming.ravel()]
        wins, m = ((renamed < own[None]) & tells).sum(1), tells.sum(1)
        p = np.where(m > 0, stats.binom.sf(wins - 1, np.maximum(m, 1), 0.5), 1.0)
        best = int(np.lexsort((-wins, p))[0])  # the smallest p; of equals, the most wins
        for a, b in zip(classes, targets[best]):
            order[int(a)] = int(b)
        return tuple(order), int(wins[best]), int(m[best]), len(targets), float(p[best])

    # -- correlations ---------------------------------------------------------------------------
    @cached_property
    def others_rank_correlation(self) -> np.ndarray:
        """[sites, continuous, continuous]: the other sites' median rank correlation of each pair (one
        sort over sites serves the correlation, copied-column and exchanged-column checks)."""
        return others_median(self.profile.rank_correlation)

    def correlation(self) -> Iterator[Finding]:
        """Per continuous feature: the site's rank correlations with the other features projected on
        the other sites' median rank correlations, over the partners those correlate with. Of ranks,
        not of values: a few rows far out make a site's Pearson correlations look lost (on vehicle's
        rows dealt to 16 sites at random, 95 findings of this check at 78 of 160 sites where none
        differs; of ranks, none: benchmarks/random_split_null.py)."""
        p, cols = self.profile, self.continuous
        r = p.rank_correlation  # [sites, continuous, continuous]
        if r.shape[1] < 2:
            return
        reference = self.others_rank_correlation
        least, partners = limit("correlation", "informative"), limit("correlation", "partners")
        off_diagonal = ~np.eye(len(cols), dtype=bool)[None]
        used = (np.abs(np.nan_to_num(reference)) >= least) & off_diagonal & np.isfinite(r)
        with np.errstate(invalid="ignore", divide="ignore"):
            weight = np.where(used, reference, 0.0)
            projection = (np.where(used, r, 0.0) * weight).sum(2) / (weight**2).sum(2)
            gap = np.where(used, np.abs(r - reference), 0.0).sum(2) / used.sum(2)
        enough = used.sum(2) >= partners
        projection = np.where(enough, projection, np.nan)
        own, among = against_partners(r, reference, used)
        # sampling at the site's count: a rank correlation's Fisher z varies by about 1.06 / (n − 3); the
        # partners' correlations are taken as varying together (they go with one another), the
        # projection's on r's scale, the difference of two means of z's as two independent ones
        count = p.observed[:, cols].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            z_variance = np.where(count > 3, SPEARMAN_Z_VARIANCE / (count - 3), np.nan)
            slope = (np.abs(weight) * (1 - np.where(used, r, 0.0) ** 2)).sum(2) / (weight**2).sum(2)
        p_projection = one_sided(*leave_one_out(projection, own_variance=self.excess_variance(
            np.where(enough, z_variance * slope**2, np.nan)))[1:], -1)
        p_alone = one_sided(*leave_one_out(np.where(enough, own - among, np.nan), own_variance=self.excess_variance(
            np.where(enough, 2 * z_variance, np.nan)))[1:], -1)
        p_lower = either_test(p_projection, p_alone)
        at_most, apart = limit("correlation", "projection"), limit("correlation", "gap")
        for i, site in enumerate(self.sites):
            for c, j in enumerate(cols):
                if not enough[i, c] and np.isfinite(r[i, c]).any():
                    continue  # the other sites show it correlated with too few features: nothing to compare
                name = p.features[j]
                k = int(np.argmax(np.where(used[i, c], np.abs(reference[i, c]), -1.0)))
                partner = (f"e.g. with {p.features[cols[k]]} rank correlation {r[i, c, k]:+.2f} against "
                           f"{reference[i, c, k]:+.2f}")
                how = "varies against" if projection[i, c] < 0 else "no longer varies with"
                still = (f", while those features still go together there ({np.tanh(among[i, c]):+.2f} among them)"
                         if np.isfinite(among[i, c]) else "")
                yield Finding(site, LENS, "correlation", name,
                              f"{site}'s {name} {how} the features it goes with at the other sites (its correlations "
                              f"{projection[i, c]:+.2f} of theirs; {partner}){still}: a channel replaced by noise, or "
                              "another column?", float(p_lower[i, c]), float(projection[i, c]), "share of the others' "
                              "correlations", evidence={"partner": p.features[cols[k]], "r": float(r[i, c, k]),
                                                        "others_r": float(reference[i, c, k]),
                                                        "partners_r": float(np.tanh(among[i, c]))},
                              material=bool(projection[i, c] <= at_most and gap[i, c] >= apart))

    def copied_columns(self) -> Iterator[Finding]:
        """Per continuous feature: its partner that the site shows far closer to identical than the
        others do (Fisher z of |r| at the site against the others' median), tested against the other
        sites' same statistic. Of a pair, the column whose correlations with the rest no longer match
        the others' of that column is the copy (a column filled from another carries the source's).
        Of ranks: a copy's rank correlation is 1 as its r is, while one row far out in both columns
        makes r ±1 where their ranks do not agree (vehicle's rows dealt back to its sensors at
        random: 18 sensor-deals of 230 had a Pearson "copy", among them 21 rows whose r was 0.9994
        and rank correlation 0.992; the untouched sensor 04 two); and over enough rows that ranks
        agree by no chance (`rows`)."""
        p, cols = self.profile, self.continuous
        r = p.rank_correlation  # [sites, continuous, continuous]
        if r.shape[1] < 2:
            return
        reference = self.others_rank_correlation
        partner, excess = closest_partner(r, reference)
        p_upper = self._drawn_upper_p(excess, "copied_column")
        identical, others_at_most, fewest = (limit("copied_column", k) for k in ("identical", "others", "rows"))
        for i, site in enumerate(self.sites):
            for c, j in enumerate(cols):
                k = int(partner[i, c])
                name, source = p.features[j], p.features[cols[k]]
                site_r, others_r = float(r[i, c, k]), float(reference[i, c, k])
                rows = min(p.observed[i, j], p.observed[i, cols[k]])  # NaN where withheld: not enough
                same = abs(site_r) >= identical and abs(others_r) <= others_at_most and bool(rows >= fewest)
                if same:  # which of the two is the copy: only asked of a pair that is one column
                    own = _pattern_agreement(r[i], reference[i], c, k)
                    theirs = _pattern_agreement(r[i], reference[i], k, c)
                    likelier_copy = not own > theirs  # ties and unknowns: either may be the copy
                    copy, kept = (name, source) if likelier_copy else (source, name)
                    message = (f"{site}'s {name} and {source} are the same column there (rank correlation "
                               f"{site_r:+.2f}; at the other sites {others_r:+.2f}): one filled from the other? {copy}'s correlations "
                               f"with the other features are no longer the other sites' {copy}'s, so {copy} looks like "
                               f"the copy of {kept}")
                elif abs(site_r) >= identical and abs(others_r) <= others_at_most:
                    likelier_copy = False
                    message = (f"{site}'s {name} and {source} agree in rank there (rank correlation {site_r:+.2f}; at "
                               f"the other sites {others_r:+.2f}), but over too few rows to tell a copy from chance "
                               f"(fewer than {fewest:.0f})")
                else:
                    likelier_copy = False
                    message = (f"{site}'s {name} is closest to {source} against the other sites (rank correlation "
                               f"{site_r:+.2f}; at the other sites {others_r:+.2f}): not a copy (a copy is ±1 over "
                               f"{fewest:.0f} rows or more where the others' is not)")
                yield Finding(site, LENS, "copied_column", name, message, float(p_upper[i, c]), site_r, "correlation",
                              evidence={"partner": source, "r": site_r, "others_r": others_r},
                              material=bool(same and likelier_copy))

    @cached_property
    def _exchange(self) -> dict[str, np.ndarray]:
        """Per site and continuous feature [sites, continuous]: `best_exchange` at each site
        against the other sites' median rank correlations. Of ranks, as the
        copy's: on vehicle's rows dealt back to its sensors at random, the Pearson correlations of
        sensors under 30 rows gave p < 0.001 in 66 times the nominal share of cells."""
        r, reference = self.profile.rank_correlation, self.others_rank_correlation
        return best_exchange(r, reference)

    @cached_property
    def _correlation_moments(self) -> dict[str, Moments]:
        """The copy's and the exchange's statistics where nothing differs, at each site's size
        (`sampling.rank_correlation_moments`): the best of many partners rises and spreads at a
        small site by chance alone. A site of 16 rows among sites of 300, rows of one Gaussian
        copula (tests/test_exchanged_columns.py): p < 0.01 in 69 % of its copy cells and 5 % of its
        exchange cells without this, 0.3 % and 0.6 % with it. Vehicle's rows dealt back to its
        sensors at random: at sensors under 30 rows the exchange's p < 0.001 went from 76-83 to 34
        times the nominal share of cells, the copy's stayed at 45 (vehicle's columns agree in rank
        more often at a few rows than a Gaussian copula's: the exchange's deviations there vary
        twice as much as drawn). Each site's rows: the median count of its continuous features'."""
        common = median_along_first(self.profile.rank_correlation)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a site releasing no count: none drawn
            rows = np.nanmedian(self.profile.observed[:, self.continuous], axis=1)
        return rank_correlation_moments(common, rows, {
            "copied_column": lambda site, reference: closest_partner(site, reference)[1],
            "exchanged_columns": lambda site, reference: best_exchange(site, reference)["gain"]})

    def _drawn_upper_p(self, values: np.ndarray, kind: str) -> np.ndarray:
        """One-sided (larger) p of a statistic of the sites' rank correlations, less what it reads
        at the site's size where nothing differs, its own variance there beyond the others' added
        (`_correlation_moments`)."""
        drawn = self._correlation_moments[kind]
        centred = values - drawn.offset
        own, least = self.drawn_variances(centred, others_mean(centred), drawn)
        _, t, p2 = leave_one_out(centred, own_variance=own, least_variance=least)
        return one_sided(t, p2, +1)

    def exchanged_columns(self) -> Iterator[Finding]:
        """Per continuous feature: the partner whose exchange with it makes both columns'
        correlations with the other features follow the other sites' of the other column, by how
        much (the smaller gain of the two), tested against the other sites' same statistic. An
        exchange of two columns on the same scale leaves every value check blind; their relations
        to the other features still say which column is which."""
        p, cols = self.profile, self.continuous
        if len(cols) < 4:
            return
        x = self._exchange
        p_upper = self._drawn_upper_p(x["gain"], "exchanged_columns")
        at_least, fits, values, fewest = (limit("exchanged_columns", name) for name in ("gain", "fit", "values", "rows"))
        for i, site in enumerate(self.sites):
            for c, j in enumerate(cols):
                if not np.isfinite(x["gain"][i, c]):
                    continue  # no partner's correlations to compare with (too few features released)
                k = int(x["partner"][i, c])
                name, partner = p.features[j], p.features[cols[k]]
                rows = min(p.observed[i, j], p.observed[i, cols[k]])  # NaN where withheld: not enough
                # the gain over each rival reading of a low own fit: the column as it is, and turned round
                # (a sensor's polarity: HAR's axis correlations, -0.8 of the others' at one subject, fitted
                # some other column's +0.8 by chance; a subject's -0.59 against +0.62 flickered with the
                # reference, in 10 of the tuning half's cases)
                exchange = bool(x["mutual"][i, c] and x["gain"][i, c] >= at_least
                                and x["fit"][i, c] >= max(fits, at_least - x["own"][i, c])
                                and x["partner_fit"][i, c] >= max(fits, at_least - x["partner_own"][i, c]))
                if exchange:  # the values must not say otherwise (asked of the few such pairs only)
                    exchange = not self._values_contradict(i, j, cols[k], values)
                material = exchange and bool(rows >= fewest)
                fit, own = x["fit"][i, c], x["own"][i, c]
                if material:
                    message = (f"{site}'s {name} and {partner} look exchanged: at {site}, {name}'s rank correlations with "
                               f"the other features follow the other sites' {partner}'s (fit {fit:+.2f}, against "
                               f"{own:+.2f} with their {name}'s) and {partner}'s follow their {name}'s (fit "
                               f"{x['partner_fit'][i, c]:+.2f}, against {x['partner_own'][i, c]:+.2f}), and the "
                               "values do not say otherwise: two columns swapped in the export?")
                elif exchange:
                    message = (f"{site}'s {name} and {partner} relate to the other features as the other sites' "
                               f"{partner} and {name} do (fit {fit:+.2f}, against {own:+.2f} with their {name}'s), but "
                               f"over too few rows to tell an exchange from chance (fewer than {fewest:.0f})")
                else:
                    message = (f"{site}'s {name} follows the other sites' {partner} at best {x['gain'][i, c]:+.2f} "
                               f"better than its own rank correlations (fit {fit:+.2f} against {own:+.2f}): not an "
                               "exchange (both columns must follow each other's, each the other's best match, and "
                               "the values must fit)")
                yield Finding(site, LENS, "exchanged_columns", name, message, float(p_upper[i, c]),
                              float(x["gain"][i, c]), "gain in the correlations' fit",
                              evidence={"partner": partner, "fit": float(fit), "own": float(own),
                                        "partner_fit": float(x["partner_fit"][i, c]),
                                        "partner_own": float(x["partner_own"][i, c])},
                              material=material)


def against_partners(r: np.ndarray, reference: np.ndarray, used: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[sites, continuous] twice, from correlations `r` [sites, continuous, continuous], the other
    sites' median `reference` and each feature's partners `used` (same shape): the mean Fisher z of
    the feature's correlations with its partners at the site, and of its partners' correlations
    among themselves there (NaN where none is released), each signed as at the other sites. Their
    difference sets a channel that alone lost its relations (replaced by noise, another column)
    apart from a site whose features all go together more loosely: vehicle's sensors differ in how
    tightly their features go together (median |r| 0.06 to 1.0 for the same features), so a noise
    channel's correlations at one sensor matched another sensor's as measured against the others."""
    off_diagonal = ~np.eye(r.shape[1], dtype=bool)[None]
    known = np.isfinite(r) & np.isfinite(reference) & off_diagonal  # a pair the others released: its sign known
    signed = np.where(known, np.sign(np.nan_to_num(reference)) * fisher_z(np.nan_to_num(r)), 0.0)
    partners = used.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        own = (partners * signed).sum(2) / partners.sum(2)
        # the partners' pairs: sum over k, l in a feature's partners of z[k, l] (a matrix product per site)
        among = ((partners @ signed) * partners).sum(2) / ((partners @ known.astype(np.float64)) * partners).sum(2)
    return np.where(np.isfinite(own), own, np.nan), np.where(np.isfinite(among), among, np.nan)


def closest_partner(r: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[..., continuous] each feature's partner that rank correlations `r` [..., continuous,
    continuous] show closest to identical against `reference` (same shape: Fisher z of |r| less
    the reference's), and by how much (NaN where no pair is known): the copy's statistic."""
    off_diagonal = ~np.eye(r.shape[-1], dtype=bool)
    with np.errstate(invalid="ignore"):
        closer = np.where(off_diagonal & np.isfinite(r) & np.isfinite(reference),
                          fisher_z(np.abs(r)) - fisher_z(np.abs(reference)), -np.inf)
    partner = np.argmax(closer, axis=-1)
    excess = np.take_along_axis(closer, partner[..., None], axis=-1)[..., 0]
    return partner, np.where(np.isfinite(excess), excess, np.nan)


def best_exchange(site: np.ndarray, reference: np.ndarray) -> dict[str, np.ndarray]:
    """[..., continuous] each feature's best exchange partner at a site whose rank correlations are
    `site` [..., continuous, continuous] (one site, or a stack: the draws of one), against the other
    sites' `reference` [..., continuous, continuous]: the partner whose swap most improves how both
    columns' correlations with the other features follow the reference's of the other column, that
    gain (the smaller of the two columns'; NaN where none is known), the fits as the other column and
    as their own (`correlation_fit`), and whether the partner's own best partner is the feature (a
    swap points both ways)."""
    m = site.shape[-1]
    every = np.arange(m)
    fit = correlation_fit(site, reference)  # [..., c, x]: the site's c against the others' x
    own = np.diagonal(fit, axis1=-2, axis2=-1)
    with np.errstate(invalid="ignore"):
        # both columns better as the other
        gain = np.minimum(fit - own[..., :, None], np.swapaxes(fit, -1, -2) - own[..., None, :])
    gain[~np.isfinite(gain)] = -np.inf
    gain[..., every, every] = -np.inf
    partner = np.argmax(gain, axis=-1) if m else np.zeros(gain.shape[:-1], dtype=np.int64)

    def at_partner(values: np.ndarray) -> np.ndarray:
        return np.take_along_axis(values, partner[..., None], axis=-1)[..., 0]

    best = at_partner(gain)
    return {"gain": np.where(np.isfinite(best), best, np.nan), "partner": partner,
            "mutual": np.take_along_axis(partner, partner, axis=-1) == every, "fit": at_partner(fit),
            "partner_fit": at_partner(np.swapaxes(fit, -1, -2)), "own": own,
            "partner_own": np.take_along_axis(own, partner, axis=-1)}


def correlation_fit(site: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """[..., continuous, continuous]: how far a site's correlations of feature c with the other
    features follow the other sites' of feature x: the Pearson correlation over the features l
    other than c and x of site[..., c, l] and reference[..., x, l], over the pairs both released
    (NaN with fewer than 3). Each matrix's diagonal is left out, so l = c drops out on the site's
    side and l = x on the others'; both ways the pair's own correlation plays no part. One matrix
    product per sum (masked where a correlation was withheld); a stack of sites' (or draws')
    matrices at once."""
    s, r = np.array(site, dtype=np.float64), np.array(reference, dtype=np.float64)
    m = s.shape[-1]
    diagonal = np.eye(m, dtype=bool)
    s[..., diagonal], r[..., diagonal] = np.nan, np.nan
    s_known, r_known = np.isfinite(s), np.isfinite(r)
    s0, r0 = np.nan_to_num(s), np.nan_to_num(r)
    r0_t = np.swapaxes(r0, -1, -2)
    if (s_known == ~diagonal).all() and (r_known == ~diagonal).all():
        # every correlation released (the usual case): each masked sum is a row's sum less the one
        # term that drops out (l = x on the site's side, l = c on the others'), one product in all
        n = m - 1.0 - ~diagonal
        sum_s, sum_r = s0.sum(-1)[..., :, None] - s0, r0.sum(-1)[..., None, :] - r0_t
        sum_ss, sum_rr = (s0**2).sum(-1)[..., :, None] - s0**2, (r0**2).sum(-1)[..., None, :] - r0_t**2
    else:
        s_mask, r_mask = s_known.astype(np.float64), np.swapaxes(r_known, -1, -2).astype(np.float64)
        n = s_mask @ r_mask
        sum_s, sum_r = s0 @ r_mask, s_mask @ r0_t
        sum_ss, sum_rr = (s0**2) @ r_mask, s_mask @ (r0_t**2)
    with np.errstate(invalid="ignore", divide="ignore"):
        covariance = s0 @ r0_t - sum_s * sum_r / n
        variances = (sum_ss - sum_s**2 / n) * (sum_rr - sum_r**2 / n)
        fit = covariance / np.sqrt(variances)
    return np.where((n >= 3) & (variances > 0), fit, np.nan)


def either_test(*p_values: np.ndarray) -> np.ndarray:
    """The p-value of the most significant of several tests of one cell, Bonferroni-corrected for
    the tests that could be computed there (one alone: its own p; none: NaN)."""
    stacked = np.stack(np.broadcast_arrays(*p_values))
    tried = np.isfinite(stacked).sum(0)
    with warnings.catch_warnings():  # no test at all: NaN is the answer
        warnings.simplefilter("ignore", RuntimeWarning)
        smallest = np.nanmin(stacked, axis=0)
    return np.where(tried > 0, np.minimum(1.0, smallest * tried), np.nan)


def weakness_p(strength: np.ndarray) -> np.ndarray:
    """[sites] one-sided p-values of each site's relation to its labels being weaker than the
    others' (`strength`: a share of theirs; NaN: not comparable), by the leave-one-out t over sites
    on its log. On the log because label noise scales the class differences by a factor (a share s
    of the labels redrawn among k classes: about 1 - s), and the sites' own strengths differ by
    factors (vehicle's sensors 0.6 to 1.5): on the share itself a sensor at 0.02 of the others
    stood 1-2 SDs out. None, or a relation the other way round, counts as WEAKEST."""
    with np.errstate(invalid="ignore", divide="ignore"):
        log_strength = np.where(np.isfinite(strength), np.log(np.maximum(strength, WEAKEST)), np.nan)
    _, t, p2 = leave_one_out(log_strength)
    return one_sided(t, p2, -1)[:, 0]


def _pattern_agreement(site: np.ndarray, reference: np.ndarray, c: int, k: int) -> float:
    """How far a feature's correlations with the others at a site (`site` [continuous,
    continuous]) follow the other sites' (`reference`) for the same feature: their correlation
    over the partners both have, c and k left out (NaN with fewer than 3)."""
    keep = np.isfinite(site[c]) & np.isfinite(reference[c])
    keep[[c, k]] = False
    if keep.sum() < 3 or np.ptp(site[c, keep]) == 0 or np.ptp(reference[c, keep]) == 0:
        return float("nan")
    return float(np.corrcoef(site[c, keep], reference[c, keep])[0, 1])


def within_class_sd(profile: Profile) -> np.ndarray:
    """[sites, features]: each site's SD within its classes, pooled over them (each class's SD
    weighted by its n − 1, over the classes whose SD the site released: a class it has no rows of,
    or withheld, adds no degrees of freedom; NaN where none is released)."""
    sd = profile.sd_by_class.astype(np.float64)
    freedom = np.where(np.isfinite(sd), np.maximum(profile.observed_by_class.astype(np.float64) - 1, 0), 0.0)
    return np.sqrt(pooled_variance(sd**2, freedom))


def pooled_log_sd_variance(freedom: np.ndarray, variance: np.ndarray, kurtosis: np.ndarray) -> np.ndarray:
    """[sites, features]: the sampling variance of the log of an SD pooled over classes (`pooled_variance`)
    whose degrees of freedom are `freedom` (each class's n - 1), variances `variance` and kurtosis
    `kurtosis` [sites, classes, features] (NaN: normal, 3): each class's variance varies by
    var(s²)/σ⁴ = 2/(n - 1) + (kurtosis - 3)/n, each weighted by its part of the pooled variance, a
    quarter of it for the log SD (normal classes of equal variance: 1 / (2 Σ (n - 1)))."""
    kurtosis = np.where(np.isfinite(kurtosis), kurtosis, 3.0)
    part = freedom * np.nan_to_num(variance)
    with np.errstate(invalid="ignore", divide="ignore"):
        relative = np.where(freedom > 0, 2 / np.maximum(freedom, 1) + (kurtosis - 3) / (freedom + 1), 0.0)
        return 0.25 * (part**2 * relative).sum(1) / part.sum(1) ** 2


def pooled_variance(variance: np.ndarray, freedom: np.ndarray) -> np.ndarray:
    """[sites, features]: variances [sites, classes, features] pooled over the classes, each
    weighted by its degrees of freedom `freedom` (a class with none adds nothing; NaN where no
    class has any)."""
    total = freedom.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (freedom * np.nan_to_num(variance)).sum(1) / total, np.nan)


def _strongest_category(cells: list[Finding]) -> Finding:
    """One cell for a feature's column: of a categorical column's categories, the strongest, its p
    × the categories tried (a single feature: its own cell)."""
    # called once per feature and site (HAR: 15,900 times), most often with one cell: plain floats,
    # no numpy scalar calls (they took 0.25 s of HAR's data lens)
    strongest = cells[0] if len(cells) == 1 else min(cells, key=lambda f: (2.0 if math.isnan(f.p) else f.p,
                                                                           not f.material))
    strongest.p = min(1.0, strongest.p * len(cells)) if math.isfinite(strongest.p) else strongest.p
    return strongest


def _probability(p: float) -> int:
    """The index of probability p among the profile's PROBABILITIES."""
    return int(np.flatnonzero(np.isclose(PROBABILITIES, p))[0])


_RELEASED = (0.5,)  # a feature's values released at all: its median (every released group has one)


def _resolution(released: np.ndarray, axes: Sequence[str], members: Sequence[int], needed: Sequence[float]) -> str:
    """Why a check found too few of a site's quantiles: the resolution its disclosure policy
    released them at (fewer quantiles for fewer values; none beyond its outermost blocks)."""
    at = np.moveaxis(released, axes.index("probability"), 0)[..., list(members)]
    shared = np.flatnonzero(np.isfinite(at.reshape(len(PROBABILITIES), -1)).all(1))
    low, high = PROBABILITIES[shared[0]], PROBABILITIES[shared[-1]]
    what = "its median only" if shared.size == 1 else f"its quantiles from {low:.0%} to {high:.0%} only"
    wanted = ", ".join(f"{p:.0%}" for p in needed)
    return f"not shared at the resolution this check reads ({wanted}): {what}, too few values for blocks further out"


def tied_share(quantiles: np.ndarray, value: float, starts: np.ndarray | None = None) -> float:
    """The share of a group's values at exactly `value` that its shared quantiles [PROBABILITIES]
    (NaN where not shared) show; NaN where it shared none, 0 where none equals it (a continuous
    group). As computed (`starts` None), quantiles equal to it at probabilities a to b put the share
    between b − a and the span from the shared probability below a (0 where none) to the one above
    b (1 where none). Released from blocks (`starts`: `disclosure.block_starts` of the group's count
    under its policy), a quantile equal to it lies at a block's centre or between two blocks whose
    means both equal it: those blocks hold it, and each block beside them may in part. The
    estimate is the middle of the bounds."""
    shared = np.isfinite(quantiles)
    if not shared.any():
        return float("nan")
    equal = np.flatnonzero(shared & (quantiles == value))
    if not equal.size:
        return 0.0
    if starts is None:
        below = PROBABILITIES[shared & (PROBABILITIES < PROBABILITIES[equal[0]])]
        above = PROBABILITIES[shared & (PROBABILITIES > PROBABILITIES[equal[-1]])]
        inner = PROBABILITIES[equal[-1]] - PROBABILITIES[equal[0]]
        outer = (above[0] if above.size else 1.0) - (below[-1] if below.size else 0.0)
        return float((inner + outer) / 2)
    n = int(starts[-1])
    centres, edges = block_probabilities(starts, n), starts / n
    at = set()
    for probability in PROBABILITIES[equal]:
        a = int(np.searchsorted(centres, probability + 1e-12, side="right")) - 1
        at.update([a] if abs(probability - centres[a]) <= 1e-12 or a + 1 == len(centres) else [a, a + 1])
    low, high = min(at), max(at)
    inner = edges[high + 1] - edges[low]
    beside = (edges[low] - edges[low - 1] if low > 0 else 0.0) + \
        (edges[high + 2] - edges[high + 1] if high + 2 < len(edges) else 0.0)
    return float(inner + beside / 2)


def repeated_quantiles(q: np.ndarray) -> np.ndarray:
    """[sites, features] from quantiles [sites, probabilities, features]: the lowest value that two
    neighbouring shared quantiles equal (a point mass they already show), NaN where none does."""
    same = (q[:, 1:] == q[:, :-1]) & np.isfinite(q[:, 1:])
    first = np.argmax(same, axis=1)  # [sites, features]
    value = np.take_along_axis(q[:, 1:], first[:, None], axis=1)[:, 0]
    return np.where(same.any(1), value, np.nan)


def as_ratio(log_ratio: float) -> float:
    """A log ratio as the ratio a message says (NaN for NaN; inf beyond what a float holds: a
    regression's residual of 10³ on log SDs is a ratio, not an overflow)."""
    if not np.isfinite(log_ratio):
        return float("nan")
    return math.exp(log_ratio) if log_ratio < 700 else float("inf")


def _shape(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[sites, features] Bowley skew and log tail ratio from quantiles [sites, probabilities, features]."""
    low, median, high = q[:, LOWER], q[:, MEDIAN], q[:, UPPER]
    q05, q95 = q[:, Q05], q[:, Q95]
    with np.errstate(invalid="ignore", divide="ignore"):
        iqr = np.where(high - low > 0, high - low, np.nan)
        skew = (high + low - 2 * median) / iqr
        tails = np.log((q95 - q05) / iqr)
    return skew, np.where(np.isfinite(tails), tails, np.nan)


# each value statistic of a site's released quantiles [sites, PROBABILITIES, features] and SDs
# [sites, features], the location in the yardstick's units: what `sampling` draws the moments of
QUANTILE_STATISTICS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "location": lambda q, sd: q[:, MEDIAN],
    "spread": lambda q, sd: np.log(np.where(tied_middle(q), np.nan, robust_sd(q, sd))),
    "skew": lambda q, sd: _shape(q)[0], "tail": lambda q, sd: _shape(q)[1]}


def _conversion(match: Match) -> dict:
    """A unit finding's evidence of its conversion: y = a·x + b, the formula, and the units it names
    (empty where the conversion names none, or no known conversion fits)."""
    conversion = match.conversion
    return {"a": match.a, "b": match.b,
            "formula": conversion.formula() if conversion is not None else f"× {match.a:.4g}",
            "site_unit": conversion.source if conversion is not None else "",
            "others_unit": conversion.target if conversion is not None else ""}


def relation_to_labels(profile: Profile, classes: tuple[int, int] | None = None) -> np.ndarray:
    """[sites, features]: how each site's features relate to its labels, in SDs within a class
    (two classes: last minus first; more: along the other sites' pattern; `classes` (a, b): class
    a's mean minus class b's, NaN at a site without either) — what the label checks compare, for a
    figure of it."""
    checks = Checks(profile)
    if classes is None:
        return checks.relation
    a, b = classes
    return checks.class_profiles[:, a] - checks.class_profiles[:, b]


def class_pattern(profiles: np.ndarray, steps: int = 200, tolerance: float = 1e-9) -> np.ndarray:
    """[classes, features]: the median class pattern of sites' class profiles [sites, classes,
    features], each centred on the classes its site has (NaN where it has none). A site without
    some classes has its profile centred elsewhere than one with all of them, so each is placed
    against the pattern (moved, per feature, so that its classes sit where the pattern centred on
    every class puts them, on average) and the median taken again, until the pattern settles.
    With every class at every site nothing moves: the first median is the pattern."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        pattern = np.nanmedian(profiles, axis=0)
        for _ in range(steps):
            centred = pattern - np.nanmean(pattern, axis=0, keepdims=True)
            placed = profiles - np.nanmean(profiles - centred[None], axis=1, keepdims=True)
            settled, pattern = pattern, np.nanmedian(placed, axis=0)
            if not np.nanmax(np.abs(pattern - settled), initial=0.0) > tolerance:
                break
    return pattern


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
