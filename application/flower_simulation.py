"""Our Flower app on Flower's own simulation engine (Ray), on a federation already in memory.

The same ServerApp and ClientApp as a real deployment, with every site a virtual SuperNode: what
`benchmarks/speed.py` compares with our in-process engine (seconds per round of the same
protocol). The run is recorded into a run store like any other.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from fedcore.federation import Federation
from fedcore.store import FlowerReference, Run, RunStore


def run_flower_simulation(
    federation: Federation, algorithm: str, store: Path, params: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None, cpus: int = 1,
) -> Run:
    """Train `algorithm` on `federation` (split with `config['seed']`) through Flower's simulation
    engine, each site a virtual SuperNode; `cpus` is how many sites run at once. Returns the run."""
    from flwr.simulation import run_simulation

    from application.flower.apps import make_client_app, make_server_app
    from application.runner import resolve_spec

    spec = resolve_spec({"algorithm": algorithm, "params": params or {}, "config": config or {}})
    spec["data"] = FlowerReference("Flower simulation engine", sites=len(federation.sites)).to_json()
    run = RunStore(store).create(spec)
    run.mark_started(spec["config"]["rounds"])
    seed = spec["config"]["seed"]

    def one_site(context: Any, run_seed: int, pooled: Any = None) -> Federation:
        # (the federation in memory is standardised already, over all its sites: nothing to pool)
        if run_seed != seed:
            raise ValueError(f"The federation in memory was split with seed {seed}, not {run_seed}.")
        site = federation.sites[int(context.node_config["partition-id"])]
        return replace(federation, sites=[site],
                       ground_truth=[g for g in federation.ground_truth if g.site == site.name])

    run_simulation(
        server_app=make_server_app(lambda context: run),
        client_app=make_client_app(one_site),
        num_supernodes=len(federation.sites),
        backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                        "init_args": {"num_cpus": cpus, "num_gpus": 0, "include_dashboard": False}},
    )
    return run


def round_seconds(run: Run) -> list[float]:
    """Wall seconds of each evaluated round (with evaluation every round: of every round)."""
    elapsed = [record.elapsed_s for record in run.rounds()]
    return [b - a for a, b in zip([0.0, *elapsed], elapsed)]
