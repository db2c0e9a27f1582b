"""Read one delimited text file (CSV, semicolon or tab separated, optionally gzipped) into a
DataFrame, with a message naming the file — and the line or column — for every way it can fail.

What is accepted, and why:
- encodings: UTF-8 (with or without a byte-order mark); UTF-16 / UTF-32 with a byte-order mark,
  and UTF-16 without one when every other byte is NUL and the result is text (Excel's "Unicode
  Text" export is tab-separated UTF-16 LE) — with a warning naming the encoding; files exported
  from Windows programs are often Windows-1252, so that is tried next, then Latin-1 (which
  decodes any byte) — either with a warning saying which was used. Other bytes with NULs are a
  binary file (a workbook, an image) and are refused as such;
- delimiters: comma, semicolon or tab, detected from the first lines (European spreadsheet
  exports use semicolons, and then usually decimal commas, which are read as decimal points);
- missing values: empty cells and the tokens in MISSING_TOKENS (`?` is the UCI convention);
- a size limit on the file (and on its decompressed text), checked before anything is parsed.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import itertools
import re
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from fedcore.errors import DataError

MISSING_TOKENS = ("", "NA", "N/A", "n/a", "na", "NaN", "nan", "NULL", "null", "None", "?", ".")
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab"}  # the candidates, in preference order
FALLBACK_ENCODINGS = (("cp1252", "Windows-1252 (cp1252)"), ("latin-1", "Latin-1 (ISO-8859-1)"))
SNIFF_LINES = 50
SNIFF_BYTES = 65536
# Checked longest first: a UTF-32 LE mark begins with the UTF-16 LE one.
BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32 little-endian"),
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32 big-endian"),
    (codecs.BOM_UTF8, "utf-8-sig", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16 little-endian"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16 big-endian"),
)
# Files that are not text tables but are often picked by mistake: their first bytes -> what they are.
SIGNATURES = (
    (b"PK\x03\x04", "a zip archive or an Excel workbook"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an Excel 97-2003 workbook (.xls) or another old Office file"),
)
# BOM-less UTF-16: at least this share of the high bytes is NUL (ASCII text: all of them).
UTF16_NUL_SHARE = 0.9
DECIMAL_COMMA = re.compile(r"(?:^|[;\t])\s*-?\d+,\d+\s*(?:[;\t]|$)", re.MULTILINE)


@dataclass
class TextTable:
    """One file's rows; the frame's index is the 0-based data row (row 1 = first after the header)."""

    file: str
    frame: pd.DataFrame
    delimiter: str
    encoding: str
    decimal: str = "."
    warnings: list[str] = field(default_factory=list)


def read_text_table(
    path: str | Path, max_bytes: int, column_names: Sequence[str] | None = None
) -> TextTable:
    """Read the file at `path`; `column_names` for files without a header row."""
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{file} does not exist or is not a file.")
    size = file.stat().st_size
    if size > max_bytes:
        raise DataError(
            f"{file.name} is {size / 1e6:.3g} MB, above the limit of {max_bytes / 1e6:g} MB "
            "(raise max_file_mb to read it)."
        )
    return parse_text_table(file.read_bytes(), file.name, max_bytes, column_names)


def parse_text_table(
    data: bytes, label: str, max_bytes: int, column_names: Sequence[str] | None = None
) -> TextTable:
    """Parse a file's bytes (e.g. an upload not yet on disk); `label` names it in messages."""
    data = _decompress(data, label, max_bytes)
    text, encoding, warnings = _decode(data, label)
    lines = [line.rstrip("\r\n") for line in itertools.islice(io.StringIO(text), SNIFF_LINES * 2) if line.strip()]
    lines = lines[:SNIFF_LINES]
    if not lines:
        raise DataError(f"{label} is empty.")
    delimiter = _detect_delimiter(lines, label)
    header = next(csv.reader(lines[:1], delimiter=delimiter))
    names = _column_names(header, column_names, label)
    decimal = "," if delimiter != "," and DECIMAL_COMMA.search("\n".join(lines[1:])) else "."
    if delimiter != ",":
        warnings.append(
            f"{label} uses {DELIMITER_NAMES[delimiter]}s between columns (detected)"
            + (" and decimal commas, read as decimal points." if decimal == "," else ".")
        )
    try:
        frame = pd.read_csv(
            io.StringIO(text), sep=delimiter, header=0 if column_names is None else None,
            names=names, na_values=list(MISSING_TOKENS), keep_default_na=False,
            skipinitialspace=True, decimal=decimal, index_col=False, low_memory=False,
        )
    except pd.errors.ParserError as error:
        raise DataError(_parser_message(str(error), label, len(names))) from None
    if frame.empty:
        raise DataError(f"{label} has a header row but no data rows.")
    return TextTable(label, frame, delimiter, encoding, decimal, warnings)


def _decompress(data: bytes, label: str, max_bytes: int) -> bytes:
    if not data.startswith(b"\x1f\x8b"):
        return data
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            text = stream.read(max_bytes + 1)  # read no further than the limit: a gzip bomb stops here
    except (OSError, EOFError, zlib.error):
        raise DataError(f"{label} looks gzip-compressed but cannot be decompressed (damaged or truncated).") from None
    if len(text) > max_bytes:
        raise DataError(
            f"{label} is above the limit of {max_bytes / 1e6:g} MB once decompressed (raise max_file_mb to read it)."
        )
    return text


def _decode(data: bytes, label: str) -> tuple[str, str, list[str]]:
    for signature, what in SIGNATURES:
        if data.startswith(signature):
            raise DataError(f"{label} is {what}, not a text table; save it as CSV.")
    decoded = _decode_unicode(data, label)
    if decoded is not None:
        return decoded
    if b"\x00" in data[:SNIFF_BYTES]:
        raise DataError(f"{label} is a binary file, not a text table (CSV, semicolon or tab separated).")
    try:
        return data.decode("utf-8"), "utf-8", []
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
    for codec, name in FALLBACK_ENCODINGS:
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            continue
        warning = (
            f"{label} is not UTF-8 (the first non-UTF-8 byte is on line {line}); it was read as {name}. "
            "Check that accented text looks right, or save the file as UTF-8."
        )
        return text, codec, [warning]
    raise AssertionError("Latin-1 decodes every byte")


def _decode_unicode(data: bytes, label: str) -> tuple[str, str, list[str]] | None:
    """The text of a file that says (byte-order mark) or shows (NUL in every other byte) that it
    is UTF-8/16/32; None for any other file. NUL bytes must be looked at before the 8-bit
    encodings, which would read them as characters."""
    for mark, codec, name in BYTE_ORDER_MARKS:
        if data.startswith(mark):
            try:
                text = data.decode(codec)
            except UnicodeDecodeError as error:
                raise DataError(
                    f"{label} starts with a {name} byte-order mark but byte {error.start + 1} is not valid "
                    f"{name}: the file is damaged or truncated."
                ) from None
            if codec == "utf-8-sig":  # UTF-8 is the expected encoding: nothing to warn about
                return text, "utf-8", []
            return text, codec, [_unicode_warning(label, f"{name} (with a byte-order mark)")]
    codec = _bomless_utf16(data[:SNIFF_BYTES])
    if codec is None:
        return None
    try:
        text = data.decode(codec)
    except UnicodeDecodeError:
        return None  # an odd length or a broken pair further on: not text after all
    name = "UTF-16 little-endian" if codec == "utf-16-le" else "UTF-16 big-endian"
    return text, codec, [_unicode_warning(label, f"{name} (no byte-order mark; detected)")]


def _bomless_utf16(sample: bytes) -> str | None:
    """'utf-16-le' / 'utf-16-be' when the sample looks like UTF-16 text without a byte-order mark:
    the high byte of (nearly) every character is NUL, the low byte never is, and the characters
    are printable. Binary files with NULs (images, numbers) fail the last two tests."""
    if len(sample) < 4:
        return None
    even, odd = sample[0::2], sample[1::2]
    for codec, high, low in (("utf-16-le", odd, even), ("utf-16-be", even, odd)):
        if b"\x00" in low or high.count(0) < UTF16_NUL_SHARE * len(high):
            continue
        text = sample.decode(codec, errors="replace")  # the sample may end inside a character
        if all(ch.isprintable() or ch in "\t\r\n" for ch in text):
            return codec
    return None


def _unicode_warning(label: str, name: str) -> str:
    # Spreadsheets write UTF-16 for 'Unicode Text'; the reader should know which text was guessed.
    return (f"{label} is not UTF-8 but {name}; it was read as such. Check that the columns look right, "
            "or save the file as CSV UTF-8.")


def _detect_delimiter(lines: list[str], label: str) -> str:
    """The candidate that splits the header into most columns with the most rows agreeing."""
    scores = {}
    for delimiter in DELIMITER_NAMES:
        widths = [len(row) for row in csv.reader(lines, delimiter=delimiter)]
        if widths[0] >= 2:
            agreeing = sum(width == widths[0] for width in widths) / len(widths)
            scores[delimiter] = (agreeing, widths[0])
    if not scores:
        raise DataError(
            f"{label}: the first line has no comma, semicolon or tab, so its columns cannot be told "
            f"apart (first line: '{lines[0][:80]}'). A site file needs at least a feature and the target."
        )
    return max(scores, key=scores.get)


def _column_names(header: list[str], given: Sequence[str] | None, label: str) -> list[str]:
    if given is not None:
        if len(header) != len(given):
            raise DataError(
                f"{label} has {len(header)} columns on its first line; expected {len(given)} ({', '.join(given)})."
            )
        return list(given)
    names = [name.strip() for name in header]
    empty = [str(k) for k, name in enumerate(names, 1) if not name]
    if empty:
        raise DataError(
            f"{label}: column {', '.join(empty)} of {len(names)} has an empty header; every column needs a name"
            + (" (a delimiter at the end of the header line?)." if empty[-1] == str(len(names)) else ".")
        )
    repeated = [name for name, count in Counter(names).items() if count > 1]
    if repeated:
        where = {name: [str(k) for k, n in enumerate(names, 1) if n == name] for name in repeated}
        listed = "; ".join(f"'{name}' (columns {', '.join(cols)})" for name, cols in where.items())
        raise DataError(f"{label}: column names must be unique, but these repeat: {listed}.")
    return names


def _parser_message(error: str, label: str, n_columns: int) -> str:
    match = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", error)
    if match:
        line, seen = match.group(2), match.group(3)
        return (
            f"{label}: line {line} has {seen} fields but the header has {n_columns} "
            "(a delimiter inside an unquoted value, or a broken line?)."
        )
    return f"{label} cannot be read as a table: {error.strip()}"
