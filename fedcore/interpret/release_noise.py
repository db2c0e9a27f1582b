"""What a release's differential-privacy noise adds to the statistics the data lens reads from it.

Under `dp_epsilon` a site adds Laplace noise to each mean of its quantile blocks, of scale
width / (smallest block · ε′) (`disclosure.block_noise_scale`): width the range its values are
clipped to, about what its outermost blocks span. A site of 60 rows has blocks of 10 and a
site of 600 blocks of 30: the small site's quantiles carry three times the noise. The tests
compare each site with the spread of the other sites' statistics, which holds the others' noise
already; what it does not hold is how much *more* noise one site's statistic carries than theirs.
That excess is what each test adds to its variance (`Checks.excess_variance`), so that a small site
under noise is not reported for what the noise made.

Everything here is read from what was released and the site's policy, both public to the reader
of the profile: each group's size (its count of values), the blocks the policy cuts it into
(`disclosure.block_starts`), and the clipping width, taken as the span of the released quantiles
extrapolated to the outermost blocks' centres (linear in normal scores). It is post-processing of
the release and reveals nothing more. Without noise every variance here is 0, and the tests are
as they were.

The variance of a statistic of the quantiles is to first order: the sum, over the site's blocks, of
(the statistic's change with the block's mean × that mean's noise SD)², its change taken by a small
move of the block's mean through the quantiles it weighs in (`disclosure.read_off_weights`). A
group's variance carries its sum of squares' noise and, through how far its mean lies from the
clipping range's middle, its mean's (`group_noise`). The noise on the variance's own inputs (the
clipping range read from noisy quantiles) and the sorting and clipping of noisy means are left
out: both are second order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import special

from fedcore.interpret.disclosure import (Policy, block_noise_scale, block_probabilities, block_starts, epsilon_share,
                                          read_off_weights, squares_noise_scale)
from fedcore.interpret.profile import PROBABILITIES, Profile

# how far a block's mean is moved, in its noise's SDs, to read a statistic's change with it
MOVE = 1e-3


def noisy_sites(profile: Profile) -> dict[int, tuple[float, Policy]]:
    """Site index → (ε of one statistic of one feature, its policy) for every site that released
    under `dp_epsilon`."""
    out = {}
    for i, site in enumerate(profile.sites):
        settings = profile.policies.get(site)
        if settings and settings.get("dp_epsilon"):
            policy = Policy.from_settings(settings)
            out[i] = (epsilon_share(float(policy.dp_epsilon), len(profile.features)), policy)
    return out


@lru_cache(maxsize=4096)
def _blocks(n: int, min_count: int) -> tuple[np.ndarray, np.ndarray, int]:
    """A group of n values under a minimum count: its quantiles' weights on its block means
    [PROBABILITIES, blocks], the blocks' sizes and the smallest."""
    starts = block_starts(n, min_count)
    sizes = np.diff(starts)
    return read_off_weights(starts, PROBABILITIES), sizes, int(sizes.min())


def clipping_range(quantiles: np.ndarray, n: int, min_count: int) -> tuple[np.ndarray, np.ndarray]:
    """[columns] each: the range (low, high) a site's values were clipped to, read from its
    released quantiles [PROBABILITIES, columns] of n values each: the line through the two
    outermost released quantiles on each side (in normal scores), at the outermost blocks' centres,
    never narrower than what is released (NaN where fewer than two quantiles are)."""
    centres = block_probabilities(block_starts(n, min_count), n)
    scores, ends = special.ndtri(PROBABILITIES), special.ndtri(centres[[0, -1]])
    low, high = np.full(quantiles.shape[1], np.nan), np.full(quantiles.shape[1], np.nan)
    for c in range(quantiles.shape[1]):
        finite = np.flatnonzero(np.isfinite(quantiles[:, c]))
        if finite.size < 2:
            continue
        (a, b), (y, z) = finite[[0, 1]], finite[[-1, -2]]
        q = quantiles[:, c]
        low[c] = min(q[a] + (q[b] - q[a]) * (ends[0] - scores[a]) / (scores[b] - scores[a]), q[a])
        high[c] = max(q[y] + (q[y] - q[z]) * (ends[1] - scores[y]) / (scores[y] - scores[z]), q[y])
    return low, high


def clipping_width(quantiles: np.ndarray, n: int, min_count: int) -> np.ndarray:
    """[columns] the width of `clipping_range`."""
    low, high = clipping_range(quantiles, n, min_count)
    return high - low


def _block_noise_sd(width: np.ndarray, smallest: int, epsilon: float) -> np.ndarray:
    return math.sqrt(2) * block_noise_scale(width, smallest, epsilon)


@dataclass(frozen=True)
class BlockNoise:
    """The noise on the block means of some columns at the sites that added noise: `directions`
    [blocks, rows, PROBABILITIES, columns], each block mean's noise SD as it moves those sites'
    quantiles (a block a group does not have: 0). Read once per profile and set of columns, for
    every statistic of their quantiles (`quantile_variance`)."""

    rows: np.ndarray  # the noisy sites' indices
    columns: np.ndarray
    directions: np.ndarray


def block_noise(profile: Profile, columns: np.ndarray) -> BlockNoise | None:
    """`BlockNoise` of `columns` (None where no site added noise)."""
    noisy = noisy_sites(profile)
    if not noisy:
        return None
    rows, columns = np.array(sorted(noisy)), np.asarray(columns, dtype=int)
    return BlockNoise(rows, columns, _directions(profile, noisy, rows, columns))


def quantile_variance(profile: Profile, statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
                      columns: np.ndarray, noise: BlockNoise | None = None) -> np.ndarray:
    """[sites, columns] the variance the noise of each site's release adds to `statistic`, a
    function of quantiles [some sites, PROBABILITIES, columns] and those sites' indices to
    [some sites, columns] (the sites' rows alone: what the others show is fixed). 0 at a site
    without noise; NaN where the statistic is. `noise`: the columns' `block_noise`, where a caller
    reads several statistics of them (None: read here)."""
    columns = np.asarray(columns, dtype=int)
    out = np.zeros((len(profile.sites), len(columns)))
    noise = block_noise(profile, columns) if noise is None else noise
    if noise is None:
        return out
    rows = noise.rows
    q = profile.quantiles[rows][:, :, columns]
    base = statistic(q, rows)
    total = np.zeros(base.shape)
    with np.errstate(invalid="ignore"):
        for direction in noise.directions:
            change = (statistic(q + MOVE * direction, rows) - base) / MOVE
            total += np.where(np.isfinite(change), change, 0.0) ** 2
    out[rows] = np.where(np.isfinite(base), total, np.nan)
    return out


def _widths(profile: Profile, i: int, min_count: int, columns: np.ndarray) -> np.ndarray:
    """[columns] site i's clipping widths (`clipping_width`, each at the column's own count of
    values; NaN where too few to release quantiles)."""
    low, high = _ranges(profile, i, min_count, columns)
    return high - low


def _ranges(profile: Profile, i: int, min_count: int, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[columns] each: site i's clipping range (`clipping_range`, each at the column's own count of
    values; NaN where too few to release quantiles)."""
    counts = profile.observed[i, columns].astype(int)
    low, high = np.full(len(columns), np.nan), np.full(len(columns), np.nan)
    for n in np.unique(counts[counts >= min_count]):
        at = np.flatnonzero(counts == n)
        low[at], high[at] = clipping_range(profile.quantiles[i][:, columns[at]], int(n), min_count)
    return low, high


def _directions(profile: Profile, noisy: dict[int, tuple[float, Policy]], rows: np.ndarray, columns: np.ndarray
                ) -> np.ndarray:
    """`BlockNoise.directions` of the `noisy` sites (`noisy_sites`) at `rows`."""
    counts = profile.observed[np.ix_(rows, columns)].astype(int)
    groups = [(r, int(n), np.flatnonzero(counts[r] == n)) for r, i in enumerate(rows)
              for n in np.unique(counts[r]) if n >= noisy[i][1].min_count]
    most = max((_blocks(n, noisy[rows[r]][1].min_count)[0].shape[1] for r, n, _ in groups), default=0)
    out = np.zeros((most, len(rows), len(PROBABILITIES), len(columns)))
    widths = {r: _widths(profile, int(i), noisy[i][1].min_count, columns) for r, i in enumerate(rows)}
    for r, n, at in groups:
        epsilon, policy = noisy[rows[r]]
        weights, _, smallest = _blocks(n, policy.min_count)
        sd = np.nan_to_num(_block_noise_sd(widths[r][at], smallest, epsilon))
        out[:weights.shape[1], r][:, :, at] = weights.T[:, :, None] * sd[None, None, :]
    return out


def class_noise(profile: Profile) -> tuple[np.ndarray, np.ndarray]:
    """[sites, classes, features] twice: the variance the noise adds to each class's mean at a site
    (its blocks' noise, each weighted by its share of the class's values) and to its variance. The
    release's variance is (S − n (m − c)²) / (n − 1), S the noisy sum of squares about the
    clipping range's middle c and m the noisy mean: the noise on S over n − 1, and the mean's
    through 2 n (m − c) / (n − 1). The clipping range is the feature's, read from its overall
    quantiles: a site clips every class to one range. 0 without noise."""
    means, variances = np.zeros(profile.mean_by_class.shape), np.zeros(profile.mean_by_class.shape)
    every = np.arange(len(profile.features))
    for i, (epsilon, policy) in noisy_sites(profile).items():
        low, high = _ranges(profile, i, policy.min_count, every)
        width, middle = high - low, (low + high) / 2
        for k in range(len(profile.classes)):
            counts = profile.observed_by_class[i, k].astype(int)
            for n in np.unique(counts[counts >= max(policy.min_count, 2)]):
                at = counts == n
                means[i, k, at], variances[i, k, at] = group_noise(
                    width[at], profile.mean_by_class[i, k, at] - middle[at], int(n), policy.min_count, epsilon)
    return means, variances


def group_noise(width: np.ndarray, from_middle: np.ndarray, n: int, min_count: int, epsilon: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """[columns] twice: the variance the noise adds to the mean and to the variance of a group of
    n values clipped to a range `width` wide, whose mean lies `from_middle` from the range's
    middle (`class_noise`); 0 where unknown."""
    _, sizes, smallest = _blocks(n, min_count)
    mean = np.nan_to_num(_block_noise_sd(width, smallest, epsilon)) ** 2 * float((sizes**2).sum()) / n**2
    squares = 2 * np.nan_to_num(squares_noise_scale(width, epsilon)) ** 2 / (n - 1) ** 2
    return mean, squares + np.nan_to_num((2 * n * from_middle / (n - 1)) ** 2) * mean
