"""How often the data lens reports a site that does not differ: each suite federation's rows pooled
and dealt to K sites at random, so that no site differs from another but by chance.

Data made so the answer is known, from the real data sets of the check-up suite
(benchmarks/evidence/corruptions.py: HAR, vehicle sensors, heart disease, the demo with its
built-in problems off, MNIST as a table). Every row of the federation is pooled and the rows are
dealt to K sites of equal size at random (a permutation per repeat): the sites are exchangeable, so
every check that compares a site with the others tests a true null, and a calibrated one gives p
below a level in that level's share of its cells. Each federation is checked up through the public
entry points (`Table.profile`, the product's default disclosure policy, then `check_up`), as the
suite's data lens is.

Printed:
- per data set and K: rows per site, the share of sites with a reported finding, and of them the
  sites with a finding of a check that compares the site with the others (a check that tests a
  property within the site, `WITHIN_SITE`, states something true of the pooled rows: heart's values
  are missing more often for one class in every share of its rows);
- per check, over every data set and K: the cells tested, the share of them with p below 0.05,
  0.01 and 0.001 (a calibrated test: at most 5 %, 1 %, 0.1 %), and the findings reported.

    .venv/bin/python benchmarks/random_split_null.py [--repeats 10] [--datasets har vehicle ...]

About 2 minutes on 2 cores at the default 10 repeats.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "evidence"), str(HERE.parent)]

from corruptions import LOADERS, Table, load_table  # noqa: E402

from fedcore.checkup import check_up  # noqa: E402
from fedcore.interpret.checks import BY_KIND  # noqa: E402

LEVELS = (0.05, 0.01, 0.001)
SITE_COUNTS = (4, 8, 16)
MIN_ROWS = 60  # a K is tried where every site gets this many rows
# checks whose null is within the site (no comparison with the other sites): on pooled rows they
# report what is true of every share of them
WITHIN_SITE = ("missing_by_class",)


def dealt(table: Table, sites: int, seed: int) -> Table:
    """The table's rows pooled and dealt to `sites` sites of equal size (± 1 row) at random."""
    x, y = np.concatenate(table.x), np.concatenate(table.y)
    parts = np.array_split(np.random.default_rng([seed, sites]).permutation(len(y)), sites)
    return replace(table, sites=[f"site {k + 1}" for k in range(sites)], x=[x[p] for p in parts],
                   y=[y[p] for p in parts])


def run(tables: Iterable[Table], repeats: int) -> tuple[list[dict], dict[str, dict]]:
    """Per (table, K) a row of the first table; per check its cells' p-values and reported count."""
    federations, checks = [], defaultdict(lambda: {"p": [], "reported": 0})
    for table in tables:
        rows = sum(len(y) for y in table.y)
        for sites in (k for k in SITE_COUNTS if rows // k >= MIN_ROWS):
            flagged = comparing = 0
            kinds = Counter()
            for seed in range(repeats):
                result = check_up(dealt(table, sites, seed).profile(), {})
                flagged += len({f.site for f in result.reported})
                comparing += len({f.site for f in result.reported if f.kind not in WITHIN_SITE})
                for finding in result.findings:
                    if np.isfinite(finding.p):
                        checks[finding.kind]["p"].append(finding.p)
                for finding in result.reported:
                    checks[finding.kind]["reported"] += 1
                    kinds[finding.kind] += 1
            federations.append({"data set": table.name, "sites": sites, "rows": rows // sites,
                                "flagged": flagged, "comparing": comparing, "of": sites * repeats,
                                "kinds": kinds})
    return federations, checks


def _title(kind: str) -> str:
    return BY_KIND[kind].title if kind in BY_KIND else kind


def _share(count: int, total: int) -> str:
    return f"{100 * count / total:.1f} % ({count}/{total})" if total else "–"


def report(federations: list[dict], checks: dict[str, dict], repeats: int) -> str:
    lines = [f"Rows of each data set pooled and dealt to K sites at random, {repeats} repeats each; "
             "no site differs but by chance.", "",
             "| data set | K sites | rows per site | sites with a finding | of them, of a check comparing sites "
             "| findings most reported |", "|---|---|---|---|---|---|"]
    for f in federations:
        most = ", ".join(f"{_title(kind)} {n}" for kind, n in f["kinds"].most_common(3)) or "none"
        lines.append(f"| {f['data set']} | {f['sites']} | {f['rows']} | {_share(f['flagged'], f['of'])} "
                     f"| {_share(f['comparing'], f['of'])} | {most} |")
    lines += ["", "Per check, every data set and K (a calibrated test: p < 0.05 in at most 5 % of its cells, "
              "< 0.01 in 1 %, < 0.001 in 0.1 %):", "",
              "| check | cells | p < 0.05 | p < 0.01 | p < 0.001 | × nominal at 0.001 | findings reported |",
              "|---|---|---|---|---|---|---|"]
    order = sorted(checks, key=lambda k: -np.mean(np.asarray(checks[k]["p"]) < LEVELS[-1]))
    for kind in order:
        p = np.asarray(checks[kind]["p"])
        shares = [float(np.mean(p < level)) for level in LEVELS]
        lines.append(f"| {_title(kind)}{' (within the site)' if kind in WITHIN_SITE else ''} | {p.size} | "
                     + " | ".join(f"{100 * s:.2f} %" for s in shares)
                     + f" | {shares[-1] / LEVELS[-1]:.1f} | {checks[kind]['reported']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--datasets", nargs="+", choices=list(LOADERS), default=list(LOADERS))
    args = parser.parse_args()
    print(report(*run((load_table(name) for name in args.datasets), args.repeats), args.repeats))


if __name__ == "__main__":
    main()
