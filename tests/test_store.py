import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from fedcore.errors import RunNotFound
from fedcore.store import Identity, RunStore, json_safe


@pytest.fixture
def store(tmp_path):
    return RunStore(tmp_path / "runs")


def test_create_list_and_find_by_prefix(store):
    first = store.create({"algorithm": "fedavg", "data": "demo"})
    second = store.create({"algorithm": "ifedavg", "data": "demo"})
    assert {r.id for r in store.runs()} == {first.id, second.id}
    assert store.get(first.id).spec.algorithm == "fedavg"
    assert store.get(second.id[: len(second.id) - 2]).id == second.id
    assert first.status.state == "queued"
    with pytest.raises(RunNotFound, match="No run"):
        store.get("nope")


def test_ambiguous_prefix_names_the_candidates(store):
    store.create({"algorithm": "fedavg"})
    store.create({"algorithm": "fedavg"})
    with pytest.raises(RunNotFound, match="several"):
        store.get("20")


def scores(round_, f1):
    """A round record as the engine writes it (two sites)."""
    sites = {"a": {"f1": f1}, "b": {"f1": 0.25}}
    return {"round": round_, "sites": sites, "mean": {"f1": f1}, "worst": {"f1": 0.25}, "algorithm": {}}


def test_records_are_append_only_and_a_torn_last_line_is_skipped(store):
    run = store.create({"algorithm": "fedavg"})
    run.append_round(scores(1, 0.5))
    run.append_round(scores(2, float("nan")))
    with open(run.path / "rounds.jsonl", "a") as handle:
        handle.write('{"round": 3, "mean": {"f1"')  # a writer killed mid-line
    records = run.rounds()
    assert [r.round for r in records] == [1, 2]
    assert records[1].mean["f1"] is None  # NaN is stored as null (strict JSON)
    assert [d for d in run.damage if d.file == "rounds.jsonl"] == []  # a torn last line is how a killed writer leaves the log, not damage


def test_arrays_round_trip_without_pickle(store):
    run = store.create({"algorithm": "ifedavg"})
    run.save_arrays(10, {"b_in": np.eye(3), "b_in_O": np.eye(3, dtype=bool)})
    run.save_arrays(2, {"b_in": np.zeros((3, 3))})
    assert run.array_rounds() == [2, 10]
    loaded = run.load_arrays(10)
    assert loaded["b_in_O"].dtype == bool and np.array_equal(loaded["b_in"], np.eye(3))
    with pytest.raises(ValueError, match="Python objects"):
        run.save_arrays(11, {"bad": np.array([{"a": 1}], dtype=object)})
    assert run.array_rounds() == [2, 10]


def test_whole_file_writes_leave_no_temporary_files(store):
    run = store.create({"algorithm": "fedavg"})
    for i in range(5):
        run.heartbeat(round=i)
    assert run.raw_status().round == 4
    assert not [p for p in run.path.iterdir() if p.name.startswith(".")]


def test_running_state_of_a_dead_worker_reads_as_interrupted(store):
    run = store.create({"algorithm": "fedavg"})
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    run.update_status(state="running", pid=child.pid, host=os.uname().nodename, round=3)
    status = run.status
    assert status.state == "interrupted" and status.round == 3
    assert "stopped" in status.error
    run.mark_started(total_rounds=10)  # this process is alive
    assert run.status.state == "running"


def test_mark_finished_only_accepts_final_states(store):
    run = store.create({"algorithm": "fedavg"})
    run.mark_finished("done")
    assert run.status.state == "done"
    with pytest.raises(ValueError):
        run.mark_finished("running")


def test_json_safe_converts_numpy_and_non_finite_values():
    value = json_safe({"a": np.float32(1.5), "b": [math.inf, np.int64(2)], "c": np.array([1, 2])})
    assert json.dumps(value, allow_nan=False) == '{"a": 1.5, "b": [null, 2], "c": [1, 2]}'


def test_store_reader_does_not_need_torch():
    code = "import sys, fedcore.store, fedcore.interpret.significance, fedcore.interpret.detection, fedcore.interpret.similarity; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_runs_are_numbered_in_their_store_and_keep_their_number(store):
    first, second = store.create({"algorithm": "fedavg"}), store.create({"algorithm": "ifedavg"})
    assert (first.identity.number, second.identity.number) == (1, 2)
    store.delete(first.id)
    assert store.create({"algorithm": "fedavg"}).identity.number == 3  # one more than the highest
    assert store.get(second.id).identity == Identity(2, None, [])


def test_a_run_is_renamed_and_tagged_and_bad_names_are_refused(store):
    from fedcore.errors import SpecError

    run = store.create({"algorithm": "fedavg"}, name="  Baseline\n lr 0.01 ", tags=["pilot"])
    assert run.identity == Identity(1, "Baseline lr 0.01", ["pilot"])
    run.set_identity(tags=[" sweep ", "pilot", "sweep", ""])  # the name stays; tags trimmed, once each
    assert run.identity == Identity(1, "Baseline lr 0.01", ["sweep", "pilot"])
    run.set_identity(name="")  # an empty name: called by algorithm and number again
    assert run.identity.name is None
    with pytest.raises(SpecError, match="at most 80 characters"):
        run.set_identity(name="x" * 81)
    with pytest.raises(SpecError, match="at most 12 tags"):
        run.set_identity(tags=[f"t{i}" for i in range(13)])
    assert run.identity.tags == ["sweep", "pilot"]  # nothing stored by a refused change


def test_a_name_written_into_the_store_by_hand_is_read_bounded(store):
    """The probe wrote a 5 MB name into identity.json: every page showing the run took 66 s to over
    180 s. A file larger than set_identity writes reads as no name; a long name or tag is cut."""
    run = store.create({"algorithm": "fedavg"})
    path = run.path / "identity.json"
    path.write_text(json.dumps({"number": 1, "name": "x" * 5_000_000, "tags": ["pilot"]}))
    assert run.identity == Identity(None, None, [])  # as a damaged file reads
    path.write_text(json.dumps({"number": 1, "name": "Baseline\n" + "y" * 500, "tags": ["t" * 50] * 40}))
    identity = run.identity
    assert identity.name == "Baseline " + "y" * 70 + "…" and len(identity.name) == 80
    assert identity.tags == ["t" * 31 + "…"] * 12


def test_a_data_name_is_bounded_where_it_is_written_and_where_it_is_shown():
    from fedcore.data_labels import data_label
    from fedcore.errors import SpecError
    from application.runner import resolve_spec

    from fedcore.data_labels import shortened

    assert shortened("x" * 80, 80) == "x" * 80 and shortened("x" * 81, 80) == "x" * 79 + "…"  # at the limit
    assert shortened("a \n  b", 80) == "a b"
    assert data_label({"source": "demo", "name": "n" * 5_000_000}) == "n" * 159 + "…"
    with pytest.raises(SpecError, match="The data's name has at most 160 characters; this one has 161"):
        resolve_spec({"algorithm": "fedavg", "data": {"source": "demo", "name": "n" * 161}})


def test_a_run_from_before_identities_or_with_a_damaged_identity_still_reads(store):
    run = store.create({"algorithm": "fedavg"})
    (run.path / "identity.json").unlink()
    assert run.identity == Identity(None, None, [])
    (run.path / "identity.json").write_text("{not json")
    assert run.identity == Identity(None, None, [])
    (run.path / "identity.json").write_text(json.dumps({"number": "7", "name": 3, "tags": ["a", 4]}))
    assert run.identity == Identity(None, None, ["a"])
    assert store.create({"algorithm": "fedavg"}).identity.number == 2  # counts the runs without a number
