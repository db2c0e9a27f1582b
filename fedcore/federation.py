"""Federation and Site containers, and the paper's per-site hold-out rule.

A Federation is what every data adapter produces and what the engine consumes: named sites,
each with its own train / hold-out tensors, plus the names and kinds of the features, the class
names, and — for demo or injected data — the recorded ground truth of every injected shift.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from fedcore.errors import DataError
from fedcore.injected import InjectedProblem
from fedcore.seeding import derive_seed

if TYPE_CHECKING:  # the profile is built by the data adapters, above this module
    from fedcore.interpret.profile import Profile

FEATURE_KINDS = ("continuous", "binary", "categorical")

# iFedAvg paper / reference code: each site keeps max(33 %, 100 rows) as its hold-out.
HOLDOUT_FRACTION = 0.33
HOLDOUT_MIN_ROWS = 100
# The reference drops sites with fewer than 133 rows (100 test + 33 train); we keep them with a
# proportionally smaller hold-out and a warning.
MIN_TRAIN_ROWS = 33


@dataclass
class Site:
    """One site's private data, already preprocessed (float features, integer class labels)."""

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor

    @property
    def n_train(self) -> int:
        return int(self.y_train.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.y_test.shape[0])


@dataclass
class Federation:
    """Sites plus the metadata every page and record needs."""

    name: str
    description: str
    sites: list[Site]
    feature_names: list[str]  # tables: one per column; images: empty
    feature_kinds: list[str]
    class_names: list[str]
    # Injected incompatibilities with known truth (the data adapters' injection code builds them).
    ground_truth: list[InjectedProblem] = field(default_factory=list)
    synthetic: bool = False
    warnings: list[str] = field(default_factory=list)
    # Where the data came from, so a page can reload it (e.g. "demo", "csv:...").
    source: str = ""
    # How features were preprocessed (standardisation mode, missing-value encoding, ...).
    preprocessing: dict[str, Any] = field(default_factory=dict)
    # A representative test set held by the server, when one exists (AdaFed's "given" mode).
    server_test: tuple[torch.Tensor, torch.Tensor] | None = None
    # Each site's federated statistics in original units (tables; fedcore.interpret.profile).
    profile: Profile | None = None

    def __post_init__(self) -> None:
        if not self.sites:
            raise DataError("The federation has no sites.")
        names = [s.name for s in self.sites]
        if len(set(names)) != len(names):
            raise DataError(f"Site names must be unique; got {names}.")
        shape = self.input_shape
        for site in self.sites:
            for part in (site.x_train, site.x_test):
                if tuple(part.shape[1:]) != shape:
                    raise DataError(
                        f"Site '{site.name}' has inputs of shape {tuple(part.shape[1:])}, "
                        f"the first site has {shape}."
                    )
        if self.is_tabular:
            if len(self.feature_names) != shape[0]:
                raise DataError(
                    f"The federation has {shape[0]} feature columns but {len(self.feature_names)} names."
                )
            if len(self.feature_kinds) != len(self.feature_names):
                raise DataError("Every feature needs a kind (continuous, binary or categorical).")
            bad = sorted(set(self.feature_kinds) - set(FEATURE_KINDS))
            if bad:
                raise DataError(f"Unknown feature kinds {bad}; use one of {FEATURE_KINDS}.")

    @property
    def site_names(self) -> list[str]:
        return [s.name for s in self.sites]

    @property
    def input_shape(self) -> tuple[int, ...]:
        """(features,) for tables, (channels, height, width) for images."""
        return tuple(self.sites[0].x_train.shape[1:])

    @property
    def is_tabular(self) -> bool:
        return len(self.input_shape) == 1

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def n_classes(self) -> int:
        return len(self.class_names)

    def pooled_train(self) -> tuple[torch.Tensor, torch.Tensor]:
        """All sites' training rows in one table (the Centralized baseline)."""
        return (
            torch.cat([s.x_train for s in self.sites]),
            torch.cat([s.y_train for s in self.sites]),
        )

    def describe(self) -> dict[str, Any]:
        """JSON-ready metadata stored with every run (no data rows)."""
        n_classes = self.n_classes
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "synthetic": self.synthetic,
            "sites": [
                {
                    "name": s.name,
                    "n_train": s.n_train,
                    "n_test": s.n_test,
                    "train_class_counts": torch.bincount(s.y_train, minlength=n_classes).tolist(),
                    "test_class_counts": torch.bincount(s.y_test, minlength=n_classes).tolist(),
                }
                for s in self.sites
            ],
            "input_shape": list(self.input_shape),
            "feature_names": list(self.feature_names),
            "feature_kinds": list(self.feature_kinds),
            "class_names": list(self.class_names),
            "ground_truth": [truth.to_json() for truth in self.ground_truth],
            "warnings": list(self.warnings),
            "preprocessing": dict(self.preprocessing),
        }


def holdout_size(n_rows: int) -> int:
    """Rows a site keeps for its hold-out: max(33 %, 100), smaller when the site is tiny."""
    if n_rows < 2:
        raise DataError(f"A site needs at least 2 rows to hold some out; it has {n_rows}.")
    paper_size = max(math.ceil(HOLDOUT_FRACTION * n_rows), HOLDOUT_MIN_ROWS)
    if n_rows - paper_size >= MIN_TRAIN_ROWS:
        return paper_size
    return max(1, math.ceil(HOLDOUT_FRACTION * n_rows))


def stratified_holdout(
    y: np.ndarray, n_test: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Split row indices into (train, test) with class proportions kept in the test part.

    Each class contributes its proportional share (largest-remainder rounding); a class with
    two or more rows keeps at least one row on each side.
    """
    classes, counts = np.unique(y, return_counts=True)
    quota = n_test * counts / len(y)
    take = np.floor(quota).astype(int)
    for i in np.argsort(-(quota - take), kind="stable")[: n_test - take.sum()]:
        take[i] += 1
    take = np.where(counts >= 2, np.clip(take, 1, counts - 1), take)
    train_idx, test_idx = [], []
    for cls, k in zip(classes, take):
        rows = rng.permutation(np.flatnonzero(y == cls))
        test_idx.append(rows[:k])
        train_idx.append(rows[k:])
    return np.sort(np.concatenate(train_idx)), np.sort(np.concatenate(test_idx))


def holdout_indices(
    name: str, y: np.ndarray, seed: int, warnings: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (train, test) of one site under the hold-out rule; warns for tiny sites.

    Separate from `split_site` so that adapters can fit preprocessing (e.g. per-site
    standardisation) on the training rows only before building the site.
    """
    n_rows = len(y)
    n_test = holdout_size(n_rows)
    if n_test < HOLDOUT_MIN_ROWS:
        warnings.append(
            f"Site '{name}' has only {n_rows} rows: its hold-out is {n_test} rows instead of the "
            f"paper's minimum of {HOLDOUT_MIN_ROWS}, so its scores are noisy. It still takes part."
        )
    rng = np.random.default_rng(derive_seed(seed, name, "holdout"))
    return stratified_holdout(y, n_test, rng)


def make_site(
    name: str, x: np.ndarray, y: np.ndarray, train_idx: np.ndarray, test_idx: np.ndarray
) -> Site:
    """A Site from one site's full arrays and its (train, test) row indices."""
    as_x = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32)  # noqa: E731
    as_y = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.int64)  # noqa: E731
    return Site(name, as_x(x[train_idx]), as_y(y[train_idx]), as_x(x[test_idx]), as_y(y[test_idx]))


def split_site(
    name: str, x: np.ndarray, y: np.ndarray, seed: int, warnings: list[str]
) -> Site:
    """Apply the hold-out rule to one site's full table; appends a warning for tiny sites."""
    train_idx, test_idx = holdout_indices(name, y, seed, warnings)
    return make_site(name, x, y, train_idx, test_idx)


def class_weights(y: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Inverse-prevalence class weights of one site, as in the iFedAvg reference.

    w_c = (1/n_c) / sum_k (1/n_k) * K over the classes present (so they sum to K); a class the
    site never saw gets weight 0, which is harmless since it never appears in its loss.
    """
    counts = torch.bincount(y, minlength=n_classes).to(torch.float64)
    inverse = torch.where(counts > 0, 1.0 / counts.clamp(min=1), torch.zeros_like(counts))
    present = int((counts > 0).sum())
    return (inverse / inverse.sum() * present).to(torch.float32)

