"""The run store: everything a run leaves on disk, readable without torch.

    <root>/<run id>/
        spec.json          what was asked: algorithm, data, every hyperparameter, seed, device
        federation.json    sites, sizes, features, classes, ground truth of injected shifts
        status.json        state, progress, heartbeat, pid, error text (rewritten atomically)
        status.reserve     space set aside so the final state can be written on a full disk
        rounds.jsonl       one JSON line per evaluated round, append-only
        arrays/r000010.npz per-round arrays (b_in, w_in, marks, similarity matrices, ...)
        summary.json       final per-site metrics, mean and worst site (written at the end)
        identity.json      what people call it: a number in its store, a name and tags (editable)
        model.npz          Flower runs: each site's final shared parameters, as the server holds them
        profile.npz        every site's federated statistics (tables; the check-up's data lens)

What the store guarantees:
- Every whole-file write goes to a temporary file that is renamed into place, so a killed worker
  leaves either the old or the new file. The append-only log may end in a torn line; readers
  skip it, and a failed append is cut back so the next one starts on a fresh line. Arrays are
  npz read with `allow_pickle=False`: nothing here ever unpickles.
- Reading never raises on a damaged file. Each file has a declared shape (below); a run whose
  files are missing, empty, cut off, garbled or of the wrong shape reads as *damaged*, with the
  file and the problem (`Run.damage`), and the values read from it keep only what fits. Arrays
  are checked when loaded (`RunDamaged` names the file).
- A run's final state reaches disk even on a full disk: the small status is written first, and
  when that fails the reserve is given up and the write retried, then status.json overwritten
  in place; a final state that still could not be written is kept in memory for `flush_status`.
- Run ids are created exclusively (a new run is written in a hidden folder, then renamed to an
  id no other run has; 32 random bits besides the time), and an id is a plain folder name of
  the store: `RunStore.get` refuses paths before touching the disk.
"""

from __future__ import annotations

import errno
import fcntl
import io
import json
import math
import os
import re
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from fedcore.data_labels import shortened
from fedcore.injected import STORED_KEYS as INJECTED_PROBLEM_KEYS
from fedcore.injected import InjectedProblem
from fedcore.original_units import Preprocessing, Scale, feature_scales, is_scale_pair
from fedcore.errors import FedcoreError, RunNotFound, SpecError
from fedcore.kept import Kept
from fedcore.records import Record as AlgorithmRecord
from fedcore.records import RECORDS, read_record
from fedcore.shapes import (ANY, FLAG, NUMBER, SCALAR, TEXT, WHOLE, Damage, Either, Field, ListOf, MapOf, Nullable,
                            OneOf, Record, RunDamaged, Scalar, Shape, npz_damage, read_json_lines, read_npz, required)
from fedcore.shapes import _key
from fedcore.shapes import read_json as read_json_shaped

STATES = ("queued", "running", "done", "failed", "cancelled", "interrupted")
NAME_LENGTH, TAG_LENGTH, MAX_TAGS = 80, 32, 12
IDENTITY_MAX_BYTES = 16_384  # identity.json as set_identity writes it is well under 1 KB
FINISHED = frozenset({"done", "failed", "cancelled", "interrupted"})


def default_root() -> Path:
    """`$FEDCORE_STORE`, else `runs/` in the working directory (the repo root for make/app)."""
    return Path(os.environ.get("FEDCORE_STORE", "runs"))


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def json_safe(value: Any) -> Any:
    """Replace NaN / inf by None (strict JSON) and numpy scalars / arrays by Python values."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    text = json.dumps(json_safe(obj), indent=2, allow_nan=False)
    atomic_write_bytes(path, text.encode("utf-8"))


def read_json(path: Path, default: Any = None, shape: Shape = ANY) -> Any:
    """A small JSON file of the given shape, or `default` when it is missing or damaged (for
    settings that can always start again from their default)."""
    value, damage = read_json_shaped(path, shape, path.name, missing_ok=True)
    return default if value is None or damage else value


# -- what each file holds ----------------------------------------------------------------------
# Declared for the fields readers use; other fields pass unchanged. Defaults are what a reader
# sees in place of a missing or misfit value (so `spec["config"]` is always an object).
METRIC_VALUES = MapOf(Nullable(NUMBER))  # metric -> value (null where undefined)
SITE_METRICS = MapOf(METRIC_VALUES)  # site -> metrics

FLOWER_SOURCE = "flower"
# A Flower federation's data reference, as resolved when its run was made (every key written)
FLOWER_REFERENCE = Record({
    "source": required(OneOf([FLOWER_SOURCE])), "superlink": required(TEXT), "sites": required(WHOLE),
    "wait_s": required(NUMBER), "round_timeout_s": required(NUMBER),
    "server_data": required(Nullable(Either(TEXT, MapOf(ANY)))),
})


def _is_flower(data: Any) -> bool:
    return isinstance(data, Mapping) and data.get("source") == FLOWER_SOURCE


def _spec_consistent(spec: dict[str, Any]) -> list[str]:
    """A Flower reference has every key its server reads (other references are the data adapters')."""
    problems: list[str] = []
    if _is_flower(spec.get("data")):
        FLOWER_REFERENCE.fit(spec["data"], "data", problems)
    return problems


SPEC = Record({
    "algorithm": required(TEXT),
    "data": required(Either(TEXT, MapOf(ANY))),
    "params": required(MapOf(Either(SCALAR, ListOf(SCALAR)))),
    "config": required(Record({"rounds": required(WHOLE), "seed": required(WHOLE)})),
    "disclosure": Nullable(MapOf(ANY)), "record": TEXT,
    "version": TEXT, "run_id": TEXT, "created": TEXT,
}, check=_spec_consistent)

# Never 0 or negative: os.kill would signal a whole process group, or every process.
PROCESS_ID = Scalar("a process id (a whole number above 0)", lambda v: WHOLE.test(v) and v > 0)

STATUS = Record({
    "state": required(OneOf(STATES)),
    "round": WHOLE, "total_rounds": WHOLE, "recorded_round": WHOLE, "processes": WHOLE, "pid": PROCESS_ID,
    "started_at": NUMBER, "heartbeat": NUMBER, "launched": NUMBER, "cancel_requested": NUMBER,
    "updated": TEXT, "started": TEXT, "finished": TEXT, "host": TEXT, "device": TEXT, "execution": TEXT,
    "execution_description": TEXT, "phase": TEXT, "error": Nullable(TEXT), "mean": METRIC_VALUES,
    "worst": METRIC_VALUES, "flower_run": Either(WHOLE, TEXT),
})


def _federation_consistent(federation: dict[str, Any]) -> list[str]:
    """Ground truth and the preprocessing record's scales must name sites and features the
    federation has (the lenses look them up)."""
    sites = {s["name"] for s in federation.get("sites", []) if "name" in s}  # (one without is named already)
    features = set(federation.get("feature_names", []))
    problems = []
    for i, truth in enumerate(_whole_truth(federation)):
        if truth["site"] not in sites:
            problems.append(f"'ground_truth[{i}].site' names no site of the federation")
        if truth["feature"] is not None and truth["feature"] not in features:
            problems.append(f"'ground_truth[{i}].feature' names no feature of the federation")
    for site, by_feature in ((federation.get("preprocessing") or {}).get("scales") or {}).items():
        where = f"'preprocessing.scales.{_key(site)}"
        if site not in sites:
            problems.append(f"{where}' names no site of the federation")
        problems += [f"{where}.{_key(feature)}' names no feature of the federation"
                     for feature in by_feature if feature not in features]
    return problems


SITE = Record({
    "name": required(TEXT), "n_train": WHOLE, "n_test": WHOLE,
    # a class count a site's disclosure policy withheld is null
    "train_class_counts": ListOf(Nullable(WHOLE)), "test_class_counts": ListOf(Nullable(WHOLE)),
})
def _whole_truth(federation: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The fitted ground truth when every entry has every key an entry must have, else none: an
    entry without its site or feature is named as damage, and a detection report checked against
    the others would count fewer problems than were injected."""
    truth = federation.get("ground_truth", [])
    return truth if all(INJECTED_PROBLEM.ok(entry) for entry in truth) else []


# one entry of federation.json's ground truth (fedcore.injected.InjectedProblem): every entry has
# the first four keys ('feature' null for a label problem), some kinds their particulars
INJECTED_PROBLEM = Record({
    "site": required(TEXT), "feature": required(Nullable(TEXT)), "kind": required(TEXT), "detail": required(TEXT),
    "amount": Nullable(NUMBER), "class": TEXT, "box": Record({"row": required(WHOLE), "col": required(WHOLE),
                                                    "size": required(WHOLE)}),
    "column": TEXT, "features": ListOf(TEXT), "other": TEXT,
})
# the parts of the preprocessing record readers use (fedcore.original_units.Preprocessing); the
# data adapters write more, and a Flower run's server one record per site, kept as stored
PREPROCESSING = Record({
    "standardization": TEXT, "units": MapOf(ANY),
    "scales": MapOf(MapOf(Scalar("a [mean, SD] pair of numbers", is_scale_pair))),
})
# a Flower run's server record (application.flower.server)
FLOWER_SERVER = Record({"superlink": required(TEXT), "sites": required(MapOf(MapOf(ANY))),
                        "pooled_standardization": MapOf(MapOf(NUMBER))})
FEDERATION = Record({
    "name": TEXT, "description": TEXT, "source": TEXT, "synthetic": FLAG,
    "sites": required(ListOf(SITE), list),
    "feature_names": required(ListOf(TEXT), list),
    "feature_kinds": ListOf(TEXT),
    "class_names": required(ListOf(TEXT), list),
    "input_shape": ListOf(WHOLE),
    "ground_truth": Field(ListOf(INJECTED_PROBLEM), default=list),
    "warnings": Field(ListOf(TEXT), default=list),
    "preprocessing": PREPROCESSING, "flower": FLOWER_SERVER,
}, check=_federation_consistent)

DETECTION = Record({
    "caught": required(WHOLE), "checkable": required(WHOLE),
    "injected": required(ListOf(Record({
        "site": required(TEXT), "feature": Nullable(TEXT), "detail": required(TEXT),
        "caught": required(Nullable(FLAG)), "evidence": required(ListOf(TEXT)),
    }))),
    "false_positives": required(ListOf(Record({
        "site": required(TEXT), "layer": required(TEXT), "column": required(Either(TEXT, WHOLE)),
    }))),
})

_SCORES = {
    "round": required(WHOLE), "sites": required(SITE_METRICS), "mean": required(METRIC_VALUES),
    "worst": required(METRIC_VALUES), "worst_site": MapOf(Nullable(TEXT)), "algorithm": MapOf(ANY),
}
SUMMARY = Record({**_SCORES, "detection": DETECTION})
ROUND = Record({**_SCORES, "elapsed_s": NUMBER, "lr": NUMBER, "train_loss": MapOf(Nullable(NUMBER))})
FILES = {"spec.json": SPEC, "status.json": STATUS, "federation.json": FEDERATION, "summary.json": SUMMARY}


# -- what a reader gets: each file as the typed object it holds ----------------------------------
# The shapes above say what the JSON must be; the classes below are what readers get. A field's
# default is what a run sees where its file lacks the value (a run written by an earlier version,
# or a value that did not fit, which `Run.damage` lists): these defaults are the only ones.
Metrics = Mapping[str, float | None]  # metric name (fedcore.metric_names) -> value, None where undefined


_NOT_GIVEN = object()


@dataclass(frozen=True)
class FlowerReference:
    """The data of a run over a Flower federation (`flower:HOST:PORT,sites=N`): where its sites
    are reached, and how long the server waits for them. `data_adapters.flower_reference` builds
    and checks it; a spec stores `to_json()` and `Spec.flower` reads it back."""

    source: str = field(default=FLOWER_SOURCE, init=False)
    superlink: str  # HOST:PORT of the SuperLink
    sites: int = 2  # how many SuperNodes the run waits for
    wait_s: float = 120.0  # how long it waits for them (and for each to describe its data)
    round_timeout_s: float = 600.0  # how long a round waits for every site's reply
    server_data: str | Mapping[str, Any] | None = None  # the server's own data (a data reference)

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Spec:
    """spec.json: what was asked."""

    algorithm: str = ""
    data: str | Mapping[str, Any] | None = None  # the data reference (data_adapters.check_reference)
    params: Mapping[str, Any] = field(default_factory=dict)  # the algorithm's hyperparameters, by name
    config: Mapping[str, Any] = field(default_factory=dict)  # the engine settings (fedcore.config.TrainConfig)
    disclosure: Mapping[str, Any] | None = None  # the sites' disclosure policy; None for Flower runs
    record: str = "none"  # the kind of the rounds' algorithm records (fedcore.records)
    version: str | None = None
    run_id: str | None = None
    created: str | None = None
    stored: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)  # the file as read
    read_from: str = field(default="", repr=False, compare=False)  # the id of the run it was read from

    @property
    def rounds(self) -> int | None:
        return self.config.get("rounds")

    @property
    def seed(self) -> int | None:
        return self.config.get("seed")

    @property
    def flower(self) -> FlowerReference:
        """The Flower federation the run trains over; RunDamaged naming the run, the file and the
        key when its data are no Flower reference or the stored one lacks a key."""
        problems: list[str] = []
        if not _is_flower(self.data):
            problems.append("'data' is no Flower reference")
        else:
            FLOWER_REFERENCE.fit(self.data, "data", problems)
        if problems:
            raise RunDamaged([Damage("spec.json", "; ".join(problems))], run=self.read_from or None)
        return FlowerReference(**{f.name: self.data[f.name] for f in fields(FlowerReference) if f.init})

    def param(self, name: str, earlier: Any = _NOT_GIVEN) -> Any:
        """The hyperparameter `name` (a name its algorithm declares: tests/test_store_types.py
        checks every name a page asks for); RunDamaged naming the run, the file and the key when
        the spec lacks it, unless `earlier` says what runs written without it ran with (an older
        version, or an algorithm without that switch)."""
        if name in self.params:
            return self.params[name]
        if earlier is not _NOT_GIVEN:
            return earlier
        raise RunDamaged([Damage("spec.json", f"'params.{name}' is missing")], run=self.read_from or None)


# Runs stored before their spec named the kind of their record (fedcore before 2026-11-23).
_KINDS_OF_EARLIER_RUNS = {
    "ifedavg": "feature_shifts", "adafed": "site_weights", "fedhealth2": "site_similarity", "apfl": "mixture",
    **{f"indisco-{scheme}": "prototypes" for scheme in ("gm", "pm", "lm", "cm")},
}


@dataclass(frozen=True)
class Status:
    """status.json: where the run is. `state` is one of STATES, or 'damaged' (the file has no
    valid state; `error` says why); None only in `Run.raw_status()` of such a file."""

    state: str | None = None
    round: int = 0  # the last round trained
    total_rounds: int | None = None
    recorded_round: int = 0  # the last round whose record is stored (Flower runs)
    processes: int | None = None
    pid: int | None = None
    started_at: float | None = None  # time.time() at the start
    heartbeat: float | None = None
    launched: float | None = None
    cancel_requested: float | None = None  # time.time() of a cancel (its worker may train other runs too)
    updated: str | None = None
    started: str | None = None  # ISO times
    finished: str | None = None
    host: str | None = None
    device: str | None = None
    execution: str | None = None
    execution_description: str | None = None
    phase: str | None = None  # a Flower run before round 1: waiting for its sites
    error: str | None = None
    mean: Metrics = field(default_factory=dict)  # the latest evaluated round's mean and worst site
    worst: Metrics = field(default_factory=dict)
    flower_run: int | str | None = None
    stored_state: str | None = None  # the state on disk where `state` differs from it ('running')
    stored: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Scores:
    """One evaluated round's record (rounds.jsonl), and the final one (summary.json)."""

    round: int = 0
    sites: Mapping[str, Metrics] = field(default_factory=dict)  # site -> its scores on its own hold-out
    mean: Metrics = field(default_factory=dict)
    worst: Metrics = field(default_factory=dict)
    worst_site: Mapping[str, str | None] = field(default_factory=dict)  # metric -> the site with the worst
    algorithm: AlgorithmRecord = field(default_factory=AlgorithmRecord)  # what the algorithm recorded
    elapsed_s: float | None = None  # rounds.jsonl only
    lr: float | None = None
    train_loss: Mapping[str, float | None] = field(default_factory=dict)
    detection: Detection | None = None  # summary.json of a run with injected shifts (DETECTION)
    stored: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class CheckedProblem:
    """One injected problem of a detection report, and whether the run's marks caught it."""

    site: str = ""
    feature: str | None = None  # None: a label problem
    detail: str = ""
    caught: bool | None = None  # None: not checkable by this run (a label problem without a local f_out)
    evidence: Sequence[str] = ()  # the marks that caught it, in words
    stored: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class MarkedCell:
    """A cell the run marked where nothing was injected (a false positive of the report)."""

    site: str = ""
    layer: str = ""
    column: str | int = ""  # a feature (input layers) or an output column
    stored: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Detection:
    """summary.json's detection report (`fedcore.interpret.detection.detection_report`): the
    injected problems the marks caught, of those a run could check, and every other marked cell."""

    caught: int = 0
    checkable: int = 0
    injected: Sequence[CheckedProblem] = ()
    false_positives: Sequence[MarkedCell] = ()
    stored: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class SiteSizes:
    """One site of federation.json: its name and sizes, as its data allowed them out."""

    name: str = ""
    n_train: int | None = None
    n_test: int | None = None
    train_class_counts: Sequence[int | None] = ()  # by class; None where the site's disclosure policy withheld it
    test_class_counts: Sequence[int | None] = ()
    stored: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class FlowerServerRecord:
    """A Flower run's server record in federation.json: where its sites were reached, what each
    said of itself, and the standardisation the server pooled for them (feature -> mean, sd)."""

    superlink: str = ""
    sites: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # site -> share_local, version, device
    pooled_standardization: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    stored: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class StoredFederation:
    """federation.json: the sites, their sizes, the features and classes, the ground truth of
    injected shifts (no data rows). Every field is empty before the run's data are loaded."""

    name: str | None = None
    description: str = ""
    source: str | None = None
    synthetic: bool = False
    sites: Sequence[SiteSizes] = ()
    feature_names: Sequence[str] = ()
    feature_kinds: Sequence[str] = ()
    class_names: Sequence[str] = ()
    input_shape: Sequence[int] = ()  # [features] for a table, [channels, height, width] for images
    # what fedcore.interpret.detection.detection_report checks the marks against
    ground_truth: Sequence[InjectedProblem] = ()
    warnings: Sequence[str] = ()
    # the data adapters' record of how the data were prepared (fedcore.original_units reads its scales)
    preprocessing: Preprocessing = field(default_factory=Preprocessing)
    flower: FlowerServerRecord | None = None  # a Flower run's server record: its SuperLink, its sites' versions
    stored: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def site_names(self) -> list[str]:
        return [site.name for site in self.sites]

    @property
    def is_table(self) -> bool:
        """A table's input is one row of features (a run from before input shapes were stored: a table)."""
        return len(self.input_shape or [0]) == 1

    @property
    def scales(self) -> dict[str, dict[str, Scale]]:
        """site -> feature -> how it was standardised (fedcore.original_units.feature_scales)."""
        return feature_scales(self.preprocessing, self.site_names, dict(zip(self.feature_names, self.feature_kinds)))

    @classmethod
    def from_json(cls, description: Mapping[str, Any]) -> StoredFederation:
        """A federation's description (`Federation.describe()`, federation.json), fitted to its
        declared shape first: what does not fit takes the defaults, as a stored run's would."""
        return _federation(FEDERATION.fit(dict(description), "", []))


@dataclass(frozen=True)
class Identity:
    """identity.json: what people call the run (editable)."""

    number: int | None = None  # its place in the store's sequence; None for runs from before identities
    name: str | None = None  # a name a person gave it; None: none yet (pages call it by algorithm and number)
    tags: Sequence[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "name": self.name, "tags": list(self.tags)}


def _federation(fitted: Mapping[str, Any]) -> StoredFederation:
    """federation.json's fitted values as typed parts (every key they read checked by FEDERATION)."""
    flower = fitted.get("flower")
    return _typed(StoredFederation, fitted, sites=tuple(_typed(SiteSizes, site) for site in fitted.get("sites", ())),
                  ground_truth=tuple(map(InjectedProblem.from_json, _whole_truth(fitted))),
                  preprocessing=Preprocessing.from_json(fitted.get("preprocessing") or {}),
                  flower=_typed(FlowerServerRecord, flower) if flower is not None else None)


def _typed(cls: type, fitted: Mapping[str, Any] | None, **derived: Any) -> Any:
    """`cls` from a file's fitted values (the values that fit its shape; the rest take the
    class's defaults), with `derived` values the reader computed."""
    fitted = fitted or {}
    names = {f.name for f in fields(cls)} - {"stored", "read_from"}
    return cls(**{**{k: v for k, v in fitted.items() if k in names}, **derived}, stored=fitted)


def to_json(value: Spec | Status | Scores | StoredFederation) -> dict[str, Any]:
    """A typed file's JSON form (`show --json`): the file as read, with what the reader derived
    (a state, an error, a record kind) where it differs; the algorithm's record and the sites
    as stored."""
    derived = {f.name: getattr(value, f.name) for f in fields(value)
               if f.name not in ("stored", "algorithm", "read_from") and not _typed_parts(getattr(value, f.name))
               and getattr(value, f.name) != value.stored.get(f.name, _default(f))}
    return {**value.stored, **derived}


def _typed_parts(value: Any) -> bool:
    """Whether a field holds objects typed from the file's own parts (federation.json's sites,
    ground truth, preprocessing and Flower record): the file holds them as stored."""
    parts = value if isinstance(value, tuple) else (value,)
    return (isinstance(value, tuple) or value is not None) and all(
        hasattr(part, "stored") or hasattr(part, "to_json") for part in parts)


def _default(f: Any) -> Any:
    return f.default_factory() if callable(f.default_factory) else f.default


def _check_in_step() -> None:
    """Every declared field of a file's shape is a field of its class (import-time, cheap)."""
    for shape, cls in ((SPEC, Spec), (STATUS, Status), (ROUND, Scores), (SUMMARY, Scores), (SITE, SiteSizes),
                       (FEDERATION, StoredFederation), (FLOWER_REFERENCE, FlowerReference),
                       (PREPROCESSING, Preprocessing), (FLOWER_SERVER, FlowerServerRecord)):
        missing = set(shape.fields) - {f.name for f in fields(cls)}
        assert not missing, f"{cls.__name__} lacks {sorted(missing)}"
    assert set(INJECTED_PROBLEM.fields) == set(INJECTED_PROBLEM_KEYS), "INJECTED_PROBLEM and InjectedProblem differ"


_check_in_step()


# -- run ids ------------------------------------------------------------------------------------
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
RANDOM_BYTES = 4  # 32 random bits per id, besides the second it was made in
ID_ATTEMPTS = 20


def check_run_id(text: str) -> str:
    """`text` if it can be a run id or a prefix of one: a plain folder name of the store
    (letters, digits, '-', '_', '.', not starting with '.'), never a path."""
    if not isinstance(text, str) or not RUN_ID.fullmatch(text):
        raise RunNotFound("A run id is a folder name of the store (letters, digits, '-', '_' and '.', not "
                          "starting with '.'), not a path; `python -m fedcore list` shows them.")
    return text


def new_run_id(algorithm: Any) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    name = re.sub(r"[^a-z0-9-]+", "-", str(algorithm or "run").lower()).strip("-")[:40] or "run"
    return f"{stamp}-{name}-{secrets.token_hex(RANDOM_BYTES)}"


# -- status on a full disk ----------------------------------------------------------------------
RESERVE = "status.reserve"
RESERVE_BYTES = 64 * 1024  # many times a status file: the space its final rewrite needs


def _reserve_space(folder: Path) -> None:
    with open(folder / RESERVE, "wb") as handle:
        handle.write(b"\0" * RESERVE_BYTES)
        handle.flush()
        os.fsync(handle.fileno())


def _write_final_status(path: Path, data: bytes) -> bool:
    """Write a final status however the disk allows: atomically; on failure (a full disk) again
    after giving up the run's reserve; at last over the old status.json in place (its blocks are
    already allocated). Whether it reached disk; never raises."""
    try:
        atomic_write_bytes(path, data)
        return True
    except OSError:
        pass
    try:
        (path.parent / RESERVE).unlink()
    except OSError:
        pass
    else:
        try:
            atomic_write_bytes(path, data)
            return True
        except OSError:
            pass
    try:
        _overwrite_in_place(path, data)
        return True
    except OSError:
        return False


def _overwrite_in_place(path: Path, data: bytes) -> None:
    """Not atomic: a reader may see a torn file for a moment (it reads as damaged, then recovers);
    only the last resort when no new block can be had."""
    with open(path, "r+b") as handle:
        handle.write(data)
        handle.truncate(len(data))
        handle.flush()
        os.fsync(handle.fileno())


# -- what is read from a file, kept while the file is unchanged -----------------------------------
class _ByFileVersion:
    """Values computed from a file, kept while it is unchanged (same inode, size and mtime): the
    runs list asks about every run every few seconds, a page asks for a log several times per
    redraw, and a finished run never changes. Shared by the dashboard's threads."""

    def __init__(self, kept: int) -> None:
        self._values = Kept(kept)

    def get(self, path: Path, compute: Callable[[], Any]) -> Any:
        try:
            info = path.stat()
        except OSError:
            return compute()
        return self._values.get((str(path), info.st_ino, info.st_size, info.st_mtime_ns), compute)


_VERDICTS = _ByFileVersion(kept=8192)  # tuples of Damage: small
_LOGS = _ByFileVersion(kept=4)  # the logs of the runs a page is drawing (a long run's is megabytes)
_SPECS = _ByFileVersion(kept=1024)  # a spec is read for every run a page lists, and for its records' kind


def _verdict(path: Path, check: Callable[[], list[Damage]]) -> tuple[Damage, ...]:
    return _VERDICTS.get(path, lambda: tuple(check()))


def _read_rounds(path: Path, kind: str) -> list[Scores]:
    """The well-formed records of a rounds.jsonl, their algorithm's entries as records of `kind`.
    The records are shared between callers: read them, never change them."""
    def read() -> dict[str, list[Scores]]:
        return {}

    by_kind = _LOGS.get(path, read)  # one reading of the file per version, typed once per kind
    if kind not in by_kind:
        by_kind[kind] = [_scores(fitted, kind) for fitted in read_json_lines(path, ROUND, "rounds.jsonl")[0]]
    return list(by_kind[kind])


def _scores(fitted: Mapping[str, Any], kind: str) -> Scores:
    detection = fitted.get("detection")  # every key it reads required by DETECTION
    typed = None if detection is None else _typed(
        Detection, detection, injected=tuple(_typed(CheckedProblem, entry) for entry in detection["injected"]),
        false_positives=tuple(_typed(MarkedCell, cell) for cell in detection["false_positives"]))
    return _typed(Scores, fitted, algorithm=read_record(kind, fitted.get("algorithm")), detection=typed)


class Run:
    """One run's folder. Writers: the engine / job worker. Readers: CLI, dashboard.

    Readers never raise on damaged files: `spec`, `federation`, `summary`, `status` and
    `rounds()` return what fits the declared shapes, and `damage` says what did not."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.id = self.path.name
        self._written: dict[str, Any] = {}  # the status this process last wrote
        self._unwritten: dict[str, Any] | None = None  # a final status not on disk yet

    def _read(self, name: str, shape: Record, missing_ok: bool = False) -> tuple[dict[str, Any] | None, list[Damage]]:
        return read_json_shaped(self.path / name, shape, name, missing_ok)

    # -- whole-file parts ------------------------------------------------------------------
    @property
    def spec(self) -> Spec:
        """What was asked; what spec.json lacks or holds misfit takes Spec's defaults."""
        return _SPECS.get(self.path / "spec.json", self._read_spec)

    def _read_spec(self) -> Spec:
        value, _ = self._read("spec.json", SPEC)
        value = value or {}
        kind, algorithm = value.get("record"), value.get("algorithm")
        if kind not in RECORDS:
            kind = _KINDS_OF_EARLIER_RUNS.get(algorithm, "none") if isinstance(algorithm, str) else "none"
        return _typed(Spec, value, record=kind, read_from=self.id)

    @property
    def federation(self) -> StoredFederation:
        """The sites and their data's shape; what federation.json lacks or holds misfit takes
        StoredFederation's defaults (`run.require("federation.json")` first where it must be whole)."""
        value, _ = self._read("federation.json", FEDERATION, missing_ok=True)
        return _federation(value or {})

    def write_federation(self, description: Mapping[str, Any]) -> None:
        atomic_write_json(self.path / "federation.json", description)

    @property
    def summary(self) -> Scores | None:
        """The final scores (None until written, or when summary.json is damaged)."""
        value, damage = self._read("summary.json", SUMMARY, missing_ok=True)
        return None if value is None or damage else _scores(value, self.spec.record)

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        atomic_write_json(self.path / "summary.json", summary)

    # -- damage ----------------------------------------------------------------------------
    @property
    def damage(self) -> list[Damage]:
        """Everything wrong with the run's files. A done run must have its federation, summary
        and round records; array files are looked at as archives here and in full when loaded."""
        stored, status_damage = self._read("status.json", STATUS)
        done = (stored or {}).get("state") == "done"
        found = [*self._checked("spec.json"), *status_damage, *self._checked("federation.json", missing_ok=not done),
                 *self._checked("summary.json", missing_ok=not done)]
        log = self.path / "rounds.jsonl"
        try:
            size = log.stat().st_size
        except OSError:
            size = None
        if done and not size:
            found.append(Damage("rounds.jsonl", "is missing" if size is None else "is empty"))
        found += _verdict(log, lambda: read_json_lines(log, ROUND, "rounds.jsonl")[1])
        for name in [*(f"arrays/r{r:06d}.npz" for r in self.array_rounds()),
                     *(["model.npz"] if (self.path / "model.npz").exists() else [])]:
            path = self.path / name
            found += _verdict(path, lambda: [d for d in [npz_damage(path, name)] if d])
        return found

    def _checked(self, name: str, missing_ok: bool = False) -> tuple[Damage, ...]:
        return _verdict(self.path / name, lambda: self._read(name, FILES[name], missing_ok)[1])

    @property
    def state(self) -> str:
        """The state to show: 'damaged' when any file is, else the status's state."""
        return "damaged" if self.damage else self.status.state

    def require(self, *names: str) -> None:
        """RunDamaged unless these whole files are sound (e.g. the spec before training)."""
        damage = [d for name in names for d in self._read(name, FILES[name])[1]]
        if damage:
            raise RunDamaged(damage, run=self.id)

    # -- status ----------------------------------------------------------------------------
    def raw_status(self) -> Status:
        """The stored status (fields that fit only; no state when status.json cannot be read),
        or the final status this process could not write yet."""
        if self._unwritten is not None:
            return _typed(Status, self._unwritten)
        value, _ = self._read("status.json", STATUS)
        return _typed(Status, value)

    @property
    def status(self) -> Status:
        """The stored status, with 'running' turned into 'interrupted' when its worker is gone,
        and 'damaged' (with the problem as its error) when status.json has no valid state."""
        status = self.raw_status()
        if status.state is None:
            _, damage = self._read("status.json", STATUS)
            return replace(status, state="damaged", error="; ".join(map(str, damage)))
        if status.state == "running" and not _worker_alive(status):
            error = status.error if "error" in status.stored else \
                "The worker process stopped without finishing; the last state is kept."
            status = replace(status, state="interrupted", stored_state="running", error=error)
        return status

    def update_status(self, **fields: Any) -> dict[str, Any]:
        """Merge fields into status.json (atomically; OSError when the disk refuses). What is on
        disk wins over what this process wrote before, which only fills gaps (a damaged file);
        writers in other processes (the worker, the queue, a cancel) wait for each other."""
        with self._status_lock():
            stored, _ = self._read("status.json", STATUS, missing_ok=True)
            status = {**self._written, **(stored or {}), **fields, "updated": now_iso()}
            atomic_write_json(self.path / "status.json", status)
        self._written = status
        return status

    @contextmanager
    def _status_lock(self) -> Iterator[None]:
        """An exclusive lock on the run's folder for a read-merge-write of its status (a lock
        on the folder itself: no lock file to create on a full disk). Readers need none."""
        try:
            handle = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:  # no folder (deleted under a writer): the write fails on its own
            yield
            return
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield
        finally:
            os.close(handle)  # closing releases the lock

    def mark_started(self, total_rounds: int) -> None:
        self.update_status(
            state="running",
            started=now_iso(),
            started_at=time.time(),
            pid=os.getpid(),
            host=socket.gethostname(),
            round=0,
            total_rounds=total_rounds,
            heartbeat=time.time(),
        )

    def heartbeat(self, **fields: Any) -> None:
        self.update_status(heartbeat=time.time(), **fields)

    def mark_finished(self, state: str, error: str | None = None) -> bool:
        """Record a final state and its error. Never raises on a full disk: returns whether it
        reached disk, and if not keeps it (readers in this process see it) for `flush_status`."""
        if state not in FINISHED:
            raise ValueError(f"not a final state: {state}")
        with self._status_lock():
            stored, _ = self._read("status.json", STATUS, missing_ok=True)
            self._unwritten = {**self._written, **(stored or {}), "state": state, "finished": now_iso(),
                               "error": error, "heartbeat": time.time(), "updated": now_iso()}
            return self.flush_status()

    def flush_status(self, attempts: int = 1, wait_s: float = 1.0) -> bool:
        """Try (again) to write a final status the disk refused, up to `attempts` times `wait_s`
        apart while the run's folder exists; whether none is pending any more."""
        for attempt in range(attempts):
            if self._unwritten is None:
                return True
            if attempt:
                if not self.path.is_dir():
                    break
                time.sleep(wait_s)
            text = json.dumps(json_safe(self._unwritten), indent=2, allow_nan=False)
            if _write_final_status(self.path / "status.json", text.encode("utf-8")):
                self._written, self._unwritten = self._unwritten, None
                (self.path / RESERVE).unlink(missing_ok=True)  # a finished run needs no reserve
        return self._unwritten is None

    # -- per-round records -----------------------------------------------------------------
    def append_round(self, record: Mapping[str, Any]) -> None:
        """One line at the end of rounds.jsonl; if the write fails (a full disk), the file is cut
        back to where it was, so no half line is left for the next record to join."""
        line = json.dumps(json_safe(record), allow_nan=False, separators=(",", ":"))
        with open(self.path / "rounds.jsonl", "ab") as handle:
            start = handle.tell()
            try:
                handle.write((line + "\n").encode("utf-8"))
                handle.flush()
            except OSError:
                handle.truncate(start)
                raise

    def rounds(self) -> list[Scores]:
        """All complete, well-formed records (shared: read only); a torn last line from a killed
        writer is skipped, damaged lines are left out (and listed in `damage`)."""
        return _read_rounds(self.path / "rounds.jsonl", self.spec.record)

    def save_arrays(self, round_: int, arrays: Mapping[str, np.ndarray]) -> None:
        values = {k: np.asarray(v) for k, v in arrays.items()}
        objects = [k for k, v in values.items() if v.dtype == object]
        if objects:  # they would be pickled, and readers never unpickle
            raise ValueError(f"arrays {objects} hold Python objects; store numbers or booleans")
        buffer = io.BytesIO()
        np.savez(buffer, **values)
        atomic_write_bytes(self.path / "arrays" / f"r{round_:06d}.npz", buffer.getvalue())

    def array_rounds(self) -> list[int]:
        folder = self.path / "arrays"
        if not folder.is_dir():
            return []
        return sorted(int(p.stem[1:]) for p in folder.glob("r*.npz") if p.stem[1:].isdigit())

    def load_arrays(self, round_: int) -> dict[str, np.ndarray]:
        """That round's arrays; RunDamaged naming the file when it cannot be read."""
        name = f"arrays/r{round_:06d}.npz"
        return read_npz(self.path / name, name)

    def save_model(self, tensors: Mapping[str, np.ndarray]) -> None:
        """model.npz: the final shared parameters as the server holds them, [sites, ...] each (Flower runs)."""
        buffer = io.BytesIO()
        np.savez(buffer, **{k: np.asarray(v) for k, v in tensors.items()})
        atomic_write_bytes(self.path / "model.npz", buffer.getvalue())

    def load_model(self) -> dict[str, np.ndarray]:
        return read_npz(self.path / "model.npz", "model.npz")

    def save_profile(self, npz: bytes) -> None:
        """profile.npz: every site's federated statistics (fedcore.interpret.profile), as written."""
        atomic_write_bytes(self.path / "profile.npz", npz)

    def load_profile_arrays(self) -> dict[str, np.ndarray] | None:
        """The stored profile's arrays (None when the run has none); RunDamaged when unreadable."""
        if not (self.path / "profile.npz").exists():
            return None
        return read_npz(self.path / "profile.npz", "profile.npz", text=("meta",))

    # -- identity: what people call the run --------------------------------------------------
    @property
    def identity(self) -> Identity:
        """What identity.json holds of the run's number, name and tags; what it lacks, or holds
        of another kind, reads as Identity's defaults (a tag of another kind is left out)."""
        path = self.path / "identity.json"
        # damaged, or larger than set_identity ever writes (a 5 MB name made every page take a
        # minute): its place, without a name; a name or tag longer than it may be is cut
        stored = read_json(path, {}) if _size(path) <= IDENTITY_MAX_BYTES else {}
        stored = stored if isinstance(stored, dict) else {}
        number, name, tags = stored.get("number"), stored.get("name"), stored.get("tags")
        return Identity(
            number=number if isinstance(number, int) and not isinstance(number, bool) else None,
            name=shortened(name, NAME_LENGTH) if isinstance(name, str) and name.strip() else None,
            tags=[shortened(t, TAG_LENGTH) for t in tags[:MAX_TAGS] if isinstance(t, str)]
            if isinstance(tags, list) else [],
        )

    def set_identity(self, name: str | None = None, tags: Sequence[str] | None = None) -> Identity:
        """Rename and / or retag the run (None leaves that part as it is; an empty name removes
        the name). Names and tags are single lines, trimmed; tags are kept once each, in order.
        Raises SpecError for a name or tag too long, or too many tags."""
        identity = self.identity
        if name is not None:
            identity = replace(identity, name=_one_line(name, NAME_LENGTH, "A run's name") or None)
        if tags is not None:
            cleaned = [_one_line(tag, TAG_LENGTH, "A tag") for tag in tags]
            cleaned = list(dict.fromkeys(tag for tag in cleaned if tag))
            if len(cleaned) > MAX_TAGS:
                raise SpecError(f"A run takes at most {MAX_TAGS} tags, not {len(cleaned)}.")
            identity = replace(identity, tags=cleaned)
        atomic_write_json(self.path / "identity.json", identity.to_json())
        return identity


def check_array(run: Run, round_: int, name: str, array: np.ndarray, rows: int, columns: int | None = None) -> None:
    """RunDamaged unless a stored array is a [rows, columns] matrix (sites x features, say), as
    the run's federation.json says it must be."""
    if array.ndim == 2 and array.shape[0] == rows and (columns is None or array.shape[1] == columns):
        return
    wanted = f"{rows} x {columns if columns is not None else 'n'}"
    raise RunDamaged([Damage(f"arrays/r{round_:06d}.npz", f"'{name}' has shape "
                                                         f"{' x '.join(map(str, array.shape))}, not {wanted} "
                                                         "as federation.json says")])




class RunStore:
    """A folder of runs."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()

    def create(self, spec: Mapping[str, Any], name: str | None = None, tags: Sequence[str] = ()) -> Run:
        """A new queued run under a fresh id. It is written in a hidden folder and renamed into
        place, so no reader sees it half made and no two runs ever share an id. It takes the next
        number of this store (one more than the highest so far), which names it until a person
        gives it a name."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            _remove_stale_staging(self.root)
            numbers = [r.identity.number for r in self.runs()]
            number = max([n for n in numbers if n is not None], default=len(numbers)) + 1
            for _ in range(ID_ATTEMPTS):
                run_id = new_run_id(spec.get("algorithm"))
                if (self.root / run_id).exists():
                    continue
                staging = Run(Path(tempfile.mkdtemp(dir=self.root, prefix=".new-")))
                try:
                    staging.update_status(state="queued", round=0)
                    atomic_write_json(staging.path / "identity.json", Identity(number).to_json())
                    if name is not None or tags:
                        staging.set_identity(name, list(tags))
                    atomic_write_json(staging.path / "spec.json", {**spec, "run_id": run_id, "created": now_iso()})
                    _reserve_space(staging.path)
                    os.rename(staging.path, self.root / run_id)
                except OSError as error:
                    shutil.rmtree(staging.path, ignore_errors=True)
                    if error.errno in (errno.EEXIST, errno.ENOTEMPTY):
                        continue  # another process took this id a moment ago
                    raise
                run = Run(self.root / run_id)
                run._written = staging._written
                return run
        except OSError as error:
            raise FedcoreError(f"Cannot create a run in {self.root}: {error.strerror or error}.") from None
        raise FedcoreError(f"No free run id in {self.root} after {ID_ATTEMPTS} attempts.")

    def __iter__(self) -> Iterator[Run]:
        return iter(self.runs())

    def runs(self) -> list[Run]:
        """Newest first: every folder named like a run id that holds a spec or a status (damaged
        runs included); anything else in the store is not a run."""
        try:
            found = [Run(p) for p in self.root.iterdir() if _is_run_folder(p)]
        except OSError:
            return []
        return sorted(found, key=lambda r: r.id, reverse=True)

    def get(self, run_id: str) -> Run:
        """A run by id, or by a unique prefix of its id; RunNotFound for anything else,
        including anything that is not a plain folder name (checked before touching the disk)."""
        check_run_id(run_id)
        exact = self.root / run_id
        if _is_run_folder(exact):
            return Run(exact)
        matches = [r for r in self.runs() if r.id.startswith(run_id)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise RunNotFound(f"No run '{run_id}' in {self.root}. `python -m fedcore list` shows them.")
        ids = ", ".join(r.id for r in matches[:5])
        raise RunNotFound(f"'{run_id}' matches several runs ({ids}); give more of the id.")

    def delete(self, run_id: str) -> None:
        """Remove a run's folder; a file its worker removes meanwhile (the reserve, as it
        finishes) is no error."""
        def vanished(function: Callable, path: str, error: tuple) -> None:
            if not isinstance(error[1], FileNotFoundError):
                raise error[1]

        shutil.rmtree(self.get(run_id).path, onerror=vanished)


STAGING_KEPT_S = 3600.0  # a creation takes well under a second; older staging was left by a killed one


def _remove_stale_staging(root: Path) -> None:
    for staging in root.glob(".new-*"):
        try:
            if time.time() - staging.stat().st_mtime > STAGING_KEPT_S:
                shutil.rmtree(staging, ignore_errors=True)
        except OSError:
            pass


def _is_run_folder(path: Path) -> bool:
    return (bool(RUN_ID.fullmatch(path.name)) and not path.is_symlink() and path.is_dir()
            and ((path / "spec.json").exists() or (path / "status.json").exists()))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # missing: read_json says so


def _one_line(text: str, limit: int, what: str) -> str:
    cleaned = " ".join(str(text).split())  # newlines and runs of spaces become one space
    if len(cleaned) > limit:
        raise SpecError(f"{what} has at most {limit} characters; this one has {len(cleaned)}.")
    return cleaned


def _worker_alive(status: Status) -> bool:
    """Whether the process that writes this run still exists.

    Only decidable on the host that started it; elsewhere a heartbeat older than ten minutes
    counts as dead.
    """
    pid, host = status.pid, status.host
    if pid and host == socket.gethostname():
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, OverflowError):
            return False
        except PermissionError:
            return True
        return not _is_zombie(pid)
    heartbeat = status.heartbeat
    return heartbeat is None or time.time() - float(heartbeat) < 600


def _is_zombie(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] == "Z"
