"""Semantic alignment of per-site tables: which columns every site has, what type and kind each
column is, where sites disagree — and, when nothing blocks, the encoded feature matrices.

Rules (README "Data sources" repeats them for users):
- features are the columns present at every site, minus the target and excluded columns;
  columns found at only some sites are reported and left out;
- a column is numeric at a site when nearly all its cells are numbers (`columns.py`); the few
  others are reported by data row (row 1 = first row after the header) and treated as missing;
  a column numeric at one site and text at another is a type conflict (an error, unless it is
  declared categorical); infinite numbers are an error;
- kinds: at most two distinct values over all sites -> binary, other numeric -> continuous,
  other text -> categorical (one-hot over the union of all sites' categories); every kind can
  be given instead;
- binary columns are coded 0/1: {0, 1} keeps its meaning, otherwise the smaller (or
  alphabetically first) value -> 0;
- rows without a target value are left out (reported); a site with a single class takes part
  with a warning;
- the sites' target labels must be one coding of one set of classes (`targets.py`: `yes`/`no`
  at one site and `0`/`1` at another, an `inf` or a damaged label are refused; a class at one
  site only is flagged);
- numbers the model cannot compute with are refused and far-off values flagged (`columns.py`);
  with standardization 'none' a continuous value beyond ±1.8e19 is refused too: the network's
  BatchNorm variances (FedBN, FedHealth2) square it in 32-bit floats, which overflows;
- two sites with the same rows are refused, much overlap is flagged (`duplicates.py`);
- how the sites' values differ (units, codes for 'not measured', constant or shifted columns,
  missingness, labels, ...) is the check-up's to say: `checked` profiles the files at hand as
  their sites would (`profile`) and reports the data lens's findings (`fedcore.checkup`, the
  checks of `fedcore.interpret.checks`), so the Data page, `inspect` and a check-up of the same
  files give the same answer for every column.
- a server test file (csv server_test) is checked against, and encoded onto, what the sites
  decided (`server_table.py`); it never changes the features, kinds or classes.
Nothing here fits statistics: standardisation happens after the hold-out split (`assemble`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from data_adapters.tables.cells import as_labels, close_match, data_rows, label_order, quoted
from data_adapters.tables.columns import (
    SQUARE_SAFE,
    Column,
    as_text,
    beyond,
    coded_one,
    count_distinct,
    distinct,
    extreme_rows,
    indicator,
    printed,
    text_examples,
    type_columns,
)
from data_adapters.alignment.duplicates import duplicate_message, duplicate_sites, row_fingerprints
from data_adapters.tables.names import name_key
from data_adapters.alignment.report_text import alignment_text
from data_adapters.alignment.server_table import ServerTable, align_server_table
from data_adapters.tables.site_rows import RawFederation, RawSite
from data_adapters.alignment.targets import label_problems, single_site_classes
from fedcore.checkup import check_up
from fedcore.interpret.profile import Profile, profile_federation
from fedcore.errors import DataError
from fedcore.federation import FEATURE_KINDS

MIN_ROWS = 20
MAX_CLASSES = 50
MAX_CATEGORIES = 50


@dataclass
class SiteTable:
    """One site's rows as read; the frame's index is the 0-based data row in `file`."""

    site: str
    file: str
    frame: pd.DataFrame
    delimiter: str = ","
    encoding: str = "utf-8"
    decimal: str = "."


@dataclass
class TableSites:
    """What a tabular reader hands over: a frame per site plus what the source already knows."""

    name: str
    description: str
    source: str
    tables: list[SiteTable]
    target: str
    # Raw target label -> class name, in class order (e.g. heart disease: '0' -> 'no disease').
    class_labels: dict[str, str] | None = None
    kinds: dict[str, str] = field(default_factory=dict)  # documented kinds of known columns
    exclude: tuple[str, ...] = ()  # columns that are never features (ids, split markers)
    min_rows: int = MIN_ROWS  # fewest rows a site may have (the vehicle data have sensors with 7)
    warnings: list[str] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)  # recorded in the federation's preprocessing
    server_table: SiteTable | None = None  # the server's own test file (csv server_test), not a site


@dataclass
class AlignmentReport:
    """What the sites' tables have in common and where they differ (JSON-ready via `to_dict`)."""

    target: str
    class_names: list[str]
    sites: list[dict[str, Any]]  # site, file, rows, rows_used, delimiter, encoding, class_counts
    columns_in_all: list[str]
    columns_in_some: dict[str, list[str]]  # column -> the sites that have it
    columns_in_one: dict[str, str]  # column -> the one site that has it
    excluded: list[str]
    features: dict[str, dict[str, Any]]  # column -> kind, kind_from (inferred/given/documented), values
    type_conflicts: list[dict[str, Any]]  # column, numeric_at [sites], text_at {site: examples}
    category_differences: dict[str, dict[str, list[str]]]  # column -> site -> values seen there
    duplicate_sites: list[dict[str, Any]]  # sites, kind (same / overlap), shared, rows, blocking
    missing_share: dict[str, dict[str, float]]  # site -> feature column -> share of rows missing
    warnings: list[str]
    errors: list[str]
    server_test: dict[str, Any] | None = None  # file, rows, rows_used, delimiter, encoding, class_counts
    # The check-up's data-lens findings for these files (`Alignment.checked`; None: not looked for),
    # each `Finding.to_dict()`, and the cells it could not test (with their reasons).
    findings: list[dict[str, Any]] | None = None
    not_testable: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def raise_errors(self) -> None:
        """DataError listing every blocking problem, if there is one."""
        if self.errors:
            raise DataError("The sites' tables cannot be combined:\n- " + "\n- ".join(self.errors))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_text(self) -> str:
        return alignment_text(self)


class Alignment:
    """Aligns the tables once; `report` always exists, `encode` only works without errors."""

    def __init__(
        self,
        sites: TableSites,
        exclude: Sequence[str] = (),
        kinds: Mapping[str, str] | None = None,
        min_rows: int | None = None,
        standardization: str = "site",
    ) -> None:
        self.sites = sites
        self.standardization = standardization
        self.errors: list[str] = []
        self.warnings: list[str] = list(sites.warnings)
        self.exclude = list(dict.fromkeys([*sites.exclude, *exclude]))
        self.given_kinds = dict(kinds or {})
        self.min_rows = sites.min_rows if min_rows is None else min_rows
        self.files = {t.site: t.file for t in sites.tables}
        self.rows_read = {t.site: len(t.frame) for t in sites.tables}
        self._check_site_names()
        self.tables, labels = self._target_labels()
        self.columns_at = {
            t.site: [c for c in t.frame.columns if c != sites.target and c not in self.exclude] for t in self.tables
        }
        self.columns = self._typed_columns(self._common_columns())
        self.kinds = self._kinds()
        self._check_numbers()
        self.class_names = self._class_names(labels)
        self.y = {site: self._class_index(site, values) for site, values in labels.items()}
        if not self.label_errors:  # a class at one site only is no news when the codings disagree
            self.warnings += single_site_classes(sites.target, self.class_names, self.y,
                                                 {t.site: t.frame.index for t in self.tables}, self.files)
        self.duplicates = self._duplicate_sites()
        self.server = self._server_table()
        self.report = self._report()

    # -- target ----------------------------------------------------------------------------
    def _target_labels(self) -> tuple[list[SiteTable], dict[str, pd.Series]]:
        """The tables with a usable target (rows without one left out) and their target labels."""
        target, tables, labels = self.sites.target, [], {}
        for table in self.sites.tables:
            if target not in table.frame.columns:
                hint = close_match(target, table.frame.columns)
                self.errors.append(
                    f"{table.file} (site '{table.site}') has no target column '{target}'"
                    + (f"; did you mean '{hint}'?" if hint else f"; its columns: {quoted(table.frame.columns)}.")
                )
                continue
            values = as_labels(table.frame[target])
            missing = values.isna()
            if missing.all():
                self.errors.append(f"{table.file}: the target column '{target}' is empty at site '{table.site}'.")
                continue
            if missing.any():
                self.warnings.append(
                    f"{table.file}: {int(missing.sum())} row(s) have no value in the target '{target}' and are "
                    f"left out: data row(s) {data_rows(values.index[missing])}."
                )
                table, values = replace(table, frame=table.frame.loc[~missing]), values[~missing]
            if len(table.frame) < self.min_rows:
                self.errors.append(
                    f"{table.file}: site '{table.site}' has {len(table.frame)} usable rows; a site needs at "
                    f"least {self.min_rows} (min_rows)."
                )
            tables.append(table)
            labels[table.site] = values
        return tables, labels

    def _class_names(self, labels: dict[str, pd.Series]) -> list[str]:
        mapping = self.sites.class_labels
        self.label_errors: list[str] = []
        if mapping is not None:
            for site, values in labels.items():
                unknown = ~values.isin(list(mapping))
                if unknown.any():
                    self.errors.append(
                        f"{self.files[site]}: the target '{self.sites.target}' has unknown value(s) "
                        f"{quoted(sorted(set(values[unknown])))} at data row(s) {data_rows(values.index[unknown])}; "
                        f"known values: {quoted(mapping)}."
                    )
            return list(dict.fromkeys(mapping.values()))
        self.label_errors = label_problems(self.sites.target, labels, self.files)
        self.errors += self.label_errors
        seen = sorted(set().union(*(set(v.unique()) for v in labels.values())), key=label_order)
        if len(seen) > MAX_CLASSES:
            self.errors.append(
                f"The target '{self.sites.target}' has {len(seen)} different values (e.g. {quoted(seen[:5])}); "
                f"a class target has at most {MAX_CLASSES}. Is it a measurement rather than a class?"
            )
        elif labels and len(seen) < 2:
            self.errors.append(f"The target '{self.sites.target}' has a single class ({quoted(seen)}) at every site.")
        return seen

    def _class_of(self) -> dict[str, int]:
        """Target label as read -> class index."""
        name_of = self.sites.class_labels or {name: name for name in self.class_names}
        index = {name: k for k, name in enumerate(self.class_names)}
        return {label: index[name] for label, name in name_of.items() if name in index}

    def _class_index(self, site: str, labels: pd.Series) -> np.ndarray:
        class_of = self._class_of()
        y = labels.map(class_of).fillna(-1).to_numpy(dtype=np.int64)
        present = np.unique(y[y >= 0])
        if len(present) == 1 and len(self.class_names) > 1:
            self.warnings.append(
                f"Site '{site}' ({self.files[site]}) has a single class, '{self.class_names[present[0]]}'; "
                "it still takes part, but its ROC AUC is undefined and it teaches the model nothing about "
                "the other classes."
            )
        return y

    # -- columns ---------------------------------------------------------------------------
    def _check_site_names(self) -> None:
        names = [t.site for t in self.sites.tables]
        for name in sorted({n for n in names if names.count(n) > 1}):
            files = [t.file for t in self.sites.tables if t.site == name]
            raise DataError(f"Two files give the site name '{name}' ({', '.join(files)}); name the sites yourself.")

    def _common_columns(self) -> list[str]:
        for name in self.exclude:
            if not any(name in t.frame.columns for t in self.sites.tables):
                self.warnings.append(f"The excluded column '{name}' is not in any file.")
        if not self.tables:
            return []
        present = [set(columns) for columns in self.columns_at.values()]
        common = set.intersection(*present)
        partial = sorted(set.union(*present) - common)
        if partial:
            self.warnings.append(
                f"{len(partial)} column(s) are not present at every site and are left out: "
                + "; ".join(f"'{c}' (only at {', '.join(self._sites_with(c))})" for c in partial[:10])
                + (f"; and {len(partial) - 10} more." if len(partial) > 10 else ".")
            )
            self._hint_renamed(partial)
        if not common:
            self.errors.append(
                "No feature column is present at every site: "
                + "; ".join(f"{self.files[site]} has {quoted(cols)}" for site, cols in self.columns_at.items())
                + ". Rename the columns so the sites agree."
            )
        return [c for c in self.columns_at[self.tables[0].site] if c in common]

    def _hint_renamed(self, partial: list[str]) -> None:
        """'Age' at one site and 'Âge' or 'age (years)' at another are probably one column under two
        spellings: the mapping step's rule for renames (`names.name_key`)."""
        by_key: dict[str, list[str]] = {}
        for column in partial:
            by_key.setdefault(name_key(column), []).append(column)
        for spellings in by_key.values():
            if len(spellings) > 1:
                self.warnings.append(
                    "These look like one column spelled differently at different sites: "
                    + ", ".join(f"'{c}' ({', '.join(self._sites_with(c))})" for c in spellings)
                    + "; rename them to one spelling to use the column."
                )

    def _typed_columns(self, names: list[str]) -> dict[str, dict[str, Column]]:
        """column -> site -> Column."""
        columns: dict[str, dict[str, Column]] = {name: {} for name in names}
        for table in self.tables:
            typed = type_columns(table.frame, names, table.file, table.decimal)
            self.warnings += typed.warnings
            self.errors += typed.errors
            for name, column in typed.columns.items():
                columns[name][table.site] = column
        return columns

    def _kinds(self) -> dict[str, str]:
        for name, kind in self.given_kinds.items():
            if kind not in FEATURE_KINDS:
                self.errors.append(f"Kind '{kind}' for column '{name}' is not one of {', '.join(FEATURE_KINDS)}.")
        unknown = [n for n in self.given_kinds if n not in self.columns]
        if unknown and self.tables:
            self.errors.append(
                f"Kinds are given for {quoted(unknown)}, which are not feature columns; the features are "
                f"{quoted(self.columns)}."
            )
        kinds = {}
        for name in list(self.columns):
            at = self.columns[name]
            filled = {site: c for site, c in at.items() if c.kind != "empty"}
            if not filled:
                self.warnings.append(f"Column '{name}' is empty at every site and is left out.")
                del self.columns[name]
                continue
            for site in at.keys() - filled.keys():
                self.warnings.append(
                    f"{self.files[site]}: column '{name}' has no values at site '{site}'; it is encoded as "
                    "missing there (consider excluding it)."
                )
            kinds[name] = self._kind(name, filled)
        return kinds

    def _kind(self, name: str, filled: dict[str, Column]) -> str:
        wanted = self.given_kinds.get(name, self.sites.kinds.get(name))
        types = {c.kind for c in filled.values()}
        if types == {"numeric", "text"} and wanted != "categorical":
            self.errors.append(self._conflict_message(name, filled))
            return wanted or "categorical"
        if wanted == "categorical":
            for site, column in filled.items():
                self.columns[name][site] = as_text(column)
            return "categorical"
        n_values = count_distinct(list(filled.values()))
        if wanted == "continuous" and "text" in types:
            self.errors.append(
                f"Column '{name}' holds text ({quoted(distinct(list(filled.values()))[:4])}), so it cannot be continuous."
            )
        elif wanted == "binary" and n_values > 2:
            self.errors.append(
                f"Column '{name}' cannot be binary: it has {n_values} different values "
                f"({quoted(distinct(list(filled.values()))[:6])})."
            )
        if wanted is not None:
            return wanted
        if n_values <= 2:
            return "binary"
        if "numeric" in types:
            return "continuous"
        if n_values > MAX_CATEGORIES:
            self.errors.append(
                f"Column '{name}' is text with {n_values} different values "
                f"(e.g. {quoted(distinct(list(filled.values()))[:3])}): an identifier or free text? Exclude it, "
                "or declare it categorical."
            )
        return "categorical"

    def _conflict_message(self, name: str, filled: dict[str, Column]) -> str:
        numeric = [site for site, c in filled.items() if c.kind == "numeric"]
        text = {site: text_examples(c) for site, c in filled.items() if c.kind == "text"}
        return (
            f"Column '{name}' is numeric at {', '.join(numeric)} but text at "
            + "; ".join(f"{self.files[site]} (e.g. {quoted(v)})" for site, v in text.items())
            + ". Fix the values, exclude the column, or declare it categorical."
        )

    def _check_numbers(self) -> None:
        """Continuous columns: far-off values flagged; with standardization 'none', values whose
        square overflows 32-bit floats refused (see the module's rules)."""
        for name in (n for n, kind in self.kinds.items() if kind == "continuous"):
            for table in self.tables:
                column, rows = self.columns[name][table.site], table.frame.index
                if column.kind != "numeric":
                    continue
                values = column.values
                if self.standardization == "none":
                    huge = beyond(values, SQUARE_SAFE)
                    if huge.any():
                        self.errors.append(
                            f"{table.file}, column '{name}': value(s) beyond ±1.8e19 at data row(s) "
                            f"{data_rows(rows[huge], printed(values, rows, huge))}; without standardisation the "
                            "network squares them (BatchNorm) in 32-bit floats, which overflows. Standardise "
                            "per site (the default), or fix the values."
                        )
                        continue
                extreme, median = extreme_rows(values)
                if extreme.any():
                    self.warnings.append(
                        f"{table.file}, column '{name}': value(s) more than 1000 interquartile ranges from the site's "
                        f"median ({median:g}) at data row(s) {data_rows(rows[extreme], printed(values, rows, extreme))}"
                        ": a code for 'not measured', a unit slip or a typo? Standardised with them, the column's "
                        "other values all land near one number. Fix or empty those cells."
                    )

    def _duplicate_sites(self) -> list[dict[str, Any]]:
        """Sites holding the same rows (`duplicates.py`): refused when identical, flagged when
        they overlap much."""
        if len(self.tables) < 2:
            return []
        fingerprints = {
            t.site: row_fingerprints([self.columns[name][t.site].values for name in self.kinds], self.y[t.site])
            for t in self.tables
        }
        findings = duplicate_sites(fingerprints)
        for finding in findings:
            (self.errors if finding["blocking"] else self.warnings).append(duplicate_message(finding, self.files))
        return findings

    def _server_table(self) -> ServerTable | None:
        """The server's test file fitted onto the sites' features (`server_table.py`); its problems
        join the report's, so a run is refused before it starts."""
        table = self.sites.server_table
        if table is None or not self.tables:
            return None
        values = {name: self._values(name) for name, kind in self.kinds.items() if kind != "continuous"}
        server = align_server_table(table, self.sites.target, self.kinds, values, self._class_of(),
                                    self.class_names, self.min_rows)
        self.warnings += server.warnings
        self.errors += server.errors
        return server

    # -- report ----------------------------------------------------------------------------
    def _report(self) -> AlignmentReport:
        everywhere = set().union(*map(set, self.columns_at.values())) if self.columns_at else set()
        sites_with = {c: self._sites_with(c) for c in everywhere}
        n_sites = len(self.columns_at)
        first = list(self.tables[0].frame.columns) if self.tables else []
        tables = {t.site: t for t in self.sites.tables}
        return AlignmentReport(
            target=self.sites.target,
            class_names=self.class_names,
            sites=[
                {
                    "site": site,
                    "file": self.files[site],
                    "rows": rows,
                    "rows_used": len(self.y.get(site, ())),
                    "delimiter": tables[site].delimiter,
                    "encoding": tables[site].encoding,
                    "class_counts": {name: int((self.y[site] == k).sum()) for k, name in enumerate(self.class_names)}
                    if site in self.y else {},
                }
                for site, rows in self.rows_read.items()
            ],
            columns_in_all=sorted((c for c, s in sites_with.items() if len(s) == n_sites), key=first.index),
            columns_in_some={c: s for c, s in sorted(sites_with.items()) if 1 < len(s) < n_sites},
            columns_in_one={c: s[0] for c, s in sorted(sites_with.items()) if len(s) == 1 and n_sites > 1},
            excluded=self.exclude,
            features={name: self._feature_entry(name, kind) for name, kind in self.kinds.items()},
            type_conflicts=[
                {"column": name,
                 "numeric_at": [s for s, c in at.items() if c.kind == "numeric"],
                 "text_at": {s: text_examples(c) for s, c in at.items() if c.kind == "text"}}
                for name, at in self.columns.items()
                if {c.kind for c in at.values()} >= {"numeric", "text"}
            ],
            category_differences=self._category_differences(),
            duplicate_sites=self.duplicates,
            missing_share={
                t.site: {name: round(float(self.columns[name][t.site].missing.mean()), 4) for name in self.kinds}
                for t in self.tables
            },
            warnings=self.warnings,
            errors=self.errors,
            server_test=self.server.summary if self.server else None,
        )

    def _feature_entry(self, name: str, kind: str) -> dict[str, Any]:
        if name in self.given_kinds:
            origin = "given"
        elif name in ((self.sites.notes.get("dictionary") or {}).get("content") or {}).get("kinds", {}):
            origin = "dictionary"  # the data dictionary's
        elif name in self.sites.kinds:
            origin = "documented"  # known from the source's documentation (e.g. heart disease)
        else:
            origin = "inferred"
        entry: dict[str, Any] = {"kind": kind, "kind_from": origin}
        if kind != "continuous":
            entry["values"] = self._values(name)
        return entry

    def _category_differences(self) -> dict[str, dict[str, list[str]]]:
        differences = {}
        for name, kind in self.kinds.items():
            at = self.columns[name]
            if kind == "continuous" or (kind == "binary" and not any(c.kind == "text" for c in at.values())):
                continue  # a 0/1 flag seen only as 0 at one site is not a coding difference
            seen = {site: distinct([c]) for site, c in at.items() if c.kind != "empty"}
            if len({tuple(v) for v in seen.values()}) > 1:
                differences[name] = seen
        return differences

    # -- encoding --------------------------------------------------------------------------
    def encode(self) -> RawFederation:
        """Feature matrices (NaN = missing) and class indices per site; DataError if misaligned."""
        self.report.raise_errors()
        names, kinds, columns, blocks = self._encoded(with_server=True)
        return RawFederation(
            name=self.sites.name,
            description=self.sites.description,
            source=self.sites.source,
            sites=[RawSite(t.site, np.column_stack(blocks[t.site]), self.y[t.site]) for t in self.tables],
            class_names=self.class_names,
            feature_names=names,
            feature_kinds=kinds,
            feature_columns=columns,
            warnings=list(self.warnings),
            server_test=(np.column_stack(blocks[None]), self.server.y) if self.server else None,
            preprocessing={
                **self.sites.notes,
                "target": self.sites.target,
                "excluded": self.exclude,
                "kinds": dict(self.kinds),
                "binary_values": {name: self._values(name) for name, kind in self.kinds.items() if kind == "binary"},
                "categories": {name: self._values(name) for name, kind in self.kinds.items() if kind == "categorical"},
                **({"server_test": {"file": self.server.file, "rows": len(self.server.y)}} if self.server else {}),
            },
        )

    def _encoded(self, with_server: bool = False, skip: Sequence[str] = ()
                 ) -> tuple[list[str], list[str], list[str], dict[str | None, list[np.ndarray]]]:
        """Every feature (a categorical column one-hot, a binary one 0/1, NaN = missing) of the
        columns not in `skip`: their names, kinds, source columns, and per site (key None: the
        server's test set, encoded with the sites' coding and categories) their value columns."""
        names, kinds, columns = [], [], []
        blocks: dict[str | None, list[np.ndarray]] = {t.site: [] for t in self.tables}
        server = self.server if with_server else None
        if server:
            blocks[None] = []
        for name, kind in self.kinds.items():
            if name in skip:
                continue
            at: dict[str | None, Column] = {**self.columns[name], **({None: server.columns[name]} if server else {})}
            if kind == "continuous":
                encoded = {name: {site: c.values.astype(np.float64) for site, c in at.items()}}
            elif kind == "binary":
                one = coded_one(self._values(name))
                encoded = {name: {site: indicator(c, one) for site, c in at.items()}}
            else:
                encoded = {f"{name}={value}": {site: indicator(c, value) for site, c in at.items()}
                           for value in self._values(name)}
            for feature, per_site in encoded.items():
                names.append(feature)
                kinds.append(kind)
                columns.append(name)
                for site, values in per_site.items():
                    blocks[site].append(values)
        return names, kinds, columns, blocks

    # -- the check-up of the files at hand --------------------------------------------------------
    def profile(self) -> Profile | None:
        """The files' federated statistics as their sites would compute them (original units, each
        site its own rows: what a check-up of them profiles). While errors block the encoding, of
        the columns whose values fit their kind (a column typed differently at two sites is left out)
        and the rows whose class is known; None when no column or row is left."""
        names, kinds, columns, blocks = self._encoded(skip=[name for name in self.kinds if not self._encodes(name)])
        if not names or not self.class_names:
            return None
        rows = []
        for table in self.tables:
            y = self.y[table.site]
            known = y >= 0
            rows.append((table.site, np.column_stack(blocks[table.site])[known], y[known]))
        if not any(len(y) for _, _, y in rows):
            return None
        return profile_federation(rows, names, kinds, columns, self.class_names, self.sites.notes.get("units") or {})

    def _encodes(self, name: str) -> bool:
        """Whether a column's values fit its kind at every site (an error of the report otherwise)."""
        kind, at = self.kinds[name], list(self.columns[name].values())
        if {c.kind for c in at} >= {"numeric", "text"}:
            return False  # a type conflict
        if kind == "continuous":
            return all(c.kind != "text" and not np.isinf(c.values.astype(np.float64)).any() for c in at)
        if kind == "binary":
            return count_distinct(at) <= 2 and len({c.kind for c in at} - {"empty"}) <= 1
        return count_distinct(at) <= MAX_CATEGORIES  # beyond: an identifier or free text (an error)

    def checked(self) -> AlignmentReport:
        """The report with the check-up's data-lens findings for these files (the reported ones,
        and the cells it could not test): a check-up of the same files finds the same."""
        profile = self.profile()
        if profile is None:
            return replace(self.report, findings=[])
        result = check_up(profile, {})
        return replace(self.report, findings=[f.to_dict() for f in result.reported],
                       not_testable=[f.to_dict() for f in result.untestable()])

    # -- helpers ---------------------------------------------------------------------------
    def _values(self, name: str) -> list[str]:
        return distinct([c for c in self.columns[name].values() if c.kind != "empty"])

    def _sites_with(self, column: str) -> list[str]:
        return [site for site, columns in self.columns_at.items() if column in columns]

