"""How the location-type checks' null holds with few sites and few columns, and what a posterior
predictive reference would change: calibration and power of the check-up's `leave_one_out`.

    .venv/bin/python benchmarks/small_federation_calibration.py [--cells 20000] [--moves 200] [--seed 0]

Data made so the answer is known. Each federation has K sites and J items (a column's median in
within-site SDs). The items' true between-site variances are drawn from a scaled inverse-χ² with
d0 degrees of freedom (d0 = inf: one common variance). Every site's value is a normal draw around
the item's mean. Printed, per (K, J, d0):

- under the null (no site differs), the share of cells with p below 0.05, 0.01 and 0.001;
- with one cell moved by δ × its item's SD, the share of moves with p below 0.05 / (K·J), the
  threshold at which Benjamini–Hochberg reports the first finding of the family.

Two references are compared:
- `shipped`: the product's `calibration.leave_one_out` (moderated, two passes). Its prior of the
  items' variances is fitted over every site, the tested one included, so with few items a site's
  own shift widens its own yardstick (benchmarks/README.md, *What "nothing found" covers*).
- `predictive`: a prototype, not in the product. The prior is fitted without the tested site,
  from the other sites' variances of every item. Its uncertainty is integrated out: the p-value
  is the posterior mean over a grid of (d0, s0²), with a uniform prior on the shrinkage weight
  d0 / (d0 + d) and on log s0². Under the prior's model the items' variances over the other sites
  are s0² × F(d, d0), and given (d0, s0²) the cell's t is limma's moderated t with d0 + d df.
  Plugging in the fitted (d0, s0²) without the tested site is anti-conservative with few items
  (4 sites, 5 items: about 7 × the nominal rate at p < 0.001); integrating them out is not.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fedcore.interpret.calibration import leave_one_out  # noqa: E402

WEIGHTS = np.linspace(0.025, 1.0, 40)  # shrinkage weight d0 / (d0 + d); 1: d0 = inf
LOG_SCALES = np.linspace(-4.0, 4.0, 81)  # log s0² around the median of the other sites' variances
LEVELS = (0.05, 0.01, 0.001)
SHIFTS = (2, 3, 4, 6, 8)
SETTINGS = ((4, 5), (4, 40), (6, 5), (8, 20))
PRIOR_DF = (2.0, 6.0, np.inf)


def predictive_p(deviation: np.ndarray, variance: np.ndarray, others: int) -> np.ndarray:
    """[items] two-sided posterior predictive p of one site's deviations from the other sites'
    means, given the other sites' variances of every item (`others` sites, others − 1 df)."""
    d = others - 1
    s0 = np.exp(np.log(np.median(variance)) + LOG_SCALES)[None, :, None]
    w = WEIGHTS[:, None, None]
    infinite = w >= 1
    d0 = np.where(infinite, 1e12, w * d / np.where(infinite, 1.0, 1 - w))
    log_likelihood = (stats.f.logpdf(variance[None, None, :] / s0, d, d0) - np.log(s0)).sum(-1)
    posterior = np.exp(log_likelihood - log_likelihood.max())
    posterior /= posterior.sum()
    moderated = (d0 * s0 + d * variance[None, None, :]) / (d0 + d)
    t = np.abs(deviation)[None, None, :] / np.sqrt(moderated * (1 + 1 / others))
    return (posterior[:, :, None] * 2 * stats.t.sf(t, d0 + d)).sum((0, 1))


def federation(rng: np.random.Generator, sites: int, items: int, prior_df: float) -> tuple[np.ndarray, np.ndarray]:
    """A sites × items matrix under the null, and its items' true SDs."""
    variance = np.ones(items) if np.isinf(prior_df) else prior_df / rng.chisquare(prior_df, items)
    sd = np.sqrt(variance)
    return rng.normal(0.0, 1.0, items) + rng.normal(0.0, 1.0, (sites, items)) * sd, sd


def p_values(x: np.ndarray, reference: str, cells: list[tuple[int, int]] | None = None) -> np.ndarray:
    """The p-values of `cells` (default: every cell) under a reference."""
    sites = x.shape[0]
    if reference == "shipped":
        p = leave_one_out(x)[2]
        return p.ravel() if cells is None else np.array([p[i, j] for i, j in cells])
    rows = range(sites) if cells is None else sorted({i for i, _ in cells})
    out = {}
    for i in rows:
        others = np.delete(x, i, axis=0)
        out[i] = predictive_p(x[i] - others.mean(0), others.var(0, ddof=1), sites - 1)
    return np.concatenate([out[i] for i in rows]) if cells is None else np.array([out[i][j] for i, j in cells])


def table_reach(name: str) -> None:
    """The shipped and the prototype's distances at which each location cell of a suite table would
    be reported (within-site SDs; the threshold Benjamini–Hochberg sets beside the family's cells)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "evidence"))
    from corruptions import load_table
    from fedcore.checkup import check_up
    from fedcore.interpret import checks
    from fedcore.interpret.data_checks import REACH_GRID, Checks, location_reach, reporting_threshold

    profile = load_table(name).profile()
    findings = check_up(profile, {}).findings
    shipped = {(r.site, r.feature): r.distance for r in location_reach(profile, findings)}
    located = Checks(profile)
    values = located._values["location_compared"][0]  # the location check's own inputs (sites × columns)
    threshold = reporting_threshold(findings, "location")  # location_reach's: one more rejection
    rows = []
    for i, site in enumerate(located.sites):
        others = np.delete(values, i, axis=0)
        usable = np.flatnonzero(np.isfinite(others).all(0) & np.isfinite(values[i]))
        mean, variance = others[:, usable].mean(0), others[:, usable].var(0, ddof=1)
        for k, c in enumerate(usable):
            feature = profile.features[located.continuous[c]]
            if (site, feature) not in shipped:
                continue
            deviation = values[i, usable] - mean
            needed = threshold[(site, feature)]
            distance = np.inf
            for step in REACH_GRID:
                deviation[k] = step
                if predictive_p(deviation, variance, others.shape[0])[k] <= needed:
                    distance = float(step)
                    break
            rows.append((site, feature, shipped[(site, feature)], max(distance, checks.limit("location", "shift"))))
    print(f"{name}: how far a column's median would have to sit to be reported (within-site SDs)")
    for site, feature, before, after in rows:
        print(f"  {site:<16} {feature:<24} shipped {before:6.2f}   predictive {after:6.2f}")
    print(f"  median over {len(rows)} cells: shipped {np.median([r[2] for r in rows]):.2f}, "
          f"predictive {np.median([r[3] for r in rows]):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=20000, help="null cells per setting (default 20000)")
    parser.add_argument("--moves", type=int, default=200, help="moved cells per setting and shift (default 200)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--table", choices=("heart", "demo"),
                        help="a suite table whose sites released every column (the prototype takes no withheld "
                             "cells): the reach of both references")
    args = parser.parse_args()
    if args.table:
        table_reach(args.table)
        return
    started = time.perf_counter()
    print("null: share of cells with p below " + ", ".join(f"{a:g}" for a in LEVELS)
          + f"; power: share of moved cells with p below 0.05 / (K·J), by δ = {', '.join(map(str, SHIFTS))} SDs")
    print(f"{'K':>3} {'J':>3} {'d0':>4}  {'reference':<10}  {'null rates':<26}  power")
    for (sites, items), prior_df in ((s, d) for s in SETTINGS for d in PRIOR_DF):
        rng = np.random.default_rng(args.seed)
        federations = [federation(rng, sites, items, prior_df) for _ in range(-(-args.cells // (sites * items)))]
        moved = []
        for shift in SHIFTS:
            for _ in range(args.moves):
                x, sd = federation(rng, sites, items, prior_df)
                x[0, 0] += shift * sd[0]
                moved.append((shift, x))
        for reference in ("shipped", "predictive"):
            null = np.concatenate([p_values(x, reference) for x, _ in federations])
            rates = "  ".join(f"{np.mean(null < a):.4f}" for a in LEVELS)
            threshold = 0.05 / (sites * items)
            power = {shift: np.mean([p_values(x, reference, [(0, 0)])[0] < threshold for s, x in moved if s == shift])
                     for shift in SHIFTS}
            print(f"{sites:>3} {items:>3} {prior_df:>4g}  {reference:<10}  {rates:<26}  "
                  + "  ".join(f"{power[s]:.2f}" for s in SHIFTS), flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
