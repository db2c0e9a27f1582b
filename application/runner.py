"""From a run specification to a finished run in the store: the one path the CLI, background
jobs and tests all take.

A spec is plain JSON: {"algorithm": ..., "data": ..., "params": {...}, "config": {...}}; `data` is
a data reference, a string or an object (see data_adapters.references.references), or a Flower federation
whose sites hold the data (`flower:HOST:PORT`, see data_adapters.references.flower_reference).
`resolve_spec` validates it and fills in every default, so the stored spec says exactly what ran.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, fields
from typing import Any

from data_adapters import check_reference, flower_reference, is_flower_reference, load_federation
from fedcore.algorithms import REGISTRY, build_algorithm, get_algorithm, params_from_dict
from fedcore.algorithms.base import Algorithm
from fedcore.config import TrainConfig
from fedcore.data_labels import LABEL_LENGTH
from fedcore.engine import Simulation
from fedcore.errors import Cancelled, FedcoreError, SpecError
from application.flower.eligibility import check_flower_run, runs_over_flower
from application.flower.launch import run_federation
from fedcore.interpret.disclosure import Policy, released_description
from fedcore.outcome import code_version, summarize
from fedcore.store import Run

__all__ = ["DERIVED_KEYS", "SPEC_KEYS", "algorithms", "execute", "resolve_spec", "runs_over_flower"]

ProgressCallback = Callable[[int, int, "dict[str, Any] | None"], None]

# disclosure: the policy the sites release their statistics at (fedcore.interpret.disclosure); a
# Flower federation's sites each set their own (their node config), so its spec records none.
SPEC_KEYS = ("algorithm", "data", "params", "config", "disclosure")
# What a stored spec adds: the run's id and creation time, the code's version, the kind of record
# its rounds hold (`fedcore.records`: the lens that shows it, readable without the algorithms).
DERIVED_KEYS = ("run_id", "created", "version", "record")


def algorithms() -> dict[str, type[Algorithm]]:
    """Every algorithm by name, with the declarations of its parameters and engine defaults (what
    the dashboard's Train page builds its forms from), and whether it runs over Flower."""
    return dict(REGISTRY)
FINAL_STATUS_ATTEMPTS = 10  # about ten seconds of retries before a run gives up recording its end


def resolve_spec(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A complete, validated spec; raises SpecError naming the offending key."""
    unknown = sorted(set(raw) - set(SPEC_KEYS) - set(DERIVED_KEYS))
    if unknown:
        raise SpecError(f"Unknown spec keys {unknown}; a spec has {list(SPEC_KEYS)}.")
    if not raw.get("algorithm"):
        raise SpecError("The spec names no algorithm.")
    algorithm = get_algorithm(str(raw["algorithm"]))
    params = params_from_dict(algorithm, dict(raw.get("params") or {}))
    config_values = {**algorithm.config_defaults, **dict(raw.get("config") or {})}
    known = {f.name for f in fields(TrainConfig)}
    bad = sorted(set(config_values) - known)
    if bad:
        raise SpecError(f"Unknown engine settings {bad}; known: {sorted(known)}.")
    try:
        config = TrainConfig(**config_values)
    except TypeError as error:
        raise SpecError(f"Invalid engine setting: {error}.") from None
    # A string or a JSON object; checked now (unknown source, bad option, missing file, tables
    # that do not combine) so that no run is created for data that cannot load. A Flower
    # federation's rows are at its sites: only its settings can be checked here.
    named = raw.get("data").get("name") if isinstance(raw.get("data"), Mapping) else None
    if isinstance(named, str) and len(named) > LABEL_LENGTH:  # every page shows it (data_labels cuts it there)
        raise SpecError(f"The data's name has at most {LABEL_LENGTH} characters; this one has {len(named):,}.")
    data = check_reference(raw.get("data") or "demo")
    disclosure = Policy.from_settings(raw.get("disclosure")).to_dict()
    if is_flower_reference(data):
        check_flower_run(algorithm(params), flower_reference(data))
        disclosure = None
    return {
        "algorithm": algorithm.name,
        "data": data,
        "params": asdict(params),
        "config": config.to_dict(),
        "disclosure": disclosure,
        "version": code_version(),
        "record": algorithm.Record.kind,
    }


def execute(run: Run, progress: ProgressCallback | None = None) -> dict[str, Any]:
    """Train the run described by its stored spec, recording everything; returns the summary.

    The run ends 'done', 'cancelled' (Ctrl-C / SIGTERM / cancel) or 'failed' with the error
    text; the exception is re-raised for the caller to report. A final state the disk refuses
    stays pending on `run` (see `Run.flush_status`).
    """
    state = {"round": 0}
    try:
        # Inside the try: a damaged spec or a disk that refuses the first status write also
        # ends the run 'failed' with its reason (written by mark_finished however the disk allows).
        run.require("spec.json")
        spec = run.spec
        config = TrainConfig(**spec.config)
        run.mark_started(config.rounds)
        if is_flower_reference(spec.data):
            # The sites train in their own processes; Flower's ServerApp records the run.
            return run_federation(run, progress)
        policy = Policy.from_settings(spec.disclosure)
        federation = load_federation(spec.data, config.seed, disclosure=policy)
        run.write_federation(released_description(federation.describe(), policy))
        if federation.profile is not None:
            run.save_profile(federation.profile.to_npz())
        algorithm = build_algorithm(spec.algorithm, spec.params)
        sim = Simulation(federation, algorithm, config)
        run.update_status(device=str(sim.device), execution=sim.executor.name,
                          execution_description=sim.executor.description, processes=sim.executor.processes)

        def on_round(round_: int, record: dict | None, arrays: dict) -> None:
            state["round"] = round_
            if record is not None:
                run.append_round(record)
                if arrays:
                    run.save_arrays(round_, arrays)
                run.heartbeat(round=round_, mean=record["mean"], worst=record["worst"])
            else:
                run.heartbeat(round=round_)
            if progress is not None:
                progress(round_, config.rounds, record)

        history = sim.run(on_round)
        summary = summarize(run, history[-1])
        run.write_summary(summary)
    except (KeyboardInterrupt, Cancelled):
        round_ = max(state["round"], run.raw_status().round)
        run.mark_finished("cancelled", f"Stopped by the user after round {round_}.")
        raise
    except FedcoreError as error:
        run.mark_finished("failed", str(error))
        raise
    except Exception as error:
        run.mark_finished("failed", f"{type(error).__name__}: {error}")
        raise
    else:
        run.mark_finished("done")
        return summary
    finally:
        run.flush_status(attempts=FINAL_STATUS_ATTEMPTS)  # a final status the disk refused: retry a while
