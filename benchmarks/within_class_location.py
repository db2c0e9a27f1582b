"""Would a location check that takes the class mix out find the shifts the check-up misses? A
prototype, judged on the suite's tuning seeds (0-9) against the product's recorded results.

    .venv/bin/python benchmarks/within_class_location.py [--datasets mnist vehicle] [--seeds 0 1 ...]

Why: a site's median moves with its class mix. Where sites hold different classes (MNIST dealt
out by label, heart hospitals with 46 to 94 % patients with disease), the other sites' medians
differ by a lot for that reason alone, so the location check's leave-one-out test over the sites
cannot set a shifted site apart. The profile already releases every class's mean and SD per
feature (`mean_by_class`, `sd_by_class`, `observed_by_class`: the statistics the label checks
read), so a prototype needs nothing new from the sites: it reveals nothing the check-up does not
already receive.

The prototype's statistic, per site i and feature: the site's class means less the other sites'
median of each class's mean, averaged with the site's class shares as weights, in the median
over sites of the pooled within-class SD; its sampling variance Σ w²/n in those SDs. Tested with
the product's `leave_one_out` (moderated across features, the sampling variance added),
Benjamini-Hochberg over its own site × feature cells; reported at q < 5 % and ≥ 0.25 SD (the
location check's material shift). A cell the untouched federation already reports is not new.

Printed per data set, for the families a shift of the values puts in (every row, one class, gain
and offset, units), over the tuning seeds at material strength: cases, those the product found
(its recorded data lens, default policy: benchmarks/evidence/results), those the prototype finds,
both together, and the other sites where the prototype reports a new cell. The prototype is not
in the product: see the figures in the issue-23 note of 2026-11-29 for why.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "evidence"), str(HERE.parent)]

import checkup_families  # noqa: E402
from common import load_results  # noqa: E402
from corruptions import FAMILIES, corrupt, draw_case, load_table  # noqa: E402
from fedcore.interpret.calibration import benjamini_hochberg, leave_one_out  # noqa: E402
from fedcore.interpret.checks import limit  # noqa: E402
from fedcore.interpret.data_checks import within_class_sd  # noqa: E402
from fedcore.interpret.findings import FDR  # noqa: E402

SHIFT_FAMILIES = ("shift_all", "shift_class", "gain_offset", "unit")
LEAST_CLASS_ROWS = 3  # a class mean from fewer rows is left out of the site's average


def within_class_location(profile) -> tuple[np.ndarray, np.ndarray]:
    """[sites, features] deviation (within-class SDs) and two-sided p of the prototype's statistic."""
    means = profile.mean_by_class  # [sites, classes, features]
    counts = profile.observed_by_class.astype(np.float64)
    n_sites = means.shape[0]
    pooled = within_class_sd(profile)  # the class profiles' yardstick, per site
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        scale = np.nanmedian(np.where(pooled > 0, pooled, np.nan), axis=0)
        usable = np.isfinite(means) & (counts >= LEAST_CLASS_ROWS)
        values = np.where(usable, means, np.nan)
        statistic, variance = (np.full((n_sites, means.shape[2]), np.nan) for _ in range(2))
        for i in range(n_sites):
            reference = np.nanmedian(np.delete(values, i, axis=0), axis=0)  # [classes, features]
            compared = usable[i] & np.isfinite(reference)
            weights = np.where(compared, counts[i], 0.0)
            weights = weights / np.maximum(weights.sum(0, keepdims=True), 1e-300)
            statistic[i] = np.nansum(np.where(compared, weights * (values[i] - reference), 0.0), axis=0) / scale
            variance[i] = np.sum(np.where(compared, weights**2 / np.maximum(counts[i], 1), 0.0), axis=0)
            statistic[i, ~compared.any(0)] = np.nan
    deviation, _, p = leave_one_out(statistic, own_variance=np.nan_to_num(variance))
    return deviation, p


def reported(profile) -> np.ndarray:
    """[sites, features]: the prototype's reported cells."""
    deviation, p = within_class_location(profile)
    q = np.full(p.shape, np.nan)
    tested = np.isfinite(p)
    q[tested] = benjamini_hochberg(p[tested])
    return (q < FDR) & (np.abs(deviation) >= limit("location", "shift"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["har", "vehicle", "heart", "demo", "mnist"],
                        choices=checkup_families.DATASETS)
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(10)), help="tuning seeds by default")
    args = parser.parse_args()
    rows = checkup_families.scored(load_results(checkup_families.PART), "data", None)
    product = {(r["dataset"], r["family"], r["seed"]): r for r in rows}
    print("tuning seeds, material strength: cases | product found | prototype finds | either | "
          "other sites with a new prototype cell")
    totals = np.zeros(5, dtype=int)
    for name in args.datasets:
        table = load_table(name)
        policy = checkup_families.disclosure("default")
        untouched = reported(table.profile(**policy))
        counts = np.zeros(5, dtype=int)
        for family in SHIFT_FAMILIES:
            for seed in args.seeds:
                recorded = product.get((name, family, seed))
                if recorded is None or not recorded["material"]:
                    continue
                case = draw_case(table, FAMILIES[family], seed)
                profile = corrupt(table, case).profile(**policy)
                new = reported(profile) & ~untouched
                site = list(table.sites).index(case["truth"]["site"])
                columns = case["truth"]["columns"]
                on_truth = [j for j, f in enumerate(profile.features)
                            if f in columns or table.column_of(f) in columns]
                found = bool(new[site, on_truth].any())
                others = int(np.delete(new, site, axis=0).any(1).sum())
                counts += [1, recorded["hit"], found, recorded["hit"] or found, others]
        totals += counts
        print(f"{name:<8} {counts[0]:>4} | {counts[1]:>4} | {counts[2]:>4} | {counts[3]:>4} | "
              f"{counts[4]} of {counts[0] * (len(table.sites) - 1)}")
    print(f"{'all':<8} {totals[0]:>4} | {totals[1]:>4} | {totals[2]:>4} | {totals[3]:>4} | {totals[4]}")


if __name__ == "__main__":
    main()
