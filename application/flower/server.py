"""The server of a Flower federation: the same server side of a round as the simulation, fed by
the sites' messages, writing the run into the run store.

    1. wait for the SuperNodes, ask each to describe its data (name, sizes, features, classes)
       and check that the sites can train one model together; when they standardise 'federated'
       (each sends its counts, sums and sums of squares with its description), pool each
       feature's mean and SD and send it with every later message; ask each for its federated statistics (the check-up's data
       lens, `fedcore.interpret.profile`), stored as profile.npz;
    2. every round: send each site the model it receives (its row of the stacked shared tensors:
       the same for all sites under FedAvg, its own under FedHealth2) and, if the algorithm sets
       them, its class weights; take back the trained shared tensors, and the local ones the
       algorithm's server reads (`Algorithm.server_step_locals`, `recorded_locals`); then the
       algorithm's own mixing and server step (`FederatedModels.aggregate`) and, at evaluated
       rounds, its `record`;
    3. a site scores the model it receives before training on it: those scores belong to the
       previous round, whose record is written when they arrive; after the last round the sites
       are asked for the scores alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from flwr.app import ConfigRecord, Message, MessageType, RecordDict
from flwr.serverapp import Grid

from data_adapters import load_federation, pooled_from_sums
from fedcore.algorithms import build_algorithm
from fedcore.algorithms.base import Algorithm
from fedcore.engine import FederatedModels, TrainConfig, round_record
from fedcore.errors import DataError, FedcoreError
from fedcore.federation import Federation, Site
from fedcore.injected import InjectedProblem
from application.flower import protocol
from fedcore.interpret.profile import Profile, read_disclosure
from fedcore.outcome import summarize
from fedcore.records import Record, Withheld
from fedcore.store import FlowerReference, Run

POLL_S = 0.25  # how often the server asks the SuperLink for replies


class FlowerServer(FederatedModels):
    """Every site's model stacked as in the simulation, each row filled from that site's replies.
    The server holds the sites' names and sizes, none of their rows."""

    def receive(self, site: int, tensors: dict[str, torch.Tensor]) -> None:
        name = self.site_names[site]
        for key, value in tensors.items():
            if key not in self.stacked or self.stacked[key][site].shape != value.shape:
                raise FedcoreError(f"Site '{name}' sent a tensor {key} of shape {tuple(value.shape)} that this "
                                   "model does not have; do the site and the server run the same fedcore version?")
            with torch.no_grad():
                self.stacked[key][site].copy_(value)

    def model_for(self, site: int) -> dict[str, torch.Tensor]:
        """What the site receives: its row of every shared tensor."""
        return {name: self.stacked[name][site] for name in self.shared_names}


@dataclass
class Node:
    node_id: int
    name: str  # the site's name once it has described itself


class Sites(Protocol):
    """How the server reaches the sites: over a Flower Grid (`GridSites`), or in tests directly."""

    def connect(self, wanted: int, wait_s: float) -> list[Node]:
        """The sites connected once `wanted` are (FedcoreError after `wait_s` seconds)."""

    def exchange(self, nodes: list[Node], contents: list[RecordDict], kind: str, round_: int,
                 timeout: float) -> list[RecordDict]:
        """Send one message to every site; all replies in the nodes' order, else FedcoreError naming
        the site that failed or did not answer."""


def serve(sites: Sites, run: Run, flower_run_id: int) -> None:
    """Run the federation the run's spec describes; records everything, and the final state."""
    try:
        _serve(sites, run, flower_run_id)
    except BaseException as error:
        state = "cancelled" if isinstance(error, (KeyboardInterrupt, SystemExit)) else "failed"
        message = str(error) if isinstance(error, FedcoreError) else f"{type(error).__name__}: {error}"
        run.mark_finished(state, message)
        raise


def _serve(sites: Sites, run: Run, flower_run_id: int) -> None:
    spec = run.spec
    reference = spec.flower
    config = TrainConfig(**spec.config)
    algorithm = build_algorithm(spec.algorithm, spec.params)
    site_spec = {"algorithm": spec.algorithm, "params": spec.params, "config": spec.config}
    run.heartbeat(flower_run=flower_run_id, phase=f"waiting for {reference.sites} sites")
    nodes, descriptions, sums, described = _described_sites(sites, reference, site_spec)
    federation = server_federation(descriptions, reference, config.seed)
    pooled = _pooled_standardization(nodes, descriptions, sums)
    if pooled is not None:  # every later message carries it: each site standardises with it
        site_spec = protocol.with_pooled(site_spec, pooled)
    run.write_federation(_federation_record(federation, descriptions, reference, pooled))
    answered = pooled is None and all(d.get("profile_answered") for d in descriptions)
    profile = _profiles(sites, nodes, site_spec, reference.wait_s, described if answered else None)
    if profile is not None:
        run.save_profile(profile.to_npz())
    server = FlowerServer(federation, algorithm, config, [d["site"]["n_train"] for d in descriptions])
    algorithm.setup(server)
    withheld = [d["site"]["name"] for d in descriptions if not d["share_local"]]
    run.heartbeat(phase="training", device=f"each site's own ({len(nodes)} Flower sites)")
    history = _train(sites, nodes, server, run, site_spec, withheld)
    run.save_model({name: server.stacked[name].cpu().numpy() for name in server.shared_names})
    run.write_summary(summarize(run, history[-1]))
    run.mark_finished("done")


def _described_sites(sites: Sites, reference: FlowerReference, site_spec: dict
                     ) -> tuple[list[Node], list[dict], list, list[RecordDict]]:
    """The connected sites, their descriptions, their standardisation sums (None where a site
    does not standardise 'federated') and their replies, in the order of the sites' names
    (whichever node ids Flower gave them)."""
    nodes = sites.connect(reference.sites, reference.wait_s)
    contents = [RecordDict({protocol.SPEC: protocol.json_record(site_spec)}) for _ in nodes]
    replies = sites.exchange(nodes, contents, protocol.DESCRIBE, 0, reference.wait_s)
    descriptions = [protocol.read_json(reply[protocol.SITE]) for reply in replies]
    sums = [protocol.read_arrays(reply[protocol.SUMS])["sums"] if protocol.SUMS in reply else None for reply in replies]
    for node, description in zip(nodes, descriptions):
        node.name = description["site"]["name"]
    ordered = sorted(zip(nodes, descriptions, sums, replies), key=lambda site: site[0].name)
    if not ordered:
        return [], [], [], []
    nodes, descriptions, sums, replies = (list(column) for column in zip(*ordered))
    return nodes, descriptions, sums, replies


def _pooled_standardization(nodes: list[Node], descriptions: list[dict],
                            sums: list) -> dict[int, tuple[float, float]] | None:
    """When every site standardises 'federated': each continuous feature's mean and SD over all
    sites' training rows, from the count, sum and sum of squares each sent with its description
    (no row moves). None when no site does; DataError when some do and some do not (their
    inputs would not be on one scale)."""
    federated = [node.name for node, part in zip(nodes, sums) if part is not None]
    if not federated:
        return None
    if len(federated) < len(nodes):
        others = ", ".join(node.name for node in nodes if node.name not in federated)
        raise DataError(f"Sites {', '.join(federated)} standardise 'federated' but {others} do not: every site "
                        "needs the same standardization in its data reference.")
    return pooled_from_sums(sum(sums), descriptions[0]["feature_kinds"])


def _profiles(sites: Sites, nodes: list[Node], site_spec: dict, timeout: float,
              described: list[RecordDict] | None = None) -> Profile | None:
    """Every site's federated statistics, each computed at its site (None when a site keeps its
    own to itself, or for images): from their describe replies (`described`) when every site
    answered there, else asked for (sites that standardise 'federated' compute them with the
    pooled mean and SD the server sends)."""
    replies = described
    if replies is None:
        contents = [RecordDict({protocol.SPEC: protocol.json_record(site_spec)}) for _ in nodes]
        replies = sites.exchange(nodes, contents, protocol.PROFILE_QUERY, 0, timeout)
    if not replies or any(protocol.PROFILE not in reply for reply in replies):
        return None
    metas = [protocol.read_json(reply[protocol.PROFILE_SITE]) for reply in replies]
    meta = metas[0]
    per_site = [protocol.read_arrays(reply[protocol.PROFILE]) for reply in replies]
    # what each site says it withheld, and why (a statistic it did not send is NaN, NOT_RECORDED), and
    # the disclosure policy it released at (a site that says none: not recorded)
    withheld, policies = {}, {}
    for node, m in zip(nodes, metas):
        reasons, released_at = read_disclosure(m)
        withheld[node.name] = {name: why for entries in reasons.values() for name, why in entries.items()}
        if released_at:
            policies[node.name] = next(iter(released_at.values()))
    return Profile.of_sites(per_site, [node.name for node in nodes], meta["features"], meta["kinds"], meta["columns"],
                            meta["classes"], meta.get("units"), withheld, policies)


def _train(sites: Sites, nodes: list[Node], server: FlowerServer, run: Run, site_spec: dict,
           withheld: list[str]) -> list[dict[str, Any]]:
    """Every round through the sites; returns the records written."""
    config, algorithm, timeout = server.config, server.algorithm, run.spec.flower.round_timeout_s
    started = time.perf_counter()
    pending = None  # an evaluated round's record, waiting for the sites' scores
    history = []
    for round_ in range(1, config.rounds + 1):
        server.round = round_
        lr = config.lr_at(round_)
        weights = algorithm.class_weights(server)
        contents = []
        for site in range(len(nodes)):
            content = _to_site(site_spec, server, site, round_, lr, evaluate=pending is not None)
            if weights is not None:
                content[protocol.CLASS_WEIGHTS] = protocol.array_record({"weights": weights[site]})
            contents.append(content)
        replies = sites.exchange(nodes, contents, MessageType.TRAIN, round_, timeout)
        if pending is not None:
            history.append(_write_record(run, pending, nodes, replies))
        for site, reply in enumerate(replies):
            server.receive(site, protocol.read_tensors(reply[protocol.MODEL]))
        server.aggregate()
        pending = None
        if config.is_evaluated(round_):
            train_loss = {node.name: float(reply[protocol.TRAIN]["loss"]) for node, reply in zip(nodes, replies)}
            scalars, arrays = _algorithm_record(algorithm, server, withheld)
            pending = (round_, time.perf_counter() - started, lr, train_loss, scalars, arrays)
        run.heartbeat(round=round_)
    contents = [_to_site(site_spec, server, site, config.rounds, 0.0, evaluate=True) for site in range(len(nodes))]
    replies = sites.exchange(nodes, contents, MessageType.EVALUATE, config.rounds + 1, timeout)
    history.append(_write_record(run, pending, nodes, replies))
    return history


def server_federation(descriptions: list[dict[str, Any]], reference: FlowerReference, seed: int) -> Federation:
    """The server's view of the federation: the sites' names and the shape of their data, no rows;
    with the server's own test set when the reference names server data. DataError when the sites
    cannot train one model together."""
    first = descriptions[0]
    names = [d["site"]["name"] for d in descriptions]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise DataError(f"Several SuperNodes call their site {', '.join(repeated)}; give each its own "
                        "site='...' in --node-config.")
    for other in descriptions[1:]:
        for key, what in (("feature_names", "features"), ("feature_kinds", "feature kinds"),
                          ("class_names", "classes")):
            if other[key] != first[key]:
                raise DataError(f"Sites '{first['site']['name']}' and '{other['site']['name']}' cannot train one "
                                f"model: {what} differ ({_difference(first[key], other[key])}). Prepare their "
                                "files with the same columns and target values.")
    n_features = len(first["feature_names"])
    empty, no_labels = torch.empty(0, n_features), torch.empty(0, dtype=torch.int64)
    synthetic = all(d["synthetic"] for d in descriptions)
    data_description = " ".join(dict.fromkeys(d["description"] for d in descriptions))
    return Federation(
        name=" / ".join(dict.fromkeys(d["name"] for d in descriptions)) + " (Flower federation)",
        description=("Each site trained on its own rows in its own process (Flower); no row left a site. "
                     + data_description),
        sites=[Site(name, empty, no_labels, empty, no_labels) for name in names],
        feature_names=list(first["feature_names"]),
        feature_kinds=list(first["feature_kinds"]),
        class_names=list(first["class_names"]),
        ground_truth=[InjectedProblem.from_json(truth) for d in descriptions for truth in d["ground_truth"]],
        synthetic=synthetic,
        warnings=[w for d in descriptions for w in d["warnings"]],
        source=f"flower:{reference.superlink}",
        preprocessing={d["site"]["name"]: d["preprocessing"] for d in descriptions},
        server_test=_server_test(reference, first, seed),
    )


def _server_test(reference: FlowerReference, site: dict[str, Any], seed: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The server's own test set: its data's server test set, else all of its rows; a table mapped
    by the sites' data dictionary where its reference names none."""
    if not reference.server_data:
        return None
    # the sites' data dictionary maps the server's data too, unless its reference names its own
    dictionary = ((site.get("preprocessing") or {}).get("dictionary") or {}).get("content")
    own = load_federation(reference.server_data, seed, dictionary=dictionary)
    if own.feature_names != site["feature_names"] or own.class_names != site["class_names"]:
        raise DataError("The server's data (server_data) do not have the sites' features and classes: "
                        f"{_difference(site['feature_names'], own.feature_names) or 'classes differ'}.")
    if own.server_test is not None:
        return own.server_test
    return (torch.cat([t for s in own.sites for t in (s.x_train, s.x_test)]),
            torch.cat([t for s in own.sites for t in (s.y_train, s.y_test)]))


def _federation_record(federation: Federation, descriptions: list[dict], reference: FlowerReference,
                       pooled: dict[int, tuple[float, float]] | None = None) -> dict[str, Any]:
    """federation.json: as for a simulated run, with each site's sizes as the site reported them
    (and the pooled standardisation the server sent, by feature)."""
    return {
        **federation.describe(),
        "sites": [d["site"] for d in descriptions],
        "flower": {
            **({"pooled_standardization": {federation.feature_names[j]: {"mean": m, "sd": s}
                                           for j, (m, s) in pooled.items()}} if pooled else {}),
            "superlink": reference.superlink,
            "sites": {d["site"]["name"]: {"share_local": d["share_local"], "version": d["version"],
                                          "device": d["device"]} for d in descriptions},
        },
    }


def _to_site(spec: dict, server: FlowerServer, site: int, round_: int, lr: float, evaluate: bool) -> RecordDict:
    return RecordDict({
        protocol.SPEC: protocol.json_record(spec),
        protocol.ROUND: ConfigRecord({"round": round_, "lr": lr, "evaluate": evaluate}),
        protocol.MODEL: protocol.array_record(server.model_for(site)),
    })


def _algorithm_record(algorithm: Algorithm, server: FlowerServer, withheld: list[str]) -> tuple[Record, dict]:
    """The algorithm's own record, unless it reads local tensors some sites keep to themselves."""
    if withheld and algorithm.recorded_locals(server):
        return Withheld(withheld, f"{', '.join(withheld)} keep {', '.join(algorithm.recorded_locals(server))} to "
                                  "themselves (share-local=false), so this round has no record of them."), {}
    return algorithm.record(server)


def _write_record(run: Run, pending: tuple, nodes: list[Node], replies: list[RecordDict]) -> dict[str, Any]:
    round_, elapsed, lr, train_loss, scalars, arrays = pending
    sites = {node.name: {k: float(v) for k, v in reply[protocol.SCORES].items()} for node, reply in zip(nodes, replies)}
    record = round_record(round_, elapsed, lr, train_loss, sites, scalars)
    run.append_round(record)
    if arrays:
        run.save_arrays(round_, arrays)
    run.heartbeat(mean=record["mean"], worst=record["worst"], recorded_round=round_)
    return record


class GridSites:
    """The sites behind a Flower Grid (the SuperLink's, or the simulation engine's)."""

    def __init__(self, grid: Grid) -> None:
        self.grid = grid

    def connect(self, wanted: int, wait_s: float) -> list[Node]:
        deadline = time.monotonic() + wait_s
        while True:
            node_ids = sorted(self.grid.get_node_ids())
            if len(node_ids) >= wanted:
                return [Node(node_id, f"SuperNode {node_id}") for node_id in node_ids]
            if time.monotonic() > deadline:
                raise FedcoreError(f"Only {len(node_ids)} of the {wanted} sites connected to the SuperLink within "
                                   f"{wait_s:g} s; start a SuperNode per site (README, 'Real federations over Flower').")
            time.sleep(POLL_S * 4)

    def exchange(self, nodes: list[Node], contents: list[RecordDict], kind: str, round_: int,
                 timeout: float) -> list[RecordDict]:
        messages = [Message(content, dst_node_id=node.node_id, message_type=kind, group_id=str(round_))
                    for node, content in zip(nodes, contents)]
        waiting = {message_id: node for message_id, node in zip(self.grid.push_messages(messages), nodes)}
        replies: dict[int, Message] = {}
        deadline = time.monotonic() + timeout
        while waiting:
            for reply in self.grid.pull_messages(list(waiting)):
                node = waiting.pop(reply.metadata.reply_to_message_id)
                if reply.has_error():
                    raise FedcoreError(f"Site '{node.name}' failed ({kind}, round {round_}): {reply.error.reason}")
                replies[node.node_id] = reply
            if waiting and time.monotonic() > deadline:
                names = ", ".join(node.name for node in waiting.values())
                raise FedcoreError(f"No answer from {names} within {timeout:g} s ({kind}, round {round_}).")
            if waiting:
                time.sleep(POLL_S)
        return [replies[node.node_id].content for node in nodes]


def _difference(ours: list, theirs: list) -> str:
    only_ours = [x for x in ours if x not in theirs]
    only_theirs = [x for x in theirs if x not in ours]
    if not only_ours and not only_theirs:
        return "the same values in another order"
    return "; ".join(part for part in (f"only the first: {only_ours}" if only_ours else "",
                                       f"only the second: {only_theirs}" if only_theirs else "") if part)
