"""A prototype, not the product's check: would a shape *predicted from the site's class mix* take
the random splits' false *different shape* findings away, and keep the suite's true ones?

On HAR's rows dealt to sites at random (`random_split_null.py`, RESULTS.md §8), most false findings
are *different shape* at one site that drew a few more rows of some activities: HAR's features are
mixtures of activities far apart, so a few points of one class move a feature's skew and tails,
and all of its 265 features move together. The shipped *differs as its class mix predicts* asks
only whether the mix moves the mean or the SD by a material size, which a chance mix does not.

Here each site's quantiles are predicted from its class mix: the mixture, in the site's class
proportions, of every site's median quantiles of each class (`quantiles_by_class`, released under
the same disclosure rules as the quantiles); its Bowley skew and log tail ratio as the shape
check's. The prototype tests each site's shape *less its prediction* with the same leave-one-out
(moderated across features) and, as the shipped test, Benjamini–Hochberg within the site over its
skew and tail cells, material at the shape check's sizes. Printed, per federation: sites with a
shape cell reported by this simplified test on the raw shape and on the shape less the mix's
prediction; and for the suite's cases whose corrupted site the product reports with *different
shape*, how many the residual test still reports there.

    .venv/bin/python benchmarks/class_mix_shape.py [--deals 10 20] [--sites 8 16] [--cases]

Measured 2026-12-02 (RESULTS: benchmarks/README.md, *Tried and not adopted*).
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "evidence"), str(HERE.parent)]

from corruptions import corrupt, load_table  # noqa: E402
from random_split_null import dealt  # noqa: E402

from fedcore.interpret.calibration import benjamini_hochberg, leave_one_out  # noqa: E402
from fedcore.interpret.checks import limit  # noqa: E402
from fedcore.interpret.data_checks import _shape  # noqa: E402
from fedcore.interpret.findings import FDR  # noqa: E402
from fedcore.interpret.profile import PROBABILITIES  # noqa: E402


def mix_predicted_quantiles(profile) -> np.ndarray:
    """[sites, probabilities, continuous]: each site's quantiles as the mixture, in its class
    proportions, of the sites' median quantiles of each class (a class no site released: left out)."""
    cols = profile.continuous
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a level no site released (the extremes)
        curves = np.nanmedian(profile.quantiles_by_class[:, :, :, cols], axis=0)  # [classes, P, continuous]
    counts = profile.class_counts.astype(np.float64)
    weights = counts / np.nansum(counts, axis=1, keepdims=True)
    out = np.full((len(profile.sites), len(PROBABILITIES), len(cols)), np.nan)
    for c in range(len(cols)):
        # a class's released levels (a disclosure policy releases blocks of them, not the extremes):
        # its CDF through those, the mass beyond them at its outermost released quantiles
        released = {k: np.isfinite(curves[k, :, c]) for k in range(curves.shape[0])}
        known = [k for k, r in released.items() if r.sum() >= 3 and np.all(np.diff(curves[k, r, c]) >= 0)]
        if not known:
            continue
        grid = np.unique(np.concatenate([curves[k, released[k], c] for k in known]))
        cdf = np.stack([np.interp(grid, curves[k, released[k], c], PROBABILITIES[released[k]], left=0.0, right=1.0)
                        for k in known])
        for i in range(len(profile.sites)):
            w = np.nan_to_num(weights[i, known])
            if w.sum() <= 0:
                continue
            mixed = np.maximum.accumulate((w / w.sum()) @ cdf)
            rising = np.r_[True, np.diff(mixed) > 0]  # a level's quantile: where the CDF first reaches it
            out[i, :, c] = np.interp(PROBABILITIES, mixed[rising], grid[rising])
    return out


def shape_sites(profile, residual: bool) -> set[int]:
    """Sites with a material shape cell at q < 0.05 (BH within the site over its skew and tail cells)."""
    skew, tails = _shape(profile.quantiles[:, :, profile.continuous])
    if residual:
        predicted_skew, predicted_tails = _shape(mix_predicted_quantiles(profile))
        skew, tails = skew - predicted_skew, tails - predicted_tails
    skew_dev, _, skew_p = leave_one_out(skew)
    tail_dev, _, tail_p = leave_one_out(tails)
    flagged = set()
    for i in range(len(profile.sites)):
        p = np.concatenate([skew_p[i], tail_p[i]])
        material = np.concatenate([np.abs(skew_dev[i]) >= limit("shape", "skew"),
                                   np.abs(tail_dev[i]) >= math.log(limit("shape", "tails"))])
        q = benjamini_hochberg(p)
        if np.any(material & (q < FDR)):
            flagged.add(i)
    return flagged


def deals(dataset: str, seeds: range, site_counts: list[int]) -> None:
    table = load_table(dataset)
    for k in site_counts:
        raw = residual = 0
        for seed in seeds:
            profile = dealt(table, k, seed).profile()
            raw += len(shape_sites(profile, False))
            residual += len(shape_sites(profile, True))
        print(f"| {dataset} | {k} | {seeds.start}-{seeds.stop - 1} | {raw}/{k * len(seeds)} | {residual}/{k * len(seeds)} |",
              flush=True)


def cases(dataset: str) -> None:
    """The suite's recorded data-lens cases (default policy) whose corrupted site the product reports
    with a new *different shape* finding: does the residual test still report a shape cell there?"""
    import checkup_families as cf
    from common import load_results, task_key

    table = load_table(dataset)
    records = load_results(cf.PART)
    rows = [r for r in cf.scored(records, "data", None, "default") if r["dataset"] == dataset]
    kept = total = 0
    for row in rows:
        task = {key: row[key] for key in ("dataset", "family", "lenses", "policy", "seed")}
        record = records[task_key(task)]
        site = record["case"]["truth"]["site"]
        if not any(f["site"] == site and f["kind"] == "shape" for f in map(cf.parse, record["findings"])):
            continue
        profile = corrupt(table, cf.case_of(task)).profile(**cf.disclosure("default"))
        i = profile.sites.index(site)
        total += 1
        kept += i in shape_sites(profile, True)
    print(f"{dataset}: of {total} cases whose corrupted site has a new *different shape* finding, "
          f"the residual test reports a shape cell there in {kept}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["har"])
    parser.add_argument("--deals", nargs=2, type=int, default=[10, 20], help="the deals' seeds: start, stop")
    parser.add_argument("--sites", nargs="+", type=int, default=[4, 8, 16])
    parser.add_argument("--cases", action="store_true", help="also the suite's cases with a shape finding")
    args = parser.parse_args()
    print("| data set | K sites | deals | sites with a shape cell, raw | less the class mix's prediction |")
    print("|---|---|---|---|---|")
    for dataset in args.datasets:
        deals(dataset, range(*args.deals), args.sites)
    if args.cases:
        for dataset in args.datasets:
            cases(dataset)


if __name__ == "__main__":
    main()
