"""Known unit conversions, and which one turns one site's values into the others'.

A unit or coding difference between sites is a linear map of the values: y = a · x + b (°F → °C:
a = 5/9, b = -160/9; mg/dL → mmol/L of glucose: a = 1/18.016; inches → cm: a = 2.54). Given the
quantiles of one site's values and of the other sites' values (`fedcore.interpret.profile`: each
site shares its own quantiles, no rows), `match_conversion` tries every conversion in the
catalogue and says which one, if any, makes the site's quantiles land on the others'.

Rules:
- Analyte-specific factors (a lab value's mg/dL ↔ mmol/L) are tried only for a column whose name
  names that analyte (`synonyms`, matched on words of the name, case and accents ignored);
  factors that hold for any quantity (×10, ×1000, %, °F, lb, inch, months/years, ...) for every
  column. A conversion is named only when it fits: after converting, the site's quantiles lie
  within `FIT_TOLERANCE` reference SDs of the others' (median over quantiles), at least
  `IMPROVEMENT` times closer than before converting, and their range within
  `CONVERSION_SPREAD_RATIO` of the others' (a unit scales the spread with the values: a column
  shifted by 9 SDs from others centred on 0 fits ÷ 100 on its middle alone).
- When no catalogue entry fits but the site's values, all positive, are a clean multiple of the
  others' (the median ratio of their quantiles fits), the factor is reported as unexplained
  ("× 7.5, no known conversion"), or named when a catalogue factor lies within 5 % of it.
- The map goes from the site to the others: "Elm Regional's temperature × 5/9 - 17.8 matches the
  other sites: looks like °F where the others use °C".

Between two sites (`fits_between`: the check-up's `unit_pair`, where no site stands out — two
sites, or the others disagree), nothing in the data says which site is wrong, so a pair is named
with the factor, never a culprit:
- compared are positive quantities (median above 0, at most 5 % below 0): concentrations, weights,
  lengths, durations are; z-scores and differences are not;
- a pair fits a factor when its medians and its interquartile ranges both differ by about that
  factor: the medians' ratio within PAIR_MEDIAN_TOLERANCE of it, the spreads' within what sampling
  allows (`spread_tolerance`) — a unit scales the middle and the spread alike, while a different
  patient mix rarely moves both by ×2 or more together. The factors tried are those of the
  conversions the catalogue allows for the column's name, and every factor of ANY_COLUMN_FACTOR or
  more for any column (KNOWN_FACTORS);
- Fahrenheit against Celsius is affine, not a factor: a pair fits when the smaller median could be
  a temperature in Celsius (at most CELSIUS_MAX), the larger is 1.8 × it + 32 (within
  FAHRENHEIT_TOLERANCE) and the spreads differ by about 1.8;
- a fit lists every known conversion the measured factor fits (17.1 and 18.0 lie close).

This is the product's one catalogue of conversions: the check-up's unit checks
(`data_checks`), the Data page's alignment report and the mapping step's suggestions (which show
the check-up's findings for the files at hand) read it.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FIT_TOLERANCE = 0.25  # reference SDs (median |difference| over the quantiles) for "fits"
IMPROVEMENT = 4.0  # the conversion must bring the quantiles this many times closer
SPREAD_RATIO = 1.25  # an unexplained factor must map the spread of the site's quantiles onto the others' this closely
# a catalogue conversion, within this factor: a population's spread differs by less (fits_between's
# pairs allow ×1.35 and more at small sites), a shifted column divided by a factor by the factor
CONVERSION_SPREAD_RATIO = 2.0


@dataclass(frozen=True)
class Conversion:
    """y = a · x + b maps values in `source` units to `target` units."""

    source: str
    target: str
    a: float
    b: float = 0.0
    analytes: tuple[str, ...] = ()  # words of a column name it applies to (empty: any column)
    note: str = ""  # how to say it when source and target are no single units
    pair_note: str = ""  # the pair of units in words, where source and target are no single units

    def apply(self, x: np.ndarray) -> np.ndarray:
        return self.a * np.asarray(x, dtype=np.float64) + self.b

    def describe(self) -> str:
        if self.note:
            return self.note
        what = f" ({self.analytes[0]})" if self.analytes else ""
        return f"{self.source} where the others use {self.target}{what}"

    def pair(self) -> str:
        """The two units in words, as a pairwise check names them ('cholesterol mg/dL ↔ mmol/L')."""
        if self.pair_note:
            return self.pair_note
        what = f"{self.analytes[0]} " if self.analytes else ""
        return f"{what}{UNIT_WORDS.get(self.source, self.source)} ↔ {UNIT_WORDS.get(self.target, self.target)}"

    @property
    def factor(self) -> float | None:
        """The factor between the two units when they differ by one (no offset), at least 1."""
        if self.b != 0 or self.a == 1:
            return None
        return self.a if self.a > 1 else 1 / self.a

    def formula(self) -> str:
        if self.b == 0:
            return f"× {_number(self.a)}" if self.a >= 1 else f"÷ {_number(1 / self.a)}"
        return f"× {_number(self.a)} {'+' if self.b > 0 else '−'} {_number(abs(self.b))}"


def _both_ways(source: str, target: str, a: float, b: float = 0.0, analytes: tuple[str, ...] = ()) -> list[Conversion]:
    """Both directions; each names the pair in the order written here."""
    pair = Conversion(source, target, a, b, analytes).pair()
    return [Conversion(source, target, a, b, analytes, pair_note=pair),
            Conversion(target, source, 1 / a, -b / a, analytes, pair_note=pair)]


UNIT_WORDS = {"lb": "pounds", "kg": "kilograms", "inch": "inches", "cm": "centimetres"}


GLUCOSE = ("glucose", "glu", "blood sugar", "fbs", "fasting glucose")
CHOLESTEROL = ("cholesterol", "chol", "ldl", "hdl", "total cholesterol", "tc")
TRIGLYCERIDES = ("triglycerides", "triglyceride", "trig", "tg")
CREATININE = ("creatinine", "creat", "crea", "scr")
UREA = ("urea", "bun", "blood urea nitrogen")
BILIRUBIN = ("bilirubin", "bili", "tbil")
CALCIUM = ("calcium", "ca")
LACTATE = ("lactate", "lactic acid", "lac")
HAEMOGLOBIN = ("haemoglobin", "hemoglobin", "hb", "hgb")
ALBUMIN = ("albumin", "alb")
URIC_ACID = ("uric acid", "urate")
MAGNESIUM = ("magnesium", "mg")
HBA1C = ("hba1c", "a1c", "glycated haemoglobin", "glycated hemoglobin")
TEMPERATURE = ("temperature", "temp", "body temperature")

FACTOR_10 = "a factor of 10 (g/dL ↔ g/L, cm ↔ mm)"
FACTOR_100 = "a factor of 100 (percent ↔ fraction, cm ↔ m)"
FACTOR_1000 = "a factor of 1000 (g ↔ kg, mL ↔ L, mg ↔ g)"

CONVERSIONS: tuple[Conversion, ...] = (
    *_both_ways("°F", "°C", 5 / 9, -32 * 5 / 9),
    *_both_ways("K", "°C", 1.0, -273.15, TEMPERATURE),
    *_both_ways("lb", "kg", 0.45359237),
    *_both_ways("inch", "cm", 2.54),
    Conversion("", "", 100.0, note="values a hundredth of the others' (e.g. fractions where the others use %, m "
                                  "where they use cm)", pair_note=FACTOR_100),
    Conversion("", "", 0.01, note="values 100 times the others' (e.g. % where the others use fractions, cm where "
                                 "they use m)", pair_note=FACTOR_100),
    Conversion("", "", 0.001, note="values 1000 times the others' (e.g. mL where the others use L, cells per µL "
                                 "where they count per nL)", pair_note=FACTOR_1000),
    Conversion("", "", 1000.0, note="values a thousandth of the others' (e.g. L where the others use mL)",
               pair_note=FACTOR_1000),
    Conversion("", "", 0.1, note="values 10 times the others' (e.g. g/L where the others use g/dL, mm where cm)",
               pair_note=FACTOR_10),
    Conversion("", "", 10.0, note="values a tenth of the others' (e.g. g/dL where the others use g/L, cm where mm)",
               pair_note=FACTOR_10),
    *_both_ways("years", "months", 12),
    *_both_ways("days", "hours", 24),
    *_both_ways("minutes", "hours", 1 / 60),
    *_both_ways("seconds", "minutes", 1 / 60),
    *_both_ways("kPa", "mmHg", 7.50062),
    *_both_ways("mg/dL", "mmol/L", 1 / 18.016, 0.0, GLUCOSE),
    *_both_ways("mg/dL", "mmol/L", 1 / 38.67, 0.0, CHOLESTEROL),
    *_both_ways("mg/dL", "mmol/L", 1 / 88.57, 0.0, TRIGLYCERIDES),
    *_both_ways("mg/dL", "µmol/L", 88.42, 0.0, CREATININE),
    *_both_ways("mg/dL (BUN)", "mmol/L (urea)", 0.357, 0.0, UREA),
    *_both_ways("mg/dL", "µmol/L", 17.1, 0.0, BILIRUBIN),
    *_both_ways("mg/dL", "mmol/L", 0.2495, 0.0, CALCIUM),
    *_both_ways("mg/dL", "mmol/L", 0.111, 0.0, LACTATE),
    *_both_ways("g/dL", "mmol/L", 0.6206, 0.0, HAEMOGLOBIN),
    *_both_ways("mg/dL", "µmol/L", 59.48, 0.0, URIC_ACID),
    *_both_ways("mg/dL", "mmol/L", 0.4114, 0.0, MAGNESIUM),
    *_both_ways("%", "mmol/mol", 10.929, -2.15 * 10.929, HBA1C),
)


@dataclass(frozen=True)
class Match:
    """The conversion that maps a site's values onto the others' (None: an unexplained factor a, b)."""

    conversion: Conversion | None
    a: float
    b: float
    before: float  # median |site - others| over the quantiles, in the others' SDs, unconverted
    after: float  # the same after converting

    def describe(self, site: str, column: str) -> str:
        if self.conversion is not None:
            return (f"{site}'s {column} looks like {self.conversion.describe()}: {self.conversion.formula()} makes it "
                    f"match the other sites")
        shift = f" {'+' if self.b >= 0 else '−'} {_number(abs(self.b))}" if abs(self.b) > 1e-9 else ""
        return (f"{site}'s {column} × {_number(self.a)}{shift} matches the other sites: a factor no known unit "
                "conversion explains")


def words(name: str) -> str:
    """A column name as lower-case words without accents (for matching analyte synonyms)."""
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    return " " + " ".join(re.findall(r"[a-z0-9]+", plain)) + " "


def candidates(column: str) -> list[Conversion]:
    """The conversions that may apply to a column of this name."""
    named = words(column)
    return [c for c in CONVERSIONS if not c.analytes or any(f" {words(s).strip()} " in named for s in c.analytes)]


def spread_log_ratio(site: np.ndarray, others: np.ndarray, a: float) -> float:
    """|log| of the range of the site's quantiles times |a| against the range of the others'
    (infinite where either has no range): how far the factor a misses the others' spread."""
    site_range, other_range = np.ptp(site), np.ptp(others)
    if not (site_range > 0 and other_range > 0 and a != 0):
        return math.inf
    return abs(math.log(abs(a) * site_range / other_range))


def discrepancy(site: np.ndarray, others: np.ndarray, scale: float) -> float:
    """Median |site - others| over the matching quantiles both released, in units of `scale` (the
    others' SD); NaN when none are."""
    difference = np.abs(np.asarray(site, dtype=np.float64) - np.asarray(others, dtype=np.float64))
    difference = difference[np.isfinite(difference)]
    return float(np.median(difference)) / scale if difference.size else float("nan")


def match_conversion(column: str, site_quantiles: Sequence[float], other_quantiles: Sequence[float],
                     other_sd: float) -> Match | None:
    """The conversion (or unexplained linear factor) that maps the site's quantiles onto the
    others', when one fits and explains a real difference; None otherwise (see the rules above)."""
    site, others = np.asarray(site_quantiles, float), np.asarray(other_quantiles, float)
    keep = np.isfinite(site) & np.isfinite(others)
    if keep.sum() < 3 or not other_sd > 0:
        return None
    site, others = site[keep], others[keep]
    before = discrepancy(site, others, other_sd)
    if before < FIT_TOLERANCE * IMPROVEMENT:  # close already: nothing to explain
        return None
    # a conversion scales the spread as much as the values: a column shifted far from others whose
    # middle is near 0 lands on that middle when divided by 100, its spread shrunk 100 times
    fits = [(discrepancy(c.apply(site), others, other_sd), c) for c in candidates(column)
            if spread_log_ratio(site, others, c.a) < math.log(CONVERSION_SPREAD_RATIO)]
    after, best = min(fits, key=lambda fit: fit[0]) if fits else (np.inf, None)
    if best is not None and after <= FIT_TOLERANCE and before >= IMPROVEMENT * after:
        return Match(best, best.a, best.b, before, after)
    if site.min() <= 0 or others.min() <= 0:  # a factor between units is a ratio of positive amounts
        return None
    a = float(np.median(others / site))  # the pure scale factor (units differ by a factor, not an offset)
    free = discrepancy(a * site, others, other_sd)
    if (free <= FIT_TOLERANCE and before >= IMPROVEMENT * free and abs(np.log(a)) > np.log(1.5)
            and spread_log_ratio(site, others, a) < np.log(SPREAD_RATIO)):
        near = [c for c in candidates(column) if c.b == 0 and abs(np.log(c.a / a)) < 0.05]
        if near:  # a known factor within 5 %: name it
            return Match(near[0], near[0].a, 0.0, before, discrepancy(near[0].apply(site), others, other_sd))
        return Match(None, a, 0.0, before, free)
    return None


PAIR_MIN_VALUES = 10  # values at each site of a pair
PAIR_MEDIAN_TOLERANCE = 0.12  # the medians' ratio within ±12 % of the factor
PAIR_SPREAD_TOLERANCE = 0.35  # at least: real populations' spreads differ by this much
IQR_LOG_SD = 1.16  # sd of log(sample IQR) x sqrt(n), for normal data
SPREAD_SDS = 2.5
FAHRENHEIT_TOLERANCE = 0.03  # the Fahrenheit median within ±3 % of 1.8 × Celsius + 32
CELSIUS_MAX = 60.0
ANY_COLUMN_FACTOR = 2.0  # factors from here up are tried on every column, whatever its name
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


def spread_tolerance(n_a: int, n_b: int) -> float:
    """How far (in log terms) two samples' interquartile ranges may differ by chance: the log of a
    sample IQR has an sd of about IQR_LOG_SD / sqrt(n) (normal data), so the log ratio of two has
    IQR_LOG_SD * sqrt(1/n_a + 1/n_b); SPREAD_SDS of those, and never less than PAIR_SPREAD_TOLERANCE."""
    return max(math.log(1 + PAIR_SPREAD_TOLERANCE), SPREAD_SDS * IQR_LOG_SD * math.sqrt(1 / n_a + 1 / n_b))


def fits_between(median_a: float, iqr_a: float, n_a: int, median_b: float, iqr_b: float, n_b: int,
                 factors: Sequence[tuple[float, str]] = KNOWN_FACTORS) -> tuple[float, float, list[str]] | None:
    """Whether two sites' positive quantity differs by a known factor (see the module's rules): the
    ratio of the larger median to the smaller, that of their IQRs, and the conversions that fit."""
    if median_a < median_b:
        median_a, iqr_a, n_a, median_b, iqr_b, n_b = median_b, iqr_b, n_b, median_a, iqr_a, n_a
    ratio, spread_ratio, tolerance = median_a / median_b, iqr_a / iqr_b, spread_tolerance(n_a, n_b)
    fits = [what for factor, what in factors
            if abs(math.log(ratio / factor)) <= math.log(1 + PAIR_MEDIAN_TOLERANCE)
            and abs(math.log(spread_ratio / factor)) <= tolerance]
    fahrenheit = 1.8 * median_b + 32
    if (median_b <= CELSIUS_MAX and abs(median_a - fahrenheit) <= FAHRENHEIT_TOLERANCE * fahrenheit
            and abs(math.log(spread_ratio / 1.8)) <= tolerance):
        fits.append(FAHRENHEIT)
    return (float(ratio), float(spread_ratio), fits) if fits else None


def _number(value: float) -> str:
    for fraction, text in ((5 / 9, "5/9"), (9 / 5, "9/5")):
        if abs(value - fraction) < 1e-9:
            return text
    return f"{value:.4g}"
