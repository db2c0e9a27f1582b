"""benchmarks/resolution_prototype.py (a prototype, not in the product): each site's count of nonzero
values on every step of the 1-2-5 ladder, its resolution, and the test of a site recorded more
coarsely than the others; known answers on values made so."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "benchmarks"),
                str(Path(__file__).resolve().parents[1] / "benchmarks" / "evidence")]

import resolution_prototype as prototype  # noqa: E402
from corruptions import Table  # noqa: E402


def _count_on(values: list[float], step: float) -> float:
    on, _ = prototype.on_steps(np.asarray(values, dtype=np.float64))
    return on[list(prototype.LADDER).index(step)]


def test_counts_on_a_step_by_hand():
    """5, 10 and 15 lie on 5; of them only 10 on 10; 2.5 on 0.5 but not on 1; zeros and NaN count
    nowhere, and a value lies on no step above it (its multiple would be 0)."""
    values = [5.0, 10.0, 15.0, 2.5, 0.0, np.nan]
    on, n = prototype.on_steps(np.asarray(values))
    assert n == 4
    assert _count_on(values, 5.0) == 3
    assert _count_on(values, 10.0) == 1
    assert _count_on(values, 1.0) == 3
    assert _count_on(values, 0.5) == 4
    assert _count_on(values, 20.0) == 0
    assert _count_on(values, 5e6) == 0
    assert _count_on([0.3, 0.1 + 0.2], 0.1) == 2  # 0.1 + 0.2 is 0.30000000000000004: on 0.1 within rounding


def _table(rounded_to: float | None, sd: float = 15.0, sites: int = 6, rows: int = 200, seed: int = 0) -> Table:
    """Sites recording a blood pressure in whole mmHg (SD `sd`); the first rounds it to `rounded_to`."""
    rng = np.random.default_rng(seed)
    x = [np.round(rng.normal(120, sd, (rows, 1))) for _ in range(sites)]
    if rounded_to is not None:
        x[0] = np.round(x[0] / rounded_to) * rounded_to
    return Table(name="bp", sites=[f"s{k}" for k in range(sites)], x=x,
                 y=[rng.integers(0, 2, rows) for _ in range(sites)], features=["bp"], kinds=["continuous"],
                 columns=["bp"], classes=["no", "yes"])


def test_a_site_rounding_to_ten_is_reported_with_its_step():
    cells = prototype.reported(_table(10.0))
    assert [(c["site"], c["feature"]) for c in cells] == [("s0", "bp")]
    cell = cells[0]
    assert cell["step"] == 10.0 and cell["share"] == 1.0
    assert 0.05 < cell["others"] < 0.15  # a tenth of whole numbers lie on 10
    assert cell["step_sd"] == np.float64(10.0) / np.nanstd(np.concatenate(_table(10.0).x))


def test_equal_resolutions_and_a_step_finer_than_material_are_not_reported():
    assert prototype.reported(_table(None)) == []
    assert prototype.reported(_table(2.0)) == []  # half the others' values lie on 2 as well
    # a 5 mmHg step where the values spread by 60: 0.08 SD, below STEP_SD, though a fifth of the
    # others' values lie on it and the site's stand out (p < 0.001)
    fine = _table(5.0, sd=60.0)
    assert prototype.reported(fine) == []
    assert prototype.reported(fine, every=True)[0]["p"] < 0.001


def test_a_step_most_of_the_others_round_to_as_well_is_not_reported():
    """The others round 70 % of their values to 10 (a habit, as heart's blood pressures show): the
    site at 10 throughout differs (p < 0.01) but records as they mostly do."""
    table = _table(10.0)
    rng = np.random.default_rng(1)
    for x in table.x[1:]:
        habit = rng.random(len(x)) < 0.7
        x[habit] = np.round(x[habit] / 10) * 10
    cell = prototype.reported(table, every=True)[0]
    assert cell["site"] == "s0" and cell["p"] < 0.01 and cell["others"] > 0.7
    assert prototype.reported(table) == []
