"""Sites that hold the same rows under different names: one export given twice (a copy, a renamed
file, an export run again) counts twice in every average and in the per-site scores, and a row at
two sites can train one site's model while sitting in the other's hold-out.

Rules, comparing rows on the feature columns and the target as the alignment typed them (so 3 and
3.0, or a reordered file, still match; missing matches missing):
- refused: two sites with the same rows, in any order, when those rows hold at least MIN_DISTINCT
  different rows (with fewer, as in a table of two yes/no columns, equal counts can be chance:
  flagged instead);
- flagged: a site at least OVERLAP_SHARE of whose rows are rows of another site, when its rows
  are nearly all different from each other (at least DIVERSE_SHARE distinct: then a shared row
  is no coincidence) — overlapping exports, or one file holding another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

MIN_DISTINCT = 10
OVERLAP_SHARE = 0.5
DIVERSE_SHARE = 0.9


def row_fingerprints(columns: Sequence[np.ndarray], y: np.ndarray) -> np.ndarray:
    """One 64-bit hash per row of a site: its feature values and its class."""
    frame = pd.DataFrame({f"c{k}": values for k, values in enumerate(columns)} | {"y": y})
    return pd.util.hash_pandas_object(frame, index=False).to_numpy()


def duplicate_sites(fingerprints: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    """Pairs of sites that share rows (site -> row fingerprints): each with the two sites, the
    number of rows of the first also at the second, both sizes, and whether they are the same rows
    ('same') or one site mostly overlaps the other ('overlap'); 'blocking' for the refused ones."""
    sites = list(fingerprints)
    ordered = {site: np.sort(rows) for site, rows in fingerprints.items()}
    # Sorting, not np.unique / np.isin: numpy 2.4 takes seconds for those on a million 64-bit hashes.
    distinct = {site: rows[np.r_[True, rows[1:] != rows[:-1]]] if len(rows) else rows for site, rows in ordered.items()}
    findings = []
    for i, first in enumerate(sites):
        for second in sites[i + 1:]:
            a, b = ordered[first], ordered[second]
            if len(a) == len(b) and np.array_equal(a, b):
                findings.append({"sites": [first, second], "kind": "same", "shared": len(a), "rows": [len(a), len(b)],
                                 "blocking": len(distinct[first]) >= MIN_DISTINCT})
                continue
            small, large = (first, second) if len(a) <= len(b) else (second, first)
            rows = fingerprints[small]
            shared = int(_found_in(rows, distinct[large]).sum())
            if shared >= OVERLAP_SHARE * len(rows) and len(distinct[small]) >= DIVERSE_SHARE * len(rows):
                findings.append({"sites": [small, large], "kind": "overlap", "shared": shared,
                                 "rows": [len(rows), len(fingerprints[large])], "blocking": False})
    return findings


def _found_in(values: np.ndarray, distinct_sorted: np.ndarray) -> np.ndarray:
    """Which of `values` occur in the sorted, distinct `distinct_sorted`."""
    if not len(distinct_sorted):
        return np.zeros(len(values), bool)
    position = np.minimum(np.searchsorted(distinct_sorted, values), len(distinct_sorted) - 1)
    return distinct_sorted[position] == values


def duplicate_message(finding: Mapping[str, Any], files: Mapping[str, str]) -> str:
    (a, b), (rows_a, rows_b) = finding["sites"], finding["rows"]
    where_a, where_b = f"{files[a]} (site '{a}')", f"{files[b]} (site '{b}')"
    if finding["kind"] == "same":
        return (f"{where_a} and {where_b} hold the same {rows_a} rows: the same site given twice under two "
                "names? Remove one"
                + (". If they truly are two sites, check their exports." if finding["blocking"] else
                   "; with so few different rows this may be chance, so it does not block training."))
    return (f"{finding['shared']} of the {rows_a} rows of {where_a} are also rows of {where_b} ({rows_b} rows): "
            "overlapping exports, or one file holding the other? Rows at two sites count twice and can sit in "
            "one site's hold-out while training the other's model.")
