"""Read one delimited text file (CSV, semicolon or tab separated, optionally gzipped) into a
DataFrame, with a message naming the file — and the line, data row or column — for every way it
can fail. Nothing here raises anything but DataError for a bad file.

What is accepted, and why:
- encodings: UTF-8 (with or without a byte-order mark); UTF-16 / UTF-32 with a byte-order mark,
  and UTF-16 without one when every other byte is NUL and the result is text (Excel's "Unicode
  Text" export is tab-separated UTF-16 LE) — with a warning naming the encoding; files exported
  from Windows programs are often Windows-1252, so that is tried next, then Latin-1 (which
  decodes any byte) — either with a warning saying which was used. Other bytes with NULs at the
  start are a binary file (a workbook, an image) and are refused as such; a NUL byte further on
  in an 8-bit text file is damage, refused naming its line (read on, it would turn '1' into a
  label '1\\x00', a class of its own);
- line ends: LF, CRLF, and CR alone (classic Mac OS exports);
- delimiters: comma, semicolon or tab, detected from the first lines (European spreadsheet
  exports use semicolons, and then usually decimal commas, which are read as decimal points).
  Lines written with another of these delimiters than the header's are refused, naming their
  data rows: read with the header's delimiter each would be one cell and the rest empty;
- long cells (a 1 MB note, a pasted blob) are read like any other; messages quote only their start;
- missing values: empty cells and the tokens in MISSING_TOKENS (`?` is the UCI convention);
- limits: the file's size, its decompressed size, its columns (MAX_COLUMNS), its data rows
  (`max_rows`) and its cells, rows × columns (`max_cells`), each checked while the file streams
  through (a gzip bomb or a file of ten million rows stops at the limit; nothing is held but the
  parsed table). The workbook reader (`workbooks.py`) checks the same limits on a sheet.

pandas' parser reads the (decompressed) bytes through a stream that enforces the limits and finds
NUL bytes as it goes; only a file that turns out not to be UTF-8 is streamed again, to find its
first non-UTF-8 byte and the encoding that reads every byte, then parsed with that. PARSED, a
cache of parsed tables by content, is off unless an application turns it on (the dashboard does:
`application.datasets`).
"""

from __future__ import annotations

import codecs
import csv
import gzip
import hashlib
import io
import itertools
import re
import threading
import warnings as python_warnings
import zlib
from collections import Counter, OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from data_adapters.tables.cells import data_rows
from fedcore.errors import DataError

MISSING_TOKENS = ("", "NA", "N/A", "n/a", "na", "NaN", "nan", "NULL", "null", "None", "?", ".")
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab"}  # the candidates, in preference order
FALLBACK_ENCODINGS = (("cp1252", "Windows-1252 (cp1252)"), ("latin-1", "Latin-1 (ISO-8859-1)"))
CP1252_UNDEFINED = (b"\x81", b"\x8d", b"\x8f", b"\x90", b"\x9d")  # bytes Windows-1252 has no character for
MAX_ROWS = 2_000_000  # data rows of one file; above it the file is refused (raise max_rows to read it)
MAX_COLUMNS = 10_000  # columns of one table
MAX_CELLS = 50_000_000  # data rows × columns of one table (2M rows of 25 columns, 5,000 rows of 10,000)
SNIFF_LINES = 50
SNIFF_BYTES = 65536
CHUNK_BYTES = 1 << 20  # how much of a file is held at once while it streams through a check
GZIP_MAGIC = b"\x1f\x8b"
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
NUL_SHARE = 0.01  # at most this share of NUL bytes in an otherwise printable start: damaged text, not binary
DECIMAL_COMMA = re.compile(r"(?:^|[;\t])\s*-?\d+,\d+\s*(?:[;\t]|$)", re.MULTILINE)
LINE_BREAK = re.compile(r"\r\n|\r|\n")


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
    path: str | Path, max_bytes: int, column_names: Sequence[str] | None = None, max_rows: int = MAX_ROWS,
    max_cells: int = MAX_CELLS,
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
    try:
        data = file.read_bytes()
    except OSError as error:
        raise DataError(f"{file.name} cannot be read: {error.strerror or error}.") from None
    return parse_text_table(data, file.name, max_bytes, column_names, max_rows, max_cells)


def parse_text_table(
    data: bytes, label: str, max_bytes: int, column_names: Sequence[str] | None = None, max_rows: int = MAX_ROWS,
    max_cells: int = MAX_CELLS,
) -> TextTable:
    """Parse a file's bytes (e.g. an upload not yet on disk); `label` names it in messages."""
    key = PARSED.key(data, label, max_bytes, column_names, (max_rows, max_cells))
    cached = PARSED.get(key)
    if cached is not None:
        return cached
    table = _parse(data, label, max_bytes, column_names, max_rows, max_cells)
    PARSED.put(key, table)
    return table


class ParsedTables:
    """Parsed tables by the sha256 of the file's bytes (and how it was read), most recent last:
    a page that checks the same uploads on every widget change parses each once. Off
    (`max_entries` 0) until an application turns it on. The cache and every caller hold shallow
    copies, which pandas' copy-on-write keeps apart: a caller that edits its frame edits its own."""

    def __init__(self, max_entries: int = 0) -> None:
        self.max_entries = max_entries
        self._tables: OrderedDict[tuple, TextTable] = OrderedDict()
        self._lock = threading.Lock()

    def key(self, data: bytes, label: str, max_bytes: int, column_names: Sequence[str] | None,
            limits: tuple[int, ...]) -> tuple | None:
        if not self.max_entries:
            return None
        names = tuple(column_names) if column_names is not None else None
        return hashlib.sha256(data).hexdigest(), label, max_bytes, names, limits

    def get(self, key: tuple | None) -> TextTable | None:
        with self._lock:
            table = self._tables.get(key) if key is not None else None
            if table is not None:
                self._tables.move_to_end(key)
        return None if table is None else replace(table, frame=table.frame.copy(deep=False),
                                                  warnings=list(table.warnings))

    def put(self, key: tuple | None, table: TextTable) -> None:
        if key is None:
            return
        with self._lock:
            self._tables[key] = replace(table, frame=table.frame.copy(deep=False), warnings=list(table.warnings))
            while len(self._tables) > self.max_entries:
                self._tables.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._tables.clear()


PARSED = ParsedTables()


def _parse(data: bytes, label: str, max_bytes: int, column_names: Sequence[str] | None, max_rows: int,
           max_cells: int) -> TextTable:
    if data.startswith(GZIP_MAGIC) and int.from_bytes(data[-4:], "little") > max_bytes:
        # The gzip trailer's size (of the last member, modulo 4 GiB; garbage if the file is cut)
        # says the file may be too large once decompressed: decompressing alone, holding nothing,
        # either proves it or finds the damage, before the parser would hold what it read.
        for _ in _Stream(data, label, max_bytes).chunks():
            pass
    head = _head(data, label, max_bytes)
    for signature, what in SIGNATURES:
        if head.startswith(signature):
            raise DataError(f"{label} is {what}, not a text table; save it as CSV.")
    codec, encoding, warnings = _declared_encoding(head, label)
    lines = _sniff_lines(head, codec, label)
    delimiter = _detect_delimiter(lines, label)
    header = next(csv.reader(lines[:1], delimiter=delimiter))
    names = _column_names(header, column_names, label)
    if len(names) > MAX_COLUMNS:
        raise DataError(f"{label} has {len(names):,} columns, above the limit of {MAX_COLUMNS:,}.")
    row_cap = min(max_rows, max_cells // len(names))  # rows read at most, one more says there are more
    decimal = "," if delimiter != "," and DECIMAL_COMMA.search("\n".join(lines[1:])) else "."
    if delimiter != ",":
        warnings.append(
            f"{label} uses {DELIMITER_NAMES[delimiter]}s between columns (detected)"
            + (" and decimal commas, read as decimal points." if decimal == "," else ".")
        )

    def read(codec: str) -> pd.DataFrame:
        return _read_frame(data, label, max_bytes, codec, delimiter, decimal, names, column_names is None, row_cap)

    try:
        frame = read(codec)
    except UnicodeDecodeError:
        codec, encoding, warning = _undecodable(data, head, label, max_bytes, codec)
        warnings.append(warning)
        # The header as this encoding reads it: decoded as UTF-8 with errors ignored, 'Âge' in a
        # Windows-1252 file was 'ge'.
        header = next(csv.reader(_sniff_lines(head, codec, label)[:1], delimiter=delimiter))
        names = _column_names(header, column_names, label)
        frame = read(codec)
    if frame.empty:
        raise DataError(f"{label} has a header row but no data rows.")
    if len(frame) > max_rows:
        raise DataError(
            f"{label} has more than {max_rows:,} data rows, the limit (raise max_rows to read it); "
            "reading stopped there."
        )
    if len(frame) > row_cap:
        raise DataError(cell_limit_message(label, len(frame), len(names), max_cells))
    _check_delimiters(frame, label, delimiter)
    if column_names is None:
        frame = _without_empty_unnamed(frame, label, warnings)
    return TextTable(label, frame, delimiter, encoding, decimal, warnings)


def cell_limit_message(label: str, rows: int, columns: int, max_cells: int, where: str = "") -> str:
    """The refusal of a table above `max_cells` (`where`: what showed it)."""
    return (f"{label}: {rows:,} data rows × {columns:,} columns is more than {max_cells:,} cells, the limit of one "
            f"table{where}; reading stopped there.")


# -- the bytes: decompressed, limited, checked ---------------------------------------------------
class _Stream(io.RawIOBase):
    """The file's bytes — decompressed if gzipped — read in pieces. More than `max_bytes`, a
    damaged gzip stream, or (`find_nul`, for 8-bit text) a NUL byte stops the reading with a
    DataError naming the file (and the NUL's line)."""

    def __init__(self, data: bytes, label: str, max_bytes: int, find_nul: bool = False) -> None:
        gzipped = data.startswith(GZIP_MAGIC)
        self._source = gzip.GzipFile(fileobj=io.BytesIO(data)) if gzipped else io.BytesIO(data)
        self._label, self._max_bytes, self._seen, self._find_nul = label, max_bytes, 0, find_nul
        self.lines = _LineCount()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            piece = self._source.read(len(buffer))
        except (OSError, EOFError, zlib.error):
            raise DataError(
                f"{self._label} looks gzip-compressed but cannot be decompressed (damaged or truncated)."
            ) from None
        self._seen += len(piece)
        if self._seen > self._max_bytes:
            raise DataError(
                f"{self._label} is above the limit of {self._max_bytes / 1e6:g} MB once decompressed "
                "(raise max_file_mb to read it)."
            )
        if self._find_nul and (nul := piece.find(b"\x00")) >= 0:
            raise DataError(_nul_message(self._label, self.lines.line_at(piece, nul)))
        self.lines.add(piece)
        buffer[: len(piece)] = piece
        return len(piece)

    def chunks(self) -> Iterator[bytes]:
        while chunk := self.read(CHUNK_BYTES):
            yield chunk


def _head(data: bytes, label: str, max_bytes: int) -> bytes:
    """The first SNIFF_BYTES of the (decompressed) file, or all of it if it is shorter."""
    stream, head = _Stream(data, label, max_bytes), b""
    while len(head) < SNIFF_BYTES and (piece := stream.read(SNIFF_BYTES - len(head))):
        head += piece
    return head


def _declared_encoding(head: bytes, label: str) -> tuple[str, str, list[str]]:
    """(codec for the parser, encoding's name for the report, warnings) as the file's start shows
    them: a byte-order mark, UTF-16 without one, else UTF-8 — which the parser then checks on
    every byte (`_undecodable` takes over where it fails)."""
    for mark, codec, name in BYTE_ORDER_MARKS:
        if head.startswith(mark):
            if codec == "utf-8-sig":  # UTF-8 is the expected encoding: nothing to warn about
                return codec, "utf-8", []
            return codec, codec, [_unicode_warning(label, f"{name} (with a byte-order mark)")]
    codec = _bomless_utf16(head)
    if codec is not None:
        name = "UTF-16 little-endian" if codec == "utf-16-le" else "UTF-16 big-endian"
        return codec, codec, [_unicode_warning(label, f"{name} (no byte-order mark; detected)")]
    if b"\x00" in head:
        if _text_but_for_nul(head):
            raise DataError(_nul_message(label, _LineCount().line_at(head, head.index(b"\x00"))))
        raise DataError(f"{label} is a binary file, not a text table (CSV, semicolon or tab separated).")
    return "utf-8", "utf-8", []


def _text_but_for_nul(head: bytes) -> bool:
    """A text file with a stray NUL byte or two (damage), not a binary file: few NULs (at most
    NUL_SHARE of the bytes), and the rest printable UTF-8 text."""
    if head.count(0) > NUL_SHARE * len(head):
        return False
    text = head.replace(b"\x00", b"").decode("utf-8", errors="replace").rstrip("\ufffd")
    return "\ufffd" not in text and all(ch.isprintable() or ch in "\t\r\n" for ch in text)


def _nul_message(label: str, line: int) -> str:
    return (f"{label}: line {line} holds a NUL byte (a zero byte, which text never contains): the file is damaged "
            "or not a text table. Remove the byte or export the file again.")


def _undecodable(data: bytes, head: bytes, label: str, max_bytes: int, codec: str) -> tuple[str, str, str]:
    """After the parser found a byte `codec` cannot decode: a file with a byte-order mark is
    damaged; UTF-16 without one was no text after all; UTF-8 gives way to Windows-1252, or
    Latin-1 where Windows-1252 has no character for a byte — (codec, name, warning)."""
    scan = _Scan(_Stream(data, label, max_bytes), codec)
    for mark, mark_codec, name in BYTE_ORDER_MARKS:
        if head.startswith(mark):
            raise DataError(
                f"{label} starts with a {name} byte-order mark but byte {scan.undecodable_byte + 1} is not "
                f"valid {name}: the file is damaged or truncated."
            )
    if codec != "utf-8":
        raise DataError(f"{label} is a binary file, not a text table (CSV, semicolon or tab separated).")
    fallback, name = FALLBACK_ENCODINGS[0] if scan.cp1252_decodes else FALLBACK_ENCODINGS[1]
    warning = (
        f"{label} is not UTF-8 (the first non-UTF-8 byte is on line {scan.undecodable_line}); it was read as "
        f"{name}. Check that accented text looks right, or save the file as UTF-8."
    )
    return fallback, fallback, warning


class _Scan:
    """One pass over a stream: the first byte `codec` cannot decode (its offset and line), and
    whether Windows-1252 decodes every byte."""

    def __init__(self, stream: _Stream, codec: str) -> None:
        self.undecodable_byte: int | None = None
        self.undecodable_line: int | None = None
        self.cp1252_decodes = True
        decoder = codecs.getincrementaldecoder(codec)()
        ascii_compatible = codec.startswith("utf-8")  # an ASCII piece needs no decoding
        lines, offset = _LineCount(), 0
        for chunk in itertools.chain(stream.chunks(), [b""]):  # b"": the end, where a cut character shows
            if self.cp1252_decodes and any(byte in chunk for byte in CP1252_UNDEFINED):
                self.cp1252_decodes = False
            if self.undecodable_byte is None and not (ascii_compatible and chunk.isascii()
                                                      and not decoder.getstate()[0]):
                pending = len(decoder.getstate()[0])
                try:
                    decoder.decode(chunk, final=not chunk)
                except UnicodeDecodeError as error:
                    self.undecodable_byte = offset - pending + error.start
                    self.undecodable_line = lines.line_at(chunk, max(error.start - pending, 0))
            lines.add(chunk)
            offset += len(chunk)


class _LineCount:
    """Line numbers in a stream read in pieces: LF and CRLF files count LFs, CR-only files CRs."""

    def __init__(self) -> None:
        self.lf = self.cr = 0

    def add(self, chunk: bytes) -> None:
        self.lf += chunk.count(b"\n")
        self.cr += chunk.count(b"\r")

    def line_at(self, chunk: bytes, position: int) -> int:
        before = chunk[:position]
        lf, cr = self.lf + before.count(b"\n"), self.cr + before.count(b"\r")
        return (lf if lf or not cr else cr) + 1


def _sniff_lines(head: bytes, codec: str, label: str) -> list[str]:
    """The first non-blank lines of the file's start, each complete (the head may end inside a
    line, or inside a character, both left out)."""
    text = head.decode(codec, errors="ignore")
    text = text.removeprefix("\ufeff")
    pieces = LINE_BREAK.split(text)
    if len(head) == SNIFF_BYTES and len(pieces) > 1:
        pieces = pieces[:-1]  # the head stops inside this line
    elif len(head) == SNIFF_BYTES:
        raise DataError(
            f"{label}: the first line is longer than {SNIFF_BYTES // 1024} KB, so it is no header row "
            "(a file without line breaks, or not a table?)."
        )
    lines = [line for line in pieces if line.strip()][:SNIFF_LINES]
    if not lines:
        raise DataError(f"{label} is empty.")
    return lines


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


# -- the table -----------------------------------------------------------------------------------
def _detect_delimiter(lines: list[str], label: str) -> str:
    """The candidate that splits the header into most columns with the most rows agreeing."""
    scores = {}
    for delimiter in DELIMITER_NAMES:
        try:
            widths = [len(row) for row in csv.reader(lines, delimiter=delimiter)]
        except csv.Error:  # e.g. a quoted field that runs past the lines looked at: not this one
            continue
        if widths and widths[0] >= 2:
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
    names = [name.strip() or _unnamed(k) for k, name in enumerate(header, 1)]
    repeated = [name for name, count in Counter(names).items() if count > 1]
    if repeated:
        where = {name: [str(k) for k, n in enumerate(names, 1) if n == name] for name in repeated}
        listed = "; ".join(f"'{name}' (columns {', '.join(cols)})" for name, cols in where.items())
        raise DataError(f"{label}: column names must be unique, but these repeat: {listed}.")
    return names


def _unnamed(position: int) -> str:
    """A column without a header, until `_without_empty_unnamed` has looked at its cells (no header
    cell can hold a line break, so no real name is ever this)."""
    return f"\n{position}"


def _without_empty_unnamed(frame: pd.DataFrame, label: str, warnings: list[str]) -> pd.DataFrame:
    """Columns without a header: left out with a note when every cell is empty too (a spreadsheet's
    trailing empty column, a delimiter at the end of every line); refused when they hold values,
    which no one could say what they are."""
    unnamed = [(int(name[1:]), name) for name in frame.columns if name.startswith("\n")]
    if not unnamed:
        return frame
    filled = [position for position, name in unnamed if frame[name].notna().any()]
    if filled:
        raise DataError(
            f"{label}: column {', '.join(map(str, filled))} of {frame.shape[1]} has an empty header; every column "
            "needs a name"
            + (" (a delimiter at the end of the header line?)." if filled[-1] == frame.shape[1] else ".")
        )
    positions = ", ".join(str(position) for position, _ in unnamed)
    warnings.append(f"{label}: column {positions} of {frame.shape[1]} has no name and no values (a spreadsheet's "
                    "empty column, or a delimiter at the end of each line) and is left out.")
    return frame.drop(columns=[name for _, name in unnamed])


def _read_frame(data: bytes, label: str, max_bytes: int, codec: str, delimiter: str, decimal: str,
                names: list[str], has_header: bool, max_rows: int) -> pd.DataFrame:
    """pandas' C parser over the stream, stopping one row past `max_rows`; UnicodeDecodeError
    where `codec` cannot decode a byte."""
    eight_bit = not codec.startswith(("utf-16", "utf-32"))  # where a NUL byte is damage, not half a character
    stream = io.BufferedReader(_Stream(data, label, max_bytes, find_nul=eight_bit), CHUNK_BYTES)
    try:
        with python_warnings.catch_warnings():
            # Columns typed differently in different blocks of a long file come back as object
            # columns holding both; `columns.py` types them cell by cell, so the warning says nothing.
            python_warnings.simplefilter("ignore", pd.errors.DtypeWarning)
            return pd.read_csv(
                stream, sep=delimiter, header=0 if has_header else None, names=names, encoding=codec,
                na_values=list(MISSING_TOKENS), keep_default_na=False, skipinitialspace=True, decimal=decimal,
                index_col=False, nrows=max_rows + 1,
            )
    except pd.errors.EmptyDataError:
        raise DataError(f"{label} is empty.") from None
    except pd.errors.ParserError as error:
        raise DataError(_parser_message(str(error), label, len(names))) from None
    except UnicodeDecodeError:
        raise
    except (ValueError, OverflowError, csv.Error) as error:
        raise DataError(f"{label} cannot be read as a table: {error}") from None
    except MemoryError:
        raise DataError(f"{label} does not fit in this machine's memory once parsed; split it or lower "
                        "max_rows.") from None


def _parser_message(error: str, label: str, n_columns: int) -> str:
    match = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", error)
    if match:
        line, seen = match.group(2), match.group(3)
        return (
            f"{label}: line {line} has {seen} fields but the header has {n_columns} "
            "(a delimiter inside an unquoted value, or a broken line?)."
        )
    match = re.search(r"EOF inside string starting at row (\d+)", error)
    if match:
        return (
            f"{label}: a quote (\") opened in data row {match.group(1)} is never closed, so the rest of the file "
            "would be one cell. Close or remove the quote."
        )
    return f"{label} cannot be read as a table: {error.strip()}"


def _check_delimiters(frame: pd.DataFrame, label: str, delimiter: str) -> None:
    """Refuse rows written with another delimiter than the header's. Read with the header's,
    such a row has its cells run together (and the rest padded as missing); the sign is a row
    whose last cell is missing while its cells hold exactly one fewer of another delimiter than
    the header has columns — the row split by that delimiter has the header's width."""
    width = frame.shape[1]
    if width < 2:
        return
    short = frame.iloc[:, -1].isna().to_numpy()
    texts = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c].dtype)]
    if not short.any() or not texts:
        return
    rows = frame.loc[short, texts]
    for other in (d for d in DELIMITER_NAMES if d != delimiter):
        counts = np.zeros(len(rows))
        for column in texts:
            counts += rows[column].astype("str").str.count(re.escape(other)).fillna(0).to_numpy(np.float64)
        mixed = rows.index[counts == width - 1]
        if len(mixed):
            raise DataError(
                f"{label} mixes delimiters: its header uses {DELIMITER_NAMES[delimiter]}s, but {len(mixed)} of its "
                f"{len(frame)} data rows use {DELIMITER_NAMES[other]}s (data row(s) {data_rows(mixed)}); read as they "
                "are, those rows would lose their values. Save the file again with one delimiter."
            )
