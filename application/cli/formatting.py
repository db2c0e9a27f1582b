"""What the command line prints: run tables, scores, detection reports, each algorithm's record (its
typed record's own text, `fedcore.records`), and the progress bar."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from data_adapters import describe_reference
from fedcore.records import Record
from fedcore.store import Detection, Run, Scores, to_json
from fedcore.text import table as text_table


def fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _metrics_table(final: Scores) -> str:
    metrics = ["f1", "roc_auc", "balanced_accuracy", "accuracy"]
    header = ["site", "F1", "ROC AUC", "bal. acc.", "accuracy"]
    if any(m.get("sensitivity") is not None for m in final.sites.values()):  # two classes
        metrics += ["sensitivity", "specificity"]
        header += ["sensitivity", "specificity"]
    rows = [(name, *(fmt(m.get(k)) for k in metrics)) for name, m in final.sites.items()]
    rows.append(("mean", *(fmt(final.mean.get(k)) for k in metrics)))
    rows.append(("worst site", *(fmt(final.worst.get(k)) for k in metrics)))
    return text_table(header, rows)


def format_summary(run: Run, summary: Scores) -> str:
    parts = [f"\nRun {run.id} finished after round {summary.round}.", _metrics_table(summary),
             *_record_lines(summary.algorithm, list(summary.sites))]
    if summary.detection is not None:
        parts.append(_format_detection(summary.detection))
    parts.append(f"\nDetails: python -m fedcore show {run.id}")
    return "\n".join(parts)


def _format_detection(detection: Detection) -> str:
    lines = [f"\nInjected shifts caught by the significance marks: {detection.caught} of {detection.checkable}"]
    for entry in detection.injected:
        verdict = {True: "caught", False: "missed", None: "n/a"}[entry.caught]
        where = f"{entry.site} / {entry.feature or 'labels'}"
        lines.append(f"  [{verdict:6s}] {where}: {entry.detail}; {'; '.join(entry.evidence) or 'no mark'}")
    fp = detection.false_positives
    lines.append(f"  other marked cells (not injected): {len(fp)}"
                 + (" — " + ", ".join(f"{f.site}/{f.column} ({f.layer})" for f in fp) if fp else ""))
    return "\n".join(lines)


def _record_lines(record: Record, sites: list[str]) -> list[str]:
    """What the run's algorithm recorded, as its record kind writes it."""
    return record.summary_lines(sites)


def format_report(run: Run) -> str:
    spec, status, final = run.spec, run.status, _final(run)
    parts = [
        f"Run {run.id}",
        f"  state      {run.state}" + (f" — {status.error}" if status.error else ""),
        *(f"  damage     {problem}" for problem in run.damage),
        f"  algorithm  {spec.algorithm or '?'}  params {json.dumps(spec.params)}",
        f"  data       {describe_reference(spec.data) if spec.data else '?'}",
        f"  progress   round {status.round} of {status.total_rounds or '?'}",
        f"  device     {status.device or '?'}   seed {spec.seed}",
    ]
    if final is not None:
        parts += [f"\nScores at round {final.round} (each site on its own hold-out):", _metrics_table(final)]
        parts += _record_lines(final.algorithm, list(final.sites))
    summary = run.summary
    if summary is not None and summary.detection is not None:
        parts.append(_format_detection(summary.detection))
    return "\n".join(parts)


def _final(run: Run) -> Scores | None:
    """The run's final scores, else its latest evaluated round's."""
    records = run.rounds()
    return run.summary or (records[-1] if records else None)


def run_row(run: Run) -> dict[str, Any]:
    spec, status, damage = run.spec, run.status, run.damage
    return {
        "run_id": run.id,
        "state": run.state,
        "damage": [str(d) for d in damage],
        "algorithm": spec.algorithm,
        "data": spec.data,
        "round": status.round,
        "total_rounds": status.total_rounds if status.total_rounds is not None else spec.rounds,
        "mean_f1": status.mean.get("f1"),
        "worst_f1": status.worst.get("f1"),
        "started": status.started,
    }


def run_report(run: Run) -> dict[str, Any]:
    """The machine-readable summary `show --json` prints."""
    spec, status, damage, last = run.spec, run.status, run.damage, _final(run)
    report = {
        "run_id": run.id,
        "state": run.state,
        "damage": [str(d) for d in damage],
        "status": to_json(status),
        "algorithm": spec.algorithm,
        "data": spec.data,
        "round": status.round,
        "total_rounds": status.total_rounds,
        "spec": to_json(spec),
        "final": None,
    }
    if last is not None:
        report["final"] = {"round": last.round, "sites": last.sites, "mean": last.mean, "worst": last.worst,
                           "worst_site": last.worst_site}
        report["algorithm_record"] = last.algorithm.to_json()
    summary = run.summary
    if summary is not None and summary.detection is not None:
        report["detection"] = summary.detection.stored
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
