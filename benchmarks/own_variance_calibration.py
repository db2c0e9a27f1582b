"""How often the leave-one-out with a cell's own sampling variance (`calibration.leave_one_out`,
`own_variance`) reports a site that differs from the others by chance alone, against a prototype
that counts the sampling variance once.

Data made so the answer is known: per item a between-site variance τ² (a scaled inverse-χ² draw
times `tau`²), every site's value the item's mean plus a N(0, τ²) site effect plus its own sampling
error N(0, v_i), v_i = 1 / rows_i, and v_i given to the test as the cell's own variance. No site
differs: every p-value below a level is a false alarm, and a calibrated test has the level's rate.

The shipped test adds v_i to the predictive variance of the other sites' values, whose variance over
the sites already holds their sampling (τ² + v̄): where the sites differ by sampling alone it counts
it twice. The prototype (`counted_once`) takes variance·(1 + 1/m) − v̄ + v_i, at least v_i + v̄/m
(τ² ≥ 0). Run: `.venv/bin/python benchmarks/own_variance_calibration.py` (seconds).
"""

from __future__ import annotations

import argparse

import numpy as np

from fedcore.interpret import calibration

ITEMS = 40
FEDERATIONS = {"8 sites of 100 rows": [100] * 8, "8 sites of 20-640 rows": [20, 40, 80, 160, 320, 640, 60, 100],
               "4 sites of 120-300 rows": [150, 300, 120, 200]}


def counted_once(values: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Two-sided p-values of one leave-one-out pass with the sampling variance counted once (a
    prototype; the shipped pass is `calibration._leave_one_out`)."""
    excluded = np.zeros(values.shape, dtype=bool)
    reference, count, others, mean, variance = calibration._references(values, excluded)
    full = np.nanvar(values, axis=0, ddof=1)
    prior = calibration._prior(full, float(np.median(count) - 1))
    moderated, df = calibration._moderated(variance, others - 1.0, prior)
    held = np.where(reference, own, 0.0)
    others_own = (held.sum(0)[None, :] - held) / others
    spread = np.maximum(moderated * (1 + 1 / others) - others_own + own, own + others_own / others)
    return calibration._studentized(values - mean, spread, df, np.isfinite(spread))[1]


def false_alarms(rows: list[int], tau: float, repeats: int, seed: int) -> dict[str, np.ndarray]:
    """Per test, [level, site]: the share of null cells with p below 0.05 and below 0.01."""
    rng = np.random.default_rng(seed)
    own = np.broadcast_to((1 / np.asarray(rows, dtype=np.float64))[:, None], (len(rows), ITEMS)).copy()
    p = {"shipped": [], "counted once": []}
    for _ in range(repeats):
        between = tau * np.sqrt(1 / rng.gamma(3, 1 / 3, size=ITEMS))
        values = (rng.normal(0, 1, ITEMS) + rng.normal(0, between, size=own.shape)
                  + rng.normal(0, np.sqrt(own)))
        p["shipped"].append(calibration.leave_one_out(values, own_variance=own)[2])
        p["counted once"].append(counted_once(values, own))
    return {name: np.stack([(np.stack(ps) < level).mean(axis=(0, 2)) for level in (0.05, 0.01)])
            for name, ps in p.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("| federation | τ (SD of the sites' real differences, sampling SD of a 100-row site = 0.1) | test "
          "| p < 0.05 | p < 0.01 | p < 0.05 at the largest site |")
    print("|---|---|---|---|---|---|")
    for name, rows in FEDERATIONS.items():
        for tau in (0.0, 0.05, 0.1, 0.3):
            for test, rates in false_alarms(rows, tau, args.repeats, args.seed).items():
                largest = int(np.argmax(rows))
                print(f"| {name} | {tau:g} | {test} | {rates[0].mean():.4f} | {rates[1].mean():.4f} "
                      f"| {rates[0, largest]:.3f} |")


if __name__ == "__main__":
    main()
