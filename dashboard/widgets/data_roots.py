"""The dashboard's data roots and the one way it starts a run: every path a visitor can name
(a dataset, an upload, the server data of a Flower federation, backbone weights) is checked
against the roots (`application.datasets`, data_adapters/references/roots.py) before anything opens it. This
module binds them to the dashboard's store.

The application layer's data services load the data adapters and torch (seconds on a cold start),
so each function imports them when called: the pages that only read the store (Runs, Run details,
Compare, ...) import this module for their buttons and start without torch."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dashboard.widgets.common import get_store
from fedcore.checkup import Plan
from fedcore.store import Run, RunStore


def upload_folder() -> Path:
    from application import datasets

    return datasets.upload_folder(get_store())


def data_roots() -> list[Path]:
    from application import datasets

    return datasets.data_roots(get_store())


def check_reference(ref: Any) -> None:
    from application import datasets

    datasets.check_roots(get_store(), ref)


def submit(store: RunStore, spec: Mapping[str, Any]) -> Run:
    from application import datasets

    return datasets.submit(store, spec)


def rerun(store: RunStore, run: Run) -> Run:
    from application import datasets

    return datasets.rerun(store, run)


def start_checkup(store: RunStore, data: Any, replicates: int, rounds: int, train: bool,
                  disclosure: dict[str, Any] | None = None) -> Plan:
    """checkup_jobs.start_checkup, for data inside the data roots (its runs queued as jobs), the
    sites releasing their statistics at `disclosure`."""
    from application import checkup_jobs, datasets

    datasets.check_roots(store, data)
    return checkup_jobs.start_checkup(store, data, replicates, rounds, train, disclosure=disclosure)


def train_lenses(store: RunStore, plan: Plan, replicates: int, rounds: int) -> Plan:
    """checkup_jobs.train_lenses for a check-up of data inside the data roots (its runs queued as jobs)."""
    from application import checkup_jobs, datasets

    datasets.check_roots(store, plan.contents.data)
    return checkup_jobs.train_lenses(store, plan, replicates, rounds)


def check_up_run(store: RunStore, run: Run) -> Plan:
    """A check-up of a run's federation from what the run stored (nothing is read or trained)."""
    from application import checkup_jobs

    return checkup_jobs.check_up_run(store, run)
