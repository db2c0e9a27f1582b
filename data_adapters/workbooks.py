"""Excel workbooks (.xlsx) as site tables: one sheet per site (the sheet's name is the site's), or
one sheet with a site column. Read with openpyxl (read-only, values only: no formulas are run, no
macros exist in .xlsx), each sheet written out as CSV text and parsed by the CSV reader
(`text_tables.parse_text_table`), so a sheet gets the same checks and messages as a CSV file —
labelled "FILE, sheet 'NAME'". Limits: the workbook's size, its size once decompressed (checked
from the archive's directory before anything is inflated) and each sheet's rows. Empty sheets
are left out with a note; a workbook without a sheet that has rows is refused.
"""

from __future__ import annotations

import csv
import datetime
import io
import zipfile
from pathlib import Path

import openpyxl

from data_adapters.text_tables import MAX_ROWS, TextTable, parse_text_table
from fedcore.errors import DataError

SUFFIXES = (".xlsx", ".xlsm")


def is_workbook(name: str | Path) -> bool:
    return str(name).lower().endswith(SUFFIXES)


def read_workbook(path: str | Path, max_bytes: int, max_rows: int = MAX_ROWS) -> list[TextTable]:
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{file} does not exist or is not a file.")
    if file.stat().st_size > max_bytes:
        raise DataError(f"{file.name} is {file.stat().st_size / 1e6:.3g} MB, above the limit of {max_bytes / 1e6:g} MB "
                        "(raise max_file_mb to read it).")
    return parse_workbook(file.read_bytes(), file.name, max_bytes, max_rows)


def parse_workbook(data: bytes, label: str, max_bytes: int, max_rows: int = MAX_ROWS) -> list[TextTable]:
    """Every sheet with rows, as the CSV reader reads it (see the module's rules)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        inflated = sum(info.file_size for info in archive.infolist())
    except zipfile.BadZipFile:
        raise DataError(f"{label} is not an Excel workbook (.xlsx): it cannot be opened as one.") from None
    if inflated > max_bytes:
        raise DataError(f"{label} is above the limit of {max_bytes / 1e6:g} MB once decompressed "
                        "(raise max_file_mb to read it).")
    try:
        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as error:  # openpyxl raises many kinds for a damaged file
        raise DataError(f"{label} cannot be read as an Excel workbook: {type(error).__name__}.") from None
    tables, empty = [], []
    try:
        for sheet in book.worksheets:
            text = _sheet_csv(sheet, max_rows)
            sheet_label = f"{label}, sheet '{sheet.title}'"
            if not text.strip():
                empty.append(sheet.title)
                continue
            tables.append(parse_text_table(text.encode("utf-8"), sheet_label, max_bytes, max_rows=max_rows))
    finally:
        book.close()
    if not tables:
        raise DataError(f"{label} has no sheet with rows.")
    if empty:
        tables[0].warnings.append(f"{label}: sheet(s) {', '.join(repr(e) for e in empty)} are empty and left out.")
    return tables


def _sheet_csv(sheet, max_rows: int) -> str:
    """A sheet's cells as CSV text (numbers as Python writes them, dates in ISO form), one row
    past `max_rows` at most, so the CSV reader's limit says the sheet is too long."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    blank = 0  # empty rows held back: written only when a row with values follows (row numbers stay)
    for k, row in enumerate(sheet.iter_rows(values_only=True)):
        if k > max_rows + 1:
            break
        cells = ["" if v is None else _cell(v) for v in row]
        if not any(c.strip() for c in cells):
            blank += 1
            continue
        for _ in range(blank):
            writer.writerow([""] * len(cells))
        blank = 0
        writer.writerow(cells)
    return out.getvalue()


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    return str(value)
