"""What the evidence scripts share: the datasets, the paper's seeds, training one configuration
through the product's own path, and a result cache so that a long `make evidence` can resume.

Every task is a plain JSON-able dict; its result is cached under `results/<part>.json` keyed by
the task (`.json.gz` for the parts in COMPRESSED), so RESULTS.md can be regenerated from the
recorded runs without retraining (`--fresh` retrains). Tasks run in worker processes with one torch thread each: on a 2-core
machine two single-threaded runs finish sooner than one run on two threads.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHARED = ROOT.parent / "shared" / "data"
RESULTS_DIR = HERE / "results"
# Parts whose results are thousands of small, repetitive entries (one per drawn case, under each
# disclosure policy) are kept gzip-compressed: the check-up suite's 1.5 MB of JSON is 40 KB so.
COMPRESSED = ("checkup_families", "random_split_null", "unseen_families")

# The iFedAvg paper's seeds (appendix A.3): hold-out split, initialisation and batch order.
PAPER_SEEDS = (2934384, 10231938, 8273, 2019231, 62739)

# The paper keeps the benchmarks' own standardisation for HAR and VSN; heart disease, like the
# paper's Ebola data, is standardised per site.
DATASETS: dict[str, dict[str, Any]] = {
    "har": {"source": "har", "path": str(SHARED / "uci_har" / "uci_har_time265_by_subject.csv.gz"),
            "standardization": "none"},
    "vehicle": {"source": "vehicle", "path": str(SHARED / "vehicle_sensor" / "vehicle_ditto_train_by_sensor.csv.gz"),
                "standardization": "none"},
    "heart": {"source": "heart", "path": str(SHARED / "heart_disease" / "canonical")},
}
# Rough relative cost of a run per dataset: tasks run cheapest first, so a `make evidence` cut
# short leaves whole tables for the small federations rather than half of every table.
DATASET_COST = {"heart": 1, "vehicle": 2, "har": 10}
DATASET_TITLES = {"har": "HAR (30 subjects)", "vehicle": "Vehicle sensors (23 sensors)",
                  "heart": "Heart disease (4 hospitals)"}


def simulation(algorithm: str, data: Any, params: dict | None = None, config: dict | None = None):
    """A Simulation built the way a run is (spec validated and completed by the runner), and
    its federation."""
    from data_adapters import load_federation
    from fedcore.algorithms import build_algorithm
    from fedcore.engine import Simulation, TrainConfig
    from application.runner import resolve_spec

    spec = resolve_spec({"algorithm": algorithm, "data": data, "params": params or {}, "config": config or {}})
    federation = load_federation(spec["data"], spec["config"]["seed"])
    return Simulation(federation, build_algorithm(algorithm, spec["params"]), TrainConfig(**spec["config"]))


def simulation_on(federation, algorithm: str, params: dict | None = None, config: dict | None = None):
    """A Simulation on a federation built in code (same defaults as a run spec)."""
    from fedcore.algorithms import build_algorithm, get_algorithm
    from fedcore.engine import Simulation, TrainConfig

    settings = {**get_algorithm(algorithm).config_defaults, **(config or {})}
    return Simulation(federation, build_algorithm(algorithm, params), TrainConfig(**settings))


def task_key(task: dict) -> str:
    return json.dumps(task, sort_keys=True)


def results_path(part: str) -> Path:
    """Where a part's results are kept (a tagged part, `PART-TAG`, as its part)."""
    compressed = part.split("-", 1)[0] in COMPRESSED
    return RESULTS_DIR / (f"{part}.json.gz" if compressed else f"{part}.json")


def load_results(part: str) -> dict[str, Any]:
    path = results_path(part)
    if not path.exists():
        path = RESULTS_DIR / f"{part}.json"  # recorded before its part was compressed
        if not path.exists():
            return {}
    data = path.read_bytes()
    entries = json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)
    return {task_key(entry["task"]): entry["result"] for entry in entries}


def cached_results(part: str, tasks: Iterable[dict]) -> dict[str, Any]:
    """The recorded results of those `tasks` that have one (no training)."""
    cached = load_results(part)
    return {task_key(t): cached[task_key(t)] for t in tasks if task_key(t) in cached}


def _save_results(part: str, results: dict[str, Any]) -> None:
    RESULTS_DIR.mkdir(exist_ok=True)
    entries = [{"task": json.loads(key), "result": value} for key, value in sorted(results.items())]
    path = results_path(part)
    tmp = RESULTS_DIR / f".{path.name}.tmp"
    if path.suffix == ".gz":  # no time stamp: the same results give the same bytes
        tmp.write_bytes(gzip.compress(json.dumps(entries, separators=(",", ":")).encode(), 9, mtime=0))
    else:
        tmp.write_text(json.dumps(entries, indent=1))
    os.replace(tmp, path)
    if path.suffix == ".gz" and (RESULTS_DIR / f"{part}.json").exists():
        (RESULTS_DIR / f"{part}.json").unlink()  # the uncompressed record it replaces


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)


def run_tasks(part: str, tasks: Iterable[dict], worker: Callable[[dict], Any], jobs: int, fresh: bool = False,
              reuse: Callable[[dict, Any], bool] | None = None) -> dict[str, Any]:
    """Results of every task (cached ones read back, the others computed in `jobs` processes and
    saved as each finishes); returns {task_key: result}. `reuse(task, cached)`: whether a cached
    result still holds (False: computed again, e.g. when the code it measured has changed).
    `fresh`: every one of `tasks` is computed again. The part's records of other tasks are kept
    as they are, whether or not they still hold."""
    results = load_results(part)
    tasks = list(tasks)
    asked = {task_key(t) for t in tasks}
    # the records of other tasks stay as recorded (a run of one family, or of the data lens, kept
    # none of the others', or dropped every lens's records when the engine's code had changed)
    if fresh:
        results = {key: value for key, value in results.items() if key not in asked}
    if reuse is not None:
        results = {key: value for key, value in results.items()
                   if key not in asked or reuse(json.loads(key), value)}
    todo = sorted((t for t in tasks if task_key(t) not in results),
                  key=lambda t: DATASET_COST.get(t.get("dataset", t.get("data")), 0))
    print(f"[{part}] {len(tasks) - len(todo)} of {len(tasks)} tasks cached, {len(todo)} to run", file=sys.stderr)
    if todo:
        started = time.perf_counter()
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"), initializer=_init_worker) as pool:
            futures = {pool.submit(worker, task): task for task in todo}
            for done, future in enumerate(as_completed(futures), 1):
                task = futures[future]
                results[task_key(task)] = future.result()
                _save_results(part, results)
                print(f"[{part}] {done}/{len(todo)} done ({time.perf_counter() - started:.0f} s): {task_key(task)}",
                      file=sys.stderr, flush=True)
    return {task_key(t): results[task_key(t)] for t in tasks}


def fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None or value != value else f"{value:.{digits}f}"


def mean_sd(values: list[float], digits: int = 3, expected: int | None = None) -> str:
    """'mean ± SD' over seeds (population SD, as few seeds give), with 'n=k' when fewer than the
    `expected` seeds are recorded."""
    import numpy as np

    values = [v for v in values if v is not None and v == v]
    if not values:
        return "–"
    short = f" (n={len(values)})" if expected is not None and len(values) < expected else ""
    return f"{np.mean(values):.{digits}f} ± {np.std(values):.{digits}f}{short}"