"""What the check-up's data lens reports on the untouched federations when the sites add noise
(differential privacy, `dp-epsilon`): per data set and ε, the reported findings by kind, and how
many of them are of a check that reads a share (those `data_checks.beyond_noise` sets aside where
the noise is too large to test), and how many the same federation does not show without noise
(same site, kind and feature): on untouched data, those are what the noise made. The checks of
values add the noise's variance to their own (`fedcore/interpret/release_noise.py`).

    .venv/bin/python benchmarks/noise_findings.py [--datasets vehicle demo heart] [--epsilons 1 10 100] [--repeats 5]

Each repeat is a fresh release (noise from the operating system's entropy): the counts are the
repeats' medians (the kinds: their mean count per repeat). The sites release at the default
minimum count throughout.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"
DATA = {
    "vehicle": {"source": "vehicle", "path": str(SHARED / "vehicle_sensor" / "vehicle_ditto_train_by_sensor.csv.gz"),
                "standardization": "none"},
    "heart": {"source": "heart", "path": str(SHARED / "heart_disease" / "canonical")},
    "demo": "demo",
}


def main() -> None:
    from fedcore.interpret import checks
    from fedcore.interpret.profile import STATISTICS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="*", default=list(DATA), choices=list(DATA))
    parser.add_argument("--epsilons", nargs="*", type=float, default=[1.0, 10.0, 100.0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    share_kinds = {c.kind for c in checks.of_lens(checks.DATA)
                   if any(n in STATISTICS and STATISTICS[n].kind == "share" for n in c.needs)}
    untouched(args.datasets, args.epsilons, args.repeats, share_kinds)
    print()
    dealt_at_random(args.datasets, args.epsilons, args.repeats)


def untouched(datasets: list[str], epsilons: list[float], repeats: int, share_kinds: set[str]) -> None:
    """The federations as they are: findings under noise that they do not show without it."""
    from fedcore.checkup import check_up
    from fedcore.interpret.disclosure import Policy
    from data_adapters import check_reference, load_federation

    print("| data | ε | findings | of share checks | not shown without noise | their kinds (per repeat, mean) |")
    print("|---|---|---|---|---|---|")
    for name in datasets:
        reference = check_reference(DATA[name])
        without: set[tuple] = set()
        for epsilon in [None, *epsilons]:
            times = 1 if epsilon is None else repeats
            totals, shares, new, kinds = [], [], [], Counter()
            for _ in range(times):
                federation = load_federation(reference, 0, disclosure=Policy(dp_epsilon=epsilon))
                reported = check_up(federation.profile, {}).reported
                cells = {(f.site, f.kind, f.feature) for f in reported}
                if epsilon is None:
                    without = cells
                made = [f.kind for f in reported if (f.site, f.kind, f.feature) not in without]
                totals.append(len(reported))
                shares.append(sum(f.kind in share_kinds for f in reported))
                new.append(len(made))
                kinds.update(made)
            top = ", ".join(f"{kind} {count / times:g}" for kind, count in kinds.most_common(6)) or "none"
            print(f"| {name} | {'no noise' if epsilon is None else f'{epsilon:g}'} | {statistics.median(totals):g} | "
                  f"{statistics.median(shares):g} | {statistics.median(new):g} | {top} |", flush=True)


def dealt_at_random(datasets: list[str], epsilons: list[float], repeats: int) -> None:
    """Data made so the answer is known: each federation's rows pooled and dealt back to its sites
    at random, each site keeping its own number of rows (so a small site stays small, and its
    release noisier than a large one's), nothing differing between them but chance. Every finding
    of a check comparing the sites is a false one; per repeat, a fresh deal checked up without noise
    and at each ε."""
    from fedcore.checkup import check_up
    from fedcore.interpret.disclosure import Policy

    sys.path.insert(0, str(ROOT / "benchmarks" / "evidence"))
    from corruptions import load_table
    from random_split_null import OWN, WITHIN_SITE, dealt

    print("Rows dealt back to the sites at random, each keeping its size (nothing differs):")
    print()
    print("| data | ε | sites with a finding comparing sites (median of deals) | findings | their kinds (per deal, mean) |")
    print("|---|---|---|---|---|")
    for name in datasets:
        table = load_table(name)
        counted: dict[float | None, tuple[list, list, Counter]] = {e: ([], [], Counter()) for e in [None, *epsilons]}
        for deal in range(repeats):
            federation = dealt(table, OWN, deal)
            for epsilon, (flagged, totals, kinds) in counted.items():
                comparing = [f for f in check_up(federation.profile(policy=Policy(dp_epsilon=epsilon)), {}).reported
                             if f.kind not in WITHIN_SITE]
                flagged.append(len({f.site for f in comparing}))
                totals.append(len(comparing))
                kinds.update(f.kind for f in comparing)
        for epsilon, (flagged, totals, kinds) in counted.items():
            top = ", ".join(f"{kind} {count / repeats:g}" for kind, count in kinds.most_common(5)) or "none"
            print(f"| {name} | {'no noise' if epsilon is None else f'{epsilon:g}'} | "
                  f"{statistics.median(flagged):g} of {len(table.sites)} | {statistics.median(totals):g} | {top} |",
                  flush=True)

if __name__ == "__main__":
    main()
