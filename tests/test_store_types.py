"""Stored runs read as types: what the writers put on disk comes back from the store as Spec,
Status and Scores (with the round's typed algorithm record); a key the reader does not find is a
message of the store's, naming the run, the file and the key; runs written by earlier versions
read with the defaults the reader documents."""

from __future__ import annotations

import json
import shutil
from dataclasses import fields
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import helpers
from application.cli import main
from fedcore.injected import InjectedProblem, StampBox
from fedcore.records import FeatureShifts, Record, SiteSimilarity
from application.runner import execute, resolve_spec
from fedcore.shapes import Damage, RunDamaged
from fedcore.store import Run, RunStore, Scores, Spec, Status, StoredFederation, to_json

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Runs written by the current writers: iFedAvg (arrays, marks, a detection report) and
    FedHealth2 (a λ its page reads)."""
    store = RunStore(tmp_path_factory.mktemp("written") / "runs")
    ids = {}
    for algorithm in ("ifedavg", "fedhealth2"):
        run = store.create(resolve_spec({"algorithm": algorithm, "config": {"rounds": 2, "eval_every": 1}}))
        execute(run)
        ids[algorithm] = run.id
    return store.root, ids


@pytest.fixture
def copied(written, tmp_path):
    root, ids = written
    shutil.copytree(root, tmp_path / "runs")
    return RunStore(tmp_path / "runs"), ids


def stored(run: Run, name: str):
    text = (run.path / name).read_text()
    return [json.loads(line) for line in text.splitlines()] if name.endswith(".jsonl") else json.loads(text)


def declared(cls: type) -> set[str]:
    return {f.name for f in fields(cls)}


# -- the current format ---------------------------------------------------------------------------
def test_every_file_of_a_run_comes_back_as_the_values_its_writer_stored(copied):
    store, ids = copied
    run = store.get(ids["ifedavg"])
    assert run.damage == []
    spec, status, records, summary = run.spec, run.status, run.rounds(), run.summary
    raw_spec, raw_status, raw_rounds, raw_summary = (stored(run, name) for name in
                                                      ("spec.json", "status.json", "rounds.jsonl", "summary.json"))
    # every key a writer wrote is a field of its type (a renamed key would show here by its name)
    assert set(raw_spec) <= declared(Spec) and set(raw_status) <= declared(Status)
    assert all(set(r) <= declared(Scores) for r in raw_rounds) and set(raw_summary) <= declared(Scores)
    # ... and reads back as the value stored
    assert isinstance(spec, Spec) and {k: getattr(spec, k) for k in raw_spec} == raw_spec
    assert isinstance(status, Status) and {k: getattr(status, k) for k in raw_status} == raw_status
    assert spec.algorithm == "ifedavg" and spec.record == FeatureShifts.kind and spec.rounds == 2 and spec.seed == 0
    assert status.state == "done" and status.round == 2 and status.total_rounds == 2
    assert [r.round for r in records] == [1, 2] and summary.round == 2
    for record, raw in zip([*records, summary], [*raw_rounds, raw_summary]):
        typed_parts = ("algorithm", "detection")  # each checked below, as its type
        assert {k: getattr(record, k) for k in raw if k not in typed_parts} == {k: v for k, v in raw.items()
                                                                                if k not in typed_parts}
        assert isinstance(record.algorithm, FeatureShifts)  # the kind the spec names, typed
        assert record.algorithm.to_json() == raw["algorithm"]
    detection = summary.detection  # typed parts, as stored
    assert detection.stored == raw_summary["detection"] and detection.checkable == 4
    assert [(e.site, e.feature, e.caught) for e in detection.injected] == [
        (e["site"], e["feature"], e["caught"]) for e in raw_summary["detection"]["injected"]]
    assert [(f.site, f.layer, f.column) for f in detection.false_positives] == [
        (f["site"], f["layer"], f["column"]) for f in raw_summary["detection"]["false_positives"]]
    # the JSON form `show --json` prints is the stored one
    assert to_json(spec) == raw_spec and to_json(status) == raw_status and to_json(records[-1]) == raw_rounds[-1]
    # the kind of record follows the spec: FedHealth2's rounds hold its own
    assert isinstance(store.get(ids["fedhealth2"]).rounds()[-1].algorithm, SiteSimilarity)


def test_the_cli_shows_a_typed_run_as_before(copied, capsys):
    store, ids = copied
    assert main(["show", "--store", str(store.root), ids["ifedavg"], "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    run = store.get(ids["ifedavg"])
    assert report["spec"] == stored(run, "spec.json") and report["status"] == stored(run, "status.json")
    last = stored(run, "summary.json")
    assert report["final"] == {k: last[k] for k in ("round", "sites", "mean", "worst", "worst_site")}
    assert report["algorithm_record"] == last["algorithm"] and report["detection"] == last["detection"]
    assert main(["show", "--store", str(store.root), ids["ifedavg"]]) == 0
    text = capsys.readouterr().out
    assert "state      done" in text and "progress   round 2 of 2" in text and "seed 0" in text


# -- a key the reader does not find ---------------------------------------------------------------
def renamed(path: Path, key: str, line: int | None = None) -> None:
    """Rename a top-level key of a JSON file (or of one line of a JSON-lines log) to '<key>_renamed'."""
    if line is None:
        value = json.loads(path.read_text())
        value[f"{key}_renamed"] = value.pop(key)
        path.write_text(json.dumps(value))
        return
    lines = path.read_text().splitlines()
    value = json.loads(lines[line])
    value[f"{key}_renamed"] = value.pop(key)
    lines[line] = json.dumps(value)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(("name", "key"), [("spec.json", "algorithm"), ("spec.json", "config"),
                                           ("status.json", "state"), ("summary.json", "sites")])
def test_a_renamed_key_of_a_whole_file_is_named_by_the_reader(copied, capsys, name, key):
    store, ids = copied
    run = store.get(ids["ifedavg"])
    renamed(run.path / name, key)
    assert Damage(name, f"'{key}' is missing") in run.damage and run.state == "damaged"
    with pytest.raises(RunDamaged) as raised:
        run.require(name)
    assert str(raised.value) == f"Run {run.id}: {name}: '{key}' is missing"
    # the run is still listed, as damaged, beside the sound one
    assert main(["list", "--store", str(store.root), "--json"]) == 0
    rows = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[run.id]["state"] == "damaged" and f"{name}: '{key}' is missing" in rows[run.id]["damage"]
    assert rows[ids["fedhealth2"]]["state"] == "done"


def test_a_renamed_key_of_a_round_record_is_named_by_the_reader(copied):
    store, ids = copied
    run = store.get(ids["ifedavg"])
    renamed(run.path / "rounds.jsonl", "mean", line=0)
    assert run.damage == [Damage("rounds.jsonl", "line 1: 'mean' is missing (left out)")]
    assert [r.round for r in run.rounds()] == [2]  # the sound record stays


def test_a_parameter_a_page_needs_is_named_by_the_reader_and_shown_on_the_page(copied, monkeypatch):
    store, ids = copied
    run = store.get(ids["fedhealth2"])
    spec = stored(run, "spec.json")
    spec["params"]["lambda"] = spec["params"].pop("lam")
    (run.path / "spec.json").write_text(json.dumps(spec))
    with pytest.raises(RunDamaged, match=f"^Run {run.id}: spec.json: 'params.lam' is missing$"):
        run.spec.param("lam")
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = helpers.open_page(AppTest.from_file(APP, default_timeout=60), "views/site_similarity.py", run.id)
    assert not at.exception, at.exception
    assert "spec.json: 'params.lam' is missing" in " ".join(e.value for e in at.error)


@pytest.mark.parametrize("key", ["sites", "feature_names", "class_names"])
def test_a_renamed_key_of_federation_json_is_named_by_the_reader_and_shown_on_the_page(copied, monkeypatch, key):
    store, ids = copied
    run = store.get(ids["ifedavg"])
    assert isinstance(run.federation, StoredFederation) and run.federation.site_names == \
        [s["name"] for s in stored(run, "federation.json")["sites"]]
    renamed(run.path / "federation.json", key)
    # first the key; then what else no longer fits (ground truth naming sites the file has none of)
    assert [str(d).partition(";")[0] for d in run.damage] == [f"federation.json: '{key}' is missing"]
    assert run.state == "damaged"
    with pytest.raises(RunDamaged, match=f"^Run {run.id}: federation.json: '{key}' is missing"):
        run.require("federation.json")
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = helpers.open_page(AppTest.from_file(APP, default_timeout=60), "views/feature_shifts.py", run.id)
    assert f"federation.json: '{key}' is missing" in " ".join(e.value for e in at.error)


def test_ground_truth_and_preprocessing_come_back_typed(copied):
    store, ids = copied
    run = store.get(ids["ifedavg"])
    raw = stored(run, "federation.json")
    federation = run.federation
    # the demo's four problems, as the injection code recorded them
    assert [(g.site, g.feature, g.kind) for g in federation.ground_truth] == [
        ("Cedar Community", "age", "offset"), ("Elm Regional", "temperature", "unit"),
        ("Fir Valley", "confusion", "missing_not_at_random"), ("Oak District", None, "label_flip")]
    assert all(isinstance(g, InjectedProblem) for g in federation.ground_truth)
    assert [g.to_json() for g in federation.ground_truth] == raw["ground_truth"]
    assert [g.is_label_problem for g in federation.ground_truth] == [False, False, False, True]
    preprocessing = federation.preprocessing
    assert preprocessing.standardization == raw["preprocessing"]["standardization"]
    assert preprocessing.scales == raw["preprocessing"]["scales"] and preprocessing.units["temperature"] == "°C"
    assert federation.scales["Elm Regional"]["temperature"].unit == "°C"
    assert federation.flower is None and to_json(federation) == raw  # `show --json`: as stored


def test_an_injected_problem_keeps_every_particular_through_its_stored_form():
    stamp = InjectedProblem("s1", None, "stamp", "a smiley", label="pneumonia", box=StampBox(1, 1, 7))
    column = InjectedProblem("s2", "thal=3", "missing_not_at_random", "thal only for 'disease'", label="disease",
                             column="thal", features=("thal=3", "thal=6"))
    swap = InjectedProblem("s3", "age", "swapped_columns", "columns age and chol swapped", other="chol")
    for problem in (stamp, column, swap):
        assert InjectedProblem.from_json(json.loads(json.dumps(problem.to_json()))) == problem
    assert stamp.to_json() == {"site": "s1", "feature": None, "kind": "stamp", "detail": "a smiley",
                               "class": "pneumonia", "box": {"row": 1, "col": 1, "size": 7}}
    assert stamp.box.region == (1, 8, 1, 8)


def planted(run: Run, change) -> None:
    description = stored(run, "federation.json")
    change(description)
    (run.path / "federation.json").write_text(json.dumps(description))


def renamed_in(mapping: dict, key: str) -> None:
    mapping[f"{key}_renamed"] = mapping.pop(key)


RENAMED_IN_FEDERATION = {
    # a key every ground-truth entry has; 'feature' read as absent would make an offset a label problem
    **{f"ground_truth {key}": (lambda d, key=key: renamed_in(d["ground_truth"][1], key),
                               f"'ground_truth[1].{key}' is missing") for key in ("site", "feature", "kind", "detail")},
    "ground_truth stamp box": (lambda d: d["ground_truth"][0].update(box={"row": 1, "column": 1, "size": 7}),
                               "'ground_truth[0].box.col' is missing"),
    # a feature of a site's scales: the page would show that feature without its units
    "preprocessing scales feature": (lambda d: renamed_in(d["preprocessing"]["scales"]["Elm Regional"], "temperature"),
                                     "'preprocessing.scales.Elm Regional.temperature_renamed' names no feature"),
    "preprocessing scales site": (lambda d: renamed_in(d["preprocessing"]["scales"], "Elm Regional"),
                                  "'preprocessing.scales.Elm Regional_renamed' names no site"),
    "preprocessing standardization": (lambda d: d["preprocessing"].update(standardization=["site"]),
                                      "'preprocessing.standardization' should be text, not a list"),
    "flower superlink": (lambda d: d.update(flower={"superlink_renamed": "127.0.0.1:9093", "sites": {}}),
                         "'flower.superlink' is missing"),
}


@pytest.mark.parametrize(("key", "path"), [("checkable", "'detection.checkable'"),
                                           ("caught", "'detection.injected[0].caught'"),
                                           ("site", "'detection.injected[0].site'")])
def test_a_renamed_key_of_a_detection_report_is_named_by_the_reader(copied, key, path):
    """summary.json's detection report reads as typed parts; one of its keys renamed, the reader
    names it and the summary is not read (the CLI's report never meets a KeyError)."""
    store, ids = copied
    run = store.get(ids["ifedavg"])
    summary = stored(run, "summary.json")
    renamed_in(summary["detection"] if key == "checkable" else summary["detection"]["injected"][0], key)
    (run.path / "summary.json").write_text(json.dumps(summary))
    assert Damage("summary.json", f"{path} is missing") in run.damage
    assert run.summary is None


@pytest.mark.parametrize("fault", RENAMED_IN_FEDERATION)
def test_a_renamed_key_inside_federation_json_is_named_by_the_reader_not_a_page(copied, monkeypatch, fault):
    store, ids = copied
    run = store.get(ids["ifedavg"])
    change, message = RENAMED_IN_FEDERATION[fault]
    if fault == "ground_truth stamp box":  # the demo has no stamp: give its first problem one
        planted(run, lambda d: d["ground_truth"][0].update(kind="stamp", box={"row": 1, "col": 1, "size": 7}))
        assert run.damage == [] and run.federation.ground_truth[0].box == StampBox(1, 1, 7)
    planted(run, change)
    assert len(run.damage) == 1 and str(run.damage[0]).startswith("federation.json: ") \
        and message in str(run.damage[0]), run.damage
    assert run.state == "damaged"
    with pytest.raises(RunDamaged, match=f"^Run {run.id}: federation.json: "):
        run.require("federation.json")
    # the reader keeps what fits: no entry without its keys reaches a lens
    federation = run.federation
    assert all(isinstance(g, InjectedProblem) for g in federation.ground_truth)
    if fault.startswith("ground_truth"):
        assert federation.ground_truth == ()
    monkeypatch.setenv("FEDCORE_STORE", str(store.root))
    at = helpers.open_page(AppTest.from_file(APP, default_timeout=60), "views/feature_shifts.py", run.id)
    assert not at.exception, at.exception
    assert message in " ".join(e.value for e in at.error)


@pytest.mark.parametrize("key", ["superlink", "wait_s", "round_timeout_s", "server_data"])
def test_a_renamed_key_of_a_flower_reference_is_named_by_the_reader_not_the_server(tmp_path, key):
    from application.flower.server import serve

    store = RunStore(tmp_path)
    run = store.create(resolve_spec({"algorithm": "fedavg", "data": "flower:127.0.0.1:9,sites=3,wait_s=30"}))
    reference = run.spec.flower
    assert (reference.superlink, reference.sites, reference.wait_s, reference.round_timeout_s,
            reference.server_data) == ("127.0.0.1:9", 3, 30.0, 600.0, None)
    assert run.damage == [] and run.spec.data == reference.to_json()
    spec = stored(run, "spec.json")
    spec["data"][f"{key}_renamed"] = spec["data"].pop(key)
    (run.path / "spec.json").write_text(json.dumps(spec))
    message = f"spec.json: 'data.{key}' is missing"
    assert [str(d) for d in run.damage] == [message] and run.state == "damaged"
    with pytest.raises(RunDamaged, match=f"^Run {run.id}: {message}$"):
        run.spec.flower
    # the server stops at the reader, before it waits for a site, and records why
    with pytest.raises(RunDamaged, match=message):
        serve(sites=None, run=run, flower_run_id=0)
    assert run.status.state == "failed" and run.status.error == f"Run {run.id}: {message}"


def test_a_spec_whose_data_are_elsewhere_has_no_flower_reference(copied):
    store, ids = copied
    with pytest.raises(RunDamaged, match="spec.json: 'data' is no Flower reference"):
        store.get(ids["ifedavg"]).spec.flower


def parameters_pages_read() -> dict[str, set[str]]:
    """Every parameter name a page or presenter asks a spec for (`spec.param("name")`, and the
    run label's switches), by the file that asks."""
    import ast

    from dashboard.presenters.record_tables import SWITCHES

    asked = {"dashboard/presenters/record_tables.py": set(SWITCHES)}
    for path in [*ROOT.glob("views/*.py"), *ROOT.glob("dashboard/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "param"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                asked.setdefault(str(path.relative_to(ROOT)), set()).add(node.args[0].value)
    return asked


def test_every_parameter_a_page_reads_is_one_an_algorithm_declares():
    """A parameter renamed in its algorithm's declaration fails here, naming the page that still
    asks for the old name (the pages read stored specs without loading the algorithms)."""
    from fedcore.algorithms import REGISTRY

    declared = {f.name for algorithm in REGISTRY.values() for f in fields(algorithm.Params)}
    asked = parameters_pages_read()
    assert {"lam", "variant", "weight_rule", "local_f_out", "box_percentile"} <= set().union(*asked.values())
    unknown = {page: sorted(names - declared) for page, names in asked.items() if names - declared}
    assert not unknown, f"pages ask for parameters no algorithm declares: {unknown}"


# -- runs written by earlier versions ------------------------------------------------------------
def an_earlier_run(store: RunStore, algorithm: str) -> Run:
    """A finished run as fedcore wrote it before specs named their record kind and statuses and
    records carried the later fields: only the keys the earliest writers wrote."""
    path = store.root / f"20250101-000000-{algorithm}-0000aaaa"
    path.mkdir(parents=True)
    (path / "spec.json").write_text(json.dumps({"algorithm": algorithm, "data": "demo", "params": {},
                                                "config": {"rounds": 1, "seed": 3}}))
    (path / "status.json").write_text(json.dumps({"state": "done"}))
    scores = {"round": 1, "sites": {"a": {"f1": 0.5}}, "mean": {"f1": 0.5}, "worst": {"f1": 0.5}}
    (path / "rounds.jsonl").write_text(json.dumps(scores) + "\n")
    (path / "summary.json").write_text(json.dumps(scores))
    (path / "federation.json").write_text(json.dumps({"sites": [{"name": "a"}], "feature_names": [],
                                                      "class_names": ["no", "yes"]}))
    return store.get(path.name)


def test_an_earlier_run_reads_with_the_readers_documented_defaults(tmp_path, capsys):
    store = RunStore(tmp_path)
    run = an_earlier_run(store, "ifedavg")
    assert run.damage == [] and run.state == "done"
    spec, status, (record,), summary = run.spec, run.status, run.rounds(), run.summary
    assert spec.record == FeatureShifts.kind  # the kind its algorithm recorded then
    assert spec.disclosure is None and spec.version is None and spec.run_id is None
    assert (status.round, status.recorded_round, status.total_rounds, status.error) == (0, 0, None, None)
    assert status.mean == {} and status.worst == {} and status.device is None
    assert record.worst_site == {} and record.elapsed_s is None and record.train_loss == {}
    assert record.algorithm == FeatureShifts() and (record.algorithm.n_sd, record.algorithm.sd_floor,
                                                     record.algorithm.rule) == (2.0, 0.05, "sd")
    assert summary.detection is None
    assert {an_earlier_run(store, a).spec.record for a in ("indisco-gm", "apfl", "fedavg")} == \
           {"prototypes", "mixture", "none"}
    assert isinstance(store.get("20250101-000000-fedavg-0000aaaa").rounds()[0].algorithm, Record)
    # the command line shows it as it did
    assert main(["show", "--store", str(store.root), run.id]) == 0
    text = capsys.readouterr().out
    assert "progress   round 0 of ?" in text and "device     ?" in text and "seed 3" in text
    assert main(["show", "--store", str(store.root), run.id, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == {"state": "done"} and report["spec"]["record"] == FeatureShifts.kind
