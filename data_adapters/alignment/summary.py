"""A short per-site summary of any federation: what `inspect` shows for sources without an
alignment report (images, the demo)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from data_adapters.alignment.report_text import summary_text
from fedcore.federation import Federation
from fedcore.injected import InjectedProblem


@dataclass
class SiteSummary:
    name: str
    source: str
    input_shape: list[int]
    n_features: int
    class_names: list[str]
    sites: list[dict[str, Any]]  # name, n_train, n_test, train_class_counts, test_class_counts
    ground_truth: list[InjectedProblem]
    server_test_rows: int
    warnings: list[str]

    @classmethod
    def of(cls, federation: Federation) -> SiteSummary:
        described = federation.describe()
        return cls(
            name=federation.name,
            source=federation.source,
            input_shape=described["input_shape"],
            n_features=federation.n_features,
            class_names=described["class_names"],
            sites=described["sites"],
            ground_truth=list(federation.ground_truth),
            server_test_rows=len(federation.server_test[1]) if federation.server_test is not None else 0,
            warnings=described["warnings"],
        )

    @property
    def ok(self) -> bool:
        """Always: a federation that loaded has nothing blocking (the alignment report's twin)."""
        return True

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ground_truth": [truth.to_json() for truth in self.ground_truth]}

    def to_text(self) -> str:
        return summary_text(self)
