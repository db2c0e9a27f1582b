"""How fast the check-up's data lens answers: every site's profile of its own rows, then every check
of the registry over the profiles (`fedcore.checkup.check_up` with no runs).

    .venv/bin/python benchmarks/checkup_speed.py [--repeats 7] [--only har,vehicle,heart,demo]

Per data set, over `--repeats` runs after a warm-up: the median wall time and process CPU time of
profiling every site (`profile_federation`, all sites in turn: in a federation each site profiles
its own rows in parallel, so this is the sum of their times) and of the checks (`check_up`), the
data lens's total, and how many cells were tested, not testable and reported. The goal (issue 23):
the data lens on HAR (30 subjects × 265 features, 10,299 rows) in at most 5 s on 2 cores. The data
are read once, outside the timings (`mapping`: the aligned files' raw values, original units).
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", default=",".join(DATA))
    args = parser.parse_args()
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
