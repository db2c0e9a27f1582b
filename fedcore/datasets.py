"""What the dashboard may ask of the data: the application layer's door to `data_adapters`.

Pages never import the data adapters (nor the training code) themselves: they read the run store
and call the application layer (this module, `fedcore.runner` through `fedcore.jobs`). Keeping the
data services in one place is also where a deployment's policy on data applies (which folders a
browser may reach, what is read before a file is accepted).
"""

from __future__ import annotations

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
from data_adapters.text_tables import read_text_table

__all__ = [
    "DEMO_FEATURES", "MISSING_CODE", "AlignmentReport", "SiteSummary", "data_kind", "describe_reference",
    "find_datasets", "inspect_data", "is_flower_reference", "load_federation", "read_text_table", "search_folders",
    "site_name",
]


def data_kind(ref: Any) -> str:
    """'table' or 'image': what a data reference holds (which algorithms can train it)."""
    return "image" if parse_reference(ref)[0].kind == "image" else "table"
