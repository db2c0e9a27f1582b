"""Data adapters: turn a data reference into a fedcore Federation. They never train.

A data reference (`references.py`) names a source and its options, as a string such as `demo`,
`demo:standardization=site`, `heart:PATH` or `csv:a.csv,b.csv,target=outcome`, or as a JSON
object such as {"source": "csv", "files": ["a.csv", "b.csv"], "target": "outcome"}. The
hold-out split follows the run's seed.

    inspect_data(ref)          the alignment report (tables: with the check-up's data-lens findings for
                               the files) or a per-site summary (other data)
    load_federation(ref, seed) the Federation
    check_reference(ref)       the checked, JSON-ready reference with absolute paths, for a run
                               spec; tables that would not combine are refused here already
    mapping(ref, dictionary)   tables: the alignment with a data dictionary applied (the reference's
                               file, or a dictionary's content given here) and the suggestions left
    mapping_view(ref, dict.)   the same and what the mapping step shows of the mapped tables
    decision_effects(...)      what one more decision would change
    draft_dictionary(ref)      the reference's dictionary with every suggestion accepted
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from data_adapters.alignment.align import Alignment, AlignmentReport, TableSites
from data_adapters.alignment.cache import cached_alignment
from data_adapters.mapping.dictionary import apply_dictionary, effects, empty_dictionary, merge, read_dictionary, target_of
from data_adapters.mapping.study_view import study_view
from data_adapters.mapping.suggestions import Suggestion, suggest
from data_adapters.assembly.assemble import assemble, moment_sums, pooled_from_sums
from data_adapters.references.flower_reference import flower_reference, is_flower_reference
from data_adapters.references.references import (
    Reference,
    describe_reference,
    normalize_reference,
    parse_reference,
    reference_dict,
)
from data_adapters.references.sources import SOURCES, SiteOptions, Source, TableOptions
from data_adapters.alignment.summary import SiteSummary
# The rest of the public surface, for the application layer (application/datasets.py: the dashboard's
# data services): the limits, uploads, roots and dictionary files of the sub-packages.
from data_adapters.readers.csv_sites import MAX_FILE_MB, site_name
from data_adapters.mapping.dictionary import SUFFIX as DICTIONARY_SUFFIX
from data_adapters.mapping.dictionary import MAX_BYTES as DICTIONARY_MAX_BYTES
from data_adapters.mapping.dictionary import check_size as check_dictionary_size
from data_adapters.mapping.dictionary import conversion_name, dictionary_bytes, dictionary_name, parse_dictionary
from data_adapters.mapping.dictionary import validate as validate_dictionary
from data_adapters.mapping.suggestions import decision, edited_patch
from data_adapters.readers.demo import FEATURES as DEMO_FEATURES
from data_adapters.references.discover import find_datasets, search_folders
from data_adapters.assembly.preprocessing import MISSING_CODE
from data_adapters.references.roots import ENVIRONMENT, OutsideDataRoots, check_reference_roots, configured_roots, within_roots
from data_adapters.tables.text_tables import MAX_ROWS, PARSED, parse_text_table, read_text_table
from data_adapters.tables.workbooks import is_workbook, parse_workbook
from fedcore.errors import DataError
from fedcore.federation import Federation
from fedcore.interpret.disclosure import DEFAULT_POLICY, Policy

__all__ = [
    "SOURCES", "AlignmentReport", "SiteSummary", "Suggestion", "check_reference", "decision_effects",
    "describe_reference", "draft_dictionary", "mapping_view", "flower_reference", "inspect_data", "is_flower_reference", "load_federation", "mapping",
    "moment_sums", "normalize_reference", "parse_reference", "pooled_from_sums", "reference_dict",
    "standardization_sums",
    # the application layer's data services (application/datasets.py)
    "DEMO_FEATURES", "DICTIONARY_MAX_BYTES", "DICTIONARY_SUFFIX", "ENVIRONMENT", "MAX_FILE_MB", "MAX_ROWS", "MISSING_CODE",
    "PARSED", "OutsideDataRoots", "Reference", "check_dictionary_size", "check_reference_roots", "configured_roots",
    "conversion_name", "decision", "dictionary_bytes", "dictionary_name", "edited_patch", "empty_dictionary",
    "find_datasets", "is_workbook", "merge", "parse_dictionary", "parse_text_table", "parse_workbook", "read_text_table",
    "search_folders", "site_name", "validate_dictionary", "within_roots",
]


def load_federation(ref: Reference, seed: int = 0, pooled: Mapping[int, tuple[float, float]] | None = None,
                    disclosure: Policy | None = DEFAULT_POLICY, dictionary: Mapping[str, Any] | None = None
                    ) -> Federation:
    """The federation a data reference names, split with `seed`. `pooled` (feature index -> mean,
    SD): a table's federated standardisation as a real federation's server pooled it.
    `disclosure`: the policy the sites release their profile and sums at (None: as computed,
    unprotected; only for measuring what the policy costs). `dictionary`: a data dictionary's
    content for a table reference that names none of its own (a Flower server's data, mapped as
    the sites mapped theirs)."""
    source, options = parse_reference(ref)
    if source.kind == "complete":
        federation = source.read(seed=seed, disclosure=disclosure, **options)
    else:
        reader, table, sites = _option_groups(options)
        if source.kind == "table":
            raw = _alignment(source, reader, table, dictionary).encode()
            federation = assemble(raw, seed, **asdict(sites), standardization=table.standardization,
                                  missing_indicators=table.missing_indicators,
                                  reference=dict(pooled) if pooled is not None else None, disclosure=disclosure)
        else:
            federation = assemble(source.read(**reader), seed, **asdict(sites))
    federation.source = ref if isinstance(ref, str) else json.dumps(dict(ref), sort_keys=True)
    return federation


def standardization_sums(ref: Reference, seed: int = 0, disclosure: Policy | None = DEFAULT_POLICY
                         ) -> tuple[str, np.ndarray, list[str]]:
    """A table reference's standardisation ('site', 'federated', ...), the summed `moment_sums`
    of its sites' training rows (original units: [3, features]) as `disclosure` releases each
    site's, and the feature kinds — what a Flower site sends the server when the federation
    standardises federated."""
    source, options = parse_reference(ref)
    if source.kind != "table":
        return "", np.zeros((3, 0)), []
    reader, table, sites = _option_groups(options)
    raw = _alignment(source, reader, table).encode()
    sums = assemble(raw, seed, **asdict(sites), standardization=table.standardization,
                    missing_indicators=table.missing_indicators, sums_only=True, disclosure=disclosure)
    kinds = raw.feature_kinds + (["binary"] * (sums.shape[1] - len(raw.feature_kinds)))  # missing indicators
    return table.standardization, sums, kinds


def inspect_data(ref: Reference) -> AlignmentReport | SiteSummary:
    """What the dashboard's data page and `python -m fedcore inspect` show before training: for
    tables the alignment report (it lists problems instead of raising on them) with the check-up's
    findings for the files (`Alignment.checked`), for other sources a per-site summary of the
    loaded federation."""
    source, options = parse_reference(ref)
    if source.kind == "table":
        reader, table, _ = _option_groups(options)
        return _alignment(source, reader, table).checked()
    return SiteSummary.of(load_federation(ref))


def check_reference(ref: Reference) -> str | dict:
    """`normalize_reference`, and for table sources the alignment too, so that a run is never
    created for files that cannot be combined (images are only checked to exist: loading them
    all twice would be slow). A Flower federation's rows are at its sites: its options are
    checked, and the server's own data like any reference."""
    if is_flower_reference(ref):
        resolved = flower_reference(ref)
        if resolved.server_data:
            resolved = replace(resolved, server_data=check_reference(resolved.server_data))
        return resolved.to_json()
    normalized = normalize_reference(ref)
    source, options = parse_reference(normalized)
    if source.kind == "table":
        reader, table, _ = _option_groups(options)
        _alignment(source, reader, table).report.raise_errors()  # what blocks it; no check-up needed
    return normalized


DRAFT_PASSES = 4  # a rename can make a column common, whose units or codes are then compared


def mapping(ref: Reference, dictionary: Mapping[str, Any] | None = None) -> tuple[Alignment, list[Suggestion]]:
    """A table reference's alignment with `dictionary` applied (default: the reference's own
    dictionary file, if any), and the suggestions for what is left."""
    sites, table = _mapped_sites(ref, dictionary)
    alignment = Alignment(sites, table.exclude, table.kinds, table.min_rows, table.standardization)
    return alignment, suggest(sites, alignment)


def mapping_view(ref: Reference, dictionary: Mapping[str, Any]) -> tuple[Alignment, list[Suggestion], dict[str, Any]]:
    """`mapping`, and what the mapping step shows of the mapped tables (`study_view`): every
    column, the target's candidates and values."""
    sites, table = _mapped_sites(ref, dictionary)
    alignment = Alignment(sites, table.exclude, table.kinds, table.min_rows, table.standardization)
    return alignment, suggest(sites, alignment), study_view(sites)


def decision_effects(ref: Reference, dictionary: Mapping[str, Any], patch: Mapping[str, Any]) -> list[str]:
    """What `patch` would change on the tables as `dictionary` maps them (`dictionary.effects`)."""
    sites, _ = _mapped_sites(ref, dictionary)
    return effects(sites, patch)


def _mapped_sites(ref: Reference, dictionary: Mapping[str, Any] | None) -> tuple[TableSites, TableOptions]:
    source, options = parse_reference(ref)
    if source.kind != "table":
        raise DataError(f"Data source '{source.name}' holds no tables to map.")
    reader, table, _ = _option_groups(options)
    path = reader.pop("dictionary", None)
    content = dictionary if dictionary is not None else (read_dictionary(path) if path else None)
    if "target" in inspect.signature(source.read).parameters:
        reader["target"] = target_of(content, reader.get("target"))
    sites = source.read(**reader)
    if content is not None:
        sites = apply_dictionary(sites, content, Path(path).name if path and dictionary is None else "the dictionary")
    return sites, table


def draft_dictionary(ref: Reference, name: str = "", questions: list[Suggestion] | None = None) -> dict[str, Any]:
    """The reference's dictionary (or an empty one) with every suggestion accepted, the suggestions
    looked for again after each round of them (a rename makes a column comparable). Questions (what
    the data cannot decide) are never answered; `questions`, when given, receives those asked."""
    source, options = parse_reference(ref)
    reader, _, _ = _option_groups(options)
    content = read_dictionary(reader["dictionary"]) if reader.get("dictionary") else empty_dictionary(name)
    if name:
        content["name"] = name
    asked: dict[str, Suggestion] = {}
    for _ in range(DRAFT_PASSES):
        alignment, suggestions = mapping(ref, content)
        content = merge(content, {"target": {"column": alignment.sites.target}})
        asked = {s.id: s for s in suggestions if s.question}  # those still open after the last pass
        decided = [s for s in suggestions if not s.question]
        if not decided:
            break
        for suggestion in decided:
            content = merge(content, suggestion.patch)
    if questions is not None:
        questions += asked.values()
    return content


def _alignment(source: Source, reader: dict, table: TableOptions, dictionary: Mapping[str, Any] | None = None
               ) -> Alignment:
    """The alignment of a table source's reading; `dictionary` (content) applied when the
    reference names no dictionary file of its own. Kept while the files it read are unchanged
    (`alignment/cache.py`: a check-up checks and loads one reference twice per run)."""
    if dictionary is not None and not reader.get("dictionary"):
        if "target" in inspect.signature(source.read).parameters:
            reader = {**reader, "target": target_of(dictionary, reader.get("target"))}
    else:
        dictionary = None

    def align() -> Alignment:
        sites = source.read(**reader)
        if dictionary is not None:
            sites = apply_dictionary(sites, dictionary, "the sites' data dictionary")
        return Alignment(sites, table.exclude, table.kinds, table.min_rows, table.standardization)

    files = [reader.get(name) for name in (source.paths, *source.files) if name]
    options = {"source": source.name, "reader": reader, "table": asdict(table), "dictionary": dictionary}
    return cached_alignment(options, files, align)


def _option_groups(options: dict) -> tuple[dict, TableOptions, SiteOptions]:
    """Options for the reader itself, and the shared table and site groups."""
    table_fields = {f.name for f in fields(TableOptions)}
    site_fields = {f.name for f in fields(SiteOptions)}
    reader = {k: v for k, v in options.items() if k not in table_fields | site_fields}
    table = TableOptions(**{k: v for k, v in options.items() if k in table_fields})
    sites = SiteOptions(**{k: v for k, v in options.items() if k in site_fields})
    return reader, table, sites
