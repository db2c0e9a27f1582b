"""The compiled C round trains what the torch batched path trains, and is only used where it can run."""

import pytest
import torch

from fedcore.execution import kernels
from fedcore.execution.base import unsupported_hooks
from fedcore.execution.compiled import Compiled
from fedcore.algorithms import REGISTRY, build_algorithm
from fedcore.engine import Simulation
from fedcore.errors import SpecError
from tests.helpers import assert_same_history, assert_same_tensors, make_federation
from tests.helpers import simulate as train

PLAIN = sorted(name for name, cls in REGISTRY.items()
               if "table" in cls.inputs and not unsupported_hooks(build_algorithm(name), Compiled.runs))
PARAMS = {"ifedavg": {"local_f_out": True}, "fedhealth2": {"pretrain_epochs": 2}, "adafed": {"weight_rule": "power"}}
# 40, 73 and 60 training rows: 3, 5 and 4 steps of 16 a round, the last one partial (two epochs).
# No batch is tiny: BatchNorm over two or three rows amplifies rounding, round after round, until
# two runs that differ by rounding alone (the torch path against itself with one weight nudged by
# 1e-7) differ by 40 % after three rounds; a two-row batch has a test of its own, over one round.
SIZES = (60, 110, 160)


def simulate(algorithm: str, execution: str, rounds: int = 3, sizes: tuple[int, ...] = SIZES,
             **config) -> tuple[Simulation, list]:
    settings = {"rounds": rounds, "local_epochs": 2, "dropout": 0.2, "execution": execution, "seed": 3, **config}
    return train(algorithm, PARAMS.get(algorithm), make_federation(rows=sizes, n_classes=3), **settings)


def assert_same_training(ours: tuple[Simulation, list], theirs: tuple[Simulation, list]) -> None:
    assert_same_tensors(ours[0], theirs[0], atol=2e-5, rtol=1e-4)
    assert_same_history(ours[1], theirs[1], loss_rel=1e-4, loss_abs=1e-5, metric_abs=1e-4, metrics=("loss",))


@pytest.fixture(autouse=True)
def _compiler_present():
    assert kernels.unavailable() == "", f"the compiled round should build on this machine: {kernels.unavailable()}"


@pytest.mark.parametrize("algorithm", PLAIN)
def test_compiled_round_equals_the_batched_path(algorithm):
    """With dropout: both paths draw each site's masks from its own stream, so they match up to rounding."""
    compiled = simulate(algorithm, "compiled")
    assert compiled[0].executor.name == "compiled"
    batched = simulate(algorithm, "batched")
    assert batched[0].executor.name == "batched"
    assert_same_training(compiled, batched)


@pytest.mark.parametrize("settings", [
    {"loss_reduction": "mean", "batch_size": 7},
    {"weight_decay": 0.01, "class_weighting": "none", "momentum": 0.9},
    {"momentum": 0.0, "dropout": 0.0},
])
@pytest.mark.parametrize("algorithm", ["fedbn", "ifedavg"])
def test_compiled_round_equals_the_batched_path_for_other_engine_settings(algorithm, settings):
    assert_same_training(simulate(algorithm, "compiled", **settings), simulate(algorithm, "batched", **settings))


def test_a_two_row_batch_norm_batch_is_normalised_as_the_batched_path_does():
    """50 training rows: each epoch ends with a batch of two (a one-row batch would be skipped)."""
    assert_same_training(simulate("fedbn", "compiled", rounds=1, sizes=(150,)),
                         simulate("fedbn", "batched", rounds=1, sizes=(150,)))


def test_compiled_round_equals_the_per_site_path_without_dropout():
    assert_same_training(simulate("ifedavg", "compiled", dropout=0.0), simulate("ifedavg", "per-site", dropout=0.0))


def test_sites_split_among_processes_train_what_one_compiled_process_trains():
    split = simulate("fedhealth2", "compiled", processes=3)
    single = simulate("fedhealth2", "compiled", processes=1)
    assert split[0].executor.processes == 3 and split[0].executor.name == "compiled"
    assert_same_training(split, single)


def test_the_compiled_round_draws_each_sites_masks_from_its_stream_as_the_batched_path_does():
    """The C round steps numpy's PCG64 itself: after a round every site's stream is where the
    batched path leaves it (and the weights agree, above, only if the masks were the same)."""
    compiled, _ = simulate("ifedavg", "compiled", rounds=2)
    batched, _ = simulate("ifedavg", "batched", rounds=2)
    states = [stream.state for stream in compiled.executor.dropout.streams]
    assert states == [stream.state for stream in batched.executor.dropout.streams]
    assert len({state["state"]["state"] for state in states}) == len(SIZES)


def test_auto_picks_the_compiled_round_for_plain_losses_only():
    assert simulate("ifedavg", "auto", rounds=1)[0].executor.name == "compiled"
    assert simulate("fedprox", "auto", rounds=1)[0].executor.name == "batched"
    with pytest.raises(SpecError, match="overrides penalty, which the compiled path does not compute"):
        simulate("fedprox", "compiled", rounds=1)


@pytest.mark.parametrize(("compiler", "reason"), [
    ("no-such-compiler", "no C compiler"),
    ("false", "did not build"),
])
def test_without_a_working_compiler_auto_falls_back_and_compiled_says_why(monkeypatch, tmp_path, compiler, reason):
    monkeypatch.setenv("CC", compiler)
    monkeypatch.setenv("FEDCORE_KERNEL_CACHE", str(tmp_path))
    kernels._library.cache_clear()
    try:
        assert reason in kernels.unavailable()
        assert simulate("fedavg", "auto", rounds=1)[0].executor.name == "batched"
        with pytest.raises(SpecError, match=reason):
            simulate("fedavg", "compiled", rounds=1)
    finally:
        kernels._library.cache_clear()


def test_the_library_is_built_once_into_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("FEDCORE_KERNEL_CACHE", str(tmp_path / "cache"))
    kernels._library.cache_clear()
    try:
        assert kernels.unavailable() == ""
        built = list((tmp_path / "cache").glob("mlp_round-*.so"))
        assert len(built) == 1
        stamp = built[0].stat().st_mtime_ns
        kernels._library.cache_clear()
        assert kernels.unavailable() == "" and built[0].stat().st_mtime_ns == stamp
        assert [p.name for p in (tmp_path / "cache").iterdir()] == [built[0].name]  # no build folder left
    finally:
        kernels._library.cache_clear()


@pytest.mark.parametrize("options", [{}, {"batch_norm": True}, {"scalar_w_out": True}])
def test_compiled_prediction_equals_the_batched_forward(options):
    """Over more rows than one pass takes, with padded rows, and with every site on the same rows."""
    from fedcore.execution import stacked as batched
    from fedcore.models import MLP

    model = MLP(7, 4, hidden=(9, 5), **options)
    generator = torch.Generator().manual_seed(0)
    state = {name: torch.randn(3, *value.shape, generator=generator) for name, value in model.state_dict().items()
             if value.is_floating_point()}
    state = {name: value.abs() + 0.5 if "running_var" in name else value for name, value in state.items()}
    state.update({name: torch.zeros(3, dtype=torch.long) for name in model.state_dict() if "num_batches" in name})
    x = torch.randn(3, 150, 7, generator=generator)
    valid = torch.arange(150) < torch.tensor([[150], [70], [1]])
    expected = batched.forward(model, state, x, valid, train=False)
    got = kernels.predict(model, state, x, valid.sum(1))
    assert torch.allclose(got[valid], expected[valid], atol=1e-5)
    assert not got[~valid].any()
    shared = x[0].expand(3, 150, 7)
    assert torch.allclose(kernels.predict(model, state, shared, torch.full((3,), 150)),
                          batched.forward(model, state, shared, torch.ones(3, 150, dtype=torch.bool), train=False),
                          atol=1e-5)


def _one_model(dropout: float):
    from fedcore.models import MLP

    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(150, 6, generator=generator)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    return MLP(6, 3, hidden=(9, 5), dropout=dropout, batch_norm=True), x, y


def _trained_alone(model, x, y):
    import copy

    from fedcore.execution import train_alone

    model = copy.deepcopy(model)
    loss = train_alone(model, x, y, lr=0.05, batch_size=32, epochs=3, seed=7)
    return model, loss


def test_a_model_trained_alone_is_what_the_torch_loop_trains_without_dropout():
    """FedHealth2's server model: one federation of one site, every epoch in one compiled call,
    against the loop that defines a model's local update (150 rows: a last batch of 22 each epoch)."""
    import copy

    import torch.nn.functional as F

    from fedcore.training import train_locally

    model, x, y = _one_model(dropout=0.0)
    ours, our_loss = _trained_alone(model, x, y)
    theirs = copy.deepcopy(model)
    their_loss = train_locally(theirs, torch.optim.SGD(theirs.parameters(), lr=0.05), x, y,
                               lambda m, x, y: F.nll_loss(m(x), y), 32, 3, 7)
    assert our_loss == pytest.approx(their_loss, rel=1e-5)
    ours_state, theirs_state = ours.state_dict(), theirs.state_dict()
    assert ours_state["body.2.num_batches_tracked"] == 15  # 5 batches a round, 3 epochs
    for name, value in theirs_state.items():
        assert torch.allclose(ours_state[name].double(), value.double(), atol=1e-5, rtol=1e-5), name
    assert not torch.allclose(ours_state["body.1.weight"], model.state_dict()["body.1.weight"])  # it trained


def test_a_model_trained_alone_without_the_compiled_round_gets_the_same_masks(monkeypatch):
    """Where the C round cannot run, the batched executor's torch pass trains it, with the same
    dropout stream: the same model on every machine, up to rounding."""
    from fedcore.execution import compiled

    model, x, y = _one_model(dropout=0.3)
    in_c, c_loss = _trained_alone(model, x, y)
    monkeypatch.setattr(compiled, "why_not_here", lambda device, state: "no compiler here")
    in_torch, torch_loss = _trained_alone(model, x, y)
    assert c_loss == pytest.approx(torch_loss, rel=1e-5)
    for name, value in in_torch.state_dict().items():
        assert torch.allclose(in_c.state_dict()[name].double(), value.double(), atol=1e-5, rtol=1e-5), name


def test_fedhealth2_pretrains_its_server_model_as_a_federation_of_one_site(monkeypatch):
    from fedcore.execution import compiled

    calls = []
    real = compiled.train_as_one_site
    monkeypatch.setattr(compiled, "train_as_one_site", lambda *args: calls.append(args[3:]) or real(*args))
    simulate("fedhealth2", "per-site", rounds=1)
    assert calls == [(0.01, 32, 2, calls[0][3])]  # pretrain_lr, batch size, PARAMS' 2 epochs, its seed


@pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="the thread-local BLAS setting is MKL's")
def test_the_compiled_round_runs_its_products_on_each_thread_alone_and_gives_the_thread_back():
    """One site on a process of two threads: MKL would split each small product between threads that
    wait on each other (about 10 times slower a step). The calling thread's own setting (which
    torch.set_num_threads also writes) comes back."""
    import ctypes

    library, _ = kernels._library()
    assert library.blas_threads is not None
    setter = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(library.blas_threads)
    model, x, y = _one_model(dropout=0.2)
    previous = setter(3)
    try:
        _trained_alone(model, x, y)
    finally:
        assert setter(previous) == 3
