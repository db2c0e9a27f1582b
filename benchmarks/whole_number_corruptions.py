"""How much of the check-up suite's recall rests on decimals its corruptions write into whole numbers.

The suite's value families (a shift of every row or of one class, a gain and offset error, a
channel replaced by noise) add fractions to a site's values. Where the sites record a column in
whole numbers (heart's age, pressure, cholesterol, heart rate; an MNIST block that is blank, 0, at
every site) the corrupted site then holds decimals, which the check 'recorded at another
precision' finds. That is true of the corrupted values, but a real change of these kinds often
keeps the site's whole numbers: an older population is still recorded in whole years, a device's
offset or a noisy sensor is read through the device's own resolution.

This script runs those cases again with the changed values rounded back to whole numbers wherever
the site recorded the column in whole numbers before the change (≥ 98 % of its values), and
scores them as the suite does (a site counts as found by a finding the untouched federation does
not show there; the untouched federation's record and every other case's as recorded in
benchmarks/evidence/results). It prints, per family and data set, the cases found as drawn and
with whole numbers kept, on each half of the seeds, and the data lens's recall with the kept cases
in place of the drawn ones. Data lens, default disclosure policy; 15 s on 2 cores:

    .venv/bin/python benchmarks/whole_number_corruptions.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "evidence"), str(HERE.parent)]

import checkup_families as cf  # noqa: E402
from common import load_results  # noqa: E402
from corruptions import FAMILIES, corrupt, whole_numbers  # noqa: E402

VALUE_FAMILIES = ("shift_all", "shift_class", "gain_offset", "noise_channel")


def whole_numbers_kept(table, case: dict):
    """The case's federation with its changed values rounded at a column the site recorded in whole
    numbers (None: the column was not whole numbers there, so nothing differs from the drawn case)."""
    site = table.sites.index(case["site"])
    j = table.features_of(case["column"])[0]
    if not whole_numbers(table.x[site][:, j]):
        return None
    changed = corrupt(table, case)
    x = changed.x[site].copy()
    x[:, j] = np.round(x[:, j])
    return changed.with_site(site, x, changed.y[site])


def main() -> None:
    results = load_results(cf.PART)
    tasks = {k: json.loads(k) for k in results}
    chosen = {k: t for k, t in tasks.items() if t["lenses"] == "data" and t.get("policy") == "default"}
    baselines = {t["dataset"]: results[k] for k, t in chosen.items() if t["family"] == "none"}
    rows = {(r["dataset"], r["family"], r["seed"]): r for r in cf.scored(results, "data", cf.DATA_LENS, "default")}
    kept_rows = dict(rows)
    counts: dict[tuple[str, str, str], list[int]] = {}
    for key, task in sorted(chosen.items()):
        if task["family"] not in VALUE_FAMILIES:
            continue
        record, row = results[key], rows[(task["dataset"], task["family"], task["seed"])]
        if not row["material"]:
            continue
        table = cf.load_table(task["dataset"])
        federation = whole_numbers_kept(table, record["case"])
        if federation is None:
            continue
        result, _ = cf._check_up(federation, "data", "default")
        findings = cf.not_untouched([cf.compact(f, table) for f in result.reported], task["dataset"], "default")
        kept = cf.score({**record, "findings": findings}, baselines[task["dataset"]])
        kept_rows[(task["dataset"], task["family"], task["seed"])] = {**row, **kept}
        half = "tuning" if task["seed"] in cf.HALVES["tuning"] else "held-out"
        tally = counts.setdefault((half, task["family"], task["dataset"]), [0, 0, 0])
        tally[0] += 1
        tally[1] += row["hit"]
        tally[2] += kept["hit"]
    print("cases at material strength whose column the site recorded in whole numbers (data lens, default policy)")
    print(f"{'half':9} {'family':14} {'data set':8} {'cases':>5} {'found as drawn':>15} {'whole numbers kept':>19}")
    for (half, family, dataset), (n, drawn, kept) in sorted(counts.items()):
        print(f"{half:9} {family:14} {dataset:8} {n:5d} {drawn:15d} {kept:19d}")
    for half in ("tuning", "held-out"):
        for name, chosen_rows in (("as drawn", rows), ("whole numbers kept", kept_rows)):
            s = cf.summary([r for r in chosen_rows.values() if r["seed"] in cf.HALVES[half] and r["material"]])
            print(f"{half} recall, {name}: {s['found']}/{s['cases']} ({s['recall']:.1%}); right column "
                  f"{s['named']}/{s['named_of']}")


if __name__ == "__main__":
    main()
