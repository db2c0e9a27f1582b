"""The check-up: which sites have which problem, from every lens, with calibrated evidence.

A check-up is a folder of the run store (`<store>/checkups/<id>/`):

    plan.json     the data it checks, when, and the runs that feed its model lenses, by role
    profile.npz   every site's federated statistics (`fedcore.interpret.profile`): the data lens

Roles of the runs (each trained like any run, and shown by its own lens page too):
    feature_shifts  iFedAvg with a local f_out, on several seeds (replicates: training noise
                    averages out of the mean, and its spread is shown with each cell)
    shared_model    FedAvg: one model for all sites, scored on each site's own hold-out
    contribution    AdaFed: how the server weighs each site's model
    similarity      FedHealth2: how far each site's statistics lie from the others'
    prototypes      inDISCO (images): where each site's prototypes look

`evaluate` reads the plan, the profile and whichever runs have finished, runs every check of the
registry (`fedcore.interpret.checks`: computed by `.data_checks` and `.model_checks`), and controls
the false discovery rate within each family of checks (`fedcore.interpret.findings.decide`). What
is shown as a finding is significant at a 5 % false discovery rate and large enough to matter;
everything tested stays in the report with its p- and q-value, and every cell that could not be
tested stays with its reason. A model lens's finding that a data finding explains (the same site
and feature) is shown in its own cell as agreeing with that lens.
"""

from __future__ import annotations

import io
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from fedcore.interpret import model_checks
from fedcore.interpret.checks import BY_KIND
from fedcore.interpret.data_checks import check_profile
from fedcore.interpret.findings import FDR, LENSES, Finding, decide
from fedcore.interpret.profile import Profile
from fedcore.errors import RunNotFound
from fedcore.records import Prototypes, SiteWeights
from fedcore.shapes import ANY, TEXT, ListOf, MapOf, Nullable, OneOf, Record
from fedcore.shapes import read_json as read_json_shaped
from fedcore.store import Run, RunStore, Scores, atomic_write_bytes, atomic_write_json, now_iso

ROLES = ("feature_shifts", "shared_model", "contribution", "similarity", "prototypes")
# The lenses (columns of the check-up) each role's runs feed.
ROLE_LENSES = {
    "feature_shifts": ("feature shifts", "labels"),
    "shared_model": ("labels",),
    "contribution": ("contribution",),
    "similarity": ("similarity",),
    "prototypes": ("prototypes",),
}
# The runs a check-up trains for its model lenses, by role: (algorithm, the parameters it sets).
TABLE_ROLES: dict[str, tuple[str, dict[str, Any]]] = {
    "feature_shifts": ("ifedavg", {"local_f_out": True, "scalar_w_out": True}),
    "shared_model": ("fedavg", {}),
    "contribution": ("adafed", {}),
    "similarity": ("fedhealth2", {}),
}
IMAGE_ROLES: dict[str, tuple[str, dict[str, Any]]] = {
    "shared_model": ("fedavg", {}),
    "prototypes": ("indisco-lm", {}),
}
ACTIVE = ("queued", "running")
FOLDER = "checkups"


@dataclass
class CheckUp:
    """Every site's findings, lens by lens."""

    sites: list[str]
    findings: list[Finding]  # decided (q-values), strongest first
    sources: dict[str, str] = field(default_factory=dict)  # lens -> what fed it (runs, the profile)
    pending: list[str] = field(default_factory=list)  # roles whose runs are still queued or training
    data: Any = None
    label: str = ""

    @property
    def tested(self) -> int:
        """How many cells were tested (those that could not be are findings too, `untestable`)."""
        return sum(f.tested for f in self.findings)

    @property
    def reported(self) -> list[Finding]:
        """The findings shown: significant and material, not explained by a more specific one."""
        return [f for f in self.findings if f.significant and f.explained_by is None]

    def cell(self, site: str, lens: str) -> Finding | None:
        """The strongest finding of one lens at one site (None: nothing found, or not checked)."""
        return next((f for f in self.reported if f.site == site and f.lens == lens), None)

    def agreeing(self, site: str, lens: str) -> list[Finding]:
        """This lens's significant findings at the site that another lens's finding explains: the
        lens agrees with that lens (shown in its cell as such, never as 'nothing found')."""
        return [f for f in self.findings if f.site == site and f.lens == lens and f.significant
                and f.explained_by is not None and BY_KIND[f.explained_by].lens != lens]

    def agreeing_with(self, finding: Finding) -> list[Finding]:
        """Other lenses' significant findings at the finding's site (and feature) that it explains."""
        return [f for f in self.findings if f.site == finding.site and f.feature == finding.feature and f.significant
                and f.explained_by == finding.kind and f.lens != finding.lens]

    def untestable(self, site: str | None = None, lens: str | None = None) -> list[Finding]:
        """The cells that could not be tested (of one site and lens, when given), each with its reason."""
        return [f for f in self.findings if f.untestable and site in (None, f.site) and lens in (None, f.lens)]

    def grid(self) -> dict[str, dict[str, Finding | None]]:
        return {site: {lens: self.cell(site, lens) for lens in LENSES} for site in self.sites}

    def lenses_checked(self) -> list[str]:
        return [lens for lens in LENSES if lens in self.sources]

    def to_dict(self) -> dict[str, Any]:
        return {
            "data": self.data, "label": self.label, "sites": self.sites, "fdr": FDR,
            "lenses": {lens: self.sources.get(lens) for lens in LENSES}, "pending": self.pending,
            "findings": [f.to_dict() for f in self.reported],
            "tested": self.tested,
            "not_testable": [f.to_dict() for f in self.untestable()],
            "agreeing": [f.to_dict() for f in self.findings if f.significant and f.explained_by is not None
                         and BY_KIND[f.explained_by].lens != f.lens],
            "grid": {site: {lens: (f.kind if f else None) for lens, f in row.items()} for site, row in self.grid().items()},
        }

    def to_text(self) -> str:
        lines = [f"Check-up of {self.label or self.data}: {len(self.sites)} sites, {self.tested} cells tested, "
                 f"{len(self.reported)} findings at a {FDR:.0%} false discovery rate (within each family of checks)"]
        lines.append("Lenses: " + "; ".join(f"{lens}: {self.sources[lens]}" for lens in self.lenses_checked())
                     + (f"; still training: {', '.join(self.pending)}" if self.pending else ""))
        if not self.reported:
            lines.append("No site stands out from the others in any lens checked.")
        for f in self.reported:
            agree = sorted({a.lens for a in self.agreeing_with(f)})
            lines.append(f"  [{f.lens}] {finding_line(f)}" + (f" — {', '.join(agree)} agree" if agree else ""))
        summary = untestable_summary(self.untestable())
        return "\n".join(lines + ([summary] if summary else []))


def format_q(q: float) -> str:
    """A q-value as people read it: "< 0.001", else three decimals."""
    return "< 0.001" if q < 0.001 else f"{q:.3f}"


def finding_line(finding: Finding | Mapping[str, Any]) -> str:
    """One finding (or its `to_dict`) as a line: site / feature: message (q)."""
    values = finding.to_dict() if isinstance(finding, Finding) else finding
    where = f" / {values['feature']}" if values.get("feature") else ""
    return f"{values['site']}{where}: {values['message']} (q {format_q(values['q'])})"


def untestable_summary(findings: Sequence[Finding | Mapping[str, Any]]) -> str:
    """How many cells could not be tested, by reason ('' when none)."""
    reasons: dict[str, int] = {}
    for finding in findings:
        reason = finding.untestable if isinstance(finding, Finding) else finding["untestable"]
        reasons[reason] = reasons.get(reason, 0) + 1
    if not reasons:
        return ""
    return (f"Not testable: {sum(reasons.values())} cells ("
            + "; ".join(f"{count} × {reason}" for reason, count in sorted(reasons.items(), key=lambda r: -r[1])) + ")")


def check_up(profile: Profile | None, runs: Mapping[str, Sequence[Run]], sites: Sequence[str] | None = None) -> CheckUp:
    """The check-up from a data profile and finished runs by role (any may be missing)."""
    sites = list(sites or (profile.sites if profile is not None else []))
    findings: list[Finding] = []
    sources: dict[str, str] = {}
    if profile is not None:
        findings += check_profile(profile)
        sources["data profile"] = "every site's federated statistics (no rows moved)"
    shifts = [run for run in runs.get("feature_shifts", []) if run.array_rounds()]
    if shifts:
        layers = [run.load_arrays(run.array_rounds()[-1]) for run in shifts]
        names = list(shifts[0].federation.feature_names)
        stacked = {layer: np.stack([a[layer] for a in layers]) for layer in ("b_in", "w_in") if layer in layers[0]}
        ids = ", ".join(run.id for run in shifts)
        findings += model_checks.feature_shifts(stacked, sites, names, ids)
        sources["feature shifts"] = f"iFedAvg, {len(shifts)} run(s): {ids}"
        if "w_out" in layers[0]:
            findings += model_checks.output_layer(np.stack([a["w_out"] for a in layers]), sites, ids)
            sources["labels"] = f"iFedAvg's local output layer ({ids})"
    shared = _last_record(runs.get("shared_model", []))
    if shared is not None:
        run, record = shared
        # a count a site withheld (None: its disclosure policy) leaves its AUC without its null: not testable
        counts = {s.name: s.test_class_counts for s in run.federation.sites}
        auc = [record.sites.get(site, {}).get("roc_auc") for site in sites]
        if all(len(counts.get(site, [])) == 2 for site in sites):  # two classes: the AUC's null is known
            findings += model_checks.shared_model_auc(auc, [counts[s][1] for s in sites], [counts[s][0] for s in sites],
                                                      sites, run.id)
            sources["labels"] = ", ".join(filter(None, [sources.get("labels"), f"a shared model's scores ({run.id})"]))
    contribution = _last_record(runs.get("contribution", []))
    if contribution is not None:
        run, record = contribution
        accuracy = record.algorithm.site_accuracy if isinstance(record.algorithm, SiteWeights) else {}
        if all(site in accuracy for site in sites):
            findings += model_checks.contribution([accuracy[s] for s in sites], sites, run.id)
            sources["contribution"] = f"AdaFed ({run.id})"
    similarity = [run for run in runs.get("similarity", []) if run.array_rounds()]
    if similarity:
        arrays = similarity[-1].load_arrays(similarity[-1].array_rounds()[-1])
        if "distance" in arrays:
            findings += model_checks.similarity(arrays["distance"], sites, similarity[-1].id)
            sources["similarity"] = f"FedHealth2 ({similarity[-1].id})"
    prototypes = _last_record(runs.get("prototypes", []))
    if prototypes is not None:
        run, record = prototypes
        on_stamp = record.algorithm.test_on_stamp.get("local") if isinstance(record.algorithm, Prototypes) else None
        if on_stamp:
            findings += model_checks.prototypes([on_stamp.get(s, np.nan) for s in sites], sites, run.id)
            sources["prototypes"] = f"inDISCO ({run.id})"
    return CheckUp(sites, decide(findings), sources)


def _last_record(runs: Sequence[Run]) -> tuple[Run, Scores] | None:
    for run in reversed(list(runs)):
        records = run.rounds()
        if records:
            return run, records[-1]
    return None


# -- check-ups in the store ---------------------------------------------------------------------
KINDS = ("table", "image")
PLAN = Record({
    "data": ANY, "label": TEXT, "sites": ListOf(TEXT), "created": TEXT, "kind": OneOf(KINDS),
    "disclosure": Nullable(MapOf(ANY)), "runs": MapOf(ListOf(TEXT)),
})


@dataclass(frozen=True)
class PlanContents:
    """plan.json: what a check-up checks and which runs feed it. A field the file lacks, or holds
    of another shape, reads as its default here."""

    data: Any = None  # the data reference it checks
    label: str = ""  # what the page calls it
    sites: Sequence[str] | None = None  # the sites, in the federation's order (None: from its runs)
    created: str | None = None
    kind: str | None = None  # 'table' or 'image'; None in check-ups made before it was recorded
    disclosure: Mapping[str, Any] | None = None  # the policy its runs release their statistics at
    runs: Mapping[str, Sequence[str]] = field(default_factory=dict)  # role -> run ids

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class Plan:
    """A check-up's folder: what it checks and which runs feed it."""

    path: Path

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def contents(self) -> PlanContents:
        value, _ = read_json_shaped(self.path / "plan.json", PLAN, "plan.json")
        names = {f.name for f in fields(PlanContents)}
        return PlanContents(**{k: v for k, v in (value or {}).items() if k in names})

    @property
    def profile(self) -> Profile | None:
        try:
            with np.load(self.path / "profile.npz", allow_pickle=False) as data:
                return Profile.from_npz(data)
        except (OSError, ValueError, KeyError):
            return None

    @property
    def kind(self) -> str:
        """'table' or 'image' (check-ups made before it was recorded: a table when they have a profile)."""
        kind = self.contents.kind
        return kind if kind in KINDS else ("table" if (self.path / "profile.npz").is_file() else "image")

    def runs(self, store: RunStore) -> dict[str, list[Run]]:
        """Its runs by role (those still in the store)."""
        found: dict[str, list[Run]] = {}
        for role, ids in self.contents.runs.items():
            for run_id in ids:
                try:
                    found.setdefault(role, []).append(store.get(run_id))
                except RunNotFound:
                    continue
        return found

    def evaluate(self, store: RunStore) -> CheckUp:
        contents = self.contents
        runs = self.runs(store)
        finished = {role: [r for r in found if r.status.state == "done"] for role, found in runs.items()}
        result = check_up(self.profile, finished, contents.sites)
        # a failed or cancelled run is not pending: its lens stays unchecked (the page says why)
        result.pending = sorted(role for role, found in runs.items()
                                if any(r.status.state in ACTIVE for r in found))
        result.data, result.label = contents.data, contents.label
        return result


def create_plan(store: RunStore, data: Any, label: str, profile: Profile | None, sites: Sequence[str],
                kind: str = "table", disclosure: Mapping[str, Any] | None = None) -> Plan:
    """A new check-up folder with its data's profile; its runs are added with `add_runs`. `kind`:
    'table' or 'image' (images have no data lens: their lenses are the models'). `disclosure`: the
    policy the sites were asked to release their statistics at (what each site did release at is
    in its profile)."""
    folder = store.root / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    while True:
        path = folder / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"
        try:
            path.mkdir()
            break
        except FileExistsError:
            continue
    if profile is not None:
        atomic_write_bytes(path / "profile.npz", profile.to_npz())
    atomic_write_json(path / "plan.json", PlanContents(data, label, list(sites), now_iso(), kind,
                                                       dict(disclosure) if disclosure else None).to_json())
    return Plan(path)


def add_runs(plan: Plan, role: str, run_ids: Sequence[str]) -> None:
    contents = plan.contents
    runs = {**contents.runs, role: [*contents.runs.get(role, []), *run_ids]}
    atomic_write_json(plan.path / "plan.json", replace(contents, runs=runs).to_json())


def plans(store: RunStore) -> list[Plan]:
    """Every check-up in the store, newest first."""
    folder = store.root / FOLDER
    if not folder.is_dir():
        return []
    return sorted((Plan(p) for p in folder.iterdir() if (p / "plan.json").is_file()), key=lambda p: p.id, reverse=True)


def profile_bytes(profile: Profile) -> bytes:
    return profile.to_npz()


def read_profile(data: bytes) -> Profile:
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        return Profile.from_npz(arrays)


def to_json(result: CheckUp) -> str:
    return json.dumps(result.to_dict(), indent=2, default=float)


def runs_of(kind: str, data: Any, replicates: int, rounds: int,
            disclosure: Mapping[str, Any] | None = None) -> dict[str, list[dict[str, Any]]]:
    """The specs of the runs a check-up of `kind` ('table', 'image') trains, by role: iFedAvg on
    `replicates` seeds, every other algorithm once, each `rounds` rounds; with `disclosure`, the
    policy their sites release their statistics at (the check-up's)."""
    roles = TABLE_ROLES if kind == "table" else IMAGE_ROLES
    policy = {"disclosure": dict(disclosure)} if disclosure else {}
    return {role: [{"algorithm": algorithm, "data": data, "params": params, "config": {"rounds": rounds, "seed": seed},
                    **policy}
                   for seed in (range(replicates) if role == "feature_shifts" else range(1))]
            for role, (algorithm, params) in roles.items()}


# Seconds a round on this kind of machine where the store has no finished run of an algorithm to time
# (benchmarks/README.md: HAR's 30 sites, the compiled path, 2 cores, medians; smaller federations
# train faster). inDISCO's image rounds have no benchmark.
BENCHMARK_SECONDS_PER_ROUND = {"ifedavg": 0.031, "fedavg": 0.033, "adafed": 0.053, "fedhealth2": 0.033}


@dataclass(frozen=True)
class Estimate:
    """How long a check-up's model lenses take to train, and what the figure rests on."""

    seconds: float
    basis: str


def round_paces(store: RunStore, data: Any) -> dict[str, tuple[float, str]]:
    """Each algorithm's seconds per round and what the figure rests on: the median of its finished
    runs in the store (those on `data` if any, else on any data), else the benchmark's figure."""
    key = json.dumps(data, sort_keys=True, default=str)
    timed: dict[str, list[tuple[bool, float]]] = {}
    for run in store.runs():
        status = run.status
        rounds_done, start, end = status.round, status.started_at, status.heartbeat
        if status.state == "done" and rounds_done > 0 and start is not None and end is not None and end > start:
            spec = run.spec
            same = json.dumps(spec.data, sort_keys=True, default=str) == key
            timed.setdefault(spec.algorithm, []).append((same, (end - start) / rounds_done))
    paces = {algorithm: (pace, "the benchmark's pace (HAR, 2 cores)")
             for algorithm, pace in BENCHMARK_SECONDS_PER_ROUND.items()}
    for algorithm, runs in timed.items():
        same = [pace for on_same, pace in runs if on_same]
        paces[algorithm] = (float(np.median(same or [pace for _, pace in runs])),
                            f"the pace of finished runs of {'this' if same else 'other'} data in this store")
    return paces


def training_estimate(store: RunStore, kind: str, data: Any, replicates: int, rounds: int) -> Estimate | None:
    """The training time of a check-up's runs (`runs_of`), one after another, at each algorithm's
    `round_paces`; None where one has none. Starting each run (a few seconds) is not counted."""
    paces = round_paces(store, data)
    seconds, bases = 0.0, set()
    for specs in runs_of(kind, data, replicates, rounds).values():
        algorithm = specs[0]["algorithm"]
        if algorithm not in paces:
            return None
        pace, basis = paces[algorithm]
        seconds += len(specs) * rounds * pace
        bases.add(basis)
    return Estimate(seconds, " and ".join(sorted(bases)))
