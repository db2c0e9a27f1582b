"""How fast the check-up's data lens answers: every site's profile of its own rows, then every check
of the registry over the profiles (`fedcore.checkup.check_up` with no runs).

    .venv/bin/python benchmarks/checkup_speed.py [--repeats 7] [--only har,vehicle,heart,demo]
    .venv/bin/python benchmarks/checkup_speed.py --lenses all [--repeats 1] [--only demo,har]

Per data set, over `--repeats` runs after a warm-up: the median wall time and process CPU time of
profiling every site (`profile_federation`, all sites in turn: in a federation each site profiles
its own rows in parallel, so this is the sum of their times) and of the checks (`check_up`), the
data lens's total, and how many cells were tested, not testable and reported. The goal (issue 23):
the data lens on HAR (30 subjects × 265 features, 10,299 rows) in at most 5 s on 2 cores. The data
are read once, outside the timings (`mapping`: the aligned files' raw values, original units).

`--lenses all`: a whole check-up as `fedcore checkup --train` runs it (`start_checkup` with its
default replicates and rounds, every model lens's run trained in this process one after another,
then `Plan.evaluate`), in a fresh run store each repeat: the median wall and CPU time of training,
of evaluating, and of the whole, with the time of each run. `--queued`: as the dashboard's
*Start a check-up* runs it, every run a background job, as many at once as the machine has cores
(`application.jobs`; CPU time is then this process's only). The goal (issue 23): every lens on
the demo in at most 20 s, on HAR in at most 60 s, on 2 cores.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"
DATA = {
    "har": {"source": "har", "path": str(SHARED / "uci_har" / "uci_har_time265_by_subject.csv.gz")},
    "vehicle": {"source": "vehicle", "path": str(SHARED / "vehicle_sensor" / "vehicle_ditto_train_by_sensor.csv.gz"),
                "standardization": "none"},
    "heart": {"source": "heart", "path": str(SHARED / "heart_disease" / "canonical")},
    "demo": "demo",
}


def sites_of(ref):
    """(profile arguments, or None for the demo, whose rows are generated) of a data reference."""
    from data_adapters import load_federation, mapping
    from data_adapters.assembly.assemble import profile_of

    if ref == "demo":
        return None, load_federation(ref).profile
    alignment, _ = mapping(ref)
    raw = alignment.encode()
    rows = [(site.name, site.x, site.y) for site in raw.sites]
    return (rows, raw.feature_names, raw.feature_kinds, raw.feature_columns or raw.feature_names, raw.class_names,
            raw.preprocessing.get("units") or {}), profile_of(raw)


def timed(work) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = work()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def until_trained(store, plan):
    """`plan` once no run of `store` is queued or training (the queue's workers pump it)."""
    while any(run.status.state in ("queued", "running") for run in store.runs()):
        time.sleep(0.2)
    return plan


def every_lens(names: list[str], repeats: int, queued: bool = False) -> None:
    """The whole check-up, model lenses trained in process or, `queued`, as the dashboard trains
    them (see the module's docstring)."""
    import tempfile

    from application.checkup_jobs import start_checkup
    from fedcore.store import RunStore

    print("| data | runs trained | train s (cpu) | evaluate s | every lens s | findings | slowest run s |")
    print("|---|---|---|---|---|---|---|")
    each = []
    for name in names:
        ref = DATA[name]
        if isinstance(ref, dict) and not Path(ref["path"]).exists():
            print(f"| {name} | (no data at {ref['path']}) | | | | | |")
            continue
        rows = []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as folder:
                store = RunStore(Path(folder))
                marks: list[tuple[str, float]] = []
                if queued:
                    wall, cpu, plan = timed(lambda: until_trained(store, start_checkup(store, ref)))
                    runs = [(f"{run.spec.algorithm} (seed {run.spec.seed})",
                             (run.status.heartbeat or 0.0) - (run.status.started_at or 0.0)) for run in store.runs()]
                else:
                    wall, cpu, plan = timed(lambda: start_checkup(
                        store, ref, in_process=True, progress=lambda text: marks.append((text, time.perf_counter()))))
                    ended = time.perf_counter()
                    runs = [(text, (marks[k + 1][1] if k + 1 < len(marks) else ended) - at)
                            for k, (text, at) in enumerate(marks)]
                evaluate_wall, _, result = timed(lambda: plan.evaluate(store))
                rows.append((wall, cpu, evaluate_wall, len(result.reported), runs))
        median = lambda k: statistics.median(row[k] for row in rows)  # noqa: E731
        slowest = max(rows[0][4], key=lambda run: run[1]) if rows[0][4] else ("", 0.0)
        print(f"| {name} | {len(rows[0][4])} | {median(0):.1f} ({median(1):.1f}) | {median(2):.2f} | "
              f"{statistics.median(row[0] + row[2] for row in rows):.1f} | {rows[0][3]} | "
              f"{slowest[1]:.1f} ({slowest[0]}) |")
        each.append(f"{name}, each run (first repeat): " + "; ".join(
            f"{text.removeprefix('training ')} {seconds:.1f} s" for text, seconds in rows[0][4]))
    print("\n" + "\n".join(each))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=None, help="default 7 (data lens), 1 (every lens)")
    parser.add_argument("--only", default=None, help="data sets (default: every one; every lens: demo,har)")
    parser.add_argument("--lenses", choices=("data", "all"), default="data")
    parser.add_argument("--queued", action="store_true", help="every lens: the runs as background jobs, as the "
                        "dashboard starts them (one per core at a time), not one after another in process")
    args = parser.parse_args()
    if args.lenses == "all":
        every_lens((args.only or "demo,har").split(","), args.repeats or 1, args.queued)
        return
    args.repeats = args.repeats or 7
    args.only = args.only or ",".join(DATA)
    from fedcore.checkup import check_up
    from fedcore.interpret.profile import profile_federation

    print("| data | sites × features | profile s (cpu) | checks s (cpu) | data lens s | cells tested | not testable "
          "| findings |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.only.split(","):
        ref = DATA[name]
        if isinstance(ref, dict) and not Path(ref["path"]).exists():
            print(f"| {name} | (no data at {ref['path']}) | | | | | | |")
            continue
        arguments, profile = sites_of(ref)
        check_up(profile, {})  # warm-up: imports, caches
        profile_times, check_times, result = [], [], None
        for _ in range(args.repeats):
            if arguments is not None:
                wall, cpu, profile = timed(lambda: profile_federation(*arguments))
                profile_times.append((wall, cpu))
            wall, cpu, result = timed(lambda: check_up(profile, {}))
            check_times.append((wall, cpu))
        median = lambda pairs, k: statistics.median(p[k] for p in pairs) if pairs else 0.0  # noqa: E731
        total = statistics.median(
            (profile_times[k][0] if profile_times else 0.0) + check_times[k][0] for k in range(args.repeats))
        print(f"| {name} | {len(profile.sites)} × {len(profile.features)} | "
              + (f"{median(profile_times, 0):.2f} ({median(profile_times, 1):.2f})" if profile_times else "–")
              + f" | {median(check_times, 0):.2f} ({median(check_times, 1):.2f}) | {total:.2f} | {result.tested} | "
              f"{len(result.untestable())} | {len(result.reported)} |")


if __name__ == "__main__":
    main()
