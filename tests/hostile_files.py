"""Hostile files made to order, for the tests and `benchmarks/bad_inputs.py`: small files whose
declared or nested size is out of all proportion to their content."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import openpyxl

EXCEL_LAST_CELL = "XFD1048576"  # the last cell Excel allows: column 16,384, row 1,048,576


def declared_dimension_workbook(path: Path, rows: list[list], dimension: str = f"A1:{EXCEL_LAST_CELL}",
                                extra_cells: dict[str, object] | None = None) -> Path:
    """A workbook whose one sheet holds `rows` but declares `<dimension ref=DIMENSION/>` (a reader
    that trusts it pads every row to that width and height), with `extra_cells` (e.g.
    {'A1048576': 1}) written as cells of their own rows after the others."""
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "north"
    for row in rows:
        sheet.append(row)
    buffer = io.BytesIO()
    book.save(buffer)
    source = zipfile.ZipFile(buffer)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "xl/worksheets/sheet1.xml":
                text = re.sub(r'<dimension ref="[^"]*"\s*/>', f'<dimension ref="{dimension}"/>', data.decode())
                added = "".join(f'<row r="{_row_of(cell)}"><c r="{cell}"{_typed(value)}</c></row>'
                                for cell, value in (extra_cells or {}).items())
                data = text.replace("</sheetData>", added + "</sheetData>").encode()
            target.writestr(info, data)
    path.write_bytes(out.getvalue())
    return path


def deep_json(depth: int) -> bytes:
    """A JSON document nested `depth` objects deep (a recursive parser's stack overflows)."""
    return ('{"a":' * depth + "1" + "}" * depth).encode()


def long_number_json(digits: int) -> bytes:
    """A data dictionary whose conversion factor is a `digits`-digit integer."""
    return json.dumps({"format": "fedcore-data-dictionary/1"})[:-1].encode() + (
        ', "sites": {"north": {"convert": {"chol": {"a": ' + "9" * digits + "}}}}}").encode()


def _row_of(cell: str) -> int:
    return int(re.sub(r"^[A-Z]+", "", cell))


def _typed(value: object) -> str:
    if isinstance(value, str):
        return f' t="inlineStr"><is><t>{value}</t></is>'
    return f"><v>{value}</v>"
