"""Fixtures and the test environment; the code tests share is in tests/helpers.py (the browser
tests' in tests/browser_helpers.py)."""

from __future__ import annotations

import functools
import os

# Before torch loads. Tests train tiny models: one thread each avoids OpenMP workers fighting
# over the cores when several test processes (CLI runs, job workers, the dashboard) run at once.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from fedcore.federation import Federation  # noqa: E402
from fedcore.store import RunStore  # noqa: E402
from tests.browser_helpers import launch, need_chromium, serving  # noqa: E402
from tests.helpers import SHARED_DATA, make_federation  # noqa: E402

torch.set_num_threads(1)


def _scan_installed_components_once() -> None:
    """Every new AppTest scans the metadata of every installed distribution for Streamlit components
    (0.2 s here, as long as rendering a small page; a dashboard server does it once at start): about
    a sixth of tests/test_every_state.py's time. Nothing is installed while the tests run, so one scan
    serves every AppTest of the session."""
    from streamlit.components.v2 import manifest_scanner

    manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)


_scan_installed_components_once()


@pytest.fixture
def federation() -> Federation:
    return make_federation()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return SHARED_DATA


# -- the browser tests (tests/browser_helpers.py) -------------------------------------------------
# Module-scoped: one Playwright driver and one Chromium per test module, a page or a context per test.


@pytest.fixture(scope="module")
def playwright():
    """Playwright's driver, for a test that launches a Chromium of its own (`browser_helpers.launch`)."""
    from playwright.sync_api import sync_playwright

    need_chromium()
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright):
    """Debian's headless Chromium."""
    chromium = launch(playwright)
    yield chromium
    chromium.close()


@pytest.fixture
def dashboard(tmp_path) -> Iterator[tuple[str, RunStore]]:
    """The dashboard as `make run` serves it, over an empty store of this test's own: its address
    and the store. A variable the dashboard must see is set (monkeypatch) by a fixture before."""
    need_chromium()
    store = RunStore(tmp_path / "runs")
    with serving(store.root) as url:
        yield url, store
