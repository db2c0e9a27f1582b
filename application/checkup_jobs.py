"""Starting a check-up (`fedcore.checkup`): profile the data, then train the runs its model lenses
read, as background jobs (the dashboard) or one after another in this process (the command line).

For a table: iFedAvg with a local f_out on `replicates` seeds (feature shifts, and labels through
the output layer), FedAvg (a shared model scored at every site), AdaFed (contribution) and
FedHealth2 (similarity); for images: FedAvg and inDISCO's local model (prototypes). Every run is
an ordinary run of the store, with the engine's settings but `rounds`.

`check_up_run` checks up the federation of a run already in the store (a Flower run above all,
whose rows the server never sees): the run's stored profile (`profile.npz`, sent by its sites) is
the data lens, and the run itself feeds the lens its algorithm records (by the roles above).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from data_adapters import check_reference, describe_reference, load_federation
from application import jobs
from fedcore.checkup import IMAGE_ROLES, TABLE_ROLES, Plan, add_runs, create_plan, round_paces, runs_of
from fedcore.errors import FedcoreError
from fedcore.interpret.disclosure import Policy
from fedcore.interpret.profile import Profile
from application.runner import execute, resolve_spec
from fedcore.store import Run, RunStore

# The role a run of each algorithm plays in a check-up (the parameters of TABLE_ROLES / IMAGE_ROLES
# are what a check-up sets; a run trained without them still records what its role reads).
ROLE_OF = {algorithm: role for roles in (TABLE_ROLES, IMAGE_ROLES) for role, (algorithm, _) in roles.items()}


def start_checkup(store: RunStore, data: Any, replicates: int = 3, rounds: int = 300, train: bool = True,
                  in_process: bool = False, progress: Callable[[str], None] | None = None,
                  disclosure: Mapping[str, Any] | None = None) -> Plan:
    """A new check-up of `data`; with `train`, its runs are queued as jobs (or, `in_process`,
    trained here one after another, `progress` told of each). `disclosure`: the policy the sites
    release their statistics at ('min_count', 'dp_epsilon'; the default policy where not given),
    recorded with the check-up and every run it trains."""
    reference = check_reference(data)
    policy = Policy.from_settings(disclosure)
    federation = load_federation(reference, 0, disclosure=policy)
    plan = create_plan(store, reference, describe_reference(reference), federation.profile, federation.site_names,
                       "table" if federation.is_tabular else "image", policy.to_dict())
    if train:
        train_lenses(store, plan, replicates, rounds, in_process, progress)
    return plan


def train_lenses(store: RunStore, plan: Plan, replicates: int = 3, rounds: int = 300, in_process: bool = False,
                 progress: Callable[[str], None] | None = None) -> Plan:
    """Train the runs that feed `plan`'s model lenses (`runs_of`), as jobs or, `in_process`, here one
    after another (`progress` told of each); a check-up of the data lens alone gets them later.
    Every run releases its sites' statistics at the check-up's disclosure policy."""
    contents = plan.contents
    by_role = {role: [resolve_spec(spec) for spec in specs]
               for role, specs in runs_of(plan.kind, contents.data, replicates, rounds, contents.disclosure).items()}
    if not in_process:
        # The queue starts jobs in the order they come, as many at once as there are slots: the
        # slowest first, so that it does not start last and run alone at the end (HAR's AdaFed,
        # twice an iFedAvg run's pace, last of six on two slots).
        # (a stable sort: a lens's runs keep their order among themselves)
        paces = round_paces(store, contents.data)
        queued = sorted(((role, spec) for role, specs in by_role.items() for spec in specs),
                        key=lambda pair: -paces.get(pair[1]["algorithm"], (0.0, ""))[0])
        ids: dict[str, list[str]] = {role: [] for role in by_role}
        for role, spec in queued:
            ids[role].append(jobs.submit(store, spec).id)
        for role, role_ids in ids.items():
            add_runs(plan, role, role_ids)
        return plan
    for role, specs in by_role.items():
        runs = [store.create(spec) for spec in specs]
        add_runs(plan, role, [run.id for run in runs])
        for run in runs:
            if progress is not None:
                progress(f"training {run.spec.algorithm} (seed {run.spec.seed}) for the "
                         f"{role.replace('_', ' ')} lens")
            execute(run)
    return plan


def check_up_run(store: RunStore, run: Run) -> Plan:
    """A new check-up of `run`'s federation: its stored profile as the data lens (none for images,
    or when a Flower site kept its statistics to itself), the run as the source of its own lens."""
    arrays = run.load_profile_arrays()
    profile = Profile.from_npz(arrays) if arrays is not None else None
    spec = run.spec
    data = spec.data
    try:
        described = describe_reference(check_reference(data))
    except FedcoreError:  # a run made elsewhere may name data this machine cannot parse; its id still says which
        described = str(data)
    federation = run.federation
    sites, kind = federation.site_names, "table" if federation.is_table else "image"
    plan = create_plan(store, data, f"{described} (run {run.id})", profile, sites, kind, spec.disclosure)
    role = ROLE_OF.get(spec.algorithm)
    if role is not None:
        add_runs(plan, role, [run.id])
    return plan
