"""The families the detector was never tuned on (corruptions.UNSEEN_FAMILIES, scored by
benchmarks/unseen_families.py) put in what they declare, reproducibly per seed, at one site only:
known answers on a small table made here (the suite's, with one signed column)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "benchmarks" / "evidence")]

import corruptions  # noqa: E402
import unseen_families  # noqa: E402
from corruptions import FAMILIES, UNSEEN_FAMILIES, Table, applies, corrupt, draw_case, family_of  # noqa: E402
from test_checkup_families import small_table  # noqa: E402

SEEDS = range(12)


def signed_table() -> Table:
    """The suite's small table with weight as a difference from 70 kg (a signed column) and age in
    whole years (a column recorded in whole numbers)."""
    table = small_table()
    xs = []
    for x in table.x:
        x = x.copy()
        x[:, 0] = np.round(x[:, 0])
        x[:, 1] -= 70.0
        xs.append(x)
    return replace(table, x=xs, features=["age", "weight change", *table.features[2:]],
                   columns=["age", "weight change", *table.columns[2:]])


@pytest.fixture(scope="module")
def table() -> Table:
    return signed_table()


def cases(table: Table, family: str) -> list[tuple[dict, np.ndarray, np.ndarray, int]]:
    """Per seed: the case, the site's rows before and after, and the site's index."""
    found = []
    for seed in SEEDS:
        case = corruptions.measured(table, draw_case(table, UNSEEN_FAMILIES[family], seed))
        i = table.sites.index(case["site"])
        found.append((case, table.x[i], corrupt(table, case).x[i], i))
    return found


def col(table: Table, x: np.ndarray, name: str) -> np.ndarray:
    return x[:, table.features_of(name)[0]]


def test_the_unseen_families_are_new_names_and_found_by_name():
    assert not set(UNSEEN_FAMILIES) & set(FAMILIES)
    assert all(family_of(name) is family for name, family in {**FAMILIES, **UNSEEN_FAMILIES}.items())


@pytest.mark.parametrize("family", list(UNSEEN_FAMILIES))
def test_every_unseen_family_changes_only_its_site_and_is_reproducible(table, family):
    spec = UNSEEN_FAMILIES[family]
    first = [draw_case(table, spec, s) for s in SEEDS]
    assert first == [draw_case(signed_table(), spec, s) for s in SEEDS]
    assert len({repr(sorted(c.items())) for c in first}) > 1
    for case in first:
        out, i = corrupt(table, case), table.sites.index(case["site"])
        for k in range(len(table.sites)):
            if k != i:
                assert np.array_equal(out.x[k], table.x[k], equal_nan=True) and np.array_equal(out.y[k], table.y[k])
        assert not (out.x[i].shape == table.x[i].shape and np.array_equal(out.x[i], table.x[i], equal_nan=True)
                    and np.array_equal(out.y[i], table.y[i])), f"{family} seed {case['seed']} changed nothing"
        if spec.strength is not None:
            assert spec.strength.low <= case["strength"] <= spec.strength.high
        columns = case["truth"]["columns"]
        if columns is not None and spec.group != "rows":  # a selection leaves rows out: every column loses them
            untouched = [k for k, c in enumerate(table.columns) if c not in columns]
            assert np.array_equal(out.x[i][:, untouched], table.x[i][:, untouched], equal_nan=True)
            assert np.array_equal(out.y[i], table.y[i])
        again = corrupt(signed_table(), case)
        assert np.array_equal(again.x[i], out.x[i], equal_nan=True) and np.array_equal(again.y[i], out.y[i])


def test_a_sign_error_negates_a_signed_column_and_never_a_positive_one(table):
    for case, before, after, _ in cases(table, "sign_flip"):
        assert case["column"] == "weight change"  # age, dose: never negative, no mounting error to make
        assert np.array_equal(col(table, after, "weight change"), -col(table, before, "weight change"))
    assert not applies(small_table(), UNSEEN_FAMILIES["sign_flip"])


def test_mixed_units_convert_the_drawn_share_of_the_values_and_leave_the_rest(table):
    for case, before, after, _ in cases(table, "mixed_units"):
        b, a = col(table, before, case["column"]), col(table, after, case["column"])
        observed = ~np.isnan(b)
        converted = observed & (a != b)
        assert np.allclose(a[converted], case["a"] * b[converted] + case["b"])
        assert converted.sum() == max(1, round(case["strength"] * observed.sum()))  # no value here is a fixed point
        assert case["changed"] == pytest.approx(converted.sum() / observed.sum(), abs=1e-6)


def test_the_steps_a_coarser_device_rounds_to_are_one_two_five():
    assert [corruptions.round_step(s) for s in (0.3, 4.5, 1.4, 0.07, 160.0, 7.0)] == [0.2, 5.0, 1.0, 0.05, 200.0, 5.0]


def test_a_coarser_step_is_coarser_than_the_sites_own_resolution():
    whole_years = np.array([40.0, 41.0, 53.0, 67.0, np.nan])
    assert corruptions.coarser_step(whole_years, 0.3) == 2.0  # 1 would change nothing
    assert corruptions.coarser_step(whole_years, 4.5) == 5.0
    assert corruptions.coarser_step(np.array([40.0, 50.0, 70.0]), 4.0) == 20.0  # already in tens
    assert corruptions.coarser_step(np.array([0.1234, 0.5678]), 0.2) == 0.2
    mostly_blank = np.r_[np.zeros(99), 0.37]  # on every step of the ladder: its top, not beyond it
    assert corruptions.coarser_step(mostly_blank, 0.5) == corruptions.STEPS[-1]


def test_coarsened_values_are_multiples_of_the_step(table):
    for case, before, after, _ in cases(table, "coarsened"):
        values = col(table, after, case["column"])
        j = table.features_of(case["column"])[0]
        step = corruptions.coarser_step(before[:, j], case["strength"] * corruptions._pooled_sd(table, j))
        observed = ~np.isnan(values)
        assert np.allclose(values[observed] / step, np.round(values[observed] / step))
        assert np.nanmax(np.abs(values - col(table, before, case["column"]))) <= step / 2 + 1e-9


def test_a_drift_grows_from_nothing_to_its_strength_and_keeps_whole_numbers(table):
    for case, before, after, _ in cases(table, "drift"):
        j = table.features_of(case["column"])[0]
        end = case["sign"] * case["strength"] * corruptions._pooled_sd(table, j)
        b, a = before[:, j], after[:, j]
        growth = np.linspace(0, 1, len(b))
        if case["column"] == "age":  # recorded in whole years: the drifted values are too
            assert np.allclose(a, np.round(b + end * growth), equal_nan=True)
        else:
            observed = ~np.isnan(b)
            assert np.allclose((a - b)[observed], (end * growth)[observed]) and np.isnan(a[~observed]).all()
        assert a[0] == b[0] or np.isnan(b[0])


def test_added_noise_widens_a_column_by_its_strength_in_whole_numbers_where_recorded_so(table):
    for case, before, after, _ in cases(table, "added_noise"):
        b, a = col(table, before, case["column"]), col(table, after, case["column"])
        observed = ~np.isnan(b)
        assert np.array_equal(np.isnan(a), ~observed)
        added = a[observed] - b[observed]
        assert np.std(added) == pytest.approx(case["strength"] * np.std(b[observed]), rel=0.35)  # ≥ 80 values
        if case["column"] == "age":
            assert np.array_equal(a[observed], np.round(a[observed]))


def test_a_selection_keeps_only_the_rows_beyond_its_cut(table):
    for case, before, after, i in cases(table, "selected"):
        b, a = col(table, before, case["column"]), col(table, after, case["column"])
        observed = b[~np.isnan(b)]
        kept = a[~np.isnan(a)]
        assert len(observed) - len(kept) == round(case["strength"] * len(observed))
        left_out = np.sort(observed)[:len(observed) - len(kept)] if case["kept"] == "above" else \
            np.sort(observed)[len(kept):]
        assert (kept >= left_out.max()).all() if case["kept"] == "above" else (kept <= left_out.min()).all()
        assert np.isnan(a).sum() == np.isnan(b).sum()  # rows without the column are no part of the cut
        assert len(after) == len(corrupt(table, case).y[i])


def test_values_moved_to_other_rows_keep_the_columns_values_and_change_the_drawn_share(table):
    for case, before, after, _ in cases(table, "permuted"):
        b, a = col(table, before, case["column"]), col(table, after, case["column"])
        assert np.array_equal(np.sort(a[~np.isnan(a)]), np.sort(b[~np.isnan(b)]))
        assert np.array_equal(np.isnan(a), np.isnan(b))
        moved = np.mean(a[~np.isnan(b)] != b[~np.isnan(b)])
        assert moved <= case["strength"] + 0.01 and case["changed"] == pytest.approx(moved, abs=1e-6)


def test_a_reversed_yes_no_column_exchanges_its_codes(table):
    for case, before, after, _ in cases(table, "binary_reversed"):
        assert case["column"] == "smoker"
        assert np.array_equal(col(table, after, "smoker"), 1 - col(table, before, "smoker"))


def test_relabelling_moves_the_drawn_share_of_one_class_to_the_other_and_nothing_else(table):
    for seed in SEEDS:
        case = draw_case(table, UNSEEN_FAMILIES["relabelled"], seed)
        i = table.sites.index(case["site"])
        source, target = case["classes"]
        before, after = table.y[i], corrupt(table, case).y[i]
        changed = before != after
        assert (before[changed] == source).all() and (after[changed] == target).all()
        assert changed.sum() == max(1, round(case["strength"] * np.sum(before == source)))


def test_whole_numbers_are_kept_only_where_a_site_records_them():
    whole = np.array([50.0, 61.0, 47.0, np.nan])
    assert corruptions.whole_numbers(whole) and not corruptions.whole_numbers(whole + 0.5)
    assert np.array_equal(corruptions.as_recorded(whole, whole + 0.4), whole, equal_nan=True)
    assert np.array_equal(corruptions.as_recorded(whole + 0.5, whole + 0.9), whole + 0.9, equal_nan=True)
    assert not corruptions.whole_numbers(np.array([np.nan]))


def test_the_tasks_hold_a_baseline_per_data_set_and_only_the_families_that_apply(monkeypatch):
    monkeypatch.setattr(unseen_families, "load_table", lambda name: small_table())
    todo = unseen_families.tasks(["small"], ["held-out"])
    assert todo[0] == {"dataset": "small", "lenses": "data", "policy": "default", "family": "none", "seed": 0}
    families = {t["family"] for t in todo[1:]}
    assert families == set(UNSEEN_FAMILIES) - {"sign_flip"}  # no signed column in the suite's small table
    assert all(t["seed"] in range(10, 20) for t in todo[1:]) and len(todo) == 1 + 10 * len(families)


def test_the_report_scores_unseen_cases_as_the_suite_does():
    """A baseline and two held-out cases of one family: one found (a new finding at its site and
    column), one missed (only what the untouched data show): recall 50 %, the column named."""
    def record(seed: int, findings: list[str]) -> dict:
        return {"case": {"family": "permuted", "seed": seed, "site": "north", "column": "dose", "strength": 0.8,
                         "changed": 0.8, "truth": {"site": "north", "columns": ["dose"]}},
                "findings": findings, "sites": ["north", "south", "east", "west"], "closest": None}

    import json

    old = "east\tdata profile\tlocation\tage\t\t0.001"
    key = lambda family, seed: json.dumps({"dataset": "heart", "lenses": "data", "policy": "default",  # noqa: E731
                                           "family": family, "seed": seed})
    results = {key("none", 0): {"findings": [old], "sites": ["north", "south", "east", "west"]},
               key("permuted", 10): record(10, ["north\tdata profile\tcorrelation\tdose\t\t0.002", old]),
               key("permuted", 11): record(11, [old])}
    lines = unseen_families.half_report(results, "held-out")
    family_title = UNSEEN_FAMILIES["permuted"].title
    (row,) = [line for line in lines if family_title in line and "|" in line and "material from" not in line
              and line.startswith("| export")]
    assert "| 50 % (1/2) | 100 % (1/1) | 0.0 % (0/6) |" in row
    assert "No case of this half is recorded." in unseen_families.half_report(results, "tuning")


def test_a_fresh_run_of_some_tasks_keeps_the_parts_other_records(tmp_path, monkeypatch):
    import common

    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path)
    first = common.run_tasks("toy", [{"n": 1}, {"n": 2}], _doubled, jobs=1)
    again = common.run_tasks("toy", [{"n": 2}], _tripled, jobs=1, fresh=True)
    assert first == {'{"n": 1}': 2, '{"n": 2}': 4} and again == {'{"n": 2}': 6}
    assert common.load_results("toy") == {'{"n": 1}': 2, '{"n": 2}': 6}


def test_a_run_of_some_tasks_leaves_the_other_tasks_records_as_they_are(tmp_path, monkeypatch):
    import common

    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path)
    common.run_tasks("toy", [{"n": 1}, {"n": 2}], _doubled, jobs=1)
    # the code both measured has changed, but only n = 2 is asked for: n = 1's record stays as it was
    again = common.run_tasks("toy", [{"n": 2}], _tripled, jobs=1, reuse=lambda task, result: False)
    assert again == {'{"n": 2}': 6} and common.load_results("toy") == {'{"n": 1}': 2, '{"n": 2}': 6}


def _doubled(task: dict) -> int:
    return 2 * task["n"]


def _tripled(task: dict) -> int:
    return 3 * task["n"]
