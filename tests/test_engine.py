import pytest
import torch

from fedcore.algorithms import build_algorithm
from fedcore.engine import Simulation, TrainConfig, resolve_device
from fedcore.errors import SpecError
from tests.helpers import make_federation


def run(seed, algorithm="ifedavg", rounds=3):
    sim = Simulation(make_federation(), build_algorithm(algorithm), TrainConfig(rounds=rounds, seed=seed, device="cpu"))
    return sim, sim.run()


def test_same_seed_gives_identical_records_and_weights():
    a, history_a = run(7)
    b, history_b = run(7)
    assert [r["sites"] for r in history_a] == [r["sites"] for r in history_b]
    for state_a, state_b in zip(a.states, b.states):
        for name in state_a:
            assert torch.equal(state_a[name], state_b[name]), name


def test_another_seed_gives_other_numbers():
    a, _ = run(7)
    b, _ = run(8)
    assert not torch.equal(a.states[0]["head.weight"], b.states[0]["head.weight"])


@pytest.mark.parametrize("execution", ["per-site", "batched", "compiled"])
def test_local_update_does_not_depend_on_site_order(execution):
    federation = make_federation()
    reversed_federation = make_federation()
    reversed_federation.sites = federation.sites[::-1]
    config = TrainConfig(rounds=2, execution=execution, dropout=0.2)
    local = lambda fed: Simulation(fed, build_algorithm("local"), config)  # noqa: E731
    forward, backward = local(federation), local(reversed_federation)
    forward.run()
    backward.run()
    for name in forward.states[0]:
        assert torch.allclose(forward.states[0][name], backward.states[2][name], atol=1e-6), name


def test_learning_rate_decays_fifty_times_over_the_run():
    config = TrainConfig(rounds=1000)
    assert config.lr_at(1) == config.lr_at(20) == 0.002
    assert config.lr_at(21) == pytest.approx(0.002 * 0.9)
    assert config.lr_at(1000) == pytest.approx(0.002 * 0.9**49)
    assert TrainConfig(rounds=10, lr_decay_every=3).lr_at(7) == pytest.approx(0.002 * 0.81)


def test_evaluation_cadence():
    short = TrainConfig(rounds=150)
    assert [r for r in range(1, 151) if short.is_evaluated(r)] == list(range(1, 151))
    long = TrainConfig(rounds=1000)
    evaluated = [r for r in range(1, 1001) if long.is_evaluated(r)]
    assert len(evaluated) == 200 and evaluated[-1] == 1000
    odd = TrainConfig(rounds=10, eval_every=4)
    assert [r for r in range(1, 11) if odd.is_evaluated(r)] == [4, 8, 10]


def test_records_hold_every_metric_for_every_site_plus_mean_and_worst():
    _, history = run(0, rounds=2)
    record = history[-1]
    assert record["round"] == 2
    for site in ("site0", "site1", "site2"):
        assert set(record["sites"][site]) == {"f1", "roc_auc", "balanced_accuracy", "accuracy", "loss",
                                              "sensitivity", "specificity"}
    f1s = [m["f1"] for m in record["sites"].values()]
    assert record["mean"]["f1"] == pytest.approx(sum(f1s) / 3)
    assert record["worst"]["f1"] == min(f1s)
    assert record["sites"][record["worst_site"]["f1"]]["f1"] == min(f1s)
    assert set(record["train_loss"]) == {"site0", "site1", "site2"}


def test_batch_norm_models_survive_a_last_batch_of_one_row():
    federation = make_federation(rows=52)  # 34 training rows: the last batch of 16 holds 2, of 11 holds 1
    sim = Simulation(federation, build_algorithm("fedbn"), TrainConfig(rounds=1, batch_size=11))
    sim.run()


@pytest.mark.parametrize(
    ("settings", "message"),
    [({"rounds": 0}, "rounds"), ({"lr": -1}, "lr"), ({"lr_decay": 0}, "lr_decay"),
     ({"device": "tpu"}, "device"), ({"class_weighting": "balanced"}, "class_weighting"),
     ({"dropout": 1.0}, "dropout")],
)
def test_invalid_settings_are_rejected_with_their_name(settings, message):
    with pytest.raises(SpecError, match=message):
        TrainConfig(**settings)


def test_device_choice():
    assert resolve_device("cpu").type == "cpu"
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    if not torch.cuda.is_available():
        with pytest.raises(SpecError, match="no GPU"):
            resolve_device("cuda")


@pytest.mark.parametrize("execution", ["batched", "per-site"])
def test_evaluation_on_other_per_site_sets(execution):
    """A validation split is scored like the hold-outs: site i's model on set i."""
    sim = Simulation(make_federation(), build_algorithm("local"), TrainConfig(rounds=2, execution=execution))
    sim.run()
    assert sim.evaluate([(s.x_test, s.y_test) for s in sim.federation.sites]) == sim.evaluate()
    # every site scored on the first site's hold-out: each model sees rows it did not train on
    first = sim.federation.sites[0]
    on_first = sim.evaluate([(first.x_test, first.y_test)] * len(sim.federation.sites))
    assert on_first[first.name] == sim.evaluate()[first.name]
    assert len({round(m["loss"], 6) for m in on_first.values()}) == len(on_first)


def test_a_diverging_run_fails_naming_the_round_and_site(tmp_path, capsys):
    """Values beyond float32 (1e39 here) overflow to infinity and the loss to NaN: the run is marked
    failed with the round and the site, not reported as done, and the CLI exits 1 (from a CSV, whose
    such values the data check refuses first, the run below diverges by its learning rate)."""
    from application import cli
    from fedcore.errors import TrainingError
    from fedcore.federation import Federation
    from fedcore.store import RunStore

    federation = make_federation(n_sites=2)
    huge = Federation(**{**federation.__dict__, "sites": [
        type(site)(site.name, site.x_train * (1e39 if k else 1.0), site.y_train, site.x_test, site.y_test)
        for k, site in enumerate(federation.sites)]})
    sim = Simulation(huge, build_algorithm("fedavg"), TrainConfig(rounds=3, lr=0.5))
    with pytest.raises(TrainingError, match=r"Round 1: the training loss is not a finite number at site1 \((nan|inf)"):
        sim.step()
    assert sim.round == 1

    # Such numbers in a CSV are refused before any run exists (issue 18: values beyond float32,
    # by file, column and row) ...
    csv = tmp_path / "a.csv"
    rows = ["x,y"] + [f"{v * 1e305},{v % 2}" for v in range(1, 41)]
    csv.write_text("\n".join(rows))
    other = tmp_path / "b.csv"
    other.write_text("\n".join(["x,y"] + [f"{v},{v % 2}" for v in range(1, 41)]))
    store = tmp_path / "runs"
    code = cli.main(["run", "-a", "fedavg", "--data", f"csv:{csv},{other}", "--target", "y", "--standardization",
                     "none", "--rounds", "2", "--lr", "0.5", "--quiet", "--store", str(store)])
    assert code == cli.EXIT_BAD_INPUT and not RunStore(store).runs()
    assert "a.csv, column 'x': value(s) beyond ±3.4e38 at data row(s) 1 ('1e+305')" in capsys.readouterr().err
    # ... so from a CSV a run diverges through its settings: ordinary values, an absurd learning rate.
    csv.write_text("\n".join(["x,y"] + [f"{v + 0.5},{v % 2}" for v in range(1, 41)]))
    code = cli.main(["run", "-a", "fedavg", "--data", f"csv:{csv},{other}", "--target", "y", "--rounds", "2",
                     "--lr", "1e30", "--quiet", "--store", str(store)])
    run = RunStore(store).runs()[0]
    assert code == cli.EXIT_FAILED, capsys.readouterr().err
    assert run.status.state == "failed" and "not a finite number" in run.status.error
