"""Excel workbooks (.xlsx) as site tables: one sheet per site (the sheet's name is the site's), or
one sheet with a site column. Read with openpyxl (read-only, values only: no formulas are run, no
macros exist in .xlsx), each sheet written out as CSV text and parsed by the CSV reader
(`text_tables.parse_text_table`), so a sheet gets the same checks and messages as a CSV file —
labelled "FILE, sheet 'NAME'".

What is read is what the file holds, never what it declares: a sheet's `<dimension>` (which may
say A1:XFD1048576 for three cells) is ignored, and the sheet's XML is streamed row by row, each
row holding only the cells written in it. The table is the header row (the first row with a
value) and the rows below it that hold a value, in the header's columns; empty rows are left
out, as the CSV reader leaves out empty lines, and messages still count data rows as the sheet
does (data row N is the sheet's row N after the header, empty rows included). The limits are
checked as the rows stream in, before a row is padded or written: the workbook's size,
its size once decompressed (from the archive's directory, before anything is inflated), the
header's columns (`MAX_COLUMNS`), the data rows (`max_rows`) and the cells, rows × columns
(`max_cells`) — the same limits as the CSV reader's. A value right of the header's last column
is refused naming its cell, as a CSV line with more fields than its header is. Empty sheets are
left out with a note; a workbook without a sheet that has rows is refused.
"""

from __future__ import annotations

import csv
import datetime
import io
import zipfile
from xml.etree.ElementTree import ParseError
from collections.abc import Iterator
from pathlib import Path

import openpyxl
import pandas as pd
from openpyxl.utils import get_column_letter
from openpyxl.worksheet._reader import WorkSheetParser
from openpyxl.xml.constants import SHEET_MAIN_NS
from openpyxl.xml.functions import iterparse

from data_adapters.tables.text_tables import MAX_CELLS, MAX_COLUMNS, MAX_ROWS, TextTable, cell_limit_message, parse_text_table
from fedcore.errors import DataError

SUFFIXES = (".xlsx", ".xlsm")
ROW_TAG, CELL_TAG = f"{{{SHEET_MAIN_NS}}}row", f"{{{SHEET_MAIN_NS}}}c"


def is_workbook(name: str | Path) -> bool:
    return str(name).lower().endswith(SUFFIXES)


def read_workbook(path: str | Path, max_bytes: int, max_rows: int = MAX_ROWS,
                  max_cells: int = MAX_CELLS) -> list[TextTable]:
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{file} does not exist or is not a file.")
    if file.stat().st_size > max_bytes:
        raise DataError(f"{file.name} is {file.stat().st_size / 1e6:.3g} MB, above the limit of {max_bytes / 1e6:g} MB "
                        "(raise max_file_mb to read it).")
    return parse_workbook(file.read_bytes(), file.name, max_bytes, max_rows, max_cells)


def parse_workbook(data: bytes, label: str, max_bytes: int, max_rows: int = MAX_ROWS,
                   max_cells: int = MAX_CELLS) -> list[TextTable]:
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
            sheet_label = f"{label}, sheet '{sheet.title}'"
            text, positions = _sheet_csv(_value_rows(book, sheet, sheet_label), sheet_label, max_rows, max_cells)
            if not text:
                empty.append(sheet.title)
                continue
            table = parse_text_table(text.encode("utf-8"), sheet_label, max_bytes, max_rows=max_rows,
                                     max_cells=max_cells)
            table.frame.index = pd.Index(positions)  # data row N: the sheet's row N after the header
            tables.append(table)
    finally:
        book.close()
    if not tables:
        raise DataError(f"{label} has no sheet with rows.")
    if empty:
        tables[0].warnings.append(f"{label}: sheet(s) {', '.join(repr(e) for e in empty)} are empty and left out.")
    return tables


def _value_rows(book, sheet, label: str) -> Iterator[tuple[int, dict[int, str]]]:
    """(row number, {column number: cell text}) for each row of the sheet's XML that holds a
    value, in the file's order; cells without a value are left out. The XML streams through
    and every element is dropped once read, so memory holds one row whatever the file declares
    or repeats. openpyxl's own iterators would not do: its row iterator pads every row to the
    declared (or the row's last written) column and yields every row number in between, and its
    sheet parser keeps every row's attributes, merged range and format it meets. Its cell parser
    types each cell (shared strings, dates by their style, booleans, inline text); it and the
    workbook's style tables are openpyxl 3.1's (pinned) private parts, used here only."""
    cells = WorkSheetParser(None, sheet._shared_strings, data_only=True, epoch=book.epoch,
                            date_formats=book._date_formats, timedelta_formats=book._timedelta_formats)
    open_elements: list = []
    in_cell, number, values = 0, 0, {}
    try:
        with sheet._get_source() as source:
            for event, element in iterparse(source, events=("start", "end")):
                if event == "start":
                    open_elements.append(element)
                    if element.tag == CELL_TAG:
                        in_cell += 1
                    elif element.tag == ROW_TAG:
                        number = int(element.get("r") or number + 1)
                        cells.row_counter, cells.col_counter, values = number, 0, {}
                    continue
                open_elements.pop()
                if element.tag == CELL_TAG:
                    in_cell -= 1
                    cell = cells.parse_cell(element)
                    text = "" if cell["value"] is None else _cell(cell["value"])
                    if text.strip():
                        values[cell["column"]] = text
                elif element.tag == ROW_TAG and values:
                    yield number, values
                if not in_cell and open_elements:  # read: let it go (a cell's parts go with the cell)
                    open_elements[-1].remove(element)
    except (ParseError, ValueError, IndexError, KeyError, TypeError, OverflowError) as error:
        # damaged XML, a row or cell reference that is none, a shared string that does not exist
        raise DataError(f"{label} cannot be read: the sheet is damaged ({type(error).__name__}: "
                        f"{str(error)[:120]}).") from None


def _sheet_csv(rows: Iterator[tuple[int, dict[int, str]]], label: str, max_rows: int,
               max_cells: int) -> tuple[str, list[int]]:
    """The rows with values as CSV text of the header's width, and where each data row sits (its
    sheet row less the header's, less one: the frame's index); ('', []) for a sheet without
    values. Every limit is checked on a row before anything of it is written, so a row far down
    or far right costs nothing."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header_row = previous = width = 0
    positions: list[int] = []
    for number, values in rows:
        last = max(values)
        if not header_row:
            if last > MAX_COLUMNS:
                raise DataError(f"{label}: its header row (row {number}) reaches column {get_column_letter(last)} "
                                f"({last:,} columns), above the limit of {MAX_COLUMNS:,} columns.")
            header_row, width = number, last
        elif number <= previous:
            raise DataError(f"{label}: row {number} comes after row {previous} in the file: the workbook is damaged.")
        elif last > width:
            raise DataError(f"{label}: cell {get_column_letter(last)}{number} holds a value right of the header's last "
                            f"column ({get_column_letter(width)}); every column needs a name in the header row "
                            f"(row {header_row}).")
        else:
            positions.append(number - header_row - 1)
        if len(positions) > max_rows:
            raise DataError(f"{label} has more than {max_rows:,} data rows, the limit (raise max_rows to read it): "
                            f"row {number} holds a value; reading stopped there.")
        if len(positions) * width > max_cells:
            raise DataError(cell_limit_message(label, len(positions), width, max_cells, f" (row {number} holds a value)"))
        writer.writerow([values.get(column, "") for column in range(1, width + 1)])
        previous = number
    return out.getvalue(), positions


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    return str(value)
