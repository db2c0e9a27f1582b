"""One site of a Flower federation: its own rows, and the local update of the simulation.

A site reads only its own data, named in its SuperNode's node config:

    site           the site's name (what the dashboard shows; it also keys the site's hold-out
                   split and its random streams, exactly as in the simulation)
    data           a CSV file (read with the same ingestion and checks as `data_adapters`), or a
                   data reference (`csv:FILE,target=...`, `demo:site=NAME`, `heart:FOLDER`, ...);
                   a reference holding several sites keeps the one named `site`
    target         the CSV file's target column (when `data` is a bare file)
    share-local    whether the site sends the parameters that stay local to the server for the
                   algorithm's records (iFedAvg's b_in / w_in heatmaps); true by default
    share-profile  whether the site sends its federated statistics (the check-up's data lens:
                   summaries per feature and class, no rows); true by default
    min-count      the site's disclosure policy (`fedcore.interpret.disclosure`): the fewest rows
                   any statistic it sends describes (default 10, at least 3); its profile, and the
                   sums of a federated standardisation, are released at it
    dp-epsilon     the same policy's privacy budget per release: Laplace noise on its statistics'
                   values (differential privacy); none by default

Each round a site is the simulation of a federation of one: a `Simulation` over its own data,
whose model and optimiser momentum persist between rounds in Flower's `context.state`. It
trains with the same `train_locally`, algorithm loss and seeds (derived from the run seed, its
name and the round) as the in-process engine, so the two give the same weights. The server's
part of the algorithm (its setup, the class weights it chooses) stays at the server.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from flwr.app import MessageType, RecordDict

from data_adapters import SOURCES, load_federation, normalize_reference, reference_dict, standardization_sums
from fedcore.algorithms import build_algorithm
from fedcore.algorithms.base import AtSite
from fedcore.engine import Simulation, TrainConfig, resolve_device
from fedcore.errors import DataError
from fedcore.federation import Federation
from fedcore.original_units import Preprocessing
from application.flower import protocol
from fedcore.interpret.disclosure import Policy, released_description
from fedcore.outcome import code_version

MOMENTUM = "momentum"  # context.state: the optimiser's momentum buffers, by parameter name


def load_site(node_config: dict[str, Any], seed: int, pooled: dict[int, tuple[float, float]] | None = None
              ) -> Federation:
    """The federation of this site alone, split with the run's seed (and, for a federated
    standardisation, standardised with the server's `pooled` mean and SD). DataError says what
    is wrong with the node config or the data."""

    name = str(node_config.get("site") or "") or None
    data = str(node_config.get("data") or "")
    reference = site_reference(node_config)
    federation = load_federation(normalize_reference(reference), seed, pooled, disclosure=site_policy(node_config))
    names = federation.site_names
    if name is None and len(names) > 1:
        raise DataError(f"{data} holds the sites {', '.join(names)}; say which one this is with site='...'.")
    chosen = name or names[0]
    if chosen not in names:
        raise DataError(f"This SuperNode is site '{chosen}', but {data} holds {', '.join(names)}.")
    if len(names) == 1:
        return federation
    return replace(federation, sites=[s for s in federation.sites if s.name == chosen],
                   ground_truth=[g for g in federation.ground_truth if g.site == chosen])


def site_reference(node_config: dict[str, Any]) -> Any:
    """The data reference the node config names (a bare CSV file becomes one)."""
    name = str(node_config.get("site") or "") or None
    data = str(node_config.get("data") or "")
    if not data:
        raise DataError("This SuperNode's --node-config names no data: add data='FILE.csv' (with "
                        "target='COLUMN') or a data reference such as data='demo:site=Alder General'.")
    if data.partition(":")[0] in SOURCES:
        return data
    if not node_config.get("target"):  # a bare file: one CSV site
        raise DataError(f"This SuperNode's data is the file {data}; name its target column in "
                        "--node-config (target='COLUMN').")
    return {"source": "csv", "files": [data], "target": str(node_config["target"]),
            **({"site_names": [name]} if name else {})}


def site_policy(node_config: dict[str, Any]) -> Policy:
    """The disclosure policy the node config sets (min-count, dp-epsilon; the default where not set)."""
    return Policy.from_settings({key: node_config[key] for key in ("min-count", "dp-epsilon") if key in node_config})


def share_local(node_config: dict[str, Any]) -> bool:
    return _flag(node_config, "share-local")


def _flag(node_config: dict[str, Any], key: str) -> bool:
    """A true/false node config entry, true unless set otherwise."""
    value = node_config.get(key, True)
    return value if isinstance(value, bool) else str(value).lower() in ("true", "1", "yes", "on")


def site_simulation(federation: Federation, content: RecordDict) -> Simulation:
    """The site's model as of the round the message is for (built from the run seed, as in the
    simulation; the server's model and the site's own state are loaded next)."""
    spec = protocol.read_json(content[protocol.SPEC])
    weights = None
    if protocol.CLASS_WEIGHTS in content:
        weights = protocol.read_tensors(content[protocol.CLASS_WEIGHTS])["weights"][None]
    config = TrainConfig(**{**spec["config"], "execution": "per-site"})
    return Simulation(federation, AtSite(build_algorithm(spec["algorithm"], spec["params"]), weights), config)


def answer(kind: str, federation: Federation, node_config: dict[str, Any], state: RecordDict,
           content: RecordDict) -> RecordDict:
    """This site's reply to a message of type `kind` (see `protocol`); `state` keeps what the site
    holds between rounds (Flower's `context.state`)."""
    if kind == protocol.DESCRIBE:
        return describe(federation, node_config, content)
    if kind == protocol.PROFILE_QUERY:
        return profile(federation, node_config)
    if (kind in (MessageType.TRAIN, MessageType.EVALUATE) and needs_pooled(federation, node_config)
            and protocol.read_pooled(content) is None):
        raise DataError("This site standardises 'federated', but the server sent no pooled mean and SD; do the "
                        "site and the server run the same fedcore version?")
    if kind == MessageType.TRAIN:
        return train(federation, node_config, state, content)
    if kind == MessageType.EVALUATE:
        return evaluate(federation, state, content)
    raise DataError(f"A site does not answer messages of type {kind!r}.")


def describe(federation: Federation, node_config: dict[str, Any], content: RecordDict) -> RecordDict:
    """What the server may know of this site: names, sizes, classes (their counts as its disclosure
    policy releases them); never a row."""
    spec = protocol.read_json(content[protocol.SPEC])
    description = released_description(federation.describe(), site_policy(node_config))
    pooled = needs_pooled(federation, node_config)
    description.update(site=description.pop("sites")[0], share_local=share_local(node_config),
                       version=code_version(), device=str(resolve_device(spec["config"]["device"])),
                       profile_answered=not pooled)
    reply = RecordDict({protocol.SITE: protocol.json_record(description)})
    if pooled:  # what the server pools the standardisation from; the profile waits for the pooled values
        sums = standardization_sums(_only(site_reference(node_config), federation.site_names[0]),
                                    int(spec["config"]["seed"]), site_policy(node_config))[1]
        reply[protocol.SUMS] = protocol.arrays_record({"sums": sums})
    else:  # the profile question answered now: one message (a ClientApp process at this site) fewer
        for key, record in profile(federation, node_config).items():
            reply[key] = record
    return reply


def needs_pooled(federation: Federation, node_config: dict[str, Any]) -> bool:
    """A site read from its own data (`load_site`) that standardises 'federated': alone it would
    pool over itself, which is per-site standardisation. (A federation in Flower's simulation
    engine is standardised in memory, over all its sites, already.)"""
    return (bool(node_config.get("data"))
            and Preprocessing.from_json(federation.preprocessing).pooled)


def _only(reference: Any, site: str) -> Any:
    """A reference narrowed to one of its sites, where it holds several (a CSV with a site column
    or several files): the sums are this site's alone."""
    values = reference_dict(reference)
    if values.get("source") != "csv" or (len(values.get("files", [])) <= 1 and not values.get("site_column")):
        return reference
    raise DataError(f"Federated standardisation over Flower needs one file per site; this SuperNode's data hold "
                    f"several sites (site '{site}' among them).")


def profile(federation: Federation, node_config: dict[str, Any]) -> RecordDict:
    """This site's federated statistics (`fedcore.interpret.profile`), computed here from its own
    rows, as its disclosure policy releases them (with what it withheld, and the policy): the
    check-up's data lens without moving a row. Nothing when the node config says
    share-profile=false, or for images."""
    shared = _flag(node_config, "share-profile")
    if federation.profile is None or not shared:
        return RecordDict()
    name = federation.site_names[0]
    index = federation.profile.sites.index(name)
    arrays = {key: value[index] for key, value in federation.profile.arrays.items()}
    return RecordDict({protocol.PROFILE: protocol.arrays_record(arrays),
                       protocol.PROFILE_SITE: protocol.json_record(federation.profile.site_meta(name))})


def train(federation: Federation, node_config: dict[str, Any], state: RecordDict, content: RecordDict) -> RecordDict:
    """Score the received model if asked (the previous round's scores), then train on it."""
    sim = site_simulation(federation, content)
    _restore(sim, state, content)
    round_info = content[protocol.ROUND]
    reply = RecordDict()
    if round_info["evaluate"]:
        reply[protocol.SCORES] = protocol.metric_record(sim.evaluate()[sim.site_names[0]])
    sim.round = int(round_info["round"])
    sim.algorithm.start_round(sim)
    loss = sim.executor.train_site(0, float(round_info["lr"]))
    _keep(sim, state)
    statistics = sim.algorithm.server_step_locals(sim)
    policy = site_policy(node_config)
    if statistics and sim.train_sizes[0] < policy.min_count:
        raise DataError(f"{sim.site_names[0]} has {sim.train_sizes[0]} training rows, fewer than its disclosure "
                        f"policy's minimum ({policy.min_count}): it does not send {', '.join(statistics)} (statistics "
                        f"of those rows, which {sim.algorithm.title} reads at the server).")
    sent = [*sim.shared_names, *statistics]
    if share_local(node_config) and sim.config.is_evaluated(sim.round):
        sent += sim.algorithm.recorded_locals(sim)
    reply[protocol.MODEL] = protocol.array_record({name: sim.stacked[name][0] for name in dict.fromkeys(sent)})
    reply[protocol.TRAIN] = protocol.metric_record({"loss": loss})
    return reply


def evaluate(federation: Federation, state: RecordDict, content: RecordDict) -> RecordDict:
    """The received model's scores on this site's own hold-out."""
    sim = site_simulation(federation, content)
    _restore(sim, state, content)
    return RecordDict({protocol.SCORES: protocol.metric_record(sim.evaluate()[sim.site_names[0]])})


@torch.no_grad()
def _restore(sim: Simulation, state: RecordDict, content: RecordDict) -> None:
    """The site's own tensors and momentum from earlier rounds, then the model it receives."""
    model = sim.models[0]
    if protocol.MODEL in state:
        for name, value in protocol.read_tensors(state[protocol.MODEL]).items():
            sim.stacked[name][0].copy_(value)
    if MOMENTUM in state:
        optimizer, parameters = sim.executor.optimizers[0], dict(model.named_parameters())
        for name, value in protocol.read_tensors(state[MOMENTUM]).items():
            optimizer.state[parameters[name]]["momentum_buffer"] = value.to(sim.device)
    for name, value in protocol.read_tensors(content[protocol.MODEL]).items():
        if name not in sim.shared_names:
            raise DataError(f"The server sent {name}, which this site keeps local; do the site and the "
                            "server run the same fedcore version?")
        sim.stacked[name][0].copy_(value)


def _keep(sim: Simulation, state: RecordDict) -> None:
    optimizer = sim.executor.optimizers[0]
    state[protocol.MODEL] = protocol.array_record({name: value[0] for name, value in sim.stacked.items()})
    state[MOMENTUM] = protocol.array_record({
        name: optimizer.state[p]["momentum_buffer"] for name, p in sim.models[0].named_parameters()
        if optimizer.state.get(p, {}).get("momentum_buffer") is not None
    })
