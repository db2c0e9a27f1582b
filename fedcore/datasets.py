"""What the dashboard may ask of the data: the application layer's door to `data_adapters`.

Pages never import the data adapters (nor the training code) themselves: they read the run store
and call the application layer (this module, `fedcore.runner` through `fedcore.jobs`). Keeping the
data services in one place is also where a deployment's policy on data applies (which folders a
browser may reach, what is read before a file is accepted).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from data_adapters import (
    AlignmentReport,
    SiteSummary,
    describe_reference,
    inspect_data,
    is_flower_reference,
    load_federation,
    parse_reference,
)
from data_adapters.csv_sites import site_name
from data_adapters.demo import FEATURES as DEMO_FEATURES
from data_adapters.discover import find_datasets, search_folders
from data_adapters.preprocessing import MISSING_CODE
from data_adapters.references import Reference
from data_adapters.roots import ENVIRONMENT, OutsideDataRoots, check_reference_roots, configured_roots, within_roots
from data_adapters.text_tables import read_text_table
from fedcore import jobs
from fedcore.store import Run, RunStore

BUNDLED = Path(__file__).resolve().parent.parent / "assets"  # the sample site files shipped with the product

__all__ = [
    "BUNDLED", "DEMO_FEATURES", "ENVIRONMENT", "MISSING_CODE", "AlignmentReport", "OutsideDataRoots", "SiteSummary",
    "check_roots", "check_spec", "configured_roots", "data_kind", "data_roots", "describe_reference", "find_datasets",
    "inspect_data", "is_flower_reference", "load_federation", "read_text_table", "rerun", "search_folders", "site_name",
    "submit", "upload_folder", "within_roots",
]


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
    check_roots(store, spec["data"])
    weights = (spec.get("config") or {}).get("backbone_weights")
    if weights:
        within_roots(weights, data_roots(store))


def submit(store: RunStore, spec: Mapping[str, Any]) -> Run:
    """jobs.submit, for a specification whose every path lies inside the data roots."""
    check_spec(store, spec)
    return jobs.submit(store, spec)


def rerun(store: RunStore, run: Run) -> Run:
    """jobs.rerun, for a run whose every path lies inside the data roots (one made on the command
    line may name any file)."""
    check_spec(store, run.spec)
    return jobs.rerun(store, run)
