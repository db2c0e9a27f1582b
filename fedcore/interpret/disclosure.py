"""Disclosure control at the site: what a site's statistics may say about its rows before they leave it.

A site shares statistics (its profile, `fedcore.interpret.profile`; the count, sum and sum of squares
of a federated standardisation), never rows. A statistic of a small group still gives rows away:
two interpolated quantiles that fall between the same two sorted values give both values exactly,
the mean of a group of one is its value, and two releases of a mean, before and after one row was
added, give that row by difference. The site's `Policy` decides what is released:

minimum count  every statistic describes at least `min_count` rows (default 10, never below 3);
               a group with fewer (a feature observed in 8 rows of one class) is withheld, NaN,
               with its reason. Where one class of a site is withheld, the others' statistics of
               the same feature are withheld with it when the withheld classes together hold
               fewer than `min_count` rows: the site's overall statistic minus the released
               classes' would otherwise give the small class's (complementary suppression).
quantiles      the sorted values of a group are cut into blocks of at least `min_count`
               consecutive values (as many as fit, at most MAX_BLOCKS); a block's mean stands for
               the quantile at the probability where a normal distribution's quantile equals its
               mean over the block (`block_probabilities`), and the profile's probabilities are
               read off the line through the blocks' means, in normal scores. No quantile rests on
               fewer than `min_count` values, none lies between two single values, and none is
               released beyond the outermost blocks (a group of 10 to 19 values gives its median
               only). The blocks' means are rounded to `rounding(n)` standard errors (the group's
               SD, or the normal-scaled spread of its middle blocks where that is smaller, /
               sqrt(block size): a few wild values do not coarsen the body); the mean is the
               blocks' size-weighted mean (so it follows from what is released), the SD is rounded
               to ROUNDING standard errors of log SD. The profile hands these values drawn in to
               its far-out fences (`profile._fenced`): a wild value's size is in none of them.
               Rounding costs the check-up little (a rounding error has 1/12 of the variance of the
               sampling error per step²) and is what stops differencing: with one row added, the
               difference of two releases rests on every block's rounding, and misses the added
               value by about DIFFERENCE_SD or more (README "Disclosure control").
shares, correlations
               released for groups of at least `min_count`, rounded to ROUNDING standard errors
               (a share p of n rows: sqrt(p(1 - p) / n); a correlation: on Fisher's z, 1 / sqrt(n - 3)).
counts         a group's own size (a class count) follows the minimum count; a count of rows with
               a property (missing, at a code) is released exactly for a group that passes it.
noise          with `dp_epsilon`, the value statistics are ε-differentially private per release
               for a row whose value is replaced (the site's counts are published as above): each
               feature's values are clipped to the range its released outermost blocks span, and
               Laplace noise scaled to each statistic's sensitivity is added, the budget split
               evenly over the features and statistics (`DP_SHARES` per feature). Noise is drawn
               from the operating system's entropy, never from a seed an attacker could know.

Every statistic of the profile is declared once (`profile.STATISTICS`: a `Statistic`) with the
group whose row count governs it (`GROUPS`), the kind of release it gets (`KINDS`), its axes and
what it reveals; `release` applies the policy to any declared array, so a statistic added to the
profile is governed the moment it is declared. A kind this module does not know is withheld (fail
closed). What a site withheld is statistic -> reason (`profile.Profile.withheld`): its NaN entries
say where.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import special

from fedcore.errors import SpecError
from fedcore.interpret.calibration import fisher_z

DEFAULT_MIN_COUNT = 10
TOO_FEW = "not shared (fewer than"  # how the reason for a group below the minimum begins
MIN_COUNT_FLOOR = 3
# Released values are rounded to this many of their standard errors ...
ROUNDING = 0.5
# ... and a small group's coarser, so that the difference of two releases, one row apart, misses the
# added value by at least this many SDs (root mean square): a block of s of a group's n values is
# rounded to max(ROUNDING, DIFFERENCE_SD × sqrt(6 / n)) × SD / sqrt(s) (the two releases' rounding
# errors, uniform, add up to n × that² / 6 in the total they difference).
DIFFERENCE_SD = 1.0
QUARTILES = np.array([0.25, 0.75])
NORMAL_IQR = 2 * float(special.ndtri(0.75))  # a normal distribution's interquartile range, in SDs
# At most this many blocks per group (5 % of the values each): a large group's blocks grow instead,
# so that their rounding (a standard error of a larger block) stays finer than the quantiles' spacing.
MAX_BLOCKS = 20
# How the value statistics' privacy budget is split per feature under differential privacy: the
# overall quantile blocks and SD, the per-class ones (classes are disjoint rows: one share for all),
# the six shares (whole numbers; at the most common value, the minimum, the maximum; far out, far
# out above), and the histogram of the values' steps as two (its bins are disjoint: one row
# replaced moves two of them by one each, twice a share's sensitivity, whatever the number of bins).
# Counts are released under the minimum count; correlations not at all.
DP_SHARES = 12

# How the policy releases a statistic of each kind:
KINDS = {
    "size": "the site's number of rows, always released (the server weighs the site's model by it)",
    "count": "a group's own number of rows: withheld below the minimum (and its complement)",
    "cell_count": "a number of rows with a property within a group: exact where the group passes the minimum",
    "share": "a share of a group's rows: withheld below the minimum, rounded to a standard error",
    "location": "values of a group (means, SDs, quantiles): quantile blocks of at least the minimum, rounded",
    "correlation": "a correlation over the rows where both features are recorded: withheld below the minimum, "
                   "rounded on Fisher's z; not released under differential privacy",
}
# Whose rows govern a statistic (a policy's minimum applies to that group's row count), and the
# axes of a site's array along which its groups lie.
GROUPS = {
    "site": "every row of the site",
    "class": "the rows of each class",
    "feature": "the rows where a feature is recorded",
    "feature × class": "the rows of a class where a feature is recorded",
    "feature pairs": "the rows where both of two continuous features are recorded",
}
GROUP_AXES = {"site": (), "class": ("class",), "feature": ("feature",), "feature × class": ("class", "feature"),
              "feature pairs": ("continuous", "continuous")}
# The axes of a site's statistic: its classes, the profile's probabilities or missing-value codes
# or steps (`profile.RESOLUTION_STEPS`' histogram bins), its features, its continuous features (a
# correlation's two axes).
AXES = ("class", "probability", "code", "step", "feature", "continuous")


@dataclass(frozen=True)
class Policy:
    """A site's disclosure policy. `min_count`: the fewest rows any released statistic describes;
    `dp_epsilon`: the privacy budget of one release under differential privacy (None: no noise)."""

    min_count: int = DEFAULT_MIN_COUNT
    dp_epsilon: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.min_count, bool) or not isinstance(self.min_count, (int, np.integer)):
            raise SpecError(f"The disclosure policy's min-count must be a whole number, not {self.min_count!r}.")
        if self.min_count < MIN_COUNT_FLOOR:
            raise SpecError(f"The disclosure policy's min-count must be at least {MIN_COUNT_FLOOR} (no statistic of "
                            f"fewer rows is ever released), not {self.min_count}.")
        if self.dp_epsilon is not None and not (isinstance(self.dp_epsilon, (int, float)) and
                                                math.isfinite(self.dp_epsilon) and self.dp_epsilon > 0):
            raise SpecError(f"The disclosure policy's dp-epsilon must be a positive number, not {self.dp_epsilon!r}.")

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None) -> Policy:
        """The policy a node config, spec or form gives ('min-count' / 'min_count', 'dp-epsilon' /
        'dp_epsilon'; absent: the default). SpecError names a bad value."""
        values = {key.replace("-", "_"): value for key, value in (settings or {}).items()}
        min_count = values.get("min_count", DEFAULT_MIN_COUNT)
        epsilon = values.get("dp_epsilon")
        try:
            min_count = int(min_count) if isinstance(min_count, str) else min_count
            if isinstance(min_count, float) and min_count.is_integer():
                min_count = int(min_count)
            epsilon = None if epsilon in (None, "", "none", "off") else float(epsilon)
        except ValueError:
            raise SpecError(f"The disclosure policy needs numbers: min-count={values.get('min_count')!r}, "
                            f"dp-epsilon={values.get('dp_epsilon')!r}.") from None
        return cls(min_count, epsilon)

    def to_dict(self) -> dict[str, Any]:
        return {key: (int(value) if key == "min_count" else value) for key, value in asdict(self).items()}

    def describe(self) -> str:
        text = (f"statistics of at least {self.min_count} rows; quantiles from blocks of at least {self.min_count} "
                f"values; values rounded to {ROUNDING:g} standard error")
        return text + (f"; Laplace noise, ε = {self.dp_epsilon:g} per release" if self.dp_epsilon else "")

    @property
    def reason(self) -> str:
        """Why a statistic of a small group is not shared, as the check-up shows it."""
        return f"{TOO_FEW} {self.min_count} rows)"


DEFAULT_POLICY = Policy()


def describe_policy(policy: Mapping[str, Any] | None) -> str:
    """A recorded policy (`Policy.to_dict`, or None: released before disclosure control) in words."""
    if policy is None:
        return "no disclosure control (released as computed)"
    try:
        return Policy.from_settings(policy).describe()
    except SpecError:
        return "an unreadable policy"


# -- groups ---------------------------------------------------------------------------------------
def small(counts: np.ndarray, policy: Policy) -> np.ndarray:
    """Where a group holds some rows but fewer than the minimum."""
    counts = np.asarray(counts, dtype=np.float64)
    return (counts > 0) & (counts < policy.min_count)


def suppressed(counts: np.ndarray, policy: Policy) -> np.ndarray:
    """[members, ...] which members of a partition (the classes of a site or of a feature's rows,
    along the first axis) are withheld: those below the minimum, and then, wherever the withheld
    ones together hold fewer than the minimum (their total follows from the parent's statistic
    minus the released members'), the smallest released ones until they hold none or enough."""
    counts = np.asarray(counts, dtype=np.float64)
    withheld = small(counts, policy)
    flat_counts = counts.reshape(len(counts), -1)
    flat = withheld.reshape(len(counts), -1)
    for column in range(flat.shape[1]):
        while 0 < flat_counts[flat[:, column], column].sum() < policy.min_count:
            candidates = np.flatnonzero(~flat[:, column] & (flat_counts[:, column] > 0))
            if not candidates.size:
                break
            flat[candidates[np.argmin(flat_counts[candidates, column])], column] = True
    return flat.reshape(counts.shape)


# -- values of one group ----------------------------------------------------------------------------
@dataclass
class Noise:
    """Differential privacy for one release: each feature's budget share and clipping range."""

    epsilon_share: float  # ε of one statistic of one feature
    low: np.ndarray  # [features] the clipping range (NaN: the feature's values are not released)
    high: np.ndarray
    rng: np.random.Generator

    def laplace(self, scale: np.ndarray) -> np.ndarray:
        scale = np.asarray(scale, dtype=np.float64)
        return self.rng.laplace(0.0, 1.0, scale.shape) * scale


def location(x: np.ndarray, probabilities: np.ndarray, policy: Policy,
             noise: Noise | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column of x [rows, features] (NaN: missing): mean, SD (ddof 1) and the quantiles at
    `probabilities` [P, features], as the policy releases them (`profile.site_profile` computes
    them as they are, for a release without a policy). NaN where not released."""
    n_rows, n_features = x.shape
    counts = (~np.isnan(x)).sum(0)
    mean, sd = np.full(n_features, np.nan), np.full(n_features, np.nan)
    quantiles = np.full((len(probabilities), n_features), np.nan)
    for n in np.unique(counts[counts >= policy.min_count]):
        columns = np.flatnonzero(counts == n)
        values = np.sort(x[:, columns], axis=0)[:n]  # NaN sorts last
        mean[columns], sd[columns], quantiles[:, columns] = _blocks(values, int(n), probabilities, policy,
                                                                    None if noise is None else (noise, columns))
    return mean, sd, quantiles


def _blocks(values: np.ndarray, n: int, probabilities: np.ndarray, policy: Policy,
            noise: tuple[Noise, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, SD and quantiles of columns that each hold n sorted values, from blocks of at least
    `min_count` consecutive values."""
    starts = block_starts(n, policy.min_count)
    sizes = np.diff(starts)
    centres = block_probabilities(starts, n)
    sd = sorted_sd(values, np.full(values.shape[1], n))
    if noise is None:
        means = np.add.reduceat(values, starts[:-1], axis=0) / sizes[:, None]
        # the rounding's yardstick: the SD, or the spread of the middle blocks where smaller (a few
        # wild values, a unit slip in 3 % of the rows, would otherwise coarsen every block to tens of
        # the body's SDs and move its median); itself on the SD's grid, so no step gives it away
        quartiles = _read_off(centres, means, QUARTILES)
        with np.errstate(invalid="ignore"):
            middle = (quartiles[1] - quartiles[0]) / NORMAL_IQR
            scale = _log_rounded(np.where(middle > 0, np.fmin(sd, middle), sd), n)
        means = _rounded(means, rounding(n) * scale[None, :] / np.sqrt(sizes)[:, None])
        sd = _log_rounded(sd, n)
    else:
        means, sd = _noisy_blocks(values, starts, sizes, *noise)
    means = np.sort(means, axis=0)  # a quantile function never decreases (rounding and noise could make it)
    mean = (means * sizes[:, None]).sum(0) / n
    return mean, sd, _read_off(centres, means, probabilities)


def sorted_sd(ordered: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """[columns] the SD (ddof 1) of each column of sorted values (NaN last; `counts` finite values
    each, NaN below 2): exactly 0 where its values are all one. numpy's SD of a column of one value
    leaves a few ulps for about half of all values (its mean is rounded), and a column constant at
    a site then had a spread 1e-16 times the others' instead of none."""
    counts = np.asarray(counts)
    if not len(ordered):
        return np.full(ordered.shape[1], np.nan)
    last = ordered[np.maximum(counts - 1, 0), np.arange(ordered.shape[1])]
    with warnings.catch_warnings():  # all-NaN columns: NaN is the answer, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        sd = np.nanstd(ordered, axis=0, ddof=1)
    return np.where(counts > 1, np.where(ordered[0] == last, 0.0, sd), np.nan)


def _log_rounded(sd: np.ndarray, n: int) -> np.ndarray:
    """An SD of n values rounded to ROUNDING standard errors of log SD (0 and NaN as they are)."""
    log_step = ROUNDING / math.sqrt(2 * (n - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sd > 0, np.exp(np.round(np.log(np.where(sd > 0, sd, 1)) / log_step) * log_step), sd)


def rounding(n: np.ndarray | int) -> np.ndarray | float:
    """How many standard errors a statistic of n values is rounded to (ROUNDING; more for small n:
    DIFFERENCE_SD)."""
    return np.maximum(ROUNDING, DIFFERENCE_SD * np.sqrt(6 / np.maximum(n, 1)))


def block_starts(n: int, min_count: int) -> np.ndarray:
    """Where each block of a group's n sorted values starts, and n: as many blocks of at least
    `min_count` values as fit (at most MAX_BLOCKS), the first n mod blocks one value larger."""
    n_blocks = min(n // min_count, MAX_BLOCKS)
    sizes = np.full(n_blocks, n // n_blocks) + (np.arange(n_blocks) < n % n_blocks)
    return np.concatenate([[0], np.cumsum(sizes)])


def block_probabilities(starts: np.ndarray, n: int) -> np.ndarray:
    """The probability whose quantile each block's mean stands for: the one at which a normal
    distribution's quantile equals its mean over the block's share of the values (the middle of
    a block in the body, further out in a tail: the lowest 5 % of normal values average the 2 %
    quantile), so that sites of every size read off the same quantiles of the same data."""
    low, high = starts[:-1] / n, starts[1:] / n
    density = lambda p: np.exp(-special.ndtri(p) ** 2 / 2) / math.sqrt(2 * math.pi)  # noqa: E731 (0 at p = 0, 1)
    return special.ndtr((density(low) - density(high)) / (high - low))


def _noisy_blocks(values: np.ndarray, starts: np.ndarray, sizes: np.ndarray, noise: Noise,
                  columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Block means and SD under the Laplace mechanism, values clipped to each feature's range.
    Replacing one value moves the sorted values by at most the range in total (L1), so the block
    means move by at most range / smallest block; the sum of squares about the range's middle by
    at most range² / 4."""
    low, high = noise.low[columns], noise.high[columns]
    width = high - low
    clipped = np.clip(values, low, high)
    means = np.add.reduceat(clipped, starts[:-1], axis=0) / sizes[:, None]
    means = means + noise.laplace(np.broadcast_to(block_noise_scale(width, int(sizes.min()), noise.epsilon_share),
                                                  means.shape))
    n = len(values)
    middle = (low + high) / 2
    squares = ((clipped - middle) ** 2).sum(0) + noise.laplace(squares_noise_scale(width, noise.epsilon_share))
    mean = (np.clip(means, low, high) * sizes[:, None]).sum(0) / n
    variance = (squares - n * (mean - middle) ** 2) / (n - 1)
    return np.clip(means, low, high), np.sqrt(np.clip(variance, 0, (width / 2) ** 2 * n / (n - 1)))


def _read_off(centres: np.ndarray, means: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """[P, columns] the line through (centre, block mean) at each probability (in normal scores);
    NaN beyond the outermost centres (nothing there rests on a whole block)."""
    out = np.full((len(probabilities), means.shape[1]), np.nan)
    inside, position, weight = _read_off_places(centres, probabilities)
    if len(centres) == 1:
        out[inside] = means[0]
        return out
    # from the lower block's mean towards the next: between two equal means exactly their value (the
    # weighted sum of both leaves a few ulps, and a middle half of one value then has an IQR of 1e-16)
    lower, upper = means[position], means[position + 1]
    out[inside] = lower + (upper - lower) * weight[:, None]
    return out


def _read_off_places(centres: np.ndarray, probabilities: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where `_read_off` reads each probability: whether it lies within the blocks' centres, and for
    those that do, the lower of the two blocks it lies between and its weight on the upper one."""
    inside = (probabilities >= centres[0] - 1e-12) & (probabilities <= centres[-1] + 1e-12)
    if len(centres) == 1:
        return inside, np.zeros(int(inside.sum()), dtype=int), np.zeros(int(inside.sum()))
    # linear in the normal score of the probability: exact for normal values, where a line in p bends
    at, scores = special.ndtri(centres), special.ndtri(probabilities[inside])
    position = np.clip(np.searchsorted(at, scores, side="right") - 1, 0, len(centres) - 2)
    weight = np.clip((scores - at[position]) / (at[position + 1] - at[position]), 0, 1)
    return inside, position, weight


def read_off_weights(starts: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """[probabilities, blocks] how much each block's mean weighs in each quantile `_read_off` reads
    from blocks starting at `starts` (`block_starts`): its quantiles are this matrix times the block
    means (a row of 0 where nothing is read). What lets a reader follow the noise on each block into
    the quantiles."""
    centres = block_probabilities(starts, int(starts[-1]))
    inside, position, weight = _read_off_places(centres, probabilities)
    out = np.zeros((len(probabilities), len(centres)))
    rows = np.flatnonzero(inside)
    if len(centres) == 1:
        out[rows, 0] = 1.0
        return out
    out[rows, position] = 1.0 - weight
    out[rows, position + 1] += weight
    return out


def dp_noise(x: np.ndarray, policy: Policy) -> Noise | None:
    """The noise of one release under `policy.dp_epsilon` (None without): the budget split evenly
    over x's features (DP_SHARES each), each feature's values clipped to what its outermost
    blocks span at the minimum count (a feature with fewer than two blocks has no range: its
    values are withheld)."""
    if not policy.dp_epsilon:
        return None
    low, high = outer_blocks(x, policy)
    return Noise(epsilon_share(policy.dp_epsilon, x.shape[1]), low, high, np.random.default_rng())


def epsilon_share(epsilon: float, n_features: int) -> float:
    """The ε of one statistic of one feature: a release's budget split evenly (DP_SHARES per feature)."""
    return epsilon / (DP_SHARES * max(n_features, 1))


def block_noise_scale(width: np.ndarray, smallest_block: int, epsilon_of_share: float) -> np.ndarray:
    """The Laplace scale of the noise on each block mean of a group whose values are clipped to a
    range `width` wide and cut into blocks of at least `smallest_block` values (replacing one value
    moves the sorted values by at most the width in total, a block's mean by at most width / its
    size); its SD is √2 times this."""
    return np.asarray(width, dtype=np.float64) / (max(smallest_block, 1) * epsilon_of_share)


def squares_noise_scale(width: np.ndarray, epsilon_of_share: float) -> np.ndarray:
    """The Laplace scale of the noise on a group's sum of squares about the middle of its clipping
    range (`width` wide: one value's square moves it by at most width² / 4)."""
    return np.asarray(width, dtype=np.float64) ** 2 / 4 / epsilon_of_share


def share_noise_scale(n: np.ndarray, epsilon_of_share: float) -> np.ndarray:
    """The Laplace scale of the noise on a share of n rows (replacing one row moves its count by at
    most 1); its SD is √2 times this."""
    return 1 / (np.maximum(np.asarray(n, dtype=np.float64), 1) * epsilon_of_share)


def outer_blocks(x: np.ndarray, policy: Policy) -> tuple[np.ndarray, np.ndarray]:
    """[features] the means of the first and last blocks of each column's sorted values (NaN where
    fewer than two blocks fit)."""
    counts = (~np.isnan(x)).sum(0)
    low, high = np.full(x.shape[1], np.nan), np.full(x.shape[1], np.nan)
    for n in np.unique(counts[counts >= 2 * policy.min_count]):
        columns = np.flatnonzero(counts == n)
        values = np.sort(x[:, columns], axis=0)[:n]
        size = n // min(n // policy.min_count, MAX_BLOCKS)
        low[columns], high[columns] = values[:size].mean(0), values[-size:].mean(0)
    return low, high


# -- the generic release of declared arrays -------------------------------------------------------------
def rounded_share(share: np.ndarray, n: np.ndarray) -> np.ndarray:
    """A share of n rows rounded to ROUNDING binomial standard errors (exact at 0 and 1)."""
    with np.errstate(invalid="ignore"):
        step = ROUNDING * np.sqrt(np.clip(share * (1 - share), 0, None) / np.maximum(n, 1))
        return np.where(np.isfinite(share), np.clip(_rounded(share, step), 0, 1), share)


def rounded_correlation(r: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Correlations over n rows rounded on Fisher's z to ROUNDING standard errors (1 / sqrt(n - 3))."""
    with np.errstate(invalid="ignore"):
        z = fisher_z(r)
        return np.where(np.isfinite(r), np.tanh(_rounded(z, ROUNDING / np.sqrt(np.maximum(n - 3, 1)))), r)


@dataclass(frozen=True)
class Statistic:
    """One statistic of a site's profile, declared once: `group`, whose row count governs its
    release (GROUPS); `kind`, the rule it is released by (KINDS); `axes`, what its array's axes are
    at one site (AXES: where its groups lie on it); `reveals`, what it tells whoever receives it
    about the site's rows."""

    group: str
    kind: str
    axes: tuple[str, ...]
    reveals: str

    def __post_init__(self) -> None:
        if self.group not in GROUPS:
            raise ValueError(f"unknown group {self.group!r}; groups: {', '.join(GROUPS)}")
        if not set(self.axes) <= set(AXES) or _placed(GROUP_AXES[self.group], self.axes) is None:
            raise ValueError(f"axes {self.axes!r} do not hold the group {self.group!r} ({GROUP_AXES[self.group]})")


def _placed(group_axes: tuple[str, ...], axes: tuple[str, ...]) -> list[int] | None:
    """Where a group's axes lie among a statistic's, in order (None: they do not)."""
    at, start = [], 0
    for axis in group_axes:
        if axis not in axes[start:]:
            return None
        at.append(axes.index(axis, start))
        start = at[-1] + 1
    return at


@dataclass
class Groups:
    """The row counts of a site's groups (GROUPS)."""

    rows: int
    class_counts: np.ndarray  # [classes]
    observed: np.ndarray  # [features]
    observed_by_class: np.ndarray  # [classes, features]
    pair_counts: np.ndarray  # [continuous, continuous]

    def counts(self, group: str) -> np.ndarray:
        return {"site": np.array(self.rows), "class": self.class_counts, "feature": self.observed,
                "feature × class": self.observed_by_class, "feature pairs": self.pair_counts}[group]


def release(arrays: Mapping[str, np.ndarray], declarations: Mapping[str, Statistic], groups: Groups,
            policy: Policy | None, noise: Noise | None = None) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Every declared array as the policy releases it (None: as computed; `noise`: the release's
    differential privacy, `dp_noise`), and statistic -> why a part of it (its NaN entries) was
    withheld. An array without a declaration, or of a kind without a rule, is withheld whole:
    nothing leaves a site unless a rule says how. (Arrays of kind 'location' come from `location`,
    which rounds or noises them; here they are withheld by their group.) A part withheld to
    protect a smaller group by difference (complementary suppression) has the small group's reason."""
    if policy is None:
        return {name: np.asarray(value) for name, value in arrays.items()}, {}
    out: dict[str, np.ndarray] = {}
    withheld: dict[str, str] = {}
    masks = _group_masks(groups, policy)
    for name, value in arrays.items():
        declared = declarations.get(name)
        value = np.asarray(value)
        if declared is None or declared.kind not in KINDS:
            what = f"no disclosure rule for its kind {declared.kind!r}" if declared else "not declared"
            out[name], withheld[name] = np.full(value.shape, np.nan), f"not shared ({what})"
            continue
        if declared.kind == "size":
            out[name] = value
            continue
        if declared.kind == "correlation" and policy.dp_epsilon:
            out[name] = np.full(value.shape, np.nan)
            withheld[name] = "not shared under differential privacy (a correlation has no bounded sensitivity)"
            continue
        hidden = _laid_on(masks[declared.group], declared, value.shape)
        if hidden.any():
            withheld[name] = policy.reason
        elif declared.kind in ("count", "cell_count"):
            out[name] = value  # whole numbers stay whole
            continue
        released = value.astype(np.float64)
        released[hidden] = np.nan
        if declared.kind == "share":
            n = _laid_on(groups.counts(declared.group).astype(np.float64), declared, released.shape)
            released = _noisy_share(released, n, noise) if noise is not None else rounded_share(released, n)
        elif declared.kind == "correlation":
            released = rounded_correlation(released, _laid_on(groups.counts(declared.group).astype(np.float64),
                                                              declared, released.shape))
        out[name] = released
    return out, withheld


def _noisy_share(share: np.ndarray, n: np.ndarray, noise: Noise) -> np.ndarray:
    """A share of n rows with Laplace noise: replacing one row moves its count by at most 1."""
    noisy = share + noise.laplace(share_noise_scale(n, noise.epsilon_share))
    return np.where(np.isfinite(share), np.clip(noisy, 0, 1), share)


def _group_masks(groups: Groups, policy: Policy) -> dict[str, np.ndarray]:
    """Per group (GROUPS): where it is withheld, along its axes (GROUP_AXES). A site below the
    minimum shares nothing but its size; a class below it is withheld with its complement
    (`suppressed`), and so is every per-class statistic of a withheld class."""
    site = np.array(0 < groups.rows < policy.min_count)
    classes = suppressed(groups.class_counts, policy) | site
    return {"site": site, "class": classes,
            "feature": small(groups.observed, policy) | site,
            "feature × class": suppressed(groups.observed_by_class, policy) | classes[:, None],
            "feature pairs": small(groups.pair_counts, policy) | site}


def _laid_on(values: np.ndarray, declared: Statistic, shape: tuple[int, ...]) -> np.ndarray:
    """A group's values (its mask, its row counts) laid on a statistic's array of `shape` along the
    group's axes (`Statistic.axes`), repeated along the others."""
    at = _placed(GROUP_AXES[declared.group], declared.axes) or []
    placed = [1] * len(shape)
    for k, axis in enumerate(at):
        placed[axis] = values.shape[k]
    return np.broadcast_to(np.asarray(values).reshape(placed), shape)


# -- the federated standardisation's sums -------------------------------------------------------------
def released_sums(x: np.ndarray, policy: Policy | None) -> np.ndarray:
    """[3, features]: each feature's count of observed values, their sum and their sum of squares
    (what a site sends for a federated standardisation: its mean and SD), as `policy` releases
    them. A feature recorded in fewer than `min_count` rows sends zeros (its values stay out of the
    pooled mean); the sum and the sum of squares are rounded to ROUNDING standard errors (sqrt(n)
    × the SD of the values, of their squares), or, under `dp_epsilon` (split over the features'
    two sums), get Laplace noise for values clipped to the range their outermost blocks span."""
    x = np.asarray(x, dtype=np.float64)
    count = np.sum(~np.isnan(x), axis=0).astype(np.float64)
    total, squares = np.nansum(x, axis=0), np.nansum(x**2, axis=0)
    if policy is None:
        return np.array([count, total, squares])
    if policy.dp_epsilon:
        low, high = outer_blocks(x, policy)
        clipped = np.clip(x, low, high)
        share = policy.dp_epsilon / (2 * max(x.shape[1], 1))
        rng = np.random.default_rng()
        total = np.nansum(clipped, axis=0) + rng.laplace(0.0, 1.0, x.shape[1]) * (high - low) / share
        squares = (np.nansum(clipped**2, axis=0)
                   + rng.laplace(0.0, 1.0, x.shape[1]) * np.maximum(low**2, high**2) / share)
    else:
        with warnings.catch_warnings():  # a feature with no values: its sums are withheld below anyway
            warnings.simplefilter("ignore", RuntimeWarning)
            total = _rounded(total, rounding(count) * np.sqrt(count) * np.nanstd(x, axis=0, ddof=1))
            squares = _rounded(squares, rounding(count) * np.sqrt(count) * np.nanstd(x**2, axis=0, ddof=1))
    withheld = (count < policy.min_count) | ~np.isfinite(total) | ~np.isfinite(squares)
    return np.where(withheld, 0.0, np.array([count, total, squares]))


def _rounded(values: np.ndarray, step: np.ndarray) -> np.ndarray:
    """values rounded to multiples of step (as they are where the step is 0 or undefined)."""
    usable = np.isfinite(step) & (step > 0)
    return np.where(usable, np.round(values / np.where(usable, step, 1)) * np.where(usable, step, 1), values)


# -- what a run records of each site --------------------------------------------------------------------
def released_description(description: Mapping[str, Any], policy: Policy | None) -> dict[str, Any]:
    """A federation's description (`Federation.describe`: what a run records of its sites) with each
    site's class counts, of its training rows and of its hold-out, as `policy` releases them: a
    class below the minimum (and what would give it away by difference) is None."""
    if policy is None:
        return dict(description)
    sites = []
    for site in description.get("sites", []):
        site = dict(site)
        for key in ("train_class_counts", "test_class_counts"):
            if isinstance(site.get(key), list):
                counts = np.asarray(site[key], dtype=np.float64)
                withheld = suppressed(counts, policy) | small(np.array(sum(site[key])), policy)
                site[key] = [None if hidden else int(n) for n, hidden in zip(site[key], withheld)]
        sites.append(site)
    return {**description, "sites": sites}
