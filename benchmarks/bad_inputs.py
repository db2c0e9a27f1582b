"""Peak memory and time of reading the largest bad or big site files (issue 18's cases) and the
hostile ones of issue 25: workbooks that declare every cell of a sheet, and data dictionaries
that are large, deep or hold a 5,000-digit number.

    .venv/bin/python benchmarks/bad_inputs.py              # the table (a few minutes on 2 cores)
    .venv/bin/python benchmarks/bad_inputs.py --only gzip  # the cases whose name holds 'gzip'

Every case is a two-site federation: the case's file beside a small normal site, checked the way
`python -m fedcore inspect` checks it (`data_adapters.inspect_data`: read, parse, align); for the
upload rows, the way the dashboard checks an upload before keeping it (`application.datasets.check_upload`
on the file's bytes in memory), and then the page's whole path: the check, the kept file and its
alignment (which finds the check's parse in the cache instead of parsing again). A dictionary case is
read as `fedcore inspect` reads a reference's `dictionary=` (two normal sites) and as the mapping step
takes an upload (its announced size first, then its bytes). Each measurement runs in a
fresh process, so its peak resident memory (VmHWM) is its own; 'imports' is that of a process
that only imports the modules, the floor under every other row. The files are generated here
(declared synthetic: random numbers), in a temporary folder removed afterwards.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import openpyxl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hostile_files import EXCEL_LAST_CELL, declared_dimension_workbook, deep_json, long_number_json  # noqa: E402

HEADER = ["age", "sex", *(f"lab{k:02d}" for k in range(1, 12)), "outcome"]


def numeric_rows(n: int, seed: int) -> str:
    """`n` data rows of HEADER as CSV text: random lab values with 6 decimals (they compress like
    real measurements do, about 2.3 : 1)."""
    rng = np.random.default_rng(seed)
    outcome = rng.integers(0, 2, n)
    columns = [rng.integers(20, 90, n).astype(str), np.where(rng.random(n) < 0.5, "F", "M")]
    columns += [np.char.mod("%.6f", rng.normal(100 + 10 * k, 15, n) + 5 * outcome) for k in range(11)]
    columns.append(outcome.astype(str))
    lines = [",".join(HEADER)]
    block = 100_000
    for start in range(0, n, block):
        parts = [c[start:start + block] for c in columns]
        lines.append("\n".join(",".join(row) for row in zip(*parts)))
    return "\n".join(lines) + "\n"


def make_cases(folder: Path) -> dict[str, Path]:
    """name -> the case's file (the normal site is folder/normal.csv)."""
    (folder / "normal.csv").write_text(numeric_rows(200, 0))
    cases = {}
    path = folder / "big_1m_rows.csv.gz"
    path.write_bytes(gzip.compress(numeric_rows(1_000_000, 1).encode(), compresslevel=6))
    cases["gzip 56 MB (1M rows x 14 columns)"] = path
    path = folder / "plain_1m_rows.csv"
    path.write_text(numeric_rows(1_000_000, 2))
    cases["1M rows, plain CSV"] = path
    path = folder / "field_1mb.csv"
    text = numeric_rows(300, 3).splitlines()
    cells = text[5].split(",")
    cells[3] = '"' + "x" * 1_000_000 + '"'  # a 1 MB cell in a numeric column
    text[5] = ",".join(cells)
    path.write_text("\n".join(text) + "\n")
    cases["a 1 MB field"] = path
    path = folder / "bomb.csv.gz"
    header = ",".join(HEADER) + "\n"
    line = ",".join(["50", "F", *["100.000000"] * 11, "1"]) + "\n"
    with gzip.open(path, "wb", compresslevel=9) as stream:
        stream.write(header.encode())
        chunk = (line * 10_000).encode()
        for _ in range(1_000_000_000 // len(chunk)):  # about 1 GB once decompressed
            stream.write(chunk)
    cases["gzip bomb (1 GB decompressed)"] = path
    path = folder / "rows_3m.csv.gz"
    with gzip.open(path, "wb", compresslevel=6) as stream:
        stream.write(b"age,outcome\n")
        chunk = b"50,1\n61,0\n" * 50_000
        for _ in range(30):  # 3 million rows, 15 MB once decompressed: under the size limit
            stream.write(chunk)
    cases["3M rows (above the row limit)"] = path
    path = folder / "honest_100k.xlsx"
    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("north")
    for k, line in enumerate(numeric_rows(100_000, 5).splitlines()):
        sheet.append(line.split(",") if k == 0 else [float(v) if v not in ("F", "M") else v for v in line.split(",")])
    book.save(path)
    cases["workbook of 100,000 rows x 14 columns (nothing hostile)"] = path
    rows = [line.split(",") for line in numeric_rows(3, 4).splitlines()]
    rows = [rows[0], *([float(v) if v not in ("F", "M") else v for v in row] for row in rows[1:])]
    for name, extra in (("", {}), (", a value in A1048576", {"A1048576": 50}),
                        (f", a value in {EXCEL_LAST_CELL}", {EXCEL_LAST_CELL: 50})):
        path = folder / f"declared{len(cases)}.xlsx"
        declared_dimension_workbook(path, rows, extra_cells=extra)
        cases[f"workbook declaring A1:{EXCEL_LAST_CELL}, 3 rows{name}"] = path
    path = folder / "large.dictionary.json"
    with path.open("w") as stream:  # 150 MB of valid JSON: one site renaming a million columns
        stream.write('{"format": "fedcore-data-dictionary/1", "sites": {"north": {"rename": {')
        stream.write(",".join(f'"column {k:07d} {"x" * 100}": "c{k}"' for k in range(1_150_000)))
        stream.write("}}}}")
    cases["dictionary of 150 MB"] = path
    (folder / "deep.dictionary.json").write_bytes(deep_json(100_000))
    cases["dictionary 100,000 deep"] = folder / "deep.dictionary.json"
    (folder / "long.dictionary.json").write_bytes(long_number_json(5_000))
    cases["dictionary with a 5,000-digit number"] = folder / "long.dictionary.json"
    return cases


INSPECT = """
import json, sys, time
sys.path.insert(0, {root!r})
from data_adapters import inspect_data
from fedcore.errors import DataError
start = time.perf_counter()
try:
    report = inspect_data({{"source": "csv", "files": [{normal!r}, {case!r}], "target": "outcome"}})
    outcome = "read" if report.ok else "refused: " + report.errors[0]
except DataError as error:
    outcome = "refused: " + str(error)
seconds = time.perf_counter() - start
"""
UPLOAD = """
import json, sys, tempfile, time
sys.path.insert(0, {root!r})
from pathlib import Path
from application import datasets
data = Path({case!r}).read_bytes()
start = time.perf_counter()
check = datasets.check_upload(Path({case!r}).name, data)
outcome = "read" if check.error is None else "refused: " + check.error
seconds = time.perf_counter() - start
"""
# The dashboard's whole path: the check, the kept file, and its alignment beside the normal site
# (the parse cache hands the alignment the table the check parsed).
PAGE = UPLOAD.replace('seconds = time.perf_counter() - start', """
if check.error is None:
    with tempfile.TemporaryDirectory() as folder:
        kept = datasets.keep_upload(check, data, Path(folder))
        report = datasets.inspect_data({{"source": "csv", "files": [{normal!r}, str(kept)], "target": "outcome"}})
    outcome = "read" if report.ok else "refused: " + report.errors[0]
seconds = time.perf_counter() - start""")
DICTIONARY = """
import json, sys, time
sys.path.insert(0, {root!r})
from data_adapters import inspect_data
from fedcore.errors import DataError
start = time.perf_counter()
try:
    report = inspect_data({{"source": "csv", "files": [{normal!r}, {normal!r}], "target": "outcome",
                           "site_names": ["a", "b"], "dictionary": {case!r}}})
    outcome = "read" if report.ok else "refused: " + report.errors[0]
except DataError as error:
    outcome = "refused: " + str(error)
seconds = time.perf_counter() - start
"""
# The mapping step's upload: Streamlit holds the upload; its size is checked before its bytes are
# copied out (here: read from disk only when the size passes).
DICTIONARY_UPLOAD = """
import json, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from application.datasets import check_dictionary_size, parse_dictionary
from fedcore.errors import DataError
path = Path({case!r})
start = time.perf_counter()
try:
    check_dictionary_size(path.stat().st_size, path.name)
    parse_dictionary(path.read_bytes(), path.name)
    outcome = "read"
except DataError as error:
    outcome = "refused: " + str(error)
seconds = time.perf_counter() - start
"""
IMPORTS = """
import json, sys
sys.path.insert(0, {root!r})
import data_adapters, application.datasets
outcome, seconds = "-", 0.0
"""
REPORT = """
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"outcome": outcome, "seconds": seconds, "peak_mb": peak / 1024}))
"""


def measure(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code + REPORT], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        return {"outcome": "CRASHED: " + done.stderr.strip().splitlines()[-1], "seconds": float("nan"),
                "peak_mb": float("nan")}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only the cases whose name contains this")
    parser.add_argument("--no-upload", action="store_true", help="leave out the upload rows")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cases = make_cases(folder)
        rows = [("imports only", "–", "–", measure(IMPORTS.format(root=str(ROOT))))]
        for name, path in cases.items():
            if args.only and args.only not in name:
                continue
            size = f"{path.stat().st_size / 1e6:.1f} MB" if path.stat().st_size > 50_000 else \
                f"{path.stat().st_size / 1e3:.1f} KB"
            if name.startswith("dictionary"):
                for how, code in (("inspect", DICTIONARY), ("mapping step upload", DICTIONARY_UPLOAD)):
                    rows.append((name, size, how, measure(code.format(root=str(ROOT), normal=str(folder / "normal.csv"),
                                                                      case=str(path)))))
                continue
            rows.append((name, size, "inspect", measure(INSPECT.format(root=str(ROOT), normal=str(folder / "normal.csv"),
                                                                       case=str(path)))))
            if not args.no_upload:
                rows.append((name, size, "upload check", measure(UPLOAD.format(root=str(ROOT), case=str(path)))))
                rows.append((name, size, "upload check + alignment", measure(
                    PAGE.format(root=str(ROOT), normal=str(folder / "normal.csv"), case=str(path)))))
    print("| case | file size | path | outcome | seconds | peak memory |")
    print("|---|---|---|---|---|---|")
    for name, size, how, result in rows:
        outcome = result["outcome"] if len(result["outcome"]) < 110 else result["outcome"][:107] + "..."
        print(f"| {name} | {size} | {how} | {outcome} | {result['seconds']:.2f} | {result['peak_mb']:.0f} MB |")


if __name__ == "__main__":
    main()
