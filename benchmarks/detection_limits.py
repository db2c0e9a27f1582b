"""How far a site's column has to move before the check-up's data lens reports it: what each
site's "nothing found" covers.

    .venv/bin/python benchmarks/detection_limits.py [--only heart,demo,vehicle] [--cells 24] [--seed 0]

For a site and a continuous column of the check-up suite's tables (`evidence/corruptions.py`,
original units, the default disclosure policy), every value of that column at that site is moved
by d × the column's SD over all sites' values (the unit of the suite's shift family), and the
smallest d at which the check-up reports a finding at that site and column that the untouched data
do not show is found by bisection (moves up, 0 to 12 SD, to 0.05 SD). Printed per table: the
median, smallest and largest d over the cells (heart: every site and column; the others: `--cells`
drawn at random), how many cells no move up to 12 SD made reported, and the checks that reported
first. Nothing is timed: these are the check-up's detection limits, measured with the product's
own `check_up`, for the note that says why a family cannot reach its goal on a table.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT / "evidence"), str(ROOT.parent)]

from corruptions import Table, load_table  # noqa: E402
from fedcore.checkup import check_up  # noqa: E402

LARGEST, RESOLUTION = 12.0, 0.05


def reported(table: Table) -> set[tuple[str, str | None, str]]:
    """(site, feature, kind) of every finding the check-up reports on the table's profile."""
    return {(f.site, f.feature, f.kind) for f in check_up(table.profile(), {}).reported}


def moved(table: Table, site: int, j: int, distance: float, unit: float) -> Table:
    x = table.x[site].copy()
    x[:, j] += distance * unit
    return table.with_site(site, x, table.y[site])


def smallest_reported(table: Table, site: int, j: int, untouched: set) -> tuple[float, str]:
    """The smallest move (in the column's SD over all sites) that the check-up reports at the site
    and column, and the kind it reports it as (inf, '' where none up to LARGEST)."""
    unit = float(np.nanstd(np.concatenate([x[:, j] for x in table.x])))
    name, feature = table.sites[site], table.features[j]

    def new(distance: float) -> list[str]:
        found = reported(moved(table, site, j, distance, unit)) - untouched
        return sorted(kind for s, f, kind in found if s == name and f == feature)

    if not new(LARGEST):
        return float("inf"), ""
    low, high = 0.0, LARGEST
    while high - low > RESOLUTION:
        middle = (low + high) / 2
        low, high = (low, middle) if new(middle) else (middle, high)
    return high, ",".join(new(high))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="heart,demo,vehicle")
    parser.add_argument("--cells", type=int, default=24, help="cells drawn per table (heart: all of them)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    for name in args.only.split(","):
        table = load_table(name)
        continuous = [j for j, kind in enumerate(table.kinds) if kind == "continuous"]
        cells = [(i, j) for i in range(len(table.sites)) for j in continuous
                 if np.isfinite(table.x[i][:, j]).sum() >= 20]
        if name != "heart" and len(cells) > args.cells:
            cells = [cells[k] for k in sorted(rng.choice(len(cells), args.cells, replace=False))]
        untouched = reported(table)
        limits, kinds = [], collections.Counter()
        print(f"\n{name}: {len(table.sites)} sites, {len(cells)} cells")
        for i, j in cells:
            distance, kind = smallest_reported(table, i, j, untouched)
            limits.append(distance)
            kinds.update(kind.split(",") if kind else ["none up to 12 SD"])
            if name == "heart":
                print(f"  {table.sites[i]:12s} {table.features[j]:10s} {distance:5.2f} SD  {kind}")
        finite = [d for d in limits if np.isfinite(d)]
        if finite:
            print(f"  median {statistics.median(finite):.2f} SD, smallest {min(finite):.2f}, largest "
                  f"{max(finite):.2f}; not reported up to {LARGEST:g} SD: {len(limits) - len(finite)}")
        print("  reported first as: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))


if __name__ == "__main__":
    main()
