"""The batched execution path trains exactly what the per-site path trains."""

import pytest
import torch

from fedcore.algorithms import REGISTRY, build_algorithm
from fedcore.engine import Simulation, TrainConfig
from fedcore.errors import SpecError
from fedcore.execution.batched import plain_nll
from tests.helpers import assert_same_history, assert_same_tensors, make_federation
from tests.helpers import simulate as train

BATCHABLE = sorted(name for name, cls in REGISTRY.items() if "table" in cls.inputs)
PARAMS = {
    "ifedavg": {"local_f_out": True},
    "fedprox": {"mu": 0.5},
    "fedhealth2": {"pretrain_epochs": 2},
    "adafed": {"weight_rule": "power"},
}
# Sites of different sizes: with batches of 16 they take 3, 5 and 7 steps (the last one partial,
# one leaving a single row), so the masks for missing batches and short batches are exercised.
SIZES = (60, 110, 150)


def simulate(algorithm: str, execution: str, **config) -> tuple[Simulation, list]:
    settings = {"rounds": 3, "local_epochs": 2, "dropout": 0.0, "execution": execution, "seed": 3, **config}
    return train(algorithm, PARAMS.get(algorithm), make_federation(rows=SIZES, n_classes=3), **settings)


@pytest.mark.parametrize("algorithm", BATCHABLE)
def test_batched_equals_per_site(algorithm):
    batched, batched_history = simulate(algorithm, "batched")
    per_site, per_site_history = simulate(algorithm, "per-site")
    assert batched.executor.name == "batched" and per_site.executor.name == "per-site"
    assert_same_tensors(batched, per_site, atol=2e-5, rtol=1e-4)
    assert_same_history(batched_history, per_site_history, loss_rel=1e-4, loss_abs=1e-5, metric_abs=1e-4,
                        metrics=("loss",))


@pytest.mark.parametrize("settings", [
    {"loss_reduction": "mean", "batch_size": 7},
    {"weight_decay": 0.01, "class_weighting": "none", "momentum": 0.9},
])
def test_batched_equals_per_site_for_other_engine_settings(settings):
    batched, _ = simulate("fedbn", "batched", **settings)
    per_site, _ = simulate("fedbn", "per-site", **settings)
    assert_same_tensors(batched, per_site, atol=2e-5, rtol=1e-4)


def test_auto_picks_batched_where_it_can():
    assert all(simulate(name, "auto", rounds=1)[0].executor.name in ("batched", "compiled") for name in BATCHABLE)

    class SiteBySite(REGISTRY["fedavg"]):  # its own optimiser: the batched executors have none
        def local_optimizer(self, ctx, site, lr, sgd):
            return super().local_optimizer(ctx, site, lr, sgd)

    config = TrainConfig(rounds=1, execution="auto")
    assert Simulation(make_federation(), SiteBySite(), config).executor.name == "per-site"
    with pytest.raises(SpecError, match="overrides local_optimizer, which the batched path does not compute"):
        Simulation(make_federation(), SiteBySite(), TrainConfig(rounds=1, execution="batched"))


def test_plain_nll_algorithms_take_the_closed_form_gradient():
    """The closed-form step is for losses that are the plain weighted NLL; a penalty or a loss of
    the algorithm's own goes through autograd (both paths are checked against per-site above)."""
    plain = {name for name in BATCHABLE if plain_nll(build_algorithm(name, PARAMS.get(name)))}
    assert {"fedavg", "ifedavg", "fedbn", "fedper", "adafed", "fedhealth2", "local"} <= plain
    assert not plain & {"fedprox", "apfl"}


def test_batched_training_with_dropout_is_seeded():
    first, _ = simulate("fedavg", "batched", dropout=0.2)
    again, _ = simulate("fedavg", "batched", dropout=0.2)
    plain, _ = simulate("fedavg", "batched")
    assert torch.equal(first.stacked["head.weight"], again.stacked["head.weight"])
    assert not torch.equal(first.stacked["head.weight"], plain.stacked["head.weight"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")
def test_cuda_gives_the_cpu_results_up_to_rounding():
    on_cpu, cpu_history = simulate("ifedavg", "batched", device="cpu")
    on_gpu, gpu_history = simulate("ifedavg", "batched", device="cuda")
    for name, value in on_cpu.stacked.items():
        assert torch.allclose(on_gpu.stacked[name].cpu(), value, atol=1e-4, rtol=1e-3), name
    assert gpu_history[-1]["mean"]["f1"] == pytest.approx(cpu_history[-1]["mean"]["f1"], abs=0.02)


def test_dropout_masks_keep_the_right_share_and_are_seeded():
    from fedcore.execution.stacked import DropoutMasks

    masks = DropoutMasks(torch.device("cpu"), seeds=list(range(200)))
    keep = masks.keep(list(range(200)), (16, 128), 0.2)
    assert keep.shape == (200, 16, 128) and set(keep.unique().tolist()) == {0, 1}
    assert abs(keep.float().mean().item() - 0.8) < 0.005
    assert torch.equal(DropoutMasks(torch.device("cpu"), seeds=[5, 6]).keep([0, 1], (7, 3), 0.5),
                       DropoutMasks(torch.device("cpu"), seeds=[5, 6]).keep([0, 1], (7, 3), 0.5))


def test_a_sites_dropout_masks_do_not_depend_on_the_other_sites():
    """Each site draws from its own stream: the same masks whichever sites train beside it, in
    whatever order (what lets sites be split among processes without changing results)."""
    from fedcore.execution.stacked import DropoutMasks

    together = DropoutMasks(torch.device("cpu"), seeds=[11, 12, 13])
    alone = DropoutMasks(torch.device("cpu"), seeds=[13])
    first, second = together.keep([2, 0, 1], (4, 9), 0.5), together.keep([2, 0], (4, 9), 0.5)
    assert torch.equal(first[0], alone.keep([0], (4, 9), 0.5)[0])
    assert torch.equal(second[0], alone.keep([0], (4, 9), 0.5)[0])
    assert not torch.equal(first[0], first[1])


@pytest.mark.parametrize("options", [{}, {"batch_norm": True}, {"scalar_w_out": True, "dropout": 0.0}])
def test_hand_written_backward_matches_finite_differences(options):
    """The batched pass's backward (one node for the whole network) against numerical gradients,
    in double precision, with dropout masks, padded rows and BatchNorm's statistics over valid rows."""
    from fedcore.execution import stacked as batched
    from fedcore.models import MLP

    model = MLP(4, 3, hidden=(5, 3), **{"dropout": 0.3, **options})
    generator = torch.Generator().manual_seed(0)
    state = {name: torch.randn(3, *value.shape, generator=generator, dtype=torch.float64)
             for name, value in model.state_dict().items() if value.is_floating_point()}
    state.update({name: torch.zeros(3, dtype=torch.long) for name in model.state_dict() if "num_batches" in name})
    state = {name: value.abs() + 0.5 if "running_var" in name else value for name, value in state.items()}
    x = torch.randn(3, 6, 4, generator=generator, dtype=torch.float64)
    valid = torch.ones(3, 6, dtype=torch.bool)
    valid[1, 4:] = False  # a site with two padded rows
    names = [name for name, _ in model.named_parameters()]

    def log_prob(*tensors):
        masks = batched.DropoutMasks(torch.device("cpu"), seeds=[1, 2, 3])  # the same masks at every call
        return batched.forward(model, {**state, **dict(zip(names, tensors))}, x, valid, train=True, dropout=masks)

    inputs = tuple(state[name].clone().requires_grad_(True) for name in names)
    assert torch.autograd.gradcheck(log_prob, inputs, eps=1e-6, atol=1e-5)


def test_site_sgd_keeps_each_sites_momentum_when_the_order_changes():
    from fedcore.execution.stacked import SiteSGD

    weight = torch.zeros(4, 2)
    optimizer = SiteSGD({"w": weight}, momentum=0.9, weight_decay=0.0)
    optimizer.buffers["w"].copy_(torch.arange(4.0)[:, None].expand(4, 2))  # site i's momentum is i
    for order in ([2, 0, 3, 1], [1, 3, 0, 2], [0, 1, 2, 3]):
        optimizer.arrange(torch.tensor(order))
        assert optimizer.buffers["w"][:, 0].tolist() == [float(site) for site in order]


def test_a_training_step_frees_its_saved_tensors_without_the_cycle_collector(monkeypatch):
    """A reference cycle through the autograd node would keep every step's saved activations alive
    until Python's cycle collector ran: memory churn that slowed long runs."""
    import gc
    import weakref

    from fedcore.execution import stacked as batched
    from fedcore.models import MLP

    passes = []
    make_pass = batched._Pass.__init__
    monkeypatch.setattr(batched._Pass, "__init__", lambda self, *args: (make_pass(self, *args), passes.append(weakref.ref(self)))[0])
    model = MLP(5, 3)
    state = {name: value.detach()[None].repeat(4, *[1] * value.ndim) for name, value in model.state_dict().items()}
    params = {name: state[name].requires_grad_(True) for name, _ in model.named_parameters()}
    gc.disable()
    try:
        log_prob = batched.forward(model, state, torch.randn(4, 6, 5), torch.ones(4, 6, dtype=torch.bool), train=True,
                                   dropout=batched.DropoutMasks(torch.device("cpu"), seeds=[0, 1, 2, 3]))
        torch.autograd.grad(log_prob.sum(), list(params.values()))
        del log_prob
        assert passes and passes[0]() is None
    finally:
        gc.enable()


def test_an_algorithm_that_changes_only_its_loss_never_trains_a_different_one():
    """A subclass that overrides `loss` without marking it @batchable has not said it can be batched:
    'auto' trains it site by site, and asking for a batched executor is refused with the reason.
    (Before the executors failed closed, it silently trained plain FedAvg on the batched paths.)"""

    class Doubled(REGISTRY["fedavg"]):
        def loss(self, ctx, site, model, x, y):
            return 2 * super().loss(ctx, site, model, x, y)

    config = {"rounds": 1, "dropout": 0.0, "momentum": 0.0}
    auto = Simulation(make_federation(), Doubled(), TrainConfig(execution="auto", **config))
    per_site = Simulation(make_federation(), Doubled(), TrainConfig(execution="per-site", **config))
    plain = Simulation(make_federation(), build_algorithm("fedavg"), TrainConfig(execution="auto", **config))
    for sim in (auto, per_site, plain):
        sim.step()
    assert auto.executor.name == "per-site"
    assert torch.equal(auto.stacked["head.weight"], per_site.stacked["head.weight"])
    assert not torch.allclose(auto.stacked["head.weight"], plain.stacked["head.weight"], atol=1e-4)
    for executor in ("batched", "compiled"):
        with pytest.raises(SpecError, match=f"overrides loss, which the {executor} path does not compute"):
            Simulation(make_federation(), Doubled(), TrainConfig(execution=executor, **config))
