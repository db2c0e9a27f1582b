"""How fast the simulation runs: the iFedAvg paper's HAR protocol and a scaling test.

    .venv/bin/python benchmarks/speed.py                 # the table (about 20 minutes on 2 cores)
    .venv/bin/python benchmarks/speed.py --full-run      # also one complete 1000-round HAR run
    .venv/bin/python benchmarks/speed.py --only batched --only per-site   # some paths' rows only
    .venv/bin/python benchmarks/speed.py --only batched --against ../old-checkout   # before / after

HAR protocol: 30 subjects (../shared/data/uci_har, 265 features), batch 16, one local epoch,
SGD lr 0.002 with momentum 0.5 and the paper's step schedule, every site evaluated on its own
hold-out every round. Measured, each in its own process so peak memory is its own:
    compiled  our engine's default where it can run: the compiled C round (fedcore/execution/kernels), each
              site's whole round in turn, its sites split among one process per torch thread where
              there are enough of them (peak memory summed over those processes)
    compiled, 1 process  the same in one process (its threads take whole sites)
    batched   our engine's torch path, all sites as one computation (split the same way): the
              hand-written MLP pass where it computes the model and loss, else the model's own
              modules under torch.func.vmap (APFL)
    batched, module  the same with the hand-written pass switched off: what every algorithm's
              batched rounds would cost from the module's own layers (fedcore/execution/vmapped.py)
    per-site  our engine, one site after another
    reference a plain loop written like the authors' code (benchmarks/reference_loop.py)
    flower-sim our Flower app (application.flower) on Flower's simulation engine (Ray), every site a
              virtual SuperNode: the same protocol through Flower's messaging (peak memory: the
              driver process only, Ray's workers not counted)
Scaling: 10 / 100 / 1000 synthetic sites x 50 rows (declared synthetic: Gaussian classes).
Reported: median seconds per round over repeats (after a warm-up round), projected time for
1000 rounds, peak resident memory, device. Ratios between rows are what to track: absolute
seconds depend on the machine and on whatever else runs on it.

--against CHECKOUT measures every row in that checkout too (its own code, this script's rows:
copy this file there), alternating with this one row by row, in turn first and second from one
sweep to the next, and prints this / that per row: the median and range of the sweeps' ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
HAR = ROOT.parent / "shared" / "data" / "uci_har" / "uci_har_time265_by_subject.csv.gz"

FASTEST = "compiled"  # the engine's default path for these algorithms; the other rows are compared with it
FAST_PATHS = ("compiled", "batched")  # timed over more rounds (each takes a few seconds)
# The paper's protocol: f_out shared, as in the authors' code (the product keeps it local by default).
PAPER_IFEDAVG = {"local_f_out": False}
PROTOCOL_ROWS = [  # (label, algorithm, params, path); ", 1 process": its sites not split among processes
    ("iFedAvg", "ifedavg", PAPER_IFEDAVG, "compiled"),
    ("iFedAvg", "ifedavg", PAPER_IFEDAVG, "compiled, 1 process"),
    ("iFedAvg", "ifedavg", PAPER_IFEDAVG, "batched"),
    ("iFedAvg", "ifedavg", PAPER_IFEDAVG, "per-site"),
    ("iFedAvg", "ifedavg", PAPER_IFEDAVG, "reference"),
    ("iFedAvg", "ifedavg", PAPER_IFEDAVG, "flower-sim"),
    ("FedAvg", "fedavg", {}, "compiled"),
    ("FedAvg", "fedavg", {}, "batched"),
    ("FedAvg", "fedavg", {}, "per-site"),
    ("FedAvg", "fedavg", {}, "reference"),
    ("FedAvg", "fedavg", {}, "flower-sim"),
    ("AdaFed", "adafed", {}, "compiled"),
    ("AdaFed", "adafed", {}, "batched"),
    ("AdaFed", "adafed", {}, "per-site"),
    ("FedHealth2", "fedhealth2", {}, "compiled"),
    ("FedHealth2", "fedhealth2", {}, "batched"),
    ("FedHealth2", "fedhealth2", {}, "per-site"),
    ("FedProx", "fedprox", {}, "batched"),  # a penalty: the torch path by default
    ("FedProx", "fedprox", {}, "per-site"),
    ("APFL", "apfl", {}, "batched"),  # a loss and a model of its own
    ("APFL", "apfl", {}, "per-site"),
    ("iFedAvg", "ifedavg", PAPER_IFEDAVG, "batched, module"),
    ("FedProx", "fedprox", {}, "batched, module"),
]


def measure(task: dict) -> dict:
    """Run one configuration in this process and report its timings."""
    import torch

    from fedcore.algorithms import build_algorithm
    from fedcore.engine import Simulation, TrainConfig

    started = time.perf_counter()
    if task["data"] == "har":
        federation = _har(task)
    else:
        federation = _synthetic(task["sites"], task["rows"])
    load_s = time.perf_counter() - started
    rounds = task["rounds"]
    if task["path"] == "flower-sim":
        return {**task, **_flower_simulation(federation, task), "load_s": load_s,
                "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "sites": len(federation.sites)}
    processes = 1
    if task["path"] == "reference":
        from benchmarks.reference_loop import ReferenceLoop

        loop = ReferenceLoop(federation, rounds=1000, local_f_in=task["algorithm"] == "ifedavg")
        step = lambda: (loop.round(), loop.evaluate())  # noqa: E731
        device = "cpu"
    else:
        execution, *variant = task["path"].split(", ")
        if "module" in variant:  # the hand-written pass computes no model: the module's own layers do
            from fedcore.execution import stacked

            stacked.supports = lambda model: False
        # the compiled round runs on the CPU only: on a GPU machine its rows stay the CPU baseline
        # that the other rows' ratios are taken against (device 'auto' would refuse it there)
        config = TrainConfig(rounds=1000, eval_every=1, execution=execution,
                             processes=1 if "1 process" in variant else 0,
                             **({"device": "cpu"} if execution == "compiled" else {}))
        started = time.perf_counter()
        sim = Simulation(federation, build_algorithm(task["algorithm"], task["params"]), config)
        setup_s = time.perf_counter() - started

        def step() -> None:
            train_loss = sim.step()
            sim.round_record(train_loss, 0.0)

        device = str(sim.device)
        processes = sim.executor.processes
    step()  # warm-up round
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return {
        **task,
        "s_per_round": statistics.median(times),
        "load_s": load_s,
        "setup_s": setup_s if task["path"] != "reference" else 0.0,
        "peak_mb": _peak_mb(sim if task["path"] != "reference" else None),
        "device": device,
        "threads": torch.get_num_threads(),
        "processes": processes,
        "sites": len(federation.sites),
    }


def _har(task: dict):
    """The HAR federation; with --reuse-data loaded once per benchmark run: the first row's process
    writes it to the run's scratch folder (`task["cache"]`) and every later row reads it back (the
    data, the split and the standardisation are the loader's all the same)."""
    import torch

    from data_adapters import load_federation

    cache = Path(task["cache"]) / "har.pt" if task.get("cache") else None
    if cache is not None and cache.exists():
        return torch.load(cache, weights_only=False)
    federation = load_federation({"source": "har", "path": str(task["har"])}, seed=0)
    if cache is not None:
        torch.save(federation, cache.with_suffix(".part"))
        cache.with_suffix(".part").replace(cache)
    return federation


def _peak_mb(sim) -> float:
    """Peak resident memory of this process plus the simulation's worker processes (pages of the
    shared tensors count once in each: an upper bound)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for worker in getattr(getattr(getattr(sim, "executor", None), "workers", None), "processes", []):
        status = Path(f"/proc/{worker.pid}/status").read_text()
        peak += int(status.split("VmHWM:")[1].split()[0]) / 1024
    return peak


def _flower_simulation(federation, task: dict) -> dict:
    """The same protocol through our Flower app on Flower's simulation engine; the first round
    (actors starting, imports) is the warm-up and not timed."""
    import torch

    from application.flower_simulation import round_seconds, run_flower_simulation

    config = {"rounds": task["rounds"] + 1, "eval_every": 1, "lr_decay_every": 20, "execution": "per-site"}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as store:
        run = run_flower_simulation(federation, task["algorithm"], Path(store), task["params"], config,
                                    cpus=os.cpu_count() or 1)
        if run.status.state != "done":
            raise RuntimeError(f"the Flower simulation failed: {run.status.error}")
        times = round_seconds(run)[1:]
    return {"s_per_round": statistics.median(times), "setup_s": time.perf_counter() - started - sum(times),
            "device": "cpu", "threads": torch.get_num_threads(), "processes": 1}


def full_run(task: dict) -> dict:
    """One complete 1000-round iFedAvg run on HAR with the engine's defaults, timed end to end (load excluded)."""
    from data_adapters import load_federation
    from fedcore.algorithms import build_algorithm
    from fedcore.engine import Simulation, TrainConfig

    federation = load_federation({"source": "har", "path": str(task["har"])}, seed=0)
    started = time.perf_counter()
    sim = Simulation(federation, build_algorithm("ifedavg", PAPER_IFEDAVG), TrainConfig(rounds=1000, eval_every=1))
    history = sim.run()
    return {"wall_s": time.perf_counter() - started, "mean_f1": history[-1]["mean"]["f1"],
            "worst_f1": history[-1]["worst"]["f1"], "execution": sim.executor.name, "processes": sim.executor.processes,
            "peak_mb": _peak_mb(sim)}


def _synthetic(n_sites: int, rows: int):
    """SYNTHETIC scaling data: 20 Gaussian features, 2 classes, `rows` per site."""
    import numpy as np

    from fedcore.federation import Federation, split_site

    rng = np.random.default_rng(0)
    centres = rng.normal(0, 1, size=(2, 20))
    sites, warnings = [], []
    for i in range(n_sites):
        y = rng.integers(0, 2, rows)
        sites.append(split_site(f"synthetic {i}", centres[y] + rng.normal(0, 1, (rows, 20)), y, 0, warnings))
    return Federation("synthetic scaling", "SYNTHETIC", sites, [f"f{j}" for j in range(20)],
                      ["continuous"] * 20, ["a", "b"], synthetic=True)


def _wait_for_ray_to_exit(timeout_s: float = 60.0) -> None:
    """Flower's simulation engine (Ray) leaves worker processes exiting for some seconds after a
    run; the next row waits for them, or they would take cores from it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = False
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                text = cmdline.read_bytes()
            except OSError:
                continue
            alive = alive or b"ray::" in text or b"raylet" in text or b"gcs_server" in text
        if not alive:
            return
        time.sleep(0.5)


def _in_subprocess(task: dict, function: str, root: Path = ROOT) -> dict:
    """`function` run on `task` in a fresh process, with the code of the checkout `root`."""
    done = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "speed.py"), f"--{function}", json.dumps(task, default=str)],
        capture_output=True, text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{task} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _measured_or_none(task: dict, root: Path) -> dict | None:
    """The row measured with another checkout's code, or None where that code cannot run it."""
    try:
        return _in_subprocess(task, "measure", root)
    except RuntimeError as error:
        print(f"  not in {root}: {str(error).strip().splitlines()[-1]}", file=sys.stderr, flush=True)
        return None


def _print_comparison(root: Path, measured: dict, elsewhere: dict) -> None:
    """This checkout's seconds per round against another's, row by row: each sweep's ratio was
    measured minutes apart at most, so its median and range are what to compare."""
    print(f"\nThis checkout ({ROOT}) against {root}, alternating row by row\n")
    print("| algorithm | path | s / round here | s / round there | here / there (median, range over sweeps) |")
    print("|---|---|---|---|---|")
    for (label, path), results in measured.items():
        there = elsewhere.get((root, label, path), {})
        pairs = [(here["s_per_round"], there[sweep]["s_per_round"]) for sweep, here in enumerate(results)
                 if there.get(sweep) is not None]
        if not pairs:
            print(f"| {label} | {path} | {statistics.median(r['s_per_round'] for r in results):.4f} | – | – |")
            continue
        ratios = [here / other for here, other in pairs]
        print(f"| {label} | {path} | {statistics.median(h for h, _ in pairs):.4f} | "
              f"{statistics.median(o for _, o in pairs):.4f} | {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}–{max(ratios):.2f}, {len(ratios)} sweeps) |")


def _where(result: dict) -> str:
    if result["processes"] > 1:
        return f"{result['device']}, {result['processes']} processes × 1 thread"
    return f"{result['device']} ({result['threads']} threads)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10, help="timed rounds per configuration")
    parser.add_argument("--fast-rounds", type=int, default=40,
                        help="timed rounds of the compiled and batched rows (a few seconds: more rounds, a steadier median)")
    parser.add_argument("--repeats", type=int, default=3, help="processes per configuration (median taken)")
    parser.add_argument("--har", type=Path, default=HAR)
    parser.add_argument("--full-run", action="store_true", help="also time a whole 1000-round HAR run")
    parser.add_argument("--only", action="append", metavar="PATH",
                        help="measure only the protocol rows of this path (e.g. flower-sim; repeatable), no scaling")
    parser.add_argument("--reuse-data", action="store_true",
                        help="load HAR once and share it among the rows' processes (a minute less a row on a busy "
                             "machine; peak memory then leaves out parsing the CSV, but in the first row)")
    parser.add_argument("--label", action="append", metavar="ALGORITHM",
                        help="measure only the protocol rows of this algorithm (e.g. APFL; repeatable)")
    parser.add_argument("--against", type=Path, action="append", default=[], metavar="CHECKOUT",
                        help="also measure every row with another checkout's code, alternating (before / after)")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--full", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(json.loads(args.measure))))
        return
    if args.full:
        print(json.dumps(full_run(json.loads(args.full))))
        return

    labelled = {(label, path) for label, _, _, path in PROTOCOL_ROWS}  # with --only: their compiled rows too
    scratch = tempfile.mkdtemp(prefix="fedcore-speed-") if args.reuse_data else None
    measured, elsewhere = {}, {}  # this checkout's results; (checkout, label, path) -> {sweep: result or None}
    # Repeat the whole sweep rather than each row back to back, so that a slow spell on a shared
    # machine falls on every row alike instead of on one row, and the ratios stay fair.
    for repeat in range(args.repeats):
        for label, algorithm, params, path in PROTOCOL_ROWS:
            if args.only and path not in args.only and not (
                    path == FASTEST and any((label, only) in labelled for only in args.only)):
                continue
            if args.label and label not in args.label:
                continue
            task = {"data": "har", "har": args.har, "cache": scratch, "algorithm": algorithm, "params": params,
                    "path": path, "rounds": args.fast_rounds if path.startswith(FAST_PATHS) else args.rounds}
            print(f"measuring {label} {path} (sweep {repeat + 1} of {args.repeats}) ...", file=sys.stderr, flush=True)
            checkouts = [ROOT, *args.against]
            for root in checkouts if repeat % 2 == 0 else checkouts[::-1]:  # each first in turn
                if root == ROOT:
                    measured.setdefault((label, path), []).append(_in_subprocess(task, "measure"))
                else:
                    elsewhere.setdefault((root, label, path), {})[repeat] = _measured_or_none(task, root)
                if path == "flower-sim":
                    _wait_for_ray_to_exit()
    rows = [(label, path, statistics.median(r["s_per_round"] for r in results), results)
            for (label, path), results in measured.items()]
    by_path = {path: {label: per_round for label, p, per_round, _ in rows if p == path}
               for path in ("reference", "flower-sim", FASTEST)}
    print(f"HAR protocol, {args.fast_rounds} ({' and '.join(FAST_PATHS)}) or {args.rounds} (others) timed rounds x "
          f"{args.repeats} processes per row (median)\n")
    print(f"| algorithm | path | s / round | 1000 rounds (projected) | reference / this | Flower / this | this / {FASTEST} "
          "| peak memory | device |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, path, per_round, results in rows:
        ratios = [f"{by_path[other][label] / per_round:.1f}" if label in by_path[other] else "–"
                  for other in ("reference", "flower-sim")]
        to_fastest = f"{per_round / by_path[FASTEST][label]:.1f}" if label in by_path[FASTEST] else "–"
        print(f"| {label} | {path} | {per_round:.4f} | {per_round * 1000:.0f} s | {' | '.join(ratios)} | "
              f"{to_fastest} | {max(r['peak_mb'] for r in results):.0f} MB | {_where(results[0])} |")

    for root in args.against:
        _print_comparison(root, measured, elsewhere)
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.only or args.label:
        return
    print(f"\nScaling ({FASTEST} iFedAvg, synthetic sites x 50 rows, evaluation every round)\n")
    print("| sites | s / round | s / round / site | peak memory | processes |")
    print("|---|---|---|---|---|")
    for n_sites in (10, 100, 1000):
        task = {"data": "synthetic", "sites": n_sites, "rows": 50, "algorithm": "ifedavg", "params": PAPER_IFEDAVG,
                "path": FASTEST, "rounds": args.fast_rounds}
        results = [_in_subprocess(task, "measure") for _ in range(args.repeats)]
        per_round = statistics.median(r["s_per_round"] for r in results)
        print(f"| {n_sites} | {per_round:.4f} | {per_round / n_sites * 1000:.3f} ms | "
              f"{max(r['peak_mb'] for r in results):.0f} MB | {results[0]['processes']} |")
        sys.stdout.flush()

    if args.full_run:
        result = _in_subprocess({"har": args.har}, "full")
        print(f"\nFull 1000-round HAR iFedAvg run ({result['execution']}, {result['processes']} processes): "
              f"{result['wall_s']:.1f} s, "
              f"mean F1 {result['mean_f1']:.3f}, worst site F1 {result['worst_f1']:.3f}, "
              f"peak {result['peak_mb']:.0f} MB")


if __name__ == "__main__":
    main()
