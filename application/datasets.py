"""What the dashboard may ask of the data: the application layer's door to `data_adapters`.

Pages never import the data adapters (nor the training code) themselves: they read the run store
and call the application layer (this module, `application.runner` through `application.jobs`). Keeping the
data services in one place is also where a deployment's policy on data applies (which folders a
browser may reach, what is read before a file is accepted).

The mapping step (`map_data`, `keep_dictionary`): the alignment with a data dictionary applied
and the suggestions left; the dictionary is kept, like an upload, under a folder named by its
content's hash, so the data reference that names it is one fixed set of decisions.

Uploads: `check_upload` parses a file's bytes while they are still in memory — with the reader's
limits on size, decompressed size and rows enforced while it streams — and `keep_upload` writes
only an accepted file, under a folder named by its content's hash (the same file uploaded twice is
kept once), through a temporary file that is removed if the write fails. A refused file is never
written. The page re-runs on every widget change: checks are remembered by content hash, and the
reader's parse cache (turned on here, for the dashboard's process) lets the alignment read each
kept file without parsing it again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from data_adapters import (
    AlignmentReport,
    SiteSummary,
    describe_reference,
    inspect_data,
    is_flower_reference,
    load_federation,
    parse_reference,
)
from data_adapters import decision_effects, mapping_view
from data_adapters import (
    DEMO_FEATURES,
    DICTIONARY_MAX_BYTES,
    DICTIONARY_SUFFIX,
    ENVIRONMENT,
    MAX_FILE_MB,
    MAX_ROWS,
    MISSING_CODE,
    PARSED,
    OutsideDataRoots,
    Reference,
    check_dictionary_size,
    check_reference_roots,
    configured_roots,
    conversion_name,
    decision,
    dictionary_bytes,
    dictionary_name,
    edited_patch,
    empty_dictionary,
    find_datasets,
    is_workbook,
    merge,
    parse_dictionary,
    parse_text_table,
    parse_workbook,
    read_text_table,
    search_folders,
    site_name,
    validate_dictionary,
    within_roots,
)
from fedcore.interpret.unit_conversions import CONVERSIONS
from application import jobs
from fedcore.errors import DataError
from fedcore.store import Run, RunStore, atomic_write_bytes

BUNDLED = Path(__file__).resolve().parent.parent / "assets"  # the sample site files shipped with the product

__all__ = [
    "BUNDLED", "DEMO_FEATURES", "DICTIONARY_MAX_BYTES", "ENVIRONMENT", "MISSING_CODE", "UPLOAD_MAX_BYTES", "UPLOAD_MAX_ROWS",
    "UPLOAD_STANDARDIZATION",
    "AlignmentReport", "CheckedUpload", "OutsideDataRoots", "SiteSummary", "catalogue_conversions", "check_roots",
    "check_dictionary_size", "check_spec", "check_upload", "clear_draft", "configured_roots", "data_kind", "data_roots",
    "decision", "default_name", "describe_reference", "dictionary_bytes", "edited_patch", "effects_of", "empty_dictionary",
    "find_datasets", "inspect_data", "is_flower_reference", "keep_dictionary", "keep_upload", "load_draft",
    "load_federation", "map_data", "merge", "parse_dictionary", "read_text_table", "rerun", "save_draft",
    "search_folders", "site_name", "submit", "upload_folder", "within_roots",
]

# The Data page's standardisation choices for uploaded tables, its default first: chosen by measurement
# (benchmarks/evidence/standardization.py, README "Standardisation"): with per-site standardisation a
# unit or offset difference at one site vanishes before the model sees it.
UPLOAD_STANDARDIZATION = ("federated", "site", "none")
UPLOAD_MAX_BYTES = int(MAX_FILE_MB * 1e6)  # as the csv reader's default, so a kept file's parse is found again
UPLOAD_MAX_ROWS = MAX_ROWS
PREVIEW_ROWS = 5
DRAFT_FORMAT = "fedcore-mapping-draft/1"
REMEMBERED_CHECKS = 64
PARSED.max_entries = 32  # the dashboard re-reads the same files on every widget change


@dataclass(frozen=True)
class CheckedUpload:
    """One uploaded file after its check: accepted (rows, columns, a preview) or refused (error)."""

    name: str  # the name it is kept under (the uploaded name made safe for a file system)
    digest: str  # sha256 of its bytes
    error: str | None = None
    rows: int = 0
    columns: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    preview: pd.DataFrame | None = field(default=None, compare=False)
    sheets: int = 1  # a workbook's sheets with rows (one site each unless a column names the sites)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def site(self) -> str:
        return site_name(self.name)


_checks: OrderedDict[tuple[str, str], CheckedUpload] = OrderedDict()
_checks_lock = threading.Lock()


def check_upload(name: str, data: bytes) -> CheckedUpload:
    """Parse an uploaded file's bytes as a site table, before anything is written; remembered by
    content, so a re-run of the page does not parse it again (nor re-stream a refused one)."""
    safe, digest = safe_file_name(name), hashlib.sha256(data).hexdigest()
    with _checks_lock:
        known = _checks.get((digest, safe))
    if known is not None:
        return known
    try:
        tables = (parse_workbook(data, safe, UPLOAD_MAX_BYTES, max_rows=UPLOAD_MAX_ROWS) if is_workbook(safe)
                  else [parse_text_table(data, safe, UPLOAD_MAX_BYTES, max_rows=UPLOAD_MAX_ROWS)])
        table = tables[0]
        checked = CheckedUpload(safe, digest, rows=sum(len(t.frame) for t in tables),
                                columns=tuple(map(str, table.frame.columns)),
                                warnings=tuple(w for t in tables for w in t.warnings),
                                preview=table.frame.head(PREVIEW_ROWS), sheets=len(tables))
    except DataError as error:
        checked = CheckedUpload(safe, digest, error=str(error))
    with _checks_lock:
        _checks[(digest, safe)] = checked
        while len(_checks) > REMEMBERED_CHECKS:
            _checks.popitem(last=False)
    return checked


def keep_upload(upload: CheckedUpload, data: bytes, folder: Path) -> Path:
    """Write an accepted upload to `folder/<first 16 hex digits of its hash>/<name>` (once: an
    existing copy is the same file) and return its path."""
    if not upload.ok:
        raise ValueError(f"{upload.name} was refused; refused uploads are never kept")
    target = folder / upload.digest[:16] / upload.name
    if target.is_file() and target.stat().st_size == len(data):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".upload-", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def safe_file_name(name: str) -> str:
    """The uploaded name without folders, and with only letters, digits, '.', '_' and '-'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name).lstrip(".") or "upload.csv"


# -- the mapping step: a data dictionary built decision by decision --------------------------------
def map_data(ref: Reference, content: Mapping[str, Any]) -> dict[str, Any]:
    """The mapping step's state for a table reference with the dictionary `content` applied:
    `report` (the alignment report as a dict, with the check-up's findings), `ok` (whether the tables combine), `suggestions`
    (`data_adapters.mapping.suggestions`, questions among them) and `view` (`data_adapters.mapping.study_view`:
    every column, the target's candidates and values)."""
    alignment, suggestions, view = mapping_view(ref, validate_dictionary(dict(content), "the dictionary"))
    report = alignment.checked()  # with the check-up's data-lens findings, as the Data page shows them
    return {"report": report.to_dict(), "ok": report.ok, "suggestions": [s.to_dict() for s in suggestions],
            "view": view}


def effects_of(ref: Reference, content: Mapping[str, Any], patch: Mapping[str, Any]) -> list[str]:
    """What one more decision (`patch`) would change on the tables as `content` maps them."""
    return decision_effects(ref, validate_dictionary(dict(content), "the dictionary"), patch)


def catalogue_conversions() -> list[dict[str, Any]]:
    """The unit catalogue's conversions as a dictionary names them: name, a, b."""
    return [{"name": conversion_name(c), "a": c.a, "b": c.b} for c in CONVERSIONS]


# -- the mapping step's draft, kept per user --------------------------------------------------------------
def draft_path(store: RunStore, user: str) -> Path:
    """Where a user's draft of the mapping step is kept: `<store>/_drafts/<sha256 of the user>.json`
    (a person signed in has their own; in local mode the one person at this machine)."""
    return store.root / "_drafts" / f"{hashlib.sha256(user.encode()).hexdigest()[:24]}.json"


def load_draft(store: RunStore, user: str) -> dict[str, Any] | None:
    """A user's kept draft (uploads, choices, decisions), or None; a damaged one is None."""
    path = draft_path(store, user)
    try:
        draft = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return draft if isinstance(draft, dict) and draft.get("format") == DRAFT_FORMAT else None


def save_draft(store: RunStore, user: str, draft: Mapping[str, Any]) -> None:
    atomic_write_bytes(draft_path(store, user), json.dumps({**draft, "format": DRAFT_FORMAT}, sort_keys=True,
                                                           ensure_ascii=False).encode("utf-8"))


def clear_draft(store: RunStore, user: str) -> None:
    draft_path(store, user).unlink(missing_ok=True)


def keep_dictionary(content: Mapping[str, Any], folder: Path) -> Path:
    """Write a dictionary under `folder/<first 16 hex digits of its hash>/NAME.dictionary.json`
    (once: the same decisions are one file), for a data reference to name."""
    data = dictionary_bytes(content)
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", str(content.get("name") or "study")).strip("-")[:60] or "study"
    target = folder / hashlib.sha256(data).hexdigest()[:16] / f"{name}{DICTIONARY_SUFFIX}"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, data)
    return target


def default_name(files: list[str]) -> str:
    """What an upload is called until the analyst names it: made from its files' names."""
    return dictionary_name(files)


def data_kind(ref: Any) -> str:
    """'table' or 'image': what a data reference holds (which algorithms can train it)."""
    return "image" if parse_reference(ref)[0].kind == "image" else "table"


# -- the data roots: every path a browser can name is checked here before anything opens it -------
def upload_folder(store: RunStore) -> Path:
    """Where the Data page keeps uploaded files (inside the run store)."""
    return store.root / "_uploads"


def data_roots(store: RunStore) -> list[Path]:
    """The operator's roots ($FEDCORE_DATA_DIRS), the bundled samples and the upload folder."""
    return [*configured_roots(), BUNDLED.resolve(), upload_folder(store).resolve()]


def check_roots(store: RunStore, ref: Reference) -> None:
    """OutsideDataRoots (a DataError, with the path and the roots) unless every path of the
    reference lies inside the data roots; nothing is opened."""
    check_reference_roots(ref, data_roots(store))


def check_spec(store: RunStore, spec: Mapping[str, Any]) -> None:
    """Every path of a run's specification: its data and the backbone weights file."""
    _check_paths(store, spec["data"], spec.get("config") or {})


def _check_paths(store: RunStore, data: Any, config: Mapping[str, Any]) -> None:
    check_roots(store, data)
    weights = config.get("backbone_weights")
    if weights:
        within_roots(weights, data_roots(store))


def submit(store: RunStore, spec: Mapping[str, Any]) -> Run:
    """jobs.submit, for a specification whose every path lies inside the data roots."""
    check_spec(store, spec)
    return jobs.submit(store, spec)


def rerun(store: RunStore, run: Run) -> Run:
    """jobs.rerun, for a run whose every path lies inside the data roots (one made on the command
    line may name any file)."""
    spec = run.spec
    _check_paths(store, spec.data, spec.config)
    return jobs.rerun(store, run)
