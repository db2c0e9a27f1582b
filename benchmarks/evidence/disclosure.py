"""Part 6: what disclosure control costs the check-up's data lens.

The data-lens tasks of part 5 (`checkup.py`: the same injected problems, sites, features and seeds)
with every site releasing its statistics at each policy (`fedcore.interpret.disclosure`):
    none      the statistics as computed, unprotected (what the profile released before issue 24:
              21 interpolated quantiles of any group, from which small groups' rows can be rebuilt)
    default   at least 10 rows per statistic, quantiles from blocks of at least 10 values, rounded
    min 25    a site that asks for more: at least 25 rows
    ε = 10    the default with Laplace noise, differential privacy at ε = 10 per release
Measured per data set and policy: site-level recall over every injected kind and over part 5's goal
kinds, the right feature named, other sites with a finding the same data without an injection do not
show, and the share of tested cells a site's policy left not testable. The thresholds are the
product's own (nothing is fitted here), so every seed is reported.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import numpy as np

import checkup
from common import run_tasks, cached_results

PART = "disclosure"
DATA = ("demo", "heart", "vehicle")
POLICIES = {"none": None, "default": {}, "min 25": {"min_count": 25}, "ε = 10": {"dp_epsilon": 10.0}}


def tasks() -> list[dict]:
    return [{"dataset": d, "kind": k, "amount": a, "seed": s, "lenses": "data", "policy": policy}
            for policy in POLICIES for d in DATA for k, a in checkup.CONDITIONS for s in checkup.SEEDS]


def train(task: dict) -> dict[str, Any]:
    from fedcore.interpret.disclosure import Policy

    settings = POLICIES[task["policy"]]
    return checkup.train(task, None if settings is None else Policy.from_settings(settings))


def summary(results: dict[str, Any], policy: str, dataset: str) -> dict[str, float]:
    """Recall (every injected kind, the goal kinds), feature named, false findings beyond the data's
    own, and the share of cells not testable, over the seeds."""
    by_condition: dict[tuple, list] = defaultdict(list)
    for key, result in results.items():
        task = json.loads(key)
        if task["policy"] == policy and task["dataset"] == dataset:
            by_condition[(task["kind"], task["amount"])].append((task, result))
    baselines = {t["seed"]: r for t, r in by_condition.get(("none", None), [])}
    hits, goal_hits, named, false, clean, untested, tested = [], [], [], 0, 0, 0, 0
    for (kind, amount), entries in by_condition.items():
        for task, result in entries:
            untested += result.get("not_testable", 0)
            tested += result.get("tested", 0)
            if kind == "none":
                continue
            scored = checkup.score(result, baselines.get(task["seed"]))
            hits.append(scored["hit"])
            if (kind, amount) in checkup.GOAL_KINDS:
                goal_hits.append(scored["hit"])
            if scored["named"] is not None:
                named.append(scored["named"])
            false += scored["false_beyond"]
            clean += scored["clean_sites"]
    mean = lambda values: float(np.mean(values)) if values else float("nan")  # noqa: E731
    return {"recall": mean(hits), "goal": mean(goal_hits), "named": mean(named), "n": len(hits),
            "false": false / clean if clean else float("nan"), "untested": untested / tested if tested else float("nan")}


def per_condition(results: dict[str, Any], dataset: str) -> list[str]:
    """Sites found per injected condition, one column per policy."""
    rows = []
    for kind, amount in checkup.CONDITIONS:
        if kind == "none":
            continue
        cells = []
        for policy in POLICIES:
            found = []
            for key, result in results.items():
                task = json.loads(key)
                if (task["policy"], task["dataset"], task["kind"], task["amount"]) == (policy, dataset, kind, amount):
                    baseline = next((r for k, r in results.items() if json.loads(k) == {**task, "kind": "none",
                                                                                       "amount": None}), None)
                    found.append(checkup.score(result, baseline)["hit"])
            cells.append(f"{sum(found)}/{len(found)}" if found else "–")
        rows.append(f"| {checkup._label(kind, amount)} | " + " | ".join(cells) + " |")
    return rows


def section(results: dict[str, Any]) -> str:
    lines = ["## 6. The check-up's data lens under disclosure control", "", __doc__.split("\n\n", 1)[1].strip(), "",
             "| data set | policy | recall, every kind | recall, goal kinds | feature named | other sites flagged "
             "beyond the data's own | cells not testable |", "|---|---|---|---|---|---|---|"]
    for dataset in DATA:
        for policy in POLICIES:
            s = summary(results, policy, dataset)
            if not s["n"]:
                continue
            lines.append(f"| {checkup.TITLES[dataset]} | {policy} | {s['recall']:.0%} | {s['goal']:.0%} | "
                         f"{s['named']:.0%} | {s['false']:.1%} | {s['untested']:.1%} |")
    for dataset in DATA:
        rows = per_condition(results, dataset)
        if any("/" in row for row in rows):
            lines += ["", f"### {checkup.TITLES[dataset]}: sites found per injected problem", "",
                      "| injected | " + " | ".join(POLICIES) + " |", "|---|" + "---|" * len(POLICIES), *rows]
    return "\n".join(lines) + "\n"


def main(jobs: int, fresh: bool) -> str:
    return section(run_tasks(PART, tasks(), train, jobs, fresh))


def cached_section() -> str:
    return section(cached_results(PART, tasks()))
