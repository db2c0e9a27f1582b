"""Unit-like differences between sites' continuous columns: cholesterol in mg/dL at one site and
mmol/L at another is the same column scaled by 38.67, and per-site standardisation hides it.

Every conversion comes from the product's one catalogue (`fedcore.interpret.units`); this module
only decides how the alignment looks for them. Rules:
- three or more sites: for every continuous column and site, the catalogue's `match_conversion`
  maps the site's quantiles (PROBABILITIES) onto the other sites' median quantiles, measured in
  the others' typical robust SD (`data_checks.robust_sd`): a fit names the site that differs and
  the conversion (`site_unit_differences`); an unexplained clean factor is named as such. Only
  when the other sites agree among themselves (each within AGREEMENT of their median): with two
  sites in each unit no site is the odd one out, and the pairwise check below speaks;
- every pair of sites, for the columns no site-level finding explains (two sites: nothing in the
  data says which site is wrong, so this check names the pair and the factor, never a culprit):
  compared are the columns with at least MIN_VALUES values at both sites whose values there are
  positive (median above 0, at most 5 % below 0): quantities with units (concentrations, weights,
  lengths, durations) are; z-scores and differences are not;
- a pair is flagged when its medians and its interquartile ranges both differ by about the same
  catalogue factor: the medians' ratio within MEDIAN_TOLERANCE of it, the spreads' within what
  sampling allows (`_spread_tolerance`) — a unit scales the middle and the spread alike, while a
  different patient mix rarely moves both by ×2 or more together. Hence the factors tried: those
  of the conversions the catalogue allows for the column's name (`candidates`: an analyte's
  mg/dL ↔ mmol/L only for a column naming it), and every factor of ANY_COLUMN_FACTOR or more for
  any column (KNOWN_FACTORS);
- Fahrenheit against Celsius is affine, not a factor: a pair is flagged when the smaller median
  could be a temperature in Celsius (at most CELSIUS_MAX), the larger is 1.8 × it + 32 (within
  FAHRENHEIT_TOLERANCE) and the spreads differ by about 1.8;
- a finding lists every known conversion the measured factor fits (17.1 and 18.0 lie close).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedcore.interpret.data_checks import robust_sd
from fedcore.interpret.profile import PROBABILITIES
from fedcore.interpret.units import (
    CONVERSIONS,
    FIT_TOLERANCE,
    IMPROVEMENT,
    Conversion,
    candidates,
    discrepancy,
    match_conversion,
)

MIN_VALUES = 10
MEDIAN_TOLERANCE = math.log(1.12)  # the medians' ratio within ±12 % of the factor
SPREAD_TOLERANCE = math.log(1.35)  # at least: real populations' spreads differ by this much
IQR_LOG_SD = 1.16  # sd of log(sample IQR) x sqrt(n), for normal data
SPREAD_SDS = 2.5
FAHRENHEIT_TOLERANCE = 0.03  # the Fahrenheit median within ±3 % of 1.8 × Celsius + 32
CELSIUS_MAX = 60.0
NEGATIVE_SHARE = 0.05
ANY_COLUMN_FACTOR = 2.0  # factors from here up are tried on every column, whatever its name
# The other sites agree when each lies within what `match_conversion` calls close already.
AGREEMENT = FIT_TOLERANCE * IMPROVEMENT
FAHRENHEIT = next(c.pair() for c in CONVERSIONS if c.source == "°F")


def _factors(conversions: Sequence[Conversion]) -> tuple[tuple[float, str], ...]:
    """(factor, the unit pairs it converts) for the catalogue's pure factors, one entry per factor."""
    named: dict[float, list[str]] = {}
    for conversion in conversions:
        if conversion.factor is not None:
            pairs = named.setdefault(round(conversion.factor, 4), [])
            if conversion.pair() not in pairs:
                pairs.append(conversion.pair())
    return tuple(sorted((factor, ", ".join(pairs)) for factor, pairs in named.items()))


# Every factor tried on any column (the catalogue's of ANY_COLUMN_FACTOR or more).
KNOWN_FACTORS: tuple[tuple[float, str], ...] = tuple(f for f in _factors(CONVERSIONS) if f[0] >= ANY_COLUMN_FACTOR)


def column_factors(column: str) -> tuple[tuple[float, str], ...]:
    """The factors tried on a column of this name: KNOWN_FACTORS and those its name allows."""
    return tuple(sorted({*KNOWN_FACTORS, *_factors(candidates(column))}))


def unit_differences(columns: Mapping[str, Mapping[str, np.ndarray]], sites: Sequence[str]) -> list[dict[str, Any]]:
    """Site-level findings (three or more sites), then pairs of sites whose column differs by a
    known factor where no site-level finding explains the column; `columns` maps a column to
    site -> its values (NaN = missing). A site-level finding: column, site, others, conversion
    (the unit pair; None for an unexplained factor), conversions, a, b, formula, message. A pair's:
    column, the two sites (the one with the larger values first), their medians, the measured
    factor of the medians and of the interquartile ranges, and the conversions that fit."""
    findings = site_unit_differences(columns, sites)
    explained = {f["column"] for f in findings}
    for name, at in columns.items():
        if name in explained:
            continue
        summaries = {site: _summary(at[site]) for site in sites if site in at}
        usable = [site for site in sites if summaries.get(site) is not None]
        factors = column_factors(name)
        for i, first in enumerate(usable):
            for second in usable[i + 1:]:
                finding = _compare(name, first, summaries[first], second, summaries[second], factors)
                if finding:
                    findings.append(finding)
    return findings


def site_unit_differences(columns: Mapping[str, Mapping[str, np.ndarray]],
                          sites: Sequence[str]) -> list[dict[str, Any]]:
    """With three or more sites holding MIN_VALUES values of a column: each site whose values a
    catalogue conversion (or a clean unexplained factor) maps onto the other sites' (see the rules)."""
    findings = []
    for name, at in columns.items():
        usable = [s for s in sites if s in at and np.isfinite(at[s]).sum() >= MIN_VALUES]
        if len(usable) < 3:
            continue
        values = [np.asarray(at[s], dtype=np.float64) for s in usable]
        quantiles = np.stack([np.quantile(v[np.isfinite(v)], PROBABILITIES) for v in values])
        sds = np.array([np.std(v[np.isfinite(v)], ddof=1) for v in values])
        spreads = robust_sd(quantiles[:, :, None], sds[:, None])[:, 0]
        for i, site in enumerate(usable):
            others = [k for k in range(len(usable)) if k != i]
            scale = float(np.median(spreads[others]))
            reference = np.median(quantiles[others], axis=0)
            if any(discrepancy(quantiles[k], reference, scale) > AGREEMENT for k in others):
                continue  # the others disagree among themselves: which one is the odd one out is not clear
            match = match_conversion(name, quantiles[i], reference, scale)
            if match is None:
                continue
            conversion = match.conversion
            findings.append({
                "column": name, "site": site, "others": [usable[k] for k in others],
                "conversion": conversion.pair() if conversion else None,
                "name": f"{conversion.pair()} ({conversion.formula()})" if conversion else None,
                "conversions": [conversion.pair()] if conversion else [],
                "a": match.a, "b": match.b,
                "formula": conversion.formula() if conversion else f"× {match.a:.4g}",
                "median": round(float(quantiles[i, len(PROBABILITIES) // 2]), 4),
                "others_median": round(float(np.median(quantiles[others, len(PROBABILITIES) // 2])), 4),
                "message": match.describe(site, name),
            })
    return findings


def _summary(values: np.ndarray) -> tuple[float, float, int] | None:
    """(median, interquartile range, values) of a positive quantity with enough values; None otherwise."""
    observed = values[np.isfinite(values)]
    if observed.size < MIN_VALUES or (observed < 0).mean() > NEGATIVE_SHARE:
        return None
    q25, median, q75 = np.percentile(observed, (25, 50, 75))
    return (float(median), float(q75 - q25), observed.size) if median > 0 and q75 > q25 else None


def _spread_tolerance(n_a: int, n_b: int) -> float:
    """How far (in log terms) two samples' interquartile ranges may differ by chance: the log of a
    sample IQR has an sd of about IQR_LOG_SD / sqrt(n) (normal data), so the log ratio of two has
    IQR_LOG_SD * sqrt(1/n_a + 1/n_b); SPREAD_SDS of those, and never less than SPREAD_TOLERANCE."""
    return max(SPREAD_TOLERANCE, SPREAD_SDS * IQR_LOG_SD * math.sqrt(1 / n_a + 1 / n_b))


def _compare(name: str, a: str, summary_a: tuple[float, float, int], b: str,
             summary_b: tuple[float, float, int], factors: Sequence[tuple[float, str]] = KNOWN_FACTORS
             ) -> dict[str, Any] | None:
    (median_a, spread_a, n_a), (median_b, spread_b, n_b) = summary_a, summary_b
    if median_a < median_b:
        (a, median_a, spread_a), (b, median_b, spread_b) = (b, median_b, spread_b), (a, median_a, spread_a)
    ratio, spread_ratio, spread_tolerance = median_a / median_b, spread_a / spread_b, _spread_tolerance(n_a, n_b)
    fits = [what for factor, what in factors
            if abs(math.log(ratio / factor)) <= MEDIAN_TOLERANCE
            and abs(math.log(spread_ratio / factor)) <= spread_tolerance]
    fahrenheit = 1.8 * median_b + 32
    if (median_b <= CELSIUS_MAX and abs(median_a - fahrenheit) <= FAHRENHEIT_TOLERANCE * fahrenheit
            and abs(math.log(spread_ratio / 1.8)) <= spread_tolerance):
        fits.append(FAHRENHEIT)
    if not fits:
        return None
    return {"column": name, "sites": [a, b], "medians": [round(median_a, 4), round(median_b, 4)],
            "factor": round(ratio, 3), "spread_factor": round(spread_ratio, 3), "conversions": fits}


def unit_message(finding: Mapping[str, Any]) -> str:
    """One finding in words: the site that differs, or (a pair's) naming no culprit."""
    if "site" in finding:
        return finding["message"] + "."
    (a, b), (median_a, median_b) = finding["sites"], finding["medians"]
    return (f"'{finding['column']}': values at {a} are about {finding['factor']:.3g} times those at {b} "
            f"(medians {median_a:.4g} and {median_b:.4g}, spreads ×{finding['spread_factor']:.3g}), as a unit "
            f"difference would make them ({'; '.join(finding['conversions'])}?). The data cannot tell which "
            "site's unit is the intended one.")
