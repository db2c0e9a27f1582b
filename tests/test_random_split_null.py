"""benchmarks/random_split_null.py deals a federation's pooled rows to sites at random and counts
what the data lens reports there: every row dealt once, sites of equal size, the same deal for the
same seed; its report's shares are those of the p-values it is given (known answers)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "benchmarks"),
                str(Path(__file__).resolve().parents[1] / "benchmarks" / "evidence")]

import random_split_null as null  # noqa: E402
from test_checkup_families import small_table  # noqa: E402


def _rows(table) -> list[tuple]:
    """Every row with its label, as a sortable tuple (NaN as inf)."""
    return sorted(tuple(np.where(np.isnan(row), np.inf, row)) + (int(label),)
                  for x, y in zip(table.x, table.y) for row, label in zip(x, y))


def test_every_row_is_dealt_once_with_its_label_to_sites_of_equal_size():
    table = small_table()
    dealt = null.dealt(table, 3, seed=5)
    assert dealt.sites == ["site 1", "site 2", "site 3"]
    assert sorted(len(y) for y in dealt.y) == [126, 127, 127]  # 380 rows
    assert _rows(dealt) == _rows(table)
    assert all(len(x) == len(y) for x, y in zip(dealt.x, dealt.y))


def test_a_seed_deals_the_same_rows_and_another_seed_others():
    table = small_table()
    first, again, other = null.dealt(table, 4, 1), null.dealt(table, 4, 1), null.dealt(table, 4, 2)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(first.x, again.x))
    assert not all(np.array_equal(a, b, equal_nan=True) for a, b in zip(first.x, other.x))


def test_the_report_gives_each_checks_share_of_p_values_below_each_level():
    checks = {"location": {"p": [0.0005, 0.005, 0.02, 0.5], "reported": 1},
              "spread": {"p": [0.2, 0.3], "reported": 0}}
    federations = [{"data set": "small", "sites": 4, "rows": 95, "flagged": 3, "comparing": 2, "of": 40,
                    "kinds": Counter({"location": 1, "missing_by_class": 2})}]
    text = null.report(federations, checks, 10)
    assert "| small | 4 | 95 | 7.5 % (3/40) | 5.0 % (2/40) | missingness depends on the class 2, values shifted 1 |" in text
    # 1 of 4 below 0.001 (250 × nominal), 2 below 0.01, 3 below 0.05
    assert "| values shifted | 4 | 75.00 % | 50.00 % | 25.00 % | 250.0 | 1 |" in text
    assert "| different spread | 2 | 0.00 % | 0.00 % | 0.00 % | 0.0 | 0 |" in text
    assert text.index("values shifted |") < text.index("different spread |")  # the worst first


def test_a_run_on_a_small_table_counts_every_site_of_every_repeat():
    federations, checks = null.run([small_table()], repeats=2)
    assert [(f["sites"], f["rows"], f["of"]) for f in federations] == [(4, 95, 8)]  # 8 sites: < 60 rows each
    assert 0 <= federations[0]["comparing"] <= federations[0]["flagged"] <= 8
    assert all(0 <= p <= 1 for c in checks.values() for p in c["p"])
    assert sum(c["reported"] for c in checks.values()) == sum(federations[0]["kinds"].values())
