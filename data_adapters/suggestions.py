"""What the mapping step suggests for the sites' tables (after any data dictionary is applied):
one `Suggestion` per problem, each a small dictionary patch (`dictionary.merge`) the analyst
accepts, edits or rejects. Every rule makes no suggestion where the data leave a doubt.

rename     a column at some sites only whose name matches another's at the other sites once case,
           accents, spacing, punctuation and unit words are set aside, or through a synonym
           (SYNONYMS, and the unit catalogue's analyte names): the minority spelling is renamed to
           the one most sites use. A site with two columns of one name key gets none.
           Without a name match, by the data: a numeric column at some sites only whose values
           match (quantiles within MATCH_SDS of the other's robust SD, or after a catalogue
           conversion) those of one column at exactly the other sites, with the same relation to
           the label (standardised class difference within RELATION_GAP, same sign); only when
           that column is the one candidate either way.
convert    three or more sites: a site whose column a catalogue conversion maps onto the others'
           (`units.site_unit_differences`); unexplained factors are reported, not suggested.
missing    a usual missing-value code taking a share of one site's values outside every other
           site's range: the check-up's rule (`data_checks.Checks.missing_codes`, material and
           p < CODE_P) on the sites' profile of the shared continuous columns.
values     a categorical or binary column coded differently at some sites: the coding most sites
           use is the study's; a site's code maps to it when both name one thing once case,
           accents and synonyms (CODE_SYNONYMS: M/male/man, yes/y/true/1, ...) are set aside;
           for a two-valued column with no such match, by share of rows and rate of the last
           class: the pairing whose four differences sum to at most PAIR_FIT, when the other
           pairing's sum is PAIR_MARGIN times as large (and at least PAIR_MARGIN × PAIR_FIT / 4).
kind       a column inferred continuous whose values are whole numbers with 3 to MAX_CODES
           distinct values at all sites together: categorical (chest-pain type 1-4).
drop       a column named like a spreadsheet's unnamed one ('Unnamed: 7'); a column without a value
           at any site; an identifier: text or whole numbers, distinct in ID_SHARE of the rows at
           every site that has it (and at least MIN_ID_ROWS rows).
positive   the target coded differently at a site: yes/no against 1/0 (synonyms), or a site with
           more values than the others' two where it shares their negative one (heart disease
           0-4 against 0/1): its other values are the positive class.
target     the target column missing at a site: a column there whose name matches it (as rename).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from data_adapters.alignment import Alignment, TableSites
from data_adapters.cells import as_labels, label_order
from data_adapters.columns import Column, type_columns
from data_adapters.units import site_unit_differences
from fedcore.interpret import units as catalogue
from fedcore.interpret.data_checks import Checks, robust_sd
from fedcore.interpret.profile import PROBABILITIES, profile_federation

MATCH_SDS = 0.5
RELATION_GAP = 0.3
CODE_P = 0.01
MAX_CODES = 10
ID_SHARE = 0.95
MIN_ID_ROWS = 20
PAIR_FIT = 0.4  # the four differences (two shares, two rates) of the pairing together
PAIR_MARGIN = 3.0  # the other pairing misfits at least this many times as much
MIN_VALUES = 10
UNNAMED = re.compile(r"^(unnamed|column|col|field)[\s:_.-]*\d*$", re.IGNORECASE)
UNIT_WORDS = {"mg", "dl", "mmol", "umol", "mol", "l", "g", "kg", "lb", "lbs", "cm", "mm", "in", "inch", "inches",
              "degc", "degf", "pct", "percent", "mmhg", "kpa", "bpm", "yrs", "unit", "units"}
SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("age", "age years", "patient age", "age at admission"),
    ("sex", "gender"),
    ("weight", "body weight", "wt"),
    ("height", "body height", "ht"),
    ("bmi", "body mass index"),
    ("heart rate", "hr", "pulse", "pulse rate"),
    ("systolic blood pressure", "sbp", "systolic bp", "systolic"),
    ("diastolic blood pressure", "dbp", "diastolic bp", "diastolic"),
    ("outcome", "target", "label", "class", "diagnosis"),
    ("smoker", "smoking", "smokes"),
    catalogue.GLUCOSE, catalogue.CHOLESTEROL, catalogue.TRIGLYCERIDES, catalogue.CREATININE, catalogue.UREA,
    catalogue.BILIRUBIN, catalogue.LACTATE, catalogue.HAEMOGLOBIN, catalogue.ALBUMIN, catalogue.HBA1C,
    catalogue.TEMPERATURE,
)
CODE_SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("male", "m", "man", "men", "masculine", "masculin", "h", "homme", "mann", "männlich"),
    ("female", "f", "woman", "women", "feminine", "feminin", "w", "femme", "frau", "weiblich"),
    ("yes", "y", "true", "t", "1", "ja", "oui", "si", "positive", "pos", "present"),
    ("no", "n", "false", "0", "nein", "non", "negative", "neg", "absent"),
)


@dataclass
class Suggestion:
    """One decision of the mapping step: what was found, and the dictionary patch that fixes it."""

    id: str
    kind: str  # rename, convert, missing, values, kind, drop, positive, target
    column: str | None
    site: str | None  # None: every site
    message: str
    value: str  # the editable part, as text (a new name, 'a, b', codes, 'code=value; ...', a kind)
    patch: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- name keys --------------------------------------------------------------------------------------
def plain(text: str) -> str:
    """Lower case, accents and punctuation gone, words separated by one space."""
    ascii_text = unicodedata.normalize("NFKD", str(text)).encode("ascii", "ignore").decode().lower()
    return " ".join(re.findall(r"[a-z0-9]+", ascii_text))


def _synonym_index(groups: Iterable[Sequence[str]]) -> dict[str, str]:
    index: dict[str, str] = {}
    for group in groups:
        for member in group:
            index.setdefault(plain(member).replace(" ", ""), plain(group[0]).replace(" ", ""))
    return index


SYNONYM_OF = _synonym_index(SYNONYMS)
CODE_OF = _synonym_index(CODE_SYNONYMS)


def name_key(name: str) -> str:
    """What a column's name says, whatever its spelling: 'Cholestérol (mmol/L)' -> 'cholesterol',
    'Gender' -> 'sex'."""
    words = plain(re.sub(r"[\(\[].*?[\)\]]", " ", name)).split() or plain(name).split()
    kept = [w for w in words if w not in UNIT_WORDS] or words
    joined = "".join(kept)
    return SYNONYM_OF.get(joined, joined)


def code_key(value: str) -> str:
    joined = plain(value).replace(" ", "")
    return CODE_OF.get(joined, joined)


# -- the suggestions -----------------------------------------------------------------------------
def suggest(sites: TableSites, alignment: Alignment) -> list[Suggestion]:
    """Every rule's suggestions for these tables (already mapped by any dictionary), in the order
    an analyst decides them: columns and the target first, then codes, units and kinds."""
    typed = {t.site: type_columns(t.frame, list(t.frame.columns), t.file, t.decimal).columns for t in sites.tables}
    target = sites.target
    out = [*_target_columns(sites), *_drops(sites, typed, alignment)]
    out += _renames(sites, typed, alignment, {s.column for s in out if s.kind == "drop"})
    out += _positive(sites)
    out += _category_values(alignment)
    out += _missing_codes(alignment)
    out += _conversions(alignment)
    out += _kinds(alignment)
    return [s for s in out if s.column != target or s.kind in ("target", "positive")]


def _site_patch(site: str, key: str, value: Any) -> dict[str, Any]:
    return {"sites": {site: {key: value}}}


def _target_columns(sites: TableSites) -> list[Suggestion]:
    out = []
    for table in sites.tables:
        if sites.target in table.frame.columns:
            continue
        key = name_key(sites.target)
        matches = [c for c in table.frame.columns if name_key(c) == key]
        if len(matches) == 1:
            out.append(Suggestion(f"target:{table.site}", "target", matches[0], table.site,
                                  f"{table.site} has no target column '{sites.target}'; its '{matches[0]}' looks like it.",
                                  sites.target, _site_patch(table.site, "rename", {matches[0]: sites.target})))
    return out


def _drops(sites: TableSites, typed: dict[str, dict[str, Column]], alignment: Alignment) -> list[Suggestion]:
    out = []
    names = list(dict.fromkeys(c for t in sites.tables for c in t.frame.columns if c != sites.target))
    for name in names:
        at = {site: columns[name] for site, columns in typed.items() if name in columns}
        why = None
        if UNNAMED.match(name.strip()):
            why = "has no real name (a spreadsheet's unnamed column)"
        elif all(c.kind == "empty" for c in at.values()):
            why = "has no value at any site"
        elif all(_identifier(c) for c in at.values()):
            why = "holds a different value in nearly every row at every site that has it: an identifier"
        if why and name not in alignment.exclude:
            where = ", ".join(at)
            out.append(Suggestion(f"drop:{name}", "drop", name, None, f"'{name}' ({where}) {why}; leave it out.", "",
                                  {"drop": [name]}))
    return out


def _identifier(column: Column) -> bool:
    present = column.present
    if column.kind == "empty" or len(present) < MIN_ID_ROWS:
        return False
    if column.kind == "numeric" and not np.all(np.mod(present.astype(np.float64), 1) == 0):
        return False
    return len(set(present.tolist())) >= ID_SHARE * len(column.values)


def _renames(sites: TableSites, typed: dict[str, dict[str, Column]], alignment: Alignment,
             dropped: set[str]) -> list[Suggestion]:
    """Columns at some sites only: by name, then by the data (see the module's rules)."""
    order = [t.site for t in sites.tables]
    partial = {c: s for c, s in _sites_with(sites).items() if len(s) < len(order) and c not in dropped
               and c != sites.target and c not in alignment.exclude}
    out, matched = [], set()
    by_key: dict[str, list[str]] = {}
    for column in partial:
        by_key.setdefault(name_key(column), []).append(column)
    for key, spellings in by_key.items():
        if len(spellings) < 2:
            continue
        chosen = max(spellings, key=lambda c: (len(partial[c]), -spellings.index(c)))
        for spelling in spellings:
            if spelling == chosen:
                continue
            for site in partial[spelling]:
                holds = [c for c in spellings if site in partial[c]]
                if len(holds) > 1:
                    continue  # two columns of one key at a site: which is which is not clear
                out.append(Suggestion(
                    f"rename:{site}:{spelling}", "rename", spelling, site,
                    f"'{spelling}' at {site} looks like '{chosen}' at {', '.join(partial[chosen])} (same name once "
                    "case, accents, spacing, units and synonyms are set aside); map it.", chosen,
                    _site_patch(site, "rename", {spelling: chosen})))
                matched |= {spelling, chosen}
    out += _renames_by_data(sites, typed, alignment, {c: s for c, s in partial.items() if c not in matched})
    return out


def _sites_with(sites: TableSites) -> dict[str, list[str]]:
    at: dict[str, list[str]] = {}
    for table in sites.tables:
        for column in table.frame.columns:
            at.setdefault(column, []).append(table.site)
    return at


def _renames_by_data(sites: TableSites, typed: dict[str, dict[str, Column]], alignment: Alignment,
                     partial: dict[str, list[str]]) -> list[Suggestion]:
    everyone = {t.site for t in sites.tables}
    numeric = {c: s for c, s in partial.items()
               if all(typed[site][c].kind == "numeric" and np.isfinite(typed[site][c].values).sum() >= MIN_VALUES
                      for site in s)}
    fits: dict[str, list[str]] = {c: [] for c in numeric}
    for x, x_sites in numeric.items():
        for y, y_sites in numeric.items():
            if x != y and not set(x_sites) & set(y_sites) and set(x_sites) | set(y_sites) == everyone:
                if _same_quantity(x, x_sites, y, y_sites, typed, alignment):
                    fits[x].append(y)
    out = []
    for x, candidates in fits.items():
        if len(candidates) != 1 or fits[candidates[0]] != [x]:
            continue
        y = candidates[0]
        if len(numeric[x]) > len(numeric[y]) or (len(numeric[x]) == len(numeric[y]) and x > y):
            continue  # the minority spelling is renamed; on a tie, the later name
        for site in numeric[x]:
            out.append(Suggestion(
                f"rename:{site}:{x}", "rename", x, site,
                f"'{x}' at {site} has the values and the relation to the label of '{y}' at {', '.join(numeric[y])}; "
                "map it (check the names: this match is by the data, not the name).", y,
                _site_patch(site, "rename", {x: y})))
    return out


def _same_quantity(x: str, x_sites: list[str], y: str, y_sites: list[str], typed: dict[str, dict[str, Column]],
                   alignment: Alignment) -> bool:
    """The pooled values of x at its sites and of y at its sites match (directly or through a
    catalogue conversion named by y), and relate to the label alike."""
    xs = [typed[s][x].values for s in x_sites]
    ys = [typed[s][y].values for s in y_sites]
    qx, qy = (np.quantile(np.concatenate(v)[np.isfinite(np.concatenate(v))], PROBABILITIES) for v in (xs, ys))
    pooled = np.concatenate(ys)
    scale = float(robust_sd(qy[None, :, None], np.array([[np.nanstd(pooled)]]))[0, 0])
    if not scale > 0:
        return False
    converted = qx
    if catalogue.discrepancy(qx, qy, scale) > MATCH_SDS:
        match = catalogue.match_conversion(y, qx, qy, scale)
        if match is None or match.conversion is None:
            return False
        converted = match.conversion.apply(qx)
    if catalogue.discrepancy(converted, qy, scale) > MATCH_SDS:
        return False
    dx = _class_difference([typed[s][x].values for s in x_sites], [alignment.y.get(s) for s in x_sites])
    dy = _class_difference([typed[s][y].values for s in y_sites], [alignment.y.get(s) for s in y_sites])
    if dx is None or dy is None:
        return False
    return abs(dx - dy) <= RELATION_GAP and (np.sign(dx) == np.sign(dy) or max(abs(dx), abs(dy)) < RELATION_GAP)


def _class_difference(values: list[np.ndarray], labels: list[np.ndarray | None]) -> float | None:
    """The last class's mean minus the first's, in the pooled within-class SD (rows with a class)."""
    if any(y is None or len(y) != len(v) for v, y in zip(values, labels)):
        return None
    x, y = np.concatenate(values), np.concatenate(labels)
    keep = np.isfinite(x) & (y >= 0)
    x, y = x[keep], y[keep]
    classes = np.unique(y)
    if len(classes) < 2:
        return None
    first, last = x[y == classes[0]], x[y == classes[-1]]
    if len(first) < 2 or len(last) < 2:
        return None
    within = np.sqrt(((len(first) - 1) * first.var(ddof=1) + (len(last) - 1) * last.var(ddof=1))
                     / (len(first) + len(last) - 2))
    return float((last.mean() - first.mean()) / within) if within > 0 else None


def _positive(sites: TableSites) -> list[Suggestion]:
    target = sites.target
    labels = {t.site: set(as_labels(t.frame[target]).dropna()) for t in sites.tables if target in t.frame.columns}
    if len(labels) < 2:
        return []
    common = Counter(frozenset(v) for v in labels.values()).most_common(1)[0][0]
    if len(common) != 2:
        return []
    negative, positive = sorted(common, key=label_order)
    out = []
    for site, values in labels.items():
        if values == set(common):
            continue
        keys = {v: code_key(v) for v in values}
        if set(keys.values()) <= {code_key(negative), code_key(positive)} and code_key(negative) != code_key(positive):
            chosen = sorted((v for v, k in keys.items() if k == code_key(positive)), key=label_order)
            why = "the same classes spelled another way"
        elif negative in values and len(values) > 2 and all(_is_number(v) for v in values):
            chosen = sorted((v for v in values if v != negative), key=label_order)
            why = f"more values than the others' two; all but '{negative}' taken as '{positive}'"
        else:
            continue
        if not chosen:
            continue
        out.append(Suggestion(
            f"positive:{site}", "positive", target, site,
            f"The target '{target}' at {site} is {', '.join(sorted(values, key=label_order))} where most sites use "
            f"{negative} / {positive} ({why}).", ", ".join(chosen),
            {"target": {"column": target, "negative": negative, "positive": positive},
             "sites": {site: {"positive": chosen}}}))
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _category_values(alignment: Alignment) -> list[Suggestion]:
    out = []
    for column, seen in alignment.report.category_differences.items():
        codings = Counter(frozenset(v) for v in seen.values())
        reference = sorted(codings.most_common(1)[0][0], key=label_order)
        if list(codings.values()).count(codings[frozenset(reference)]) > 1:
            continue  # no coding most sites use
        for site, values in seen.items():
            if set(values) <= set(reference):
                continue
            mapping = _code_map(values, reference) or _binary_map(alignment, column, site, values, reference)
            if not mapping:
                continue
            shown = "; ".join(f"{k}={v}" for k, v in mapping.items())
            left = [v for v in values if v not in mapping and v not in reference]
            out.append(Suggestion(
                f"values:{site}:{column}", "values", column, site,
                f"'{column}' at {site} is coded {', '.join(values)} where most sites use {', '.join(reference)}"
                + (f" ({', '.join(left)} left as they are)" if left else "") + ".", shown,
                _site_patch(site, "values", {column: mapping})))
    return out


def _code_map(values: Sequence[str], reference: Sequence[str]) -> dict[str, str]:
    keys = {}
    for ref in reference:
        keys.setdefault(code_key(ref), []).append(ref)
    return {v: keys[code_key(v)][0] for v in values
            if v not in reference and len(keys.get(code_key(v), [])) == 1}


def _binary_map(alignment: Alignment, column: str, site: str, values: Sequence[str],
                reference: Sequence[str]) -> dict[str, str]:
    """Two codes against two: the pairing whose shares of rows and rates of the last class fit."""
    if len(values) != 2 or len(reference) != 2:
        return {}
    seen = alignment.report.category_differences[column]
    mine = _code_stats(alignment, column, [site], values)
    others = _code_stats(alignment, column, [s for s, v in seen.items() if sorted(v) == sorted(reference)], reference)
    if mine is None or others is None:
        return {}

    def misfit(order: Sequence[int]) -> float:
        return sum(abs(mine[k][0] - others[order[k]][0]) + abs(mine[k][1] - others[order[k]][1]) for k in range(2))

    straight, crossed = misfit((0, 1)), misfit((1, 0))
    best, other = (straight, crossed) if straight <= crossed else (crossed, straight)
    if best > PAIR_FIT or other < PAIR_MARGIN * max(best, PAIR_FIT / 4):
        return {}
    order = (0, 1) if straight <= crossed else (1, 0)
    return {values[k]: reference[order[k]] for k in range(2)}


def _code_stats(alignment: Alignment, column: str, sites: list[str], codes: Sequence[str]) -> list[tuple[float, float]] | None:
    """Per code: its share of the rows with a value, and the rate of the last class among them."""
    labels = np.concatenate([np.asarray(alignment.columns[column][s].values, dtype=object) for s in sites])
    y = np.concatenate([alignment.y[s] for s in sites])
    last = len(alignment.class_names) - 1
    filled = np.array([isinstance(v, str) or (isinstance(v, float) and np.isfinite(v)) for v in labels])
    text = np.array([str(v) if isinstance(v, str) else (f"{v:g}" if isinstance(v, float) and np.isfinite(v) else "")
                     for v in labels], dtype=object)
    if filled.sum() < MIN_VALUES:
        return None
    stats = []
    for code in codes:
        rows = filled & (text == code)
        if rows.sum() == 0:
            return None
        stats.append((float(rows.sum() / filled.sum()), float((y[rows] == last).mean())))
    return stats


def _missing_codes(alignment: Alignment) -> list[Suggestion]:
    names = [n for n, kind in alignment.kinds.items() if kind == "continuous"]
    if not names or len(alignment.tables) < 2 or not alignment.class_names:
        return []
    rows = [(t.site, np.column_stack([alignment.columns[n][t.site].values.astype(np.float64) for n in names]),
             np.maximum(alignment.y[t.site], 0)) for t in alignment.tables]
    profile = profile_federation(rows, names, ["continuous"] * len(names), names, alignment.class_names)
    codes: dict[tuple[str, str], list[float]] = {}
    for finding in Checks(profile).missing_codes():
        if finding.material and finding.p < CODE_P:
            codes.setdefault((finding.site, finding.feature), []).append(finding.evidence["code"])
    return [Suggestion(
        f"missing:{site}:{column}", "missing", column, site,
        f"'{column}' at {site} is {', '.join(f'{c:g}' for c in found)} in many rows, a value no other site has "
        "near its range: a code for 'not measured'?", ", ".join(f"{c:g}" for c in found),
        _site_patch(site, "missing", {column: [int(c) if float(c).is_integer() else c for c in found]}))
        for (site, column), found in codes.items()]


def _conversions(alignment: Alignment) -> list[Suggestion]:
    columns = {name: {site: c.values for site, c in alignment.columns[name].items() if c.kind == "numeric"}
               for name, kind in alignment.kinds.items() if kind == "continuous"}
    out = []
    for finding in site_unit_differences(columns, [t.site for t in alignment.tables]):
        if finding["conversion"] is None:
            continue  # a factor no known conversion explains: reported, not suggested
        site, column = finding["site"], finding["column"]
        out.append(Suggestion(
            f"convert:{site}:{column}", "convert", column, site, finding["message"] + ".",
            f"{finding['a']:.6g}, {finding['b']:.6g}",
            _site_patch(site, "convert", {column: {"name": finding["name"], "a": finding["a"], "b": finding["b"]}})))
    return out


def _kinds(alignment: Alignment) -> list[Suggestion]:
    out = []
    for name, kind in alignment.kinds.items():
        if kind != "continuous" or name in alignment.given_kinds or name in alignment.sites.kinds:
            continue
        values = np.concatenate([c.values for c in alignment.columns[name].values() if c.kind == "numeric"])
        values = values[np.isfinite(values)]
        distinct = np.unique(values)
        if len(values) and np.all(np.mod(values, 1) == 0) and 3 <= len(distinct) <= MAX_CODES:
            out.append(Suggestion(
                f"kind:{name}", "kind", name, None,
                f"'{name}' holds {len(distinct)} whole numbers ({', '.join(f'{v:g}' for v in distinct)}): codes of "
                "categories rather than a measurement?", "categorical", {"kinds": {name: "categorical"}}))
    return out


# -- editing ---------------------------------------------------------------------------------------
def edited_patch(suggestion: Mapping[str, Any], value: str) -> dict[str, Any]:
    """The suggestion's patch with its editable part replaced by `value` (as the analyst wrote it);
    ValueError says what is wrong with the text."""
    kind, site, column = suggestion["kind"], suggestion["site"], suggestion["column"]
    value = value.strip()
    if value == suggestion["value"]:
        return dict(suggestion["patch"])
    if kind in ("rename", "target"):
        if not value:
            raise ValueError("Give the column's name in the study.")
        return _site_patch(site, "rename", {column: value})
    if kind == "convert":
        parts = [p for p in re.split(r"[,\s]+", value) if p]
        try:
            a, b = float(parts[0]), float(parts[1]) if len(parts) > 1 else 0.0
        except (IndexError, ValueError):
            raise ValueError("Write the conversion as 'a, b' (y = a · x + b), e.g. '0.0259, 0'.") from None
        if a == 0:
            raise ValueError("The factor a cannot be 0.")
        return _site_patch(site, "convert", {column: {"name": "given by the analyst", "a": a, "b": b}})
    if kind in ("missing", "positive"):
        codes = [p.strip() for p in value.split(",") if p.strip()]
        if not codes:
            raise ValueError("List at least one value, separated by commas.")
        if kind == "missing":
            return _site_patch(site, "missing", {column: codes})
        return {**suggestion["patch"], "sites": {site: {"positive": codes}}}
    if kind == "values":
        pairs = [p.partition("=") for p in value.split(";") if p.strip()]
        if not pairs or any(not sep or not a.strip() or not b.strip() for a, sep, b in pairs):
            raise ValueError("Write the map as 'code=value; code=value', e.g. 'M=male; F=female'.")
        return _site_patch(site, "values", {column: {a.strip(): b.strip() for a, _, b in pairs}})
    if kind == "kind":
        if value not in ("continuous", "binary", "categorical"):
            raise ValueError("A kind is continuous, binary or categorical.")
        return {"kinds": {column: value}}
    return dict(suggestion["patch"])
