"""How long a useful inDISCO PM model takes: four IID sites of 28×28 PneumoniaMNIST (or BreastMNIST).

    .venv/bin/python benchmarks/indisco.py                       # PneumoniaMNIST, indisco-pm, its defaults
    .venv/bin/python benchmarks/indisco.py --data ../shared/data/medmnist/breastmnist.npz --rounds 4
    .venv/bin/python benchmarks/indisco.py --algorithm indisco-gm --stamp       # the bias experiment

Prints, per evaluated round, the seconds so far and each site's balanced accuracy on its own
hold-out; then wall time (data loading included), peak resident memory (and peak GPU memory on
CUDA), the device, and balanced accuracy, sensitivity and specificity per site with their mean.
Uses CUDA when present (--device cpu to compare). The goal: under 10 minutes on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MEDMNIST = ROOT.parent / "shared" / "data" / "medmnist"
DEFAULT_DATA = MEDMNIST / "aksufatih" / "pneumoniamnist.npz"  # the class-balanced PneumoniaMNIST subsample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="A MedMNIST .npz (default: %(default)s).")
    parser.add_argument("--algorithm", default="indisco-pm", choices=("indisco-pm", "indisco-gm", "indisco-lm",
                                                                     "indisco-cm"))
    parser.add_argument("--rounds", type=int, help="Rounds (default: the algorithm's own).")
    parser.add_argument("--sites", type=int, default=4)
    parser.add_argument("--stamp", action="store_true", help="Stamp site1's positive images (the bias experiment).")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="Torch CPU threads (default 1: on a machine shared with other work, two OpenMP threads "
                             "on two cores can be many times slower than one).")
    args = parser.parse_args()

    import torch

    from data_adapters import load_federation
    from fedcore.algorithms import REGISTRY, build_algorithm
    from fedcore.engine import Simulation, TrainConfig

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    reference = {"source": "npz", "path": args.data, "split": "iid", "sites": args.sites,
                 "inject": ["stamp:site1"] if args.stamp else []}
    federation = load_federation(reference, seed=args.seed)
    config = {**REGISTRY[args.algorithm].config_defaults, "device": args.device, "seed": args.seed}
    if args.rounds:
        config["rounds"] = args.rounds
    sim = Simulation(federation, build_algorithm(args.algorithm), TrainConfig(**config))
    sizes = ", ".join(f"{s.name} {s.n_train}+{s.n_test}" for s in federation.sites)
    print(f"{args.algorithm} on {federation.name}: {sizes} (train+hold-out) · {config['rounds']} rounds of "
          f"{config['local_epochs']} epochs · device {sim.device} · {torch.get_num_threads()} threads", flush=True)

    def report(round_: int, record: dict | None, arrays: dict) -> None:
        if record is not None:
            scores = " ".join(f"{site} {m['balanced_accuracy']:.3f}" for site, m in record["sites"].items())
            print(f"  round {round_:3d}  {time.perf_counter() - started:7.1f} s  balanced accuracy: {scores}",
                  flush=True)

    history = sim.run(report)
    wall = time.perf_counter() - started
    final = history[-1]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nwall time {wall:.1f} s ({wall / 60:.1f} min) · peak resident memory {peak_mb:.0f} MB"
          + (f" · peak GPU memory {torch.cuda.max_memory_allocated() / 2**20:.0f} MB" if sim.device.type == "cuda" else "")
          + f" · device {sim.device}")
    print(f"{'site':8s} {'bal. acc.':>9s} {'sensitivity':>11s} {'specificity':>11s}")
    for site, m in final["sites"].items():
        print(f"{site:8s} {m['balanced_accuracy']:9.3f} {m['sensitivity']:11.3f} {m['specificity']:11.3f}")
    mean = final["mean"]
    print(f"{'mean':8s} {mean['balanced_accuracy']:9.3f} {mean['sensitivity']:11.3f} {mean['specificity']:11.3f}")


if __name__ == "__main__":
    main()
