"""One source for the network: every batched path computes what the module (`fedcore.models`)
computes, with the module's own autograd as the reference.

The batched executor runs the model's own layers under torch.func.vmap (`fedcore.execution.vmapped`)
wherever the hand-written MLP pass (`fedcore.execution.stacked`) does not serve; the hand-written
pass and the compiled round are fast paths, checked here against the module's forward and backward
and against the module's batched path, never only against each other. The known answers of every
algorithm (tests/test_known_answers.py) are run again here with the hand-written pass switched off.
"""

from __future__ import annotations

import inspect
import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from fedcore.algorithms import REGISTRY
from fedcore.algorithms.base import batchable
from fedcore.algorithms.fedavg import FedAvg
from fedcore.engine import Simulation, TrainConfig
from fedcore.errors import SpecError
from fedcore.execution import batched, stacked, vmapped
from fedcore.execution.base import unsupported_hooks
from fedcore.execution.compiled import Compiled
from fedcore.models import MLP, Dropout
from fedcore.training import weighted_nll
from tests import test_known_answers as known
from tests.helpers import assert_same_history, assert_same_tensors, make_federation
from tests.helpers import simulate as train

TABLE = sorted(name for name, cls in REGISTRY.items() if "table" in cls.inputs)
PLAIN = [name for name in TABLE if not unsupported_hooks(REGISTRY[name](), Compiled.runs)]
PARAMS = {"ifedavg": {"local_f_out": True}, "fedprox": {"mu": 0.5}, "fedhealth2": {"pretrain_epochs": 2},
          "adafed": {"weight_rule": "power"}}
SIZES = (60, 110, 160)  # 3, 5 and 7 steps of 16 over two epochs, the last of each epoch partial


def hand_written_off(monkeypatch: pytest.MonkeyPatch, mode: str = "module-layers") -> None:
    """Every batched step runs the module path: the algorithm's loss under vmap, the MLP's calls
    in it by the module's own layers ('module-layers'), or by the hand-written pass as one node
    ('mlp-node-vmap'); or the loss once on the stacked sites, the MLP's calls by the pass, where
    the first step finds it gives what vmap gives ('mlp-node-stacked')."""
    if mode == "module-layers":
        monkeypatch.setattr(stacked, "supports", lambda model: False)
        return
    monkeypatch.setattr(batched, "hand_written", lambda sim: False)
    if mode == "mlp-node-vmap":
        monkeypatch.setattr(vmapped.ModulePass, "_same_on_stacked", lambda self, *args: False)


MODES = ["module-layers", "mlp-node-vmap", "mlp-node-stacked"]
MODULE_PATHS = pytest.mark.parametrize("mode", MODES)


def simulate(algorithm: str, execution: str, **config):
    settings = {"rounds": 3, "local_epochs": 2, "dropout": 0.2, "execution": execution, "seed": 3, **config}
    return train(algorithm, PARAMS.get(algorithm), make_federation(rows=SIZES, n_classes=3), **settings)


def assert_same_training(ours, theirs) -> None:
    assert_same_tensors(ours[0], theirs[0], atol=2e-5, rtol=1e-4)
    assert_same_history(ours[1], theirs[1], loss_rel=1e-4, loss_abs=1e-5, metric_abs=1e-4, metrics=("loss",))


# -- the hand-written pass against the module's forward and autograd -------------------------------
def random_sites(model: nn.Module, n_sites: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Every tensor of `model` for n sites, each site's its own (BatchNorm's variances positive)."""
    state = {}
    for name, value in {**dict(model.named_parameters()), **dict(model.named_buffers())}.items():
        if not value.is_floating_point():
            state[name] = torch.zeros(n_sites, *value.shape, dtype=value.dtype)
            continue
        noise = torch.randn(n_sites, *value.shape, generator=generator, dtype=value.dtype)
        state[name] = noise.abs() + 0.5 if name.endswith("running_var") else (
            1 + 0.3 * noise if name.endswith(".w") else 0.5 * noise)
    return state


@pytest.mark.parametrize("bn_momentum", [0.1, 0.35])
@pytest.mark.parametrize("options", [{}, {"batch_norm": True}, {"scalar_w_out": True},
                                     {"batch_norm": True, "hidden": (7,), "dropout": 0.5}])
def test_the_hand_written_pass_computes_the_modules_forward_and_backward(options, bn_momentum):
    """Each site's log-probabilities, loss, gradients and BatchNorm statistics after one training
    step: the hand-written pass (closed-form NLL step, and its autograd node) against the module
    run site by site on the site's real rows, with the same dropout masks given to its layers."""
    options = {"hidden": (5, 3), "dropout": 0.3, **options}
    model = MLP(4, 3, **options).double()
    for layer in model.modules():
        if isinstance(layer, nn.BatchNorm1d):
            layer.momentum = bn_momentum
    assert stacked.supports(model)
    generator = torch.Generator().manual_seed(0)
    state = random_sites(model, 3, generator)
    x = torch.randn(3, 6, 4, generator=generator, dtype=torch.float64)
    y = torch.randint(0, 3, (3, 6), generator=generator)
    counts = [6, 4, 6]  # the second site's batch has two padded rows
    valid = torch.arange(6) < torch.tensor(counts)[:, None]
    weights = torch.rand(3, 3, generator=generator, dtype=torch.float64) + 0.5
    names = [name for name, _ in model.named_parameters()]

    hand_state = {name: value.clone() for name, value in state.items()}
    losses, grads = stacked.nll_step(model, hand_state, x, y, valid, weights, "sum",
                                     stacked.DropoutMasks(torch.device("cpu"), [1, 2, 3]), None, names)
    leaves = {name: state[name].clone().requires_grad_(True) for name in names}
    log_prob = stacked.forward(model, {**{n: v.clone() for n, v in state.items()}, **leaves}, x, valid, train=True,
                               dropout=stacked.DropoutMasks(torch.device("cpu"), [1, 2, 3]))
    node_grads = torch.autograd.grad(weighted_nll(log_prob, y, valid, weights, "sum")[0].sum(), list(leaves.values()))

    dropouts = [name for name, layer in model.named_modules() if isinstance(layer, Dropout)]
    widths = [4, *options["hidden"]]  # what each dropout layer sees: f_in's output, then each hidden layer's
    masks = stacked.DropoutMasks(torch.device("cpu"), [1, 2, 3]).scaled([0, 1, 2], 6, widths, [options["dropout"]] * 3)
    model.train()
    for site, count in enumerate(counts):
        tensors = {name: value[site].clone() for name, value in state.items()}
        params = {name: tensors[name].requires_grad_(True) for name in names}
        given = {f"{name}.mask": mask[site, :count].double() for name, mask in zip(dropouts, masks)}
        module_log_prob = functional_call(model, {**tensors, **given}, (x[site, :count],))
        loss = F.nll_loss(module_log_prob, y[site, :count], weight=weights[site], reduction="sum")
        expected = torch.autograd.grad(loss, list(params.values()))
        assert float(losses[site]) == pytest.approx(float(loss.detach()), rel=1e-10)
        assert torch.allclose(log_prob[site, :count], module_log_prob, atol=1e-10)
        for index, name in enumerate(names):
            assert torch.allclose(grads[index][site], expected[index], atol=1e-10), name
            assert torch.allclose(node_grads[index][site], expected[index], atol=1e-10), name
        for name, value in tensors.items():  # BatchNorm's statistics moved by the module's momentum
            if name not in params:
                assert torch.allclose(hand_state[name][site], value, atol=1e-12), name


def test_the_hand_written_pass_serves_only_models_it_computes(monkeypatch):
    """A layer it does not know, BatchNorm without a fixed momentum, or an MLP whose forward pass
    changed: the pass does not claim the model (it is checked against the module's forward)."""
    assert stacked.supports(MLP(4, 3, batch_norm=True))
    cumulative = MLP(4, 3, batch_norm=True)
    cumulative.body[2].momentum = None  # a cumulative average of the batches' statistics
    relu = MLP(4, 3)
    relu.body[3] = nn.ReLU()
    assert not stacked.supports(cumulative) and not stacked.supports(relu)
    monkeypatch.setattr(MLP, "features", lambda self, x: self.body(self.f_in(x)) * 2)  # a change the pass misses
    assert not stacked.supports(MLP(4, 3))


class FedAvgWithReLU(FedAvg):
    """FedAvg on an MLP with ReLU for tanh: a layer the hand-written pass and the C round do not know."""

    def build_model(self, ctx) -> nn.Module:
        model = ctx.make_mlp()
        model.body = nn.Sequential(*[nn.ReLU() if isinstance(layer, nn.Tanh) else layer for layer in model.body])
        return model


def test_a_layer_the_fast_paths_do_not_know_trains_batched_from_the_module():
    config = {"rounds": 2, "local_epochs": 2, "dropout": 0.0, "seed": 3}
    federation = make_federation(rows=SIZES, n_classes=3)
    batched = Simulation(federation, FedAvgWithReLU(), TrainConfig(execution="auto", **config))
    per_site = Simulation(federation, FedAvgWithReLU(), TrainConfig(execution="per-site", **config))
    assert batched.executor.description == "all sites batched (torch, the model's own layers under vmap)"
    assert_same_training((batched, batched.run()), (per_site, per_site.run()))
    with pytest.raises(SpecError, match="compiled round computes the paper's MLP"):
        Simulation(federation, FedAvgWithReLU(), TrainConfig(execution="compiled", **config))


# -- the known answers, on the module's own batched path -------------------------------------------
def known_answer_cases():
    """Every known-answer test's parameter sets that run the batched path."""
    for name, function in inspect.getmembers(known, inspect.isfunction):
        if not name.startswith("test_") or "path" not in inspect.signature(function).parameters:
            continue
        grids = []
        for mark in getattr(function, "pytestmark", []):
            if mark.name == "parametrize":
                argnames = mark.args[0]
                names = [a.strip() for a in argnames.split(",")] if isinstance(argnames, str) else list(argnames)
                grids.append([dict(zip(names, values if len(names) > 1 else (values,))) for values in mark.args[1]])
        for combination in itertools.product(*grids):
            arguments = {key: value for grid in combination for key, value in grid.items()}
            if arguments["path"] == "batched":
                label = "-".join(f"{value}" for key, value in arguments.items() if key != "path")
                yield pytest.param(function, arguments, id=f"{name}[{label}]" if label else name)


CASES = list(known_answer_cases())


def test_every_algorithm_with_a_batched_path_has_known_answers_here():
    batched = {algorithm for algorithm, paths in known.SUPPORTED.items() if "batched" in paths}
    covered = {algorithm for algorithm in batched
               if any(f"_{algorithm}_" in case.id or case.values[1].get("algorithm") == algorithm for case in CASES)}
    assert covered == batched


@MODULE_PATHS
@pytest.mark.parametrize(("function", "arguments"), CASES)
def test_known_answer_on_the_module_path(monkeypatch, function, arguments, mode):
    hand_written_off(monkeypatch, mode)
    function(**arguments)


@MODULE_PATHS
def test_the_module_path_is_what_those_known_answers_ran(monkeypatch, mode):
    """The MLPs by the pass or by their own layers; the loss under vmap, or once on the stacked
    sites where the first step found it the same (the MLP's own layers take one site's tensors
    only: there it is vmap)."""
    hand_written_off(monkeypatch, mode)
    for algorithm in ("fedavg", "fedbn", "fedprox", "apfl"):
        sim = known.simulation(algorithm, "batched")
        assert "under vmap" in sim.executor.description
        mlps = [module for module in sim.executor.module.model.modules() if type(module) is MLP]
        assert mlps and all(("forward" in vars(mlp)) == (mode != "module-layers") for mlp in mlps)  # the pass, or not
        sim.step()
        assert sim.executor.module.on_stacked == (mode == "mlp-node-stacked"), algorithm


class FedAvgWithAMarkedTerm(known.FedAvgWithATerm):
    """The known answers' FedAvg with a term of its own, its loss marked batchable."""

    @batchable
    def loss(self, sim, site, model, x, y):
        return super().loss(sim, site, model, x, y)


def test_an_algorithms_own_loss_marked_batchable_trains_batched_as_written():
    sim = Simulation(known.federation(), FedAvgWithAMarkedTerm(), TrainConfig(**{**known.EXACT, "execution": "auto"}))
    assert sim.executor.description == "all sites batched (torch, the model's own layers under vmap)"
    with_term = lambda site: known.plus(known.plain(sim)(site), lambda p: known.TERM * p["f_in.b"].sum())  # noqa: E731
    trained, _, losses = known.local_round(sim, known.start_apart(sim), with_term)
    known.assert_losses(sim.step(), losses, sim.site_names)
    known.assert_state(sim, known.mix(trained, known.all_shared(sim), known.uniform(3)))


class Branching(FedAvg):
    """A loss marked batchable that vmap cannot run: a Python branch on a tensor's value."""

    @batchable
    def loss(self, ctx, site, model, x, y):
        loss = super().loss(ctx, site, model, x, y)
        return loss * 2 if loss > 1 else loss


class DropoutTwice(FedAvg):
    """A loss that runs the model twice in a step: its dropout layers would need two masks each."""

    @batchable
    def loss(self, ctx, site, model, x, y):
        return ctx.base_loss(model(x), y, site) + ctx.base_loss(model(x), y, site)


@pytest.mark.parametrize(("algorithm", "reason"), [
    (Branching, "does not run under torch.func.vmap"),
    (DropoutTwice, "runs the dropout layers .* more than once in a step"),
])
@pytest.mark.parametrize("execution", ["auto", "batched"])
def test_a_marked_loss_the_module_path_cannot_run_stops_at_the_first_step_with_the_reason(algorithm, reason,
                                                                                           execution):
    """A loss is first run at the first step (it reads the algorithm's state of the round): what
    vmap cannot run stops the run there, never a silently different step."""
    sim = Simulation(make_federation(), algorithm(), TrainConfig(rounds=1, dropout=0.2, execution=execution))
    assert "under vmap" in sim.executor.description
    with pytest.raises(SpecError, match=reason):
        sim.step()


class FirstOfTheBatch(FedAvg):
    """A term on the first row of the batch: on stacked sites [:, 0] picks each site's first class instead."""

    @batchable
    def loss(self, ctx, site, model, x, y):
        log_prob = model(x)
        return ctx.base_loss(log_prob, y, site) + 0.3 * log_prob[:, 0].sum()


class EveryRow(FedAvg):
    """A term summed over every row given: on stacked sites the padded rows too."""

    @batchable
    def loss(self, ctx, site, model, x, y):
        log_prob = model(x)
        return ctx.base_loss(log_prob, y, site) - 0.3 * log_prob.exp()[..., 0].sum()


class RowsAsCounted(FedAvg):
    """The loss divided by the batch's length: on stacked sites the count of sites."""

    @batchable
    def loss(self, ctx, site, model, x, y):
        return ctx.base_loss(model(x), y, site) * 16 / len(x)


@pytest.mark.parametrize("algorithm", [FirstOfTheBatch, EveryRow, RowsAsCounted])
def test_a_loss_that_differs_on_the_stacked_sites_trains_under_vmap_as_written(algorithm):
    """Each of these losses runs on stacked tensors without an error but computes something else
    there: the first step finds it, and the run trains under vmap what the per-site path trains
    (batches of different sizes, the last of each epoch partial)."""
    config = {"rounds": 2, "local_epochs": 2, "dropout": 0.0, "seed": 3, "batch_size": 16}
    federation = make_federation(rows=SIZES, n_classes=3)
    batched_run = Simulation(federation, algorithm(), TrainConfig(execution="batched", **config))
    per_site = Simulation(federation, algorithm(), TrainConfig(execution="per-site", **config))
    ours, theirs = batched_run.run(), per_site.run()
    assert batched_run.executor.module.on_stacked is False
    assert_same_training((batched_run, ours), (per_site, theirs))


def test_cumulative_batch_norm_statistics_train_site_by_site():
    """BatchNorm with momentum None averages over its batch count, a Python number vmap cannot
    batch: neither the hand-written pass nor the module path claims it."""

    class CumulativeFedBN(REGISTRY["fedbn"]):
        def build_model(self, ctx):
            model = ctx.make_mlp()
            for layer in model.modules():
                if isinstance(layer, nn.BatchNorm1d):
                    layer.momentum = None
            return model

    sim = Simulation(make_federation(), CumulativeFedBN(), TrainConfig(rounds=1, execution="auto"))
    assert sim.executor.name == "per-site"
    with pytest.raises(SpecError, match="average cumulatively"):
        Simulation(make_federation(), CumulativeFedBN(), TrainConfig(rounds=1, execution="batched"))


# -- dropout: each site's own stream, on every batched path ------------------------------------------
@MODULE_PATHS
@pytest.mark.parametrize("algorithm", ["fedavg", "fedbn", "fedprox", "ifedavg"])
def test_the_module_path_draws_the_hand_written_paths_dropout_masks(monkeypatch, algorithm, mode):
    hand = simulate(algorithm, "batched")
    assert "hand-written" in hand[0].executor.description
    hand_written_off(monkeypatch, mode)
    module = simulate(algorithm, "batched")
    assert "under vmap" in module[0].executor.description
    assert_same_training(module, hand)


@pytest.mark.parametrize("algorithm", PLAIN)
def test_the_compiled_round_trains_what_the_modules_own_layers_train(monkeypatch, algorithm):
    """With dropout, BatchNorm and partial batches: the C round against the module under vmap."""
    compiled = simulate(algorithm, "compiled")
    assert compiled[0].executor.name == "compiled"
    hand_written_off(monkeypatch)
    module = simulate(algorithm, "batched")
    assert "under vmap" in module[0].executor.description
    assert_same_training(compiled, module)


@MODULE_PATHS
@pytest.mark.parametrize("settings", [
    {"loss_reduction": "mean", "batch_size": 7},
    {"weight_decay": 0.01, "class_weighting": "none", "momentum": 0.9},
])
def test_the_compiled_round_trains_what_the_module_trains_for_other_engine_settings(monkeypatch, settings, mode):
    compiled = simulate("fedbn", "compiled", **settings)
    hand_written_off(monkeypatch, mode)
    module = simulate("fedbn", "batched", **settings)
    assert module[0].executor.module.on_stacked == (mode == "mlp-node-stacked")
    assert_same_training(compiled, module)


def test_the_module_path_is_reproducible_and_independent_of_the_split_among_processes():
    """APFL trains on the module path: the same seed gives the same numbers, and each site's
    masks come from its own stream, so splitting the sites among processes changes only rounding."""
    federation = make_federation(rows=(60, 110, 150, 80), n_classes=3)
    settings = {"rounds": 2, "dropout": 0.2, "execution": "batched", "seed": 5}
    first, _ = train("apfl", None, federation, processes=1, **settings)
    again, _ = train("apfl", None, federation, processes=1, **settings)
    split, _ = train("apfl", None, federation, processes=2, **settings)
    assert "under vmap" in first.executor.description and split.executor.processes == 2
    assert all(torch.equal(first.stacked[name], again.stacked[name]) for name in first.stacked)
    assert_same_tensors(split, first, atol=2e-5, rtol=1e-4)


class FedBNWithMomentum(REGISTRY["fedbn"]):
    """FedBN whose BatchNorm layers move their statistics by 0.35 a batch (nn.BatchNorm1d's default: 0.1)."""

    def build_model(self, ctx) -> nn.Module:
        model = ctx.make_mlp()
        for layer in model.modules():
            if isinstance(layer, nn.BatchNorm1d):
                layer.momentum = 0.35
        return model


def test_batch_norm_momentum_is_the_modules_on_every_path():
    """The C round and the hand-written pass read BatchNorm's momentum from the module: the same
    statistics as the module trained site by site, and not those of the default momentum."""
    config = {"rounds": 2, "local_epochs": 2, "dropout": 0.0, "seed": 3}
    federation = make_federation(rows=SIZES, n_classes=3)
    runs = {execution: Simulation(federation, FedBNWithMomentum(), TrainConfig(execution=execution, **config))
            for execution in ("per-site", "batched", "compiled")}
    assert "hand-written" in runs["batched"].executor.description
    default = Simulation(federation, REGISTRY["fedbn"](), TrainConfig(execution="per-site", **config))
    for sim in (*runs.values(), default):
        sim.run()
    for execution in ("batched", "compiled"):
        assert_same_tensors(runs[execution], runs["per-site"], atol=2e-5, rtol=1e-4)
    statistics = "body.2.running_var"
    assert not torch.allclose(runs["per-site"].stacked[statistics], default.stacked[statistics], atol=1e-3)


def test_dropout_masks_at_a_rate_per_layer_keep_each_layers_share_and_scale():
    """The module path draws one step's masks for dropout layers of different rates in one call
    (the hand-written pass and the C round take one rate throughout)."""
    masks = stacked.DropoutMasks(torch.device("cpu"), seeds=list(range(40)))
    first, second = masks.scaled(list(range(40)), 64, [50, 30], [0.2, 0.6])
    assert first.shape == (40, 64, 50) and second.shape == (40, 64, 30)
    assert first.unique().tolist() == pytest.approx([0.0, 1 / 0.8])
    assert second.unique().tolist() == pytest.approx([0.0, 1 / 0.4])
    assert (first > 0).float().mean().item() == pytest.approx(0.8, abs=0.01)
    assert (second > 0).float().mean().item() == pytest.approx(0.4, abs=0.01)
