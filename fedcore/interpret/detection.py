"""How well the marks of a run match the recorded ground truth of injected shifts.

A feature-level injection (offset, unit, missing not at random, ...) counts as caught when its
(site, feature) cell carries an 'O' in b_in or w_in. A label flip is a site-level problem that
shows in the output layer: caught when any of the site's f_out cells carries an 'O' (it needs
a local f_out). Every other 'O' is listed as a false positive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedcore.injected import InjectedProblem

INPUT_LAYERS = ("b_in", "w_in")
OUTPUT_LAYERS = ("b_out", "w_out")


def detection_report(
    ground_truth: Sequence[InjectedProblem],
    site_names: Sequence[str],
    feature_names: Sequence[str],
    arrays: Mapping[str, np.ndarray],
) -> dict[str, Any]:
    site_index = {name: i for i, name in enumerate(site_names)}
    feature_index = {name: j for j, name in enumerate(feature_names)}
    out_layers = [layer for layer in OUTPUT_LAYERS if f"{layer}_O" in arrays]
    injected, expected_cells, flipped_sites = [], set(), set()
    for truth in ground_truth:
        i = site_index[truth.site]
        entry = truth.to_json()
        if truth.is_label_problem:
            flipped_sites.add(i)
            marks = [(layer, int(j)) for layer in out_layers for j in np.flatnonzero(arrays[f"{layer}_O"][i])]
            evidence = [f"{layer} marked (value {_value(arrays[layer], i, j):+.2f})" for layer, j in marks]
            entry["caught"] = bool(evidence) if out_layers else None
            if not out_layers:
                evidence = ["not checkable: label problems show in f_out; run iFedAvg with local_f_out"]
        else:
            j = feature_index[truth.feature]
            expected_cells.add((i, j))
            marks = [(layer, j) for layer in INPUT_LAYERS if f"{layer}_O" in arrays and arrays[f"{layer}_O"][i, j]]
            evidence = [f"{layer} marked (value {arrays[layer][i, j]:+.2f}, z {arrays[f'{layer}_z'][i, j]:+.1f})"
                        for layer, j in marks]
            entry["caught"] = bool(evidence)
        entry["evidence"] = evidence
        # the same marks as numbers, for readers that word them their own way (the dashboard, in units)
        entry["marks"] = [{"layer": layer, "column": int(j), "value": _value(arrays[layer], i, j),
                           "z": _value(arrays[f"{layer}_z"], i, j) if f"{layer}_z" in arrays else None}
                          for layer, j in marks]
        injected.append(entry)

    false_positives = []
    for layer in (*INPUT_LAYERS, *out_layers):
        if f"{layer}_O" not in arrays:
            continue
        is_input = layer in INPUT_LAYERS
        for i, j in zip(*np.nonzero(arrays[f"{layer}_O"])):
            if (is_input and (i, j) in expected_cells) or (not is_input and i in flipped_sites):
                continue
            false_positives.append({
                "site": site_names[i],
                "layer": layer,
                "column": feature_names[j] if is_input else int(j),
                "value": float(_value(arrays[layer], i, j)),
            })
    checkable = [e for e in injected if e["caught"] is not None]
    return {
        "injected": injected,
        "caught": sum(bool(e["caught"]) for e in checkable),
        "checkable": len(checkable),
        "false_positives": false_positives,
    }


def _value(matrix: np.ndarray, i: int, j: int) -> float:
    return float(matrix[i, j if matrix.shape[1] > 1 else 0])
