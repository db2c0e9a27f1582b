"""The data a page loads, cached across reruns: federations and the Data page's inspection.

Apart from `dashboard.widgets.common` because loading data goes through the application layer's data
services (`application.datasets`: the data adapters, and with them torch). Only the pages that look at
data rows import this module, so the others — the Runs page above all, the first one a browser
opens — start without loading torch.
"""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from application.datasets import inspect_data, load_federation


@st.cache_resource(show_spinner="Loading the data…", max_entries=8)
def cached_federation(ref_json: str, seed: int = 0):
    """A federation loaded once per (data reference, seed); the reference as JSON text so that
    dict references can be cache keys."""
    return load_federation(json.loads(ref_json), seed)


def load_run_federation(ref: Any, seed: int = 0):
    return cached_federation(json.dumps(ref, sort_keys=True), seed)


@st.cache_data(show_spinner="Checking the data…", max_entries=16)
def cached_inspection(ref_json: str) -> tuple[dict[str, Any], bool]:
    """`inspect_data` once per data reference (as JSON text), as (report dict, ok): every widget
    on the Data page reruns it, and a 30-site table takes seconds to align."""
    report = inspect_data(json.loads(ref_json))
    return report.to_dict(), report.ok


def inspect_reference(ref: Any) -> tuple[dict[str, Any], bool]:
    return cached_inspection(json.dumps(ref, sort_keys=True))
