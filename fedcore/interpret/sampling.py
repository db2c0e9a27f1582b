"""What a site's size does to the statistics of its values that the data lens reads.

A site's median, robust SD and shape carry the sampling error of its own rows, and of the way its
release reads them: a site of 10 to 19 rows releases one block, whose mean stands for its median
and whose plain SD for its spread; one of 20 to 29 two blocks, whose median is read between their
means. Normal theory (a median's π/2 / n) misses both, and misses what heavy tails, a mixture of
classes or a few steps of a coarse scale do to a robust SD of 13 values. Vehicle's rows dealt back
at random to its 23 sensors (7 to 534 rows): the variance of a feature's log robust SD was 1.3 to
1.9 times (median over features; a tenth of them 4 times) what normal theory gives, at every size; a
17-row sensor's "median" of a right-skewed feature, the mean of its values, read 0.5 within-site
SDs above a large sensor's median, with an SD twice what normal theory gives (0.58 against 0.30).

Where nothing differs a site's values come from the distribution the others' come from, and what
its statistic reads at its size, and how much that varies, are then known: those of the statistic
of n values drawn from that distribution, released as the site's policy releases n values. The
reader draws them:

- the common distribution of a feature is the median over sites of each released quantile (a
  minority of broken sites does not move it), in the yardstick's units, linear in normal scores
  between the released probabilities and beyond the outermost;
- its values far out (the sites' median share beyond their far-out fences, below and above) are
  drawn beyond every fence (FAR): the sites' quantiles hold them at their own fences, and a small
  site's fences, from its own few values, often reach further than a large site's; how far the
  values lie is released nowhere, so each drawn group's own fences hold them, as a site's do;
- DRAWS groups of n values for each size a site has (sizes beyond LARGEST at LARGEST, the variance
  scaled by LARGEST / n: the blocks are then at their most and the error falls as 1 / n), fenced
  and released as the site releases its own (its minimum count; without noise: what noise adds is
  `release_noise`'s);
- the statistic over the draws, held within WINSOR half-widths of its middle 68 %: its mean less
  its mean at LARGEST is the offset of a site of that size (what it reads where nothing differs),
  its variance the site's sampling variance, and each side's (twice the mean square of the draws
  on that side of their mean: a skewed statistic varies more on one side, `Moments`).

The kurtosis of a distribution given by its quantiles, held at its far-out fences
(`fenced_kurtosis`), is read from the same lines: what an SD of a group drawn from it varies by (the
checks within classes read it for each class's common distribution).

The draws come from one fixed seed, so one profile always gives one check-up. Everything here is
read from released quantiles, far-out shares and the sites' policies, public to the reader of the
profile: it is post-processing of the release and reveals nothing more.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np
from scipy import special

from fedcore.interpret.disclosure import Policy, location
from fedcore.interpret.profile import PROBABILITIES, Profile, _fenced, _fences, _summary

DRAWS = 64  # groups drawn per size: the variance's own relative error is about sqrt(2 / DRAWS), 18 %
LARGEST = 200  # the largest size drawn; beyond it the blocks are at their most (MAX_BLOCKS of 10)
SEED = 23
# where a value far out is drawn, in the yardstick's units: beyond every fence, so that each drawn
# group's own fence holds it, as a site's holds its own (the release says how many, never how far)
FAR = 1e6
# the draws' statistic is held within WINSOR half-widths of its middle 68 % (ROBUST: an SD where it
# is normal) of their centre before its mean and variance are taken: a group of 17 drawn with 5
# values far out (1 in 200 at a far share of 6 %) has its own fences beyond them and a median of
# 10⁴, which says that such a group's median is far off, not by how much. Held at 5, the draws'
# heavier tails still count (a tenth of them 5 half-widths out adds 2.5 times the variance)
ROBUST = (100 * special.ndtr(-1), 100 * special.ndtr(1))
WINSOR = 5.0

# a statistic of released quantiles [groups, PROBABILITIES, columns] and SDs [groups, columns]
Statistic = Callable[[np.ndarray, np.ndarray], np.ndarray]


def median_along_first(values: np.ndarray) -> np.ndarray:
    """np.nanmedian(values, axis=0) from one sort: numpy takes a masked array's median for an axis
    shorter than 600, which was an eighth of HAR's check-up (the quantile distances of every pair of
    columns a shifted cell is compared over) and most of `common_quantiles`' time."""
    ordered = np.sort(values, axis=0)  # NaN last
    count = (~np.isnan(values)).sum(0, keepdims=True)
    low, high = (np.take_along_axis(ordered, np.maximum(position, 0), axis=0)[0]
                 for position in ((count - 1) // 2, count // 2))
    return np.where(count[0] > 0, (low + high) / 2, np.nan)


def common_quantiles(quantiles: np.ndarray) -> np.ndarray:
    """[PROBABILITIES, columns] the median over sites of each released quantile [sites,
    PROBABILITIES, columns], made non-decreasing; one no site released (the 1 % quantile rests on
    no block of 10 below 500 values) continued along the line in normal scores through the two
    nearest released (NaN in a column with fewer than two)."""
    middle = median_along_first(quantiles)  # a quantile no site released: NaN
    grid = special.ndtri(PROBABILITIES)[:, None]
    released = np.isfinite(middle)
    index = np.arange(len(grid))[:, None]
    # each probability's two released neighbours (below the first or above the last released: the
    # two outermost released on its side); a released one is its own, twice
    before = np.maximum.accumulate(np.where(released, index, -1), axis=0)
    after = np.flip(np.minimum.accumulate(np.flip(np.where(released, index, len(grid)), 0), axis=0), 0)
    columns = np.arange(middle.shape[1])
    first, last = after[0], before[-1]
    second = after[np.minimum(first + 1, len(grid) - 1), columns]
    next_to_last = before[np.maximum(last - 1, 0), columns]
    a = np.where(before < 0, first, np.where(after >= len(grid), next_to_last, before))
    b = np.where(before < 0, second, np.where(after >= len(grid), last, after))
    a, b = np.clip(a, 0, len(grid) - 1), np.clip(b, 0, len(grid) - 1)
    low, high = middle[a, columns], middle[b, columns]
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(a == b, 0.0, (high - low) / (grid[b, 0] - grid[a, 0]))
        line = low + (grid - grid[a, 0]) * slope
    enough = released.sum(0) >= 2  # a column with fewer than two released: as it is
    middle = np.where(enough & ~released, line, middle)
    return np.fmax.accumulate(middle, axis=0)


def draw(common: np.ndarray, n: int, rng: np.random.Generator, far: np.ndarray | None = None) -> np.ndarray:
    """[n, DRAWS, columns] values drawn from the distribution whose quantiles at PROBABILITIES are
    `common` [PROBABILITIES, columns]: linear in normal scores between them and beyond the
    outermost two; with `far` [2, columns], the shares of values far out below and above, those
    beyond every fence instead (FAR)."""
    scores = rng.standard_normal((n, DRAWS, common.shape[1]))
    values = at_scores(common, scores)
    if far is None:
        return values
    with np.errstate(divide="ignore"):
        below, above = special.ndtri(far[0]), special.ndtri(1 - far[1])
    return np.where(scores < below, -FAR, np.where(scores > above, FAR, values))


def at_scores(common: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """[..., columns] the values at normal `scores` [..., columns] of the distribution whose
    quantiles at PROBABILITIES are `common` [PROBABILITIES, columns]: linear in normal scores
    between them and beyond the outermost two."""
    grid = special.ndtri(PROBABILITIES)
    place = np.clip(np.searchsorted(grid, scores) - 1, 0, len(grid) - 2)
    weight = (scores - grid[place]) / (grid[place + 1] - grid[place])
    column = np.arange(common.shape[1])
    lower, upper = common[place, column], common[place + 1, column]
    return lower + (upper - lower) * weight


# normal scores at which a distribution's kurtosis is read, and each one's weight (its density)
KURTOSIS_SCORES = np.linspace(-8.0, 8.0, 321)
KURTOSIS_WEIGHTS = special.softmax(-KURTOSIS_SCORES**2 / 2)  # the normal density, summing to 1


def fenced_kurtosis(common: np.ndarray) -> np.ndarray:
    """[columns] the kurtosis (normal: 3) of the distribution whose quantiles at PROBABILITIES are
    `common` [PROBABILITIES, columns] (as `draw` draws from it), its values held within its own
    far-out fences as a release holds a class's (`profile._fenced`): what the SD of a group drawn
    from it varies by, var(s²)/σ⁴ = 2/(n − 1) + (kurtosis − 3)/n (NaN where not released)."""
    scores = np.broadcast_to(KURTOSIS_SCORES[:, None], (len(KURTOSIS_SCORES), common.shape[1]))
    weights = KURTOSIS_WEIGHTS[:, None]
    with np.errstate(invalid="ignore"):
        low, high = _fences(common)
        values = np.clip(at_scores(common, scores), low, high)
        centred = values - (weights * values).sum(0)
        variance = (weights * centred**2).sum(0)
        return np.where(variance > 0, (weights * centred**4).sum(0) / variance**2, np.nan)


def released(x: np.ndarray, min_count: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The SDs [columns] and quantiles [PROBABILITIES, columns] a site releases for the columns of
    x [rows, columns] (no missing values) under a minimum count without noise, or (None) as
    computed: `profile.site_profile`'s path for its overall values."""
    computed = _summary(x, shares=False)
    if min_count is None:
        return computed["sd"], computed["quantiles"]
    _, sd, quantiles = location(_fenced(x, computed["quantiles"]), PROBABILITIES, Policy(min_count))
    return sd, quantiles


def far_shares(far_share: np.ndarray, far_above_share: np.ndarray) -> np.ndarray:
    """[2, columns] the shares of a feature's values far out below and above its fences: the
    median over sites of each side's released share [sites, columns] (the lower: far out less far
    above); 0 where not released. In a profile recorded before the side was shared (NaN), half
    of the far-out share on each side."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a share no site released: 0
        above = np.nanmedian(far_above_share, axis=0)
        below = np.nanmedian(np.maximum(far_share - far_above_share, 0.0), axis=0)
        either = np.nan_to_num(np.nanmedian(far_share, axis=0))
    unsided = ~np.isfinite(above)
    return np.stack([np.where(unsided, either / 2, np.nan_to_num(below)), np.where(unsided, either / 2, above)])


class Moments(NamedTuple):
    """A statistic's sampling moments at each site's size, each [sites, columns]."""

    offset: np.ndarray  # its expected value less its expected value at LARGEST
    below: np.ndarray  # the variance of a two-piece normal below its mean, and above it: at 13 values
    above: np.ndarray  # a clustered feature's log SD falls far below more often than above

    @property
    def variance(self) -> np.ndarray:
        """Its sampling variance: the mean of the two sides' (each twice its side's mean square)."""
        return (self.below + self.above) / 2


SIDES = ("below", "above")


def sampling_moments(profile: Profile, columns: np.ndarray, scale: np.ndarray, quantiles: np.ndarray,
                     statistics: Mapping[str, Statistic]) -> dict[str, Moments]:
    """Name → Moments, each [sites, columns]: each statistic's expected value at each site's count
    of values of each of `columns` less its expected value at LARGEST, and its sampling variance
    there, as a whole and on each side of its mean, where nothing differs (module docstring): drawn from the common
    distribution of the sites' `quantiles` [sites, PROBABILITIES, columns] in units of `scale`
    [columns] (the location's yardstick), released at the site's minimum count. The variance is
    NaN and the offset 0 where a site has too few values for a release, or the common
    distribution is not released."""
    common = common_quantiles(quantiles) / scale
    far = far_shares(profile.far_share[:, columns], profile.far_above_share[:, columns])
    counts = profile.observed[:, columns]
    minimums = [_min_count(profile, site) for site in profile.sites]
    least = np.array([m or 2 for m in minimums])[:, None]
    drawn_at = np.minimum(counts, LARGEST)
    sizes = {(m, int(n)) for m in set(minimums) for n in [*np.unique(drawn_at), LARGEST] if n >= (m or 2)}
    # [sites, columns] per size drawn: the cells it stands for
    held = {(m, n): (drawn_at == n) & (counts >= least) & np.array([own == m for own in minimums])[:, None]
            for m, n in sizes}
    drawn_moments: dict[tuple, dict[str, tuple[np.ndarray, ...]]] = {}
    usable = np.isfinite(common).all(0)
    rng = np.random.default_rng(SEED)
    for min_count, n in sorted(sizes, key=lambda key: (key[0] or 0, key[1])):
        drawn = np.flatnonzero(usable & (held[(min_count, n)].any(0) | (n == LARGEST)))
        moments = drawn_moments[(min_count, n)] = {name: tuple(np.full(len(columns), np.nan) for _ in range(3))
                                                   for name in statistics}
        if not drawn.size:
            continue
        x = draw(common[:, drawn], n, rng, None if min_count is None else far[:, drawn])
        sd, q = released(x.reshape(n, -1), min_count)
        sd = sd.reshape(DRAWS, drawn.size)
        q = q.reshape(len(PROBABILITIES), DRAWS, drawn.size).transpose(1, 0, 2)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a statistic never finite: NaN
            for name, statistic in statistics.items():
                for whole, part in zip(moments[name], _of_draws(statistic(q, sd))):
                    whole[drawn] = part
    return {name: _at_cells(counts, held, {key: moments[name] for key, moments in drawn_moments.items()},
                            {min_count: (min_count, LARGEST) for min_count in set(minimums)})
            for name in statistics}


# a statistic of sites' rank-correlation matrices [..., columns, columns] against the sites' common
# one [columns, columns]: one value per column [..., columns]
OfCorrelations = Callable[[np.ndarray, np.ndarray], np.ndarray]


def rank_correlation_moments(common: np.ndarray, rows: np.ndarray, statistics: Mapping[str, OfCorrelations]
                             ) -> dict[str, Moments]:
    """Name → Moments [sites, columns] of statistics of a site's rank correlations where nothing
    differs: each statistic of DRAWS matrices of rank correlations over the site's `rows` [sites]
    drawn from the Gaussian copula of the sites' common rank correlations `common` [columns,
    columns] (the others' median; Pearson 2 sin(π ρ / 6) of a Spearman ρ), against `common`.
    A statistic read from the best of many partners (a copy's closest column, an exchange's best
    swap) rises and spreads at a small site by chance alone: two columns that correlate 0.3 read
    anywhere from -0.2 to 0.8 over 16 rows (±2 SD). Sizes beyond LARGEST at LARGEST, the variance scaled
    as 1 / n. Nothing is drawn where no site has fewer than LARGEST rows (every variance NaN,
    every offset 0: the sites' spread is their sampling's). Post-processing of the released
    correlations and counts, revealing nothing more."""
    n_sites, m = len(rows), len(common)
    counts = np.broadcast_to(np.asarray(rows, dtype=np.float64)[:, None], (n_sites, m))
    drawn_at = np.minimum(counts[:, 0], LARGEST)
    known = np.isfinite(drawn_at) & (drawn_at >= 4)  # a rank correlation over 3 rows takes 4 values
    if not (known & (drawn_at < LARGEST)).any():
        nothing = np.full((n_sites, m), np.nan)
        return {name: Moments(np.zeros((n_sites, m)), nothing, nothing) for name in statistics}
    sizes = sorted({int(n) for n in drawn_at[known]} | {LARGEST})
    held = {(None, n): np.broadcast_to(((drawn_at == n) & known)[:, None], (n_sites, m)) for n in sizes}
    factor = copula_factor(common)
    rng = np.random.default_rng(SEED)
    drawn: dict[tuple, dict[str, tuple[np.ndarray, ...]]] = {}
    for n in sizes:
        matrices = draw_rank_correlations(factor, n, rng)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            drawn[(None, n)] = {name: _of_draws(statistic(matrices, common)) for name, statistic in statistics.items()}
    return {name: _at_cells(counts, held, {key: moments[name] for key, moments in drawn.items()},
                            {None: (None, LARGEST)})
            for name in statistics}


def copula_factor(common: np.ndarray) -> np.ndarray:
    """[columns, columns] the Cholesky factor of the Gaussian copula whose rank correlations are
    `common` (Spearman ρ of normal scores whose Pearson r is 2 sin(π ρ / 6); an unknown one 0),
    made positive definite where the sites' medians are not jointly a correlation matrix."""
    rho = np.where(np.isfinite(common), common, 0.0)
    np.fill_diagonal(rho, 1.0)
    values, vectors = np.linalg.eigh(2 * np.sin(np.pi * rho / 6))
    pearson = (vectors * np.maximum(values, 1e-3)) @ vectors.T  # the nearest positive definite
    scale = np.sqrt(np.diag(pearson))
    return np.linalg.cholesky(pearson / np.outer(scale, scale))


def draw_rank_correlations(factor: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """[DRAWS, columns, columns] the rank correlations of DRAWS groups of n rows drawn from the
    Gaussian copula of `factor` (`copula_factor`)."""
    m = len(factor)
    ranks = np.argsort(np.argsort(rng.standard_normal((DRAWS, n, m)) @ factor.T, axis=1), axis=1)
    centred = ranks - (n - 1) / 2
    return np.swapaxes(centred, 1, 2) @ centred / (n * (n * n - 1) / 12)


def _of_draws(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, variance below, variance above) [columns] of a statistic's draws [DRAWS, columns],
    held within WINSOR half-widths of their middle 68 % (the module's docstring); NaN where fewer
    than half the draws are finite (a group of one value has no log SD). Each side's variance is
    twice the mean square of the draws on that side of their mean: a skewed statistic's two
    scales; a symmetric one's both equal its variance."""
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a statistic never finite: NaN
        values = np.where(np.isfinite(values), values, np.nan)
        enough = np.isfinite(values).sum(0) >= DRAWS // 2
        # (nanpercentile takes each column apart where none is NaN: most of the draws' time)
        low, high = (np.percentile if enough.all() and np.isfinite(values).all() else np.nanpercentile)(
            values, ROBUST, axis=0)
        centre, half = (low + high) / 2, (high - low) / 2
        held_in = np.clip(values, centre - WINSOR * half, centre + WINSOR * half)
        mean = np.nanmean(held_in, axis=0)
        sides = (2 * np.nansum(part(held_in - mean, 0.0) ** 2, axis=0) / (np.isfinite(held_in).sum(0) - 1)
                 for part in (np.fmin, np.fmax))
        return np.where(enough, mean, np.nan), *(np.where(enough, side, np.nan) for side in sides)


def _at_cells(counts: np.ndarray, held: Mapping[tuple, np.ndarray], drawn: Mapping[tuple, tuple[np.ndarray, ...]],
              largest: Mapping[object, tuple]) -> Moments:
    """Moments [sites, columns] from the draws' (mean, below, above) [columns] per size drawn
    (`drawn`, keyed as `held`: the cells [sites, columns] each stands for): a cell's variance is
    its size's scaled by the size drawn over its count (beyond LARGEST the error falls as 1 / n),
    its offset its size's mean less the mean at LARGEST (`largest`: each key's first part → the
    key drawn at LARGEST); the offset is 0 where either is unknown."""
    offset = np.zeros(counts.shape)
    sides = {side: np.full(counts.shape, np.nan) for side in SIDES}
    for key, cells_held in held.items():
        rows, cells = np.nonzero(cells_held)
        mean, *variances = drawn[key]
        with np.errstate(invalid="ignore", divide="ignore"):
            for side, variance in zip(SIDES, variances):
                sides[side][rows, cells] = variance[cells] * key[1] / counts[rows, cells]
        shift = mean[cells] - drawn[largest[key[0]]][0][cells]
        offset[rows, cells] = np.where(np.isfinite(shift), shift, 0.0)
    return Moments(offset, **sides)


def _min_count(profile: Profile, site: str) -> int | None:
    """The minimum count a site released at (None: unprotected, its statistics as computed)."""
    settings = profile.policies.get(site)
    return Policy.from_settings(settings).min_count if settings else None
