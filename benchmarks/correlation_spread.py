"""Why a channel replaced by noise, or two swapped columns, are mostly out of the correlation
check's reach: how far the untouched sites' correlations already differ, and what a check of the
correlations' pattern (not their size) would find instead.

    .venv/bin/python benchmarks/correlation_spread.py [--seeds 0 10] [--datasets vehicle]

Printed, for the suite's federations as they are (`benchmarks/evidence/corruptions.py`):

- per data set, the correlation check's statistic for every site × feature it can test (the
  share of the other sites' correlations the site keeps, `Checks.correlation`): how many cells it
  tests, the share of them below 0.25 without any problem put in, and the median SD of a
  feature's share over the sites. A channel replaced by noise for a share s of its rows keeps
  about 1 - s: it stands out only where the sites agree far more closely than that.
- per case of the tuning seeds (0-9; a prototype is judged where thresholds may be tuned), for the
  swapped-columns and noise-channel families: a prototype that tests the *pattern* of a feature's
  correlations (the Fisher z of the correlation between the site's row of correlations and the
  other sites' median row, leave-one-out over the sites, one-sided: lower; Benjamini-Hochberg over
  every site × feature), its p and q at the corrupted cells, and whether it reports them (q < 5 %).
  The prototype is not in the product. Beside it, the correlation check as the product runs it
  (its cell's p and q in the check-up): since it also tests a feature's correlations with its
  partners against the partners' among themselves at the site, a loose sensor no longer hides a
  noise channel at a tight one.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "evidence"), str(HERE.parent)]

from corruptions import FAMILIES, corrupt, draw_case, load_table, measured  # noqa: E402
from fedcore.interpret.calibration import benjamini_hochberg, fisher_z, leave_one_out, one_sided  # noqa: E402
from fedcore.interpret.data_checks import Checks, check_profile, limit, others_median  # noqa: E402
from fedcore.interpret.findings import FDR, decide  # noqa: E402

DATASETS = ("vehicle", "har", "mnist", "heart")
LOW_SHARE = 0.25


def kept_share(profile) -> np.ndarray:
    """[sites, continuous] the correlation check's statistic, read from its own cells (their effect):
    the share of the other sites' correlations a site keeps for a feature (NaN where the others show
    it correlated with too few features)."""
    checks = Checks(profile)
    sites, names = list(checks.sites), [profile.features[j] for j in checks.continuous]
    share = np.full((len(sites), len(names)), np.nan)
    for cell in checks.correlation():
        share[sites.index(cell.site), names.index(cell.feature)] = cell.effect
    return share


def pattern_q(profile) -> tuple[np.ndarray, np.ndarray]:
    """[sites, continuous] the prototype's one-sided p and its q: does the site's row of a
    feature's correlations follow the other sites' median row less than theirs do?"""
    r = profile.correlation
    reference = others_median(r)
    informative = limit("correlation", "informative")
    z = np.full(r.shape[:2], np.nan)
    for i, c in np.ndindex(*z.shape):
        keep = np.isfinite(r[i, c]) & np.isfinite(reference[i, c])
        keep[c] = False
        a, b = r[i, c, keep], reference[i, c, keep]
        if keep.sum() < 5 or np.ptp(a) == 0 or np.ptp(b) == 0 or np.abs(b).max() < informative:
            continue
        z[i, c] = fisher_z(np.corrcoef(a, b)[0, 1])
    _, t, p2 = leave_one_out(z)
    p = one_sided(t, p2, -1)
    return p, benjamini_hochberg(p.ravel()).reshape(p.shape)


def spread_table(datasets: list[str]) -> None:
    print(f"| data set | cells tested | untouched cells keeping < {LOW_SHARE:g} of the others' correlations "
          "| median SD of a feature's share over the sites |")
    print("|---|---|---|---|")
    for name in datasets:
        share = kept_share(load_table(name).profile())
        tested = np.isfinite(share)
        low = f"{np.mean(share[tested] < LOW_SHARE):.1%}" if tested.any() else "–"
        spread = np.nanmedian(np.nanstd(share, axis=0, ddof=1)) if tested.sum() > 1 else float("nan")
        print(f"| {name} | {int(tested.sum())} of {share.size} | {low} | {spread:.2f} |")


def prototype_cases(dataset: str, seeds: range) -> None:
    table = load_table(dataset)
    _, untouched_q = pattern_q(table.profile())
    print(f"\n{dataset}: the pattern prototype, untouched: {int((untouched_q < FDR).sum())} cells reported")
    print("| family | seed | site | column | p | q | reported | the check's p | its q | reported |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    found, by_check = {}, {}
    for family in ("swapped", "noise_channel"):
        for seed in seeds:
            case = measured(table, draw_case(table, FAMILIES[family], seed))
            profile = corrupt(table, case).profile()
            p, q = pattern_q(profile)
            checks = Checks(profile)
            names = [profile.features[j] for j in checks.continuous]
            i = list(profile.sites).index(case["site"])
            cells = {f.feature: f for f in decide(check_profile(profile))
                     if f.kind == "correlation" and f.site == case["site"]}
            hit = checked = False
            for column in case["truth"]["columns"]:
                c = names.index(column)
                reported = bool(q[i, c] < FDR)
                hit |= reported
                cell = cells.get(column)
                by_it = cell is not None and cell.significant and cell.material
                checked |= by_it
                its = "| – | – | no |" if cell is None else f"| {cell.p:.2g} | {cell.q:.2g} | {'yes' if by_it else 'no'} |"
                print(f"| {family} | {seed} | {case['site']} | {column} | {p[i, c]:.2g} | {q[i, c]:.2g} | "
                      f"{'yes' if reported else 'no'} {its}")
            found[family] = found.get(family, 0) + hit
            by_check[family] = by_check.get(family, 0) + checked
    print("cases reported by the prototype: " + ", ".join(f"{f} {n} of {len(seeds)}" for f, n in found.items()))
    print("by the correlation check (material): " + ", ".join(f"{f} {n} of {len(seeds)}" for f, n in by_check.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--prototype", nargs="+", default=["vehicle"], choices=DATASETS,
                        help="data sets to run the pattern prototype's cases on")
    parser.add_argument("--seeds", nargs=2, type=int, default=(0, 10), metavar=("FIRST", "END"),
                        help="the cases' seeds, FIRST to END - 1 (the tuning half by default)")
    args = parser.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    spread_table(args.datasets)
    for dataset in args.prototype:
        prototype_cases(dataset, range(*args.seeds))


if __name__ == "__main__":
    main()
