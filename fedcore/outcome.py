"""What a finished run leaves besides its rounds: the summary (final scores, and which injected
problems the marks caught) and the code version it records. The same for simulated and Flower runs."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import fedcore
from fedcore.interpret.detection import detection_report
from fedcore.store import Run


def summarize(run: Run, last: Mapping[str, Any]) -> dict[str, Any]:
    """Final metrics per site, mean and worst; plus, when the data carry ground truth and the run
    recorded marks, which injected shifts the marks caught."""
    summary = {key: last[key] for key in ("round", "sites", "mean", "worst", "worst_site", "algorithm")}
    federation = run.federation
    rounds = run.array_rounds()
    if federation.ground_truth and rounds:
        arrays = run.load_arrays(rounds[-1])
        if "b_in_O" in arrays:
            summary["detection"] = detection_report(federation.ground_truth, federation.site_names,
                                                    federation.feature_names, arrays)
    return summary


def code_version() -> str:
    """Package version plus the git commit when run from a checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"{fedcore.__version__}+{commit}" if commit else fedcore.__version__
