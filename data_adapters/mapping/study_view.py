"""What the mapping step shows of the sites' tables (after the dictionary so far), so that every
decision can be made by hand: each column with the sites that have it, how it reads there (numbers
or text), its values where they are few, and its middle where they are many; the candidates for
the target, each study name with every site's spelling of it; and the target's values per site.

Everything here is a summary the Data page shows to the analyst who uploaded the files (the files
are accepted and kept; nothing leaves a site beyond what that analyst already holds).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from data_adapters.alignment.align import TableSites
from data_adapters.tables.cells import as_labels, label_order
from data_adapters.tables.columns import type_columns
from data_adapters.tables.names import name_key
from data_adapters.mapping.suggestions import target_matches

SHOWN_VALUES = 12  # distinct values listed per column and site; more: the column is a measurement


def study_view(sites: TableSites) -> dict[str, Any]:
    """The sites' columns, the target's candidates and values (JSON-ready)."""
    names = [t.site for t in sites.tables]
    columns: dict[str, dict[str, Any]] = {}
    for table in sites.tables:
        typed = type_columns(table.frame, list(table.frame.columns), table.file, table.decimal).columns
        for name, column in typed.items():
            entry = columns.setdefault(name, {"sites": [], "kinds": {}, "values": {}, "median": {}, "filled": {}})
            entry["sites"].append(table.site)
            entry["kinds"][table.site] = column.kind
            entry["filled"][table.site] = int((~column.missing).sum())
            labels = sorted(set(as_labels(table.frame[name]).dropna()), key=label_order)
            entry["values"][table.site] = labels[:SHOWN_VALUES] + (["…"] if len(labels) > SHOWN_VALUES else [])
            if column.kind == "numeric" and np.isfinite(column.values).any():
                entry["median"][table.site] = float(np.nanmedian(column.values))
    target = sites.target
    return {
        "sites": names,
        "target": target,
        "columns": columns,
        "target_choices": target_choices(sites),
        "target_values": {t.site: sorted(set(as_labels(t.frame[target]).dropna()), key=label_order)
                          for t in sites.tables if target in t.frame.columns},
        "target_matches": {t.site: target_matches(target, t.frame, _known_labels(sites))[:5]
                           for t in sites.tables if target not in t.frame.columns},
    }


def _known_labels(sites: TableSites) -> set[str]:
    target = sites.target
    return set().union(*(set(as_labels(t.frame[target]).dropna()) for t in sites.tables if target in t.frame))


def target_choices(sites: TableSites) -> list[dict[str, Any]]:
    """Every column of every site as a candidate target, grouped by what its name says (`name_key`):
    the spelling most sites use, and each site's own spelling — so a target one site spells
    `Disease` is offered as one choice with the others' `disease`. Few distinct values first (a
    class target has few), then more sites."""
    groups: dict[str, dict[str, str]] = {}
    distinct: dict[str, int] = {}
    for table in sites.tables:
        for column in table.frame.columns:
            key = name_key(column)
            groups.setdefault(key, {}).setdefault(table.site, column)
            distinct[key] = max(distinct.get(key, 0), int(table.frame[column].nunique()))
    out = []
    for key, spellings in groups.items():
        counts: dict[str, int] = {}
        for column in spellings.values():
            counts[column] = counts.get(column, 0) + 1
        name = max(counts, key=lambda c: (counts[c], c == c.strip().lower(), -list(spellings.values()).index(c)))
        out.append({"name": name, "spellings": spellings, "distinct": distinct[key]})
    return sorted(out, key=lambda c: (c["distinct"] > 50, -len(c["spellings"]), c["distinct"]))
