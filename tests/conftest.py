"""Fixtures and the test environment; the code tests share is in tests/helpers.py."""

from __future__ import annotations

import os

# Before torch loads. Tests train tiny models: one thread each avoids OpenMP workers fighting
# over the cores when several test processes (CLI runs, job workers, the dashboard) run at once.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from fedcore.federation import Federation  # noqa: E402
from tests.helpers import SHARED_DATA, make_federation  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture
def federation() -> Federation:
    return make_federation()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return SHARED_DATA
