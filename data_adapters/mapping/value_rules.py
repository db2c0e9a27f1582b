"""The mapping step's rules that read the sites' values: what a column's values say about missing
codes, codings, units, kinds and which column a site's column is. `suggestions.py` turns their
findings into decisions; each rule is decided here once, in this order, so that every later rule
sees the values as the earlier ones would leave them (a code is no unit, a column one site never
measured is no consensus, a column's other name is compared in the study's units):

unmeasured  the check-up's constant-column check (`data_checks.Checks.constant`: one value in
            (nearly) every row of a site where the others' most common value holds far fewer;
            material and p < CODE_P) where its value reads 'not measured': outside the others'
            ranges, or a usual code they record in under the missing-code share of their values
            (Switzerland's cholesterol, 0 for every patient); against MIN_OTHER_SITES other sites
            or more. A value common elsewhere (ca = 0) is a real one.
codes       continuous columns: the check-up's rule (`data_checks.Checks.missing_codes`: a usual
            code taking the missing-code share of a site's values, far outside the others' range;
            material and p < CODE_P), on the sites' profile with the unmeasured columns left out.
            Coded columns (text at a site, or at most MAX_CODES distinct values): a usual code
            (SENTINELS) or a word for 'unknown' (NA_WORDS) in the missing-code check's share and
            count of a site's values, that most other sites never use — so `-9` does not become a
            category of `exang`.
coded       a column is coded when it is text at a site or holds at most MAX_CODES distinct values
            (codes aside) at all its sites together: no unit factor is ever tried on it.
units       per continuous column with three or more usable sites, once every site has its
            target: two sites are in one unit unless a catalogue conversion maps one onto the
            other (`_match`: `units.match_conversion`, the check-up's one detector, tried both
            ways, with the pairs' tolerance PAIR_SCALE) and as long as their SDs lie within
            UNIT_SPREAD (or their values within UNIT_CLOSE of their size); the largest connected
            group, less any member a conversion maps onto the rest of it, is the consensus when no
            other group is as large. Every other site gets the conversion that brings its quantiles
            onto the consensus's median quantiles, chosen by the fit (within the pairs' tolerance)
            and then by how close its factor brings the SDs (`_evidence`): a suggestion with its
            fit and the next best's; a question when another conversion lands within
            AMBIGUOUS_FIT and scales the SD within SPREAD_FIT (or the consensus's own spread) as
            well — unless exactly one of them (the chosen among them) is the analyte's the column
            names — when only a factor no conversion explains fits, or when the sites split into
            groups of one size.
            Only quantiles a unit can be read from are (`data_checks.unit_readable`: the check-up's
            guard for discrete columns).
same_column a column at some sites only, against each column the study has at as many sites or
            more and never at the same site: the site's quantiles against that column's consensus
            quantiles (directly or through a catalogue conversion), within MATCH_SDS of its SD or
            MATCH_SPREAD times the distance its own sites lie from one another; and its class
            profile (each class's median against the first class's, in within-class robust SDs:
            a code not yet found does not turn it) within RELATION_GAP, a share of its size and
            its sampling error, not weaker than RELATION_KEEP of an informative relation (or, with
            more classes, a pattern correlated RELATION_CORR and within RELATION_SIZE). A pairing
            is sure when the column fits exactly one column at more sites, no other column fits
            even with MATCH_MARGIN's slack, and no other column at the same sites claims it;
            otherwise a question. Where its values fit exactly one such column (within the
            tolerances) but its relation to the label does not, a question too (VA's peak heart
            rate relates to disease more weakly than thalach elsewhere). Only once every site has
            its target and the labels are one coding.
kinds       whole numbers with 3 to MAX_CODES values (codes aside): codes of categories when the
            values have gaps (3, 6, 7) or the rate of a class over them is not monotone (a
            likelihood-ratio test against the best monotone fit, p < KIND_P: chest pain types);
            otherwise a count or a scale (vessels 0-3) cannot be told from codes, and the analyst
            is asked.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from data_adapters.alignment.align import Alignment
from data_adapters.tables.cells import finite_number, label, label_order
from data_adapters.tables.columns import Column, type_columns
from fedcore.interpret import unit_conversions as catalogue
from fedcore.interpret.checks import limit
from fedcore.interpret.data_checks import Checks, robust_sd, unit_readable
from fedcore.interpret.profile import PROBABILITIES, SENTINELS, Profile, profile_federation

MIN_CODE_SHARE, MIN_CODE_COUNT = limit("missing_code", "share"), limit("missing_code", "count")  # the check-up's
MIN_VALUES = 10
MIN_OTHER_SITES = 2  # 'never measured' at a site is read against two other sites or more: one may be the odd one
MAX_CODES = 10
CODE_P = 0.01
CODE_ROUNDS = 3
OTHERS_RATE = 0.005  # a code is used by most other sites in under this share of their values
OTHERS_VALUES = 30  # values at the other sites together, for "they never use it" to mean something
NA_WORDS = ("unknown", "unk", "missing", "not recorded", "not known", "not done", "nd", "nr", "na", "n a", "x", "none")
MATCH_SDS = 1.5
IQR_SD = 1.349  # a normal distribution's interquartile range in SDs
MEDIAN_SE = 1.253  # a median's sampling SD over a mean's, for normal data
MATCH_SPREAD = 1.5
RELATION_GAP = 0.3
RELATION_SES = 2.5
RELATION_SHARE = 0.25  # of the largest class difference: sites differ in how strongly a feature relates
RELATION_KEEP = 1 / 3  # an informative relation keeps at least this share of its size
RELATION_CORR = 0.3
RELATION_SIZE = 5.0
MATCH_MARGIN = 1.5  # another column fitting with this much slack leaves a match unsure
KIND_P = 0.01
UNIT_SPREAD = 5.0
UNIT_CLOSE = 0.02  # quantiles within this share of the larger |median|: one unit, whatever the SDs
SPREAD_FIT = 2.5  # a conversion's factor brings the site's SD within this factor of the consensus's
AMBIGUOUS_FIT = 1.5  # a second conversion within this many SDs of the consensus is as good as the best
PAIR_SCALE = 2.0  # sites whose SDs differ by this factor or more are not taken to share a unit
MEDIAN = int(np.flatnonzero(np.isclose(PROBABILITIES, 0.5))[0])


@dataclass
class Code:
    site: str
    column: str
    value: Any  # a number or a word, as the dictionary writes it
    count: int
    rows: int
    why: str


@dataclass
class UnitFinding:
    column: str
    site: str
    consensus: list[str]
    conversion: catalogue.Conversion | None  # None: a factor no known conversion explains
    a: float
    b: float
    before: float  # the site against the consensus, in the consensus's SDs, as exported
    after: float  # and converted
    runner_up: tuple[str, float] | None  # the next best conversion and its fit
    median: float
    consensus_median: float
    spread_ratio: float  # the site's SD over the consensus's, as exported
    alike: list[catalogue.Conversion] = field(default_factory=list)  # as good as the chosen: the analyst decides

    @property
    def ambiguous(self) -> bool:
        return bool(self.alike)


@dataclass
class UnitSplit:
    """Sites in two (or more) groups of one size: which is the study's unit the data cannot say."""

    column: str
    groups: list[list[str]]
    medians: list[float]
    conversion: catalogue.Conversion | None  # what maps the second group onto the first


@dataclass
class SameColumn:
    column: str  # the column at some sites only
    sites: list[str]  # where it is
    study: str  # the column it fits
    study_sites: list[str]
    distance: float  # quantiles, in the study column's SDs (after `conversion`)
    conversion: catalogue.Conversion | None
    gap: float  # class profiles
    strict: bool = True  # fits within the tolerances (else only with MATCH_MARGIN's slack)
    related: bool = True  # relates to the label alike (else its values alone fit, within the tolerances)


@dataclass
class KindFinding:
    column: str
    values: list[float]
    sure: bool  # codes of categories for sure (gaps, or a class rate that is not monotone)
    why: str


@dataclass
class Findings:
    unmeasured: list[Code] = field(default_factory=list)
    codes: list[Code] = field(default_factory=list)
    units: list[UnitFinding] = field(default_factory=list)
    splits: list[UnitSplit] = field(default_factory=list)
    same: list[SameColumn] = field(default_factory=list)
    ambiguous: dict[tuple[str, str], list[SameColumn]] = field(default_factory=dict)  # (site, column) -> fits
    kinds: list[KindFinding] = field(default_factory=list)


class SiteValues:
    """Every column of every site with a target (the alignment's rows), typed, as the rules read
    them: numbers, or labels; `drop` hides a code or an unmeasured column once a rule found it."""

    def __init__(self, alignment: Alignment, renamed: dict[str, dict[str, str]] | None = None,
                 present: dict[str, set[str]] | None = None) -> None:
        target = alignment.sites.target
        self.alignment = alignment
        self.y = alignment.y
        self.classes = alignment.class_names
        self.labels_agree = not alignment.label_errors and len(self.classes) >= 2
        self.columns: dict[str, dict[str, Column]] = {}
        self.present: dict[str, set[str]] = {}  # column -> the sites whose table has it (empty or not)
        for table in alignment.tables:
            names = [c for c in table.frame.columns if c != target and c not in alignment.exclude]
            typed = type_columns(table.frame, names, table.file, table.decimal).columns
            for name, column in typed.items():
                study = (renamed or {}).get(table.site, {}).get(name, name)
                self.present.setdefault(study, set()).add(table.site)
                if column.kind != "empty":
                    self.columns.setdefault(study, {})[table.site] = column
        for column, sites in (present or {}).items():
            self.present.setdefault(column, set()).update(sites)
        self.sites = [t.site for t in alignment.tables]
        self.complete = len(alignment.tables) == len(alignment.sites.tables)  # every site has the target
        self.hidden: dict[tuple[str, str], set[Any]] = {}  # (site, column) -> codes; {None}: the whole column

    def hide(self, site: str, column: str, value: Any) -> None:
        self.hidden.setdefault((site, column), set()).add(value)

    def at(self, column: str) -> list[str]:
        return [s for s in self.sites if s in self.columns.get(column, {}) and (s, column) not in self._gone()]

    def _gone(self) -> set[tuple[str, str]]:
        return {key for key, values in self.hidden.items() if None in values}

    def numbers(self, site: str, column: str) -> np.ndarray | None:
        """The column's numbers at the site, codes as NaN; None when it holds text or is gone."""
        found = self.columns.get(column, {}).get(site)
        if found is None or found.kind != "numeric" or (site, column) in self._gone():
            return None
        values = found.values.astype(np.float64)
        codes = [float(v) for v in self.hidden.get((site, column), ()) if finite_number(v) is not None]
        return np.where(np.isin(values, codes), np.nan, values) if codes else values

    def labels(self, site: str, column: str) -> np.ndarray | None:
        """The column's cells as labels ('1', 'M'), codes as NaN."""
        found = self.columns.get(column, {}).get(site)
        if found is None or (site, column) in self._gone():
            return None
        if found.kind == "numeric":
            labels = np.array([label(v) if np.isfinite(v) else np.nan for v in found.values], dtype=object)
        else:
            labels = found.values.copy()
        hidden = {str(label(v)) if finite_number(v) is not None else str(v) for v in self.hidden.get((site, column), ())}
        if hidden:
            labels = np.array([np.nan if isinstance(v, str) and v in hidden else v for v in labels], dtype=object)
        return labels

    def coded(self, column: str) -> bool:
        """Text at a site (MIN_VALUES labels or more: two junk cells left in a column whose codes
        are gone say nothing), or few distinct values over its sites (codes aside)."""
        at = self.columns.get(column, {})
        if any(c.kind == "text" and int((~c.missing).sum()) >= MIN_VALUES for c in at.values()):
            return True
        values = [self.numbers(s, column) for s in self.at(column)]
        seen = np.unique(np.concatenate([v[np.isfinite(v)] for v in values if v is not None] or [np.zeros(0)]))
        return len(seen) <= MAX_CODES

    def quantiles(self, site: str, column: str) -> np.ndarray | None:
        values = self.numbers(site, column)
        if values is None:
            return None
        observed = values[np.isfinite(values)]
        return np.quantile(observed, PROBABILITIES) if observed.size >= MIN_VALUES else None


def find(values: SiteValues, shared: Iterable[str], partial: Iterable[str]) -> Findings:
    """Every rule, in order, on the columns at two or more sites (`shared`); `partial` are the
    columns at some sites only, compared for `same_column`."""
    out = Findings()
    shared = [c for c in shared if len(values.at(c)) >= 2]
    out.unmeasured = _unmeasured(values, shared)
    for code in out.unmeasured:  # a column never measured there is gone; a few other values stay
        values.hide(code.site, code.column, None if code.count == code.rows else code.value)
    out.codes = _coded_codes(values, [c for c in shared if values.coded(c)])
    for code in out.codes:
        values.hide(code.site, code.column, code.value)
    continuous = [c for c in shared if not values.coded(c)]
    for _ in range(CODE_ROUNDS):  # a code found hides: the next site is judged against the others' real values
        found = [c for c in _continuous_codes(values, continuous)
                 if c.value not in values.hidden.get((c.site, c.column), ())]
        out.codes += found
        for code in found:
            values.hide(code.site, code.column, code.value)
        if not found:
            break
    for column in continuous if values.complete else ():  # a site left out (no target yet) could be the consensus
        units, split = _units(values, column)
        out.units += units
        out.splits += [split] if split else []
    if values.labels_agree and values.complete:  # a site left out (no target yet) would look like a missing column
        out.same, out.ambiguous = _same_columns(values, list(partial), out.units)
    out.kinds = _kinds(values, shared)
    return out


# -- missing values ------------------------------------------------------------------------------------------
def _unmeasured(values: SiteValues, columns: Sequence[str]) -> list[Code]:
    """The check-up's constant-column check (`data_checks.Checks.constant`) on the sites' numbers:
    a column at (nearly) one value at a site where the others' vary, material and p < CODE_P, whose
    value reads 'not measured' (outside the others' ranges, or a usual code they rarely record),
    against MIN_OTHER_SITES other sites with numbers or more (against one, the other site's own
    code or unit could make either look odd)."""
    numeric = [c for c in columns if any(values.numbers(s, c) is not None for s in values.at(c))]
    profile = _profile(values, numeric)
    out = []
    for finding in Checks(profile).constant() if profile is not None else ():
        value = finding.evidence.get("not_measured")
        others = [s for s in values.at(finding.feature) if s != finding.site and values.numbers(s, finding.feature) is not None]
        if not (finding.material and finding.p < CODE_P and value is not None and len(others) >= MIN_OTHER_SITES):
            continue
        numbers = values.numbers(finding.site, finding.feature)
        observed = numbers[np.isfinite(numbers)]
        count = int(np.sum(observed == value))
        out.append(Code(finding.site, finding.feature, _written(value), count, int(observed.size),
                        f"is {value:g} in {count} of its {observed.size} values while the other sites' vary, "
                        "a value they rarely record: not measured there"))
    return out


def _written(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def _coded_codes(values: SiteValues, columns: Sequence[str]) -> list[Code]:
    """Codes in coded columns: a usual code or a word for 'unknown' that the other sites with
    MIN_VALUES values or more (OTHERS_VALUES together) never use, at a site whose other values are
    theirs (a site with a coding of its own is mapped first: its 0 in 0/1 against no/yes is no code)."""
    out = []
    sentinels = {label(v) for v in SENTINELS}
    for column in columns:
        sites = values.at(column)
        counts = {s: _label_counts(values.labels(s, column)) for s in sites}
        for site in sites:
            rows = sum(counts[site].values())
            others = [counts[s] for s in sites if s != site and sum(counts[s].values()) >= MIN_VALUES]
            if sum(sum(c.values()) for c in others) < OTHERS_VALUES:
                continue
            theirs = set().union(*(set(c) for c in others))
            for value, count in counts[site].items():
                if not (value in sentinels or _plain(value) in NA_WORDS):
                    continue
                if count < MIN_CODE_COUNT or count / max(rows, 1) < MIN_CODE_SHARE:
                    continue
                used = [v for v in counts[site] if v != value]
                shared = sum(counts[site][v] for v in used if v in theirs) / max(rows - count, 1)
                rates = [c.get(value, 0) / sum(c.values()) for c in others]
                if np.median(rates) < OTHERS_RATE and shared >= 0.5:
                    out.append(Code(site, column, _dictionary_value(value), count, rows,
                                    f"is {value} in {count} of its {rows} values ({count / rows:.0%}), a value most "
                                    f"other sites never use (their values: {', '.join(sorted(theirs, key=label_order)[:6])}; "
                                    f"its other values: {', '.join(sorted(used, key=label_order)[:6])})"))
    return out


def _plain(text: str) -> str:
    return " ".join("".join(ch if ch.isalnum() else " " for ch in str(text).lower()).split())


def _dictionary_value(text: str) -> Any:
    number = finite_number(text)
    return _written(number) if number is not None else text


def _label_counts(labels: np.ndarray | None) -> dict[str, int]:
    if labels is None:
        return {}
    present = [v for v in labels if isinstance(v, str)]
    found, counts = np.unique(np.array(present, dtype=object), return_counts=True) if present else ([], [])
    return {str(v): int(n) for v, n in zip(found, counts)}


def _profile(values: SiteValues, columns: Sequence[str]) -> Profile | None:
    """The sites' federated profile of these columns as numbers (codes found so far hidden), the
    statistics the check-up's data checks read; None without two sites, classes or columns."""
    if not columns or len(values.sites) < 2 or not values.classes:
        return None
    rows = []
    for site in values.sites:
        n = len(values.y[site])
        block = [values.numbers(site, c) for c in columns]
        block = [b if b is not None else np.full(n, np.nan) for b in block]
        rows.append((site, np.column_stack(block), np.maximum(values.y[site], 0)))
    # as computed: the mapping step reads the files in the analyst's hands, and a suggestion names exact
    # values to recode (a released, rounded quantile would propose a code nobody wrote: 'sex' = 1.0053)
    return profile_federation(rows, list(columns), ["continuous"] * len(columns), list(columns), values.classes,
                              policy=None)


def _continuous_codes(values: SiteValues, columns: Sequence[str]) -> list[Code]:
    """The check-up's rule (`data_checks.Checks.missing_codes`) on the sites' profile of these
    columns (unmeasured ones left out)."""
    profile = _profile(values, columns)
    out = []
    for finding in Checks(profile).missing_codes() if profile is not None else ():
        if finding.material and finding.p < CODE_P:
            count = int(finding.evidence["count"])
            total = int(profile.observed[profile.sites.index(finding.site), columns.index(finding.feature)])
            code = _written(finding.evidence["code"])
            out.append(Code(finding.site, finding.feature, code, count, total,
                            f"is {code} in {count} of its {total} values ({count / max(total, 1):.0%}), far outside "
                            "the values the other sites hold"))
    return out


# -- units ---------------------------------------------------------------------------------------------------
def _spread(quantiles: np.ndarray, values: list[np.ndarray]) -> np.ndarray:
    sds = np.array([np.nanstd(v, ddof=1) for v in values])
    return robust_sd(quantiles[:, :, None], sds[:, None])[:, 0]


def _units(values: SiteValues, column: str) -> tuple[list[UnitFinding], UnitSplit | None]:
    sites = [s for s in values.at(column) if values.quantiles(s, column) is not None]
    if len(sites) < 3:
        return [], None
    quantiles = np.stack([values.quantiles(s, column) for s in sites])
    spreads = _spread(quantiles, [values.numbers(s, column) for s in sites])
    groups = _unit_groups(column, sites, quantiles, spreads)
    largest = _refined(column, sites, quantiles, spreads, groups[0])
    if largest != groups[0]:  # members that only a neighbour linked in: grouped again with the rest
        rest = [s for s in sites if s not in largest]
        rows = [sites.index(s) for s in rest]
        groups = [largest, *_unit_groups(column, rest, quantiles[rows], spreads[rows])]
    groups = sorted(groups, key=len, reverse=True)
    sizes = [len(g) for g in groups]
    if len(groups) == 1:
        return [], None
    if sizes[0] == sizes[1] or sizes[0] < 2:
        biggest = [g for g in groups if len(g) == sizes[0]]
        first, second = biggest[0], biggest[1] if len(biggest) > 1 else groups[1]
        reference = np.median(quantiles[[sites.index(s) for s in first]], axis=0)
        theirs = np.median(quantiles[[sites.index(s) for s in second]], axis=0)
        scale = float(np.median(spreads[[sites.index(s) for s in first]]))
        match = _match(column, theirs, float(np.median(spreads[[sites.index(s) for s in second]])), reference, scale)
        return [], UnitSplit(column, [first, second], [float(reference[MEDIAN]), float(theirs[MEDIAN])],
                             match.conversion if match else None)
    consensus = max(groups, key=len)
    rows = [sites.index(s) for s in consensus]
    reference = np.median(quantiles[rows], axis=0)
    scale = float(np.median(spreads[rows]))
    out = []
    for k, site in enumerate(sites):
        if site in consensus:
            continue
        # the groups say this site is in another unit: choose the conversion with the pair's tolerance
        match = _match(column, quantiles[k], PAIR_SCALE * float(spreads[k]), reference, PAIR_SCALE * scale)
        if match is None:
            continue
        ratio = float(spreads[k]) / scale
        tolerance = max(SPREAD_FIT, float(np.max(np.maximum(spreads[rows] / scale, scale / spreads[rows]))))
        fits = sorted(((catalogue.discrepancy(c.apply(quantiles[k]), reference, scale), c)
                       for c in catalogue.candidates(column)), key=lambda fit: _evidence(fit, ratio))
        chosen = match.conversion
        if chosen is not None:
            chosen = next((c for fit, c in fits if fit <= PAIR_SCALE * catalogue.FIT_TOLERANCE or _same(c, chosen)), chosen)
        rest = [(fit, c) for fit, c in fits if not _same(c, chosen)]
        runner = rest[0] if rest else None
        # Another conversion is as good when it lands about as close and scales the SD as well:
        # quantiles of a zero-centred column barely tell × 60 from × 100, their SDs do; sites whose
        # SDs differ by 2 cannot tell × 10 from × 12.
        alike = [c for fit, c in rest if fit <= AMBIGUOUS_FIT and _spread_fits(c.a, ratio, tolerance)]
        named = [c for c in (chosen, *alike) if c.analytes] if chosen is not None and alike else []
        if len(named) == 1:  # the column's name names an analyte: its own units beat factors that hold for anything
            chosen, alike = named[0], []  # (lactate's mg/dL ÷ 9.01 against ÷ 10 and kPa ↔ mmHg)
        a, b = (chosen.a, chosen.b) if chosen is not None else (match.a, match.b)
        converted = a * quantiles[k] + b
        out.append(UnitFinding(column, site, consensus, chosen, a, b,
                               catalogue.discrepancy(quantiles[k], reference, scale),
                               catalogue.discrepancy(converted, reference, scale),
                               (runner[1].formula(), runner[0]) if runner else None,
                               float(quantiles[k, MEDIAN]), float(reference[MEDIAN]), ratio, alike))
    return out, None


def _evidence(fit: tuple[float, catalogue.Conversion], ratio: float) -> tuple[bool, float, float]:
    """How well a conversion explains a site: first whether it lands within the pairs' tolerance,
    then how close its factor brings the site's SD to the consensus's (log ratio), then its
    distance. The quantiles' middle places a zero-centred column near 0 whatever its factor; its
    spread tells ÷ 10 from ÷ 12 and × 60 from × 100."""
    distance, conversion = fit
    return (distance > PAIR_SCALE * catalogue.FIT_TOLERANCE, round(abs(math.log(abs(conversion.a) * ratio)), 2)
            if ratio > 0 else math.inf, distance)


def _same(a: catalogue.Conversion, b: catalogue.Conversion | None) -> bool:
    return b is not None and math.isclose(a.a, b.a, rel_tol=1e-6) and math.isclose(a.b, b.b, rel_tol=1e-6, abs_tol=1e-9)


def _refined(column: str, sites: list[str], quantiles: np.ndarray, spreads: np.ndarray, group: list[str]
             ) -> list[str]:
    """The group without its members that a catalogue conversion maps onto the rest of it (their
    median quantiles): linked pair by pair, a site in another unit can join through one neighbour
    whose own case mix makes the pair look alike."""
    group = list(group)
    while len(group) >= 3:
        for site in group:
            rest = [sites.index(s) for s in group if s != site]
            k = sites.index(site)
            match = _match(column, quantiles[k], PAIR_SCALE * float(spreads[k]), np.median(quantiles[rest], axis=0),
                           PAIR_SCALE * float(np.median(spreads[rest])))
            if match is not None and match.conversion is not None:
                group.remove(site)
                break
        else:
            return group
    return group


def _spread_fits(a: float, ratio: float, tolerance: float) -> bool:
    """A factor a brings a site whose SD is `ratio` times the consensus's within `tolerance` of it
    (SPREAD_FIT, or as far as the consensus's own sites' SDs lie from their median)."""
    return abs(math.log(abs(a) * ratio)) <= math.log(tolerance) if ratio > 0 else False


def _unit_groups(column: str, sites: list[str], quantiles: np.ndarray, spreads: np.ndarray) -> list[list[str]]:
    """Sites linked when no catalogue conversion maps one onto the other (either way) and their
    SDs lie within UNIT_SPREAD of each other or their values within UNIT_CLOSE of their size (two
    sites in units 10⁴ apart have no conversion between them, yet are no one unit; two HAR
    subjects' energies, near -1 at both, differ in SD, not in unit): the connected groups,
    largest first. Two sites differ by
    their case mix as well as by any unit, where a site against the others' median differs less:
    between two, distances are measured in PAIR_SCALE SDs."""
    n = len(sites)
    linked = np.eye(n, dtype=bool)
    for i in range(n):
        for j in range(i + 1, n):
            match = _match(column, quantiles[i], PAIR_SCALE * float(spreads[i]), quantiles[j],
                           PAIR_SCALE * float(spreads[j]))
            ratio = max(spreads[i], spreads[j]) / max(min(spreads[i], spreads[j]), 1e-300)
            size = float(max(abs(quantiles[i, MEDIAN]), abs(quantiles[j, MEDIAN])))
            close = size > 0 and catalogue.discrepancy(quantiles[i], quantiles[j], size) <= UNIT_CLOSE
            linked[i, j] = linked[j, i] = (match is None or match.conversion is None) and (ratio < UNIT_SPREAD or close)
    groups, seen = [], set()
    for i in range(n):
        if i in seen:
            continue
        group, frontier = {i}, [i]
        while frontier:
            k = frontier.pop()
            for j in np.flatnonzero(linked[k]):
                if j not in group:
                    group.add(int(j))
                    frontier.append(int(j))
        seen |= group
        groups.append([sites[k] for k in sorted(group)])
    return sorted(groups, key=len, reverse=True)


def _match(column: str, site: np.ndarray, site_scale: float, reference: np.ndarray, scale: float
           ) -> catalogue.Match | None:
    """`units.match_conversion` of the site onto the reference; failing that, of the reference onto
    the site, turned round. One way is not enough: a zero-centred column a hundred times too small
    lies within one SD of the others (its quantiles are all near 0), so the first way calls it
    close already, while the others a hundred times too large are far from it in its own SDs.
    Only where both have quantiles a unit can be read from (`data_checks.unit_readable`, the
    check-up's guard)."""
    if not (unit_readable(site, reference, scale) and unit_readable(reference, site, site_scale)):
        return None
    match = catalogue.match_conversion(column, site, reference, scale)
    if match is not None:
        return match
    back = catalogue.match_conversion(column, reference, site, site_scale)
    if back is None or back.conversion is None:
        return None
    inverse = next((c for c in catalogue.candidates(column) if math.isclose(c.a * back.conversion.a, 1, rel_tol=1e-6)
                    and math.isclose(c.b, -back.conversion.b / back.conversion.a, rel_tol=1e-6, abs_tol=1e-9)), None)
    if inverse is None:
        return None
    return catalogue.Match(inverse, inverse.a, inverse.b, catalogue.discrepancy(site, reference, scale),
                           catalogue.discrepancy(inverse.apply(site), reference, scale))


# -- which column a site's column is ---------------------------------------------------------------------------
def _same_columns(values: SiteValues, partial: list[str], units: list[UnitFinding]
                  ) -> tuple[list[SameColumn], dict[tuple[str, str], list[SameColumn]]]:
    """Columns at some sites only, paired with a column the study has at as many sites or more (and
    never at the same site) whose values and class profile they match; sure when each has only the
    other among those at more sites (at as many, which name is the study's the data cannot say)."""
    numeric = [c for c in partial if values.at(c) and not values.coded(c)
               and all(values.quantiles(s, c) is not None for s in values.at(c))]
    candidates = [c for c in values.columns if values.at(c) and not values.coded(c)]
    converted = {(u.site, u.column): u for u in units if u.conversion is not None}
    references = {c: _reference(values, c, converted) for c in candidates}
    fits: dict[str, list[SameColumn]] = {}
    for x in numeric:
        x_sites = values.at(x)
        for y in candidates:
            y_sites = values.at(y)
            if (y == x or set(x_sites) & values.present[y] or len(y_sites) < len(x_sites)
                    or references[y] is None):
                continue
            # a column that fits only with some slack is no match, but it makes the one that fits no sure thing
            fit = _fit(values, x, x_sites, y, y_sites, references[y], MATCH_MARGIN)
            if fit is not None:
                fits.setdefault(x, []).append(fit)
    claims: dict[str, list[str]] = {}
    for x, found in fits.items():
        for fit in found:
            if fit.related:
                claims.setdefault(fit.study, []).append(x)
    sure, ambiguous = [], {}
    for x, candidates_of_x in fits.items():
        near = [f for f in candidates_of_x if f.related]
        found = [f for f in near if f.strict]
        if not found:
            # values alone fit one column the site lacks, held by more sites: asked, the relation said
            alone = [f for f in candidates_of_x if not f.related]
            if not near and len(alone) == 1 and len(alone[0].study_sites) > len(alone[0].sites):
                for site in values.at(x):
                    ambiguous[(site, x)] = alone
            continue
        larger = [f for f in near if len(f.study_sites) > len(f.sites)]  # other spellings at as few sites aside
        rivals = [o for o in claims[larger[0].study] if o != x and set(values.at(o)) & set(values.at(x))] if larger else []
        if len(larger) == 1 and larger[0].strict and not rivals:
            sure.append(larger[0])
            continue
        for site in values.at(x):
            ambiguous[(site, x)] = sorted(near, key=lambda f: f.distance + f.gap)
    return sure, ambiguous


def _reference(values: SiteValues, column: str, converted: dict[tuple[str, str], UnitFinding]
               ) -> tuple[np.ndarray, float, float, np.ndarray] | None:
    """A column's consensus: median quantiles over its sites (converted where a unit finding says),
    the median SD, how far its sites lie from one another (the largest distance of one from the
    others' median) and its median class profile."""
    sites = [s for s in values.at(column) if values.quantiles(s, column) is not None]
    if not sites:
        return None
    quantiles, arrays, profiles = [], [], []
    for site in sites:
        numbers = values.numbers(site, column)
        unit = converted.get((site, column))
        if unit is not None:
            numbers = unit.a * numbers + unit.b
        arrays.append(numbers)
        quantiles.append(np.quantile(numbers[np.isfinite(numbers)], PROBABILITIES))
        profiles.append(_class_profile(numbers, values.y[site], len(values.classes)))
    quantiles = np.stack(quantiles)
    spreads = _spread(quantiles, arrays)
    scale = float(np.median(spreads))
    if not scale > 0:
        return None
    reference = np.median(quantiles, axis=0)
    apart = max((catalogue.discrepancy(q, np.median(np.delete(quantiles, k, axis=0), axis=0), scale)
                 for k, q in enumerate(quantiles)), default=0.0) if len(sites) > 1 else 0.0
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a class absent at every site: NaN
        profile = np.nanmedian(np.stack(profiles), axis=0)
    return reference, scale, apart, profile


def _fit(values: SiteValues, x: str, x_sites: list[str], y: str, y_sites: list[str],
         reference: tuple[np.ndarray, float, float, np.ndarray], slack: float = 1.0) -> SameColumn | None:
    """x (at x_sites) against y's consensus: a SameColumn when its values and class profile fit
    within the tolerances times `slack`; `strict` when they fit within the tolerances themselves;
    not `related` when its values fit within the tolerances but its class profile does not (VA's
    peak heart rate relates to the label more weakly than thalach at the other hospitals)."""
    ref_q, scale, apart, ref_profile = reference
    tolerance = max(MATCH_SDS, MATCH_SPREAD * apart)
    worst, gap_worst, conversion, strict, related = 0.0, 0.0, None, True, True
    for site in x_sites:
        q = values.quantiles(site, x)
        numbers = values.numbers(site, x)
        distance = catalogue.discrepancy(q, ref_q, scale)
        if distance > slack * tolerance:
            match = catalogue.match_conversion(y, q, ref_q, scale)
            if match is None or match.conversion is None:
                return None
            conversion = match.conversion
            numbers = conversion.apply(numbers)
            distance = catalogue.discrepancy(conversion.apply(q), ref_q, scale)
            if distance > slack * tolerance:
                return None
        profile = _class_profile(numbers, values.y[site], len(values.classes))
        se = _profile_se(values.y[site], numbers, len(values.classes))
        gap = _relation_gap(profile, ref_profile, se, slack)
        if gap is None:  # the values alone may still fit: asked, never pre-filled
            if distance > tolerance:
                return None
            related, gap = False, _largest_gap(profile, ref_profile)
        strict = strict and distance <= tolerance and _relation_gap(profile, ref_profile, se) is not None
        worst, gap_worst = max(worst, distance), max(gap_worst, gap)
    return SameColumn(x, x_sites, y, y_sites, worst, conversion, gap_worst, strict and related, related)


def _largest_gap(profile: np.ndarray, reference: np.ndarray) -> float:
    both = np.isfinite(profile) & np.isfinite(reference)
    return float(np.max(np.abs(profile[both] - reference[both]))) if both.any() else float("nan")


def _relation_gap(profile: np.ndarray, reference: np.ndarray, se: float, slack: float = 1.0) -> float | None:
    """How far a site's class profile lies from the reference's (the largest difference), or None
    when it does not relate to the label alike: with two classes, a difference beyond RELATION_GAP
    + RELATION_SHARE of the reference's + RELATION_SES sampling SDs, or — where the reference is
    informative (|d| ≥ RELATION_GAP) — the other sign or less than RELATION_KEEP of its size; with
    more classes, unless that holds, a pattern over the classes correlated at least RELATION_CORR
    with the reference's and within RELATION_SIZE times its size (a subject's activities move a
    feature alike, more or less strongly)."""
    both = np.isfinite(profile) & np.isfinite(reference)
    if not both.any():
        return None
    mine, theirs = profile[both], reference[both]
    gap = float(np.max(np.abs(mine - theirs)))
    allowed = slack * (RELATION_GAP + RELATION_SHARE * float(np.max(np.abs(theirs))) + RELATION_SES * se)
    informative = np.abs(theirs) >= RELATION_GAP
    weaker = np.abs(mine[informative]) < RELATION_KEEP / slack * np.abs(theirs[informative])
    turned = np.sign(mine[informative]) != np.sign(theirs[informative])
    if gap <= allowed and not weaker.any() and not turned.any():
        return gap
    if len(theirs) >= 2 and np.std(mine) > 0 and np.std(theirs) > 0:
        size = np.linalg.norm(mine) / np.linalg.norm(theirs)
        if (np.corrcoef(mine, theirs)[0, 1] >= RELATION_CORR / slack
                and 1 / (slack * RELATION_SIZE) <= size <= slack * RELATION_SIZE):
            return gap
    return None


def _class_profile(numbers: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """Each class's median minus the first class's, in the pooled within-class robust SD (the
    interquartile range / 1.349): medians, so that a code not yet found (a -999 in a column only
    the data can match) does not turn the relation round. NaN: a class with fewer than 2 values."""
    keep = np.isfinite(numbers) & (y >= 0)
    x, y = numbers[keep], y[keep]
    medians = np.full(n_classes, np.nan)
    squares, dof = 0.0, 0
    for k in range(n_classes):
        members = x[y == k]
        if len(members) >= 2:
            q25, medians[k], q75 = np.percentile(members, (25, 50, 75))
            squares += ((q75 - q25) / IQR_SD) ** 2 * (len(members) - 1)
            dof += len(members) - 1
    within = math.sqrt(squares / dof) if dof > 0 else 0.0
    if not within > 0 or not np.isfinite(medians[0]):
        return np.full(max(n_classes - 1, 1), np.nan)
    return (medians[1:] - medians[0]) / within


def _profile_se(y: np.ndarray, numbers: np.ndarray, n_classes: int) -> float:
    """The sampling SD of a standardised difference of class medians: MEDIAN_SE × sqrt(1/n0 +
    1/n1) for the two smallest classes present."""
    counts = np.bincount(y[(y >= 0) & np.isfinite(numbers)], minlength=n_classes)
    present = np.sort(counts[counts >= 2])
    return float(MEDIAN_SE * math.sqrt(1 / present[0] + 1 / present[1])) if len(present) >= 2 else float("inf")


# -- kinds ---------------------------------------------------------------------------------------------------
def _kinds(values: SiteValues, columns: Sequence[str]) -> list[KindFinding]:
    out = []
    for column in columns:
        at = values.at(column)
        arrays = [values.numbers(s, column) for s in at]
        if any(a is None for a in arrays):
            continue
        pooled = np.concatenate([a[np.isfinite(a)] for a in arrays])
        seen = _without_outer_codes(np.unique(pooled))
        if not (pooled.size and np.all(np.mod(pooled, 1) == 0) and 3 <= len(seen) <= MAX_CODES):
            continue
        if np.any(np.diff(seen) > 1):
            out.append(KindFinding(column, seen.tolist(), True, f"its values {_listed(seen)} leave gaps: codes, not a "
                                                                "count or a scale"))
            continue
        if not values.labels_agree:
            continue  # the class rates tell only once the sites' labels are one coding
        p = _monotone_p(values, column, at, seen)
        if p < KIND_P:
            out.append(KindFinding(column, seen.tolist(), True,
                                   f"the share of each class does not rise or fall steadily over {_listed(seen)} "
                                   f"(p = {p:.1g}): codes of categories, not a count or a scale"))
        else:
            out.append(KindFinding(column, seen.tolist(), False,
                                   f"whole numbers {_listed(seen)}: a count or a scale (continuous), or codes of "
                                   "categories? The data cannot tell"))
    return out


def _without_outer_codes(seen: np.ndarray) -> np.ndarray:
    """The values without a usual code (SENTINELS) beyond a gap at either end: 0-3 and a 9 no rule
    could call a code yet (too few values elsewhere) are a count and a code, not codes with gaps."""
    while len(seen) > 3 and seen[-1] in SENTINELS and seen[-1] - seen[-2] > 1:
        seen = seen[:-1]
    while len(seen) > 3 and seen[0] in SENTINELS and seen[1] - seen[0] > 1:
        seen = seen[1:]
    return seen


def _listed(seen: np.ndarray) -> str:
    return ", ".join(f"{v:g}" for v in seen)


def _monotone_p(values: SiteValues, column: str, sites: list[str], seen: np.ndarray) -> float:
    """Whether a class's share over the values departs from every monotone trend: the likelihood
    ratio of the free fit against the best monotone one (pool-adjacent-violators, rising or
    falling; the smaller of the two), against χ² with (values - 2) degrees of freedom — the
    monotone fit uses at least one of the values - 1 free differences — the smallest p over the
    classes times their number."""
    x = np.concatenate([values.numbers(s, column) for s in sites])
    y = np.concatenate([values.y[s] for s in sites])
    keep = np.isfinite(x) & (y >= 0) & np.isin(x, seen)
    x, y = x[keep], y[keep]
    index = np.searchsorted(seen, x)
    counts = np.bincount(index, minlength=len(seen)).astype(float)
    if counts.min() == 0:
        return 1.0
    classes = range(1, len(values.classes)) if len(values.classes) == 2 else range(len(values.classes))
    best = 1.0
    for k in classes:
        hits = np.bincount(index, weights=(y == k).astype(float), minlength=len(seen))
        free = hits / counts
        statistic = min(_deviance(hits, counts, free, _isotonic(free, counts, rising)) for rising in (True, False))
        best = min(best, float(stats.chi2.sf(statistic, max(len(seen) - 2, 1))))
    return min(1.0, best * len(list(classes)))


def _isotonic(rates: np.ndarray, weights: np.ndarray, rising: bool) -> np.ndarray:
    """Pool-adjacent-violators: the weighted least-squares monotone fit."""
    blocks = [[float(r), float(w), 1] for r, w in zip(rates if rising else rates[::-1], weights if rising else weights[::-1])]
    merged: list[list[float]] = []
    for block in blocks:
        merged.append(block)
        while len(merged) > 1 and merged[-2][0] > merged[-1][0]:
            r2, w2, n2 = merged.pop()
            r1, w1, n1 = merged.pop()
            merged.append([(r1 * w1 + r2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    fitted = np.concatenate([[r] * int(n) for r, _, n in merged])
    return fitted if rising else fitted[::-1]


def _deviance(hits: np.ndarray, counts: np.ndarray, free: np.ndarray, fitted: np.ndarray) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        fitted = np.clip(fitted, 1e-12, 1 - 1e-12)
        terms = hits * np.log(np.where(hits > 0, free / fitted, 1)) + (counts - hits) * np.log(
            np.where(counts - hits > 0, (1 - free) / (1 - fitted), 1))
    return float(2 * np.nansum(terms))
