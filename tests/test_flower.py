"""Real federations over Flower: the server and site code give what the in-process engine gives.

Most tests run the Flower server (`application.flower.server`) and the sites' answers
(`application.flower.site`) in this process, the messages handed over directly, so every algorithm
is checked quickly. `test_loopback_deployment...` runs the real thing: a SuperLink and two
SuperNodes as processes on 127.0.0.1, the run launched as a user launches it (marked `deployment`:
`make test-deployment` and CI run it, `make test` does not).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from flwr.app import ConfigRecord, MessageType, RecordDict

from data_adapters import flower_reference, load_federation
from fedcore.algorithms import REGISTRY
from application.flower.eligibility import runs_over_flower
from fedcore.algorithms import build_algorithm
from fedcore.engine import Simulation, TrainConfig
from fedcore.errors import DataError, FedcoreError, SpecError
from fedcore.interpret import checks
from application.flower import protocol, site
from application.flower.launch import descendants
from application.flower.server import Node, serve, server_federation
from application.runner import resolve_spec
from fedcore.store import Run, RunStore

ROOT = Path(__file__).resolve().parents[1]
DEMO_SITES = ("Alder General", "Cedar Community", "Elm Regional")
SERVER_DATA = "demo:site=Pine County"
TOLERANCE = 1e-5


class InProcessSites:
    """The sites answered by `application.flower.site` in this process, each with its own node config
    and state between rounds: the server and site code without Flower's transport."""

    def __init__(self, node_configs: list[dict]) -> None:
        self.node_configs = node_configs
        self.states = [RecordDict() for _ in node_configs]
        self.asked: list[str] = []  # the kinds of the messages exchanged, in order

    def connect(self, wanted: int, wait_s: float) -> list[Node]:
        assert wanted == len(self.node_configs)
        return [Node(k, f"node {k}") for k in range(len(self.node_configs))]

    def exchange(self, nodes, contents, kind, round_, timeout):
        self.asked.append(kind)
        replies = []
        for node, content in zip(nodes, contents):
            config = self.node_configs[node.node_id]
            seed = protocol.read_json(content[protocol.SPEC])["config"]["seed"]
            federation = site.load_site(config, seed, protocol.read_pooled(content))
            replies.append(site.answer(kind, federation, config, self.states[node.node_id], content))
        return replies


def demo_nodes(names=DEMO_SITES, **extra) -> list[dict]:
    return [{"site": name, "data": f"demo:site={name}", **extra} for name in names]


def flower_run(tmp_path: Path, algorithm: str, params: dict, config: dict, nodes: list[dict],
               server_data: str | None = None, sites: InProcessSites | None = None) -> Run:
    data = {"source": "flower", "superlink": "127.0.0.1:9", "sites": len(nodes), "server_data": server_data}
    spec = resolve_spec({"algorithm": algorithm, "data": data, "params": params, "config": config})
    run = RunStore(tmp_path / "runs").create(spec)
    run.mark_started(spec["config"]["rounds"])
    serve(sites or InProcessSites(nodes), run, flower_run_id=0)
    return run


def simulated(run: Run) -> Simulation:
    """The same run in the in-process engine, site by site, on the same demo sites."""
    spec = run.spec
    names = run.federation.site_names
    demo = load_federation("demo", spec.seed)
    federation = replace(demo, sites=[s for s in demo.sites if s.name in names])
    if spec.data["server_data"]:
        own = load_federation(spec.data["server_data"], spec.seed).sites[0]
        federation.server_test = (torch.cat([own.x_train, own.x_test]), torch.cat([own.y_train, own.y_test]))
    config = TrainConfig(**{**spec.config, "execution": "per-site"})
    sim = Simulation(federation, build_algorithm(spec.algorithm, spec.params), config)
    sim.history = sim.run()
    return sim


def largest_differences(run: Run, sim: Simulation) -> dict[str, float]:
    """Max |Flower - in-process| over the final shared weights, the last round's recorded arrays,
    and every round's per-site hold-out loss."""
    model = run.load_model()
    assert sorted(model) == sim.shared_names
    last = run.array_rounds()[-1] if run.array_rounds() else None
    _, ours = sim.algorithm.record(sim)
    theirs = run.load_arrays(last) if last else {}
    assert sorted(theirs) == sorted(ours)
    losses = [abs(a.sites[name]["loss"] - b["sites"][name]["loss"])
              for a, b in zip(run.rounds(), sim.history, strict=True) for name in sim.site_names]
    return {
        "shared": max([float(np.abs(sim.stacked[n].numpy() - model[n]).max()) for n in model] or [0.0]),
        "recorded": max([float(np.abs(np.asarray(ours[k], float) - theirs[k]).max()) for k in ours] or [0.0]),
        "loss": max(losses),
    }


# Every algorithm whose declared needs a Flower federation can meet, with settings that meet them.
FLOWER_ALGORITHMS = sorted(name for name, cls in REGISTRY.items() if runs_over_flower(cls))
FLOWER_PARAMS = {
    "ifedavg": {"local_f_out": True},
    "fedprox": {"mu": 0.5},
    "adafed": {"server_test": "given", "weight_rule": "power"},
    "fedhealth2": {"variant": "f", "warmup_rounds": 1},
    "apfl": {"alpha": 0.3},
}


def test_flower_runs_the_algorithms_whose_needs_it_meets():
    """Eligibility follows from `Algorithm.needs`: no rows at the server, images not carried."""
    assert {"fedavg", "ifedavg", "fedbn", "fedprox", "adafed", "fedhealth2", "fedper", "local", "apfl"} == set(
        FLOWER_ALGORITHMS)
    for name in sorted(set(REGISTRY) - set(FLOWER_ALGORITHMS)):
        with pytest.raises(SpecError, match="simulated only"):
            resolve_spec({"algorithm": name, "data": "flower:127.0.0.1:9093"})


@pytest.mark.parametrize("algorithm", FLOWER_ALGORITHMS)
def test_every_flower_algorithm_trains_what_the_engine_trains(tmp_path, algorithm):
    settings = {"rounds": 3, "local_epochs": 2, "seed": 4, **REGISTRY[algorithm].config_defaults}
    server_data = SERVER_DATA if algorithm == "adafed" else None
    run = flower_run(tmp_path, algorithm, FLOWER_PARAMS.get(algorithm, {}), settings, demo_nodes(), server_data)
    assert run.status.state == "done"
    assert run.federation.site_names == sorted(DEMO_SITES)
    assert [r.round for r in run.rounds()] == [1, 2, 3]
    differences = largest_differences(run, simulated(run))
    assert max(differences.values()) < TOLERANCE, differences


def test_fedhealth2_weights_come_from_statistics_sent_once(tmp_path):
    run = flower_run(tmp_path, "fedhealth2", {"variant": "f", "warmup_rounds": 2}, {"rounds": 3},
                     demo_nodes())
    records = run.rounds()
    assert records[0].algorithm.weights_from_round is None
    assert records[-1].algorithm.weights_from_round == 2
    weights = run.load_arrays(3)["weights"]
    assert weights.shape == (3, 3) and np.allclose(weights.sum(1), 1)
    # each site received its own personalised model: the rows of the shared weights differ
    assert not np.allclose(run.load_model()["head.weight"][0], run.load_model()["head.weight"][1])


def test_a_site_that_keeps_its_local_layers_sends_none_of_them(tmp_path):
    nodes = demo_nodes()
    nodes[1]["share-local"] = False
    run = flower_run(tmp_path, "ifedavg", {}, {"rounds": 2}, nodes)
    assert run.array_rounds() == []
    note = run.rounds()[-1].algorithm
    assert note.withheld == ["Cedar Community"] and "share-local=false" in note.note

    spec = {"algorithm": "ifedavg", "params": {}, "config": TrainConfig(rounds=2).to_dict()}
    content = RecordDict({protocol.SPEC: protocol.json_record(spec),
                          protocol.ROUND: ConfigRecord({"round": 2, "lr": 0.002, "evaluate": False}),
                          protocol.MODEL: protocol.array_record({})})
    federation = site.load_site(nodes[1], 0)
    sent = protocol.read_tensors(site.train(federation, nodes[1], RecordDict(), content)[protocol.MODEL])
    assert "f_in.b" not in sent and "f_in.w" not in sent and "head.weight" in sent
    shared = protocol.read_tensors(site.train(federation, nodes[0], RecordDict(), content)[protocol.MODEL])
    assert "f_in.b" in shared  # a site that shares (the default) sends them at evaluated rounds


def test_a_site_reads_its_own_csv_file_under_its_own_name():
    path = ROOT / "assets" / "sample_sites" / "synthetic_north_clinic.csv"
    federation = site.load_site({"site": "North", "data": str(path), "target": "diabetes"}, seed=1)
    assert federation.site_names == ["North"]
    reference = {"source": "csv", "files": [str(path)], "target": "diabetes", "site_names": ["North"]}
    same = load_federation(reference, 1).sites[0]
    assert torch.equal(federation.sites[0].x_train, same.x_train)
    assert torch.equal(federation.sites[0].y_test, same.y_test)


@pytest.mark.parametrize("node_config, message", [
    ({"site": "North"}, "names no data"),
    ({"site": "North", "data": "north.csv"}, "target column"),
    ({"data": "demo"}, "holds the sites .* say which one"),
    ({"site": "Nowhere", "data": "demo:site=Alder General"}, "site 'Nowhere', but .* holds Alder General"),
])
def test_a_site_with_a_wrong_node_config_is_told_what_is_wrong(node_config, message):
    with pytest.raises(DataError, match=message):
        site.load_site(node_config, 0)


def test_sites_that_cannot_train_one_model_are_refused_by_name():
    def description(name, features):
        return {"site": {"name": name, "n_train": 10}, "feature_names": features, "feature_kinds": ["continuous"] * 2,
                "class_names": ["a", "b"], "name": "x", "description": "", "synthetic": True, "ground_truth": [],
                "warnings": [], "preprocessing": {}}

    reference = flower_reference("flower:127.0.0.1:9")
    with pytest.raises(DataError, match="'North' and 'South' cannot train one model: features differ "
                                        r"\(only the first: \['bmi'\]; only the second: \['BMI'\]\)"):
        server_federation([description("North", ["age", "bmi"]), description("South", ["age", "BMI"])], reference, 0)
    with pytest.raises(DataError, match="Several SuperNodes call their site North"):
        server_federation([description("North", ["age", "bmi"])] * 2, reference, 0)


def test_the_dashboard_shows_flower_runs_like_any_run(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    lenses = {
        "views/feature_shifts.py": flower_run(tmp_path, "ifedavg", {}, {"rounds": 2}, demo_nodes()),
        "views/site_weights.py": flower_run(tmp_path, "adafed", {"server_test": "given"}, {"rounds": 2}, demo_nodes(),
                                            SERVER_DATA),
        "views/site_similarity.py": flower_run(tmp_path, "fedhealth2", {"variant": "f", "warmup_rounds": 1},
                                               {"rounds": 2}, demo_nodes()),
    }
    monkeypatch.setenv("FEDCORE_STORE", str(tmp_path / "runs"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for page, run in lenses.items():
        at.run()
        at.query_params["run"] = run.id
        at.switch_page(page)
        at.run()
        assert not at.exception, (page, at.exception)
        charts = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
        assert charts, page
        assert any("Cedar Community" in json.dumps(chart["data"]) for chart in charts), page  # the sites' own names
        if page == "views/feature_shifts.py":  # the data behind a cell stayed at the sites
            assert any("every row stayed at its site" in info.value for info in at.info)


@pytest.mark.parametrize("raw, message", [
    ({"algorithm": "centralized", "data": "flower:127.0.0.1:9093"}, "runs simulated only"),
    ({"algorithm": "adafed", "data": "flower:127.0.0.1:9093"}, "server_test to 'given'"),
    ({"algorithm": "adafed", "data": "flower:127.0.0.1:9093", "params": {"server_test": "given"}},
     "give the server's data as server_data"),
    ({"algorithm": "fedhealth2", "data": "flower:127.0.0.1:9093"}, "variant 'f'"),
    ({"algorithm": "fedavg", "data": "flower:localhost"}, "HOST:PORT"),
    ({"algorithm": "fedavg", "data": "flower:127.0.0.1:9093,site=3"}, "no option site"),
])
def test_flower_runs_that_cannot_work_are_refused_before_they_start(raw, message):
    with pytest.raises(SpecError, match=message):
        resolve_spec(raw)


def test_a_flower_reference_in_text_and_object_form():
    text = flower_reference("flower:10.0.0.5:9093,sites=8,wait_s=30")
    assert text == flower_reference({"source": "flower", "superlink": "10.0.0.5:9093", "sites": 8, "wait_s": 30})
    assert (text.superlink, text.sites, text.wait_s, text.round_timeout_s, text.server_data) == \
        ("10.0.0.5:9093", 8, 30.0, 600.0, None)
    # the object form a spec stores: every key, the source first
    assert text.to_json() == {"source": "flower", "superlink": "10.0.0.5:9093", "sites": 8, "wait_s": 30.0,
                              "round_timeout_s": 600.0, "server_data": None}


# -- the real deployment: a SuperLink and two SuperNodes, each its own process ------------------------
# Two sites, the two the demo shifted: every message a SuperNode receives starts a ClientApp process
# (about 4 s of imports each here), and a third site added a third of this test's time (about 40 s)
# and nothing it checks.
LOOPBACK_SITES = ("Cedar Community", "Elm Regional")


@pytest.fixture(scope="module")
def loopback(tmp_path_factory):
    from application.flower.launch import Loopback

    with Loopback(demo_nodes(LOOPBACK_SITES), tmp_path_factory.mktemp("flower"), env={"OMP_NUM_THREADS": "1"}) as deployment:
        yield deployment
    assert all(process.poll() is not None for process in deployment.started)
    assert not [pid for process in deployment.started for pid in descendants(process.pid)]


# Rounds per run. Each message a SuperNode receives starts a ClientApp process (about 5 s of imports),
# so a round costs two per site. What a site keeps between rounds in Flower's state (its own layers,
# its optimiser's momentum) comes back through one code path for every algorithm: iFedAvg's second
# round checks it (dropping the momentum fails the comparison), so FedAvg runs one.
LOOPBACK_ROUNDS = {"ifedavg": 2, "fedavg": 1}


def launch(loopback, store: Path, algorithm: str) -> subprocess.Popen:
    """`python -m fedcore run --data flower:ADDRESS ...`, as a user launches a Flower run."""
    env = {**os.environ, "FEDCORE_STORE": str(store), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "fedcore", "run", "-a", algorithm, "--data", f"flower:{loopback.address},sites={len(LOOPBACK_SITES)}",
         "--rounds", str(LOOPBACK_ROUNDS[algorithm]), "--seed", "5", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )


def finished_run(loopback, store: Path, algorithm: str, process: subprocess.Popen) -> Run:
    try:
        _, stderr = process.communicate(timeout=240)
    finally:
        process.kill()
    assert process.returncode == 0, stderr[-3000:] + loopback.log("superlink")
    (run,) = [r for r in RunStore(store).runs() if r.spec.algorithm == algorithm]
    return run


@pytest.mark.deployment  # `make test-deployment` and CI; about 150 s of a 2-core `make test` otherwise
def test_loopback_deployment_trains_like_the_engine_and_records_the_run(loopback, tmp_path):
    # Two runs at once on the same SuperLink: each SuperNode serves both.
    launched = {algorithm: launch(loopback, tmp_path / algorithm, algorithm) for algorithm in ("ifedavg", "fedavg")}
    runs = {algorithm: finished_run(loopback, tmp_path / algorithm, algorithm, process)
            for algorithm, process in launched.items()}
    run = runs["ifedavg"]
    assert run.status.state == "done"
    federation = run.federation
    assert federation.site_names == sorted(LOOPBACK_SITES)  # from the node configs
    assert federation.synthetic and {g.site for g in federation.ground_truth} == {"Cedar Community",
                                                                                          "Elm Regional"}
    assert [r.round for r in run.rounds()] == [1, 2]
    assert set(run.rounds()[-1].sites) == set(LOOPBACK_SITES)
    arrays = run.load_arrays(2)
    assert arrays["b_in"].shape == (2, 12) and arrays["w_in"].shape == (2, 12) and "b_in_O" in arrays
    differences = largest_differences(run, simulated(run))
    print(f"\niFedAvg over Flower vs in-process: {json.dumps(differences)}")
    assert max(differences.values()) < TOLERANCE, differences

    run = runs["fedavg"]
    assert run.status.state == "done" and [r.round for r in run.rounds()] == [1]
    differences = largest_differences(run, simulated(run))
    print(f"FedAvg over Flower vs in-process: {json.dumps(differences)}")
    assert max(differences.values()) < TOLERANCE, differences


def test_a_flower_run_that_cannot_start_fails_with_the_reason(tmp_path):
    from application.runner import execute

    spec = resolve_spec({"algorithm": "fedavg", "data": "flower:127.0.0.1:9,sites=2,wait_s=5", "config": {"rounds": 1}})
    run = RunStore(tmp_path).create(spec)
    with pytest.raises(FedcoreError):
        execute(run)
    assert run.status.state == "failed" and run.status.error


def test_each_site_sends_its_profile_and_the_server_stores_the_federations(tmp_path):
    """The check-up's data lens over Flower: every site computes its own federated statistics and
    sends them (no rows); the server's stored profile is the one the simulation computes, to the
    last bit (what the Data page computes from the same files)."""
    from fedcore.interpret.profile import Profile

    run = flower_run(tmp_path, "fedavg", {}, {"rounds": 1}, demo_nodes())
    with np.load(run.path / "profile.npz", allow_pickle=False) as data:
        stored = Profile.from_npz(data)
    demo = load_federation("demo", 0).profile
    order = [demo.sites.index(name) for name in stored.sites]
    assert stored.sites == sorted(DEMO_SITES) and stored.features == demo.features
    for name, value in demo.arrays.items():
        assert np.array_equal(stored.arrays[name], value[order], equal_nan=True), name


@pytest.mark.parametrize("standardization", ["site", "federated"])
def test_a_site_sends_its_profile_with_its_description_unless_it_awaits_the_pooled_values(
        messy_sites, tmp_path, standardization):
    """One message, and at a real site one ClientApp process, fewer per site and run: a site whose
    statistics need nothing from the server sends them with its description; sites that standardise
    'federated' are asked once the pooled mean and SD are known. Either way the server stores them."""
    files, dictionary = messy_sites
    nodes = federated_nodes(files, dictionary, standardization)
    sites = InProcessSites(nodes)
    run = flower_run(tmp_path, "fedavg", {}, {"rounds": 1}, nodes, sites=sites)
    assert run.status.state == "done", run.status
    questions = ([protocol.DESCRIBE] if standardization == "site" else [protocol.DESCRIBE, protocol.PROFILE_QUERY])
    assert sites.asked == [*questions, MessageType.TRAIN, MessageType.EVALUATE]
    assert (run.path / "profile.npz").exists()


def test_a_site_can_keep_its_profile_to_itself(tmp_path):
    nodes = demo_nodes()
    nodes[0]["share-profile"] = "false"
    run = flower_run(tmp_path, "fedavg", {}, {"rounds": 1}, nodes)
    assert run.status.state == "done" and not (run.path / "profile.npz").exists()


# -- federated standardisation: counts, sums and sums of squares, pooled at the server ----------------
@pytest.fixture(scope="module")
def messy_sites(tmp_path_factory):
    """The messy exports (tests/messy_exports.py) and their drafted data dictionary."""
    from data_adapters import draft_dictionary
    from data_adapters.mapping.dictionary import dictionary_bytes
    from tests.messy_exports import write_messy_exports

    folder = tmp_path_factory.mktemp("messy")
    files = [str(p) for p in write_messy_exports(folder)]
    dictionary = folder / "study.dictionary.json"
    dictionary.write_bytes(dictionary_bytes(draft_dictionary({"source": "csv", "files": files, "target": "outcome"})))
    return files, str(dictionary)


def federated_nodes(files, dictionary, standardization="federated"):
    return [{"site": Path(f).stem, "data": f"csv:{f},target=outcome,dictionary={dictionary},"
                                           f"standardization={standardization}"} for f in files]


def test_flower_sites_send_sums_and_standardise_with_the_server_pooled_mean_and_sd(messy_sites, tmp_path):
    files, dictionary = messy_sites
    seed = 3
    nodes = federated_nodes(files, dictionary)
    # the message functions: each site's sums, pooled at the server ...
    spec = RecordDict({protocol.SPEC: protocol.json_record({"config": {"seed": seed, "device": "cpu"}})})
    sums = [site.answer(protocol.DESCRIBE, site.load_site(n, seed), n, RecordDict(), spec) for n in nodes]
    total = sum(protocol.read_arrays(reply[protocol.SUMS])["sums"] for reply in sums)
    kinds = protocol.read_json(sums[0][protocol.SITE])["feature_kinds"]
    from data_adapters import pooled_from_sums, standardization_sums
    pooled = pooled_from_sums(total, kinds)
    # ... are the mean and population SD of all sites' training rows, computed here from the rows: exactly
    # from sums as computed, and within the sites' rounding from the sums their disclosure policy releases
    whole = load_federation({"source": "csv", "files": files, "target": "outcome", "dictionary": dictionary,
                             "standardization": "none"}, seed)
    chol = whole.feature_names.index("chol")
    per_site = [np.asarray(s.x_train[:, chol]) for s in whole.sites]
    rows = np.concatenate(per_site)  # missing rows hold 0 here
    assert set(pooled) == {j for j, k in enumerate(whole.feature_kinds) if k == "continuous"}
    observed = rows[rows != 0]  # 'none' encodes a missing continuous value as 0; no real cholesterol is 0
    exact = pooled_from_sums(sum(standardization_sums(site.site_reference(n), seed, None)[1] for n in nodes), kinds)
    assert exact[chol][0] == pytest.approx(observed.mean(), rel=1e-6)  # (the tensors hold 32-bit floats)
    assert exact[chol][1] == pytest.approx(observed.std(), rel=1e-6)
    # each site's sum is rounded to half its standard error (sqrt(n) SDs): the mean moves by at most a quarter of it
    rounding = sum(0.25 * np.sqrt(len(v[v != 0])) * v[v != 0].std(ddof=1) for v in per_site) / len(observed)
    assert 0 < abs(pooled[chol][0] - observed.mean()) <= rounding
    # a site standardised with them holds what the simulation's federated standardisation gives it
    simulated_ = load_federation({"source": "csv", "files": files, "target": "outcome", "dictionary": dictionary,
                                  "standardization": "federated"}, seed)
    for node, expected in zip(nodes, simulated_.sites):
        alone = site.load_site(node, seed, pooled).sites[0]
        assert alone.name == expected.name
        assert torch.allclose(alone.x_train, expected.x_train, atol=1e-6)
        assert torch.allclose(alone.x_test, expected.x_test, atol=1e-6)
    # without the pooled values a federated site refuses to train (alone it would standardise per site)
    with pytest.raises(DataError, match="the server sent no pooled mean and SD"):
        train_spec = RecordDict({protocol.SPEC: protocol.json_record({"config": {"seed": seed}})})
        site.answer(MessageType.TRAIN, site.load_site(nodes[0], seed), nodes[0], RecordDict(), train_spec)


def test_a_flower_run_with_federated_standardisation_trains_like_the_engine(messy_sites, tmp_path):
    files, dictionary = messy_sites
    run = flower_run(tmp_path, "fedavg", {}, {"rounds": 2, "seed": 1}, federated_nodes(files, dictionary))
    assert run.status.state == "done", run.status
    pooled = run.federation.flower.pooled_standardization
    # every continuous feature pooled (sbp too: west's 'systolic_pressure' is matched to it by its values),
    # cholesterol in mmol/L at every site: the mean of the training rows' observed values
    assert sorted(pooled) == ["age", "chol", "sbp"]
    unscaled = load_federation({"source": "csv", "files": files, "target": "outcome", "dictionary": dictionary,
                                "standardization": "none"}, 1)
    per_site = [np.asarray(s.x_train[:, unscaled.feature_names.index("chol")]) for s in unscaled.sites]
    chol = np.concatenate(per_site)
    # each site's sums are released at its disclosure policy, rounded to half their standard error
    # (sqrt(n) SDs): the pooled mean lies within a quarter of that of the rows' own mean
    rounding = sum(0.25 * np.sqrt(len(v[v != 0])) * v[v != 0].std(ddof=1) for v in per_site) / len(chol[chol != 0])
    assert abs(pooled["chol"]["mean"] - chol[chol != 0].mean()) <= rounding  # 0: missing under 'none'
    assert 5.0 < pooled["chol"]["mean"] < 5.8  # mmol/L (east's mg/dL converted)
    spec = run.spec
    whole = load_federation({"source": "csv", "files": files, "target": "outcome", "dictionary": dictionary,
                             "standardization": "federated"}, 1)
    config = TrainConfig(**{**spec.config, "execution": "per-site"})
    sim = Simulation(whole, build_algorithm("fedavg", spec.params), config)
    sim.run()
    model = run.load_model()
    assert max(float(np.abs(sim.stacked[n].numpy() - model[n]).max()) for n in model) < TOLERANCE


def test_sites_that_standardise_differently_are_refused(messy_sites, tmp_path):
    files, dictionary = messy_sites
    nodes = federated_nodes(files[:2], dictionary) + federated_nodes(files[2:], dictionary, "site")
    with pytest.raises(DataError, match=r"Sites north, south standardise 'federated' but east, west do not"):
        flower_run(tmp_path, "fedavg", {}, {"rounds": 1}, nodes)


def test_a_site_at_the_strictest_disclosure_policy_takes_part_and_says_what_it_withheld(tmp_path):
    """A site whose node config asks for more rows per statistic than it has (and noise) still trains
    with the others; it sends its size alone, and its check-up cells say why each is not testable."""
    from fedcore.checkup import check_up
    from fedcore.interpret.profile import STATISTICS, Profile

    names = ("Alder General", "Birch University", "Cedar Community", "Elm Regional")
    nodes = demo_nodes(names)
    nodes[0].update({"min-count": "100000", "dp-epsilon": "0.01"})
    nodes[1]["min-count"] = "25"
    run = flower_run(tmp_path, "fedavg", {}, {"rounds": 1}, nodes)
    assert run.status.state == "done", run.status
    assert run.spec.disclosure is None  # each site sets its own
    with np.load(run.path / "profile.npz", allow_pickle=False) as data:
        profile = Profile.from_npz(data)
    strict = profile.sites.index("Alder General")
    assert profile.policies["Alder General"] == {"min_count": 100000, "dp_epsilon": 0.01}
    assert profile.policies["Birch University"] == {"min_count": 25, "dp_epsilon": None}
    assert profile.policies["Cedar Community"] == {"min_count": 10, "dp_epsilon": None}
    assert profile.rows[strict] == load_federation("demo:site=Alder General", 0).profile.rows[0]  # its size, and
    too_few = "not shared (fewer than 100000 rows)"
    no_correlation = "not shared under differential privacy (a correlation has no bounded sensitivity)"
    for name in STATISTICS:  # nothing else, each with its reason
        if name == "rows":
            continue
        assert np.isnan(profile.arrays[name][strict]).all(), name
        assert profile.withheld["Alder General"][name] == (no_correlation if STATISTICS[name].kind == "correlation"
                                                           else too_few), name
    others = [i for i in range(4) if i != strict]
    assert np.isfinite(profile.quantiles[others][:, 10]).all()  # the others' medians are there
    result = check_up(profile, {})
    cells = [f for f in result.findings if f.site == "Alder General"]
    # the checks that read correlations (the registry says which) give the correlations' reason
    correlations = {name for name, declared in STATISTICS.items() if declared.kind == "correlation"}
    reads_correlations = {c.kind for c in checks.CHECKS if correlations & set(c.needs)}
    assert reads_correlations >= {"correlation", "copied_column", "row_order"}
    # a check that needs more sites than the federation's 4 says that first (at every site)
    needs_more = {c.kind: c.min_sites for c in checks.CHECKS if c.min_sites > len(profile.sites)}
    assert needs_more == {"location_related": 6, "spread_related": 6}
    for kind, sites in needs_more.items():
        assert {f.untestable for f in result.findings if f.kind == kind} == {
            f"needs at least {sites} sites to compare, this federation has 4"}, kind
    testable_here = [f for f in cells if f.kind not in needs_more]
    assert testable_here and {f.untestable for f in testable_here if f.kind not in reads_correlations} == {too_few}
    assert {f.untestable for f in testable_here if f.kind in reads_correlations} == {no_correlation}
    assert not any(f.significant for f in cells)
    tested = [f for f in result.findings if f.site != "Alder General" and f.tested]
    assert tested and all(np.isfinite(f.p) for f in tested if f.kind == "location")


def test_a_site_smaller_than_its_minimum_sends_no_batchnorm_statistics(tmp_path):
    """FedHealth2's f-variant reads each site's BatchNorm statistics (the mean and variance of its
    inputs) at the server: a site with fewer training rows than its policy's minimum refuses, by name."""
    nodes = demo_nodes()
    nodes[0]["min-count"] = "100000"
    # (in a deployment the ClientApp answers with this message and the server fails the run with it)
    with pytest.raises(DataError, match=r"Alder General has \d+ training rows, fewer than its disclosure policy's "
                                        r"minimum \(100000\): it does not send .*running_mean"):
        flower_run(tmp_path, "fedhealth2", {"variant": "f", "warmup_rounds": 1}, {"rounds": 2}, nodes)
    run = flower_run(tmp_path / "default", "fedhealth2", {"variant": "f", "warmup_rounds": 1}, {"rounds": 2},
                     demo_nodes())
    assert run.status.state == "done"  # at the default minimum every demo site sends them
