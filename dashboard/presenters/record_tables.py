"""Read a run's records into tidy DataFrames for figures and CSV export (no torch)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import pandas as pd

from fedcore.data_labels import data_label
from fedcore.glossary import METRIC_WORDS, setting_words
from fedcore.metric_names import METRICS
from fedcore.records import Record
from fedcore.store import Run, Spec

R = TypeVar("R", bound=Record)

METRIC_LABELS = METRIC_WORDS  # what a score is called wherever it is shown (the glossary's words)


def site_metrics(run: Run) -> pd.DataFrame:
    """One row per (evaluated round, site): every metric on the site's own hold-out."""
    rows = [
        {"round": record.round, "site": site, **{m: values.get(m) for m in METRICS}}
        for record in run.rounds()
        for site, values in record.sites.items()
    ]
    return pd.DataFrame(rows, columns=["round", "site", *METRICS])


def summary_metrics(run: Run) -> pd.DataFrame:
    """Mean and worst site per evaluated round, long format: round, statistic, metric, value."""
    rows = [
        {"round": record.round, "statistic": statistic, "metric": metric, "value": values.get(metric)}
        for record in run.rounds()
        for statistic, values in (("mean", record.mean), ("worst", record.worst))
        for metric in METRICS
    ]
    return pd.DataFrame(rows, columns=["round", "statistic", "metric", "value"])


def final_site_metrics(run: Run) -> pd.DataFrame:
    """Each site's metrics at the last evaluated round, with mean and worst rows."""
    records = run.rounds()
    if not records:
        return pd.DataFrame(columns=["site", *METRICS])
    last = records[-1]
    frame = pd.DataFrame([{"site": s, **v} for s, v in last.sites.items()])
    extra = pd.DataFrame([{"site": "mean", **last.mean}, {"site": "worst site", **last.worst}])
    return pd.concat([frame, extra], ignore_index=True)[["site", *METRICS]]


def per_site_series(run: Run, kind: type[R], value_of: Callable[[R], Mapping[str, float | None]]) -> pd.DataFrame:
    """round, site, value from a per-site dict the algorithm recorded (AdaFed p, APFL alpha):
    `value_of` takes it from each round's record of that `kind`."""
    rows = [
        {"round": record.round, "site": site, "value": value}
        for record in run.rounds() if isinstance(record.algorithm, kind)
        for site, value in value_of(record.algorithm).items()
    ]
    return pd.DataFrame(rows, columns=["round", "site", "value"])


def per_class_series(run: Run, kind: type[R], value_of: Callable[[R], Sequence[float | None]],
                     class_names: list[str]) -> pd.DataFrame:
    """round, class, value from a per-class list the algorithm recorded (AdaFed kappa, F1)."""
    rows = [
        {"round": record.round, "class": name, "value": value}
        for record in run.rounds() if isinstance(record.algorithm, kind)
        for name, value in zip(class_names, value_of(record.algorithm))
    ]
    return pd.DataFrame(rows, columns=["round", "class", "value"])


def progress(run: Run) -> dict[str, Any]:
    """Round, total, share done, seconds left (from the pace so far) and the latest scores; a
    damaged run's state is 'damaged' and its error says which file and what is wrong."""
    status, damage = run.status, run.damage
    round_, total = status.round, status.total_rounds or 0
    started = status.started_at
    eta = None
    if status.state == "running" and round_ and total and started:
        elapsed = max(0.0, time.time() - float(started))
        eta = elapsed / round_ * (total - round_)
    return {
        "state": run.state,
        "round": round_,
        "total": total,
        "fraction": round_ / total if total else 0.0,
        "eta_s": eta,
        "mean": status.mean,
        "worst": status.worst,
        "error": "; ".join(map(str, damage)) if damage else status.error,
        "phase": status.phase,  # a Flower run before round 1: waiting for its sites
    }


def round_text(info: dict[str, Any]) -> str:
    """Where a run is, for tables and progress bars: 'queued', 'starting', or 'round / total'."""
    if info["state"] == "queued":
        return "queued"
    if info["state"] == "running" and info["round"] == 0:
        return "starting"
    if not info["total"]:  # stopped before it started
        return "–"
    return f"{info['round']}/{info['total']}"


def run_name(run: Run) -> str:
    """What a run is called: the name a person gave it, else its algorithm and its number in the
    store ('ifedavg #7'); runs from before numbers by their algorithm and start time."""
    identity = run.identity
    if identity.name:
        return identity.name
    spec = run.spec
    algorithm = spec.algorithm or "run"
    if identity.number is not None:
        return f"{algorithm} #{identity.number}"
    return f"{algorithm} {str(spec.created or run.id)[:16].replace('T', ' ')}"


# The switches that change what a lens shows, by the parameter that holds each (some algorithms'
# only: iFedAvg's, FedHealth2's, AdaFed's), and how a run's label words its value (None: not at all)
SWITCHES: dict[str, Callable[[Any], str | None]] = {
    "local_f_out": lambda local: "local f_out" if local else None,
    "variant": lambda variant: None if variant == "pretrained" else f"{variant}-variant",
    "weight_rule": str,
}


def algorithm_detail(spec: Spec) -> str:
    """The algorithm with the switches that change what its lens shows: 'ifedavg (local f_out)'."""
    flags = [word(value) for name, word in SWITCHES.items() if (value := spec.param(name, earlier=None)) is not None]
    return f"{spec.algorithm}" + (f" ({', '.join(flag for flag in flags if flag)})" if any(flags) else "")


def settings_json(spec: Spec) -> str:
    """The complete specification as shown in Run details and the HTML report."""
    return json.dumps({"algorithm": spec.algorithm, "data": spec.data, "params": spec.params, "config": spec.config},
                      indent=2)


def run_label(run: Run) -> str:
    """A run in pickers: its name, what trained (when the name does not say it), its data and seed."""
    spec, identity = run.spec, run.identity
    detail = algorithm_detail(spec)
    if identity.name:
        head = f"{identity.name} · {detail}"
    else:  # 'ifedavg #7 (local f_out)'
        head = run_name(run) + detail[len(spec.algorithm):]
    return f"{head} · {data_label(spec.data)} · seed {spec.seed}"


def distinct_names(runs: list[Run]) -> list[str]:
    """The runs' names, with the run's number (else its id) added where two runs share a name."""
    names = [run_name(run) for run in runs]
    return [f"{name} ({_number_or_id(run)})" if names.count(name) > 1 else name for name, run in zip(names, runs)]


def _number_or_id(run: Run) -> str:
    number = run.identity.number
    return f"#{number}" if number is not None else run.id


def settings_table(runs: list[Run], differing_only: bool = True) -> pd.DataFrame:
    """Every setting (algorithm, data, each parameter and engine setting) as a row, one column per
    run (by name). With `differing_only`, the settings whose values differ between the runs that
    have them — a parameter only one of the runs' algorithms has is no difference to read."""
    specs = dict(zip(distinct_names(runs), (_flat_settings(run.spec) for run in runs)))
    keys = list(dict.fromkeys(key for flat in specs.values() for key in flat))
    rows = []
    for key in keys:
        values = [flat[key] for flat in specs.values() if key in flat]  # the runs that have the setting
        if differing_only and len({json.dumps(v, sort_keys=True, default=str) for v in values}) <= 1:
            continue
        rows.append({"setting": setting_words(key), **{name: _setting_text(flat[key]) if key in flat else MISSING_SETTING
                                        for name, flat in specs.items()}})
    return pd.DataFrame(rows, columns=["setting", *specs])


MISSING_SETTING = "(not set)"


def differing_settings(runs: list[Run]) -> dict[str, str]:
    """Run id -> the settings in which it differs from the other runs of its algorithm on the same
    data ('lr 0.01 · rounds 60'); empty where they all agree, or it is the only such run."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        spec = run.spec
        key = json.dumps([spec.algorithm, spec.data], sort_keys=True, default=str)
        groups.setdefault(key, []).append(run)
    out = {}
    for group in groups.values():
        flats = [_flat_settings(run.spec) for run in group]
        keys = [k for k in dict.fromkeys(k for flat in flats for k in flat)
                if len({json.dumps(flat.get(k), sort_keys=True, default=str) for flat in flats}) > 1]
        for run, flat in zip(group, flats):
            out[run.id] = " · ".join(f"{setting_words(k)} {_setting_text(flat.get(k))}" for k in keys)
    return out


def _flat_settings(spec: Spec) -> dict[str, Any]:
    flat: dict[str, Any] = {"algorithm": spec.algorithm, "data": data_label(spec.data)}
    for part, settings in (("params", spec.params), ("config", spec.config)):
        for key, value in settings.items():
            flat[f"{part}.{key}"] = value
    return flat


def _setting_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
