"""Data adapters: turn a data reference into a fedcore Federation. They never train.

A data reference (`references.py`) names a source and its options, as a string such as `demo`,
`demo:standardization=site`, `heart:PATH` or `csv:a.csv,b.csv,target=outcome`, or as a JSON
object such as {"source": "csv", "files": ["a.csv", "b.csv"], "target": "outcome"}. The
hold-out split follows the run's seed.

    inspect_data(ref)          the alignment report (tables) or a per-site summary (other data)
    load_federation(ref, seed) the Federation
    check_reference(ref)       the checked, JSON-ready reference with absolute paths, for a run
                               spec; tables that would not combine are refused here already
"""

from __future__ import annotations

import json

from data_adapters.alignment import Alignment, AlignmentReport
from data_adapters.assemble import assemble
from data_adapters.references import (
    Reference, describe_reference, normalize_reference, parse_reference, reference_dict,
)
from data_adapters.sources import SOURCES, SiteOptions, Source, TableOptions
from data_adapters.summary import SiteSummary
from fedcore.federation import Federation

__all__ = [
    "SOURCES", "AlignmentReport", "SiteSummary", "check_reference", "describe_reference", "inspect_data",
    "load_federation",
    "normalize_reference", "parse_reference", "reference_dict",
]


def load_federation(ref: Reference, seed: int = 0) -> Federation:
    """The federation a data reference names, split with `seed`."""
    source, options = parse_reference(ref)
    if source.kind == "complete":
        federation = source.read(seed=seed, **options)
    else:
        reader, table, sites = _option_groups(source, options)
        raw = source.read(**reader)
        if source.kind == "table":
            raw = Alignment(raw, table.exclude, table.kinds, table.min_rows).encode()
            sites = {**sites, "standardization": table.standardization, "missing_indicators": table.missing_indicators}
        federation = assemble(raw, seed, **sites)
    federation.source = ref if isinstance(ref, str) else json.dumps(dict(ref), sort_keys=True)
    return federation


def inspect_data(ref: Reference) -> AlignmentReport | SiteSummary:
    """What the dashboard's data page and `python -m fedcore inspect` show before training: for
    tables the alignment report (it lists problems instead of raising on them), for other
    sources a per-site summary of the loaded federation."""
    source, options = parse_reference(ref)
    if source.kind == "table":
        reader, table, _ = _option_groups(source, options)
        return Alignment(source.read(**reader), table.exclude, table.kinds, table.min_rows).report
    return SiteSummary.of(load_federation(ref))


def check_reference(ref: Reference) -> str | dict:
    """`normalize_reference`, and for table sources the alignment too, so that a run is never
    created for files that cannot be combined (images are only checked to exist: loading them
    all twice would be slow)."""
    normalized = normalize_reference(ref)
    source, _ = parse_reference(normalized)
    if source.kind == "table":
        inspect_data(normalized).raise_errors()
    return normalized


def _option_groups(source: Source, options: dict) -> tuple[dict, TableOptions, dict]:
    table_names = {f for f in TableOptions.__dataclass_fields__}
    site_names = {f for f in SiteOptions.__dataclass_fields__}
    reader = {k: v for k, v in options.items() if k not in table_names | site_names}
    table = TableOptions(**{k: v for k, v in options.items() if k in table_names})
    sites = {k: v for k, v in options.items() if k in site_names}
    return reader, table, sites
