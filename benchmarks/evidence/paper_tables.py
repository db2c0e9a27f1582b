"""Part 1: the iFedAvg paper's Tables 1-4 on our copies of its public datasets.

Mean and worst-site F1 and ROC AUC after 1000 rounds (the paper's protocol and its five seeds)
for iFedAvg, APFL, FedAvg, Local and Centralized on HAR by subject, the vehicle sensor network
and UCI heart disease (4 hospitals; not in the paper).
"""

from __future__ import annotations

import json
from typing import Any

from common import DATASET_TITLES, DATASETS, PAPER_SEEDS, cached_results, fmt, mean_sd, run_tasks, simulation

PART = "paper_tables"
ALGORITHMS = ("ifedavg", "apfl", "apfl-fixed", "fedavg", "local", "centralized")
TITLES = {"ifedavg": "iFedAvg", "apfl": "APFL", "apfl-fixed": "APFL, α fixed 0.5", "fedavg": "FedAvg", "local": "Local",
          "centralized": "Centralized"}
# The paper found alpha = 0.5 best for APFL; besides APFL as published (alpha learned), the same
# with alpha held at 0.5.
# iFedAvg as in the paper: f_out shared (the authors' code; the product keeps it local by default).
RUNS = {"apfl-fixed": ("apfl", {"adapt_alpha": False}), "ifedavg": ("ifedavg", {"local_f_out": False})}
ROUNDS = 1000

# The paper's Tables 1-4 (F1 mean, F1 worst, ROC AUC mean, ROC AUC worst), by dataset and method.
PAPER = {
    "har": {
        "f1_mean": {"ifedavg": 0.994, "apfl": 0.992, "fedavg": 0.967, "local": 0.993, "centralized": 0.988},
        "f1_worst": {"ifedavg": 0.950, "apfl": 0.972, "fedavg": 0.909, "local": 0.974, "centralized": 0.955},
        "roc_auc_mean": {"ifedavg": 1.00, "apfl": 1.00, "fedavg": 0.999, "local": 1.00, "centralized": 1.00},
        "roc_auc_worst": {"ifedavg": 0.996, "apfl": 0.997, "fedavg": 0.991, "local": 0.997, "centralized": 0.998},
    },
    "vehicle": {
        "f1_mean": {"ifedavg": 0.928, "apfl": 0.935, "fedavg": 0.871, "local": 0.939, "centralized": 0.943},
        "f1_worst": {"ifedavg": 0.874, "apfl": 0.874, "fedavg": 0.398, "local": 0.884, "centralized": 0.834},
        "roc_auc_mean": {"ifedavg": 0.975, "apfl": 0.978, "fedavg": 0.921, "local": 0.982, "centralized": 0.986},
        "roc_auc_worst": {"ifedavg": 0.930, "apfl": 0.936, "fedavg": 0.124, "local": 0.950, "centralized": 0.935},
    },
}
STATISTICS = (("f1_mean", "Mean F1 over sites (Table 1)"), ("f1_worst", "Worst-site F1 (Table 2)"),
              ("roc_auc_mean", "Mean ROC AUC over sites (Table 3)"), ("roc_auc_worst", "Worst-site ROC AUC (Table 4)"))


def tasks() -> list[dict]:
    return [{"dataset": d, "algorithm": a, "seed": s, "rounds": ROUNDS}
            for d in DATASETS for a in ALGORITHMS for s in PAPER_SEEDS]


def train(task: dict) -> dict[str, Any]:
    algorithm, params = RUNS.get(task["algorithm"], (task["algorithm"], {}))
    sim = simulation(algorithm, DATASETS[task["dataset"]], params,
                     config={"rounds": task["rounds"], "seed": task["seed"], "eval_every": task["rounds"]})
    last = sim.run()[-1]
    return {
        "f1_mean": last["mean"]["f1"], "f1_worst": last["worst"]["f1"],
        "roc_auc_mean": last["mean"]["roc_auc"], "roc_auc_worst": last["worst"]["roc_auc"],
        "balanced_accuracy_mean": last["mean"]["balanced_accuracy"],
        "worst_site": last["worst_site"]["f1"], "seconds": last["elapsed_s"],
        "sites": len(last["sites"]), "execution": sim.executor.name,
    }


def section(results: dict[str, dict]) -> str:
    by = {(task["dataset"], task["algorithm"], task["seed"]): result
          for task, result in ((json.loads(k), v) for k, v in results.items())}
    lines = [
        "## 1. The iFedAvg paper's Tables 1–4 on our data",
        "",
        f"{ROUNDS} rounds, the paper's protocol (SGD lr 0.002, momentum 0.5 except APFL, ×0.9 every 20 rounds, "
        f"batch 16, one local epoch, class-weighted NLL, hold-out max(33 %, 100 rows)) and its five seeds "
        f"{', '.join(map(str, PAPER_SEEDS))}. Each cell: mean ± SD over the seeds of the statistic at the last "
        "round; in brackets the paper's value where it has one.",
        "",
    ]
    for statistic, title in STATISTICS:
        lines += [f"**{title}**", "", "| data | " + " | ".join(TITLES[a] for a in ALGORITHMS) + " |",
                  "|---|" + "---|" * len(ALGORITHMS)]
        for dataset in DATASETS:
            cells = []
            for algorithm in ALGORITHMS:
                values = [by[(dataset, algorithm, s)][statistic] for s in PAPER_SEEDS if (dataset, algorithm, s) in by]
                paper = PAPER.get(dataset, {}).get(statistic, {}).get(algorithm)
                cells.append(mean_sd(values, expected=len(PAPER_SEEDS)) + (f" ({fmt(paper)})" if paper is not None else ""))
            lines.append(f"| {DATASET_TITLES[dataset]} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [DATA_NOTES, "", discussion(by), ""]
    return "\n".join(lines)


DATA_NOTES = (
    "**Where our data differ from the paper's.** HAR: the same 30 subjects and 10,299 windows, but only the "
    "265 time-domain features of the 561 (the copy in `../shared` has no frequency-domain features), the "
    "benchmark's own scaling kept as in the paper. Vehicle sensors: only the 1,860-row training part of the "
    "federated version (23 sensors), features already z-scored per sensor, labels ±1; the paper does not say "
    "which part it used. With it, 15 of the 23 sensors keep fewer than 20 hold-out rows (3 to 177), so a "
    "sensor's F1 or ROC AUC can rest on three rows and the worst-site columns are mostly noise. Heart disease is not in the paper (its Ebola data are not public); it is standardised "
    "per site like the paper's Ebola data, and with 4 sites (Switzerland with 123 rows and 93 % disease) it is "
    "the small-federation case."
)
MARGIN = 0.01  # closer than this to the paper's value counts as a match


def discussion(by: dict) -> str:
    """Where we match, beat or miss the paper's numbers, statistic by statistic."""
    verdicts = {"match": [], "beat": [], "miss": []}
    for dataset, tables in PAPER.items():
        for statistic, values in tables.items():
            for algorithm, paper in values.items():
                ours = [by[(dataset, algorithm, s)][statistic] for s in PAPER_SEEDS if (dataset, algorithm, s) in by]
                if not ours:
                    continue
                gap = sum(ours) / len(ours) - paper
                verdict = "match" if abs(gap) <= MARGIN else ("beat" if gap > 0 else "miss")
                verdicts[verdict].append(f"{DATASET_TITLES[dataset].split(' (')[0]} {TITLES[algorithm]} "
                                         f"{statistic.replace('_', ' ')} {gap:+.3f}")
    counted = sum(len(v) for v in verdicts.values())
    if not counted:
        return ""
    lines = [f"**Against the paper** ({counted} numbers it reports; within ±{MARGIN} counts as a match): "
             f"{len(verdicts['match'])} match, {len(verdicts['beat'])} beat it, {len(verdicts['miss'])} miss it."]
    for verdict in ("beat", "miss"):
        if verdicts[verdict]:
            lines.append(f"{verdict.capitalize()} (ours − paper): " + "; ".join(verdicts[verdict]) + ".")
    return " ".join(lines)


def main(jobs: int, fresh: bool) -> str:
    return section(run_tasks(PART, tasks(), train, jobs, fresh))


def cached_section() -> str:
    return section(cached_results(PART, tasks()))
