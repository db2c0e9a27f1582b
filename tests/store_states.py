"""A run store holding a run of every algorithm family in every state a run passes through, written
directly with `fedcore.store` as a worker would leave it at that moment:

    queued        spec and status only: no data loaded, no federation.json
    starting      the worker has started ('running', round 0) but not loaded the data yet
    no round yet  'running' with its federation described, no evaluated round recorded
    failed        stopped with an error before its first evaluated round
    cancelled     stopped by the user before its first evaluated round
    interrupted   its worker died after one evaluated round (status still says 'running')

'Running' runs name this process as their worker (alive); the interrupted one a process that has
exited. Each family's 'interrupted' run is a real one-round run, so its records are what the
engine writes.

Beside the runs, check-ups (`fedcore.checkup`) fed by runs in each state: per state one of the
table data (the data lens from a run's stored profile; iFedAvg, FedAvg, AdaFed and FedHealth2 in
their roles) and one of the images (inDISCO in the prototypes role).
"""

from __future__ import annotations

import os
import subprocess
import time

from fedcore.checkup import add_runs, create_plan
from fedcore.interpret.profile import Profile
from application.runner import execute, resolve_spec
from fedcore.store import RunStore, to_json

IMAGES = {"source": "synthetic_scans", "images": 150, "size": 28, "split": "iid", "sites": 3,
          "inject": ["stamp:site1"]}
FAMILIES = {  # record kind -> a small spec of an algorithm that records it
    "feature_shifts": {"algorithm": "ifedavg", "config": {"rounds": 1}},
    "site_similarity": {"algorithm": "fedhealth2", "params": {"pretrain_epochs": 1}, "config": {"rounds": 1}},
    "site_weights": {"algorithm": "adafed", "config": {"rounds": 1}},
    "prototypes": {"algorithm": "indisco-gm", "data": IMAGES, "config": {"rounds": 1, "local_epochs": 1},
                   "params": {"prototypes_per_class": 2, "prototype_dim": 8, "last_layer_epochs": 1,
                              "explain_images": 4}},
    "mixture": {"algorithm": "apfl", "config": {"rounds": 1}},
    "none": {"algorithm": "fedavg", "config": {"rounds": 1}},
}
STATES = ("queued", "starting", "no round yet", "failed", "cancelled", "interrupted")
# A finished run beside a family's runs, as the Prototypes page compares schemes run on the same data
# with the same seed: the bias experiment's LM done while its GM waits in the queue.
SIBLINGS = {"prototypes": "indisco-lm"}
# The role each family's runs play in a check-up (fedcore.checkup.ROLES); APFL's feed none.
CHECKUP_ROLES = {"feature_shifts": "feature_shifts", "none": "shared_model", "site_weights": "contribution",
                 "site_similarity": "similarity", "prototypes": "prototypes"}


def dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def build(root) -> dict[tuple[str, str], str]:
    """The store at `root`; returns (family, state) -> run id."""
    store = RunStore(root)
    ids = {}
    for family, raw in FAMILIES.items():
        spec = resolve_spec(raw)
        finished = store.create(spec)
        execute(finished)  # one evaluated round: what the interrupted run had recorded
        description = to_json(finished.federation)
        if family in SIBLINGS:
            execute(store.create(resolve_spec({**raw, "algorithm": SIBLINGS[family]})))
        for state in STATES:
            run = finished if state == "interrupted" else store.create(spec)
            if state == "starting":
                run.mark_started(spec["config"]["rounds"])
            elif state == "no round yet":
                run.mark_started(spec["config"]["rounds"])
                run.write_federation(description)
                run.heartbeat(round=0)
            elif state == "failed":
                run.mark_started(spec["config"]["rounds"])
                run.write_federation(description)
                run.mark_finished("failed", "DataError: site 'north' has no rows left after the hold-out split")
            elif state == "cancelled":
                run.mark_started(spec["config"]["rounds"])
                run.mark_finished("cancelled", "Stopped by the user after round 0.")
            elif state == "interrupted":
                (run.path / "summary.json").unlink()
                run.update_status(state="running", finished=None, pid=dead_pid(), heartbeat=time.time())
            ids[family, state] = run.id
    for (family, state), run_id in ids.items():  # check that each reads as meant
        status = store.get(run_id).status
        expected = {"starting": "running", "no round yet": "running"}.get(state, state)
        assert status.state == expected, (family, state, status)
        assert status.pid in (None, os.getpid()) or state == "interrupted"
    return ids


def build_checkups(store: RunStore, ids: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """Check-ups fed by the runs of `build`, state by state; returns (kind, state) -> check-up id."""
    table_run = store.get(ids["feature_shifts", "interrupted"])  # trained a round: it stored its profile
    profile = Profile.from_npz(table_run.load_profile_arrays())
    image_sites = store.get(ids["prototypes", "interrupted"]).federation.site_names
    plans = {}
    for state in STATES:
        table = create_plan(store, table_run.spec.data, f"table data, runs {state}", profile, profile.sites)
        image = create_plan(store, IMAGES, f"images, runs {state}", None, image_sites, "image")
        for family, role in CHECKUP_ROLES.items():
            add_runs(image if family == "prototypes" else table, role, [ids[family, state]])
        plans["table", state], plans["image", state] = table.id, image.id
    return plans


def sibling_ids(store: RunStore, ids: dict[tuple[str, str], str]) -> list[str]:
    """The finished sibling runs `build` added."""
    return sorted({r.id for r in store.runs()} - set(ids.values()))
