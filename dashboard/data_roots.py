"""The dashboard's data roots and the one way it starts a run: every path a visitor can name
(a dataset, an upload, the server data of a Flower federation, backbone weights) is checked
against the roots (data_adapters/roots.py) before anything opens it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dashboard.common import get_store
from data_adapters.roots import check_reference_roots, configured_roots, within_roots
from data_adapters.references import Reference
from fedcore import jobs
from fedcore.store import Run, RunStore

BUNDLED = Path(__file__).resolve().parent.parent / "assets"  # the sample site files shipped with the product


def upload_folder() -> Path:
    """Where the Data page keeps uploaded files (inside the run store)."""
    return get_store().root / "_uploads"


def data_roots() -> list[Path]:
    """The operator's roots ($FEDCORE_DATA_DIRS), the bundled samples and the upload folder."""
    return [*configured_roots(), BUNDLED.resolve(), upload_folder().resolve()]


def check_reference(ref: Reference) -> None:
    """OutsideDataRoots (a DataError, with the path and the roots) unless every path of the
    reference lies inside the data roots; nothing is opened."""
    check_reference_roots(ref, data_roots())


def check_spec(spec: Mapping[str, Any]) -> None:
    """Every path of a run's specification: its data and the backbone weights file."""
    check_reference(spec["data"])
    weights = (spec.get("config") or {}).get("backbone_weights")
    if weights:
        within_roots(weights, data_roots())


def submit(store: RunStore, spec: Mapping[str, Any]) -> Run:
    """jobs.submit, for a specification whose every path lies inside the data roots."""
    check_spec(spec)
    return jobs.submit(store, spec)


def rerun(store: RunStore, run: Run) -> Run:
    """jobs.rerun, for a run whose every path lies inside the data roots (one made on the command
    line may name any file)."""
    check_spec(run.spec)
    return jobs.rerun(store, run)
