"""How often the data lens reports a site that does not differ: each suite federation's rows pooled
and dealt to K sites at random, so that no site differs from another but by chance.

Data made so the answer is known, from the real data sets of the check-up suite
(benchmarks/evidence/corruptions.py: HAR, vehicle sensors, heart disease, the demo with its
built-in problems off, MNIST as a table). Every row of the federation is pooled and the rows are
dealt to K sites of equal size at random (a permutation per deal): the sites are exchangeable, so
every check that compares a site with the others tests a true null, and a calibrated one gives p
below a level in that level's share of its cells. Each federation is checked up through the public
entry points (`Table.profile`, the product's default disclosure policy, then `check_up`), as the
suite's data lens is.

Honest protocol, as the suite's: deals 0-9 are the tuning half (the detector changes of 2026-12-02
were made looking at them), deals 10-19 the held-out half, on which the figures are reported.

Printed (and, from the recorded deals, RESULTS.md §8 by `make evidence`):
- per data set and K: rows per site, the share of sites with a reported finding, and of them the
  sites with a finding of a check that compares the site with the others (a check that tests a
  property within the site, `WITHIN_SITE`, states something true of the pooled rows: heart's values
  are missing more often for one class in every share of its rows);
- per check, over every data set and K: the cells tested, the share of them with p below 0.05,
  0.01 and 0.001 (a calibrated test: at most 5 %, 1 %, 0.1 %), and the findings reported.
- the same for the rows dealt back to each federation's own sites, each keeping its number of rows
  (K = `OWN`): sites of different sizes where nothing differs, and per check the share of null
  cells below 0.05 and 0.001 per band of the site's size (`SIZE_BANDS`), which says whether a small
  site's test and a large one's are calibrated alike.

    .venv/bin/python benchmarks/random_split_null.py [--half held-out|tuning|both] [--datasets har ...] [--sites 4 8 16 own] [--jobs 2]

Each deal is recorded in benchmarks/evidence/results/random_split_null.json.gz with the data lens's
code it measured (its hash, as the suite's): a deal whose detector changed is checked up again.
About 5 minutes on 2 cores for both halves (the own sizes' deals add about 2).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "evidence"), str(HERE.parent)]

from checkup_families import HALVES, fingerprint  # noqa: E402  (the suite's halves: seeds 0-9 and 10-19)
from common import cached_results, run_tasks  # noqa: E402
from corruptions import LOADERS, Table, load_table  # noqa: E402

from fedcore.checkup import check_up  # noqa: E402
from fedcore.interpret.checks import BY_KIND, DATA, of_lens  # noqa: E402

PART = "random_split_null"
LEVELS = (0.05, 0.01, 0.001)
OWN = "own"  # the rows dealt back to the federation's own sites, each keeping its number of rows
SITE_COUNTS = (4, 8, 16, OWN)
MIN_ROWS = 60  # a K is tried where every site gets this many rows
# a site's size at its own size's deals: a small site's statistics vary more, and its test must
# hold that (`sampling`), while a large one is compared with the spread of sites of every size
SIZE_BANDS = ((0, 30, "under 30 rows"), (30, 100, "30-99 rows"), (100, None, "100 rows or more"))
# checks whose null is within the site (no comparison with the other sites): on pooled rows they
# report what is true of every share of them
WITHIN_SITE = ("missing_by_class",)
DATA_FAMILIES = sorted({check.family for check in of_lens(DATA)})


def dealt(table: Table, sites: int | str, seed: int) -> Table:
    """The table's rows pooled and dealt at random to `sites` sites of equal size (± 1 row), or
    (`OWN`) back to the table's own sites, each keeping its number of rows: a small site stays
    small, and nothing differs between the sites but chance and their sizes."""
    x, y = np.concatenate(table.x), np.concatenate(table.y)
    if sites == OWN:
        # (the key of the deals at the sites' own sizes since 3572d6c: `noise_findings.py` and the
        # sessions' figures in benchmarks/README.md deal with it)
        order = np.random.default_rng([seed, 23]).permutation(len(y))
        parts = np.split(order, np.cumsum([len(labels) for labels in table.y])[:-1])
        return replace(table, x=[x[p] for p in parts], y=[y[p] for p in parts])
    parts = np.array_split(np.random.default_rng([seed, sites]).permutation(len(y)), sites)
    return replace(table, sites=[f"site {k + 1}" for k in range(sites)], x=[x[p] for p in parts],
                   y=[y[p] for p in parts])


def size_band(rows: int) -> str:
    """The `SIZE_BANDS` title a site of `rows` rows falls in."""
    return next(title for low, high, title in SIZE_BANDS if rows >= low and (high is None or rows < high))


def tasks(datasets: Iterable[str] = tuple(LOADERS), halves: Iterable[str] = tuple(HALVES),
          site_counts: Iterable[int | str] = SITE_COUNTS) -> list[dict]:
    return [{"dataset": d, "sites": k, "seed": s} for d in datasets for k in site_counts
            for half in halves for s in HALVES[half]]


def deal_checked(table: Table, sites: int | str, seed: int) -> dict[str, Any]:
    """One deal of the table checked up: its sites with a reported finding (all, and those of a check
    comparing sites), the findings reported per check, and per check its tested cells and how many
    have p below each of LEVELS. A K that leaves a site fewer than MIN_ROWS rows is not dealt.
    At the sites' own sizes (`OWN`), `rows` is the smallest and largest site's, the cells are also
    counted per `SIZE_BANDS` band of their site's size (`by_size`), and per band its sites with a
    finding of a check comparing sites, of its sites (`flagged_by_size`)."""
    sizes = [len(y) for y in table.y]
    rows: int | list[int] = [min(sizes), max(sizes)] if sites == OWN else sum(sizes) // sites
    if sites != OWN and rows < MIN_ROWS:
        return {"rows": rows, "too_few_rows": True}
    federation = dealt(table, sites, seed)
    result = check_up(federation.profile(), {})
    band = dict(zip(federation.sites, map(size_band, (len(y) for y in federation.y))))
    cells: dict[str, list[int]] = {}
    by_size: dict[str, dict[str, list[int]]] = {}

    def count(counts: list[int], p: float) -> None:
        counts[0] += 1
        for k, level in enumerate(LEVELS, 1):
            counts[k] += int(p < level)

    for finding in result.findings:
        if np.isfinite(finding.p):
            count(cells.setdefault(finding.kind, [0] * (1 + len(LEVELS))), finding.p)
            if sites == OWN:
                count(by_size.setdefault(band[finding.site], {}).setdefault(finding.kind, [0] * (1 + len(LEVELS))),
                      finding.p)
    out = {"rows": rows, "of": len(federation.sites), "flagged": len({f.site for f in result.reported}),
           "comparing": len({f.site for f in result.reported if f.kind not in WITHIN_SITE}),
           "reported": dict(Counter(f.kind for f in result.reported)), "cells": cells}
    if sites != OWN:
        return out
    comparing = {f.site for f in result.reported if f.kind not in WITHIN_SITE}
    flagged = {title: [sum(band[site] == title and site in comparing for site in band),
                       sum(band[site] == title for site in band)] for _, _, title in SIZE_BANDS}
    return {**out, "by_size": by_size, "flagged_by_size": flagged}


def evaluate(task: dict) -> dict[str, Any]:
    """A task's deal checked up, with the hash of the data lens's code it measured."""
    return {**deal_checked(load_table(task["dataset"]), task["sites"], task["seed"]),
            "detector": fingerprint("data")}


def still_holds(task: dict, result: Any) -> bool:
    return isinstance(result, dict) and result.get("detector") == fingerprint("data")


def aggregate(deals: Iterable[tuple[dict, dict]]) -> tuple[list[dict], dict[str, dict]]:
    """(task, result) pairs summed per (data set, K), in the order first met, and per check."""
    federations: dict[tuple, dict] = {}
    checks: dict[str, dict] = {}

    def check(kind: str) -> dict:
        return checks.setdefault(kind, {"cells": 0, "below": [0] * len(LEVELS), "reported": 0})

    for task, result in deals:
        if result.get("too_few_rows"):
            continue
        row = federations.setdefault((task["dataset"], task["sites"]), {
            "data set": task["dataset"], "sites": task["sites"], "rows": result["rows"], "deals": 0,
            "flagged": 0, "comparing": 0, "of": 0, "kinds": Counter()})
        row["deals"] += 1
        for name in ("flagged", "comparing", "of"):
            row[name] += result[name]
        row["kinds"].update(result["reported"])
        for kind, counts in result["cells"].items():
            summed = check(kind)
            summed["cells"] += counts[0]
            summed["below"] = [a + b for a, b in zip(summed["below"], counts[1:])]
        for kind, n in result["reported"].items():
            check(kind)["reported"] += n
    return list(federations.values()), checks


def _title(kind: str) -> str:
    return BY_KIND[kind].title if kind in BY_KIND else kind


def _share(count: int, total: int) -> str:
    return f"{100 * count / total:.1f} % ({count}/{total})" if total else "–"


def _sites_and_rows(federation: dict) -> tuple[str, str]:
    """A federation's K and rows per site as the report says them (at the sites' own sizes: their
    number, and the smallest and largest site's rows)."""
    if federation["sites"] != OWN:
        return str(federation["sites"]), str(federation["rows"])
    low, high = federation["rows"]
    return f"{federation['of'] // federation['deals']}, own sizes", f"{low}-{high}"


def report(federations: list[dict], checks: dict[str, dict]) -> str:
    lines = ["| data set | K sites | deals | rows per site | sites with a finding | of them, of a check comparing sites "
             "| findings most reported |", "|---|---|---|---|---|---|---|"]
    for f in federations:
        most = ", ".join(f"{_title(kind)} {n}" for kind, n in f["kinds"].most_common(3)) or "none"
        sites, rows = _sites_and_rows(f)
        lines.append(f"| {f['data set']} | {sites} | {f['deals']} | {rows} | {_share(f['flagged'], f['of'])} "
                     f"| {_share(f['comparing'], f['of'])} | {most} |")
    flagged, comparing, of = (sum(f[name] for f in federations) for name in ("flagged", "comparing", "of"))
    lines.append(f"| **all** | | | | {_share(flagged, of)} | {_share(comparing, of)} | |")
    lines += ["", "Per check, every data set and K (a calibrated test: p < 0.05 in at most 5 % of its cells, "
              "< 0.01 in 1 %, < 0.001 in 0.1 %):", "",
              "| check | cells | p < 0.05 | p < 0.01 | p < 0.001 | × nominal at 0.001 | findings reported |",
              "|---|---|---|---|---|---|---|"]

    def shares(kind: str) -> list[float]:
        check = checks[kind]
        return [b / check["cells"] if check["cells"] else float("nan") for b in check["below"]]

    for kind in sorted(checks, key=lambda k: (-np.nan_to_num(shares(k)[-1], nan=-1), k)):
        below = shares(kind)
        lines.append(f"| {_title(kind)}{' (within the site)' if kind in WITHIN_SITE else ''} | {checks[kind]['cells']} | "
                     + " | ".join("–" if s != s else f"{100 * s:.2f} %" for s in below)
                     + f" | {'–' if below[-1] != below[-1] else f'{below[-1] / LEVELS[-1]:.1f}'} | "
                     f"{checks[kind]['reported']} |")
    return "\n".join(lines)


def by_size(deals: Iterable[tuple[dict, dict]]) -> dict[str, dict[str, list[int]]]:
    """Per check and `SIZE_BANDS` band, the deals at the sites' own sizes summed: [cells, below
    each of LEVELS]."""
    out: dict[str, dict[str, list[int]]] = {}
    for _, result in deals:
        for band, kinds in result.get("by_size", {}).items():
            for kind, counts in kinds.items():
                summed = out.setdefault(kind, {}).setdefault(band, [0] * len(counts))
                out[kind][band] = [a + b for a, b in zip(summed, counts)]
    return out


def flagged_by_size(deals: Iterable[tuple[dict, dict]]) -> dict[str, list[int]]:
    """Per `SIZE_BANDS` band, the deals at the sites' own sizes summed: [sites with a finding of a
    check comparing sites, sites]."""
    out = {title: [0, 0] for _, _, title in SIZE_BANDS}
    for _, result in deals:
        for title, (flagged, sites) in result.get("flagged_by_size", {}).items():
            out[title] = [out[title][0] + flagged, out[title][1] + sites]
    return out


def size_report(bands: dict[str, dict[str, list[int]]], flagged: dict[str, list[int]] | None = None) -> str:
    """Each check's null cells per band of their site's size, as a multiple of the nominal rate at
    0.05 and at 0.001 (1 × : calibrated; below: conservative, a real difference there must be
    larger to be found; above: false findings); first, where given, each band's sites with a
    finding of a check comparing sites (`flagged_by_size`)."""
    titles = [title for _, _, title in SIZE_BANDS]
    lines = ["| check | " + " | ".join(titles) + " |", "|---|" + "---|" * len(titles)]
    if flagged is not None:
        lines.append("| **sites with a finding of a check comparing sites** | "
                     + " | ".join(_share(*flagged.get(title, [0, 0])) for title in titles) + " |")

    def cell(counts: list[int] | None) -> str:
        if not counts or not counts[0]:
            return "–"
        rates = [counts[1 + k] / counts[0] / level for k, level in enumerate(LEVELS) if level in (0.05, 0.001)]
        return f"{counts[0]:,} cells: {rates[0]:.2f} × / {rates[1]:.2f} ×"

    for kind in sorted(bands, key=_title):
        lines.append(f"| {_title(kind)} | " + " | ".join(cell(bands[kind].get(title)) for title in titles) + " |")
    return "\n".join(lines)


def _deals(results: dict[str, Any], half: str, own: bool) -> list[tuple[dict, dict]]:
    """The half's recorded deals, at the sites' own sizes (`own`) or at K of equal size."""
    import json

    return [(task, value) for task, value in ((json.loads(key), value) for key, value in results.items())
            if task["seed"] in HALVES[half] and (task["sites"] == OWN) == own]


def _half_report(results: dict[str, Any], half: str) -> str:
    deals = _deals(results, half, own=False)
    return report(*aggregate(deals)) if deals else "No deal of this half is recorded."


def _own_size_report(results: dict[str, Any], half: str) -> str:
    deals = _deals(results, half, own=True)
    if not deals:
        return "No deal of this half at the sites' own sizes is recorded."
    federations, checks = aggregate(deals)
    return "\n".join([report(federations, checks), "",
                      "Per check and site size (share of cells with p below 0.05 / below 0.001, as a multiple of "
                      "that level):", "", size_report(by_size(deals), flagged_by_size(deals))])


def section(results: dict[str, Any]) -> str:
    """RESULTS.md §8 from the recorded deals: the held-out half, then the tuning half's sites flagged."""
    return "\n".join([
        "## 8. Where no site differs: the data lens on rows dealt to sites at random",
        "",
        "Every row of each suite federation pooled and dealt to K sites of equal size at random "
        "(`benchmarks/random_split_null.py`): no site differs from another but by chance, so every "
        "finding of a check that compares sites is a false one. The goal of §5 (at most 5 % of the "
        "other sites with a new finding) counts only findings the untouched federation does not show; "
        "this counts every finding. The false discovery rate is controlled at 5 % within each family of "
        "checks at each site (README, *What is calibrated against what*): a site that differs in nothing "
        f"is tested in each of the data lens's {len(DATA_FAMILIES)} families, each of which may give it a false finding.",
        "",
        "Held-out half (deals 10-19; the detector was changed looking at deals 0-9):",
        "",
        _half_report(results, "held-out"),
        "",
        "Tuning half (deals 0-9):",
        "",
        _half_report(results, "tuning"),
        "",
        "### The rows dealt back to each federation's own sites, each keeping its number of rows",
        "",
        "Sites of different sizes where nothing differs but chance: a small site's statistics vary "
        "more than a large one's, which its test must hold (`fedcore/interpret/sampling.py`), and a "
        "large site is compared with the spread of sites of every size. The share of null cells below "
        "a level, per band of the site's size, says how each size is tested: below 1 × the test is "
        "conservative there (a real difference must be larger to be found), above it gives false findings. "
        "Deals 0-9 at vehicle's own sizes were looked at when the sampling draws were set "
        "(2026-12-03 and 12-04); deals 10-19 were not.",
        "",
        "Held-out half (deals 10-19):",
        "",
        _own_size_report(results, "held-out"),
        "",
        "Tuning half (deals 0-9):",
        "",
        _own_size_report(results, "tuning"),
    ])


def main(jobs: int, fresh: bool) -> str:
    """run.py's entry: every deal of both halves."""
    run_tasks(PART, tasks(), evaluate, jobs, fresh, reuse=still_holds)
    return cached_section()


def cached_section() -> str:
    return section(cached_results(PART, tasks()))


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=(*HALVES, "both"), default="held-out")
    parser.add_argument("--datasets", nargs="+", choices=list(LOADERS), default=list(LOADERS))
    parser.add_argument("--sites", nargs="+", choices=[str(k) for k in SITE_COUNTS], default=[str(k) for k in SITE_COUNTS],
                        help=f"K sites of equal size, or '{OWN}': back to the federation's own sites at their sizes")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--fresh", action="store_true", help="check every deal up again")
    args = parser.parse_args()
    halves = list(HALVES) if args.half == "both" else [args.half]
    site_counts = [k if k == OWN else int(k) for k in args.sites]
    results = run_tasks(PART, tasks(args.datasets, halves, site_counts), evaluate, args.jobs, args.fresh,
                        reuse=still_holds)
    for half in halves:
        print(f"\n{half}:\n\n{_half_report(results, half)}\n\nAt the sites' own sizes:\n\n{_own_size_report(results, half)}")


if __name__ == "__main__":
    _cli()
