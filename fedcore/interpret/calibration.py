"""Calibrated evidence that one site differs from the others: p-values and false discovery rates.

The question every check asks is "does site i look like the other sites?" — not whether it equals
them: real sites differ (other patients, other devices), and a finding must stand out from that
natural variation. So each statistic t_ij (site i, item j: a feature, a layer's cell) is compared
with the *other* sites' values of the same item, never with a yardstick that includes site i
itself (an outlier would widen it and hide; with 4 sites the authors' 2-SD rule can never mark a
cell, `significance.max_single_site_z`).

Leave-one-out predictive t (the null: site i's value is one more draw from the distribution the
other sites' values come from, normal with unknown mean and variance):

    t_ij = (t_ij - mean_{k≠i} t_kj) / (s_ij · sqrt(1 + 1 / (n - 1)))      ~ t with n - 2 df,

s_ij the SD of the other n - 1 sites' values. With few sites that SD rests on 2 or 3 values and
the t distribution's heavy tails make nothing significant. The item-wise variances are therefore
moderated (Smyth 2004, limma's empirical Bayes): the variances of all items are fitted as a scaled
inverse-chi-square prior (d0 degrees of freedom, scale s0²), and each item's variance becomes

    s̃²_ij = (d0 · s0² + d · s²_ij) / (d0 + d),       d = n - 2,       t ~ t with d0 + d df,

borrowing strength across features where the items share a scale (statistics divided by a
per-feature yardstick first, so that "sites differ by 0.3 within-site SDs" means the same for
every feature). With many sites d dominates and each feature keeps its own variance; with 4 it
leans on the prior. The p-values are two-sided unless a check says otherwise.

Sites of different sizes: the other sites' spread holds their sampling error (and, under
differential privacy, their noise), on average over them; a site of 10 rows among sites of 500
carries far more. Its test adds what it carries beyond their average (`own_variance`, as the
checks give it: `data_checks.Checks.excess_variance`), nothing where it carries less. Without
this, the rows of vehicle's 23 sensors (7 to 534 rows) dealt back to them at random left 48 % of
the sensors with a finding where none differs. Where those variances are known (the statistics of
released quantiles, drawn at each size: `sampling`), the others' spread is also taken as no less
than their mean (`least_variance`): a few small sites whose statistics happen to agree do not
hold a site to a closeness its own rows could not give it.

Many cells are tested at once (sites × features × checks), so findings are reported by their
Benjamini–Hochberg q-value (the false discovery rate at which the cell would just be a finding),
controlling the expected share of false findings among those reported.

Predicted from related items (`leave_one_out_predicted`): where an item's value at a site goes with
the values of a few related items (a feature's median with the medians of the features it
correlates with: a subject who moves faster has every acceleration feature higher), the question
becomes "is site i's value what the other sites' relation predicts from its related items?". The
relation is a least-squares regression over the other sites, and the null is the externally
studentized residual's

    t_ij = e_ij / (s_(i)j · sqrt(1 - h_ij))      ~ t with n - m - 2 df,

e_ij the residual of the fit over all sites, h_ij the site's leverage, s_(i)j the residual SD
without site i (the deleted residual e_ij / (1 - h_ij) is exactly the prediction from the others'
fit), m the number of related items. The residual variances are moderated across items as above.
A site's own shift of one item stays in its residual, while the sites' shared differences — the
natural variation a plain leave-one-out must tolerate — are predicted away.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from scipy import special, stats


def benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    """q-values of p-values (NaN stays NaN and does not count as a test): the smallest false
    discovery rate at which each would be rejected by the Benjamini–Hochberg step-up rule."""
    p = np.asarray(p, dtype=np.float64)
    q = np.full_like(p, np.nan)
    tested = np.flatnonzero(~np.isnan(p.ravel()))
    if not tested.size:
        return q
    values = p.ravel()[tested]
    order = np.argsort(values, kind="stable")
    ranked = values[order] * len(values) / np.arange(1, len(values) + 1)
    ranked = np.minimum.accumulate(ranked[::-1])[::-1]  # step-up: q_(k) = min over j >= k
    out = q.ravel()
    out[tested[order]] = np.minimum(ranked, 1.0)
    return out.reshape(p.shape)


def fit_prior(variances: np.ndarray, df: float) -> tuple[float, float]:
    """(d0, s0²) of the scaled inverse-chi-square prior of sample variances with `df` degrees of
    freedom each (Smyth 2004, limma's fitFDist by moments of the log variances). d0 = inf when the
    variances vary no more than sampling alone would make them (one common variance)."""
    s2 = np.asarray(variances, dtype=np.float64)
    s2 = s2[np.isfinite(s2) & (s2 > 0)]
    if s2.size < 2 or df <= 0:
        return 0.0, float(np.median(s2)) if s2.size else np.nan
    e = _log_variances(s2, df)
    d0, s0 = _prior_of_moments(np.mean(e), np.var(e, ddof=1), df)
    return float(d0), float(s0)


def _log_variances(s2: np.ndarray, df: float) -> np.ndarray:
    """The log sample variances less their expectation's offset under df degrees of freedom: their
    mean is then the log of the prior's scale, their variance trigamma(df / 2) plus the prior's."""
    return np.log(s2) - special.digamma(df / 2) + np.log(df / 2)


def _prior_of_moments(mean: np.ndarray, variance: np.ndarray, df: float) -> tuple[np.ndarray, np.ndarray]:
    """(d0, s0²) from the mean and variance of `_log_variances` (element-wise): d0 = inf where
    they vary no more than sampling makes them."""
    excess = np.asarray(variance - special.polygamma(1, df / 2), dtype=np.float64)
    varied = excess > 0
    d0 = np.where(varied, 2 * _trigamma_inverse(np.where(varied, excess, 1.0)), np.inf)
    with np.errstate(invalid="ignore"):
        s0 = np.where(varied, np.exp(mean + special.digamma(d0 / 2) - np.log(d0 / 2)), np.exp(mean))
    return d0, s0


def leave_one_out(values: np.ndarray, moderate: bool = True, own_variance: np.ndarray | None = None,
                  suspect: np.ndarray | None = None, reference: np.ndarray | None = None,
                  least_variance: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For a sites × items matrix: every cell's deviation from the other sites' mean, its
    predictive t and two-sided p-value (see the module's docstring). NaN cells (an item a site
    lacks) are left out of the others' statistics and get NaN.

    Two passes: a cell that stands out beyond doubt in the first (p < OUTLIER_P) is left out of
    the *other* sites' references in the second, so that one broken site does not make the others
    look shifted against it (with 4 sites, one of the 3 values each other site is compared with).

    `own_variance` (same shape): each cell's own sampling variance, where the statistic is an
    estimate from the site's rows whose precision is known (a share's logit): added to the
    predictive variance, so that sites that happen to tie (no site has a far-out value) do not
    make a single count at one site infinitely significant.

    `suspect` (a bool per site, or per cell): sites (cells) another check already found unreliable
    for this statistic (labels that look wrong, for the relations to the label; a column never
    measured at a site, for its values): never in another site's reference, each still tested
    against the others.

    `reference` (same shape): what each cell counts as in the other sites' references, where that
    differs from what it is tested as (a column's statistic without a site's missing codes: the
    site is tested on what it released, the others compared with its values); NaN: in no
    reference. By default `values`.

    `least_variance` (same shape): the least variance the other sites' values have around their
    mean where nothing differs: the mean of their own variances (by sampling at their sizes, by
    the noise of their releases), where those are known. Their spread is taken as no smaller: a
    spread below it is chance (a handful of sites whose statistics happen to agree), and the
    test would otherwise hold a site to a closeness its own rows could not give it."""
    t = np.asarray(values, dtype=np.float64)
    if t.ndim == 1:
        t = t[:, None]
    r = t if reference is None else np.asarray(reference, dtype=np.float64).reshape(t.shape)
    own = np.zeros(t.shape) if own_variance is None else np.asarray(own_variance, dtype=np.float64).reshape(t.shape)
    least = np.zeros(t.shape) if least_variance is None else np.asarray(least_variance, dtype=np.float64).reshape(t.shape)
    return _two_passes(t, moderate, _left_out(suspect, t.shape), own, r, least)[0]


def _left_out(suspect: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    """`suspect` (per site or per cell) as the cells in no other site's reference."""
    left_out = np.zeros(shape, dtype=bool)
    if suspect is not None:
        left_out |= np.broadcast_to(np.asarray(suspect, dtype=bool).reshape(shape[0], -1), shape)
        left_out[:, left_out.all(0)] = False  # every site suspect: none is a better reference than another
    return left_out


def _two_passes(t: np.ndarray, moderate: bool, left_out: np.ndarray, own: np.ndarray, r: np.ndarray,
                least: np.ndarray | None = None) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """`leave_one_out`'s (deviation, t, p), and the cells its last pass kept out of the other
    sites' references (the suspects, and the first pass's outliers)."""
    first = _leave_one_out(t, moderate, left_out, own, r, least)
    outliers = (first[2] < OUTLIER_P) | left_out
    if not (outliers & ~left_out).any():
        return first, outliers
    deviation, score, p = _leave_one_out(t, moderate, outliers, own, r, least)
    # an outlier itself keeps its first-pass statistics (its reference never held it anyway)
    return (np.where(outliers, first[0], deviation), np.where(outliers, first[1], score),
            np.where(outliers, first[2], p)), outliers


OUTLIER_P = 1e-4  # a first-pass p-value this small leaves the cell out of the other sites' references
ROUNDING = 1e-9  # relative size below which a difference of sums is rounding, not a difference


def _leave_one_out(t: np.ndarray, moderate: bool, excluded: np.ndarray, own: np.ndarray, r: np.ndarray,
                   least: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One pass of `leave_one_out`; `excluded` cells count in no other site's reference; `r`: what
    the cells count as there."""
    n_sites, n_items = t.shape
    present = ~np.isnan(t)
    reference, count, others, mean, variance = _references(r, excluded)
    deviation = t - mean
    deviation = np.where(np.abs(deviation) <= ROUNDING * (np.abs(t) + np.abs(mean)), 0.0, deviation)
    df = others - 1.0  # n - 1 other values, their mean estimated from them: n - 2 df
    prior = (0.0, 0.0)
    if moderate:
        kept = np.where(reference, r, np.nan)
        with warnings.catch_warnings():  # an item held by one site only: NaN is its answer
            warnings.simplefilter("ignore", RuntimeWarning)
            full = np.nanvar(kept, axis=0, ddof=1) if n_sites > 1 else np.full(n_items, np.nan)
        prior = _prior(full[count > 1], float(np.median(count[count > 1]) - 1) if (count > 1).any() else 0.0)
    moderated, total_df = _moderated(variance, df, prior)
    if least is not None:
        moderated = np.where(np.isfinite(moderated), np.fmax(moderated, least), moderated)
    with np.errstate(invalid="ignore", divide="ignore"):
        spread = moderated * (1 + 1 / others) + own
        usable = present & (others >= 1) & (total_df > 0) & ((moderated + own > 0) | (deviation == 0))
    score, p = _studentized(deviation, spread, total_df, usable)
    return deviation, score, p


def _references(r: np.ndarray, excluded: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per cell, the other sites' reference (`r` without the `excluded` cells): whether the cell
    is in the others' references, how many sites each item's holds, how many other than the
    cell's site, their mean and variance."""
    reference = ~np.isnan(r) & ~excluded  # the cells other sites are compared with
    count = reference.sum(0)  # sites in the references, per item
    total = np.where(reference, r, 0.0).sum(0)
    squares = np.where(reference, r * r, 0.0).sum(0)
    others = count[None, :] - reference  # values other than site i's
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (total[None, :] - np.where(reference, r, 0.0)) / others
        centred = (squares[None, :] - np.where(reference, r * r, 0.0)) - others * mean**2
        variance = np.where(others > 1, np.maximum(centred, 0.0) / (others - 1), np.nan)
        # sums of squares leave rounding where values tie: ties are no deviation and no variance
        variance = np.where(variance <= ROUNDING * mean**2, 0.0, variance)
    return reference, count, others, mean, variance


def smallest_reported(values: np.ndarray, needed: np.ndarray, grid: np.ndarray, suspect: np.ndarray | None = None,
                      reference: np.ndarray | None = None, chunk: int = 2000) -> np.ndarray:
    """[sites, items] how far from the other sites' mean each cell of `leave_one_out` (moderated,
    the same `suspect` and `reference`) would have to sit for its two-sided p to reach `needed`
    (per cell): the smallest |deviation| of the ascending `grid` (> 0), inf where none on it, NaN
    where the cell is not tested. The cell alone is moved, and the move is followed where it
    matters: its item's variance over the sites grows with it, so does the prior of the items'
    variances that every cell's yardstick leans on (with few items a site's own shift widens its
    own yardstick: 4 hospitals and 5 columns need several SDs); the other sites keep the
    references of the second pass (the first pass's outliers left out)."""
    t = np.asarray(values, dtype=np.float64)
    r = t if reference is None else np.asarray(reference, dtype=np.float64).reshape(t.shape)
    left_out = _left_out(suspect, t.shape)
    (_, _, p_now), excluded = _two_passes(t, True, left_out, np.zeros(t.shape), r)
    held, count, others, _, variance = _references(r, excluded)
    full_df = float(np.median(count[count > 1]) - 1) if (count > 1).any() else 0.0
    out = np.full(t.shape, np.nan)
    if full_df <= 0:
        return out
    kept = np.where(held, r, np.nan)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        full = np.nanvar(kept, axis=0, ddof=1)
        fitted = (count > 1) & np.isfinite(full) & (full > 0)
        e = np.where(fitted, _log_variances(np.where(fitted, full, 1.0), full_df), 0.0)
        k, first_moment, second_moment = fitted.sum(), e.sum(), (e**2).sum()
        cells = np.flatnonzero(np.isfinite(p_now).ravel())  # the tested cells
        for start in range(0, cells.size, chunk):
            flat = cells[start:start + chunk]
            i, j = np.unravel_index(flat, t.shape)
            m, v = others[i, j].astype(np.float64)[:, None], variance[i, j][:, None]
            d = m - 1
            step = np.asarray(grid, dtype=np.float64)[None, :]
            counted = ~left_out[i, j][:, None]  # the moved site is in its item's variance over the sites
            moved = np.where(counted, ((m - 1) * v + step**2 * m / (m + 1)) / m, v)
            usable = np.isfinite(moved) & (moved > 0) & (count[j][:, None] > 1)
            e_moved = np.where(usable, _log_variances(np.where(usable, moved, 1.0), full_df), 0.0)
            mine = fitted[j][:, None]
            n_fit = k - mine + usable  # the prior refitted with the moved item's variance: its moments updated
            s1 = first_moment - np.where(mine, e[j][:, None], 0.0) + e_moved
            s2 = second_moment - np.where(mine, e[j][:, None] ** 2, 0.0) + e_moved**2
            centre = s1 / n_fit
            d0, s0 = _prior_of_moments(centre, (s2 - n_fit * centre**2) / (n_fit - 1), full_df)
            moderated, df = _moderated(v, d, (np.where(n_fit >= 2, d0, 0.0), s0))
            p = 2 * stats.t.sf(step / np.sqrt(moderated * (1 + 1 / m)), np.where(df > 0, df, 1))
            reached = (p <= needed.ravel()[flat][:, None]) & (df > 0)
            first_reached = np.argmax(reached, axis=1)
            out.flat[flat] = np.where(reached.any(1), np.asarray(grid)[first_reached], np.inf)
    return out


def _prior(variances: np.ndarray, df: float) -> tuple[float, float]:
    """`fit_prior` of the items' variances; none (d0 = 0) where no scale could be fitted."""
    d0, s0 = fit_prior(variances, df)
    return (d0, s0) if np.isfinite(s0) else (0.0, s0)


def _moderated(variance: np.ndarray, df: np.ndarray, prior: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's variance shrunk towards the prior (d0, s0²: scalars, or per cell) and its
    degrees of freedom, d0 + d (the module's docstring); without a prior (d0 = 0) the cells' own."""
    variance, df, d0, s0 = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (variance, df, *prior)))
    with np.errstate(invalid="ignore", divide="ignore"):
        own_df = np.maximum(df, 0)
        shrunk = np.where(np.isinf(d0), s0, (d0 * s0 + own_df * np.nan_to_num(variance)) / (d0 + own_df))
        total = np.where(np.isinf(d0), np.inf, d0 + own_df)
    moderated = (d0 > 0) & np.isfinite(s0)
    return np.where(moderated, shrunk, variance), np.where(moderated, total, df)


def _studentized(deviation: np.ndarray, spread: np.ndarray, total_df: np.ndarray, usable: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """t = deviation / √spread (0 for no deviation) and its two-sided p with `total_df` degrees of
    freedom; NaN where a cell is not `usable`."""
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.where(usable, np.where(deviation == 0, 0.0, deviation / np.sqrt(spread)), np.nan)
        p = np.where(usable, 2 * stats.t.sf(np.abs(score), np.where(total_df > 0, total_df, 1)), np.nan)
    return score, p


def leave_one_out_predicted(values: np.ndarray, related: Sequence[Sequence[int]], moderate: bool = True,
                            suspect: np.ndarray | None = None, own_variance: np.ndarray | None = None
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For a sites × items matrix and, per item, the items it is predicted from (`related[j]`,
    none: the item is not tested, NaN): every cell's deleted residual (its value less the other
    sites' regression's prediction), the externally studentized t and its two-sided p-value (the
    module's docstring). Sites lacking the item or one of its related items get NaN; an item with
    fewer sites than its regression needs (m + 4: two degrees of freedom without the site) too.

    Two passes, as `leave_one_out`: a cell that stands out beyond doubt in the first (p <
    OUTLIER_P) is left out of every fit it is in, the item's own and those it is a related item
    of (a broken column would tilt the other sites' relation, and be predicted from), and a site
    is then predicted from its related items that do not stand out there (from none: the other
    sites' mean). `suspect` cells (as `leave_one_out`'s) are in no fit from the first pass on.

    `own_variance` (same shape, as `leave_one_out`'s): each cell's own variance beyond what the
    fit's residuals hold; a prediction error carries the item's and, through the coefficients,
    its related items' (Σ β² of theirs), both added to its variance."""
    t = np.asarray(values, dtype=np.float64)
    own = np.zeros(t.shape) if own_variance is None else np.asarray(own_variance, dtype=np.float64).reshape(t.shape)
    left_out = np.zeros(t.shape, dtype=bool) if suspect is None else np.asarray(suspect, dtype=bool)
    first = _predicted(t, related, moderate, left_out, own)
    outliers = (first[2] < OUTLIER_P) | left_out
    if not (outliers & ~left_out).any():
        return first
    return _predicted(t, related, moderate, outliers, own)


def _predicted(t: np.ndarray, related: Sequence[Sequence[int]], moderate: bool, outliers: np.ndarray,
               own: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One pass of `leave_one_out_predicted`; `outliers` cells are in no fit."""
    n_sites, n_items = t.shape
    # per cell: the prediction error, its residual variance, the factor that makes it the
    # prediction's variance, and that variance's degrees of freedom
    error, variance, factor, df = (np.full(t.shape, np.nan) for _ in range(4))
    extra = np.zeros(t.shape)  # the cells' own variance the residuals do not hold (`own`)
    for j, members in enumerate(related):
        members = tuple(members)
        if not members:
            continue
        ok = np.isfinite(t[:, j]) & np.isfinite(t[:, list(members)]).all(1)
        reference = ok & ~outliers[:, j] & ~outliers[:, list(members)].any(1)
        n, k = int(reference.sum()), len(members) + 1
        if n < k + 3:
            continue
        y = t[reference, j]
        fits: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}

        def fit(used: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
            """Least squares of the item on `used` over the reference sites: (design, (X'X)⁻¹,
            coefficients, residuals), once per set of related items."""
            if used not in fits:
                design = np.column_stack([np.ones(n), t[reference][:, list(used)]])
                inverse = np.linalg.pinv(design.T @ design)
                beta = inverse @ design.T @ y
                fits[used] = (design, inverse, beta, y - design @ beta)
            return fits[used]

        x, inverse, beta, residual = fit(members)
        extra[reference, j] = own[reference, j] + own[reference][:, list(members)] @ beta[1:] ** 2
        h = np.clip(np.einsum("ij,jk,ik->i", x, inverse, x), 0.0, 1.0 - 1e-12)
        squares = float(residual @ residual)
        # a site of the fit: its deleted residual e / (1 - h) is the prediction error of the fit
        # without it, whose residual variance is (SSE - e² / (1 - h)) / (n - k - 1)
        error[reference, j] = residual / (1 - h)
        variance[reference, j] = np.maximum(squares - residual**2 / (1 - h), 0.0) / (n - k - 1)
        factor[reference, j] = 1 / (1 - h)
        df[reference, j] = n - k - 1
        for i in np.flatnonzero(ok & ~reference):  # stands out: predicted from the fit of the others
            used = tuple(m for m in members if not outliers[i, m])
            _, inverse, beta, fitted = fit(used)
            point = np.concatenate([[1.0], t[i, list(used)]])
            error[i, j] = t[i, j] - point @ beta
            extra[i, j] = own[i, j] + own[i, list(used)] @ beta[1:] ** 2
            variance[i, j] = float(fitted @ fitted) / (n - len(used) - 1)
            factor[i, j] = 1 + point @ inverse @ point
            df[i, j] = n - len(used) - 1
    prior = (0.0, 0.0)
    if moderate and np.isfinite(df).any():
        with warnings.catch_warnings():  # an item not tested: NaN is its answer
            warnings.simplefilter("ignore", RuntimeWarning)
            typical = np.nanmedian(variance, axis=0)  # an item's residual variance (one site left out)
            prior = _prior(typical[np.isfinite(typical)], float(np.nanmedian(df)))
    moderated, total_df = _moderated(variance, df, prior)
    with np.errstate(invalid="ignore", divide="ignore"):
        error = np.where(np.abs(error) <= ROUNDING * (np.abs(t) + 1.0), 0.0, error)
        spread = moderated * factor + extra
        usable = np.isfinite(error) & (total_df > 0) & ((spread > 0) | (error == 0))
    score, p = _studentized(error, spread, total_df, usable)
    return np.where(usable, error, np.nan), score, p


def fisher_z(r: np.ndarray | float) -> np.ndarray:
    """Fisher's z of correlations, |r| = 1 held just below 1 (a copied column's r is exactly 1;
    released correlations are rounded on this scale)."""
    return np.arctanh(np.clip(r, -0.999999, 0.999999))


def one_sided(score: np.ndarray, p_two_sided: np.ndarray, direction: int) -> np.ndarray:
    """The one-sided p-value for a deviation in `direction` (+1: above the others, -1: below)."""
    half = np.asarray(p_two_sided) / 2
    return np.where(np.sign(score) == direction, half, 1 - half)


def _trigamma_inverse(y: np.ndarray) -> np.ndarray:
    """x with trigamma(x) = y, element-wise (limma's Newton iteration on 1 / trigamma)."""
    y = np.asarray(y, dtype=np.float64)
    x = 0.5 + 1 / y
    going = np.ones(y.shape, dtype=bool)
    for _ in range(50):
        tri = special.polygamma(1, x)
        step = np.where(going, tri * (1 - tri / y) / special.polygamma(2, x), 0.0)
        x = x + step
        going &= -step / x >= 1e-8
        if not going.any():
            break
    return np.where(y > 1e7, 1 / np.sqrt(y), np.where(y < 1e-6, 1 / y, x))