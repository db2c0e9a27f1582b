"""A prototype for values recorded at a coarser resolution (the unseen family *recorded at a coarser
resolution*, RESULTS.md §9: 58 % of the held-out cases found): what a statistic of each site's
recording step would find, and what it would report where nothing was rounded. Not in the product.

The statistic, per site and continuous feature, computed from the site's rows: for every step of
the 1-2-5 ladder (1e-6 ... 5e6), how many of the site's nonzero values lie on a multiple of it
(zeros lie on every step and say nothing of a resolution). A site's *resolution* is the largest
step that holds `WHOLE` (98 %) of its nonzero values. What leaving the site would reveal: the
share of values on each round step, i.e. how finely the site records the column; no value, no
row. The test, at the site's resolution: its count on that step against the other sites' counts
on the same step (`data_checks.random_effects_excess`, one-sided, as the point-mass and precision
checks), Benjamini-Hochberg over the site's cells. Material: the other sites' pooled share on
the step at most `OTHERS_AT_MOST` and the step at least `STEP_SD` of the column's SD over the
sites (a rounding finer than that moves nothing a model would notice).

Printed: per data set, the cells the prototype reports on the untouched federation (real
differences of resolution between real sites, or a false alarm: each is listed); per coarsened
case of the chosen seeds, whether the corrupted site's column is reported (its p, q, the step
and the shares); and the sites of the randomly dealt federations (`random_split_null.dealt`,
4/8/16 sites) with a reported cell. Tuning seeds only by default: the held-out seeds stay for a
check in the product.

    .venv/bin/python benchmarks/resolution_prototype.py [--seeds 0 1 ... 9] [--datasets heart ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "evidence"), str(HERE.parent)]

import checkup_families as cf  # noqa: E402
import unseen_families  # noqa: E402
from common import cached_results  # noqa: E402
from corruptions import STEPS, UNSEEN_FAMILIES, WHOLE, Table, applies, corrupt, draw_case, load_table  # noqa: E402
from random_split_null import SITE_COUNTS, dealt  # noqa: E402

from fedcore.interpret.calibration import benjamini_hochberg  # noqa: E402
from fedcore.interpret.data_checks import random_effects_excess  # noqa: E402

DATASETS = ("har", "vehicle", "heart", "demo", "mnist")
OTHERS_AT_MOST = 0.5
STEP_SD = 0.2
FDR = 0.05
MIN_VALUES = 20  # nonzero values a site needs for its resolution to be tested
LADDER = np.asarray(STEPS)


def on_steps(values: np.ndarray) -> tuple[np.ndarray, int]:
    """How many of the nonzero values lie on a multiple of each ladder step, and how many there are."""
    v = values[np.isfinite(values) & (values != 0)]
    ratio = v[None, :] / LADDER[:, None]
    whole = np.round(ratio)  # a nonzero value is on no step's multiple 0 (a step far above it)
    on = ((np.abs(ratio - whole) <= 1e-6 * np.maximum(1, np.abs(ratio))) & (whole != 0)).sum(1)
    return on.astype(np.float64), int(v.size)


def statistics(table: Table) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """[sites, features, steps] counts on each step, [sites, features] nonzero counts, the continuous features."""
    cols = [j for j, kind in enumerate(table.kinds) if kind == "continuous"]
    on = np.zeros((len(table.sites), len(cols), LADDER.size))
    n = np.zeros((len(table.sites), len(cols)))
    for i, x in enumerate(table.x):
        for c, j in enumerate(cols):
            on[i, c], n[i, c] = on_steps(x[:, j])
    return on, n, cols


def reported(table: Table, every: bool = False) -> list[dict]:
    """The prototype's reported cells (q < FDR and material; `every`: every tested cell), each with
    its numbers."""
    on, n, cols = statistics(table)
    sites = len(table.sites)
    enough = n >= MIN_VALUES
    share = np.where(enough[..., None], on / np.maximum(n, 1)[..., None], np.nan)
    # the site's resolution: the largest step holding WHOLE of its values (-1: none, e.g. all zeros)
    holds = share >= WHOLE
    k = np.where(holds.any(2), LADDER.size - 1 - np.argmax(holds[..., ::-1], axis=2), -1)
    count = np.take_along_axis(on, np.maximum(k, 0)[..., None], axis=2)[..., 0]
    # every site's count on each cell's step, to test cell (i, c) against the others on k[i, c]
    p = np.full((sites, len(cols)), np.nan)
    others_share = np.full((sites, len(cols)), np.nan)
    for c in range(len(cols)):
        for step in set(k[:, c][(k[:, c] >= 0) & enough[:, c]]):
            counts = np.where(enough[:, c], on[:, c, step], np.nan)[:, None]
            totals = np.where(enough[:, c], n[:, c], np.nan)[:, None]
            p_step, rate = random_effects_excess(counts, totals)
            mine = (k[:, c] == step) & enough[:, c]
            p[mine, c], others_share[mine, c] = p_step[mine, 0], rate[mine, 0]
    sd = np.array([np.nanstd(np.concatenate([x[:, j] for x in table.x])) for j in cols])
    step_sd = np.where(k >= 0, LADDER[np.maximum(k, 0)] / np.where(sd > 0, sd, np.nan)[None, :], np.nan)
    out = []
    for i in range(sites):
        q = benjamini_hochberg(p[i])
        for c, j in enumerate(cols):
            material = others_share[i, c] <= OTHERS_AT_MOST and step_sd[i, c] >= STEP_SD
            if (every and np.isfinite(p[i, c])) or (q[c] < FDR and material):
                out.append({"site": table.sites[i], "feature": table.features[j], "column": table.columns[j],
                            "p": float(p[i, c]), "q": float(q[c]), "step": float(LADDER[k[i, c]]),
                            "step_sd": float(step_sd[i, c]), "share": float(count[i, c] / n[i, c]),
                            "others": float(others_share[i, c])})
    return out


def _cell(cell: dict) -> str:
    return (f"{cell['site']} {cell['feature']}: step {cell['step']:g} ({cell['step_sd']:.2f} SD), "
            f"{cell['share']:.0%} on it against {cell['others']:.0%}, p {cell['p']:.2g}, q {cell['q']:.2g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(10)))
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--deals", type=int, default=5, help="random deals per data set and K (seeds 0..N-1)")
    args = parser.parse_args()
    family = UNSEEN_FAMILIES["coarsened"]
    # the product's recorded answer for the same cases (RESULTS.md §9's records)
    recorded = cached_results(unseen_families.PART, unseen_families.tasks(families=["coarsened"]))
    product = {(r["dataset"], r["seed"]): r["hit"] for r in cf.scored(recorded, "data", None, unseen_families.POLICY)}
    tally = {"cases": 0, "prototype": 0, "product": 0, "either": 0}
    for name in args.datasets:
        table = load_table(name)
        clean = reported(table)
        untouched = {(c["site"], c["column"]) for c in clean}
        print(f"\n## {name}: {len(clean)} cells reported untouched")
        for cell in clean[:12]:
            print(f"  - {_cell(cell)}")
        if applies(table, family):
            for seed in args.seeds:
                case = draw_case(table, family, seed)
                cells = [c for c in reported(corrupt(table, case))
                         if c["site"] == case["site"] and c["column"] == case["column"]
                         and (c["site"], c["column"]) not in untouched]
                hit = product.get((name, seed))
                if family.material(case):
                    tally["cases"] += 1
                    tally["prototype"] += bool(cells)
                    tally["product"] += bool(hit)
                    tally["either"] += bool(cells) or bool(hit)
                closest = cells or [c for c in reported(corrupt(table, case), every=True)
                                    if c["site"] == case["site"] and c["column"] == case["column"]]
                print(f"  seed {seed} {case['site']} {case['column']} strength {case['strength']:.2f}"
                      f"{' (material)' if family.material(case) else ''}: {'FOUND' if cells else 'missed'} "
                      f"{_cell(closest[0]) if closest else '(not tested)'}; the product: "
                      f"{'not recorded' if hit is None else 'found' if hit else 'missed'}")
        flagged = sites = 0
        for k in SITE_COUNTS:
            if len(np.concatenate(table.y)) < 60 * k:
                continue
            for seed in range(args.deals):
                deal = dealt(table, k, seed)
                flagged += len({c["site"] for c in reported(deal)})
                sites += k
        print(f"  random deals: {flagged}/{sites} sites with a reported cell")
    print(f"\nCases at the family's material strength: {tally['cases']}; the prototype finds {tally['prototype']}, "
          f"the product (recorded) {tally['product']}, either {tally['either']}")


if __name__ == "__main__":
    main()
