"""What the server and the sites say to each other: the records of every message, by name.

    server -> site                               site -> server
    describe (query)  SPEC                      SITE: its description (names, sizes, features,
                                                      classes; no rows)
    profile (query)   SPEC                      PROFILE: its federated statistics (per feature and
                                                      class, original units; no rows) as its
                                                      disclosure policy releases them, and
                                                      PROFILE_SITE: that policy and what it
                                                      withheld, unless its node config says
                                                      share-profile=false
    train             SPEC, ROUND, MODEL,       MODEL: its shared tensors after training, and the
                      CLASS_WEIGHTS (if the           local ones ROUND asked for; TRAIN: its loss;
                      algorithm sets them)            SCORES: the received model's scores on its
                                                      hold-out (when ROUND asks to evaluate first)
    evaluate          SPEC, ROUND, MODEL        SCORES
A site whose statistics need nothing from the server (it does not standardise 'federated') adds
its profile reply (PROFILE, PROFILE_SITE; nothing when it keeps them) to its describe reply and says
so (its description's "profile_answered"): the server then asks no profile question, one message
and one ClientApp process fewer per site and run.
A site that standardises 'federated' adds SUMS to its describe reply: the count, sum and sum of
squares of each feature over its training rows (original units) as its disclosure policy releases
them (a feature of too few rows sends zeros, the sums are rounded), nothing else. When every site
does, the server pools the sums into each continuous
feature's mean and SD and sends them in SPEC (its POOLED entry) with every later message: a site
standardises its rows with them, as the simulation does with the same values
(`data_adapters.assembly.assemble`).

SPEC is the run's spec (algorithm, params, engine config), sent each time because a site keeps
nothing but its own tensors between rounds. Tensors travel as numpy arrays (never pickled).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord

SPEC, SITE, ROUND, MODEL, CLASS_WEIGHTS, TRAIN, SCORES, PROFILE, PROFILE_SITE, SUMS, POOLED = (
    "spec", "site", "round", "model", "class_weights", "train", "scores", "profile", "profile_site", "sums", "pooled",
)
# Message types a site answers (Flower's train / evaluate / query actions).
DESCRIBE = "query.describe"
PROFILE_QUERY = "query.profile"


def json_record(value: Any) -> ConfigRecord:
    return ConfigRecord({"json": json.dumps(value)})


def read_json(record: ConfigRecord) -> Any:
    return json.loads(str(record["json"]))


def array_record(tensors: dict[str, torch.Tensor]) -> ArrayRecord:
    return ArrayRecord({name: Array(t.detach().cpu().contiguous().numpy()) for name, t in tensors.items()})


def arrays_record(arrays: dict[str, Any]) -> ArrayRecord:
    """numpy arrays as they are (dtype kept; never pickled)."""
    return ArrayRecord({name: Array(np.ascontiguousarray(value)) for name, value in arrays.items()})


def read_arrays(record: ArrayRecord) -> dict[str, Any]:
    return {name: array.numpy().copy() for name, array in record.items()}


def read_tensors(record: ArrayRecord) -> dict[str, torch.Tensor]:
    return {name: torch.from_numpy(array.numpy().copy()) for name, array in record.items()}


def metric_record(values: dict[str, float]) -> MetricRecord:
    return MetricRecord({name: float(value) for name, value in values.items()})


def with_pooled(spec: dict[str, Any], pooled: dict[int, tuple[float, float]]) -> dict[str, Any]:
    """The spec sent to the sites, carrying the pooled mean and SD of each standardised feature
    (JSON keeps every float exactly)."""
    return {**spec, POOLED: {str(j): [m, s] for j, (m, s) in pooled.items()}}


def read_pooled(content: Any) -> dict[int, tuple[float, float]] | None:
    """The pooled standardisation a message's SPEC carries, if any (feature index -> mean, SD)."""
    if SPEC not in content:
        return None
    pooled = read_json(content[SPEC]).get(POOLED)
    return None if pooled is None else {int(j): (float(m), float(s)) for j, (m, s) in pooled.items()}
