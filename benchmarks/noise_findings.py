"""What the check-up's data lens reports on the untouched federations when the sites add noise
(differential privacy, `dp-epsilon`): per data set and ε, the reported findings by kind, and how
many of them are of a check that reads a share (those `data_checks.beyond_noise` sets aside where
the noise is too large to test) or of one that reads values (quantile blocks, means and SDs,
whose noise no test counts yet). Without noise as the reference. A finding on an untouched
federation under noise that it does not show without noise is one the noise may have made.

    .venv/bin/python benchmarks/noise_findings.py [--datasets vehicle demo heart] [--epsilons 1 10 100] [--repeats 3]

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
    from fedcore.checkup import check_up
    from fedcore.interpret import checks
    from fedcore.interpret.disclosure import Policy
    from fedcore.interpret.profile import STATISTICS
    from data_adapters import check_reference, load_federation

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="*", default=list(DATA), choices=list(DATA))
    parser.add_argument("--epsilons", nargs="*", type=float, default=[1.0, 10.0, 100.0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    share_kinds = {c.kind for c in checks.of_lens(checks.DATA)
                   if any(n in STATISTICS and STATISTICS[n].kind == "share" for n in c.needs)}
    print("| data | ε | findings | of share checks | of other checks | kinds most reported (per repeat, mean) |")
    print("|---|---|---|---|---|---|")
    for name in args.datasets:
        reference = check_reference(DATA[name])
        for epsilon in [None, *args.epsilons]:
            repeats = 1 if epsilon is None else args.repeats
            totals, shares, kinds = [], [], Counter()
            for _ in range(repeats):
                policy = Policy(dp_epsilon=epsilon)
                federation = load_federation(reference, 0, disclosure=policy)
                result = check_up(federation.profile, {})
                reported = [f.kind for f in result.reported]
                totals.append(len(reported))
                shares.append(sum(kind in share_kinds for kind in reported))
                kinds.update(reported)
            total, share = statistics.median(totals), statistics.median(shares)
            top = ", ".join(f"{kind} {count / repeats:g}" for kind, count in kinds.most_common(5)) or "none"
            print(f"| {name} | {'no noise' if epsilon is None else f'{epsilon:g}'} | {total:g} | {share:g} | "
                  f"{total - share:g} | {top} |", flush=True)


if __name__ == "__main__":
    main()
