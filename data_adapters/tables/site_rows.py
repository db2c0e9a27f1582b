"""The intermediate form every adapter hands to `assemble`: each site's full rows, not yet split,
standardised, or missing-encoded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class RawSite:
    """One site's rows: tables N×D (NaN = missing, original units), images N×C×H×W in [0, 1]."""

    name: str
    x: np.ndarray
    y: np.ndarray  # class index of every row


@dataclass
class RawFederation:
    name: str
    description: str
    source: str
    sites: list[RawSite]
    class_names: list[str]
    feature_names: list[str] = field(default_factory=list)  # tables only
    feature_kinds: list[str] = field(default_factory=list)
    # The input column each feature came from (a categorical column gives several one-hot features).
    feature_columns: list[str] = field(default_factory=list)
    # False for data without natural sites (an npz or IDX file): they must be partitioned.
    natural_sites: bool = True
    server_test: tuple[np.ndarray, np.ndarray] | None = None
    warnings: list[str] = field(default_factory=list)
    preprocessing: dict[str, Any] = field(default_factory=dict)
    synthetic: bool = False  # made up in code (declared to the user), not real data

    @property
    def is_tabular(self) -> bool:
        return self.sites[0].x.ndim == 2

    def features_of(self, column: str) -> list[int]:
        """Indices of the features that are `column` itself or its one-hot / indicator columns."""
        return [j for j, name in enumerate(self.feature_columns) if name == column] or [
            j for j, name in enumerate(self.feature_names) if name == column
        ]
