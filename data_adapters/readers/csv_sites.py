"""Per-site CSV files — one file per site, or files with a site column — as tables to align.
Excel workbooks (.xlsx) are read too (`workbooks.py`): one site per sheet (named after the sheet
when the workbook has several), or a sheet with a site column.

The site of a file is its name without extensions (`site_a.csv` -> `site_a`) unless
`site_names` says otherwise; with `site_column`, every distinct value of that column is a site.
`server_test` names one more file: the server's own test set (for AdaFed's server_test 'given'),
read the same way and fitted onto the sites' features by the alignment (`server_table.py`).
`dictionary` names a data dictionary (`dictionary.py`): applied to each site's table as read, and
recorded with its content and hash in the federation's preprocessing (so in every run's record).
The data's name: `name`, else the dictionary's, else made from the file names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from data_adapters.alignment.align import SiteTable, TableSites
from data_adapters.tables.cells import as_labels, close_match, data_rows, label_order
from data_adapters.mapping.dictionary import apply_dictionary, dictionary_name, read_dictionary, target_of
from data_adapters.tables.text_tables import MAX_ROWS, TextTable, read_text_table
from data_adapters.tables.workbooks import SUFFIXES as WORKBOOK_SUFFIXES
from data_adapters.tables.workbooks import is_workbook, read_workbook
from fedcore.errors import DataError

TEXT_SUFFIXES = (".csv", ".tsv", ".txt", ".data", ".tab")
MAX_FILE_MB = 200.0  # each file's size limit, and its size once decompressed


def read_csv_sites(
    files: list[str],
    target: str = "",
    site_column: str | None = None,
    site_names: list[str] | None = None,
    max_file_mb: float = MAX_FILE_MB,
    server_test: str | None = None,
    max_rows: int = MAX_ROWS,
    dictionary: str | None = None,
    name: str | None = None,
) -> TableSites:
    """Read every file (no alignment yet); DataError names the file that cannot be read.
    `max_file_mb` limits each file's size (and its size once decompressed), `max_rows` its data rows.
    `dictionary`: a data dictionary file (`dictionary.py`) applied to every site's table as read;
    `name`: what to call the data (else the dictionary's name, else one made from the files')."""
    if not files:
        raise DataError("Name at least one CSV file.")
    content = read_dictionary(dictionary) if dictionary else None
    target = target_of(content, target)
    if site_names is not None and (site_column or len(site_names) != len(files)):
        raise DataError(
            f"site_names gives {len(site_names)} names for {len(files)} files"
            + (" (with a site column the sites are its values)." if site_column else "; give one name per file.")
        )
    limit = int(max_file_mb * 1e6)
    read = [read_workbook(path, limit, max_rows) if is_workbook(path) else [read_text_table(path, limit, max_rows=max_rows)]
            for path in files]
    texts = [text for sheets in read for text in sheets]
    server = read_text_table(server_test, limit, max_rows=max_rows) if server_test else None
    warnings = [w for text in [*texts, *([server] if server else [])] for w in text.warnings]
    if site_column:
        tables = [t for text in texts for t in split_by_column(text, site_column, str, warnings)]
    else:
        names = site_names or [site_name(path) for path in files]
        if len(names) != len(texts):  # a workbook with several sheets: one site per sheet
            if site_names:
                raise DataError(f"site_names gives {len(site_names)} names, but the files hold {len(texts)} sheets "
                                "(one site each); leave site_names out to name the sites after the sheets.")
            names = [name if len(sheets) == 1 else _sheet_name(sheet.file) for name, sheets in zip(names, read)
                     for sheet in sheets]
        tables = [site_table(name, text) for name, text in zip(names, texts)]
    listed = ", ".join(text.file for text in texts)
    sites = TableSites(
        name=f"{dictionary_name(files)} ({len(tables)} sites)",
        description=f"{len(tables)} sites from {listed}; target '{target}'.",
        source="csv",
        tables=tables,
        target=target,
        warnings=warnings,
        server_table=site_table("server test set", server) if server else None,
    )
    if content is not None:
        sites = apply_dictionary(sites, content, Path(dictionary).name)
    return replace(sites, name=name) if name else sites


def _sheet_name(label: str) -> str:
    """"book.xlsx, sheet 'north'" -> 'north'."""
    return label.rpartition(", sheet ")[2][1:-1]


def site_name(path: str | Path) -> str:
    """`exports/site_a.csv.gz` -> `site_a`."""
    name = Path(path).name
    name = name.removesuffix(".gz")
    for suffix in (*TEXT_SUFFIXES, *WORKBOOK_SUFFIXES):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def split_by_column(
    text: TextTable, column: str, name: Callable[[str], str], warnings: list[str]
) -> list[SiteTable]:
    """One SiteTable per distinct value of `column` (rows keep their data row numbers)."""
    frame = text.frame
    if column not in frame.columns:
        hint = close_match(column, frame.columns)
        raise DataError(
            f"{text.file} has no site column '{column}'" + (f"; did you mean '{hint}'?" if hint else ".")
        )
    labels = as_labels(frame[column])
    if labels.isna().any():
        warnings.append(
            f"{text.file}: {int(labels.isna().sum())} row(s) have no value in the site column '{column}' and are "
            f"left out: data row(s) {data_rows(labels.index[labels.isna()])}."
        )
    rest = replace(text, frame=frame.drop(columns=[column]))
    return [
        site_table(name(value), replace(rest, frame=rest.frame.loc[labels == value]))
        for value in sorted(labels.dropna().unique(), key=label_order)
    ]


def site_table(site: str, text: TextTable) -> SiteTable:
    return SiteTable(site, text.file, text.frame, text.delimiter, text.encoding, text.decimal)


def numbered(prefix: str) -> Callable[[str], str]:
    """Site names from numeric codes: '3' -> 'subject 03' (so they sort in numeric order)."""
    return lambda value: f"{prefix} {int(value):02d}" if value.isdigit() else f"{prefix} {value}"
