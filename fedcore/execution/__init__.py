"""How a round's local training runs: one `Executor` interface, four ways behind it.

    per-site    each site's torch module in turn (any model; defines what the others compute)
    batched     all sites as one computation in torch (any table model: its own modules under vmap,
                the paper's MLP by its hand-written pass where that pass is checked to compute it)
    compiled    the batched rounds in C, one site's whole round at a time (the paper's MLP, plain NLL, CPU)
    processes   wraps batched or compiled: the sites split among forked worker processes

`choose` is the one place a simulation's executor is picked (`train_alone`, for a model one holder
trains on its own rows, the one place its path is). 'auto' takes the first of compiled,
batched, per-site that can train the algorithm as the per-site path defines it (every training hook
it overrides computed there, its model supported, the machine able); naming an executor that cannot
raises SpecError with the reason. Nothing ever trains a silently different loss.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedcore.errors import SpecError
from fedcore.execution import compiled, processes, stacked
from fedcore.execution.base import Executor, Trainee
from fedcore.execution.batched import Batched
from fedcore.execution.compiled import Compiled
from fedcore.execution.per_site import PerSite
from fedcore.execution.processes import GroupFactory, Processes
from fedcore.training import train_locally

PREFERENCE = (Compiled, Batched, PerSite)  # 'auto' takes the first that can run
KINDS = {kind.name: kind for kind in PREFERENCE}


def choose(sim: Trainee, make_group: GroupFactory) -> Executor:
    """The executor that trains `sim` as its config asks; `make_group` builds the simulation of a
    group of its sites for worker processes."""
    config, algorithm = sim.config, sim.algorithm
    candidates = PREFERENCE if config.execution == "auto" else (KINDS[config.execution],)
    reasons = []
    for kind in candidates:
        why = kind.why_not(sim)
        if not why:
            break
        reasons.append(why)
    else:
        raise SpecError(f"{algorithm.title} cannot train with execution '{config.execution}' here: "
                        f"{'; '.join(reasons)}." + (" Use execution 'auto'." if config.execution != "auto" else ""))
    if not issubclass(kind, Batched):
        if config.processes > 1:
            raise SpecError(f"processes={config.processes} applies to the batched and compiled paths; "
                            f"{algorithm.title} trains here {kind.name} (use processes 1 or 0).")
        return kind(sim)
    groups = processes.count(config.processes, len(sim.models), sim.device.type == "cpu")
    return Processes(sim, kind, groups, make_group) if groups > 1 else kind(sim)


def train_alone(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float, batch_size: int, epochs: int,
                seed: int) -> float:
    """`model` trained in place on rows one holder has (FedHealth2's server model on its share of
    the sites' rows): plain SGD on the mean NLL, `epochs` passes in `batch_orders(seed)`. The
    paper's MLP trains as a federation of one site (`compiled.train_as_one_site`: the compiled round
    where it can run, else the batched torch pass, one dropout stream: the same model either way);
    any other model by the per-site loop. Returns the mean loss per batch."""
    if stacked.supports(model):
        return compiled.train_as_one_site(model, x, y, lr, batch_size, epochs, seed)
    return train_locally(model, torch.optim.SGD(model.parameters(), lr=lr), x, y,
                         lambda m, x, y: F.nll_loss(m(x), y), batch_size, epochs, seed)


__all__ = ["KINDS", "Executor", "choose", "train_alone"]
