"""Known answers: a round of every table algorithm computed here from its paper's formulas, on
every execution path that claims to run that algorithm.

The other engine tests compare the paths with one another; a fault all paths share (or one
that only changes what the algorithm asks of them) passes those. Here the expected tensors come
from a small functional re-implementation of the MLP (f_out . head . body . f_in, written from
the layers' equations, in float64), each algorithm's loss and aggregation written from its
paper, and torch.autograd only for the derivative of that loss. The settings make the answer
exact: no dropout, one mini-batch holding all of a site's training rows (so the batch order
does not matter), a known number of local steps, and every site starting from tensors of its
own (so that a wrong mixture, a shared tensor that should stay local, or a swapped term shows).

Paths: `SUPPORTED` says which paths each algorithm is expected to run. Every known answer runs on
those; asking for any other must raise SpecError (fail closed, never a silently different loss).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from fedcore.algorithms import REGISTRY, build_algorithm
from fedcore.algorithms.fedavg import FedAvg
from fedcore.engine import Simulation, TrainConfig
from fedcore.errors import SpecError
from fedcore.federation import Federation
from tests.helpers import make_federation

PATHS = ("per-site", "batched", "compiled")
# The paths each table algorithm runs. The compiled round computes the plain class-weighted NLL
# only: FedProx (a penalty) and APFL (a loss of its own) are refused there.
SUPPORTED = {
    "local": PATHS,
    "centralized": PATHS,
    "fedavg": PATHS,
    "fedprox": ("per-site", "batched"),
    "fedbn": PATHS,
    "fedper": PATHS,
    "apfl": ("per-site", "batched"),
    "ifedavg": PATHS,
    "adafed": PATHS,
    "fedhealth2": PATHS,
}
UNSUPPORTED = [(algorithm, path) for algorithm, paths in SUPPORTED.items() for path in PATHS if path not in paths]

# Exact settings: no dropout, no momentum unless a test sets it, and batches larger than any
# site's training rows (33, 50 and 67 below; 150 pooled), so a local epoch is one full-batch step.
# On the CPU, where all three paths run (the compiled round runs nowhere else).
EXACT = {"rounds": 1, "local_epochs": 1, "batch_size": 256, "lr": 0.05, "momentum": 0.0, "weight_decay": 0.0,
         "lr_decay": 0.5, "hidden": (6, 5), "dropout": 0.0, "seed": 0, "device": "cpu"}
SIZES = (50, 75, 100)
N_CLASSES = 3
BATCH_NORM_MOMENTUM = 0.1  # nn.BatchNorm1d's documented default
BATCH_NORM_EPS = 1e-5
ATOL, RTOL = 2e-5, 1e-4  # float32 training against the float64 answer

State = dict[str, torch.Tensor]  # one site's tensors by qualified name
LossOf = Callable[[State, torch.Tensor, torch.Tensor], tuple[torch.Tensor, State]]  # (loss, new BN statistics)


# -- the answer, from the formulas --------------------------------------------------------------
def mlp(p: State, x: torch.Tensor, train: bool) -> tuple[torch.Tensor, State]:
    """The paper's MLP: f_in(x) = (x + b_in) * w_in; per hidden layer Linear, BatchNorm (if the
    model has it), tanh; the head; f_out(z) = (z + b_out) * w_out; log-softmax. In training,
    BatchNorm normalises with the batch's mean and biased variance and moves its running
    statistics by momentum 0.1 toward the batch mean and the unbiased batch variance; returns
    the log-probabilities and those new statistics."""
    h = (x + p["f_in.b"]) * p["f_in.w"]
    statistics: State = {}
    for index in sorted({int(name.split(".")[1]) for name in p if name.startswith("body.")}):
        layer = f"body.{index}"
        if f"{layer}.running_mean" in p:
            if train:
                mean, variance = h.mean(0), h.var(0, unbiased=False)
                unbiased = variance * len(h) / (len(h) - 1)
                for statistic, batch_value in (("running_mean", mean), ("running_var", unbiased)):
                    statistics[f"{layer}.{statistic}"] = (1 - BATCH_NORM_MOMENTUM) * p[f"{layer}.{statistic}"] \
                        + BATCH_NORM_MOMENTUM * batch_value
                statistics[f"{layer}.num_batches_tracked"] = p[f"{layer}.num_batches_tracked"] + 1
            else:
                mean, variance = p[f"{layer}.running_mean"], p[f"{layer}.running_var"]
            h = (h - mean) / torch.sqrt(variance + BATCH_NORM_EPS) * p[f"{layer}.weight"] + p[f"{layer}.bias"]
        else:
            h = h @ p[f"{layer}.weight"].T + p[f"{layer}.bias"]
        if f"body.{index + 1}.running_mean" not in p:  # tanh follows the layer's BatchNorm, if any
            h = torch.tanh(h)
    h = h @ p["head.weight"].T + p["head.bias"]
    return torch.log_softmax((h + p["f_out.b"]) * p["f_out.w"], dim=-1), statistics


def nll(log_prob: torch.Tensor, y: torch.Tensor, weights: torch.Tensor | None, reduction: str = "sum") -> torch.Tensor:
    """Class-weighted negative log-likelihood: sum_i w_{y_i} * -log p_i(y_i), divided by
    sum_i w_{y_i} for the mean."""
    row_weight = torch.ones(len(y), dtype=log_prob.dtype) if weights is None else weights[y]
    total = -(row_weight * log_prob[torch.arange(len(y)), y]).sum()
    return total / row_weight.sum() if reduction == "mean" else total


def inverse_prevalence(y: torch.Tensor) -> torch.Tensor:
    """w_c = (1 / n_c) / sum_k (1 / n_k) * K over the K classes present (0 for absent ones)."""
    counts = torch.bincount(y, minlength=N_CLASSES).double()
    inverse = torch.where(counts > 0, 1 / counts.clamp(min=1), torch.zeros_like(counts))
    return inverse / inverse.sum() * int((counts > 0).sum())


def plain_loss(weights: torch.Tensor | None, reduction: str = "sum") -> LossOf:
    def loss_of(p: State, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, State]:
        log_prob, statistics = mlp(p, x, train=True)
        return nll(log_prob, y, weights, reduction), statistics
    return loss_of


def plus(loss_of: LossOf, term: Callable[[State], torch.Tensor]) -> LossOf:
    """A loss with a term of the tensors added (FedProx's penalty, a test algorithm's own term)."""
    def with_term(p: State, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, State]:
        loss, statistics = loss_of(p, x, y)
        return loss + term(p), statistics
    return with_term


def sgd(state: State, trainable: list[str], loss_of: LossOf, x: torch.Tensor, y: torch.Tensor, steps: int,
        lr: float, momentum: float = 0.0, weight_decay: float = 0.0, buffers: State | None = None
        ) -> tuple[State, State, float]:
    """`steps` full-batch steps of SGD (buf <- momentum * buf + g + weight_decay * p; p <- p - lr * buf,
    buf starting at 0); returns the new tensors, the momentum buffers and the mean loss of the steps."""
    state, buffers, losses = dict(state), dict(buffers or {}), []
    for _ in range(steps):
        leaves = {name: state[name].clone().requires_grad_(True) for name in trainable}
        loss, statistics = loss_of({**state, **leaves}, x, y)
        for (name, value), grad in zip(leaves.items(), torch.autograd.grad(loss, list(leaves.values()))):
            value = value.detach()
            buffers[name] = momentum * buffers.get(name, torch.zeros_like(value)) + grad + weight_decay * value
            state[name] = value - lr * buffers[name]
        state.update({name: value.detach() for name, value in statistics.items()})
        losses.append(float(loss.detach()))
    return state, buffers, sum(losses) / steps


def mix(states: list[State], names: list[str], weights: torch.Tensor) -> list[State]:
    """new_i = sum_j W_ij * old_j for every tensor in `names`; the others stay as they are."""
    mixed = [dict(state) for state in states]
    for name in names:
        combined = torch.tensordot(weights.double(), torch.stack([state[name] for state in states]), dims=1)
        for state, value in zip(mixed, combined):
            state[name] = value
    return mixed


def uniform(n: int) -> torch.Tensor:
    return torch.full((n, n), 1.0 / n, dtype=torch.float64)


def by_samples(sizes: list[int]) -> torch.Tensor:
    """FedAvg's weighting by training rows: every row n_j / sum n."""
    share = torch.tensor(sizes, dtype=torch.float64) / sum(sizes)
    return share.expand(len(sizes), -1)


def lr_at(round_: int, lr: float = EXACT["lr"]) -> float:
    """The step schedule in a run of fewer than 100 rounds, which decays every rounds // 50 rounds
    but at least every round: lr * lr_decay ** (round - 1)."""
    return lr * EXACT["lr_decay"] ** (round_ - 1)


# -- the simulation and its sites ---------------------------------------------------------------
def federation() -> Federation:
    return make_federation(rows=SIZES, n_features=4, n_classes=N_CLASSES)


def simulation(algorithm: str, path: str, params: dict | None = None, data: Federation | None = None,
               **config) -> Simulation:
    settings = {**REGISTRY[algorithm].config_defaults, **EXACT, "execution": path, **config}
    return Simulation(data or federation(), build_algorithm(algorithm, params), TrainConfig(**settings))


def start_apart(sim: Simulation, seed: int = 1) -> list[State]:
    """Give every site tensors of its own (a site's model after some earlier round) and return
    them in float64: a wrong mixture, or a tensor shared that should stay local, then shows."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, value in sim.stacked.items():
            if not value.is_floating_point() or name == "alpha":
                continue
            noise = torch.randn(value.shape, generator=generator)
            if name.endswith("running_var"):
                value.copy_(0.5 + noise.abs())
            elif name.endswith(".w"):  # the affine layers' weights: around their identity
                value.copy_(1 + 0.3 * noise)
            else:
                value.copy_(0.5 * noise)
    rows = next(iter(sim.stacked.values())).shape[0]
    return [{name: (value[site].double() if value.is_floating_point() else value[site]).clone()
             for name, value in sim.stacked.items()} for site in range(rows)]


def trainable(sim: Simulation) -> list[str]:
    return [name for name, parameter in sim.models[0].named_parameters() if parameter.requires_grad]


def split_tensors(sim: Simulation, is_local: Callable[[str], bool]) -> tuple[list[str], list[str]]:
    """The float tensors as (shared, local), by the algorithm's rule as its paper states it."""
    floats = [name for name, value in sim.stacked.items() if value.is_floating_point()]
    return [n for n in floats if not is_local(n)], [n for n in floats if is_local(n)]


def all_shared(sim: Simulation) -> list[str]:
    return split_tensors(sim, lambda name: False)[0]


def own_weights(sim: Simulation, site: int) -> torch.Tensor:
    """The class weights of a site's loss by default: inverse prevalence in its training rows."""
    return inverse_prevalence(sim.train_sets[site][1])


def plain(sim: Simulation, weighted: bool = True, reduction: str = "sum") -> Callable[[int], LossOf]:
    """Every site's plain class-weighted NLL (`weighted` False: class_weighting 'none')."""
    return lambda site: plain_loss(own_weights(sim, site) if weighted else None, reduction)


def local_round(sim: Simulation, states: list[State], loss_of: Callable[[int], LossOf], steps: int = 1,
                lr: float = EXACT["lr"], momentum: float = 0.0, weight_decay: float = 0.0,
                buffers: list[State] | None = None) -> tuple[list[State], list[State], list[float]]:
    """Every site's local update (`loss_of(site)` its loss) on its own training rows, from its own
    momentum `buffers`; returns the sites' new tensors, momentum buffers and mean losses."""
    buffers = buffers or [{} for _ in states]
    outcomes = [sgd(state, trainable(sim), loss_of(site), *sim.train_sets[site], steps, lr, momentum, weight_decay,
                    buffers[site]) for site, state in enumerate(states)]
    trained, new_buffers, losses = zip(*outcomes)
    return list(trained), list(new_buffers), list(losses)


def assert_state(sim: Simulation, expected: list[State], note: str = "") -> None:
    """Every stacked tensor of every site as expected: floats to float32 rounding, counts exactly."""
    assert set(sim.stacked) == set(expected[0])
    for name, value in sim.stacked.items():
        want = torch.stack([state[name] for state in expected])
        if value.is_floating_point():
            error = float((value.double() - want).abs().max())
            assert torch.allclose(value.double(), want, atol=ATOL, rtol=RTOL), f"{note}{name}: off by {error:.3g}"
        else:
            assert torch.equal(value, want), f"{note}{name}"


def assert_losses(reported: dict[str, float], expected: list[float], sites: list[str]) -> None:
    """step()'s mean training loss of each site: the mean over its steps of the loss before each."""
    assert reported == pytest.approx(dict(zip(sites, expected)), rel=1e-5, abs=1e-6)


# -- the table of paths ---------------------------------------------------------------------------
def test_the_table_names_every_table_algorithm():
    """An algorithm added to the registry needs its known answer here (and its paths in the table)."""
    assert set(SUPPORTED) == {name for name, cls in REGISTRY.items() if "table" in cls.inputs}


@pytest.mark.parametrize(("algorithm", "path"), UNSUPPORTED)
def test_a_path_an_algorithm_does_not_run_is_refused(algorithm, path):
    with pytest.raises(SpecError):
        simulation(algorithm, path)


# -- FedAvg and the engine's local update --------------------------------------------------------
@pytest.mark.parametrize("weighting", ["uniform", "samples"])
@pytest.mark.parametrize("path", SUPPORTED["fedavg"])
def test_fedavg_averages_every_parameter_uniformly_or_by_training_rows(path, weighting):
    sim = simulation("fedavg", path, {"weighting": weighting})
    trained, _, losses = local_round(sim, start_apart(sim), plain(sim))
    sizes = [len(y) for _, y in sim.train_sets]
    assert len(set(sizes)) == len(sizes)  # else the two weightings agree
    weights = uniform(3) if weighting == "uniform" else by_samples(sizes)
    assert_losses(sim.step(), losses, sim.site_names)
    assert_state(sim, mix(trained, all_shared(sim), weights))


@pytest.mark.parametrize("settings", [
    {"momentum": 0.5, "weight_decay": 0.2, "local_epochs": 2},
    {"momentum": 0.9, "loss_reduction": "mean", "class_weighting": "none", "local_epochs": 3, "lr": 0.5},
], ids=["momentum-weight-decay", "mean-unweighted"])
@pytest.mark.parametrize("path", SUPPORTED["fedavg"])
def test_two_fedavg_rounds_carry_each_sites_momentum_and_follow_the_schedule(path, settings):
    """SGD's momentum persists across rounds at each site (not averaged), weight decay adds
    wd * p to the gradient, the mean reduction divides by the rows' summed class weights, and
    round 2 runs at lr * lr_decay."""
    sim = simulation("fedavg", path, rounds=2, **settings)
    states, buffers = start_apart(sim), None
    loss_of = plain(sim, settings.get("class_weighting", "inverse") == "inverse", settings.get("loss_reduction", "sum"))
    for round_ in (1, 2):
        states, buffers, losses = local_round(
            sim, states, loss_of, settings["local_epochs"], lr_at(round_, settings.get("lr", EXACT["lr"])),
            settings["momentum"], settings.get("weight_decay", 0.0), buffers)
        states = mix(states, all_shared(sim), uniform(3))
        assert_losses(sim.step(), losses, sim.site_names)
        assert_state(sim, states, f"round {round_}: ")


# -- Local and Centralized ------------------------------------------------------------------------
@pytest.mark.parametrize("path", SUPPORTED["local"])
def test_local_mixes_nothing(path):
    sim = simulation("local", path, local_epochs=2)
    trained, _, losses = local_round(sim, start_apart(sim), plain(sim), steps=2)
    assert_losses(sim.step(), losses, sim.site_names)
    assert_state(sim, trained)


@pytest.mark.parametrize("path", SUPPORTED["centralized"])
def test_centralized_trains_one_model_on_the_pooled_rows(path):
    data = federation()
    sim = simulation("centralized", path, data=data)
    (state,) = start_apart(sim)
    x = torch.cat([site.x_train for site in data.sites])
    y = torch.cat([site.y_train for site in data.sites])
    trained, _, loss = sgd(state, trainable(sim), plain_loss(inverse_prevalence(y)), x, y, 1, EXACT["lr"])
    assert_losses(sim.step(), [loss], ["+".join(data.site_names)])
    assert_state(sim, [trained])


# -- FedProx --------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", SUPPORTED["fedprox"])
def test_fedprox_adds_mu_times_the_drift_from_the_received_model_to_the_gradient(path):
    """loss + (mu / 2) ||w - w_received||^2: the gradient is g + mu (w - w_received), zero at the
    first local step and not after it (three steps here)."""
    mu = 2.0
    sim = simulation("fedprox", path, {"mu": mu}, local_epochs=3)
    received, shared = start_apart(sim), all_shared(sim)

    def proximal(site: int) -> LossOf:
        drift = lambda p: sum(((p[n] - received[site][n]) ** 2).sum() for n in shared)  # noqa: E731
        return plus(plain(sim)(site), lambda p: mu / 2 * drift(p))

    trained, _, losses = local_round(sim, received, proximal, steps=3)
    assert_losses(sim.step(), losses, sim.site_names)
    assert_state(sim, mix(trained, shared, uniform(3)))


# -- FedBN, FedPer, iFedAvg: what stays at the site -----------------------------------------------
def is_batch_norm(name: str) -> bool:
    """The MLP with BatchNorm: body = [Dropout, Linear, BatchNorm, Tanh] per hidden layer, Dropout."""
    return name.startswith("body.") and int(name.split(".")[1]) % 4 == 2


BATCH_NORM_LAYERS = ["body.2", "body.6"]  # hidden (6, 5)


@pytest.mark.parametrize("path", SUPPORTED["fedbn"])
def test_fedbn_keeps_batch_norm_at_the_site_and_moves_its_statistics_by_momentum_0_1(path):
    sim = simulation("fedbn", path, local_epochs=2)
    trained, _, losses = local_round(sim, start_apart(sim), plain(sim), steps=2)
    shared, local = split_tensors(sim, is_batch_norm)
    assert {f"{layer}.{tensor}" for layer in BATCH_NORM_LAYERS
            for tensor in ("weight", "bias", "running_mean", "running_var")} == set(local)
    assert_losses(sim.step(), losses, sim.site_names)
    assert_state(sim, mix(trained, shared, uniform(3)))


@pytest.mark.parametrize("personal_layers", [1, 2])
@pytest.mark.parametrize("path", SUPPORTED["fedper"])
def test_fedper_keeps_its_last_layers_and_f_out(path, personal_layers):
    sim = simulation("fedper", path, {"personal_layers": personal_layers})
    trained, _, losses = local_round(sim, start_apart(sim), plain(sim))
    personal = ("f_out.", "head.", "body.4.")[: personal_layers + 1]  # hidden (6, 5): body.1 and body.4 are Linear
    shared, _ = split_tensors(sim, lambda name: name.startswith(personal))
    assert_losses(sim.step(), losses, sim.site_names)
    assert_state(sim, mix(trained, shared, uniform(3)))


# The authors' shared f_out, the product's defaults (a local f_out with a scalar w_out) and that
# setting spelled out.
@pytest.mark.parametrize("params", [{"local_f_out": False}, {}, {"local_f_out": True, "scalar_w_out": True}],
                         ids=["f_in", "defaults", "f_in-f_out"])
@pytest.mark.parametrize("path", SUPPORTED["ifedavg"])
def test_ifedavg_keeps_f_in_at_the_site_and_averages_the_rest(path, params):
    """f_in(x) = (x + b) * w with each site's own b and w (started apart from the identity), never
    averaged; with local_f_out (the default) also f_out (a scalar w_out)."""
    sim = simulation("ifedavg", path, params)
    trained, _, losses = local_round(sim, start_apart(sim), plain(sim))
    local_f_out = params.get("local_f_out", True)
    shared, local = split_tensors(sim, lambda name: name.startswith(("f_in.", "f_out.") if local_f_out else "f_in."))
    assert_losses(sim.step(), losses, sim.site_names)
    assert_state(sim, mix(trained, shared, uniform(3)))
    assert all(not torch.equal(trained[0][n], trained[1][n]) for n in local)  # local, and apart


# -- APFL ------------------------------------------------------------------------------------------
def part(p: State, prefix: str) -> State:
    return {name[len(prefix):]: value for name, value in p.items() if name.startswith(prefix)}


def apfl_loss(weights: torch.Tensor) -> LossOf:
    """APFL's step: w descends its own loss; v and alpha descend the loss of the mixture
    alpha * v + (1 - alpha) * w, in which w is held fixed. alpha enters the mixture clamped to
    [0, 1] with the gradient of alpha itself (projected descent)."""
    def loss_of(p: State, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, State]:
        shared, personal = part(p, "shared."), part(p, "personal.")
        alpha = p["alpha"] + (p["alpha"].clamp(0, 1) - p["alpha"]).detach()
        mixture = {n: alpha * v + (1 - alpha) * shared[n].detach() for n, v in personal.items()}
        return nll(mlp(shared, x, True)[0], y, weights) + nll(mlp(mixture, x, True)[0], y, weights), {}
    return loss_of


@pytest.mark.parametrize("path", SUPPORTED["apfl"])
def test_apfl_steps_the_shared_model_the_personal_model_and_alpha_and_averages_only_w(path):
    """Two local steps from personal models apart from the shared ones; the third site's alpha
    (1.4) is projected to 1 at the start of the round."""
    sim = simulation("apfl", path, local_epochs=2)
    with torch.no_grad():
        sim.stacked["alpha"].copy_(torch.tensor([0.3, 0.7, 1.4]))
    states = start_apart(sim)
    for state in states:
        state["alpha"] = state["alpha"].clamp(0, 1)
    trained, _, losses = local_round(sim, states, lambda site: apfl_loss(own_weights(sim, site)), steps=2)
    shared, local = split_tensors(sim, lambda name: not name.startswith("shared."))
    assert "alpha" in local and "personal.head.weight" in local and "alpha" in trainable(sim)
    assert_losses(sim.step(), losses, sim.site_names)
    assert_state(sim, mix(trained, shared, uniform(3)))
    assert all(abs(float(a - b)) > 1e-4 for a, b in zip(sim.stacked["alpha"], (0.3, 0.7, 1.0)))  # alpha learnt


# -- AdaFed ----------------------------------------------------------------------------------------
def accuracy(state: State, x: torch.Tensor, y: torch.Tensor) -> float:
    log_prob = mlp(state, x, train=False)[0]
    top = log_prob.topk(2, dim=-1).values
    assert float((top[:, 0] - top[:, 1]).min()) > 1e-4, "a near tie: float32 could pick the other class"
    return float((log_prob.argmax(-1) == y).double().mean())


def per_class_f1(state: State, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """F1_c = 2 TP_c / (2 TP_c + FP_c + FN_c), 0 for a class neither present nor predicted."""
    predicted = mlp(state, x, train=False)[0].argmax(-1)
    f1 = []
    for c in range(N_CLASSES):
        tp = float(((predicted == c) & (y == c)).sum())
        denominator = float((predicted == c).sum() + (y == c).sum())
        f1.append(2 * tp / denominator if denominator else 0.0)
    return torch.tensor(f1, dtype=torch.float64)


ADAFED_RULES = {  # p_i from site i's accuracy a_i and training rows n_i (the paper's Sim. 1.A-1.D)
    "accuracy": ({}, lambda a, n: a),
    "accuracy_x_size": ({}, lambda a, n: a * n),
    "threshold": ({"accuracy_floor": 0.5}, lambda a, n: max(a - 0.5, 0.0)),  # one site below it in round 1
    "power": ({"power": 3.0}, lambda a, n: a**3),
}


@pytest.mark.parametrize("rule", list(ADAFED_RULES))
@pytest.mark.parametrize("path", SUPPORTED["adafed"])
def test_adafed_trains_with_kappa_and_mixes_by_p_over_sum_p(path, rule):
    """Round 1: every site's loss weights are kappa rescaled to sum to K (kappa set to a known
    vector), the server mixes the returned models with p_i / sum p, p_i from each model's accuracy
    on the server's test set, then sets kappa_c = 1 / (F1_c + epsilon) from the mixed model's F1
    per class there. Round 2 trains with that kappa, at lr * lr_decay."""
    extra, p_of = ADAFED_RULES[rule]
    data = federation()
    server_x = torch.cat([site.x_test for site in data.sites])
    server_y = torch.cat([site.y_test for site in data.sites])
    data.server_test = (server_x, server_y)
    epsilon, lr = 0.2, 0.01  # a smaller step: at 0.05 round 2 predicts one class at every site (p all equal)
    sim = simulation("adafed", path, {"weight_rule": rule, "server_test": "given", "epsilon": epsilon, **extra},
                     data=data, rounds=2, lr=lr)
    states = start_apart(sim)
    kappa = torch.tensor([0.5, 2.0, 1.0], dtype=torch.float64)
    sim.algorithm.kappa = kappa.float()
    sizes = [len(y) for _, y in sim.train_sets]
    for round_ in (1, 2):
        loss_weights = kappa * N_CLASSES / kappa.sum()
        trained, _, losses = local_round(sim, states, lambda site: plain_loss(loss_weights), lr=lr_at(round_, lr))
        p = torch.tensor([p_of(accuracy(state, server_x, server_y), n) for state, n in zip(trained, sizes)],
                         dtype=torch.float64)
        assert p.sum() > 0 and len(set(p.tolist())) > 1, f"round {round_}: p = {p} does not test the weighting"
        states = mix(trained, all_shared(sim), (p / p.sum()).expand(3, -1))
        assert_losses(sim.step(), losses, sim.site_names)
        assert_state(sim, states, f"round {round_}: ")
        kappa = 1 / (per_class_f1(states[0], server_x, server_y) + epsilon)


# -- FedHealth2 ------------------------------------------------------------------------------------
def similarity_mixing(distance: torch.Tensor, lam: float) -> torch.Tensor:
    """W_ii = lambda; W_ij = (1 - lambda) (1 / d_ij) / sum_{k != i} (1 / d_ik): rows sum to 1."""
    inverse = 1 / (distance + torch.eye(len(distance)))  # the diagonal is replaced below
    inverse.fill_diagonal_(0)
    weights = (1 - lam) * inverse / inverse.sum(1, keepdim=True)
    return weights.fill_diagonal_(lam)


def wasserstein_distances(states: list[State]) -> torch.Tensor:
    """d_ij = sum over BatchNorm layers of the 2-Wasserstein distance of the diagonal Gaussians
    N(running_mean, running_var): sqrt(||mu_i - mu_j||^2 + ||sigma_i - sigma_j||^2)."""
    distance = torch.zeros(len(states), len(states), dtype=torch.float64)
    for layer in BATCH_NORM_LAYERS:
        mu = torch.stack([state[f"{layer}.running_mean"] for state in states])
        sigma = torch.stack([state[f"{layer}.running_var"] for state in states]).sqrt()
        distance += (torch.cdist(mu, mu) ** 2 + torch.cdist(sigma, sigma) ** 2).sqrt()
    return distance


@pytest.mark.parametrize("path", SUPPORTED["fedhealth2"])
def test_fedhealth2_mixes_each_site_with_its_similarity_row_and_keeps_batch_norm(path):
    """The f-variant, one warm-up round: round 1 is FedBN; then d_ij between the sites' BatchNorm
    running statistics give W, and round 2 gives site i sum_j W_ij theta_j of every tensor but
    BatchNorm's, which stays at the site."""
    lam = 0.3
    sim = simulation("fedhealth2", path, {"variant": "f", "warmup_rounds": 1, "lam": lam}, rounds=2)
    states, (shared, _) = start_apart(sim), split_tensors(sim, is_batch_norm)
    weights = uniform(3)  # the warm-up round
    for round_ in (1, 2):
        states, _, losses = local_round(sim, states, plain(sim), lr=lr_at(round_))
        states = mix(states, shared, weights)
        assert_losses(sim.step(), losses, sim.site_names)
        assert_state(sim, states, f"round {round_}: ")
        weights = similarity_mixing(wasserstein_distances(states), lam)
        assert not torch.allclose(weights, weights[:1].expand(3, -1))  # a mixture of its own for each site


@pytest.mark.parametrize("path", SUPPORTED["fedhealth2"])
def test_fedhealth2_pretrained_mixes_with_the_rows_of_its_recorded_distances(path):
    """The default variant measures the sites with a model pretrained at the server; whatever the
    distances, the mixing applied is the formula's W of the distances it records."""
    lam = 0.6
    sim = simulation("fedhealth2", path, {"lam": lam, "pretrain_epochs": 2})
    trained, _, losses = local_round(sim, start_apart(sim), plain(sim))
    assert_losses(sim.step(), losses, sim.site_names)
    _, arrays = sim.algorithm.record(sim)
    distance = torch.as_tensor(arrays["distance"], dtype=torch.float64)
    assert torch.allclose(distance, distance.T) and bool((distance + torch.eye(3) > 0).all())
    assert_state(sim, mix(trained, split_tensors(sim, is_batch_norm)[0], similarity_mixing(distance, lam)))


# -- the hold-out scores ---------------------------------------------------------------------------
@pytest.mark.parametrize(("algorithm", "path"), [(algorithm, path) for algorithm in ("fedbn", "ifedavg", "centralized")
                                                  for path in SUPPORTED[algorithm]])
def test_hold_out_scores_are_each_sites_model_on_its_own_rows(algorithm, path):
    """evaluate(): site i's model in evaluation mode (BatchNorm with its running statistics; the
    pooled model for Centralized) on site i's hold-out: mean NLL and accuracy."""
    sim = simulation(algorithm, path)
    states = start_apart(sim)
    scores = sim.evaluate()
    assert list(scores) == sim.site_names
    for site, (x, y) in enumerate(sim.test_sets):
        state = states[0 if algorithm == "centralized" else site]
        log_prob = mlp(state, x, train=False)[0]
        assert scores[sim.site_names[site]]["loss"] == pytest.approx(float(nll(log_prob, y, None) / len(y)), rel=1e-5)
        assert scores[sim.site_names[site]]["accuracy"] == pytest.approx(accuracy(state, x, y), abs=1e-12)


# -- an algorithm's own loss is never silently replaced --------------------------------------------
TERM = 0.75


class FedAvgWithATerm(FedAvg):
    """FedAvg whose local loss adds TERM * sum(b_in): a loss no batched or compiled step computes."""

    def loss(self, sim, site, model, x, y):
        return super().loss(sim, site, model, x, y) + TERM * model.f_in.b.sum()


def trains_with_the_term(execution: str) -> None:
    sim = Simulation(federation(), FedAvgWithATerm(), TrainConfig(**{**EXACT, "execution": execution}))
    with_term = lambda site: plus(plain(sim)(site), lambda p: TERM * p["f_in.b"].sum())  # noqa: E731
    trained, _, losses = local_round(sim, start_apart(sim), with_term)
    assert_losses(sim.step(), losses, sim.site_names)
    assert_state(sim, mix(trained, all_shared(sim), uniform(3)))


def test_an_overridden_loss_is_trained_on_the_per_site_path():
    trains_with_the_term("per-site")


@pytest.mark.parametrize("path", ["batched", "compiled"])
def test_a_path_that_cannot_compute_an_overridden_loss_refuses_it(path):
    with pytest.raises(SpecError):
        Simulation(federation(), FedAvgWithATerm(), TrainConfig(**{**EXACT, "execution": path}))


def test_auto_trains_an_overridden_loss_per_site():
    trains_with_the_term("auto")
