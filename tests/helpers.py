"""Code the tests share: small seeded federations, one way to train a simulation, and comparisons
of two trainings (conftest.py keeps only fixtures and the test environment)."""

from __future__ import annotations

import re

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from fedcore.algorithms import REGISTRY, build_algorithm
from fedcore.engine import Simulation, TrainConfig
from fedcore.federation import Federation, split_site

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


def simulate(algorithm: str, params: dict[str, Any] | None = None, federation: Federation | None = None,
             **config: Any) -> tuple[Simulation, list[dict[str, Any]]]:
    """Train `algorithm` on `federation` (default: `make_federation()`) for all its rounds; the
    algorithm's own engine defaults (e.g. APFL's momentum 0) apply unless `config` sets them."""
    settings = {**REGISTRY[algorithm].config_defaults, **config}
    sim = Simulation(federation or make_federation(), build_algorithm(algorithm, params), TrainConfig(**settings))
    return sim, sim.run()


def differing(sim: Simulation) -> set[str]:
    """Names of the float parameters / buffers that are not identical at every site."""
    return {name for name, value in sim.stacked.items()
            if value.is_floating_point() and not bool((value == value[:1]).all())}


def assert_same_tensors(ours: Simulation, theirs: Simulation, atol: float, rtol: float) -> None:
    """Every stacked tensor of two simulations: floats equal within the tolerance, counts exactly."""
    assert ours.stacked.keys() == theirs.stacked.keys()
    for name, value in theirs.stacked.items():
        if value.is_floating_point():
            assert torch.allclose(ours.stacked[name], value, atol=atol, rtol=rtol), name
        else:  # BatchNorm's counts of batches
            assert torch.equal(ours.stacked[name], value), name


def assert_same_history(ours: list[dict[str, Any]], theirs: list[dict[str, Any]], loss_rel: float,
                        loss_abs: float, metric_abs: float, metrics: Sequence[str] | None = None) -> None:
    """Two runs' records: the same rounds, each site's training loss within (loss_rel, loss_abs),
    and its hold-out `metrics` (None: all of them) within metric_abs."""
    assert [r["round"] for r in ours] == [r["round"] for r in theirs]
    for record, other in zip(ours, theirs):
        assert record["train_loss"] == pytest.approx(other["train_loss"], rel=loss_rel, abs=loss_abs)
        assert list(record["sites"]) == list(other["sites"])  # every site scored
        for site, scores in other["sites"].items():
            keys = list(scores) if metrics is None else metrics
            assert {k: record["sites"][site][k] for k in keys} == pytest.approx(
                {k: scores[k] for k in keys}, abs=metric_abs, nan_ok=True), site


def remove_started_runs(store, keep: Sequence[str]) -> None:
    """Stop and delete every run in `store` but `keep` (what a page test launched)."""
    from application import jobs  # here, not at the top: conftest imports this module for every test


    for run in store.runs():
        if run.id not in keep:
            jobs.cancel(run)
            deadline = time.time() + 60
            while run.status.state in ("queued", "running") and time.time() < deadline:
                time.sleep(0.2)
            jobs.delete(store, run)


def unescaped(markdown: str) -> str:
    """What a person reads of Markdown that dashboard.presenters.safe_text.md escaped: without the backslashes
    before punctuation and the invisible word joiners."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown).replace("\u2060", "")


def open_page(at, page: str, run_id: str | None = None, **query: str):
    """A dashboard page in the AppTest `at`: the app run once, the run (when given) and other query
    parameters set, the page switched to and run, with no exception."""
    at.run()
    if run_id:
        at.query_params["run"] = run_id
    for key, value in query.items():
        at.query_params[key] = value
    at.switch_page(page)
    at.run()
    assert not at.exception, (page, run_id, query, at.exception)
    return at


def one_answer(ref: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """Asserts that `inspect` (the alignment report of the files at hand), the check-up's data lens
    on the loaded federation, a saved check-up of the files (what the check-up page evaluates: its
    stored profile) and the Data page give one answer: the same findings in the same order with
    the same q, the same cells not testable with the same reasons, and the page drawing each
    finding as the check-up words it. Returns the findings (site, kind, feature)."""
    import json
    import tempfile

    from streamlit.testing.v1 import AppTest

    from application.checkup_jobs import start_checkup
    from data_adapters import inspect_data, load_federation
    from fedcore.checkup import check_up, finding_line
    from fedcore.store import RunStore

    report = inspect_data(ref)
    result = check_up(load_federation(ref).profile, {})
    with tempfile.TemporaryDirectory() as folder:
        store = RunStore(Path(folder))
        saved = start_checkup(store, ref, train=False).evaluate(store)
    cells = lambda found: [(f.site, f.kind, f.feature, f.q) for f in found]  # noqa: E731
    assert cells(saved.reported) == cells(result.reported)  # to the last bit of q
    untestable = lambda found: [(f.site, f.kind, f.feature, f.untestable) for f in found]  # noqa: E731
    assert untestable(saved.untestable()) == untestable(result.untestable())
    shown = [(f["site"], f["kind"], f["feature"]) for f in report.findings]
    assert shown == [(f.site, f.kind, f.feature) for f in result.reported]
    assert [f["q"] for f in report.findings] == pytest.approx([f.q for f in result.reported])
    assert sorted((f["site"], f["kind"], f["feature"], f["untestable"]) for f in report.not_testable) == sorted(
        (f.site, f.kind, f.feature, f.untestable) for f in result.untestable())

    def page(report: dict) -> None:
        from dashboard.widgets.data_report import show_alignment
        show_alignment(report)

    at = AppTest.from_function(page, kwargs={"report": json.loads(json.dumps(report.to_dict(), default=float))})
    at.run(timeout=60)
    assert not at.exception
    warnings = [w.value.replace("\\", "") for w in at.warning]
    for finding in report.findings:
        assert any(finding_line(finding).replace("\\", "") in w for w in warnings), finding_line(finding)
    return shown
