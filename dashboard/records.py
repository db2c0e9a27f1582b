"""Read a run's records into tidy DataFrames for figures and CSV export (no torch)."""

from __future__ import annotations

import time
from typing import Any

import pandas as pd

from fedcore.metrics import METRICS
from fedcore.shapes import NUMBER, ListOf, MapOf, Nullable, fits
from fedcore.store import Run

# What the per-site and per-class series an algorithm records must be; a round whose value does
# not fit (a damaged record) is left out of the series.
PER_SITE = MapOf(Nullable(NUMBER))
PER_CLASS = ListOf(Nullable(NUMBER))

METRIC_LABELS = {
    "f1": "F1 (weighted)",
    "roc_auc": "ROC AUC",
    "balanced_accuracy": "Balanced accuracy",
    "accuracy": "Accuracy",
    "loss": "Loss",
    "sensitivity": "Sensitivity (recall of the last class)",
    "specificity": "Specificity (recall of the first class)",
}


def site_metrics(run: Run) -> pd.DataFrame:
    """One row per (evaluated round, site): every metric on the site's own hold-out."""
    rows = [
        {"round": record["round"], "site": site, **{m: values.get(m) for m in METRICS}}
        for record in run.rounds()
        for site, values in record["sites"].items()
    ]
    return pd.DataFrame(rows, columns=["round", "site", *METRICS])


def summary_metrics(run: Run) -> pd.DataFrame:
    """Mean and worst site per evaluated round, long format: round, statistic, metric, value."""
    rows = [
        {"round": record["round"], "statistic": statistic, "metric": metric, "value": record[statistic].get(metric)}
        for record in run.rounds()
        for statistic in ("mean", "worst")
        for metric in METRICS
    ]
    return pd.DataFrame(rows, columns=["round", "statistic", "metric", "value"])


def final_site_metrics(run: Run) -> pd.DataFrame:
    """Each site's metrics at the last evaluated round, with mean and worst rows."""
    records = run.rounds()
    if not records:
        return pd.DataFrame(columns=["site", *METRICS])
    last = records[-1]
    frame = pd.DataFrame([{"site": s, **v} for s, v in last["sites"].items()])
    extra = pd.DataFrame([{"site": "mean", **last["mean"]}, {"site": "worst site", **last["worst"]}])
    return pd.concat([frame, extra], ignore_index=True)[["site", *METRICS]]


def per_site_series(run: Run, key: str) -> pd.DataFrame:
    """round, site, value from a per-site dict the algorithm recorded (AdaFed p, APFL alpha)."""
    rows = [
        {"round": record["round"], "site": site, "value": value}
        for record in run.rounds() if fits(record["algorithm"].get(key) or {}, PER_SITE)
        for site, value in (record["algorithm"].get(key) or {}).items()
    ]
    return pd.DataFrame(rows, columns=["round", "site", "value"])


def per_class_series(run: Run, key: str, class_names: list[str]) -> pd.DataFrame:
    """round, class, value from a per-class list the algorithm recorded (AdaFed kappa, F1)."""
    rows = [
        {"round": record["round"], "class": name, "value": value}
        for record in run.rounds() if fits(record["algorithm"].get(key) or [], PER_CLASS)
        for name, value in zip(class_names, record["algorithm"].get(key) or [])
    ]
    return pd.DataFrame(rows, columns=["round", "class", "value"])


def progress(run: Run) -> dict[str, Any]:
    """Round, total, share done, seconds left (from the pace so far) and the latest scores; a
    damaged run's state is 'damaged' and its error says which file and what is wrong."""
    status, damage = run.status, run.damage
    round_, total = int(status.get("round") or 0), int(status.get("total_rounds") or 0)
    started = status.get("started_at")
    eta = None
    if status["state"] == "running" and round_ and total and started:
        elapsed = max(0.0, time.time() - float(started))
        eta = elapsed / round_ * (total - round_)
    return {
        "state": run.state,
        "round": round_,
        "total": total,
        "fraction": round_ / total if total else 0.0,
        "eta_s": eta,
        "mean": status.get("mean") or {},
        "worst": status.get("worst") or {},
        "error": "; ".join(map(str, damage)) if damage else status.get("error"),
        "phase": status.get("phase"),  # a Flower run before round 1: waiting for its sites
    }


def data_name(data: Any) -> str:
    """What a run's data are called: the name the analyst gave them (a reference's `name`), else
    the reference's source (a text reference as written)."""
    if isinstance(data, str):
        return data
    return str((data or {}).get("name") or (data or {}).get("source", "data"))


def run_label(run: Run) -> str:
    """A short, human name for a run in pickers and legends."""
    spec = run.spec
    params = spec.get("params") or {}
    flags = []
    if params.get("local_f_out"):
        flags.append("local f_out")
    if "variant" in params and params["variant"] != "pretrained":
        flags.append(f"{params['variant']}-variant")
    if "weight_rule" in params:
        flags.append(params["weight_rule"])
    detail = f" ({', '.join(flags)})" if flags else ""
    return f"{spec.get('algorithm')}{detail} · {data_name(spec.get('data'))} · seed {spec.get('config', {}).get('seed')} · {run.id[:15]}"
