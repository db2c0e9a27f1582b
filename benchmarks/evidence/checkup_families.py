"""Part 5: does the check-up find problems nobody listed? Corruption families, drawn at random.

Each case puts one problem into one site's raw values (original units) of a federation: a family
of problems (`corruptions.py`: shifts of every row or of one class, gain and offset errors, unit
conversions, a channel replaced by noise, a constant channel, clipping, partial zero-fill, any
number used as a missing code, duplicated rows, swapped and mis-mapped columns, values missing at
random and not at random, label flips, label noise, a class's rows left out) with its site,
column, class, strength and values drawn from the case's seed. Federations: HAR (30 subjects),
vehicle sensors (23), heart disease (4 hospitals), the demo with its built-in problems off, and
MNIST digits as a table (7×7 block grey levels, 8 sites by label skew).

The check-up is run through its public entry points only (`profile_federation` and `check_up`
for the data lens; for every lens, per-site CSV files checked up with `start_checkup` as a user's
files are), so the same script measures any version of the detector.

Scoring. A site counts as found only by a reported finding that the same federation without the
problem does not already show there (same site, lens, kind and feature). Per case: found or not;
the right column named (the site's strongest new finding names the corrupted column, or for
swapped and mis-mapped columns either of the two; label and row families name none); and the
share of the *other* sites with a new finding. Goals (issue 23) at each family's material
strength: site-level recall ≥ 90 %, right column ≥ 80 % of the hits, ≤ 5 % of the other sites
with a new finding; for the data lens and for all lenses separately. A family whose strength is a
share of a column's values (noise, clipping, zero-fill, missing codes, missing values) counts a
case at the share of the site's values its problem changed (`corruptions.changed_share`): clipping
at the 22 % quantile of a column that is 0 for a third of its rows, or zeros written over zeros,
changes nothing, and such a case is no problem to find at the strength it was drawn with.

Honest protocol: seeds 0-9 are the tuning half (anything tuned — a threshold of the detector —
may look at them), seeds 10-19 the held-out half, on which the figures are reported.

Disclosure policies (issue 24): every case runs under a named policy (`--policy`): `default`, the
sites' statistics as the product releases them (at least 10 rows each, quantile blocks, rounding);
`none`, as computed (what the check-up read before disclosure control); `strict`, at least 20
rows; `dp`, the default with Laplace noise at ε = 1 per release. The same families, sites and
seeds under each, so the difference is the policy's cost (RESULTS.md §6).

    .venv/bin/python benchmarks/evidence/checkup_families.py --quick          # smoke test, a minute
    nice -n 10 .venv/bin/python benchmarks/evidence/checkup_families.py       # data lens, every case
    .venv/bin/python benchmarks/evidence/checkup_families.py --lenses all     # + model lenses (slow)
    .venv/bin/python benchmarks/evidence/checkup_families.py --policy default none --lenses data --half held-out
                                                                              # the policy's cost (§6)
    .venv/bin/python benchmarks/evidence/checkup_families.py --write          # RESULTS.md §5, §6 and README,
                                                                              # from the record; runs nothing
    PYTHONPATH=../other-tree .venv/bin/python benchmarks/evidence/checkup_families.py --tag other
                                                                              # another detector's code
Results are cached per case in results/checkup_families[-TAG].json.gz with the detector they
measured (a hash of its code) and the case drawn: a case whose detector or draw changed is run
again, the others are reused.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from common import cached_results, load_results, results_path, run_tasks  # noqa: E402
from corruptions import (FAMILIES, Family, corrupt, describe, draw_case, family_of, load_table, measured,  # noqa: E402
                         strength_of)

PART = "checkup_families"
DATASETS = ("har", "vehicle", "heart", "demo", "mnist")
TITLES = {"har": "HAR (30 subjects)", "vehicle": "Vehicle sensors (23 sensors)",
          "heart": "Heart disease (4 hospitals)", "demo": "Demo (8 synthetic hospitals, built-in problems off)",
          "mnist": "MNIST as a table (8 sites, label skew)"}
SEEDS = tuple(range(20))
TUNING, HELD_OUT = SEEDS[:10], SEEDS[10:]
HALVES = {"tuning": TUNING, "held-out": HELD_OUT}
QUICK_DATASETS, QUICK_SEEDS = ("heart", "demo"), (0, 1, 10, 11)
# Every lens: the model lenses train (iFedAvg replicates, FedAvg, AdaFed, FedHealth2), with fewer
# rounds than a check-up's default: on 2 cores about 5 s a case of heart, 12 s of the demo and of
# vehicle, 34 s of MNIST and a minute of HAR (with 2 jobs about 30 s: its 187 cases took about 100
# minutes), so every held-out seed and the first tuning seed of each.
MODEL_SEEDS = (0, *HELD_OUT)
MODEL_ROUNDS, MODEL_REPLICATES = 100, 2
GOAL_RECALL, GOAL_FEATURE, GOAL_OTHERS = 0.90, 0.80, 0.05
DATA_LENS = "data profile"
PRECISION = "precision"  # the check whose lone hits rest on decimals the suite's changes write (README)
TARGET = "label"  # the target column of the CSV files written for the model lenses
README = HERE.parents[1] / "README.md"
README_BEGIN, README_END = "<!-- checkup-families:begin -->", "<!-- checkup-families:end -->"
README_POLICY_BEGIN, README_POLICY_END = "<!-- disclosure-cost:begin -->", "<!-- disclosure-cost:end -->"
# Disclosure policies a case can run under, as the sites' settings (`Policy.from_settings`; None: no
# policy, the statistics as computed). The product's default is the report's (§5); run.py measures
# REPORTED, the others on request.
POLICIES: dict[str, dict[str, Any] | None] = {"default": {}, "none": None, "strict": {"min_count": 20},
                                              "dp": {"dp_epsilon": 1.0}}
POLICY_TITLES = {"default": "default (≥ 10 rows)", "none": "none (as computed)", "strict": "strict (≥ 20 rows)",
                 "dp": "noise (≥ 10 rows, ε = 1)"}
REPORTED = ("default", "none")


# -- tasks ----------------------------------------------------------------------------------------
def tasks(datasets: Sequence[str] = DATASETS, seeds: Sequence[int] = SEEDS, lenses: Sequence[str] = ("data", "all"),
          families: Sequence[str] = tuple(FAMILIES), policies: Sequence[str] = REPORTED) -> list[dict]:
    """Every case: (dataset, family, seed, lenses, policy), and per dataset, lens set and policy the
    untouched federation (family 'none'): the findings the data show without any problem put in.
    Every lens runs at the default policy only (a check-up's sites always release at a policy)."""
    out = []
    for lens_set in lenses:
        chosen_seeds = seeds if lens_set == "data" else [s for s in seeds if s in MODEL_SEEDS]
        for policy in (policies if lens_set == "data" else [p for p in policies if p == "default"]):
            for dataset in datasets:
                common = {"dataset": dataset, "lenses": lens_set, "policy": policy}
                out.append({**common, "family": "none", "seed": 0})
                out += [{**common, "family": f, "seed": s} for f in families for s in chosen_seeds]
    return out


def disclosure(policy: str) -> dict[str, Any]:
    """The keyword a profile is computed with under a named policy: {} for the default (so that
    another tree's detector, with a default of its own, is measured as it ships)."""
    if policy == "default":
        return {}
    from fedcore.interpret.disclosure import Policy

    settings = POLICIES[policy]
    return {"policy": None if settings is None else Policy.from_settings(settings)}


@functools.cache
def fingerprint(lenses: str) -> str:
    """A hash of the code a result measured: the check-up and its checks (data lens), and for every
    lens the whole engine that trains the model lenses' runs."""
    import fedcore

    package = Path(fedcore.__file__).resolve().parent
    files = ([package / "checkup.py", *sorted((package / "interpret").glob("*.py"))] if lenses == "data"
             else sorted([*package.rglob("*.py"), *(package.parent / "application").rglob("*.py")]))
    # names relative to the package for the data lens (its recorded hashes stay valid), to the
    # repository for every lens, whose files include application/ beside the package
    root = package if lenses == "data" else package.parent
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


@functools.cache
def commit() -> str:
    """The commit of the fedcore being measured (with '+changes' when its tree differs from it;
    'unknown' for a tree outside git, e.g. a `git archive` of another branch's commit)."""
    return _git_commit()


def _git_commit() -> str:
    import fedcore

    root = Path(fedcore.__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=10", "HEAD"], capture_output=True,
                              text=True, timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "fedcore", "application"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+changes" if dirty else "")


def case_of(task: dict) -> dict | None:
    if task["family"] == "none":
        return None
    table = load_table(task["dataset"])
    return measured(table, draw_case(table, family_of(task["family"]), task["seed"]))


# -- one case -----------------------------------------------------------------------------------
def evaluate(task: dict) -> dict[str, Any]:
    """The check-up of one case's federation: its reported findings, compactly. A data-lens case
    keeps only the findings the untouched federation does not show (all that scoring reads: the
    record stays small); the untouched federation's own task keeps all of its."""
    table = load_table(task["dataset"])
    case = case_of(task)
    started = time.perf_counter()
    result, refused = _check_up(corrupt(table, case) if case else table, task["lenses"], task["policy"])
    findings = [] if result is None else [compact(f, table) for f in result.reported]
    closest = {}
    if case is not None and task["lenses"] == "data":
        findings = not_untouched(findings, task["dataset"], task["policy"])
        closest = {"closest": closest_cells(result, case, table, _untouched(task["dataset"], task["policy"]))}
    return {"case": case, "detector": fingerprint(task["lenses"]), "commit": commit(),
            "sites": list(table.sites), "lenses": [] if result is None else list(result.sources),
            "reported": 0 if result is None else len(result.reported), "findings": findings, "refused": refused,
            "seconds": round(time.perf_counter() - started, 2), **closest}


def closest_cells(result, case: dict, table, untouched: set = frozenset()) -> dict[str, list | None]:
    """Why a case was missed, from the cells the check-up tested at the corrupted site on the
    corrupted columns (every cell of the site for the families that name none), less those the
    federation reports `untouched` (keys as `_key`: the site's own differences, not the problem's):
    its material cell of the smallest q, and its cell of the smallest q whatever its size, each
    [kind, p, q]."""
    truth = case["truth"]

    def on_truth(finding) -> bool:
        if finding.site != truth["site"] or not np.isfinite(finding.q):
            return False
        if (finding.site, finding.lens, finding.kind, finding.feature) in untouched:
            return False
        return not truth["columns"] or finding.feature in truth["columns"] or \
            table.column_of(finding.feature) in truth["columns"]

    cells = [f for f in result.findings if on_truth(f)]
    material = min((f for f in cells if f.material), key=lambda f: f.q, default=None)
    strongest = min(cells, key=lambda f: f.q, default=None)
    as_list = lambda f: None if f is None else [f.kind, float(f"{f.p:.3g}"), float(f"{f.q:.3g}")]  # noqa: E731
    return {"material": as_list(material), "strongest": as_list(strongest)}


WHY = ("a material cell, not significant (q ≥ 5 %)", "significant, but smaller than material",
       "neither material nor significant", "material and significant, but explained by a finding there untouched")


WHY_READING = (
    "Reading. *A material cell, not significant*: the check measured a change as large as it calls "
    "material, but the other sites differ among themselves by as much, so its leave-one-out test over the "
    "sites cannot set the site apart at a 5 % false discovery rate among its site's cells of its family: from "
    "per-site summary statistics, calibrated against the other sites, these cases are out of reach at this strength "
    "(the median q says how far). *Significant, but smaller than material*: the site was set apart, by a "
    "change smaller than the check reports (or by a check whose material size the problem does not reach). "
    "*Neither*: no test at the site saw the change. *Explained*: a finding the check-up already reports "
    "there on the federation without the problem explains the new cell away (it is then not shown). Cells "
    "the federation reports untouched are left out: they are the site's own differences, not the problem's.")


BOUND_READING = (
    "How far a different multiple-testing rule could go: the held-out recall had each case missed with a "
    "material cell not significant been found once that cell's own p (the material cell of smallest q at the "
    "corrupted site and column, as recorded) fell below a line, with no correction for the other cells of its "
    "family. No calibrated rule can do that, so this is about the most any false-discovery rule over these "
    "statistics can reach (a site's other material cells are not recorded): beyond it the checks need more "
    "power, not a looser correction.")


def why_missed(case_result: dict) -> int | None:
    """Which of WHY a missed case's closest cells say (None: not recorded)."""
    closest = case_result.get("closest")
    if closest is None:
        return None
    material, strongest = closest["material"], closest["strongest"]
    from fedcore.interpret.findings import FDR

    if material is not None and material[2] < FDR:
        return 3
    if material is not None:
        return 0
    return 1 if strongest is not None and strongest[2] < FDR else 2


def _check_up(table, lenses: str, policy: str) -> tuple[Any, str | None]:
    if lenses == "data":
        from fedcore.checkup import check_up

        return check_up(table.profile(**disclosure(policy)), {}), None
    return _every_lens(table)


def compact(finding, table) -> str:
    """site, lens, kind, feature, column (only where it is not the feature's own name), q."""
    column = table.column_of(finding.feature)
    return "\t".join([finding.site, finding.lens, finding.kind, finding.feature or "",
                      column if column and column != finding.feature else "", f"{finding.q:.3g}"])


_UNTOUCHED: dict[tuple[str, str], set] = {}


def _untouched(dataset: str, policy: str) -> set:
    """The data lens's findings on the dataset as it is, under the policy (computed once per process)."""
    if (dataset, policy) not in _UNTOUCHED:
        table = load_table(dataset)
        result, _ = _check_up(table, "data", policy)
        _UNTOUCHED[(dataset, policy)] = {_key(parse(compact(f, table))) for f in result.reported}
    return _UNTOUCHED[(dataset, policy)]


def not_untouched(findings: Iterable[str], dataset: str, policy: str) -> list[str]:
    """The compact findings the data lens does not report on the dataset as it is (`_untouched`)."""
    seen = _untouched(dataset, policy)
    return [f for f in findings if _key(parse(f)) not in seen]


def _key(finding: dict) -> tuple:
    return finding["site"], finding["lens"], finding["kind"], finding["feature"]


def _every_lens(table) -> tuple[Any, str | None]:
    """Every lens, as a user's files get it: one CSV per site, a check-up trained in this process.
    A federation the product refuses to load gives (None, its message)."""
    import tempfile

    from application.checkup_jobs import start_checkup
    from fedcore.errors import FedcoreError
    from fedcore.store import RunStore

    with tempfile.TemporaryDirectory() as folder:
        reference = write_csv_sites(table, Path(folder))
        try:
            store = RunStore(Path(folder) / "store")
            plan = start_checkup(store, reference, MODEL_REPLICATES, MODEL_ROUNDS, train=True, in_process=True)
            return plan.evaluate(store), None
        except FedcoreError as error:
            return None, str(error)


def write_csv_sites(table, folder: Path) -> dict[str, Any]:
    """One CSV per site (a categorical column as its category, a missing value as an empty cell,
    the class by name), and the data reference that reads them with the table's column kinds."""
    import pandas as pd

    from data_adapters.alignment.align import MIN_ROWS

    columns = table.column_names
    files = []
    for index, site in enumerate(table.sites):
        x = table.x[index]
        frame = {}
        for column in columns:
            features = table.features_of(column)
            if table.kind_of(column) == "categorical":
                values = np.array([f.split("=", 1)[1] for f in (table.features[j] for j in features)], dtype=object)
                block = x[:, features]
                cell = np.where(np.isnan(block).any(axis=1), None,
                                values[np.argmax(np.nan_to_num(block, nan=-1.0), axis=1)])
                frame[column] = cell
            else:
                frame[column] = x[:, features[0]]
        frame[TARGET] = np.array(table.classes, dtype=object)[table.y[index]]
        path = folder / f"site{index:02d}.csv"
        pd.DataFrame(frame).to_csv(path, index=False, float_format="%.17g")  # every digit: both lenses read one table
        files.append(str(path))
    # a federation whose smallest site has fewer rows than a CSV source takes by default (vehicle: 7)
    # is loaded as an analyst would, with `min_rows` lowered so that every site takes part
    smallest = min(len(y) for y in table.y)
    return {"source": "csv", "files": files, "site_names": list(table.sites), "target": TARGET,
            "kinds": {c: table.kind_of(c) for c in columns},
            **({"min_rows": smallest} if smallest < MIN_ROWS else {})}


# -- scoring --------------------------------------------------------------------------------------
def parse(finding: str) -> dict[str, Any]:
    site, lens, kind, feature, column, q = finding.split("\t")
    return {"site": site, "lens": lens, "kind": kind, "feature": feature or None, "column": column or None,
            "q": float(q)}


def score(result: dict, baseline: dict, lens: str | None = None) -> dict[str, Any]:
    """One case against the untouched federation: `hit` (the corrupted site has a new finding),
    `named` (its strongest new finding names a corrupted column; None when the family names no
    column or nothing was found), `others_flagged` of `others` (other sites with a new finding).
    `lens`: only that lens's findings (None: every lens)."""
    new = new_findings(result, baseline, lens)
    truth = result["case"]["truth"]
    at_site = [f for f in new if f["site"] == truth["site"]]  # strongest first, as reported
    named = None
    if at_site and truth["columns"]:
        named = (at_site[0]["column"] or at_site[0]["feature"]) in truth["columns"]
    others = [s for s in result["sites"] if s != truth["site"]]
    return {"hit": bool(at_site), "named": named, "others_flagged": len({f["site"] for f in new} - {truth["site"]}),
            "others": len(others), "kinds": sorted({f["kind"] for f in at_site})}


def new_findings(result: dict, baseline: dict, lens: str | None = None) -> list[dict]:
    """The case's reported findings (parsed, strongest first) that the untouched federation's
    `baseline` does not show (same site, lens, kind and feature); `lens`: only that lens's."""
    def chosen(findings: Iterable[str]) -> list[dict]:
        return [f for f in map(parse, findings) if lens is None or f["lens"] == lens]

    seen = {_key(f) for f in chosen(baseline["findings"])}
    return [f for f in chosen(result["findings"]) if _key(f) not in seen]


def _baselines(results: dict[str, Any], tasks_of: dict[str, dict]) -> dict[str, dict]:
    """Per data set, the untouched federation's record among `tasks_of` (key -> task, one lens set
    and policy)."""
    return {t["dataset"]: results[k] for k, t in tasks_of.items() if t["family"] == "none"}


def scored(results: dict[str, Any], lens_set: str, lens: str | None, policy: str = "default") -> list[dict]:
    """Every recorded case of a lens set under a policy with its score and what it was (family,
    dataset, seed, strength, material)."""
    tasks_of = {k: json.loads(k) for k in results}
    chosen = {k: t for k, t in tasks_of.items() if t["lenses"] == lens_set and t.get("policy") == policy}
    baselines = _baselines(results, chosen)
    rows = []
    for key, task in chosen.items():
        if task["family"] == "none" or task["dataset"] not in baselines:
            continue
        result = results[key]
        case, family = result["case"], family_of(task["family"])
        rows.append({**task, "strength": strength_of(case), "material": family.material(case),
                     "refused": result.get("refused"), **score(result, baselines[task["dataset"]], lens)})
    return rows


def summary(rows: list[dict]) -> dict[str, Any]:
    """Recall, right column (of the hits that can name one) and the share of other sites flagged."""
    hits = [r["hit"] for r in rows]
    named = [r["named"] for r in rows if r["named"] is not None]
    others = sum(r["others"] for r in rows)
    return {"cases": len(rows), "found": sum(hits), "recall": np.mean(hits) if hits else np.nan,
            "named_of": len(named), "named": sum(named), "feature": np.mean(named) if named else np.nan,
            "others_flagged": sum(r["others_flagged"] for r in rows), "others": others,
            "false": sum(r["others_flagged"] for r in rows) / others if others else np.nan}


def meets(s: dict) -> bool:
    return bool(s["recall"] >= GOAL_RECALL and (s["named_of"] == 0 or s["feature"] >= GOAL_FEATURE)
                and s["false"] <= GOAL_OTHERS)


# -- report ----------------------------------------------------------------------------------------
def _pct(value: float) -> str:
    return "–" if value != value else f"{100 * value:.0f} %"


def _share(k: int, n: int) -> str:
    return f"{k}/{n}" if n else "–"


def _cells(s: dict) -> list[str]:
    return [f"{_pct(s['recall'])} ({_share(s['found'], s['cases'])})",
            f"{_pct(s['feature'])} ({_share(s['named'], s['named_of'])})",
            f"{100 * s['false']:.1f} % ({_share(s['others_flagged'], s['others'])})" if s["others"] else "–"]


HEAD = "| recall | right column | other sites with a new finding |"


def _in(rows: list[dict], half: str, material: bool | None = True, **match: Any) -> list[dict]:
    return [r for r in rows if r["seed"] in HALVES[half] and (material is None or r["material"] == material)
            and all(r[k] == v for k, v in match.items())]


def headline(rows: list[dict], half: str = "held-out") -> list[str]:
    lines = ["| data set " + HEAD + " goals met |", "|---|---|---|---|---|"]
    datasets = [d for d in DATASETS if _in(rows, half, dataset=d)]
    for dataset in datasets:
        s = summary(_in(rows, half, dataset=dataset))
        lines.append(f"| {TITLES[dataset]} | " + " | ".join(_cells(s)) + f" | {'yes' if meets(s) else 'no'} |")
    s = summary(_in(rows, half))
    lines.append("| **all** | " + " | ".join(_cells(s)) + f" | {'yes' if meets(s) else 'no'} |")
    return lines


def per_family(rows: list[dict], half: str = "held-out", families: dict[str, Family] = FAMILIES) -> list[str]:
    datasets = [d for d in DATASETS if _in(rows, half, dataset=d)]
    lines = ["| group | family | material from " + HEAD + " " + " | ".join(datasets) + " |",
             "|---|---|---|---|---|---|" + "---|" * len(datasets)]
    for family in families.values():
        chosen = _in(rows, half, family=family.name)
        if not chosen:
            continue
        s = summary(chosen)
        material = (f"{family.strength.material:g} ({family.strength.unit})" if family.strength else "every case")
        grid = [_share(sum(r["hit"] for r in _in(chosen, half, dataset=d)), len(_in(chosen, half, dataset=d)))
                for d in datasets]
        lines.append(f"| {family.group} | {family.title} | {material} | " + " | ".join(_cells(s)) + " | "
                     + " | ".join(grid) + " |")
    return lines


def per_family_on(rows: list[dict], dataset: str, half: str = "held-out") -> list[str]:
    lines = ["| family " + HEAD, "|---|---|---|---|"]
    for family in FAMILIES.values():
        chosen = _in(rows, half, dataset=dataset, family=family.name)
        if chosen:
            lines.append(f"| {family.title} | " + " | ".join(_cells(summary(chosen))) + " |")
    return lines


BINS = ((0.0, 0.5), (0.5, 1.0), (1.0, 2.0), (2.0, np.inf))  # strength / material


def against_strength(rows: list[dict], half: str = "held-out", families: dict[str, Family] = FAMILIES) -> list[str]:
    labels = ["< ½ ×", "½–1 ×", "1–2 ×", "≥ 2 ×"]
    lines = ["| family | " + " | ".join(f"{b} material" for b in labels) + " |", "|---|" + "---|" * len(labels)]
    for family in families.values():
        if family.strength is None:
            continue
        chosen = _in(rows, half, material=None, family=family.name)
        if not chosen:
            continue
        cells = []
        for low, high in BINS:
            inside = [r["hit"] for r in chosen if low <= r["strength"] / family.strength.material < high]
            cells.append(_share(sum(inside), len(inside)))
        lines.append(f"| {family.title} | " + " | ".join(cells) + " |")
    return lines


def data_cases(results: dict[str, Any], policy: str | None = None) -> dict[tuple[str, str, int], dict]:
    """The data lens's recorded cases by (dataset, family, seed), under `policy` (None: any; a
    case's draw is the same under every policy)."""
    return {(t["dataset"], t["family"], t["seed"]): r for t, r in ((json.loads(k), r) for k, r in results.items())
            if t["lenses"] == "data" and t["family"] != "none" and policy in (None, t.get("policy"))}


def missed(rows: list[dict], results: dict[str, Any], half: str = "held-out", per_family: int = 3,
           families: dict[str, Family] = FAMILIES) -> list[str]:
    """What was put in where the data lens found nothing: the cases to look at first."""
    cases = {key: r["case"] for key, r in data_cases(results).items()}
    lines = []
    for family in families.values():
        chosen = _in(rows, half, family=family.name)
        misses = [r for r in chosen if not r["hit"]]
        if misses:
            lines.append(f"- {family.title} ({len(misses)} of {len(chosen)} missed):")
            lines += [f"  - {r['dataset']} seed {r['seed']} "
                      + describe(cases[(r["dataset"], r["family"], r["seed"])], title=False) for r in misses[:per_family]]
    return lines or ["- none"]


BORDERLINE_Q = 0.01  # an other site's new finding at q ≥ this is one Benjamini–Hochberg's line moved past


def other_sites_table(results: dict[str, Any], half: str = "held-out", policy: str = "default") -> list[str]:
    """What the other sites' new findings are, by check (data lens, every data set, the cases at
    material strength): how many, in how many cases, their median q, the share of them at q ≥
    BORDERLINE_Q, and the cell that came back most often (its site, feature and cases)."""
    rows = {(r["dataset"], r["family"], r["seed"]): r for r in _in(scored(results, "data", DATA_LENS, policy), half)}
    baselines = _baselines(results, {k: t for k, t in ((k, json.loads(k)) for k in results)
                                     if t["lenses"] == "data" and t.get("policy") == policy})
    found: dict[str, list[tuple[tuple, dict]]] = {}
    for key, result in data_cases(results, policy).items():
        if key not in rows:
            continue
        site = result["case"]["truth"]["site"]
        for f in new_findings(result, baselines[key[0]], DATA_LENS):
            if f["site"] != site:
                found.setdefault(f["kind"], []).append((key, f))
    if not found:
        return []
    from fedcore.interpret.checks import KINDS  # kind -> the check's title

    lines = ["| check | other sites' new findings | in cases | median q | of them q ≥ " + f"{BORDERLINE_Q:g}"
             + " | the cell most often back |", "|---|---|---|---|---|---|"]
    for kind, items in sorted(found.items(), key=lambda kv: -len(kv[1])):
        q = np.array([float(f["q"]) for _, f in items])
        cells: dict[tuple, set] = {}
        for key, f in items:
            cells.setdefault((key[0], f["site"], f["feature"]), set()).add(key)
        (dataset, site, feature), cases = max(sorted(cells.items()), key=lambda kv: len(kv[1]))  # ties: the first
        lines.append(f"| {KINDS[kind]} | {len(items)} | {len({key for key, _ in items})} | {np.median(q):.2g} "
                     f"| {np.mean(q >= BORDERLINE_Q):.0%} | {dataset}: {site}'s {feature or 'rows'} "
                     f"({len(cases)} case{'s' if len(cases) > 1 else ''}) |")
    return lines


def why_table(rows: list[dict], results: dict[str, Any], half: str = "held-out",
              families: dict[str, Family] = FAMILIES) -> list[str]:
    """Per family, why the data lens missed what it missed (`why_missed`), with the median q and
    p of the material cells that were not significant (how far from reportable the closest test
    was, with and without the other cells of its family) and how many of those have p ≥ 5 %: not
    reportable even as the only cell tested."""
    recorded = data_cases(results, "default")
    lines = ["| family | missed | " + " | ".join(WHY) + " | median q of those material cells | their median p "
             "| of them, p ≥ 5 % |", "|---|---|" + "---|" * len(WHY) + "---|---|---|"]
    totals, beyond = [0] * len(WHY), 0
    for family in families.values():
        misses = [recorded[(r["dataset"], r["family"], r["seed"])] for r in _in(rows, half, family=family.name)
                  if not r["hit"]]
        reasons = [why_missed(result) for result in misses]
        if not misses or None in reasons:
            continue
        counts = [reasons.count(k) for k in range(len(WHY))]
        totals = [a + b for a, b in zip(totals, counts)]
        cells = [result["closest"]["material"] for result, k in zip(misses, reasons) if k == 0]
        alone = sum(p >= UNCORRECTED[0] for _, p, _ in cells)
        beyond += alone
        lines.append(f"| {family.title} | {len(misses)} | " + " | ".join(map(str, counts)) + " | "
                     + (f"{np.median([q for *_, q in cells]):.2g} | {np.median([p for _, p, _ in cells]):.2g} | {alone}"
                        if cells else "– | – | –") + " |")
    if len(lines) == 2:
        return []
    lines.append(f"| **all** | {sum(totals)} | " + " | ".join(map(str, totals)) + f" | | | {beyond} |")
    return lines


UNCORRECTED = (0.05, 0.01, 0.001)  # p-values a missed case's material cell is counted below in `recall_bound`


def recall_bound(rows: list[dict], results: dict[str, Any], threshold: float, half: str = "held-out"
                 ) -> tuple[int, int]:
    """(cases found, cases) had every missed case's closest material cell been reported at
    p < `threshold` with no correction for the other cells tested: what the data lens's statistics
    allow whatever the multiple-testing rule (the cases missed for another reason stay missed)."""
    return _recall_bounds(rows, results, (threshold,), half)[0]


def recall_bounds(rows: list[dict], results: dict[str, Any], half: str = "held-out") -> list[str]:
    """`recall_bound` at each UNCORRECTED line, as read: '90.4 % (510/564) at p < 0.01'."""
    return [f"{100 * found / cases:.1f} % ({_share(found, cases)}) at p < {t:g}"
            for t, (found, cases) in zip(UNCORRECTED, _recall_bounds(rows, results, UNCORRECTED, half)) if cases]


def _recall_bounds(rows: list[dict], results: dict[str, Any], thresholds: Sequence[float], half: str
                   ) -> list[tuple[int, int]]:
    """`recall_bound` at each of `thresholds`, the records read once for all of them."""
    recorded = data_cases(results, "default")
    chosen = _in(rows, half)
    missed_p = []  # the closest material cell's p of each case missed with such a cell not significant
    for r in chosen:
        result = recorded.get((r["dataset"], r["family"], r["seed"]))
        if not r["hit"] and result is not None and why_missed(result) == 0:
            missed_p.append(result["closest"]["material"][1])
    found = sum(r["hit"] for r in chosen)
    return [(found + sum(p < t for p in missed_p), len(chosen)) for t in thresholds]


def _alone(rows: list[dict], half: str = "held-out") -> dict[str, list[dict]]:
    """By check: the cases (material strength) its findings alone found at the corrupted site (no
    other kind new there)."""
    alone: dict[str, list[dict]] = {}
    for row in _in(rows, half):
        if row["hit"] and len(row.get("kinds", ())) == 1:
            alone.setdefault(row["kinds"][0], []).append(row)
    return alone


def _alone_line(rows: list[dict], found: list[dict], half: str = "held-out") -> tuple[str, str]:
    """A check's lone cases (`found`, of `_alone`): their families ('values shifted 4; …') and the
    recall without them."""
    chosen = _in(rows, half)
    titles = {f.name: f.title for f in FAMILIES.values()}
    families: dict[str, int] = {}
    for row in found:
        families[row["family"]] = families.get(row["family"], 0) + 1
    named = "; ".join(f"{titles[f]} {n}" for f, n in sorted(families.items(), key=lambda kv: -kv[1]))
    left = sum(r["hit"] for r in chosen) - len(found)
    return named, f"{_pct(left / len(chosen))} ({_share(left, len(chosen))})" if chosen else "–"


def found_alone(rows: list[dict], half: str = "held-out") -> list[str]:
    """By check: the cases (material strength) that its findings alone found at the corrupted site,
    the families they were of, and the recall without them: how much of the recall rests on that
    one check."""
    from fedcore.interpret.checks import KINDS  # kind -> the check's title
    lines = ["| check | cases it alone found | of the families | recall without them |", "|---|---|---|---|"]
    for kind, found in sorted(_alone(rows, half).items(), key=lambda kv: -len(kv[1])):
        named, without = _alone_line(rows, found, half)
        lines.append(f"| {KINDS.get(kind, kind)} | {len(found)} | {named} | {without} |")
    return lines


def _datasets_of(rows: list[dict]) -> list[str]:
    """The data sets the scored `rows` hold, in the suite's order."""
    return [d for d in DATASETS if any(r["dataset"] == d for r in rows)]


def _measured(results: dict[str, Any]) -> str:
    seen = sorted({(r.get("commit", "?"), r.get("detector", "?")) for r in results.values()})
    return "; ".join(f"commit {c} (detector code {d})" for c, d in seen) or "nothing yet"


def section(results: dict[str, Any]) -> str:
    data = scored(results, "data", DATA_LENS)
    lines = ["## 5. The check-up on problems nobody listed: corruption families drawn at random", "",
             __doc__.split("\n\n", 1)[1].split("\n\n    .venv")[0].strip(), "",
             f"Measured: {_measured(results)}. Figures are of the **held-out half** (seeds {HELD_OUT[0]}–"
             f"{HELD_OUT[-1]}) at each family's material strength unless a heading says otherwise. Commands: "
             "`nice -n 10 .venv/bin/python benchmarks/evidence/checkup_families.py [--lenses data all]`, then "
             "`--write` for this section and the README's table.", ""]
    if not data:
        return "\n".join([*lines, "No case recorded yet."])
    lines += ["### Data lens, held-out half", "", *headline(data), "",
              "Tuning half (seeds 0–9), the same way: " + _overall_line(data, "tuning") + ".", "",
              "### Data lens per family (held-out half, every data set)", "",
              "The last columns: cases found per data set.", "", *per_family(data), "",
              "### Data lens: recall against strength (held-out half, every data set)", "",
              "Strength as a multiple of the family's material strength.", "", *against_strength(data), "",
              "### Data lens: cases missed at material strength (held-out half, up to three per family)", "",
              *missed(data, results), ""]
    why = why_table(data, results)
    if why:
        lines += ["### Data lens: why the missed cases were missed (held-out half, material strength)", "",
                  "For each missed case, the cells the check-up tested at the corrupted site on the corrupted "
                  "columns (every cell of the site for the label and row families): a finding needs a cell both "
                  "material (the check's declared size) and significant (q < 5 % within its family of checks at "
                  "its site).",
                  "", *why, "", WHY_READING, "", BOUND_READING, "",
                  *(f"- {bound}" for bound in recall_bounds(data, results)), ""]
    alone = found_alone(data)
    if len(alone) > 2:
        lines += ["### Data lens: cases one check alone found (held-out half, material strength)", "",
                  "A case counts for a check when its findings are the only new ones at the corrupted site; the "
                  "last column is the recall without those cases. 'Recorded at another precision' finds "
                  "decimals that a family's change wrote into a column the sites record in whole numbers (heart's "
                  "ages and pressures, an MNIST block blank at every site): true of the corrupted values, though a "
                  "real change of those kinds keeps the whole numbers (`benchmarks/whole_number_corruptions.py`).",
                  "", *alone, ""]
    others = other_sites_table(results)
    if others:
        lines += ["### Data lens: what the other sites' new findings are (held-out half, material strength)", "",
                  "By check, every data set: the findings at sites other than the corrupted one that the "
                  "untouched federation does not show. Most are cells the untouched federation tests just above "
                  "their site's line: the corrupted site is part of every other site's reference, so it moves "
                  "their statistics (each site's line is its own: Benjamini–Hochberg within each family at each "
                  "site); with four sites (heart) the corrupted site is one of three in every other site's "
                  "reference.", "", *others, ""]
    for dataset in DATASETS:
        if _in(data, "held-out", dataset=dataset):
            lines += [f"### Data lens on {TITLES[dataset]} (held-out half)", "", *per_family_on(data, dataset), ""]
    every = scored(results, "all", None)
    if every:
        data_of_every = scored(results, "all", DATA_LENS)
        measured = _datasets_of(every)
        seeds = f"{', '.join(TITLES[d] for d in measured)}: seeds {', '.join(map(str, MODEL_SEEDS))}"
        lines += [f"### Every lens ({seeds}; the first tuning, the others held-out)", "",
                  f"The model lenses train iFedAvg ({MODEL_REPLICATES} replicates), FedAvg, AdaFed and FedHealth2 "
                  f"for {MODEL_ROUNDS} rounds on the case's files written as one CSV per site (the product's "
                  "defaults for CSV: per-site standardisation; where a site has fewer rows than a CSV source takes "
                  "by default, vehicle's 7, with `min_rows` lowered to them as an analyst would); the data lens of "
                  "the same check-up beside them.", "",
                  "| family | data lens: " + HEAD[2:] + " every lens: " + HEAD[2:], "|---|---|---|---|---|---|---|"]
        for family in FAMILIES.values():
            a, b = (_in(rows, "held-out", family=family.name) for rows in (data_of_every, every))
            if a:
                lines.append(f"| {family.title} | " + " | ".join(_cells(summary(a)) + _cells(summary(b))) + " |")
        for dataset in measured if len(measured) > 1 else []:
            a, b = (_in(rows, "held-out", dataset=dataset) for rows in (data_of_every, every))
            lines.append(f"| *{TITLES[dataset]}* | " + " | ".join(_cells(summary(a)) + _cells(summary(b))) + " |")
        a, b = _in(data_of_every, "held-out"), _in(every, "held-out")
        lines.append("| **all** | " + " | ".join(_cells(summary(a)) + _cells(summary(b))) + " |")
        refused = [r for r in every if r["refused"]]
        if refused:
            lines += ["", f"{len(refused)} case(s) refused by the product when loading the files: "
                      + "; ".join(f"{r['family']} on {r['dataset']} (seed {r['seed']}): {r['refused'][:160]}"
                                  for r in refused[:5])]
        lines.append("")
    return "\n".join(lines)


def _by_policy(results: dict[str, Any], half: str) -> tuple[list[str], dict[str, list[dict]], list[str]]:
    """The policies the data lens was measured under (on the half), each one's scored cases
    restricted to those recorded under all of them (the very same draws), and the data sets."""
    measured = [p for p in POLICIES if _in(scored(results, "data", DATA_LENS, p), half)]
    rows = {p: _in(scored(results, "data", DATA_LENS, p), half) for p in measured}
    same = set.intersection(*({(r["dataset"], r["family"], r["seed"]) for r in chosen} for chosen in rows.values())) \
        if rows else set()
    rows = {p: [r for r in chosen if (r["dataset"], r["family"], r["seed"]) in same] for p, chosen in rows.items()}
    datasets = [d for d in DATASETS if any(r["dataset"] == d for r in rows[measured[0]])] if measured else []
    return measured, rows, datasets


def policy_section(results: dict[str, Any], half: str = "held-out") -> str:
    """RESULTS.md §6: the data lens under each disclosure policy measured, on the very same cases
    (those recorded under every one of them): recall, right column and other sites with a new
    finding per data set and per family."""
    lines = ["## 6. What disclosure control costs the check-up", "",
             "The data lens of §5 on the same cases (families, sites, columns, strengths and seeds), every site "
             "releasing its statistics at one disclosure policy (README, *Disclosure control*): "
             + "; ".join(f"*{POLICY_TITLES[p]}*" for p in POLICIES) + ". A case counts under a policy against the "
             "untouched federation under the same policy. Commands: `nice -n 10 .venv/bin/python "
             "benchmarks/evidence/checkup_families.py --policy default none --lenses data --half held-out`, then "
             "`--write`.", ""]
    measured, rows, datasets = _by_policy(results, half)
    if len(measured) < 2:
        return "\n".join([*lines, f"Not yet measured under two policies ({', '.join(measured) or 'none'})."])
    same = {(r["dataset"], r["family"], r["seed"]) for r in rows[measured[0]]}
    lines += [f"{len(same)} cases at material strength ({half} half: seeds {HALVES[half][0]}–{HALVES[half][-1]}; "
              f"{', '.join(TITLES[d] for d in datasets)}).", "",
              "| data set | policy " + HEAD, "|---|---|---|---|---|"]
    for dataset in [*datasets, None]:
        for k, policy in enumerate(measured):
            chosen = [r for r in rows[policy] if dataset is None or r["dataset"] == dataset]
            name = ("**all**" if dataset is None else TITLES[dataset]) if k == 0 else ""
            lines.append(f"| {name} | {POLICY_TITLES[policy]} | " + " | ".join(_cells(summary(chosen))) + " |")
    lines += ["", "Per family, every data set together: recall (cases found), then the other sites with a new "
              "finding.", "",
              "| family | " + " | ".join(f"recall, {POLICY_TITLES[p]}" for p in measured) + " | "
              + " | ".join(f"other sites, {POLICY_TITLES[p]}" for p in measured) + " |",
              "|---|" + "---|" * (2 * len(measured))]
    for family in FAMILIES.values():
        per = {p: summary([r for r in rows[p] if r["family"] == family.name]) for p in measured}
        if per[measured[0]]["cases"]:
            lines.append(f"| {family.title} | " + " | ".join(
                f"{_pct(per[p]['recall'])} ({_share(per[p]['found'], per[p]['cases'])})" for p in measured) + " | "
                + " | ".join(f"{100 * per[p]['false']:.1f} %" if per[p]["others"] else "–" for p in measured) + " |")
    order = " · ".join(POLICY_TITLES[p].split(" (")[0] for p in measured)
    lines += ["", f"Per family and data set: cases found ({order}) of those put in.", "",
              "| family | " + " | ".join(TITLES[d].split(" (")[0] for d in datasets) + " |",
              "|---|" + "---|" * len(datasets)]
    for family in FAMILIES.values():
        cells = []
        for dataset in datasets:
            found = [[r["hit"] for r in rows[p] if r["family"] == family.name and r["dataset"] == dataset]
                     for p in measured]
            cells.append(" · ".join(str(sum(f)) for f in found) + f" of {len(found[0])}" if found[0] else "–")
        lines.append(f"| {family.title} | " + " | ".join(cells) + " |")
    changed = [(r_a, r_b) for r_a, r_b in zip(*(sorted(rows[p], key=lambda r: (r["dataset"], r["family"], r["seed"]))
                                               for p in measured[:2])) if r_a["hit"] != r_b["hit"]]
    if changed:
        lines += ["", f"Cases found under one of *{POLICY_TITLES[measured[0]]}* and *{POLICY_TITLES[measured[1]]}* "
                  "but not the other (up to ten):", ""]
        cases = {key: r["case"] for key, r in data_cases(results).items()}
        for a, _ in changed[:10]:
            where = POLICY_TITLES[measured[0]] if a["hit"] else POLICY_TITLES[measured[1]]
            lines.append(f"- found only under *{where}*: {a['dataset']} seed {a['seed']} "
                         + describe(cases[(a["dataset"], a["family"], a["seed"])], title=True))
    return "\n".join(lines) + "\n"


def _overall_line(rows: list[dict], half: str) -> str:
    s = summary(_in(rows, half))
    return (f"recall {_pct(s['recall'])} ({_share(s['found'], s['cases'])}), right column {_pct(s['feature'])}, "
            f"other sites with a new finding {100 * s['false']:.1f} %" if s["cases"] else "no case recorded")


def readme_table(results: dict[str, Any]) -> str:
    """The README's table: the data lens (and every lens, where measured) on the held-out half,
    and each family's recall, best found first."""
    data = scored(results, "data", DATA_LENS)
    if not data:
        return "\n".join([README_BEGIN, "No case recorded yet.", README_END])
    lines = [README_BEGIN, *headline(data)]
    every = scored(results, "all", None)
    if every:
        s = summary(_in(every, "held-out"))
        # the commits its records were made at (re-running every lens takes hours, so they may be older
        # than the data lens's; said from the records alone, the table stays what they give)
        made_at = sorted({r.get("commit", "?") for k, r in results.items() if json.loads(k)["lenses"] == "all"})
        lines.append(f"| every lens ({', '.join(_datasets_of(every))}; {len(_in(every, 'held-out'))} cases; "
                     f"recorded at {', '.join(made_at)}) | "
                     + " | ".join(_cells(s)) + f" | {'yes' if meets(s) else 'no'} |")
    recall = {f.title: summary(_in(data, "held-out", family=f.name))["recall"] for f in FAMILIES.values()}
    ranked = sorted(((r, t) for t, r in recall.items() if r == r), key=lambda rt: -rt[0])
    lines += ["", "Data lens per family (recall at material strength, held-out half, every data set): "
              + "; ".join(f"{title} {_pct(r)}" for r, title in ranked) + ".", "",
              "Had each missed case's closest material cell been reported once its own p fell below a line, "
              "with no correction for the other cells tested, the data lens's held-out recall would be "
              + "; ".join(recall_bounds(data, results)) + " (RESULTS.md §5)."]
    lone = _alone(data).get(PRECISION, [])
    if lone:
        named, without = _alone_line(data, lone)
        lines += ["", f"Of the data lens's held-out hits, {len(lone)} rest on *recorded at another precision* alone "
                  f"({named}): decimals the family's change wrote into a column the sites record in whole numbers. "
                  "A real change of those kinds (an older population, a device's offset, a noisy sensor read through "
                  f"its own converter) keeps the whole numbers; without those hits the recall is {without} "
                  "(`benchmarks/whole_number_corruptions.py` runs those cases again with whole numbers kept)."]
    return "\n".join([*lines, README_END])


def readme_policy_table(results: dict[str, Any], half: str = "held-out") -> str:
    """The README's disclosure-control table: per data set, the data lens's recall and the other
    sites with a new finding under each policy measured (§6's first table without the right column)."""
    measured, rows, datasets = _by_policy(results, half)
    if len(measured) < 2:
        return "\n".join([README_POLICY_BEGIN, "Not yet measured under two policies.", README_POLICY_END])
    lines = ["| data set | policy | recall | other sites with a new finding |", "|---|---|---|---|"]
    for dataset in [*datasets, None]:
        for k, policy in enumerate(measured):
            cells = _cells(summary([r for r in rows[policy] if dataset is None or r["dataset"] == dataset]))
            name = ("**all**" if dataset is None else TITLES[dataset]) if k == 0 else ""
            lines.append(f"| {name} | {POLICY_TITLES[policy]} | {cells[0]} | {cells[2]} |")
    return "\n".join([README_POLICY_BEGIN, *lines, README_POLICY_END])


def update_readme(results: dict[str, Any], path: Path = README) -> None:
    text = path.read_text()
    for begin, end, made in ((README_BEGIN, README_END, readme_table), (README_POLICY_BEGIN, README_POLICY_END,
                                                                         readme_policy_table)):
        pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise SystemExit(f"{path} has no {begin} … {end} block to fill.")
        text = pattern.sub(lambda _: made(results), text)
    path.write_text(text)


# -- running --------------------------------------------------------------------------------------
def still_holds(task: dict, result: Any) -> bool:
    """A cached result holds while its detector's code and its case's draw are unchanged."""
    return (isinstance(result, dict) and result.get("detector") == fingerprint(task["lenses"])
            and result.get("case") == case_of(task))


def measure(todo: list[dict], jobs: int, fresh: bool, part: str = PART) -> dict[str, Any]:
    return run_tasks(part, todo, evaluate, jobs, fresh, reuse=still_holds)


def main(jobs: int, fresh: bool) -> str:
    """run.py's entry: every case, the data lens and every lens."""
    measure(tasks(), jobs, fresh)
    return cached_section()


def cached_section(part: str = PART) -> str:
    """§5 (the product's default policy) and §6 (each policy's cost) from the recorded cases."""
    results = cached_results(part, tasks(policies=tuple(POLICIES)))
    return section(results) + "\n\n" + policy_section(results)


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"smoke test: {', '.join(QUICK_DATASETS)}, seeds "
                        f"{', '.join(map(str, QUICK_SEEDS))}, the data lens")
    parser.add_argument("--lenses", nargs="+", choices=("data", "all"), default=["data"],
                        help="'data': the data lens; 'all': every lens (trains the model lenses' runs)")
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES))
    parser.add_argument("--half", choices=("tuning", "held-out", "both"), default="both",
                        help="which seeds to run (the report always shows the held-out half)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (one torch thread each)")
    parser.add_argument("--fresh", action="store_true", help="ignore cached cases and run them again")
    parser.add_argument("--policy", nargs="+", choices=list(POLICIES), default=["default"],
                        help="the sites' disclosure policies to run the cases under (default: the product's); "
                        "'none': the statistics as computed, 'strict': at least 20 rows, 'dp': noise at ε = 1")
    parser.add_argument("--tag", default="", help="keep these results apart (results/checkup_families-TAG.json.gz), "
                        "e.g. for another branch's detector")
    parser.add_argument("--write", action="store_true",
                        help="rewrite benchmarks/RESULTS.md (every part from its recorded runs) and the README's table; "
                        "runs nothing (a run first would re-run every record a detector change left stale, every "
                        "lens's included)")
    args = parser.parse_args()
    if args.write:
        if args.tag:
            raise SystemExit("--write rewrites the report from the untagged results only; leave --tag out.")
        from run import write_report

        write_report()
        update_readme(cached_results(PART, tasks(policies=tuple(POLICIES))))
        return
    part = f"{PART}-{args.tag}" if args.tag else PART
    seeds = {"tuning": TUNING, "held-out": HELD_OUT, "both": SEEDS}[args.half]
    datasets = args.datasets
    if args.quick:
        datasets = [d for d in datasets if d in QUICK_DATASETS]
        seeds = [s for s in seeds if s in QUICK_SEEDS]
    todo = tasks(datasets, seeds, args.lenses, args.families, args.policy)
    results = measure(todo, args.jobs, args.fresh, part)
    shown = {k: v for k, v in load_results(part).items()}
    print(section(shown))
    print(policy_section(shown, "held-out" if args.half != "tuning" else "tuning"))
    print(f"\n{len(results)} cases of this run; results in {results_path(part).relative_to(HERE)}", file=sys.stderr)


if __name__ == "__main__":
    sys.path.append(str(HERE.parents[1]))  # after PYTHONPATH: another tree's fedcore there is the one measured
    _cli()
