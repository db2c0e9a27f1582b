"""Part 3: FedHealth2 under label skew (the FedHealth 2 / FedAP paper's main experiment).

HAR's 10,299 windows pooled and dealt to 20 sites by a Dirichlet(0.1) label split; each site's
rows split into train / validation / test (the test part by the product's hold-out rule, 20 %
of the rest as validation). Every algorithm trains 300 rounds with the official protocol (SGD lr
0.01, batch 32, one local epoch, mean-reduced unweighted loss); after every round each site's
model is scored on its validation and test rows. Reported: mean per-site test accuracy at the
round with the best mean validation accuracy (the paper's protocol).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from common import DATASETS, PAPER_SEEDS, cached_results, fmt, mean_sd, run_tasks, simulation_on
from fedcore.algorithms.fedprox import FedProxParams

PART = "fedhealth2_skew"
N_SITES, ALPHA, ROUNDS, VALIDATION_SHARE = 20, 0.1, 300, 0.2
CONFIGS = {  # label -> (algorithm, params)
    "FedHealth2": ("fedhealth2", {}),
    "f-FedHealth2": ("fedhealth2", {"variant": "f"}),
    "d-FedHealth2": ("fedhealth2", {"variant": "d"}),
    "FedAvg": ("fedavg", {}),
    "FedBN": ("fedbn", {}),
    "FedProx": ("fedprox", {}),
    "FedPer": ("fedper", {}),
    "Local": ("local", {}),
}
PAPER = {"FedHealth2": 81.1, "FedAvg": 67.6, "FedBN": 67.6, "FedProx": 67.5, "FedPer": 64.6, "Local": 69.1}
ENGINE = {"rounds": ROUNDS, "lr": 0.01, "batch_size": 32, "momentum": 0.0, "lr_decay": 1.0,
          "loss_reduction": "mean", "class_weighting": "none", "eval_every": ROUNDS}
SEEDS = PAPER_SEEDS[:3]


def federation(seed: int):
    """HAR by Dirichlet label skew, each site's training rows split again into train and validation."""
    from data_adapters import load_federation
    from fedcore.federation import Site, stratified_holdout
    from fedcore.seeding import derive_seed

    fed = load_federation({**DATASETS["har"], "split": f"dirichlet:{ALPHA}", "sites": N_SITES,
                           "partition_seed": seed}, seed)
    sites, validation = [], []
    for site in fed.sites:
        rng = np.random.default_rng(derive_seed(seed, site.name, "validation"))
        train, val = stratified_holdout(site.y_train.numpy(), max(1, round(VALIDATION_SHARE * site.n_train)), rng)
        sites.append(Site(site.name, site.x_train[train], site.y_train[train], site.x_test, site.y_test))
        validation.append((site.x_train[val], site.y_train[val]))
    fed.sites = sites
    return fed, validation


def train(task: dict) -> dict[str, Any]:
    fed, validation = federation(task["seed"])
    algorithm, params = CONFIGS[task["config"]]
    sim = simulation_on(fed, algorithm, params, {**ENGINE, "seed": task["seed"]})
    validation = [(x.to(sim.device), y.to(sim.device)) for x, y in validation]
    curve = []

    def scores(round_: int, record: dict | None, arrays: dict) -> None:
        val, test = sim.evaluate(validation), sim.evaluate()
        curve.append({"round": round_, "val": float(np.mean([m["accuracy"] for m in val.values()])),
                      "test": [m["accuracy"] for m in test.values()]})

    sim.run(scores)
    best = max(curve, key=lambda entry: entry["val"])
    return {"best_round": best["round"], "best_val": best["val"], "test_at_best": best["test"],
            "final_test": curve[-1]["test"], "sizes": [s.n_train for s in fed.sites],
            "classes_per_site": [int((s.y_train.bincount(minlength=fed.n_classes) > 0).sum()) for s in fed.sites]}


def tasks() -> list[dict]:
    return [{"config": c, "seed": s, "data": "har", "sites": N_SITES, "alpha": ALPHA} for c in CONFIGS for s in SEEDS]


def section(results: dict[str, Any]) -> str:
    by: dict[str, list] = {}
    for key, result in results.items():
        by.setdefault(json.loads(key)["config"], []).append(result)
    lines = ["## 3. FedHealth2 under label skew (HAR, 20 sites, Dirichlet α = 0.1)", "",
             __doc__.split("\n\n", 1)[1].strip(), "",
             f"Mean ± SD over seeds {', '.join(map(str, SEEDS))} (each seed also draws its own partition).", "",
             "| algorithm | mean site test accuracy at best-validation round (%) | at round 300 (%) | "
             "worst site at best round (%) | best round | paper, PAMAP (%) |",
             "|---|---|---|---|---|---|"]
    for config in CONFIGS:
        runs = by.get(config, [])
        at_best = [100 * np.mean(r["test_at_best"]) for r in runs]
        final = [100 * np.mean(r["final_test"]) for r in runs]
        worst = [100 * np.min(r["test_at_best"]) for r in runs]
        rounds = [r["best_round"] for r in runs]
        lines.append(f"| {config} | {mean_sd(at_best, 1, len(SEEDS))} | {mean_sd(final, 1, len(SEEDS))} | {mean_sd(worst, 1, len(SEEDS))} | "
                     f"{mean_sd(rounds, 0, len(SEEDS))} | {fmt(PAPER.get(config), 1)} |")
    if by:
        first = next(iter(by.values()))[0]
        lines += ["", f"Partition of the first seed: site training sizes {first['sizes']}; classes present per "
                      f"site {first['classes_per_site']} (of 6)."]
    lines += ["", discussion(by), ""]
    return "\n".join(lines)


def discussion(by: dict) -> str:
    def mean_at_best(config: str) -> float:
        runs = by.get(config, [])
        return float(np.mean([100 * np.mean(r["test_at_best"]) for r in runs])) if runs else float("nan")

    ours = {c: mean_at_best(c) for c in CONFIGS}
    baselines = [c for c in ("FedAvg", "FedBN", "FedProx", "FedPer", "Local")]
    best_baseline = max(baselines, key=lambda c: ours[c] if ours[c] == ours[c] else -1)
    return (
        "**Against the paper.** On PAMAP the paper finds FedHealth2 13.5 points above FedAvg and 12 above "
        f"local training. Here FedHealth2 reaches {fmt(ours['FedHealth2'], 1)} % against FedAvg "
        f"{fmt(ours['FedAvg'], 1)} % and Local {fmt(ours['Local'], 1)} %; the best baseline is {best_baseline} "
        f"({fmt(ours[best_baseline], 1)} %). Our data (HAR's 265 time-domain features, an MLP) differ from the "
        "paper's (PAMAP sensor windows, a CNN), so only the ordering is comparable, not the levels."
        + _fedprox_note(by)
    )


def _fedprox_note(by: dict) -> str:
    """How far FedProx's per-site accuracies are from FedAvg's, run for run (same seed and partition)."""
    pairs = list(zip(by.get("FedProx", []), by.get("FedAvg", [])))
    if not pairs:
        return ""
    gap = max(abs(a - b) for prox, avg in pairs for a, b in zip(prox["final_test"], avg["final_test"]))
    mu = CONFIGS["FedProx"][1].get("mu", FedProxParams.mu)
    return (f" FedProx (μ = {mu:g}) ends within {100 * gap:.2f} points of FedAvg at every site of every seed: with "
            "one local epoch at learning rate 0.01 a site drifts little within a round, so the proximal pull "
            "μ(w − w_received) hardly changes a step (the paper, too, has them 0.1 point apart).")


def main(jobs: int, fresh: bool) -> str:
    return section(run_tasks(PART, tasks(), train, jobs, fresh))


def cached_section() -> str:
    return section(cached_results(PART, tasks()))
