"""Fault tests of the run store: damaged files, unsafe run ids, colliding ids, a full disk, two
writers, a killed worker. Every fault is made here, on copies of real finished runs; the other
runs, the CLI, the job queue and the dashboard must carry on, and the damaged run must say which
file is wrong and how."""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.presenters.lenses import detection_table, shift_view
from dashboard.presenters.record_tables import progress
from dashboard.presenters.report import html_report
from application import jobs
from fedcore import store as store_module
from application.cli import main
from fedcore.errors import FedcoreError, RunNotFound
from application.runner import execute, resolve_spec
from fedcore.shapes import Damage, RunDamaged
from fedcore.store import RESERVE, Run, RunStore, Scores, Spec, StoredFederation, new_run_id, to_json
from tests import helpers


# `make test-processes` (CI runs it): real worker and writer processes, about 110 CPU-seconds,
# apart from `make test` for its 10 minutes on 2 cores
pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
QUICK = {"algorithm": "fedavg", "config": {"rounds": 2}}
LONG = {"algorithm": "ifedavg", "config": {"rounds": 2000, "eval_every": 1}}


# -- a store of real finished runs, copied for every fault ----------------------------------------
@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """Two finished runs: iFedAvg with arrays and (as a Flower run would have) a model.npz, and
    FedAvg, the bystander that must stay usable."""
    store = RunStore(tmp_path_factory.mktemp("template") / "runs")
    damaged = store.create(resolve_spec({"algorithm": "ifedavg", "config": {"rounds": 3, "eval_every": 1}}))
    execute(damaged)
    damaged.save_model({"w_in": np.ones((8, 12))})
    healthy = store.create(resolve_spec(QUICK))
    execute(healthy)
    return store.root, damaged.id, healthy.id


@pytest.fixture
def copied(template, tmp_path):
    root, damaged_id, healthy_id = template
    shutil.copytree(root, tmp_path / "runs")
    store = RunStore(tmp_path / "runs")
    return store, store.get(damaged_id), store.get(healthy_id)


def cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def emptied(path: Path) -> None:
    path.write_bytes(b"")


def garbage(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 8)


def removed(path: Path) -> None:
    path.unlink()


def edit_json(change):
    def damage(path: Path) -> None:
        value = json.loads(path.read_text())
        path.write_text(json.dumps(change(value)))
    return damage


def set_field(dotted: str, new):
    def change(value):
        target = value
        *parents, last = dotted.split(".")
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        target[last] = new
        return value
    return edit_json(change)


def replaced_by(new):
    return edit_json(lambda value: new)


def middle_line(change):
    """rounds.jsonl with its second of three lines changed by `change(text) -> text`."""
    def damage(path: Path) -> None:
        lines = path.read_text().splitlines()
        assert len(lines) == 3
        lines[1] = change(lines[1])
        path.write_text("\n".join(lines) + "\n")
    return damage


def sites_as_list(line: str) -> str:
    record = json.loads(line)
    record["sites"] = list(record["sites"].values())
    return json.dumps(record)


def with_object_array(path: Path) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, b_in=np.array([{"x": 1}], dtype=object))  # pickled: never loaded
    path.write_bytes(buffer.getvalue())


def with_wrong_shape(path: Path) -> None:
    with np.load(path) as data:
        arrays = {key: data[key] for key in data.files}
    arrays["b_in"] = arrays["b_in"][:, :3]  # fewer features than federation.json names
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    path.write_bytes(buffer.getvalue())


LAST_ARRAYS = "arrays/r000003.npz"
# (file, how it is damaged, what run.damage must say about it)
FAULTS = {
    "status cut off": ("status.json", cut_in_half, "not valid JSON"),
    "status empty": ("status.json", emptied, "is empty"),
    "status garbage": ("status.json", garbage, "binary data"),
    "status missing": ("status.json", removed, "is missing"),
    "status a list": ("status.json", replaced_by([1, 2]), "should hold an object, not a list"),
    "status round as text": ("status.json", set_field("round", "7"), "'round' should be a whole number, not text"),
    "status mean a list": ("status.json", set_field("mean", [0.5]), "'mean' should be an object, not a list"),
    "status unknown state": ("status.json", set_field("state", "exploded"), "'state' should be one of"),
    "status pid -1": ("status.json", set_field("pid", -1), "'pid' should be a process id"),
    "status 100,000 deep": ("status.json", lambda path: path.write_text('{"a":' * 100_000 + "1" + "}" * 100_000),
                            "is no file fedcore writes: it nests objects and lists 100,000 deep (at most 64)"),
    "spec cut off": ("spec.json", cut_in_half, "not valid JSON"),
    "spec empty": ("spec.json", emptied, "is empty"),
    "spec garbage": ("spec.json", garbage, "binary data"),
    "spec missing": ("spec.json", removed, "is missing"),
    "spec a list": ("spec.json", replaced_by(["ifedavg"]), "should hold an object, not a list"),
    "spec rounds as text": ("spec.json", set_field("config.rounds", "3"),
                            "'config.rounds' should be a whole number, not text"),
    "spec params as text": ("spec.json", set_field("params", "n_sd=2"), "'params' should be an object, not text"),
    "federation cut off": ("federation.json", cut_in_half, "not valid JSON"),
    "federation empty": ("federation.json", emptied, "is empty"),
    "federation garbage": ("federation.json", garbage, "binary data"),
    "federation missing": ("federation.json", removed, "is missing"),
    "federation sites as text": ("federation.json", set_field("sites", "Alder General"),
                                 "'sites' should be a list"),
    "federation feature names as numbers": ("federation.json", set_field("feature_names", [1, 2]),
                                            "'feature_names[0]' should be text, not a number"),
    "federation truth names no site": ("federation.json", set_field("ground_truth.0.site", "Nowhere"),
                                       "'ground_truth[0].site' names no site"),
    "summary cut off": ("summary.json", cut_in_half, "not valid JSON"),
    "summary empty": ("summary.json", emptied, "is empty"),
    "summary garbage": ("summary.json", garbage, "binary data"),
    "summary missing": ("summary.json", removed, "is missing"),
    "summary a number": ("summary.json", replaced_by(3), "should hold an object, not a number"),
    "summary mean a list": ("summary.json", set_field("mean", [0.5]), "'mean' should be an object, not a list"),
    "summary a 5,000-digit number": ("summary.json", lambda path: path.write_text('{"rounds": ' + "9" * 5_000 + "}"),
                                     "it holds a number written with 5,000 characters (at most 40)"),
    "rounds middle line cut": ("rounds.jsonl", middle_line(lambda line: line[: len(line) // 2]),
                               "line 2 is not valid JSON"),
    "rounds middle line garbage": ("rounds.jsonl", middle_line(lambda line: "\x00\x01\x02"), "line 2 is not valid JSON"),
    "rounds middle line 100,000 deep": ("rounds.jsonl", middle_line(lambda line: "[" * 100_000 + "]" * 100_000),
                                        "line 2 is not valid JSON"),
    "rounds sites as a list": ("rounds.jsonl", middle_line(sites_as_list),
                               "line 2: 'sites' should be an object, not a list"),
    "rounds a NaN score": ("rounds.jsonl", middle_line(lambda line: line.replace('"f1":', '"f1":NaN,"x":', 1)),
                           "f1' should be a number, not NaN or infinity"),
    "rounds missing": ("rounds.jsonl", removed, "is missing"),
    "rounds empty": ("rounds.jsonl", emptied, "is empty"),
    "arrays cut off": (LAST_ARRAYS, cut_in_half, "not a readable array file"),
    "arrays empty": (LAST_ARRAYS, emptied, "is empty"),
    "arrays garbage": (LAST_ARRAYS, garbage, "not a readable array file"),
    "model cut off": ("model.npz", cut_in_half, "not a readable array file"),
    "model garbage": ("model.npz", garbage, "not a readable array file"),
}
# Damage that only loading finds (the archive itself is sound).
FOUND_ON_LOADING = {
    "arrays hold objects": (LAST_ARRAYS, with_object_array, "Python objects"),
    "arrays of the wrong shape": (LAST_ARRAYS, with_wrong_shape, "'b_in' has shape 8 x 3"),
}


def test_the_template_runs_are_sound(copied):
    store, damaged, healthy = copied
    assert damaged.damage == [] and healthy.damage == []
    assert damaged.state == healthy.state == "done"


def cli_output(capsys, store, *args):
    code = main([args[0], "--store", str(store.root), *args[1:]])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("fault", list(FAULTS), ids=list(FAULTS))
def test_a_damaged_file_marks_its_run_damaged_and_nothing_else(copied, fault, capsys):
    store, run, healthy = copied
    healthy_records = healthy.rounds()
    name, damage, problem = FAULTS[fault]
    damage(run.path / name)

    # The store names the file and the problem; the bystander is untouched.
    found = [str(d) for d in run.damage]
    assert any(d.startswith(f"{name}: ") and problem in d for d in found), found
    assert run.state == "damaged"
    assert {r.id for r in store.runs()} == {run.id, healthy.id}
    assert healthy.damage == [] and healthy.state == "done" and healthy.rounds() == healthy_records

    # Every reader returns a value of the declared kind, or RunDamaged for arrays.
    assert isinstance(run.spec, Spec) and isinstance(run.spec.config, dict)
    assert isinstance(run.federation, StoredFederation) and all(isinstance(s.name, str) for s in run.federation.sites)
    assert isinstance(run.status.state, str)
    assert all(isinstance(r, Scores) and isinstance(r.sites, dict) for r in run.rounds())
    assert run.summary is None or isinstance(run.summary.sites, dict)
    for load in (lambda: run.load_arrays(run.array_rounds()[-1]), run.load_model,
                 lambda: shift_view(run, run.array_rounds()[-1], "b_in"),
                 lambda: detection_table(run, run.array_rounds()[-1]), lambda: html_report(run)):
        try:
            load()
        except RunDamaged as error:
            assert error.damage and all(isinstance(d, Damage) for d in error.damage)
    if name.endswith(".npz"):  # loading names the file too
        with pytest.raises(RunDamaged) as caught:
            run.load_model() if name == "model.npz" else run.load_arrays(3)
        assert caught.value.damage[0].file == name
    info = progress(run)
    assert info["state"] == "damaged" and name in info["error"]

    # The command line says the same, with its documented exit codes.
    code, out, err = cli_output(capsys, store, "list")
    assert code == 0 and not err
    assert f"{run.id}: {name}: " in out and problem in out
    assert any(line.startswith(healthy.id) and " done " in line for line in out.splitlines())
    code, out, _ = cli_output(capsys, store, "list", "--json")
    rows = {row["run_id"]: row for row in json.loads(out)}
    assert code == 0 and rows[run.id]["state"] == "damaged" and rows[healthy.id]["state"] == "done"
    assert any(problem in d for d in rows[run.id]["damage"])
    code, out, err = cli_output(capsys, store, "show", run.id)
    assert code == 0 and "state      damaged" in out and f"damage     {name}: " in out and not err
    code, out, _ = cli_output(capsys, store, "show", run.id, "--json")
    assert code == 0 and json.loads(out)["state"] == "damaged"

    # The queue passes over it (nothing is queued: nothing starts, nothing raises); a run whose
    # spec cannot be read cannot be re-run, and says why.
    assert jobs.pump(store) == []
    if name == "spec.json":
        with pytest.raises(FedcoreError, match="spec.json"):
            jobs.rerun(store, run)


@pytest.mark.parametrize("fault", list(FOUND_ON_LOADING), ids=list(FOUND_ON_LOADING))
def test_array_damage_inside_a_sound_archive_is_named_on_loading(copied, fault):
    store, run, healthy = copied
    name, damage, problem = FOUND_ON_LOADING[fault]
    damage(run.path / name)
    with pytest.raises(RunDamaged, match=problem) as caught:
        shift_view(run, 3, "b_in")
    assert caught.value.damage[0].file == name
    assert healthy.damage == []


def test_a_torn_last_line_is_not_damage_but_a_torn_middle_line_is(copied):
    store, run, _ = copied
    log = run.path / "rounds.jsonl"
    complete = log.read_text()
    log.write_text(complete + '{"round": 4, "sites": {"a"')  # a writer killed mid-line
    assert run.damage == [] and len(run.rounds()) == 3
    log.write_text(complete + '{"round": 4, "sites": {"a"\n' + complete.splitlines()[-1] + "\n")
    assert [str(d) for d in run.damage] == ["rounds.jsonl: line 4 is not valid JSON (left out)"]
    assert [r.round for r in run.rounds()] == [1, 2, 3, 3]


def test_a_failed_append_is_cut_back_so_the_next_record_starts_on_its_own_line(copied, monkeypatch):
    store, run, _ = copied
    log = run.path / "rounds.jsonl"
    before = log.read_bytes()
    record = to_json(run.rounds()[-1])  # a record as the engine writes it
    real_open = open

    class HalfWriter:
        """A file whose write stores half the bytes and then fails, as a filling disk does."""

        def __init__(self, handle):
            self.handle = handle

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            self.handle.write(data[: len(data) // 2])
            self.handle.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("builtins.open", lambda *a, **k: HalfWriter(real_open(*a, **k)))
    with pytest.raises(OSError):
        run.append_round(record)
    monkeypatch.undo()
    assert log.read_bytes() == before
    run.append_round({**record, "round": 4})
    assert run.damage == [] and [r.round for r in run.rounds()] == [1, 2, 3, 4]


def test_a_damaged_settings_file_falls_back_to_the_demo_data(copied, monkeypatch):
    store, *_ = copied
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    for content in (b"", b'{"data": ', b'["demo"]', b'{"data": {"ref": 3, "label": []}}'):
        (store.root / ".dashboard.json").write_bytes(content)
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        at.switch_page("views/data.py")
        at.run()
        assert not at.exception, (content, at.exception)
        at.switch_page("views/train.py")
        at.run()
        assert not at.exception, (content, at.exception)


# -- the dashboard with a damaged run in the store -------------------------------------------------
@pytest.fixture
def damaged_app(copied, monkeypatch):
    store, run, healthy = copied
    cut_in_half(run.path / "status.json")
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    monkeypatch.setenv("FEDCORE_MAX_JOBS", "1")
    return store, run, healthy


def open_page(page, run_id=None):
    return helpers.open_page(AppTest.from_file(APP, default_timeout=60), page, run_id)


def errors(at):
    return " ".join(e.value for e in at.error)


@pytest.mark.parametrize("name", ["x" * 5_000_000, "y" * 5_000])
def test_a_huge_name_written_into_the_store_is_shown_bounded_on_every_run_page(copied, monkeypatch, name):
    """The probe: a 5 MB run name written into identity.json made its pages take 66 s to over 180 s."""
    store, run, healthy = copied
    (run.path / "identity.json").write_text(json.dumps({"number": 1, "name": name, "tags": []}))
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = open_page("views/runs.py")
    names = list(at.dataframe[0].value["name"])
    assert max(map(len, names)) <= 80, [n[:100] for n in names]
    for page in ("views/feature_shifts.py", "views/run.py", "views/compare.py"):
        at = open_page(page, run.id)
        shown = " ".join(str(e.value) for e in [*at.markdown, *at.caption, *at.selectbox])
        assert "x" * 81 not in shown and "y" * 81 not in shown, page


def test_the_runs_page_lists_a_damaged_run_beside_the_others_and_says_what_is_wrong(damaged_app):
    store, run, healthy = damaged_app
    at = open_page("views/runs.py")
    table = at.dataframe[0].value
    states = dict(zip(table["run id"], table["state"]))
    assert states == {run.id: "damaged", healthy.id: "done"}
    row = list(table["run id"]).index(run.id)
    at.session_state["runs_table"] = {"selection": {"rows": [row], "columns": []}}
    at.run()
    assert not at.exception, at.exception
    assert "status.json: is not valid JSON" in errors(at)
    assert at.button(key="rerun").disabled is False  # its spec is sound: it can be trained again
    with_popover = [b for b in at.button if b.key == "confirm_delete"]
    assert with_popover, "a damaged run can be deleted"
    with_popover[0].click().run()
    assert not at.exception, at.exception
    assert [r.id for r in store.runs()] == [healthy.id]


def test_lens_and_details_pages_explain_a_damaged_run_and_still_show_the_others(damaged_app):
    store, run, healthy = damaged_app
    for page in ("views/feature_shifts.py", "views/run.py"):
        at = open_page(page, run.id)
        assert "records are damaged" in errors(at) and "status.json" in errors(at)
    at = open_page("views/run.py", healthy.id)
    assert not at.error and at.title[0].value == "Run details"
    assert len(at.dataframe) >= 1  # the healthy run's scores
    for page in ("views/site_weights.py", "views/site_similarity.py", "views/prototypes.py", "views/compare.py",
                 "views/train.py", "views/data.py"):
        open_page(page)


def test_a_lens_page_names_an_array_file_found_damaged_on_loading(copied, monkeypatch):
    store, run, _ = copied
    with_wrong_shape(run.path / LAST_ARRAYS)
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = open_page("views/feature_shifts.py", run.id)
    assert f"{LAST_ARRAYS}: 'b_in' has shape 8 x 3" in errors(at)


# -- run ids --------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["../outside", "..", ".", "/etc", "a/b", ".hidden", "", "x\x00y", "run\n", "~root",
                                 "..\\outside"])
def test_run_ids_that_are_not_plain_folder_names_are_refused(copied, bad, capsys, tmp_path):
    store, run, _ = copied
    outside = tmp_path / "outside"
    shutil.copytree(run.path, outside)  # a folder with a spec.json beside the store
    with pytest.raises(RunNotFound, match="not a path"):
        store.get(bad)
    code, out, err = cli_output(capsys, store, "show", bad)
    assert code == 2 and out == "" and "not a path" in err


def test_a_folder_outside_the_store_is_never_shown(copied, capsys, tmp_path):
    store, run, _ = copied
    outside = tmp_path / "outside"
    shutil.copytree(run.path, outside)
    (store.root / "linked").symlink_to(outside)  # a link in the store is not a run either
    assert "linked" not in {r.id for r in store.runs()}
    with pytest.raises(RunNotFound):
        store.get("linked")
    code, out, err = cli_output(capsys, store, "show", "../outside")
    assert code == 2 and "ifedavg" not in out + err
    code, out, err = cli_output(capsys, store, "show", str(outside))
    assert code == 2 and out == ""


def test_many_quick_creates_never_collide(tmp_path):
    store = RunStore(tmp_path / "runs")
    spec = {"algorithm": "fedavg", "data": "demo", "params": {}, "config": {"rounds": 1, "seed": 0}}
    created = [store.create(spec).id for _ in range(300)]
    assert len(set(created)) == 300
    assert {r.id for r in store.runs()} == set(created)
    assert all(Run(store.root / i).damage == [] for i in created[:20])
    assert not [p for p in store.root.iterdir() if p.name.startswith(".new-")]  # no staging left behind


def test_a_creation_killed_half_way_leaves_nothing_a_reader_sees_and_is_cleared_later(tmp_path):
    store = RunStore(tmp_path / "runs")
    store.root.mkdir()
    left = store.root / ".new-killed"
    left.mkdir()
    (left / "status.json").write_text('{"state": "queued"}')
    assert store.runs() == []
    store.create({"algorithm": "fedavg"})
    assert left.exists()  # a creation could still be under way
    os.utime(left, (time.time() - 7200, time.time() - 7200))
    store.create({"algorithm": "fedavg"})
    assert not left.exists() and len(store.runs()) == 2


def test_an_id_carries_at_least_32_random_bits():
    # Within one second every id differs only in its random part. Among 20,000 ids the pairs that
    # meet number n²/2 / 2^bits on average: 0.047 with 32 bits (more than 3 once in about 5·10⁶
    # tests), 12 with 24 bits (3 or fewer once in about 400), 3,000 with 16. Asking for none at all
    # failed once in about 350 runs with 32 bits (the birthday bound), which is no fault of the ids.
    ids = [new_run_id("fedavg") for _ in range(20_000)]
    suffixes = [i.rsplit("-", 1)[1] for i in ids]
    assert all(len(s) >= 8 and int(s, 16) >= 0 for s in suffixes)
    assert len(suffixes) - len(set(suffixes)) <= 3


def test_create_takes_another_id_when_its_first_choice_is_taken(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs")
    choices = iter(["20990101-000000-fedavg-00000000"] * 3 + ["20990101-000000-fedavg-00000001"])
    monkeypatch.setattr(store_module, "new_run_id", lambda algorithm: next(choices))
    first = store.create({"algorithm": "fedavg"})
    second = store.create({"algorithm": "fedavg"})
    assert (first.id, second.id) == ("20990101-000000-fedavg-00000000", "20990101-000000-fedavg-00000001")
    assert first.spec.run_id == first.id and second.spec.run_id == second.id


CONCURRENT_CREATES = textwrap.dedent("""
    import json, os, random, sys, time
    from pathlib import Path
    from fedcore import store as store_module

    # Both processes want one of the two lowest free numbers as their id, at the same moment:
    # about every other create is a race that exactly one of them must win.
    root, draw, draws = Path(sys.argv[1]), random.Random(os.getpid()), []
    def nearly_next_free(algorithm):
        draws.append(1)
        taken = {p.name for p in root.iterdir()}
        names = (f"20990101-000000-race-{k:08x}" for k in range(10**6))
        free = [name for name, _ in zip((n for n in names if n not in taken), range(2))]
        return draw.choice(free)
    store_module.new_run_id = nearly_next_free
    go = Path(sys.argv[2])
    go.with_name(f"ready-{os.getpid()}").touch()
    while not go.exists():
        time.sleep(0.001)
    made = [store_module.RunStore(sys.argv[1]).create({"algorithm": "race", "writer": os.getpid()}).id
            for _ in range(int(sys.argv[3]))]
    print(json.dumps({"pid": os.getpid(), "made": made, "draws": len(draws)}))
""")


def test_two_processes_creating_runs_at_once_never_share_an_id(tmp_path):
    root, go, each = tmp_path / "runs", tmp_path / "go", 150
    root.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [subprocess.Popen([sys.executable, "-c", CONCURRENT_CREATES, str(root), str(go), str(each)],
                                stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    deadline = time.time() + 120
    while len(list(tmp_path.glob("ready-*"))) < 2:  # both imported and waiting: then they start together
        assert time.time() < deadline and all(w.poll() is None for w in writers), "a writer did not start"
        time.sleep(0.01)
    go.touch()
    results = [json.loads(w.communicate(timeout=120)[0]) for w in writers]
    made = [(r["pid"], i) for r in results for i in r["made"]]
    assert len(made) == 2 * each and len({i for _, i in made}) == 2 * each
    for pid, run_id in made:  # each run holds the spec of the process that made it
        spec = json.loads((root / run_id / "spec.json").read_text())
        assert spec["writer"] == pid and spec["run_id"] == run_id
    assert sum(r["draws"] for r in results) > 2 * each  # they did collide, and took other ids
    assert not [p for p in root.iterdir() if p.name.startswith(".new-")]


# -- a full disk ---------------------------------------------------------------------------------
def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture
def queued(tmp_path):
    store = RunStore(tmp_path / "runs")
    return store, store.create(resolve_spec(QUICK))


def test_on_a_full_disk_the_failure_is_recorded_by_overwriting_the_status_in_place(queued, monkeypatch):
    # Every new file fails (the simulated disk has no block left); only in place writes work.
    store, run = queued
    monkeypatch.setattr(store_module, "atomic_write_bytes", no_space)
    with pytest.raises(OSError, match="No space left"):
        execute(run)
    monkeypatch.undo()
    fresh = store.get(run.id)  # another process's view: what is on disk
    assert fresh.status.state == "failed"
    assert "No space left on device" in fresh.status.error
    assert fresh.damage == [] or all(d.file != "status.json" for d in fresh.damage)


def test_on_a_full_disk_the_reserve_is_given_up_for_the_final_status(queued, monkeypatch):
    # The disk is full until the run's reserve is freed; no in-place write allowed.
    store, run = queued
    real_write = store_module.atomic_write_bytes

    def write_if_space(path, data):
        if (run.path / RESERVE).exists():
            no_space()
        real_write(path, data)

    monkeypatch.setattr(store_module, "atomic_write_bytes", write_if_space)
    monkeypatch.setattr(store_module, "_overwrite_in_place", no_space)
    with pytest.raises(OSError, match="No space left"):
        execute(run)
    monkeypatch.undo()
    fresh = store.get(run.id)
    assert fresh.status.state == "failed" and "No space left on device" in fresh.status.error
    assert fresh.damage == [] and not (run.path / RESERVE).exists()


def test_a_store_with_no_room_for_a_new_run_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(store_module, "_reserve_space", no_space)
    code, out, err = cli_output(capsys, RunStore(tmp_path / "runs"), "run", "-a", "fedavg", "--rounds", "1", "-q")
    assert code == 2 and "Cannot create a run" in err and "No space left on device" in err
    assert RunStore(tmp_path / "runs").runs() == []
    assert not [p for p in (tmp_path / "runs").iterdir() if p.name.startswith(".new-")]  # staging removed
    monkeypatch.setenv("FEDCORE_STORE", str(tmp_path / "runs"))
    at = open_page("views/runs.py")
    at.button[0].click().run()  # the one-click demo
    assert not at.exception and "No space left on device" in errors(at)


def test_a_final_status_the_disk_refuses_is_kept_and_written_once_space_returns(queued, monkeypatch):
    store, run = queued
    monkeypatch.setattr(store_module, "atomic_write_bytes", no_space)
    monkeypatch.setattr(store_module, "_overwrite_in_place", no_space)
    monkeypatch.setattr("application.runner.FINAL_STATUS_ATTEMPTS", 2)
    monkeypatch.setattr(time, "sleep", lambda s: None)
    with pytest.raises(OSError):
        execute(run)
    # Still pending: this process knows the error, the disk does not yet.
    assert run.status.state == "failed" and "No space left" in run.status.error
    assert store.get(run.id).raw_status().state == "queued"
    monkeypatch.undo()
    assert run.flush_status()
    assert store.get(run.id).status.state == "failed"
    assert "No space left" in store.get(run.id).status.error


def test_a_worker_that_cannot_record_its_end_says_so_in_its_log(queued, monkeypatch, capsys):
    store, run = queued
    run.update_status(state="running")
    monkeypatch.setattr(store_module, "atomic_write_bytes", no_space)
    monkeypatch.setattr(store_module, "_overwrite_in_place", no_space)
    assert run.mark_finished("failed", "OSError: [Errno 28] No space left on device") is False
    jobs._record_final_status(run)
    logged = capsys.readouterr().err
    assert "Could not record the final state" in logged
    assert "failed: OSError: [Errno 28] No space left on device" in logged


FULL_DISK = textwrap.dedent("""
    import errno, json, os, sys
    from pathlib import Path
    from application.runner import execute, resolve_spec
    from fedcore.store import RESERVE, RunStore, to_json

    disk = Path(sys.argv[1])
    store = RunStore(disk / "runs")
    spec = resolve_spec({"algorithm": "ifedavg", "config": {"rounds": 30, "eval_every": 1}})
    run = store.create(spec)
    reserve_before = (run.path / RESERVE).exists()

    def fill(round_, total, record):  # after round 2 the disk fills up, as a long run's would
        if round_ == 2:
            with open(disk / "filler", "wb") as handle:
                try:
                    while True:
                        handle.write(b"\\0" * 4096)
                        handle.flush()
                except OSError as error:
                    assert error.errno == errno.ENOSPC
    try:
        execute(run, fill)
        outcome = "finished"
    except OSError as error:
        outcome = f"raised errno {error.errno}"
    fresh = store.get(run.id)
    print(json.dumps({"outcome": outcome, "status": to_json(fresh.status), "reserve_before": reserve_before,
                      "reserve_after": (run.path / RESERVE).exists(),
                      "damage": [str(d) for d in fresh.damage], "rounds": len(fresh.rounds())}))
""")


def test_a_run_that_fills_a_real_disk_records_its_failure(tmp_path):
    """A 4 MB tmpfs in a private mount namespace (no root needed where user namespaces are
    allowed); skipped only where mounting is impossible."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    script = tmp_path / "full_disk.py"
    script.write_text(FULL_DISK)
    if not shutil.which("unshare"):
        pytest.skip("no unshare(1): cannot mount a small tmpfs")
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {mount_point}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.strip()}")
    command = (f"mount -t tmpfs -o size=4m tmpfs {mount_point} && "
               f"exec {sys.executable} {script} {mount_point}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["unshare", "-rm", "sh", "-c", command], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["outcome"] == f"raised errno {errno.ENOSPC}"
    assert result["status"]["state"] == "failed"
    assert "No space left on device" in result["status"]["error"]
    assert result["reserve_before"] and not result["reserve_after"]
    assert result["damage"] == [] and result["rounds"] >= 2  # what was recorded stays readable


# -- two writers, a killed worker, a damaged run in the queue ---------------------------------------
TWO_WRITERS = textwrap.dedent("""
    import sys
    from fedcore.store import Run
    run, who, n = Run(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    for i in range(n):
        run.append_round({"round": i, "sites": {who: {"f1": i / n}}, "mean": {"f1": 0.5}, "worst": {"f1": 0.1},
                          "algorithm": {"writer": who}})
        run.update_status(**{f"count_{who}": i + 1})
""")


def test_two_writers_on_one_run_lose_nothing(queued, tmp_path):
    store, run = queued
    n = 300
    writers = [subprocess.Popen([sys.executable, "-c", TWO_WRITERS, str(run.path), who, str(n)],
                                env={**os.environ, "PYTHONPATH": str(ROOT)}) for who in ("a", "b")]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]  # nothing stuck
    records = run.rounds()
    assert len(records) == 2 * n and run.damage == []
    for who in ("a", "b"):
        assert sorted(r.round for r in records if to_json(r)["algorithm"]["writer"] == who) == list(range(n))
    status = to_json(run.raw_status())  # fields of this test's own, as stored
    assert status["count_a"] == n and status["count_b"] == n  # no update lost to the other's
    assert status["state"] == "queued"


def test_deleting_a_run_while_its_worker_tidies_up_is_no_error(queued, monkeypatch):
    store, run = queued
    real_unlink = os.unlink

    def worker_first(path, *args, dir_fd=None, **kwargs):
        if str(path) == RESERVE:  # the finishing worker removes its reserve a moment earlier
            real_unlink(path, dir_fd=dir_fd)
        return real_unlink(path, *args, dir_fd=dir_fd, **kwargs)

    monkeypatch.setattr(os, "unlink", worker_first)
    run.mark_finished("cancelled", "Stopped by the user after round 0.")
    (run.path / RESERVE).write_bytes(b"\0")  # as if the worker had not removed it yet
    jobs.delete(store, run)
    assert not run.path.exists() and store.runs() == []


def wait_for(predicate, timeout=120.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("timed out")


def test_the_queue_carries_on_past_damaged_runs_and_a_killed_worker(copied, monkeypatch):
    store, damaged, healthy = copied
    monkeypatch.setenv("FEDCORE_MAX_JOBS", "1")
    cut_in_half(damaged.path / "status.json")
    broken_before = (damaged.path / "status.json").read_bytes()
    unstartable = store.create(resolve_spec(QUICK))
    (unstartable.path / "spec.json").write_text("{")  # queued, but its spec cannot be read
    try:
        doomed = jobs.submit(store, LONG)
        waiting = jobs.submit(store, QUICK)
        assert unstartable.status.state == "failed" and "spec.json" in unstartable.status.error
        wait_for(lambda: len(doomed.rounds()) >= 1)
        os.kill(doomed.raw_status().pid, signal.SIGKILL)
        wait_for(lambda: doomed.status.state == "interrupted")
        jobs.pump(store)  # e.g. the next page view
        wait_for(lambda: waiting.status.state == "done")
        assert doomed.raw_status().state == "interrupted" and doomed.damage == []
        assert (damaged.path / "status.json").read_bytes() == broken_before  # left as it was
        assert healthy.state == "done" and waiting.damage == []
    finally:
        for run in store.runs():
            jobs.cancel(run)
