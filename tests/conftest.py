"""Shared fixtures: small seeded federations that train in well under a second."""

from __future__ import annotations

import os

# Before torch loads. Tests train tiny models: one thread each avoids OpenMP workers fighting
# over the cores when several test processes (CLI runs, job workers, the dashboard) run at once.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import re  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from fedcore.federation import Federation, split_site  # noqa: E402

torch.set_num_threads(1)


# The real public datasets live beside the repository (CI clones it with ../shared next to it);
# only tests read them, never the product.
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def make_federation(
    n_sites: int = 3,
    rows: int | Sequence[int] = 90,
    n_features: int = 5,
    n_classes: int = 2,
    seed: int = 0,
    random_label_sites: tuple[int, ...] = (),
) -> Federation:
    """Gaussian classes with a learnable signal; listed sites get uniformly random labels.
    `rows` is every site's size, or one size per site (then `n_sites` is ignored)."""
    rng = np.random.default_rng(1234)
    centres = rng.normal(0, 1.5, size=(n_classes, n_features))
    sites, warnings = [], []
    sizes = [rows] * n_sites if isinstance(rows, int) else list(rows)
    for i, size in enumerate(sizes):
        y = rng.integers(0, n_classes, size)
        x = centres[y] + rng.normal(0, 1, size=(size, n_features)) + rng.normal(0, 0.3, n_features)
        if i in random_label_sites:
            y = rng.integers(0, n_classes, size)
        sites.append(split_site(f"site{i}", x, y, seed, warnings))
    return Federation(
        name="test federation",
        description="synthetic test data",
        sites=sites,
        feature_names=[f"f{j}" for j in range(n_features)],
        feature_kinds=["continuous"] * n_features,
        class_names=[f"class{c}" for c in range(n_classes)],
        synthetic=True,
        warnings=warnings,
    )


@pytest.fixture
def federation() -> Federation:
    return make_federation()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return SHARED_DATA


def unescaped(markdown: str) -> str:
    """What a person reads of Markdown that dashboard.safe_text.md escaped: without the backslashes
    before punctuation and the invisible word joiners."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown).replace("\u2060", "")


def remove_started_runs(store, keep: Sequence[str]) -> None:
    """Stop and delete every run in `store` but `keep` (what a page test launched)."""
    import time

    from fedcore import jobs

    for run in store.runs():
        if run.id not in keep:
            jobs.cancel(run)
            deadline = time.time() + 60
            while run.status["state"] in ("queued", "running") and time.time() < deadline:
                time.sleep(0.2)
            jobs.delete(store, run)
