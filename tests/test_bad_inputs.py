"""The bad-input corpus: files generated here, each beside one good site, with its outcome asserted
— refused with a message naming the file (and the line, row or column), blocked by the alignment
with such a message, read with a specific warning, or read correctly — through the library call,
the upload check, and the command line (`inspect` and `run`, in-process; a sample also in a real
`python -m fedcore` process). Zero tracebacks: an exception other than DataError fails the test.

Outcomes:
    refused  the file itself cannot be read (DataError from the reader; the upload check refuses it too)
    blocked  it reads, but the sites cannot be combined (an error in the alignment report)
    warned   it reads and trains, with a warning that names what is odd
    read     it reads correctly (what a correct read gives is checked)
"""

from __future__ import annotations

import codecs
import gzip
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from data_adapters import AlignmentReport, inspect_data, load_federation
from application import cli
from application.datasets import check_upload
from fedcore.errors import DataError
from fedcore.store import RunStore

ROOT = Path(__file__).resolve().parent.parent
HEADER = ["age", "sex", "chol", "weight", "temp", "outcome"]
N = 40  # rows of every generated site


def clinic(seed: int, n: int = N, labels: tuple[str, str] = ("0", "1")) -> list[list[str]]:
    """Rows of HEADER: a declared-synthetic clinic (years, mg/dL, kg, °C) whose outcome depends on
    age and cholesterol; outcome alternates, so row k (data row k + 1) has class k % 2."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n):
        outcome = k % 2
        rows.append([str(int(rng.normal(62 if outcome else 52, 8))), "MF"[int(rng.random() < 0.5)],
                     f"{rng.normal(235 if outcome else 200, 30):.1f}", f"{rng.normal(78, 12):.1f}",
                     f"{rng.normal(37.0, 0.4):.1f}", labels[outcome]])
    return rows


def table(rows: list[list[str]], header: list[str] = HEADER, delimiter: str = ",", end: str = "\n",
          encoding: str = "utf-8") -> bytes:
    return end.join(delimiter.join(r) for r in [header, *rows]).__add__(end).encode(encoding)


def changed(seed: int, edits: dict[tuple[int, int], str], **options) -> bytes:
    """clinic(seed) with cells replaced: (row index, column index) -> text."""
    rows = clinic(seed)
    for (r, c), value in edits.items():
        rows[r][c] = value
    return table(rows, **options)


def column(seed: int, index: int, values: Callable[[str], str]) -> bytes:
    """clinic(seed) with one column's every cell rewritten."""
    rows = clinic(seed)
    for row in rows:
        row[index] = values(row[index])
    return table(rows)


def with_nul_late() -> bytes:
    """A long file whose one NUL byte (in a label) lies beyond the first 64 KB."""
    rows = clinic(31, n=6000)
    rows[5000][5] = "1\x00"  # on line 5002, about 110 KB into the file
    data = table(rows)
    assert data.index(b"\x00") > 65536
    return data


def gzip_bomb() -> bytes:
    """Under 0.1 MB packed, 5 MB once decompressed (the case sets max_file_mb=1)."""
    line = b"50,M,200.0,80.0,37.0,1\n"
    return gzip.compress(",".join(HEADER).encode() + b"\n" + line * (5_000_000 // len(line)), 9)


def overlapping() -> bytes:
    """30 of north's 40 rows and 10 of its own."""
    return table(clinic(0)[:30] + clinic(33)[:10])


@dataclass
class Case:
    name: str
    content: bytes
    outcome: str
    expect: tuple[str, ...] = ()  # in the message: refused/blocked the error, warned a warning
    options: dict = field(default_factory=dict)
    check: Callable[[AlignmentReport], None] | None = None  # what a correct read gives
    north: bytes | None = None  # the good site beside it, if not clinic(0)


def rows_read(n: int) -> Callable[[AlignmentReport], None]:
    def check(report: AlignmentReport) -> None:
        assert report.sites[1]["rows"] == n and report.sites[1]["rows_used"] == n
        assert report.class_names == ["0", "1"]
        assert set(report.features) == {"age", "sex", "chol", "weight", "temp"}
    return check


def unit_finding(column: str, conversion: str) -> Callable[[AlignmentReport], None]:
    """Two sites: the check-up's unit factor between them, naming the conversion and no culprit."""
    def check(report: AlignmentReport) -> None:
        assert any(f["feature"] == column and f["kind"] == "unit_pair"
                   and any(conversion in c for pair in f["evidence"]["pairs"] for c in pair["conversions"])
                   for f in report.findings), report.findings
    return check


def category_values(name: str, values: list[str]) -> Callable[[AlignmentReport], None]:
    def check(report: AlignmentReport) -> None:
        assert report.features[name]["values"] == values, report.features[name]
    return check


UTF16 = "UTF-16 little-endian"
CASES = [
    # -- encodings and byte-order marks ----------------------------------------------------------------
    Case("bom_utf8.csv", codecs.BOM_UTF8 + table(clinic(1)), "read", check=rows_read(N)),
    Case("excel_unicode.txt", codecs.BOM_UTF16_LE + table(clinic(2), delimiter="\t", end="\r\n", encoding="utf-16-le"),
         "warned", (f"excel_unicode.txt is not UTF-8 but {UTF16} (with a byte-order mark)",), check=rows_read(N)),
    Case("utf16_be.txt", codecs.BOM_UTF16_BE + table(clinic(3), delimiter="\t", encoding="utf-16-be"), "warned",
         ("UTF-16 big-endian (with a byte-order mark)",), check=rows_read(N)),
    Case("utf16_nobom.txt", table(clinic(4), delimiter="\t", encoding="utf-16-le"), "warned",
         (f"{UTF16} (no byte-order mark; detected)",), check=rows_read(N)),
    Case("utf32.csv", table(clinic(5), encoding="utf-32"), "warned", ("UTF-32 little-endian (with a byte-order mark)",),
         check=rows_read(N)),
    Case("windows.csv", changed(6, {(4, 1): "É"}, encoding="cp1252"), "warned",
         ("windows.csv is not UTF-8 (the first non-UTF-8 byte is on line 6); it was read as Windows-1252",)),
    Case("latin1.csv", changed(7, {(9, 1): "M\x8d"}, encoding="latin-1"), "warned",
         ("latin1.csv is not UTF-8 (the first non-UTF-8 byte is on line 11); it was read as Latin-1",)),
    Case("utf16_cut.txt", (codecs.BOM_UTF16_LE + table(clinic(8), encoding="utf-16-le"))[:-1], "refused",
         ("utf16_cut.txt starts with a UTF-16 little-endian byte-order mark but byte", "damaged or truncated")),
    Case("bom_then_nul.csv", codecs.BOM_UTF8 + with_nul_late(), "refused",
         ("bom_then_nul.csv: line 5002 holds a NUL byte",)),
    # -- delimiters -----------------------------------------------------------------------------------
    Case("semicolons.csv", table([[c.replace(".", ",") for c in r] for r in clinic(9)], delimiter=";"), "warned",
         ("semicolons.csv uses semicolons between columns (detected) and decimal commas",), check=rows_read(N)),
    Case("tabs.tsv", table(clinic(10), delimiter="\t"), "warned", ("tabs.tsv uses tabs between columns",),
         check=rows_read(N)),
    Case("spaces.csv", table(clinic(11), delimiter=" "), "refused",
         ("spaces.csv: the first line has no comma, semicolon or tab",)),
    Case("pipes.csv", table(clinic(12), delimiter="|"), "refused", ("pipes.csv: the first line has no comma",)),
    Case("mixed_line_ends.csv", b"".join(line + (b"\r\n" if k % 3 else b"\n")
                                         for k, line in enumerate(table(clinic(13)).splitlines())), "read",
         check=rows_read(N)),
    Case("half_semicolons.csv", "\n".join([",".join(HEADER)] + [(";" if k % 2 else ",").join(r)
                                                                for k, r in enumerate(clinic(14))]).encode(),
         "refused", ("half_semicolons.csv mixes delimiters: its header uses commas, but 20 of its 40 data rows use "
                     "semicolons (data row(s) 2, 4, 6",)),
    Case("all_semicolons.csv", "\n".join([",".join(HEADER)] + [";".join(r) for r in clinic(15)]).encode(), "refused",
         ("all_semicolons.csv mixes delimiters", "40 of its 40 data rows use semicolons")),
    Case("semicolon_rows_decimal_comma.csv",
         "\n".join([";".join(HEADER)] + [(",".join(r) if k == 7 else ";".join(c.replace(".", ",") for c in r))
                                         for k, r in enumerate(clinic(16))]).encode(), "refused",
         ("semicolon_rows_decimal_comma.csv mixes delimiters: its header uses semicolons, but 1 of its 40 data rows "
          "use commas (data row(s) 8)",)),
    Case("extra_field.csv", changed(17, {(3, 5): "1,9"}), "refused",
         ("extra_field.csv: line 5 has 7 fields but the header has 6",)),
    # -- line ends --------------------------------------------------------------------------------------
    Case("cr_only.csv", table(clinic(18), end="\r"), "read", check=rows_read(N)),
    Case("crlf.csv", table(clinic(19), end="\r\n"), "read", check=rows_read(N)),
    Case("no_final_newline.csv", table(clinic(20))[:-1], "read", check=rows_read(N)),
    Case("blank_lines.csv", table(clinic(21)).replace(b"\n", b"\n\n", 5), "read", check=rows_read(N)),
    # -- cells ------------------------------------------------------------------------------------------
    Case("missing_tokens.csv", changed(22, {(1, 2): "NA", (2, 3): "?", (3, 4): ".", (4, 0): "", (5, 2): "null"}),
         "read", check=lambda r: r.missing_share["missing_tokens"]["chol"] == 2 / N),
    Case("stray_text.csv", changed(23, {(2, 2): "high", (6, 2): "n.a."}), "warned",
         ("stray_text.csv, column 'chol': 2 non-numeric value(s) in a numeric column, treated as missing: data row(s) "
          "3 ('high'), 7 ('n.a.')",)),
    Case("text_column.csv", column(24, 2, lambda v: "high" if float(v) > 215 else "low"), "blocked",
         ("Column 'chol' is numeric at north but text at text_column.csv (e.g. 'high', 'low')",)),
    Case("megabyte_field.csv", changed(25, {(3, 2): '"' + "x" * 1_000_000 + '"'}), "warned",
         ("megabyte_field.csv, column 'chol': 1 non-numeric value(s)", "data row(s) 4 ('xxxxxxxx",
          "…' (1,000,000 characters))")),
    Case("megabyte_header.csv", table(clinic(26), header=["h" * 1_000_000, *HEADER]), "refused",
         ("megabyte_header.csv: the first line is longer than 64 KB",)),
    Case("unclosed_quote.csv", changed(27, {(5, 1): '"M'}), "refused",
         ("unclosed_quote.csv: a quote (\") opened in data row 6 is never closed",)),
    Case("padded_cells.csv", column(28, 1, lambda v: f"  {v} "), "read", check=category_values("sex", ["F", "M"])),
    Case("quoted_decimal_comma.csv", changed(29, {(8, 3): '"81,5"'}), "warned",
         ("quoted_decimal_comma.csv, column 'weight': 1 non-numeric value(s)", "data row(s) 9 ('81,5')")),
    Case("empty_column.csv", column(30, 4, lambda v: ""), "warned",
         ("empty_column.csv: column 'temp' has no values at site 'empty_column'",)),
    # -- numbers ----------------------------------------------------------------------------------------
    Case("inf.csv", changed(32, {(2, 2): "inf"}), "blocked",
         ("inf.csv, column 'chol': infinite value(s) at data row(s) 3",)),
    Case("minus_infinity.csv", changed(34, {(11, 3): "-Infinity"}), "blocked",
         ("minus_infinity.csv, column 'weight': infinite value(s) at data row(s) 12",)),
    Case("overflow_1e309.csv", changed(35, {(0, 2): "1e309"}), "blocked",
         ("overflow_1e309.csv, column 'chol': infinite value(s) at data row(s) 1",)),
    Case("near_max_1e308.csv", changed(36, {(5, 2): "1e308", (6, 2): "1.7e308"}), "blocked",
         ("near_max_1e308.csv, column 'chol': value(s) beyond ±3.4e38 at data row(s) 6 ('1e+308'), 7 ('1.7e+308')",)),
    Case("beyond_float32.csv", changed(37, {(9, 3): "5e39"}), "blocked",
         ("beyond_float32.csv, column 'weight': value(s) beyond ±3.4e38 at data row(s) 10 ('5e+39')",)),
    Case("just_below_float32.csv", changed(38, {(9, 3): "3e38"}), "warned",
         ("just_below_float32.csv, column 'weight': value(s) more than 1000 interquartile ranges from the site's "
          "median", "data row(s) 10 ('3e+38')")),
    Case("sentinel_99999.csv", changed(39, {(14, 2): "99999"}), "warned",
         ("sentinel_99999.csv, column 'chol': value(s) more than 1000 interquartile ranges", "data row(s) 15 ('99999')")),
    Case("squares_overflow.csv", changed(40, {(3, 3): "2e19"}), "blocked",
         ("squares_overflow.csv, column 'weight': value(s) beyond ±1.8e19 at data row(s) 4 ('2e+19')",),
         options={"standardization": "none"}),
    Case("huge_integer.csv", changed(41, {(20, 2): "123456789012345678901234567890"}), "warned",
         ("huge_integer.csv, column 'chol': value(s) more than 1000 interquartile ranges", "data row(s) 21")),
    Case("nan_token.csv", changed(42, {(3, 2): "NaN", (4, 2): "nan"}), "read",
         check=lambda r: r.missing_share["nan_token"]["chol"] == 2 / N),
    # -- target labels ----------------------------------------------------------------------------------
    Case("yes_no.csv", table(clinic(43, labels=("no", "yes"))), "blocked",
         ("The target 'outcome' mixes number codes and words (north.csv: '0', '1'; yes_no.csv: 'no', 'yes')",)),
    Case("word_among_numbers.csv", changed(44, {(7, 5): "unknown"}), "blocked",
         ("mixes number codes and words", "word_among_numbers.csv: '0', '1', 'unknown'")),
    Case("inf_label.csv", changed(45, {(7, 5): "inf"}), "blocked",
         ("inf_label.csv: the target 'outcome' holds an infinite number at data row(s) 8 ('inf')",)),
    Case("bell_label.csv", changed(46, {(12, 5): "1\x07"}), "blocked",
         ("bell_label.csv: the target 'outcome' holds a control character", "data row(s) 13 ('1\\x07')")),
    Case("nul_label_late.csv", with_nul_late(), "refused", ("nul_label_late.csv: line 5002 holds a NUL byte",)),
    Case("nul_label_early.csv", changed(47, {(30, 5): "1\x00"}), "refused",
         ("nul_label_early.csv: line 32 holds a NUL byte",)),
    Case("extra_class.csv", changed(48, {(4, 5): "2", (8, 5): "2"}), "warned",
         ("Class '2' of the target 'outcome' is only at extra_class.csv (site 'extra_class', 2 row(s): data row(s) 5, 9)",)),
    Case("own_coding.csv", table(clinic(49, labels=("2", "3"))), "blocked",
         ("own_coding.csv (site 'own_coding') shares no class of the target 'outcome' with the other sites: it has "
          "'2', '3', they have '0', '1'",)),
    Case("single_class.csv", table([r[:5] + ["1"] for r in clinic(50)]), "warned",
         ("Site 'single_class' (single_class.csv) has a single class, '1'",)),
    Case("empty_target.csv", table([r[:5] + [""] for r in clinic(51)]), "blocked",
         ("empty_target.csv: the target column 'outcome' is empty at site 'empty_target'",)),
    Case("no_target.csv", table([r[:5] + [r[5]] for r in clinic(52)], header=HEADER[:5] + ["Outcome"]), "blocked",
         ("no_target.csv (site 'no_target') has no target column 'outcome'; did you mean 'Outcome'?",)),
    Case("sixty_classes.csv", table([r[:5] + [str(k)] for k, r in enumerate(clinic(53, n=60))]), "blocked",
         ("The target 'outcome' has 60 different values",)),
    Case("gaps_in_target.csv", changed(54, {(2, 5): "", (17, 5): "NA"}), "warned",
         ("gaps_in_target.csv: 2 row(s) have no value in the target 'outcome' and are left out: data row(s) 3, 18",)),
    Case("spelled_twice.csv", table(clinic(55, labels=("No", "yes"))), "blocked",
         ("The target 'outcome' spells one class several ways: 'No' at spelled_twice.csv; 'no' at north.csv",),
         north=table(clinic(0, labels=("no", "yes")))),
    Case("words_agree.csv", table(clinic(70, labels=(" no", "yes "))), "read", north=table(clinic(0, labels=("no", "yes"))),
         check=lambda r: r.class_names == ["no", "yes"] and r.sites[1]["class_counts"] == {"no": 20, "yes": 20}),
    # -- duplicate sites --------------------------------------------------------------------------------
    Case("copy_of_north.csv", table(clinic(0)), "blocked",
         ("north.csv (site 'north') and copy_of_north.csv (site 'copy_of_north') hold the same 40 rows",)),
    Case("shuffled_copy.csv", table(clinic(0)[::-1]), "blocked", ("hold the same 40 rows",)),
    Case("reformatted_copy.csv", table([[r[0] + ".0", *r[1:]] for r in clinic(0)]), "blocked",
         ("hold the same 40 rows",)),
    Case("overlapping.csv", overlapping(), "warned", ("30 of the 40 rows of", "are also rows of")),
    # -- unit-like differences (two sites) ------------------------------------------------------------------
    Case("chol_mmol.csv", column(56, 2, lambda v: f"{float(v) / 38.67:.2f}"), "read",
         check=unit_finding("chol", "cholesterol mg/dL ↔ mmol/L")),
    Case("weight_lb.csv", column(57, 3, lambda v: f"{float(v) * 2.2046:.1f}"), "read",
         check=unit_finding("weight", "pounds ↔ kilograms")),
    Case("temp_fahrenheit.csv", column(58, 4, lambda v: f"{float(v) * 1.8 + 32:.1f}"), "read",
         check=unit_finding("temp", "°F ↔ °C")),
    Case("age_months.csv", column(59, 0, lambda v: str(int(v) * 12)), "read", check=unit_finding("age", "years ↔ months")),
    # -- not text tables, and limits ------------------------------------------------------------------------
    Case("workbook.csv", b"PK\x03\x04\x14\x00\x06\x00[Content_Types].xml" + bytes(200), "refused",
         ("workbook.csv is a zip archive or an Excel workbook, not a text table; save it as CSV.",)),
    Case("old_workbook.csv", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(500), "refused",
         ("old_workbook.csv is an Excel 97-2003 workbook",)),
    Case("picture.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64), "refused",
         ("picture.csv is a binary file, not a text table",)),
    Case("web_page.csv", b"<!DOCTYPE html>\n<html><body><p>Sign in</p></body></html>\n", "refused",
         ("web_page.csv: the first line has no comma, semicolon or tab",)),
    Case("packed.csv.gz", gzip.compress(table(clinic(60))), "read", check=rows_read(N)),
    Case("cut_gzip.csv.gz", gzip.compress(table(clinic(61)))[:-30], "refused",
         ("cut_gzip.csv.gz looks gzip-compressed but cannot be decompressed (damaged or truncated)",)),
    Case("bomb.csv.gz", gzip_bomb(), "refused", ("bomb.csv.gz is above the limit of 1 MB once decompressed",),
         options={"max_file_mb": 1}),
    Case("too_big.csv", table(clinic(62, n=60000)), "refused", ("too_big.csv is 1.", "above the limit of 1 MB"),
         options={"max_file_mb": 1}),
    Case("too_many_rows.csv", table(clinic(63, n=150)), "refused",
         ("too_many_rows.csv has more than 100 data rows, the limit (raise max_rows to read it)",),
         options={"max_rows": 100}),
    Case("empty.csv", b"", "refused", ("empty.csv is empty.",)),
    Case("whitespace.csv", b" \n\t\n \r\n", "refused", ("whitespace.csv is empty.",)),
    Case("header_only.csv", (",".join(HEADER) + "\n").encode(), "refused",
         ("header_only.csv has a header row but no data rows.",)),
    Case("repeated_column.csv", table(clinic(64), header=["age", "sex", "chol", "age", "temp", "outcome"]), "refused",
         ("repeated_column.csv: column names must be unique, but these repeat: 'age' (columns 1, 4).",)),
    Case("unnamed_column.csv", table(clinic(65), header=["age", "sex", "", "weight", "temp", "outcome"]), "refused",
         ("unnamed_column.csv: column 3 of 6 has an empty header",)),
    Case("tiny.csv", table(clinic(66, n=6)), "blocked", ("tiny.csv: site 'tiny' has 6 usable rows; a site needs at least 20",)),
    Case("other_columns.csv", table([[r[0], r[5]] for r in clinic(67)], header=["years", "outcome"]), "blocked",
         ("No feature column is present at every site",)),
    Case("identifier.csv", table([[f"P{k:04d}", *r] for k, r in enumerate(clinic(68, n=60))], header=["patient", *HEADER]),
         "warned", ("'patient' (only at identifier)",), check=lambda r: r.columns_in_one == {"patient": "identifier"}),
    Case("renamed_column.csv", table(clinic(69), header=["Age", *HEADER[1:]]), "warned",
         ("These look like one column spelled differently at different sites: 'Age' (renamed_column), 'age' (north)",)),
]


def reference(tmp_path: Path, case: Case) -> dict:
    north = tmp_path / "north.csv"
    north.write_bytes(case.north or table(clinic(0)))
    path = tmp_path / case.name
    path.write_bytes(case.content)
    return {"source": "csv", "files": [str(north), str(path)], "target": "outcome", **case.options}


def test_the_corpus_is_large_and_its_names_unique():
    assert len(CASES) >= 60
    assert len({case.name for case in CASES}) == len(CASES)
    assert {case.outcome for case in CASES} == {"refused", "blocked", "warned", "read"}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_bad_file_gets_its_outcome(tmp_path, case, capsys):
    ref = reference(tmp_path, case)
    # The library call: inspect_data raises DataError (refused) or returns the report; nothing else.
    try:
        report = inspect_data(ref)
    except DataError as error:
        assert case.outcome == "refused", f"refused, expected {case.outcome}: {error}"
        message = str(error)
        assert case.name in message and all(part in message for part in case.expect), message
        report = None
    else:
        assert case.outcome != "refused", f"read, expected a refusal: {report.errors or report.warnings}"
        messages = report.errors if case.outcome == "blocked" else report.warnings
        assert report.ok == (case.outcome != "blocked"), report.errors
        if case.expect:
            assert any(all(part in m for part in case.expect) for m in messages), messages
        if case.outcome == "read":
            assert not [w for w in report.warnings if case.name in w], report.warnings
        if case.check:
            case.check(report)
        json.dumps(report.to_dict())  # the dashboard and `inspect --json` store it as it is
        if report.ok:
            federation = load_federation(ref)
            assert all(np.isfinite(s.x_train.numpy()).all() and np.isfinite(s.x_test.numpy()).all()
                       for s in federation.sites)
            assert len(federation.class_names) == len(report.class_names)
    # The upload check refuses exactly the files the reader refuses, with the same message.
    if not case.options:
        upload = check_upload(case.name, case.content)
        assert upload.ok == (case.outcome != "refused"), upload.error
        if not upload.ok:
            assert upload.error == message
    # The command line: inspect exits 2 with the message for refused or blocked files, 0 otherwise ...
    data = ["--data", "csv:" + ",".join(ref["files"]) + "".join(f",{k}={v}" for k, v in case.options.items()),
            "--target", "outcome"]
    code = cli.main(["inspect", *data])
    out, err = capsys.readouterr()
    assert code == (cli.EXIT_BAD_INPUT if case.outcome in ("refused", "blocked") else 0), out + err
    assert "Traceback" not in out + err
    if case.expect and case.outcome in ("refused", "blocked"):
        assert all(part in out + err for part in case.expect), out + err
    # ... and run creates no run for them, and trains the others.
    store = tmp_path / "runs"
    code = cli.main(["run", "-a", "fedavg", *data, "--rounds", "1", "--quiet", "--store", str(store)])
    out, err = capsys.readouterr()
    runs = RunStore(store).runs()
    if case.outcome in ("refused", "blocked"):
        assert code == cli.EXIT_BAD_INPUT and not runs, out + err
    else:
        assert code == 0 and [r.status.state for r in runs] == ["done"], out + err


# One case of each outcome through a real `python -m fedcore` process: exit code, message, no
# traceback (the first two gave a csv module traceback and exit 1 before).
SAMPLE = ("cr_only.csv", "megabyte_field.csv", "nul_label_late.csv", "yes_no.csv")


@pytest.mark.parametrize("name", SAMPLE)
def test_the_command_line_process_exits_with_a_message_not_a_traceback(tmp_path, name):
    case = next(case for case in CASES if case.name == name)
    ref = reference(tmp_path, case)
    done = subprocess.run([sys.executable, "-m", "fedcore", "inspect", "--data", "csv:" + ",".join(ref["files"]),
                           "--target", "outcome"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == (2 if case.outcome in ("refused", "blocked") else 0), done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    if case.outcome in ("refused", "blocked"):
        assert all(part in done.stdout + done.stderr for part in case.expect), done.stdout + done.stderr
