"""What the command line prints: run tables, scores, detection reports, each algorithm's record (its
typed record's own text, `fedcore.records`), and the progress bar."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from data_adapters import describe_reference
from fedcore.records import read_record, record_kind
from fedcore.store import Run
from fedcore.text import table as text_table


def fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _metrics_table(final: dict[str, Any]) -> str:
    metrics = ["f1", "roc_auc", "balanced_accuracy", "accuracy"]
    header = ["site", "F1", "ROC AUC", "bal. acc.", "accuracy"]
    if any(m.get("sensitivity") is not None for m in final["sites"].values()):  # two classes
        metrics += ["sensitivity", "specificity"]
        header += ["sensitivity", "specificity"]
    rows = [(name, *(fmt(m.get(k)) for k in metrics)) for name, m in final["sites"].items()]
    rows.append(("mean", *(fmt(final["mean"].get(k)) for k in metrics)))
    rows.append(("worst site", *(fmt(final["worst"].get(k)) for k in metrics)))
    return text_table(header, rows)


def format_summary(run: Run, summary: dict[str, Any]) -> str:
    parts = [f"\nRun {run.id} finished after round {summary['round']}.", _metrics_table(summary),
             *_record_lines(run, summary.get("algorithm"), list(summary["sites"]))]
    if "detection" in summary:
        parts.append(_format_detection(summary["detection"]))
    parts.append(f"\nDetails: python -m fedcore show {run.id}")
    return "\n".join(parts)


def _format_detection(detection: dict[str, Any]) -> str:
    lines = [f"\nInjected shifts caught by the significance marks: {detection['caught']} of {detection['checkable']}"]
    for entry in detection["injected"]:
        verdict = {True: "caught", False: "missed", None: "n/a"}[entry["caught"]]
        where = f"{entry['site']} / {entry['feature'] or 'labels'}"
        lines.append(f"  [{verdict:6s}] {where}: {entry['detail']}; {'; '.join(entry['evidence']) or 'no mark'}")
    fp = detection["false_positives"]
    lines.append(f"  other marked cells (not injected): {len(fp)}"
                 + (" — " + ", ".join(f"{f['site']}/{f['column']} ({f['layer']})" for f in fp) if fp else ""))
    return "\n".join(lines)


def _record_lines(run: Run, stored: Any, sites: list[str]) -> list[str]:
    """What the run's algorithm recorded, as its record kind writes it."""
    return read_record(record_kind(run.spec), stored).summary_lines(sites)


def format_report(run: Run, report: dict[str, Any]) -> str:
    status = report["status"]
    parts = [
        f"Run {run.id}",
        f"  state      {report['state']}" + (f" — {status['error']}" if status.get("error") else ""),
        *(f"  damage     {problem}" for problem in report["damage"]),
        f"  algorithm  {report['algorithm'] or '?'}  params {json.dumps(report['spec'].get('params', {}))}",
        f"  data       {describe_reference(report['data']) if report['data'] else '?'}",
        f"  progress   round {report['round']} of {report['total_rounds'] or '?'}",
        f"  device     {status.get('device', '?')}   seed {report['spec'].get('config', {}).get('seed')}",
    ]
    if report["final"]:
        parts += [f"\nScores at round {report['final']['round']} (each site on its own hold-out):",
                  _metrics_table(report["final"])]
        parts += _record_lines(run, report.get("algorithm_record"), list(report["final"]["sites"] or {}))
    if "detection" in report:
        parts.append(_format_detection(report["detection"]))
    return "\n".join(parts)


def run_row(run: Run) -> dict[str, Any]:
    spec, status, damage = run.spec, run.status, run.damage
    mean, worst = status.get("mean") or {}, status.get("worst") or {}
    return {
        "run_id": run.id,
        "state": run.state,
        "damage": [str(d) for d in damage],
        "algorithm": spec.get("algorithm"),
        "data": spec.get("data"),
        "round": status.get("round", 0),
        "total_rounds": status.get("total_rounds", spec.get("config", {}).get("rounds")),
        "mean_f1": mean.get("f1"),
        "worst_f1": worst.get("f1"),
        "started": status.get("started"),
    }


def run_report(run: Run) -> dict[str, Any]:
    """The machine-readable summary `show --json` prints."""
    spec, status, damage = run.spec, run.status, run.damage
    records = run.rounds()
    last = run.summary or (records[-1] if records else None)
    report = {
        "run_id": run.id,
        "state": run.state,
        "damage": [str(d) for d in damage],
        "status": status,
        "algorithm": spec.get("algorithm"),
        "data": spec.get("data"),
        "round": status.get("round", 0),
        "total_rounds": status.get("total_rounds"),
        "spec": spec,
        "final": None,
    }
    if last is not None:
        report["final"] = {key: last.get(key) for key in ("round", "sites", "mean", "worst", "worst_site")}
        report["algorithm_record"] = last.get("algorithm", {})
    if run.summary and "detection" in run.summary:
        report["detection"] = run.summary["detection"]
    return report


class ProgressBar:
    """tqdm bar over rounds showing the latest mean and worst-site F1 (silent when not a TTY)."""

    def __init__(self, label: str, disable: bool) -> None:
        self.label, self.disable, self.bar = label, disable, None

    def __call__(self, round_: int, total: int, record: dict[str, Any] | None) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=self.label, unit="round", disable=self.disable or None,
                            file=sys.stderr, dynamic_ncols=True)
        self.bar.update(round_ - self.bar.n)
        if record is not None:
            self.bar.set_postfix(mean_f1=fmt(record["mean"]["f1"]), worst_f1=fmt(record["worst"]["f1"]))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
