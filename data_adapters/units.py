"""Unit-like differences between two sites' continuous columns: cholesterol in mg/dL at one site
and mmol/L at another is the same column scaled by 38.67, and per-site standardisation hides it.

With three or more sites, `alignment.py` also points at the site whose median is far from the
others'; with two, nothing in the data says which site is wrong, so this check names the pair and
the factor, never a culprit. Rules:
- compared: every pair of sites, every continuous column with at least MIN_VALUES values at both
  sites whose values there are positive (median above 0, at most 5 % below 0): quantities with
  units (concentrations, weights, lengths, durations) are; z-scores and differences are not;
- a pair is flagged when its medians and its interquartile ranges both differ by about the same
  known factor (KNOWN_FACTORS): the medians' ratio within MEDIAN_TOLERANCE of it, the spreads'
  within what sampling allows (`_spread_tolerance`) — a unit scales the middle and the spread
  alike, while a different patient mix rarely moves both by ×2 or more together;
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

MIN_VALUES = 10
MEDIAN_TOLERANCE = math.log(1.12)  # the medians' ratio within ±12 % of the factor
SPREAD_TOLERANCE = math.log(1.35)  # at least: real populations' spreads differ by this much
IQR_LOG_SD = 1.16  # sd of log(sample IQR) x sqrt(n), for normal data
SPREAD_SDS = 2.5
FAHRENHEIT_TOLERANCE = 0.03  # the Fahrenheit median within ±3 % of 1.8 × Celsius + 32
CELSIUS_MAX = 60.0
NEGATIVE_SHARE = 0.05
KNOWN_FACTORS: tuple[tuple[float, str], ...] = (
    (2.2046, "pounds ↔ kilograms"),
    (2.54, "inches ↔ centimetres"),
    (2.8, "urea nitrogen mg/dL ↔ urea mmol/L"),
    (4.008, "calcium mg/dL ↔ mmol/L"),
    (7.5006, "mmHg ↔ kPa"),
    (10.0, "a factor of 10 (g/dL ↔ g/L, cm ↔ mm)"),
    (12.0, "years ↔ months"),
    (17.1, "bilirubin µmol/L ↔ mg/dL"),
    (18.016, "glucose mg/dL ↔ mmol/L"),
    (24.0, "days ↔ hours"),
    (38.67, "cholesterol mg/dL ↔ mmol/L"),
    (60.0, "hours ↔ minutes, minutes ↔ seconds"),
    (88.42, "creatinine µmol/L ↔ mg/dL"),
    (88.57, "triglycerides mg/dL ↔ mmol/L"),
    (100.0, "a factor of 100 (percent ↔ fraction, cm ↔ m)"),
    (1000.0, "a factor of 1000 (g ↔ kg, mL ↔ L, mg ↔ g)"),
)
FAHRENHEIT = "°F ↔ °C (× 1.8 + 32)"


def unit_differences(columns: Mapping[str, Mapping[str, np.ndarray]], sites: Sequence[str]) -> list[dict[str, Any]]:
    """Pairs of sites whose continuous column differs by a known unit factor; `columns` maps a
    column to site -> its values (NaN = missing). Each finding: column, the two sites (the one
    with the larger values first), their medians, the measured factor of the medians and of the
    interquartile ranges, and the conversions that fit."""
    findings = []
    for name, at in columns.items():
        summaries = {site: _summary(at[site]) for site in sites if site in at}
        usable = [site for site in sites if summaries.get(site) is not None]
        for i, first in enumerate(usable):
            for second in usable[i + 1:]:
                finding = _compare(name, first, summaries[first], second, summaries[second])
                if finding:
                    findings.append(finding)
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
             summary_b: tuple[float, float, int]) -> dict[str, Any] | None:
    (median_a, spread_a, n_a), (median_b, spread_b, n_b) = summary_a, summary_b
    if median_a < median_b:
        (a, median_a, spread_a), (b, median_b, spread_b) = (b, median_b, spread_b), (a, median_a, spread_a)
    ratio, spread_ratio, spread_tolerance = median_a / median_b, spread_a / spread_b, _spread_tolerance(n_a, n_b)
    fits = [what for factor, what in KNOWN_FACTORS
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
    """One finding in words, naming no culprit."""
    (a, b), (median_a, median_b) = finding["sites"], finding["medians"]
    return (f"'{finding['column']}': values at {a} are about {finding['factor']:.3g} times those at {b} "
            f"(medians {median_a:.4g} and {median_b:.4g}, spreads ×{finding['spread_factor']:.3g}), as a unit "
            f"difference would make them ({'; '.join(finding['conversions'])}?). The data cannot tell which "
            "site's unit is the intended one.")
