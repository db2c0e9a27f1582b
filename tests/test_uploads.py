"""Uploads on the Data page: each file checked before it is kept, refused files never written,
a refused file never leaving a silently smaller federation, each upload parsed once however often
the page re-runs — through Streamlit's AppTest and through `application.datasets` directly."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import data_adapters.tables.text_tables as text_tables
from application import datasets
from tests.helpers import unescaped
from tests.test_bad_inputs import HEADER, clinic, table

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SOURCE = "Upload CSV files (one per site)"


@pytest.fixture
def page(tmp_path, monkeypatch):
    """The Data page on an empty store, at its upload tab."""
    monkeypatch.setenv("FEDCORE_STORE", str(tmp_path / "runs"))
    monkeypatch.setenv("FEDCORE_MAX_JOBS", "1")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/data.py")
    at.run()
    at.radio(key="source").set_value(SOURCE).run()
    assert not at.exception, at.exception
    return at, tmp_path / "runs"


def upload(at, files: dict[str, bytes]):
    at.file_uploader(key="files").set_value([(name, data, "text/csv") for name, data in files.items()]).run()
    assert not at.exception, at.exception
    return at


def kept_files(store: Path) -> list[Path]:
    return sorted(p for p in (store / "_uploads").rglob("*") if p.is_file()) if (store / "_uploads").exists() else []


def chosen(store: Path):
    path = store / ".dashboard.json"
    return json.loads(path.read_text())["data"] if path.exists() else None


NORTH, SOUTH = table(clinic(1)), table(clinic(2))


def test_a_refused_file_blocks_training_until_it_is_left_out_and_is_never_written(page):
    at, store = page
    cut = gzip.compress(table(clinic(3)))[:-30]
    upload(at, {"north.csv": NORTH, "south.csv": SOUTH, "east.csv.gz": cut})
    assert [unescaped(e.value) for e in at.error] == [
        "east.csv.gz looks gzip-compressed but cannot be decompressed (damaged or truncated)."]
    assert "use" not in [b.key for b in at.button]  # no federation of two sites offered silently
    assert not kept_files(store)  # nothing is written before the user decides
    at.checkbox(key="leave_out").check().run()
    assert not at.exception, at.exception
    assert [p.name for p in kept_files(store)] == ["north.csv", "south.csv"]  # the refused file never
    assert not any(p.name.startswith(".upload-") for p in (store / "_uploads").rglob("*"))  # no temporary copies
    at.button(key="use").click().run()
    data = chosen(store)
    assert [Path(f).name for f in data["ref"]["files"]] == ["north.csv", "south.csv"]
    assert data["label"].endswith("(east.csv.gz left out)")  # what is missing stays in its name


def test_one_site_left_is_said_and_needs_a_confirmation(page):
    at, store = page
    upload(at, {"north.csv": NORTH, "empty.csv": b""})
    at.checkbox(key="leave_out").check().run()
    assert any("Only one site (north)" in unescaped(w.value) and "200 MB" in unescaped(w.value) for w in at.warning)
    assert at.button(key="use").disabled  # blocked until the user says so
    at.checkbox(key="one_site").check().run()
    assert not at.button(key="use").disabled


def test_a_refused_file_is_not_written_even_when_it_is_the_only_one(page):
    at, store = page
    upload(at, {"workbook.csv": b"PK\x03\x04" + bytes(100)})
    assert any("workbook.csv is a zip archive or an Excel workbook" in unescaped(e.value) for e in at.error)
    assert at.checkbox(key="leave_out").disabled  # nothing would be left
    assert not kept_files(store) and chosen(store) is None


def test_each_upload_is_parsed_once_however_often_the_page_reruns(page, monkeypatch):
    at, store = page
    parsed = []
    parse = text_tables._parse

    def counting(data, label, *args):
        parsed.append(label)
        return parse(data, label, *args)

    monkeypatch.setattr(text_tables, "_parse", counting)
    text_tables.PARSED.clear()
    datasets._checks.clear()
    upload(at, {"north.csv": NORTH, "south.csv": SOUTH})
    at.text_input(key="data_name").set_value("Two clinics").run()  # every widget change reruns the page
    at.selectbox(key="standardization").set_value("none").run()
    at.checkbox(key="indicators").check().run()
    at.text_input(key="data_name").set_value("Two clinics, again").run()
    assert not at.exception, at.exception
    assert sorted(parsed) == ["north.csv", "south.csv"]  # the upload check's parse, found again by the alignment
    assert [p.name for p in kept_files(store)] == ["north.csv", "south.csv"]


def test_the_upload_check_streams_with_its_limits(monkeypatch):
    """Decompressed size and rows are capped while the file streams: a refused check holds no
    more than the limit (benchmarks/bad_inputs.py measures memory), and the refusal is remembered."""
    monkeypatch.setattr(datasets, "UPLOAD_MAX_BYTES", 1_000_000)
    monkeypatch.setattr(datasets, "UPLOAD_MAX_ROWS", 500)
    line = b"50,M,200.0,80.0,37.0,1\n"
    bomb = gzip.compress(",".join(HEADER).encode() + b"\n" + line * 200_000)  # 4.6 MB once decompressed
    check = datasets.check_upload("bomb.csv.gz", bomb)
    assert check.error == "bomb.csv.gz is above the limit of 1 MB once decompressed (raise max_file_mb to read it)."
    long = table(clinic(4, n=800))
    assert datasets.check_upload("long.csv", long).error.startswith("long.csv has more than 500 data rows")
    assert datasets.check_upload("long.csv", long) is datasets.check_upload("long.csv", long)  # remembered
    accepted = datasets.check_upload("north clinic.csv", NORTH)
    assert accepted.ok and accepted.name == "north_clinic.csv" and accepted.site == "north_clinic"
    assert accepted.rows == 40 and accepted.columns == tuple(HEADER) and len(accepted.preview) == 5


def test_keep_upload_writes_once_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    check = datasets.check_upload("north.csv", NORTH)
    path = datasets.keep_upload(check, NORTH, tmp_path)
    assert path == tmp_path / check.digest[:16] / "north.csv" and path.read_bytes() == NORTH
    assert datasets.keep_upload(check, NORTH, tmp_path) == path  # the same file, kept once

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    other = datasets.check_upload("south.csv", SOUTH)
    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        datasets.keep_upload(other, SOUTH, tmp_path)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["north.csv"]
    refused = datasets.check_upload("empty.csv", b"")
    with pytest.raises(ValueError, match="refused uploads are never kept"):
        datasets.keep_upload(refused, b"", tmp_path)


@pytest.mark.parametrize("hostile", ["deep", "long", "large"])
def test_a_hostile_data_dictionary_upload_gets_a_message_not_an_exception_page(page, hostile):
    """The probe: a 100k-deep or a 5,000-digit-number dictionary showed an exception page; a 150 MB
    one was taken in whole (2.57 GB peak). Each is refused with the CLI's message."""
    from tests.hostile_files import deep_json, long_number_json

    at, _ = page
    upload(at, {"north.csv": NORTH, "south.csv": SOUTH})
    data = {"deep": deep_json(100_000), "long": long_number_json(5_000), "large": b" " * 3_000_000}[hostile]
    dictionary = next(u for u in at.file_uploader if u.label.startswith("Start from a data dictionary"))
    dictionary.set_value([("study.dictionary.json", data, "application/json")]).run()
    assert not at.exception, at.exception
    message = {"deep": "nests objects and lists 100,000 deep", "long": "holds a number written with 5,000 characters",
               "large": "study.dictionary.json is 3 MB, larger than 2 MB: not a data dictionary"}[hostile]
    assert any(message in unescaped(e.value) for e in at.error), [e.value for e in at.error]
