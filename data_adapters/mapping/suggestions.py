"""What the mapping step suggests for the sites' tables (after any data dictionary is applied):
one `Suggestion` per decision, each a small dictionary patch (`dictionary.merge`) the analyst
accepts, edits or rejects — or, where the data cannot decide, a *question* with the choices
that fit and nothing pre-filled (accepting every suggestion never answers a question). Every
suggestion says what it will change (`dictionary.effects`). In the order an analyst decides:

target     the target column missing at a site: the column whose name matches it; else a question
           listing the site's columns closest by name and by values.
drop       a column named like a spreadsheet's unnamed one ('Unnamed: 7'); a column without a value
           at any site; an identifier: text or whole numbers, distinct in ID_SHARE of the rows at
           every site that has it (and at least MIN_ID_ROWS rows).
rename     a column at some sites only whose name matches another's at the other sites once case,
           accents, spacing, punctuation and unit words are set aside, or through a synonym
           (SYNONYMS, and the unit catalogue's analyte names): the minority spelling is renamed to
           the one most sites use. A site with two columns of one name key gets none. Then by the
           data (`value_rules`, *same_column*): a column at some sites only matched to the column
           the study has at more sites and never beside it, by its values and its relation to the
           label (`max_heart_rate` at one site, `thalach` at the others).
positive   the target coded differently at a site: yes/no against 1/0 (synonyms), or a site with
           more values than the others' two where it shares their negative one (heart disease
           0-4 against 0/1): its other values are the positive class. Otherwise a question.
missing    `value_rules`: a column one site never measured (one value for every patient); a usual
           code outside the others' values, in a column of any kind (the check-up's rule for
           continuous columns).
values     a coded column written differently at some sites (text at one, numbers at others too):
           the coding most sites use is the study's; a site's code maps to it when both name one
           thing once case, accents and synonyms (CODE_SYNONYMS: M/male/man, yes/y/true/1, ...)
           are set aside; for a two-valued column with no such match, by share of rows and rate of
           the last class: the pairing whose four differences sum to at most PAIR_FIT, when the
           other pairing's sum is PAIR_MARGIN times as large and PAIR_GAP larger. Otherwise a
           question.
convert    `value_rules`, *units*: a site whose values a catalogue conversion maps onto the
           consensus of the sites in one unit, with the fit of the chosen and the next conversion;
           an unexplained factor or an even split of the sites is a question.
kind       `value_rules`, *kinds*: whole numbers with gaps, or with a class rate that is not
           monotone, are codes of categories; other small whole numbers are a question.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import difflib

import numpy as np

from data_adapters.alignment.align import Alignment, TableSites
from data_adapters.tables.cells import as_labels, label_order
from data_adapters.tables.columns import Column, type_columns
from data_adapters.mapping.dictionary import effects
from data_adapters.tables.names import code_key, name_key, plain
from data_adapters.mapping.value_rules import SiteValues, find
from fedcore.interpret import unit_conversions as catalogue

ID_SHARE = 0.95
MIN_ID_ROWS = 20
PAIR_FIT = 0.8  # the four differences (two shares, two rates) of the pairing together
PAIR_MARGIN = 3.0  # the other pairing misfits at least this many times as much
PAIR_GAP = 0.5  # and by this much: two codes of about the same share and label rate cannot be told apart
MIN_VALUES = 10
CLOSEST = 5  # choices a question offers
UNNAMED = re.compile(r"^(unnamed|column|col|field)[\s:_.-]*\d*$", re.IGNORECASE)


@dataclass
class Suggestion:
    """One decision of the mapping step: what was found, and the dictionary patch that fixes it; a
    question has no patch but `options`, each a label and its patch."""

    id: str
    kind: str  # rename, convert, missing, values, kind, drop, positive, target
    column: str | None
    site: str | None  # None: every site
    message: str
    value: str  # the editable part, as text (a new name, 'a, b', codes, 'code=value; ...', a kind)
    patch: dict[str, Any] = field(default_factory=dict)
    question: bool = False  # the data cannot decide: the analyst chooses among `options`, or edits
    options: list[dict[str, Any]] = field(default_factory=list)  # {"label", "patch", "effect"}
    effect: list[str] = field(default_factory=list)  # what the patch changes, line by line

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def question(id: str, kind: str, column: str | None, site: str | None, message: str,
             options: Iterable[tuple[str, dict[str, Any]]] = ()) -> Suggestion:
    return Suggestion(id, kind, column, site, message, "", {}, True,
                      [{"label": text, "patch": patch} for text, patch in options])


# -- the suggestions -----------------------------------------------------------------------------
def suggest(sites: TableSites, alignment: Alignment) -> list[Suggestion]:
    """Every rule's suggestions and questions for these tables (already mapped by any dictionary),
    in the order an analyst decides them, each with what it would change."""
    typed = {t.site: type_columns(t.frame, list(t.frame.columns), t.file, t.decimal).columns for t in sites.tables}
    target = sites.target
    out = [*_target_columns(sites), *_positive(sites)]
    drops = _drops(sites, typed, alignment)
    dropped = {s.column for s in drops}
    renames = _renames(sites, typed, alignment, dropped)
    renamed: dict[str, dict[str, str]] = {}
    for s in renames:
        renamed.setdefault(s.site, {}).update(s.patch["sites"][s.site]["rename"])
    present: dict[str, set[str]] = {}
    for table in sites.tables:
        for column in table.frame.columns:
            present.setdefault(renamed.get(table.site, {}).get(column, column), set()).add(table.site)
    values = SiteValues(alignment, renamed, present)
    at = {c: values.at(c) for c in values.columns if c not in dropped and c != target}
    shared = [c for c, where in at.items() if len(where) >= 2]
    partial = [c for c, where in at.items() if 0 < len(where) < len(values.sites)]
    findings = find(values, shared, partial)
    virtual = {(site, study) for site, names in renamed.items() for study in names.values()}
    later = [*_codes(findings, virtual), *_codings(values, [c for c in shared if values.coded(c)], virtual),
             *_units(findings, virtual), *_kinds(findings)]
    out += [*drops, *renames, *_same_columns(findings, renamed, values), *later]
    out = [s for s in out if s.column != target or s.kind in ("target", "positive")]
    for suggestion in out:
        suggestion.effect = effects(sites, suggestion.patch) if suggestion.patch else []
        for option in suggestion.options:
            option["effect"] = effects(sites, option["patch"])
    return out


def _site_patch(site: str, key: str, value: Any) -> dict[str, Any]:
    return {"sites": {site: {key: value}}}


def _target_columns(sites: TableSites) -> list[Suggestion]:
    """A site without the target column: the one column whose name matches it; else a question
    offering the site's columns closest by name and by values (the others' target labels)."""
    target, out = sites.target, []
    known = set().union(*(set(as_labels(t.frame[target]).dropna()) for t in sites.tables if target in t.frame))
    for table in sites.tables:
        if target in table.frame.columns:
            continue
        key = name_key(target)
        matches = [c for c in table.frame.columns if name_key(c) == key]
        if len(matches) == 1:
            out.append(Suggestion(f"target:{table.site}", "target", matches[0], table.site,
                                  f"{table.site} has no target column '{target}'; its '{matches[0]}' looks like it.",
                                  target, _site_patch(table.site, "rename", {matches[0]: target})))
            continue
        closest = target_matches(target, table.frame, known)[:CLOSEST]
        out.append(question(f"target:{table.site}", "target", None, table.site,
                            f"{table.site} has no column '{target}'. Which of its columns is the target? Closest by "
                            "name and by values first.",
                            [(f"'{c}'", _site_patch(table.site, "rename", {c: target})) for c in closest]))
    return out


def target_matches(target: str, frame: Any, labels: set[str]) -> list[str]:
    """A table's columns ordered by how much they look like the target: the same name key first,
    then by how many of their values are the target's known labels (few distinct values), then by
    name similarity."""
    def score(column: str) -> tuple[float, float, float]:
        values = set(as_labels(frame[column]).dropna())
        shared = len(values & labels) / max(len(values), 1) if values and len(values) <= 12 else 0.0
        return (float(name_key(column) == name_key(target)), shared,
                difflib.SequenceMatcher(None, plain(column), plain(target)).ratio())
    return sorted(frame.columns, key=score, reverse=True)


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
    """Columns at some sites only whose names match once spelling is set aside."""
    order = [t.site for t in sites.tables]
    partial = {c: s for c, s in _sites_with(sites).items() if len(s) < len(order) and c not in dropped
               and c != sites.target and c not in alignment.exclude}
    out = []
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
    return out


def _sites_with(sites: TableSites) -> dict[str, list[str]]:
    at: dict[str, list[str]] = {}
    for table in sites.tables:
        for column in table.frame.columns:
            at.setdefault(column, []).append(table.site)
    return at


def _source(renamed: dict[str, dict[str, str]], site: str, column: str) -> str:
    """The site's own name of a column the name rules map to `column`."""
    return next((source for source, study in renamed.get(site, {}).items() if study == column), column)


def _same_columns(findings, renamed: dict[str, dict[str, str]], values: SiteValues) -> list[Suggestion]:
    out = []
    for fit in findings.same:
        for site in fit.sites:
            source = _source(renamed, site, fit.column)
            how = f" after {fit.conversion.formula()} ({fit.conversion.pair()})" if fit.conversion else ""
            out.append(Suggestion(
                f"rename:{site}:{source}", "rename", source, site,
                f"'{source}' at {site} has the values{how} and the relation to the label of '{fit.study}' at "
                f"{', '.join(fit.study_sites)} (quantiles {fit.distance:.2f} SD apart, class profile {fit.gap:.2f} SD), "
                f"which {site} lacks; map it (check the names: this match is by the data, not the name).", fit.study,
                _site_patch(site, "rename", {source: fit.study})))
    for (site, column), fits in findings.ambiguous.items():
        source = _source(renamed, site, column)
        options = []
        for f in fits:
            relation = f"class profile {f.gap:.2f} SD" if f.related else f"its relation to the label {f.gap:.2f} SD off"
            options.append((f"'{source}' is '{f.study}' (quantiles {f.distance:.2f} SD apart, {relation})",
                            _site_patch(site, "rename", {source: f.study})))
            if len(f.study_sites) == len(f.sites):  # as many sites each: either name may be the study's
                options.append((f"'{f.study}' at {', '.join(f.study_sites)} is '{source}'",
                                {"sites": {s: {"rename": {_source(renamed, s, f.study): column}}} for s in f.study_sites}))
        if not fits[0].related:
            text = (f"'{source}' at {site} has the values of '{fits[0].study}' at {', '.join(fits[0].study_sites)}, "
                    f"which {site} lacks, but relates to the label otherwise (more weakly, or the other way): is it "
                    f"'{fits[0].study}'? (the data alone cannot say)")
        else:
            why = ("matches more than one column the site lacks" if len(fits) > 1 else
                   f"matches '{fits[0].study}', which {', '.join(fits[0].study_sites)} hold(s) — as many sites as "
                   f"'{source}' — or another column claims it too")
            text = (f"'{source}' at {site} {why}, by its values and its relation to the label: which name is the "
                    "study's? (best fit first)")
        out.append(question(f"rename:{site}:{source}", "rename", source, site, text, options))
    return out


def _positive(sites: TableSites) -> list[Suggestion]:
    target = sites.target
    labels = {t.site: set(as_labels(t.frame[target]).dropna()) for t in sites.tables if target in t.frame.columns}
    if len(labels) < 2 or len({frozenset(v) for v in labels.values()}) == 1:
        return []
    common = Counter(frozenset(v) for v in labels.values()).most_common(1)[0][0]
    out = []
    if len(common) != 2:
        shown = "; ".join(f"{site}: {', '.join(sorted(v, key=label_order))}" for site, v in labels.items())
        return [question(f"positive:{target}", "positive", target, None,
                         f"The target '{target}' takes different values at the sites ({shown}). Which values are the "
                         "positive class at each site? Set them in the target step above.")]
    negative, positive = sorted(common, key=label_order)
    for site, values in labels.items():
        if values <= set(common):
            continue
        keys = {v: code_key(v) for v in values}
        if set(keys.values()) <= {code_key(negative), code_key(positive)} and code_key(negative) != code_key(positive):
            chosen = sorted((v for v, k in keys.items() if k == code_key(positive)), key=label_order)
            why = "the same classes spelled another way"
        elif negative in values and len(values) > 2 and all(_is_number(v) for v in values):
            chosen = sorted((v for v in values if v != negative), key=label_order)
            why = f"more values than the others' two; all but '{negative}' taken as '{positive}'"
        else:
            chosen = []
            why = ""
        listed = ", ".join(sorted(values, key=label_order))
        names = {"column": target, "negative": negative, "positive": positive}
        if not chosen:
            out.append(question(
                f"positive:{site}", "positive", target, site,
                f"The target '{target}' at {site} is {listed} where most sites use {negative} / {positive}: which of "
                f"{site}'s values mean '{positive}'?",
                [(f"{v} means '{positive}'", {"target": names, "sites": {site: {"positive": [v]}}})
                 for v in sorted(values, key=label_order)]))
            continue
        out.append(Suggestion(
            f"positive:{site}", "positive", target, site,
            f"The target '{target}' at {site} is {listed} where most sites use {negative} / {positive} ({why}).",
            ", ".join(chosen), {"target": names, "sites": {site: {"positive": chosen}}}))
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# -- what the values say (value_rules) ----------------------------------------------------------------------
def _codes(findings, virtual: set[tuple[str, str]]) -> list[Suggestion]:
    by_column: dict[tuple[str, str], list] = {}
    for code in [*findings.unmeasured, *findings.codes]:
        if (code.site, code.column) not in virtual:
            by_column.setdefault((code.site, code.column), []).append(code)
    out = []
    for (site, column), codes in by_column.items():
        listed = ", ".join(str(c.value) for c in codes)
        out.append(Suggestion(
            f"missing:{site}:{column}", "missing", column, site,
            f"'{column}' at {site} " + "; and ".join(c.why for c in codes) + f": {listed} means 'not measured'?",
            listed, _site_patch(site, "missing", {column: [c.value for c in codes]})))
    return out


def _codings(values: SiteValues, columns: Sequence[str], virtual: set[tuple[str, str]]) -> list[Suggestion]:
    """A coded column written differently at some sites: a map onto the coding most sites use."""
    out = []
    for column in columns:
        labels = {s: [v for v in values.labels(s, column) if isinstance(v, str)] for s in values.at(column)}
        seen = {s: sorted(set(v), key=label_order) for s, v in labels.items() if len(v) >= MIN_VALUES}
        codings = Counter(frozenset(v) for v in seen.values())
        if len(codings) < 2:
            continue
        covered = {c: sum(set(v) <= c for v in seen.values()) for c in codings}
        reference = max(codings, key=lambda c: (covered[c], codings[c], len(c)))
        if sum(covered[c] == covered[reference] for c in codings) > 1:
            continue  # no coding most sites use
        reference = sorted(reference, key=label_order)
        for site, codes in seen.items():
            if set(codes) <= set(reference) or (site, column) in virtual:
                continue
            mapping = _code_map(codes, reference) or _binary_map(values, column, site, codes, reference, seen)
            left = [v for v in codes if v not in mapping and v not in reference]
            what = (f"'{column}' at {site} is coded {', '.join(codes)} where most sites use {', '.join(reference)}")
            if not mapping and not values.labels_agree:
                continue  # shares and label rates tell only once the sites' labels are one coding
            if not mapping:
                pairings = ([{codes[0]: reference[0], codes[1]: reference[1]}, {codes[0]: reference[1], codes[1]: reference[0]}]
                            if len(codes) == 2 and len(reference) == 2 else [])
                out.append(question(f"values:{site}:{column}", "values", column, site,
                                    what + ": which code means which? Neither names nor shares and label rates tell.",
                                    [(_shown(p), _site_patch(site, "values", {column: p})) for p in pairings]))
                continue
            out.append(Suggestion(
                f"values:{site}:{column}", "values", column, site,
                what + (f" ({', '.join(left)} left as they are)" if left else "") + ".", _shown(mapping),
                _site_patch(site, "values", {column: mapping})))
    return out


def _shown(mapping: Mapping[str, str]) -> str:
    return "; ".join(f"{k}={v}" for k, v in mapping.items())


def _code_map(values: Sequence[str], reference: Sequence[str]) -> dict[str, str]:
    keys: dict[str, list[str]] = {}
    for ref in reference:
        keys.setdefault(code_key(ref), []).append(ref)
    return {v: keys[code_key(v)][0] for v in values
            if v not in reference and len(keys.get(code_key(v), [])) == 1}


def _binary_map(values: SiteValues, column: str, site: str, codes: Sequence[str], reference: Sequence[str],
                seen: dict[str, list[str]]) -> dict[str, str]:
    """Two codes against two: the pairing whose shares of rows and rates of the last class fit."""
    if len(codes) != 2 or len(reference) != 2 or not values.labels_agree:
        return {}
    mine = _code_stats(values, column, [site], codes)
    others = _code_stats(values, column, [s for s, v in seen.items() if sorted(v) == sorted(reference)], reference)
    if mine is None or others is None:
        return {}

    def misfit(order: Sequence[int]) -> float:
        return sum(abs(mine[k][0] - others[order[k]][0]) + abs(mine[k][1] - others[order[k]][1]) for k in range(2))

    straight, crossed = misfit((0, 1)), misfit((1, 0))
    best, other = (straight, crossed) if straight <= crossed else (crossed, straight)
    if best > PAIR_FIT or other < PAIR_MARGIN * best or other - best < PAIR_GAP:
        return {}
    order = (0, 1) if straight <= crossed else (1, 0)
    return {codes[k]: reference[order[k]] for k in range(2)}


def _code_stats(values: SiteValues, column: str, sites: list[str], codes: Sequence[str]
                ) -> list[tuple[float, float]] | None:
    """Per code: its share of the rows with a value, and the rate of the last class among them."""
    if not sites:
        return None
    labels = np.concatenate([values.labels(s, column) for s in sites])
    y = np.concatenate([values.y[s] for s in sites])
    last = len(values.classes) - 1
    filled = np.array([isinstance(v, str) for v in labels])
    if filled.sum() < MIN_VALUES:
        return None
    stats = []
    for code in codes:
        rows = filled & (labels == code)
        if rows.sum() == 0:
            return None
        stats.append((float(rows.sum() / filled.sum()), float((y[rows] == last).mean())))
    return stats


def _units(findings, virtual: set[tuple[str, str]]) -> list[Suggestion]:
    out = []
    for unit in findings.units:
        if (unit.site, unit.column) in virtual:
            continue
        consensus = ", ".join(unit.consensus)
        fit = (f"as exported its quantiles lie {unit.before:.2g} SD from those of {consensus} (its SD "
               f"{unit.spread_ratio:.3g} times theirs), converted {unit.after:.2g} SD")
        runner = f"; the next best, {unit.runner_up[0]}, {unit.runner_up[1]:.2g} SD" if unit.runner_up else ""
        key = f"convert:{unit.site}:{unit.column}"
        if unit.conversion is None or unit.ambiguous:
            options = [_conversion_option(unit.site, unit.column, c, a, b)
                       for c, a, b in [(unit.conversion, unit.a, unit.b), *((c, c.a, c.b) for c in unit.alike)]]
            why = ("other conversions fit about as well: the data cannot tell them apart" if unit.ambiguous else
                   "a factor no known unit conversion explains")
            best = unit.conversion.formula() if unit.conversion else f"× {unit.a:.4g}"
            out.append(question(
                key, "convert", unit.column, unit.site,
                f"{unit.site}'s {unit.column} (median {unit.median:.4g}) {best} matches the sites in one unit "
                f"({consensus}, median {unit.consensus_median:.4g}): {fit}{runner} — {why}. Convert?",
                [(label, patch) for label, patch in options]))
            continue
        label, patch = _conversion_option(unit.site, unit.column, unit.conversion, unit.a, unit.b)
        out.append(Suggestion(
            key, "convert", unit.column, unit.site,
            f"{unit.site}'s {unit.column} (median {unit.median:.4g}) looks like {unit.conversion.describe()}: "
            f"{unit.conversion.formula()} makes it match the sites in one unit ({consensus}, median "
            f"{unit.consensus_median:.4g}): {fit}{runner}.", f"{unit.a:.6g}, {unit.b:.6g}", patch))
    for split in findings.splits:
        first, second = split.groups
        options = []
        if split.conversion is not None:
            c = split.conversion
            inverse = catalogue.Conversion(c.target, c.source, 1 / c.a, -c.b / c.a, c.analytes)
            for group, conversion in ((second, c), (first, inverse)):
                options.append((f"{', '.join(group)}: {conversion.formula()}", {"sites": {s: {"convert": {split.column: {
                    "name": f"{conversion.pair()} ({conversion.formula()})" if conversion is c else "the inverse of "
                    f"{c.pair()} ({c.formula()})", "a": conversion.a, "b": conversion.b}}} for s in group}}))
        out.append(question(
            f"convert:{split.column}", "convert", split.column, None,
            f"'{split.column}': the sites fall into groups of one size — {', '.join(first)} (median "
            f"{split.medians[0]:.4g}) and {', '.join(second)} (median {split.medians[1]:.4g})"
            + (f", {split.conversion.formula()} apart ({split.conversion.pair()})" if split.conversion else "")
            + ": which is the study's unit? The data cannot tell.", options))
    return out


def _conversion_option(site: str, column: str, conversion: catalogue.Conversion | None, a: float, b: float
                       ) -> tuple[str, dict[str, Any]]:
    if conversion is None:
        return f"× {a:.4g}", _site_patch(site, "convert", {column: {
            "name": "a factor no known conversion explains", "a": a, "b": b}})
    return (f"{conversion.formula()} ({conversion.pair()})", _site_patch(site, "convert", {column: {
        "name": f"{conversion.pair()} ({conversion.formula()})", "a": conversion.a, "b": conversion.b}}))


def _kinds(findings) -> list[Suggestion]:
    out = []
    for kind in findings.kinds:
        message = f"'{kind.column}': {kind.why}."
        if kind.sure:
            out.append(Suggestion(f"kind:{kind.column}", "kind", kind.column, None, message, "categorical",
                                  {"kinds": {kind.column: "categorical"}}))
        else:
            out.append(question(f"kind:{kind.column}", "kind", kind.column, None, message,
                                [("categorical: one input per value", {"kinds": {kind.column: "categorical"}}),
                                 ("continuous: one number", {"kinds": {kind.column: "continuous"}})]))
    return out


# -- editing ---------------------------------------------------------------------------------------
def edited_patch(suggestion: Mapping[str, Any], value: str) -> dict[str, Any]:
    """The suggestion's patch with its editable part replaced by `value` (as the analyst wrote it);
    ValueError says what is wrong with the text."""
    kind, site, column = suggestion["kind"], suggestion["site"], suggestion["column"]
    value = str(value).strip()
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
    if kind == "drop":
        return {"drop": [column]} if site is None else _site_patch(site, "drop", [column])
    return dict(suggestion["patch"])


def decision(kind: str, site: str | None, column: str, value: str) -> dict[str, Any]:
    """A decision the analyst makes by hand, as a dictionary patch: the same reading of the text as
    an edited suggestion's (`edited_patch`); ValueError says what is wrong with it."""
    return edited_patch({"kind": kind, "site": site, "column": column, "value": None, "patch": {}}, value)
