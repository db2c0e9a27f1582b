"""Which standardisation should uploaded tables get by default: does iFedAvg's f_in (its per-site
input layer, b_in / w_in with their 2-SD marks) still show a unit or offset problem at one site
when each site standardises itself ('site', the iFedAvg paper's setting) or when every site uses
the mean and SD pooled over all sites ('federated')?

One problem per run, put into the raw values (original units) of one site (the check-up suite's
draw of site and feature, `checkup.injection`): a unit change (raw values × 10) or an offset
(2 SDs of the feature over all sites added). iFedAvg (default parameters) trains ROUNDS rounds;
its last round's marks are scored against the recorded truth (`fedcore.interpret.detection`):
caught when the injected (site, feature) cell is marked in b_in or w_in; false marks are every
other marked input cell, counted per run; "largest": the injected site's f_in deviates most of
all sites for the injected feature (|z| of b_in or w_in) — with four sites (heart) no site can
reach the default 2-SD mark at all (one site among n lies at most sqrt(n - 1) population SDs from
the mean: 1.73 for n = 4; `significance.py`'s robust rule is the one for few sites), so the mark
alone cannot tell. Also the same data with nothing injected (false
marks only). Prints a table (README, "Standardisation").

    .venv/bin/python benchmarks/evidence/standardization.py [--rounds 100] [--seeds 3]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from checkup import SUITE_DATA, injection  # noqa: E402

from data_adapters import load_federation  # noqa: E402
from fedcore.algorithms import build_algorithm  # noqa: E402
from fedcore.engine import Simulation, TrainConfig  # noqa: E402
from fedcore.interpret.detection import detection_report  # noqa: E402

DATASETS = ("heart", "demo")
PROBLEMS = (("none", None), ("unit", 10.0), ("shift", 2.0))
MODES = ("site", "federated")


def one_run(dataset: str, kind: str, amount: float | None, seed: int, mode: str, rounds: int) -> dict:
    inject = injection(dataset, kind, amount, seed)
    data = {**SUITE_DATA[dataset], "standardization": mode, "inject": [inject] if inject else []}
    federation = load_federation(data, seed)
    sim = Simulation(federation, build_algorithm("ifedavg", {}), TrainConfig(rounds=rounds, seed=seed))
    sim.run()
    _, arrays = sim.algorithm.record(sim)
    report = detection_report(federation.ground_truth, sim.site_names, federation.feature_names, arrays)
    inputs = [f for f in report["false_positives"] if f["layer"] in ("b_in", "w_in")]
    top = None
    if inject:  # is the injected site the one whose f_in deviates most for that feature (|z|, b_in or w_in)?
        i, j = sim.site_names.index(inject["site"]), federation.feature_names.index(inject["feature"])
        z = np.maximum(np.abs(arrays["b_in_z"][:, j]), np.abs(arrays["w_in_z"][:, j]))
        top = bool(z[i] >= z.max())
    return {"caught": report["caught"] if inject else None, "top": top, "false": len(inputs),
            "cells": len(sim.site_names) * len(federation.feature_names)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    print(f"iFedAvg f_in marks after {args.rounds} rounds, {args.seeds} seeds per cell "
          "(caught: the injected site-feature cell marked; false: other marked input cells per run)")
    print(f"{'data':6s} {'problem':10s} " + " ".join(f"{m + ' caught':>16s} {m + ' largest':>17s} {m + ' false':>16s}"
                                                   for m in MODES))
    for dataset in DATASETS:
        for kind, amount in PROBLEMS:
            cells = []
            for mode in MODES:
                runs = [one_run(dataset, kind, amount, seed, mode, args.rounds) for seed in range(args.seeds)]
                caught = "–" if kind == "none" else f"{sum(r['caught'] for r in runs)}/{len(runs)}"
                top = "–" if kind == "none" else f"{sum(r['top'] for r in runs)}/{len(runs)}"
                false = sum(r["false"] for r in runs) / len(runs)
                cells.append(f"{caught:>16s} {top:>17s} {false:>10.1f} / {runs[0]['cells']:<3d}")
            label = "nothing" if kind == "none" else f"{kind} {amount:g}"
            print(f"{dataset:6s} {label:10s} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
