"""The structure that keeps the engine from silently computing the wrong thing: layers that import
one way (pyproject.toml's import contracts), no import cycles, algorithms that read only their
typed context, an engine that does not know which executor trains, and an algorithm that is one file."""

from __future__ import annotations

import ast
import io
import re
import shutil
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

import grimp
import pytest
import torch

from fedcore import execution
from fedcore.algorithms import REGISTRY, Algorithm, build_algorithm
from fedcore.algorithms.base import FedAvgParams, param
from fedcore.algorithms.context import Context, ServerContext, members
from fedcore.engine import FederatedModels, Simulation, TrainConfig
from fedcore.errors import SpecError
from fedcore.records import Record
from tests.helpers import make_federation
from tests.import_graph import package_graph, upward_arrows

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fedcore", "application", "data_adapters", "dashboard", "views")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(root), "PATH": ""})


def copy_of_the_code(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def plant(root: Path, module: str, line: str, inside_a_function: bool = False) -> None:
    path = root / (module.replace(".", "/") + ".py")
    text = f"\n\ndef _planted():\n    {line}\n" if inside_a_function else f"\n{line}\n"
    path.write_text(path.read_text() + text)


def test_the_layer_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 kept, 0 broken" in result.stdout


@pytest.mark.parametrize("module, line, inside_a_function, broken", [
    ("fedcore.engine", "import dashboard.widgets.common", False, "fedcore.engine is not allowed to import dashboard"),
    ("fedcore.store", "from fedcore.engine import Simulation", True, "fedcore.store is not allowed to import fedcore.engine"),
    ("fedcore.algorithms.fedavg", "import data_adapters", True, "is not allowed to import data_adapters"),
    ("views.feature_shifts", "from data_adapters import load_federation", False, "views.feature_shifts -> data_adapters"),
    ("dashboard.presenters.lenses", "from fedcore.engine import Simulation", True, "dashboard.presenters.lenses -> fedcore.engine"),
    ("data_adapters.tables.cells", "from data_adapters.alignment import align", True,
     "data_adapters.tables.cells -> data_adapters.alignment.align"),
    ("data_adapters.assembly.inject", "import data_adapters.mapping.dictionary", False,
     "data_adapters.assembly.inject -> data_adapters.mapping.dictionary"),
    ("dashboard.presenters.lenses", "from dashboard.widgets import common", True,
     "dashboard.presenters.lenses -> dashboard.widgets.common"),
    ("application.runner", "from application import datasets", True, "application.runner -> application.datasets"),
    ("dashboard.presenters.figures", "import streamlit as st", False,
     "dashboard.presenters.figures -> streamlit"),
])
def test_a_planted_upward_import_breaks_a_contract(tmp_path, module, line, inside_a_function, broken):
    """Imports hidden in a function count as much as any: the contracts see them."""
    root = copy_of_the_code(tmp_path)
    plant(root, module, line, inside_a_function)
    result = lint_imports(root)
    assert result.returncode != 0 and broken in result.stdout, result.stdout


def module_cycles(packages: tuple[str, ...]) -> list[list[str]]:
    """Every set of modules that import each other in a circle (Tarjan's strongly connected components);
    imports for annotations only (`if TYPE_CHECKING:`) are no dependency at run time."""
    graph = grimp.build_graph(*packages, cache_dir=None, exclude_type_checking_imports=True)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(module: str) -> None:
        index[module] = low[module] = counter[0]
        counter[0] += 1
        stack.append(module)
        on_stack.add(module)
        for other in edges.get(module, ()):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_no_modules_import_each_other_in_a_cycle():
    assert module_cycles(PACKAGES) == []


def test_a_planted_cycle_is_found(tmp_path, monkeypatch):
    root = copy_of_the_code(tmp_path)
    plant(root, "fedcore.config", "from fedcore import federation", inside_a_function=True)
    plant(root, "fedcore.federation", "import fedcore.config")
    monkeypatch.syspath_prepend(str(root))
    for name in [m for m in sys.modules if m.split(".")[0] in PACKAGES]:
        monkeypatch.delitem(sys.modules, name)
    assert ["fedcore.config", "fedcore.federation"] in module_cycles(PACKAGES)


def test_the_drawing_of_the_tree_has_no_arrow_running_up():
    """Between the folders (and sub-packages) a reader sees, every import points down."""
    edges = package_graph()
    assert upward_arrows(edges) == []
    assert {"application", "data_adapters.readers", "dashboard.presenters", "fedcore.engine"} <= set(edges)
    assert "application.cli" in edges["fedcore.__main__"]  # the entry point: `python -m fedcore`


def test_an_arrow_running_up_is_drawn_as_one():
    edges = {"top": {"middle"}, "middle": {"bottom", "top"}, "bottom": set(), "side": {"bottom"}}
    assert upward_arrows(edges) == [("middle", "top"), ("top", "middle")]


def test_a_planted_import_between_folders_runs_up_in_the_drawing(tmp_path, monkeypatch):
    root = copy_of_the_code(tmp_path)
    plant(root, "data_adapters.tables.cells", "from data_adapters.readers import demo", inside_a_function=True)
    monkeypatch.syspath_prepend(str(root))
    for name in [m for m in sys.modules if m.split(".")[0] in PACKAGES]:
        monkeypatch.delitem(sys.modules, name)
    assert ("data_adapters.tables", "data_adapters.readers") in upward_arrows(package_graph())


def context_reads(source: str) -> set[str]:
    """Every attribute an algorithm's code reads of `ctx` (the name its hooks give the context)."""
    return {node.attr for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ctx"}


def test_algorithms_read_only_what_their_context_declares():
    declared = members(Context)
    for path in sorted((ROOT / "fedcore" / "algorithms").glob("*.py")):
        undeclared = context_reads(path.read_text()) - declared
        assert not undeclared, f"{path.name} reads {sorted(undeclared)} of its context, which Context does not declare"
    assert context_reads("def hook(self, ctx):\n    return ctx.optimizers[0]") - declared == {"optimizers"}


def test_the_simulation_and_the_flower_server_implement_the_context():
    federation = make_federation()
    simulation = Simulation(federation, build_algorithm("fedavg"), TrainConfig(rounds=1))
    server = FederatedModels(federation, build_algorithm("fedavg"), TrainConfig(rounds=1), [90, 90, 90])
    assert {name for name in members(Context) if not hasattr(simulation, name)} == set()
    assert {name for name in members(ServerContext) if not hasattr(server, name)} == set()
    # a server holds no site's rows: a hook that reads them at a Flower server fails loudly
    assert not hasattr(server, "train_sets") and not hasattr(server, "test_sets")


def test_the_engine_does_not_know_which_executor_trains():
    """No name, string or comment of engine.py names an executor or its parts."""
    words = {*execution.KINDS, "kernels", "processes", "workers", "stacked_mlp", "per_site"}
    tokens = tokenize.generate_tokens(io.StringIO((ROOT / "fedcore" / "engine.py").read_text()).readline)
    found = {word for token in tokens if token.type in (tokenize.NAME, tokenize.STRING, tokenize.COMMENT)
             for word in words if re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", token.string)}
    assert not found, f"engine.py names {sorted(found)}"


# -- an algorithm is one file: this one is written here, and nothing else in the code changes ---------
@dataclass
class ShrinkRecord(Record):
    kind = "shrink-test"
    norm: float | None = None

    def summary_lines(self, sites: list[str]) -> list[str]:
        return [f"\nNorm of the shared weights: {self.norm:.4f}"]


def define_shrink() -> type[Algorithm]:
    """Defining the class is all it takes (it registers itself); defined on demand so that the other
    test modules, which loop over every registered algorithm, never see it."""

    @dataclass
    class ShrinkParams(FedAvgParams):
        strength: float = param(0.5, "Weight of the penalty (strength / 2) * ||w||^2 on every shared weight.")

    class Shrink(Algorithm):
        """FedAvg whose sites also shrink their weights towards 0: a penalty, so it trains on the
        batched executor (which computes penalties) but never on the compiled one (which does not)."""

        name = "shrink-test"
        title = "Shrink (test)"
        summary = "FedAvg with an L2 penalty at the sites."
        Params = ShrinkParams
        Record = ShrinkRecord

        def penalty(self, ctx, params, sites):
            stacked = not isinstance(sites, int)
            total = sum((w**2).flatten(1).sum(1) if stacked else (w**2).sum() for w in params.values())
            return self.params.strength / 2 * total

        def record(self, ctx):
            norm = float(sum(ctx.stacked[n][0].norm() ** 2 for n in ctx.shared_names) ** 0.5)
            return ShrinkRecord(norm), {}

    return Shrink


@pytest.fixture
def shrink_registered():
    shrink = define_shrink()
    assert REGISTRY["shrink-test"] is shrink
    yield shrink
    REGISTRY.pop("shrink-test", None)


def test_a_subclass_with_a_name_of_its_own_registers_itself():
    try:
        class Registered(Algorithm):
            name = "registered-test"

        class Intermediate(Registered):  # no name of its own: not a second entry
            pass

        assert REGISTRY["registered-test"] is Registered and Intermediate not in REGISTRY.values()
        with pytest.raises(TypeError, match="Two algorithms are called 'registered-test'"):
            class Clash(Algorithm):
                name = "registered-test"
    finally:
        REGISTRY.pop("registered-test", None)


def test_an_algorithm_in_one_file_trains_records_and_reports(tmp_path, shrink_registered, capsys):
    from application import cli
    from application.runner import execute, resolve_spec
    from fedcore.store import RunStore

    spec = resolve_spec({"algorithm": "shrink-test", "data": "demo", "params": {"strength": 0.3},
                         "config": {"rounds": 2, "dropout": 0.0}})
    run = RunStore(tmp_path).create(spec)
    execute(run)
    assert run.status.execution == "batched"  # its penalty rules out the compiled round
    record = run.rounds()[-1].algorithm
    assert isinstance(record, ShrinkRecord) and record.norm > 0
    assert cli.main(["show", run.id, "--store", str(tmp_path)]) == 0
    assert "Norm of the shared weights" in capsys.readouterr().out
    with pytest.raises(SpecError, match="overrides penalty, which the compiled path does not compute"):
        resolve_and_build("shrink-test", execution="compiled")


def resolve_and_build(name: str, **config) -> Simulation:
    return Simulation(make_federation(), build_algorithm(name), TrainConfig(rounds=1, **config))


def test_the_shrink_penalty_is_trained_as_the_per_site_path_defines_it(shrink_registered):
    """The batched executor and the per-site one give the same weights (dropout 0)."""
    results = {}
    for executor in ("per-site", "batched"):
        sim = resolve_and_build("shrink-test", execution=executor, dropout=0.0, momentum=0.0)
        sim.step()
        results[executor] = sim.stacked["head.weight"].clone()
    assert torch.allclose(results["per-site"], results["batched"], atol=1e-5)
