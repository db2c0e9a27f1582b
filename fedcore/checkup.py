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

`evaluate` reads the plan, the profile and whichever runs have finished, runs every check
(`fedcore.interpret.data_checks`, `.model_checks`), and controls the false discovery rate over
all findings together (`fedcore.interpret.findings.decide`). What is shown as a finding is
significant at a 5 % false discovery rate and large enough to matter; everything tested stays in
the report with its p- and q-value.
"""

from __future__ import annotations

import io
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from fedcore.interpret import model_checks
from fedcore.interpret.data_checks import check_profile
from fedcore.interpret.findings import FDR, LENSES, Finding, decide
from fedcore.interpret.profile import Profile
from fedcore.errors import RunNotFound
from fedcore.store import Run, RunStore, atomic_write_bytes, atomic_write_json, now_iso, read_json

ROLES = ("feature_shifts", "shared_model", "contribution", "similarity", "prototypes")
# The lenses (columns of the check-up) each role's runs feed.
ROLE_LENSES = {
    "feature_shifts": ("feature shifts", "labels"),
    "shared_model": ("labels",),
    "contribution": ("contribution",),
    "similarity": ("similarity",),
    "prototypes": ("prototypes",),
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
    def reported(self) -> list[Finding]:
        """The findings shown: significant and material, not explained by a more specific one."""
        return [f for f in self.findings if f.significant and f.explained_by is None]

    def cell(self, site: str, lens: str) -> Finding | None:
        """The strongest finding of one lens at one site (None: nothing found, or not checked)."""
        return next((f for f in self.reported if f.site == site and f.lens == lens), None)

    def grid(self) -> dict[str, dict[str, Finding | None]]:
        return {site: {lens: self.cell(site, lens) for lens in LENSES} for site in self.sites}

    def lenses_checked(self) -> list[str]:
        return [lens for lens in LENSES if lens in self.sources]

    def to_dict(self) -> dict[str, Any]:
        return {
            "data": self.data, "label": self.label, "sites": self.sites, "fdr": FDR,
            "lenses": {lens: self.sources.get(lens) for lens in LENSES}, "pending": self.pending,
            "findings": [f.to_dict() for f in self.reported],
            "tested": len(self.findings),
            "not_testable": [f.to_dict() for f in self.findings if f.not_testable],
            "grid": {site: {lens: (f.kind if f else None) for lens, f in row.items()} for site, row in self.grid().items()},
        }

    def to_text(self) -> str:
        untested = sum(1 for f in self.findings if f.not_testable)
        lines = [f"Check-up of {self.label or self.data}: {len(self.sites)} sites, {len(self.findings)} cells tested, "
                 f"{len(self.reported)} findings at a {FDR:.0%} false discovery rate"
                 + (f"; {untested} of them not testable (a statistic they need was not shared)" if untested else "")]
        lines.append("Lenses: " + "; ".join(f"{lens}: {self.sources[lens]}" for lens in self.lenses_checked())
                     + (f"; still training: {', '.join(self.pending)}" if self.pending else ""))
        if not self.reported:
            lines.append("No site stands out from the others in any lens checked.")
        for f in self.reported:
            where = f" / {f.feature}" if f.feature else ""
            lines.append(f"  [{f.lens}] {f.site}{where}: {f.message} (q {format_q(f.q)})")
        return "\n".join(lines)


def format_q(q: float) -> str:
    """A q-value as people read it: "< 0.001", else three decimals."""
    return "< 0.001" if q < 0.001 else f"{q:.3f}"


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
        names = shifts[0].federation.get("feature_names", [])
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
        counts = {s["name"]: s.get("test_class_counts") or [] for s in run.federation.get("sites", [])}
        auc = [record["sites"].get(site, {}).get("roc_auc") for site in sites]
        if all(len(counts.get(site, [])) == 2 for site in sites):  # two classes: the AUC's null is known
            findings += model_checks.shared_model_auc(auc, [counts[s][1] for s in sites], [counts[s][0] for s in sites],
                                                      sites, run.id)
            sources["labels"] = ", ".join(filter(None, [sources.get("labels"), f"a shared model's scores ({run.id})"]))
    contribution = _last_record(runs.get("contribution", []))
    if contribution is not None:
        run, record = contribution
        accuracy = record.get("algorithm", {}).get("site_accuracy") or {}
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
        on_stamp = (record.get("algorithm", {}).get("test_on_stamp") or {}).get("local")
        if on_stamp:
            findings += model_checks.prototypes([on_stamp.get(s, np.nan) for s in sites], sites, run.id)
            sources["prototypes"] = f"inDISCO ({run.id})"
    return CheckUp(sites, decide(findings), sources)


def _last_record(runs: Sequence[Run]) -> tuple[Run, dict] | None:
    for run in reversed(list(runs)):
        records = run.rounds()
        if records:
            return run, records[-1]
    return None


# -- check-ups in the store ---------------------------------------------------------------------
@dataclass
class Plan:
    """A check-up's folder: what it checks and which runs feed it."""

    path: Path

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def contents(self) -> dict[str, Any]:
        value = read_json(self.path / "plan.json", {})
        return value if isinstance(value, dict) else {}

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
        kind = self.contents.get("kind")
        return kind if kind in ("table", "image") else ("table" if (self.path / "profile.npz").is_file() else "image")

    def runs(self, store: RunStore) -> dict[str, list[Run]]:
        """Its runs by role (those still in the store)."""
        found: dict[str, list[Run]] = {}
        for role, ids in (self.contents.get("runs") or {}).items():
            for run_id in ids if isinstance(ids, list) else []:
                try:
                    found.setdefault(role, []).append(store.get(str(run_id)))
                except RunNotFound:
                    continue
        return found

    def evaluate(self, store: RunStore) -> CheckUp:
        contents = self.contents
        runs = self.runs(store)
        finished = {role: [r for r in found if r.status.get("state") == "done"] for role, found in runs.items()}
        result = check_up(self.profile, finished, contents.get("sites"))
        # a failed or cancelled run is not pending: its lens stays unchecked (the page says why)
        result.pending = sorted(role for role, found in runs.items()
                                if any(r.status.get("state") in ACTIVE for r in found))
        result.data, result.label = contents.get("data"), contents.get("label", "")
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
    atomic_write_json(path / "plan.json", {"data": data, "label": label, "sites": list(sites), "created": now_iso(),
                                           "kind": kind, "disclosure": dict(disclosure) if disclosure else None,
                                           "runs": {}})
    return Plan(path)


def add_runs(plan: Plan, role: str, run_ids: Sequence[str]) -> None:
    contents = plan.contents
    contents.setdefault("runs", {}).setdefault(role, []).extend(run_ids)
    atomic_write_json(plan.path / "plan.json", contents)


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
