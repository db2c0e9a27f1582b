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

from fedcore.checkup import check_up  # noqa: E402


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
    checks = {"location": {"cells": 4, "below": [3, 2, 1], "reported": 1},  # p 0.0005, 0.005, 0.02, 0.5
              "spread": {"cells": 2, "below": [0, 0, 0], "reported": 0}}
    federations = [{"data set": "small", "sites": 4, "deals": 10, "rows": 95, "flagged": 3, "comparing": 2, "of": 40,
                    "kinds": Counter({"location": 1, "missing_by_class": 2})},
                   {"data set": "small", "sites": 8, "deals": 10, "rows": 60, "flagged": 1, "comparing": 0, "of": 80,
                    "kinds": Counter({"missing_by_class": 1})}]
    text = null.report(federations, checks)
    assert "| small | 4 | 10 | 95 | 7.5 % (3/40) | 5.0 % (2/40) | missingness depends on the class 2, values shifted 1 |" in text
    assert "| **all** | | | | 3.3 % (4/120) | 1.7 % (2/120) | |" in text
    # 1 of 4 below 0.001 (250 × nominal), 2 below 0.01, 3 below 0.05
    assert "| values shifted | 4 | 75.00 % | 50.00 % | 25.00 % | 250.0 | 1 |" in text
    assert "| different spread | 2 | 0.00 % | 0.00 % | 0.00 % | 0.0 | 0 |" in text
    assert text.index("values shifted |") < text.index("different spread |")  # the worst first


def test_deals_are_summed_per_data_set_and_k_and_per_check():
    """Two deals of one (data set, K) and one of another, by hand; a K with too few rows is left out."""
    def deal(flagged, comparing, reported, cells):
        return {"rows": 95, "of": 4, "flagged": flagged, "comparing": comparing, "reported": reported, "cells": cells}

    deals = [({"dataset": "a", "sites": 4, "seed": 10}, deal(1, 1, {"location": 2}, {"location": [10, 2, 1, 0]})),
             ({"dataset": "a", "sites": 4, "seed": 11}, deal(2, 1, {"missing_by_class": 1},
                                                             {"location": [10, 1, 0, 0], "spread": [5, 0, 0, 0]})),
             ({"dataset": "b", "sites": 4, "seed": 10}, deal(0, 0, {}, {"spread": [5, 1, 1, 1]})),
             ({"dataset": "b", "sites": 16, "seed": 10}, {"rows": 23, "too_few_rows": True})]
    federations, checks = null.aggregate(deals)
    assert [(f["data set"], f["sites"], f["deals"], f["flagged"], f["comparing"], f["of"]) for f in federations] == \
        [("a", 4, 2, 3, 2, 8), ("b", 4, 1, 0, 0, 4)]
    assert federations[0]["kinds"] == Counter({"location": 2, "missing_by_class": 1})
    assert checks["location"] == {"cells": 20, "below": [3, 1, 0], "reported": 2}
    assert checks["spread"] == {"cells": 10, "below": [1, 1, 1], "reported": 0}
    assert checks["missing_by_class"] == {"cells": 0, "below": [0, 0, 0], "reported": 1}


def test_a_deal_of_a_small_table_counts_its_sites_and_every_tested_cell():
    table = small_table()  # 380 rows: 4 sites of 95; 8 sites would hold fewer than 60 rows each
    assert null.deal_checked(table, 8, 0) == {"rows": 47, "too_few_rows": True}
    result = null.deal_checked(table, 4, 0)
    assert (result["rows"], result["of"]) == (95, 4)
    assert 0 <= result["comparing"] <= result["flagged"] <= 4
    checked = check_up(null.dealt(table, 4, 0).profile(), {})
    tested = Counter(f.kind for f in checked.findings if np.isfinite(f.p))
    assert {kind: counts[0] for kind, counts in result["cells"].items()} == dict(tested)
    for k, level in enumerate((0.05, 0.01, 0.001), 1):
        below = Counter(f.kind for f in checked.findings if f.p < level)
        assert {kind: counts[k] for kind, counts in result["cells"].items() if counts[k]} == dict(below), level
    assert sum(result["reported"].values()) == len(checked.reported)


def test_the_rows_dealt_back_at_the_sites_own_sizes_keep_each_sites_name_and_number_of_rows():
    table = small_table()  # sites of 80, 90, 100 and 110 rows
    dealt = null.dealt(table, null.OWN, seed=3)
    assert dealt.sites == table.sites
    assert [len(y) for y in dealt.y] == [80, 90, 100, 110]
    assert _rows(dealt) == _rows(table)
    # mixed, not the sites' own rows back: each holds rows of the other sites
    own = {tuple(np.nan_to_num(row, nan=np.inf)) for row in table.x[0]}
    assert sum(tuple(np.nan_to_num(row, nan=np.inf)) in own for row in dealt.x[0]) < 40
    again = null.dealt(table, null.OWN, seed=3)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(dealt.x, again.x))


def test_a_sites_size_falls_in_one_band():
    assert [null.size_band(n) for n in (7, 29, 30, 99, 100, 534)] == \
        ["under 30 rows", "under 30 rows", "30-99 rows", "30-99 rows", "100 rows or more", "100 rows or more"]


def test_a_deal_at_the_sites_own_sizes_counts_every_cell_in_its_sites_band():
    table = small_table()
    result = null.deal_checked(table, null.OWN, 0)
    assert (result["rows"], result["of"]) == ([80, 110], 4)
    checked = check_up(null.dealt(table, null.OWN, 0).profile(), {})
    sizes = dict(zip(table.sites, (len(y) for y in table.y)))
    for band in ("30-99 rows", "100 rows or more"):
        here = [f for f in checked.findings if np.isfinite(f.p) and null.size_band(sizes[f.site]) == band]
        assert {kind: counts[0] for kind, counts in result["by_size"][band].items()} == dict(Counter(f.kind for f in here))
        below = Counter(f.kind for f in here if f.p < 0.001)
        assert {kind: counts[3] for kind, counts in result["by_size"][band].items() if counts[3]} == dict(below)
    assert "under 30 rows" not in result["by_size"]
    assert "by_size" not in null.deal_checked(table, 4, 0)


def test_the_size_report_gives_each_bands_share_below_a_level_as_a_multiple_of_it():
    # by hand: 200 cells of small sites, 20 below 0.05 (2 ×) and 1 below 0.001 (5 ×); two deals summed
    deals = [({"sites": null.OWN}, {"by_size": {"under 30 rows": {"location": [120, 12, 3, 1]},
                                                "100 rows or more": {"location": [1000, 5, 0, 0]}}}),
             ({"sites": null.OWN}, {"by_size": {"under 30 rows": {"location": [80, 8, 2, 0]}}})]
    bands = null.by_size(deals)
    assert bands == {"location": {"under 30 rows": [200, 20, 5, 1], "100 rows or more": [1000, 5, 0, 0]}}
    text = null.size_report(bands)
    assert "| values shifted | 200 cells: 2.00 × / 5.00 × | – | 1,000 cells: 0.10 × / 0.00 × |" in text


def test_a_federation_at_its_sites_own_sizes_is_reported_with_its_number_of_sites_and_their_sizes():
    federations = [{"data set": "vehicle", "sites": null.OWN, "deals": 10, "rows": [7, 534], "flagged": 16,
                    "comparing": 16, "of": 230, "kinds": Counter({"location": 3})}]
    text = null.report(federations, {"location": {"cells": 10, "below": [0, 0, 0], "reported": 3}})
    assert "| vehicle | 23, own sizes | 10 | 7-534 | 7.0 % (16/230) | 7.0 % (16/230) | values shifted 3 |" in text


def test_the_sites_with_a_finding_are_counted_per_band_of_their_size():
    table = small_table()
    result = null.deal_checked(table, null.OWN, 0)
    checked = check_up(null.dealt(table, null.OWN, 0).profile(), {})
    comparing = {f.site for f in checked.reported if f.kind not in null.WITHIN_SITE}
    assert result["flagged_by_size"] == {"under 30 rows": [0, 0], "30-99 rows": [len(comparing & {"north", "south"}), 2],
                                         "100 rows or more": [len(comparing & {"east", "west"}), 2]}
    deals = [({}, {"flagged_by_size": {"under 30 rows": [1, 5], "30-99 rows": [0, 3]}}),
             ({}, {"flagged_by_size": {"under 30 rows": [2, 5], "30-99 rows": [1, 3]}})]
    summed = null.flagged_by_size(deals)
    assert summed == {"under 30 rows": [3, 10], "30-99 rows": [1, 6], "100 rows or more": [0, 0]}
    text = null.size_report({"location": {"under 30 rows": [10, 1, 0, 0]}}, summed)
    assert "| **sites with a finding of a check comparing sites** | 30.0 % (3/10) | 16.7 % (1/6) | – |" in text
