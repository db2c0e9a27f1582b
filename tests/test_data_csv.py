"""Per-site CSV files: alignment report, kinds, encoding, preprocessing — and a specific message
for every kind of bad input (written into tmp_path)."""

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

from data_adapters import inspect_data, load_federation
from data_adapters.tables.text_tables import parse_text_table
from application.cli import main
from fedcore.errors import DataError
from fedcore.store import RunStore

HEADER = "age,sex,chol,smoker,outcome"


def rows(n=30, seed=0, smoker=("no", "yes")):
    """Lines of a small clinic table whose outcome depends on age and cholesterol."""
    rng = np.random.default_rng(seed)
    lines = []
    for k in range(n):
        outcome = k % 2
        age = int(rng.normal(60 if outcome else 50, 8))
        chol = round(rng.normal(240 if outcome else 200, 25), 1)
        lines.append(f"{age},{'MF'[k % 3 == 0]},{chol},{smoker[k % len(smoker)]},{outcome}")
    return lines


def write(folder, name, lines, header=HEADER, encoding="utf-8"):
    path = folder / name
    path.write_bytes(("\n".join([header, *lines]) + "\n").encode(encoding))
    return str(path)


def ref(*files, **options):
    return {"source": "csv", "files": list(files), "target": "outcome", **options}


@pytest.fixture
def two_sites(tmp_path):
    return write(tmp_path, "north.csv", rows(30, 1)), write(tmp_path, "south.csv", rows(40, 2))


# -- the normal path -----------------------------------------------------------------------------
def test_two_sites_align_into_a_federation(two_sites):
    report = inspect_data(ref(*two_sites))
    assert report.ok and report.class_names == ["0", "1"]
    assert [s["site"] for s in report.sites] == ["north", "south"]
    assert [s["rows"] for s in report.sites] == [30, 40]
    assert report.sites[0]["class_counts"] == {"0": 15, "1": 15}
    assert report.columns_in_all == ["age", "sex", "chol", "smoker"]
    kinds = {name: f["kind"] for name, f in report.features.items()}
    assert kinds == {"age": "continuous", "sex": "binary", "chol": "continuous", "smoker": "binary"}
    assert report.features["sex"] == {"kind": "binary", "kind_from": "inferred", "values": ["F", "M"]}
    json.dumps(report.to_dict())  # the dashboard stores it as it is
    text = report.to_text()
    assert "Alignment of 2 sites" in text and "north.csv" in text and "Errors: none" in text

    federation = load_federation(ref(*two_sites))
    assert federation.site_names == ["north", "south"]
    assert federation.feature_names == ["age", "sex", "chol", "smoker"]
    assert federation.feature_kinds == ["continuous", "binary", "continuous", "binary"]
    assert [s.n_train + s.n_test for s in federation.sites] == [30, 40]
    assert set(federation.sites[0].x_train[:, 1].tolist()) <= {0.0, 1.0}  # F -> 0, M -> 1


def test_categories_are_one_hot_over_the_union_of_all_sites(tmp_path):
    north = write(tmp_path, "north.csv", rows(30, 1, smoker=("never", "former")))
    south = write(tmp_path, "south.csv", rows(30, 2, smoker=("never", "current", "former")))
    report = inspect_data(ref(north, south))
    assert report.features["smoker"]["values"] == ["current", "former", "never"]
    assert report.category_differences == {
        "smoker": {"north": ["former", "never"], "south": ["current", "former", "never"]}
    }
    federation = load_federation(ref(north, south))
    assert federation.feature_names[-3:] == ["smoker=current", "smoker=former", "smoker=never"]
    north_site = federation.sites[0]
    assert north_site.x_train[:, -3].sum() == 0  # north never says 'current'
    assert (north_site.x_train[:, -3:].sum(1) == 1).all()


def test_kinds_can_be_given_and_are_checked(two_sites):
    federation = load_federation(ref(*two_sites, kinds={"age": "categorical"}))
    ages = [k for k, name in zip(federation.feature_kinds, federation.feature_names) if name.startswith("age=")]
    assert len(ages) > 10 and set(ages) == {"categorical"}
    report = inspect_data(ref(*two_sites, kinds={"age": "categorical"}))
    assert report.features["age"]["kind_from"] == "given" and "(* kind set by you, not inferred)" in report.to_text()
    bad = inspect_data(ref(*two_sites, kinds={"chol": "binary", "sex": "continuous", "weight": "binary"}))
    errors = "\n".join(bad.errors)
    assert "Column 'chol' cannot be binary: it has" in errors
    assert "Column 'sex' holds text ('F', 'M'), so it cannot be continuous." in errors
    assert "Kinds are given for 'weight', which are not feature columns" in errors


def test_standardisation_is_fitted_on_each_sites_training_rows(two_sites):
    federation = load_federation(ref(*two_sites), seed=3)
    for site in federation.sites:
        age = site.x_train[:, 0].double()
        assert abs(float(age.mean())) < 1e-6 and abs(float(age.std(unbiased=False)) - 1) < 1e-6
        assert abs(float(site.x_test[:, 0].double().mean())) > 1e-6  # hold-out statistics were not used
    assert "fitted on each site's training rows" in federation.preprocessing["standardization"]


def test_missing_values_are_encoded_and_indicated(tmp_path):
    lines = rows(30, 1)
    lines[2] = "55,M,,yes,1"  # chol missing
    lines[5] = "48,,210.0,no,0"  # sex missing
    north = write(tmp_path, "north.csv", lines)
    south = write(tmp_path, "south.csv", rows(30, 2))
    assert len(load_federation(ref(north, south)).feature_names) == 4  # indicators only when asked
    federation = load_federation(ref(north, south, missing_indicators=True))
    assert federation.feature_names == ["age", "sex", "chol", "smoker", "sex (missing)", "chol (missing)"]
    north_site = federation.sites[0]
    x = np.concatenate([north_site.x_train.numpy(), north_site.x_test.numpy()])
    assert x[:, 4].sum() == 1 and x[:, 5].sum() == 1  # one gap each, only where they are
    assert x[x[:, 4] == 1, 1].tolist() == [0.5]  # missing binary -> 0.5
    assert x[x[:, 5] == 1, 2].tolist() == [0.0]  # missing continuous -> 0 (the site's mean)
    assert federation.sites[1].x_train[:, 4:].sum() == 0


def test_one_file_with_a_site_column(tmp_path):
    lines = [f"{site},{line}" for site, line in zip(["b", "a"] * 30, rows(60, 4))]
    lines[6] = lines[6].split(",", 1)[0] + ",high,M,200,no,1"  # data row 7, site b
    path = write(tmp_path, "all.csv", lines, header="clinic," + HEADER)
    report = inspect_data(ref(path, site_column="clinic"))
    assert [s["site"] for s in report.sites] == ["a", "b"]
    assert "all.csv, column 'age': 1 non-numeric value(s) in a numeric column, treated as missing: " \
           "data row(s) 7 ('high')." in report.warnings
    with pytest.raises(DataError, match="all.csv has no site column 'Clinik'; did you mean 'clinic'"):
        inspect_data(ref(path, site_column="Clinik"))


def test_site_names_can_be_given_and_must_be_unique(tmp_path, two_sites):
    federation = load_federation(ref(*two_sites, site_names=["North Clinic", "South Clinic"]))
    assert federation.site_names == ["North Clinic", "South Clinic"]
    (tmp_path / "other").mkdir()
    copy = write(tmp_path / "other", "north.csv", rows(30, 5))
    with pytest.raises(DataError, match="Two files give the site name 'north'"):
        inspect_data(ref(two_sites[0], copy))


@pytest.mark.parametrize("content, positions", [
    (b"age,sex,outcome,\n1,M,0,\n2,F,1,\n", "column 4 of 4"),  # a spreadsheet's trailing empty column
    (b"age;;sex;outcome;\n1;;M;0;\n2;;F;1;\n", "column 2, 5 of 5"),
])
def test_a_column_without_name_or_values_is_left_out_with_a_note(content, positions):
    table = parse_text_table(content, "export.csv", 10_000)
    assert list(table.frame.columns) == ["age", "sex", "outcome"] and table.frame["sex"].tolist() == ["M", "F"]
    assert any(w.startswith(f"export.csv: {positions} has no name and no values") for w in table.warnings), table.warnings


def test_the_same_parser_reads_bytes_of_an_upload():
    table = parse_text_table("\n".join([HEADER, *rows(3)]).encode(), "upload.csv", 10_000)
    assert list(table.frame.columns) == HEADER.split(",") and len(table.frame) == 3


# -- bad files: refused with the file's name ------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "a.csv is empty."),
        (b"\n \n", "a.csv is empty."),
        (HEADER.encode() + b"\n", "a.csv has a header row but no data rows."),
        (b"PK\x03\x04rest-of-a-workbook", "a.csv is a zip archive or an Excel workbook, not a text table; save it as CSV."),
        (b"age\x00sex\x00", "a.csv is a binary file"),
        (b"age sex outcome\n1 2 3\n", "a.csv: the first line has no comma, semicolon or tab"),
        (b"age,sex,age,outcome\n1,M,2,0\n", "a.csv: column names must be unique, but these repeat: 'age' (columns 1, 3)."),
        (b"age,,chol,outcome\n1,M,2,0\n", "a.csv: column 2 of 4 has an empty header; every column needs a name."),
        (b"age,sex,outcome,\n1,M,0,7\n", "a.csv: column 4 of 4 has an empty header; every column needs a name (a delimiter at the end"),
        (b"age,sex,chol,outcome\n1,M,2,0\n1,F,3,1\n1,F,3,1,9\n", "a.csv: line 4 has 5 fields but the header has 4"),
        (b"\x1f\x8b\x08\x00broken", "a.csv looks gzip-compressed but cannot be decompressed"),
    ],
)
def test_unreadable_files_get_a_specific_message(tmp_path, two_sites, content, message):
    bad = tmp_path / "a.csv"
    bad.write_bytes(content)
    with pytest.raises(DataError) as error:
        inspect_data(ref(two_sites[0], str(bad)))
    assert message in str(error.value)


def test_a_file_above_the_size_limit_is_refused_before_reading(tmp_path, two_sites):
    big = write(tmp_path, "big.csv", rows(2000, 3))
    with pytest.raises(DataError, match=r"big.csv is 0.0\d+ MB, above the limit of 0.01 MB \(raise max_file_mb"):
        inspect_data(ref(two_sites[0], big, max_file_mb=0.01))
    packed = tmp_path / "big.csv.gz"
    packed.write_bytes(gzip.compress((HEADER + "\n" + "\n".join(rows(2000, 3))).encode()))
    with pytest.raises(DataError, match="big.csv.gz is above the limit of 0.03 MB once decompressed"):
        inspect_data(ref(two_sites[0], str(packed), max_file_mb=0.03))


# -- files that read but do not combine: listed in the report, refused when loading ---------------
def assert_blocked(reference, message):
    report = inspect_data(reference)
    assert not report.ok and any(message in e for e in report.errors), report.errors
    assert message in report.to_text()
    with pytest.raises(DataError, match="cannot be combined") as error:
        load_federation(reference)
    assert message in str(error.value)


def test_no_column_common_to_all_sites(tmp_path, two_sites):
    other = write(tmp_path, "west.csv", ["1,2,0"] * 25, header="weight,height,outcome")
    assert_blocked(ref(two_sites[0], other), "No feature column is present at every site: north.csv has 'age', 'sex'")


def test_target_missing_at_a_site(tmp_path, two_sites):
    renamed = write(tmp_path, "west.csv", rows(30, 3), header="age,sex,chol,smoker,Outcome")
    assert_blocked(ref(two_sites[0], renamed), "west.csv (site 'west') has no target column 'outcome'; did you mean 'Outcome'?")


def test_infinite_values(tmp_path, two_sites):
    lines = rows(30, 3)
    lines[2] = "50,M,inf,no,0"
    assert_blocked(ref(two_sites[0], write(tmp_path, "west.csv", lines)),
                   "west.csv, column 'chol': infinite value(s) at data row(s) 3; replace them")


def test_too_few_rows(tmp_path, two_sites):
    assert_blocked(ref(two_sites[0], write(tmp_path, "tiny.csv", rows(5, 3))),
                   "tiny.csv: site 'tiny' has 5 usable rows; a site needs at least 20 (min_rows).")
    assert load_federation(ref(two_sites[0], write(tmp_path, "tiny.csv", rows(5, 3)), min_rows=4)).sites[1].n_train > 0


def test_numeric_at_one_site_text_at_another(tmp_path, two_sites):
    lines = [f"{a},{s},{'high' if k % 2 else 'low'},{m},{o}"
             for k, (a, s, _, m, o) in enumerate(line.split(",") for line in rows(30, 3))]
    assert_blocked(ref(two_sites[0], write(tmp_path, "west.csv", lines)),
                   "Column 'chol' is numeric at north but text at west.csv (e.g. 'high', 'low')")


def test_a_text_identifier_column(tmp_path):
    files = [write(tmp_path, f"{name}.csv", [f"P{seed}{k:03d},{line}" for k, line in enumerate(rows(30, seed))],
                   header="patient," + HEADER) for seed, name in enumerate(["north", "south"])]
    assert_blocked(ref(*files), "Column 'patient' is text with 60 different values")
    assert load_federation(ref(*files, exclude=["patient"])).feature_names == ["age", "sex", "chol", "smoker"]


# -- files that need care but still load: warnings ------------------------------------------------
def test_not_utf8_is_read_as_windows_1252_with_a_warning(tmp_path, two_sites):
    lines = rows(30, 3, smoker=("José", "Müller"))
    path = write(tmp_path, "west.csv", lines, encoding="cp1252")
    report = inspect_data(ref(two_sites[1], path, exclude=["smoker"]))
    assert ("west.csv is not UTF-8 (the first non-UTF-8 byte is on line 2); it was read as Windows-1252 (cp1252). "
            "Check that accented text looks right, or save the file as UTF-8.") in report.warnings
    assert report.sites[1]["encoding"] == "cp1252"
    accented = inspect_data(ref(path, write(tmp_path, "east.csv", rows(30, 4, smoker=("José", "Müller")))))
    assert accented.features["smoker"]["values"] == ["José", "Müller"]  # both files agree once decoded


def excel_unicode_text(lines, header=HEADER, encoding="utf-16"):
    """What Excel's 'Unicode Text' export writes: tab-separated, CRLF, UTF-16 ('utf-16' adds the
    little-endian byte-order mark; 'utf-16-le' / 'utf-16-be' write none)."""
    text = "".join(line.replace(",", "\t") + "\r\n" for line in [header, *lines])
    return text.encode(encoding)


@pytest.mark.parametrize(
    ("encoding", "name", "codec"),
    [
        ("utf-16", "UTF-16 little-endian (with a byte-order mark)", "utf-16"),
        ("utf-16-be-bom", "UTF-16 big-endian (with a byte-order mark)", "utf-16"),
        ("utf-16-le", "UTF-16 little-endian (no byte-order mark; detected)", "utf-16-le"),
        ("utf-16-be", "UTF-16 big-endian (no byte-order mark; detected)", "utf-16-be"),
    ],
)
def test_utf16_unicode_text_exports_are_read_with_a_warning(tmp_path, two_sites, encoding, name, codec):
    lines = rows(30, 3, smoker=("José", "Müller"))
    data = (b"\xfe\xff" + excel_unicode_text(lines, encoding="utf-16-be") if encoding == "utf-16-be-bom"
            else excel_unicode_text(lines, encoding=encoding))
    (tmp_path / "west.txt").write_bytes(data)
    report = inspect_data(ref(two_sites[0], str(tmp_path / "west.txt")))
    assert report.ok, report.errors
    assert (f"west.txt is not UTF-8 but {name}; it was read as such. Check that the columns look right, "
            "or save the file as CSV UTF-8.") in report.warnings
    assert report.sites[1]["encoding"] == codec and report.sites[1]["delimiter"] == "\t"
    assert report.sites[1]["rows"] == 30
    assert report.features["smoker"]["values"] == ["José", "Müller", "no", "yes"]  # decoded, not mojibake


def test_a_utf16_file_cut_in_the_middle_of_a_character_is_called_damaged():
    data = excel_unicode_text(rows(3))[:-1]
    message = (f"a.txt starts with a UTF-16 little-endian byte-order mark but byte {len(data)} is not valid "
               "UTF-16 little-endian: the file is damaged")
    with pytest.raises(DataError, match=re.escape(message)):
        parse_text_table(data, "a.txt", 10_000)


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x08\x00\x00\x00\x08\x08\x00\x00\x00\x00"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (PNG, "scan.csv is a binary file, not a text table"),
        # NUL in every other byte but not text: little-endian 16-bit numbers are no UTF-16 table.
        (np.arange(1, 200, dtype="<u2").tobytes(), "scan.csv is a binary file, not a text table"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(64), "scan.csv is an Excel 97-2003 workbook (.xls)"),
        (b"PK\x03\x04\x14\x00\x06\x00[Content_Types].xml", "scan.csv is a zip archive or an Excel workbook"),
    ],
    ids=["png", "16-bit numbers", "xls", "xlsx"],
)
def test_binary_files_are_still_refused_as_binary(data, message):
    with pytest.raises(DataError, match=re.escape(message)):
        parse_text_table(data, "scan.csv", 10_000)


@pytest.mark.parametrize(
    ("data", "name", "value"),
    [
        # é is 0xE9 in Windows-1252: not UTF-8, read as Windows-1252.
        ("id,city,outcome\n1,Orléans,0\n2,Genève,1\n".encode("cp1252"), "Windows-1252 (cp1252)",
         "Orléans"),
        # 0x8D has no character in Windows-1252, so Latin-1 (which decodes every byte) reads it.
        (b"id,city,outcome\n1,Orl\xe9ans,0\n2,Gen\x8dve,1\n", "Latin-1 (ISO-8859-1)", "Orléans"),
    ],
    ids=["cp1252", "latin-1"],
)
def test_8_bit_files_fall_back_to_windows_1252_then_latin_1(data, name, value):
    table = parse_text_table(data, "towns.csv", 10_000)
    assert table.warnings == [
        f"towns.csv is not UTF-8 (the first non-UTF-8 byte is on line 2); it was read as {name}. "
        "Check that accented text looks right, or save the file as UTF-8."
    ]
    assert table.frame["city"].iloc[0] == value


def test_semicolons_and_decimal_commas_are_detected(tmp_path, two_sites):
    lines = [";".join(line.split(",")).replace(".", ",") for line in rows(30, 3)]
    path = write(tmp_path, "west.csv", lines, header=HEADER.replace(",", ";"))
    report = inspect_data(ref(two_sites[0], path))
    assert report.ok and report.sites[1]["delimiter"] == ";"
    assert "west.csv uses semicolons between columns (detected) and decimal commas, read as decimal points." in report.warnings
    assert report.features["chol"]["kind"] == "continuous"
    tabs = write(tmp_path, "east.csv", ["\t".join(line.split(",")) for line in rows(30, 4)], header=HEADER.replace(",", "\t"))
    assert inspect_data(ref(two_sites[0], tabs)).sites[1]["delimiter"] == "\t"


def test_a_site_with_one_class_takes_part_with_a_warning(tmp_path, two_sites):
    lines = [line[:-1] + "1" for line in rows(30, 3)]
    federation = load_federation(ref(two_sites[0], write(tmp_path, "west.csv", lines)))
    assert federation.site_names == ["north", "west"]
    assert any(w.startswith("Site 'west' (west.csv) has a single class, '1'; it still takes part") for w in federation.warnings)


def test_a_few_non_numeric_cells_are_reported_by_row_and_treated_as_missing(tmp_path, two_sites):
    lines = rows(30, 3)
    lines[2] = "50,M,high,no,0"
    lines[6] = "51,F,n.a.,yes,1"
    report = inspect_data(ref(two_sites[0], write(tmp_path, "west.csv", lines)))
    assert report.ok
    assert ("west.csv, column 'chol': 2 non-numeric value(s) in a numeric column, treated as missing: "
            "data row(s) 3 ('high'), 7 ('n.a.').") in report.warnings
    assert report.missing_share["west"]["chol"] == round(2 / 30, 4)


def test_empty_columns_and_rows_without_a_target(tmp_path, two_sites):
    header = HEADER + ",notes"
    north = write(tmp_path, "north.csv", [line + "," for line in rows(30, 1)], header=header)
    lines = [line + ",ok" for line in rows(30, 3)]
    lines = [",".join([*line.split(",")[:2], "", *line.split(",")[3:]]) for line in lines]  # chol empty
    lines[4] = lines[4].rsplit(",", 2)[0] + ",,ok"  # no outcome on data row 5
    west = write(tmp_path, "west.csv", lines, header=header)
    report = inspect_data(ref(north, west))
    assert "west.csv: column 'chol' has no values at site 'west'; it is encoded as missing there " \
           "(consider excluding it)." in report.warnings
    assert "west.csv: 1 row(s) have no value in the target 'outcome' and are left out: data row(s) 5." in report.warnings
    assert report.sites[1]["rows_used"] == 29
    federation = load_federation(ref(north, west, exclude=["notes"]))
    assert "notes" not in federation.feature_names
    all_empty = [line + "," for line in rows(30, 3)]
    report = inspect_data(ref(north, write(tmp_path, "east.csv", all_empty, header=header)))
    assert "Column 'notes' is empty at every site and is left out." in report.warnings
    assert "notes" not in report.features


def test_columns_spelled_differently_are_pointed_out(tmp_path, two_sites):
    west = write(tmp_path, "west.csv", rows(30, 3), header="Age,sex,chol,smoker,outcome")
    report = inspect_data(ref(two_sites[0], west))
    assert report.columns_in_one == {"Age": "west", "age": "north"}
    assert any("'Age' (west), 'age' (north)" in w for w in report.warnings)


def test_a_unit_difference_is_named_with_its_conversion(tmp_path):
    files = [write(tmp_path, f"s{k}.csv", rows(40, k)) for k in range(3)]
    mmol = [",".join([a, s, str(round(float(c) / 38.67, 2)), m, o]) for a, s, c, m, o in
            (line.split(",") for line in rows(40, 9))]
    files.append(write(tmp_path, "s3.csv", mmol))
    findings = inspect_data(ref(*files)).findings
    assert [(f["feature"], f["site"], f["kind"]) for f in findings] == [("chol", "s3", "unit")]
    assert "mmol/L where the others use mg/dL (cholesterol)" in findings[0]["message"]


def test_a_bad_csv_creates_no_run(tmp_path, two_sites, capsys):
    lines = rows(30, 3)
    lines[0] = "50,M,-inf,no,0"
    bad = write(tmp_path, "west.csv", lines)
    store = tmp_path / "runs"
    code = main(["run", "--store", str(store), "-a", "fedavg", "--data", f"csv:{two_sites[0]},{bad}",
                 "--target", "outcome", "--rounds", "1", "-q"])
    assert code == 2
    assert "west.csv, column 'chol': infinite value(s) at data row(s) 1" in capsys.readouterr().err
    assert RunStore(store).runs() == []


def test_a_windows_1252_header_keeps_its_accented_names():
    """Its header was decoded as UTF-8 with errors ignored before the fallback: 'Âge' became 'ge'."""
    data = "Âge;Température;outcome\n61;37,2;1\n47;36,9;0\n".encode("cp1252")
    table = parse_text_table(data, "south.csv", 10_000)
    assert list(table.frame.columns) == ["Âge", "Température", "outcome"] and table.encoding == "cp1252"


# -- workbooks ------------------------------------------------------------------------------------
def workbook(path: Path, sheets: dict[str, list[list]]) -> str:
    import openpyxl
    book = openpyxl.Workbook()
    book.remove(book.active)
    for title, rows in sheets.items():
        sheet = book.create_sheet(title)
        for row in rows:
            sheet.append(row)
    book.save(path)
    return str(path)


def sheet_rows(seed: int, n: int = 30) -> list[list]:
    rng = np.random.default_rng(seed)
    return [["age", "sex", "chol", "outcome"]] + [[int(rng.integers(30, 80)), str(rng.choice(["M", "F"])),
                                                    round(float(rng.normal(5, 1)), 2), int(rng.integers(0, 2))]
                                                   for _ in range(n)]


def test_a_workbook_with_a_sheet_per_site(tmp_path):
    book = workbook(tmp_path / "study.xlsx", {"north": sheet_rows(0), "empty": [], "south": sheet_rows(1, 25)})
    report = inspect_data({"source": "csv", "files": [book], "target": "outcome"})
    assert report.ok and [(s["site"], s["rows"]) for s in report.sites] == [("north", 30), ("south", 25)]
    assert set(report.features) == {"age", "sex", "chol"} and report.features["chol"]["kind"] == "continuous"
    assert any("study.xlsx: sheet(s) 'empty' are empty and left out" in w for w in report.warnings)


def test_a_workbook_sheet_with_a_site_column_and_a_csv_beside_it(tmp_path):
    rows = sheet_rows(2, 60)
    rows = [["hospital", *rows[0]]] + [["A" if k % 2 else "B", *r] for k, r in enumerate(rows[1:])]
    book = workbook(tmp_path / "all.xlsx", {"export": rows})
    report = inspect_data({"source": "csv", "files": [book], "target": "outcome", "site_column": "hospital"})
    assert report.ok and [(s["site"], s["rows"]) for s in report.sites] == [("A", 30), ("B", 30)]


@pytest.mark.parametrize("sheets, message", [
    ({"north": [["age", "age", "outcome"], [1, 2, 0]]},
     "book.xlsx, sheet 'north': column names must be unique, but these repeat: 'age' (columns 1, 2)."),
    ({"north": [["age", None, "outcome"], [1, 2, 0]]}, "book.xlsx, sheet 'north': column 2 of 3 has an empty header"),
    ({"north": [["age", "outcome"]]}, "book.xlsx, sheet 'north' has a header row but no data rows."),
    ({"north": []}, "book.xlsx has no sheet with rows."),
])
def test_a_bad_sheet_gets_the_csv_message_with_its_sheet_named(tmp_path, sheets, message):
    book = workbook(tmp_path / "book.xlsx", sheets)
    with pytest.raises(DataError) as error:
        inspect_data({"source": "csv", "files": [book], "target": "outcome"})
    assert message in str(error.value)


def test_a_zip_named_xlsx_is_refused(tmp_path):
    fake = tmp_path / "fake.xlsx"
    fake.write_bytes(gzip.compress(b"not a workbook"))
    with pytest.raises(DataError, match="fake.xlsx is not an Excel workbook"):
        inspect_data({"source": "csv", "files": [str(fake)], "target": "outcome"})


# -- what a workbook holds, not what it declares (issue 25) ------------------------------------------
TWO_ROWS = [["age", "outcome"], [61, 1], [47, 0]]


@pytest.mark.parametrize("dimension", ["A1:XFD2000", "A1:XFD1048576"])
def test_a_declared_dimension_is_not_trusted(tmp_path, dimension):
    """The probe's 4.7 KB workbook declares A1:XFD1048576: the reader padded every row to 16,384
    columns (a note listing 16,382 empty columns) and took 802 s and gigabytes. Read now as
    what it holds, in a few MB."""
    import tracemalloc

    from data_adapters.tables.workbooks import read_workbook
    from tests.hostile_files import declared_dimension_workbook

    book = declared_dimension_workbook(tmp_path / "declared.xlsx", TWO_ROWS, dimension)
    tracemalloc.start()
    try:
        (table,) = read_workbook(book, 10**8)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert table.frame.to_dict("list") == {"age": [61, 47], "outcome": [1, 0]} and table.warnings == []
    assert peak < 20e6


def test_empty_rows_are_left_out_and_messages_still_count_rows_as_the_sheet_does(tmp_path):
    from data_adapters import inspect_data

    rows = sheet_rows(3, 40)
    rows[5] = [None] * 4  # sheet row 6 empty
    rows[9][2] = "n/d?"  # sheet row 10, data row 9: a stray text in a numeric column
    book = workbook(tmp_path / "gaps.xlsx", {"north": rows, "south": sheet_rows(4, 30)})
    report = inspect_data({"source": "csv", "files": [book], "target": "outcome"})
    assert [(s["site"], s["rows"]) for s in report.sites] == [("north", 39), ("south", 30)]
    assert any("'chol'" in w and "data row(s) 9" in w for w in report.warnings), report.warnings


def test_a_value_beyond_the_declared_dimension_is_read_not_dropped(tmp_path):
    # The dimension said A1:B3, so row 40's value was silently left out: a table that looked fine.
    from data_adapters.tables.workbooks import read_workbook
    from tests.hostile_files import declared_dimension_workbook

    book = declared_dimension_workbook(tmp_path / "short.xlsx", TWO_ROWS, "A1:B3", {"A40": 58})
    (table,) = read_workbook(book, 10**8)
    assert table.frame["age"].tolist() == [61, 47, 58]
    assert table.frame.index.tolist() == [0, 1, 38]  # data row 39 is sheet row 40: messages count as the sheet


@pytest.mark.parametrize(("rows", "extra", "limits", "message"), [
    (TWO_ROWS, {"XFD1048576": 1}, {},
     "declared.xlsx, sheet 'north': cell XFD1048576 holds a value right of the header's last column (B)"),
    (TWO_ROWS, {"A1048576": 1}, {"max_cells": 5},
     "declared.xlsx, sheet 'north': 3 data rows × 2 columns is more than 5 cells, the limit of one table "
     "(row 1048576 holds a value); reading stopped there."),
    (TWO_ROWS, {"A1048576": 1}, {"max_rows": 2},
     "declared.xlsx, sheet 'north' has more than 2 data rows, the limit (raise max_rows to read it): row 1048576"),
    ([["age", *[None] * 9_999, "outcome"], [1]], {}, {},
     "declared.xlsx, sheet 'north': its header row (row 1) reaches column NTQ (10,001 columns), above the limit of "
     "10,000 columns."),
])
def test_a_workbook_past_a_limit_is_refused_while_it_streams(tmp_path, rows, extra, limits, message):
    from data_adapters.tables.workbooks import read_workbook
    from tests.hostile_files import declared_dimension_workbook

    book = declared_dimension_workbook(tmp_path / "declared.xlsx", rows, extra_cells=extra)
    with pytest.raises(DataError) as error:
        read_workbook(book, 10**8, **limits)
    assert message in str(error.value)


def test_the_csv_reader_has_the_same_column_and_cell_limits():
    wide = (",".join(f"c{k}" for k in range(10_001)) + "\n" + ",".join("1" * 10_001) + "\n").encode()
    with pytest.raises(DataError, match=r"wide.csv has 10,001 columns, above the limit of 10,000\."):
        parse_text_table(wide, "wide.csv", 10**8)
    rows = ("a,b,c\n" + "1,2,3\n" * 5).encode()
    assert len(parse_text_table(rows, "five.csv", 10**8, max_cells=15).frame) == 5
    with pytest.raises(DataError, match=r"five.csv: 5 data rows × 3 columns is more than 14 cells"):
        parse_text_table(rows, "five.csv", 10**8, max_cells=14)


def test_an_uploaded_workbook_that_declares_every_cell_is_checked_in_a_moment(tmp_path):
    from application.datasets import check_upload
    from tests.hostile_files import declared_dimension_workbook

    book = declared_dimension_workbook(tmp_path / "declared.xlsx", TWO_ROWS)
    checked = check_upload("declared.xlsx", book.read_bytes())
    assert checked.ok and checked.rows == 2 and checked.columns == ("age", "outcome")
