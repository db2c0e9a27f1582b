"""Each algorithm's defining property, on small seeded federations."""

import numpy as np
import pytest
import torch
from torch import nn

from fedcore.algorithms import REGISTRY, build_algorithm
from fedcore.engine import Simulation, TrainConfig
from fedcore.errors import SpecError
from tests.helpers import differing, make_federation, simulate as train


def simulate(algorithm, params=None, federation=None, rounds=3, **config):
    return train(algorithm, params, federation, rounds=rounds, **{"seed": 0, **config})


@pytest.mark.parametrize("algorithm", sorted(name for name, cls in REGISTRY.items() if "table" in cls.inputs))
def test_every_algorithm_trains_a_multi_class_federation(algorithm):
    params = {"pretrain_epochs": 2} if algorithm == "fedhealth2" else None
    sim, history = simulate(algorithm, params, federation=make_federation(n_sites=3, n_classes=4, rows=150), rounds=2)
    record = history[-1]
    assert len(record["sites"]) == 3
    for metrics in record["sites"].values():
        assert 0 <= metrics["f1"] <= 1 and 0 <= metrics["roc_auc"] <= 1 and metrics["loss"] > 0
    assert sim.predict(sim.model_for_site(0), sim.test_sets[0][0]).shape[1] == 4


def test_fedavg_sites_share_every_parameter():
    sim, history = simulate("fedavg")
    assert differing(sim) == set()
    assert len(history) == 3 and set(history[-1]["sites"]) == {"site0", "site1", "site2"}


def test_ifedavg_with_a_shared_f_out_shares_everything_but_f_in():
    sim, _ = simulate("ifedavg", {"local_f_out": False})  # the authors' code's setting
    assert differing(sim) == {"f_in.b", "f_in.w"}
    assert sim.algorithm.params.scalar_w_out is False  # a shared f_out keeps one weight per class
    assert sim.models[0].f_out.w.numel() == 2


def test_ifedavg_keeps_a_scalar_f_out_local_by_default_and_records_marks():
    sim, history = simulate("ifedavg")  # the declared defaults: what the quick start and the Train page run
    assert (sim.algorithm.params.local_f_out, sim.algorithm.params.scalar_w_out) == (True, True)
    assert differing(sim) == {"f_in.b", "f_in.w", "f_out.b", "f_out.w"}
    scalars, arrays = sim.algorithm.record(sim)
    assert arrays["b_in"].shape == (3, 5) and arrays["w_out"].shape == (3, 1)
    assert arrays["w_in_O"].dtype == bool and arrays["w_in_x"].shape == (5,)
    assert scalars.warning  # 3 sites: the 2-SD rule cannot fire, and the record says so


def test_fedbn_sites_differ_only_in_batch_norm():
    sim, _ = simulate("fedbn")
    bn_names = {
        f"{prefix}.{name}"
        for prefix, module in sim.models[0].named_modules()
        if isinstance(module, nn.BatchNorm1d)
        for name in ("weight", "bias", "running_mean", "running_var")
    }
    assert differing(sim) == bn_names


def test_fedper_keeps_last_layer_and_f_out_at_the_site():
    sim, _ = simulate("fedper")
    assert differing(sim) == {"head.weight", "head.bias", "f_out.b", "f_out.w"}
    sim2, _ = simulate("fedper", {"personal_layers": 2})
    assert {"body.4.weight", "head.weight"} <= differing(sim2)
    with pytest.raises(SpecError, match="personal_layers"):
        simulate("fedper", {"personal_layers": 4})


@pytest.mark.parametrize("execution", ["per-site", "batched", "compiled"])
def test_local_shares_nothing_and_equals_training_each_site_alone(execution):
    # With dropout too: every path draws a site's masks from a stream seeded with its name.
    dropout = 0.2
    federation = make_federation()
    sim, _ = simulate("local", federation=federation, execution=execution, dropout=dropout)
    assert "body.1.weight" in differing(sim)
    alone = make_federation()
    alone.sites = [federation.sites[1]]
    solo, _ = simulate("local", federation=alone, execution=execution, dropout=dropout)
    for name, value in solo.states[0].items():
        assert torch.allclose(value, sim.states[1][name], atol=1e-6), name


def test_fedavg_with_one_site_equals_centralized_training():
    single = make_federation(n_sites=1)
    fedavg, fedavg_history = simulate("fedavg", federation=single, rounds=4)
    central, central_history = simulate("centralized", federation=make_federation(n_sites=1), rounds=4)
    for name, value in fedavg.states[0].items():
        assert torch.allclose(value, central.states[0][name], atol=1e-6), name
    # FedAvg scores its site with the compiled network, Centralized its one model with torch's:
    # the counts-based metrics agree exactly, the loss to rounding.
    fedavg_scores, central_scores = (history[-1]["sites"]["site0"] for history in (fedavg_history, central_history))
    assert fedavg_scores.pop("loss") == pytest.approx(central_scores.pop("loss"), rel=1e-6)
    assert fedavg_scores == central_scores


def test_centralized_trains_one_model_on_pooled_rows_and_scores_every_site():
    sim, history = simulate("centralized")
    assert len(sim.models) == 1
    assert len(sim.train_sets[0][1]) == sum(s.n_train for s in sim.federation.sites)
    assert set(history[-1]["sites"]) == {"site0", "site1", "site2"}


def test_fedprox_with_mu_zero_is_fedavg_and_mu_limits_drift():
    plain, _ = simulate("fedavg", local_epochs=3, lr=0.01)
    prox0, _ = simulate("fedprox", {"mu": 0.0}, local_epochs=3, lr=0.01)
    for name, value in plain.states[0].items():
        assert torch.allclose(value, prox0.states[0][name], atol=1e-6), name

    def drift(mu):
        # One site: aggregation is the identity, so a round is exactly the local update.
        sim = Simulation(make_federation(n_sites=1), build_algorithm("fedprox", {"mu": mu}),
                         TrainConfig(rounds=1, local_epochs=5, lr=0.01))
        start = {n: sim.states[0][n].detach().clone() for n in sim.shared_names}
        sim.step()
        return sum(float(((sim.states[0][n].detach() - start[n]) ** 2).sum()) for n in sim.shared_names)

    assert drift(10.0) < 0.5 * drift(0.0)


def test_apfl_shares_only_the_global_model_and_adapts_alpha():
    sim, history = simulate("apfl", rounds=3, lr=0.01)
    changed = differing(sim)
    assert changed and all(not n.startswith("shared.") for n in changed)
    assert any(n.startswith("personal.") for n in changed) and "alpha" in changed
    alphas = history[-1]["algorithm"]["alpha"]
    assert set(alphas) == {"site0", "site1", "site2"}
    assert all(0 <= a <= 1 for a in alphas.values()) and any(abs(a - 0.5) > 1e-4 for a in alphas.values())
    assert sim.config.momentum == 0.0  # the iFedAvg paper's APFL runs without momentum
    fixed, history = simulate("apfl", {"adapt_alpha": False}, rounds=2)
    assert all(a == 0.5 for a in history[-1]["algorithm"]["alpha"].values())


def test_apfl_alpha_is_projected_back_into_0_1():
    """Projected descent on alpha: a stored alpha outside [0, 1] (one round's steps can push it
    past a bound) is put back at the start of the next round. Left there, an alpha far below 0
    makes the mixture the shared model alone for good (as happened on HAR)."""
    for execution in ("batched", "per-site"):
        sim = Simulation(make_federation(), build_algorithm("apfl"), TrainConfig(rounds=2, execution=execution))
        with torch.no_grad():
            sim.stacked["alpha"].copy_(torch.tensor([-3.0, 0.5, 4.0]))
        sim.step()
        alpha = sim.stacked["alpha"]
        assert -0.1 < float(alpha[0]) < 0.1 and 0.9 < float(alpha[2]) < 1.1, (execution, alpha)
        assert sorted(sim.algorithm.record(sim)[0].alpha.values())[0] >= 0


def test_adafed_threshold_rule_gives_a_random_label_site_zero_weight():
    federation = make_federation(n_sites=4, rows=200, random_label_sites=(3,))
    clean = [s for i, s in enumerate(federation.sites) if i != 3]
    federation.server_test = (torch.cat([s.x_test for s in clean]), torch.cat([s.y_test for s in clean]))
    sim, history = simulate(
        "adafed", {"weight_rule": "threshold", "server_test": "given", "accuracy_floor": 0.55},
        federation=federation, rounds=4, local_epochs=10, lr=0.02,
    )
    record = history[-1]["algorithm"]
    assert record["p"]["site3"] == 0.0
    assert all(record["p"][f"site{i}"] > 0 for i in range(3))
    assert record["site_accuracy"]["site3"] < 0.55 < min(record["site_accuracy"][f"site{i}"] for i in range(3))
    assert differing(sim) == set()  # every site receives the server model


@pytest.mark.parametrize("rule", ["accuracy_x_size", "accuracy", "threshold", "power"])
@pytest.mark.parametrize("server_test", ["pooled", "others"])
def test_adafed_weights_and_class_weights(rule, server_test):
    sim, history = simulate("adafed", {"weight_rule": rule, "server_test": server_test}, rounds=2)
    record = history[-1]["algorithm"]
    accuracy = np.array(list(record["site_accuracy"].values()))
    p = np.array(list(record["p"].values()))
    sizes = np.array([len(y) for _, y in sim.train_sets])
    expected = {
        "accuracy_x_size": accuracy * sizes,
        "accuracy": accuracy,
        "threshold": np.clip(accuracy - 0.55, 0, None),
        "power": accuracy**2,
    }[rule]
    assert np.allclose(p, expected, rtol=1e-5)
    if p.sum() > 0:
        assert np.allclose(list(record["p_share"].values()), p / p.sum(), rtol=1e-5)
    kappa = 1 / (np.array(record["server_f1_per_class"]) + 0.1)
    assert np.allclose(record["kappa"], kappa, rtol=1e-5)


def test_adafed_without_adaptive_loss_keeps_uniform_class_weights():
    _, history = simulate("adafed", {"adaptive_loss": False}, rounds=2)
    assert history[-1]["algorithm"]["kappa"] == [1.0, 1.0]


def test_adafed_given_mode_needs_a_server_test_set():
    with pytest.raises(SpecError, match="no server test set"):
        simulate("adafed", {"server_test": "given"})


@pytest.mark.parametrize("variant", ["pretrained", "d"])
def test_fedhealth2_weights_rows_sum_to_one_with_lambda_and_bn_stays_local(variant):
    sim, history = simulate(
        "fedhealth2", {"lam": 0.4, "variant": variant, "pretrain_epochs": 3},
        federation=make_federation(n_sites=4), rounds=2,
    )
    weights = sim.algorithm.weights
    assert weights.shape == (4, 4)
    assert np.allclose(weights.sum(1), 1) and np.allclose(np.diag(weights), 0.4)
    _, arrays = sim.algorithm.record(sim)
    assert np.array_equal(arrays["weights"], weights)
    assert np.allclose(arrays["distance"], arrays["distance"].T)
    # personalised: every site ends with its own weighted mix, BN parameters included
    assert "body.1.weight" in differing(sim) and "body.2.running_mean" in differing(sim)
    assert set(history[-1]["algorithm"]["nearest"]) == set(sim.site_names)


def test_fedhealth2_mixes_each_site_with_its_own_row():
    federation = make_federation(n_sites=3)
    sim = Simulation(federation, build_algorithm("fedhealth2", {"pretrain_epochs": 2}), TrainConfig(rounds=1))
    before = [{n: v.clone() for n, v in s.items()} for s in sim.states]
    sim.algorithm.mixing = lambda _sim: torch.as_tensor(sim.algorithm.weights)  # noqa: E731
    # Do the aggregation step alone on the initial (identical) models plus a known offset.
    with torch.no_grad():
        for i, state in enumerate(sim.states):
            state["head.bias"].add_(float(i))
            state["body.2.weight"].add_(float(i))
        snapshot = [s["head.bias"].clone() for s in sim.states]
        from fedcore.engine import mix_
        mix_(sim.stacked, sim.shared_names, sim.algorithm.mixing(sim))
    weights = torch.as_tensor(sim.algorithm.weights, dtype=torch.float32)
    for i in range(3):
        expected = sum(weights[i, j] * snapshot[j] for j in range(3))
        assert torch.allclose(sim.states[i]["head.bias"], expected, atol=1e-6)
        # BatchNorm weight kept its local value
        assert torch.equal(sim.states[i]["body.2.weight"], before[i]["body.2.weight"] + i)


def test_f_fedhealth2_takes_bn_running_statistics_after_warmup():
    sim = Simulation(make_federation(n_sites=3), build_algorithm("fedhealth2", {"variant": "f", "warmup_rounds": 2}),
                     TrainConfig(rounds=4))
    sim.step()
    assert sim.algorithm.weights is None  # FedBN warm-up: no similarity yet
    sim.step()
    assert sim.algorithm.weights_round == 2
    from fedcore.algorithms.fedhealth2 import bn_running_statistics
    from fedcore.interpret.similarity import site_distances
    expected = site_distances([bn_running_statistics(m) for m in sim.models])
    assert np.allclose(sim.algorithm.distance, expected)
    with pytest.raises(SpecError, match="warmup_rounds"):
        Simulation(make_federation(), build_algorithm("fedhealth2", {"variant": "f", "warmup_rounds": 5}),
                   TrainConfig(rounds=5))


def test_bn_input_statistics_pool_exactly_over_batches():
    from fedcore.algorithms.fedhealth2 import bn_input_statistics
    from fedcore.models import MLP

    torch.manual_seed(0)
    model = MLP(5, 2, batch_norm=True).eval()
    x = torch.randn(301, 5)
    captured = []
    handle = model.body[2].register_forward_pre_hook(lambda m, inp: captured.append(inp[0]))
    with torch.no_grad():
        model(x)
    handle.remove()
    stats = bn_input_statistics(model, x, batch_size=64)
    z = captured[0].double()
    assert np.allclose(stats[0][0], z.mean(0).numpy(), atol=1e-9)
    assert np.allclose(stats[0][1], z.var(0, unbiased=True).numpy(), atol=1e-9)
