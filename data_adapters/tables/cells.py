"""Cell values as labels, and the small pieces of wording every data message shares."""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

LISTED_ROWS = 8  # rows named in one message before "and N more"
LISTED_NAMES = 12
QUOTED_CHARS = 40  # a longer cell or name is quoted by its start and its length


def as_labels(values: pd.Series) -> pd.Series:
    """Cells as stripped text labels, numbers written without a trailing '.0'; NaN = missing.
    Each distinct cell is labelled once (a million-row target has a handful of values)."""
    codes, uniques = pd.factorize(values)
    labels = np.empty(len(uniques) + 1, dtype=object)
    labels[:-1] = [label(value) for value in uniques]
    labels[-1] = np.nan  # code -1: a missing cell
    return pd.Series(labels[codes], index=values.index, dtype=object)


def label(value: Any) -> Any:
    """One cell as a label: 3.0 -> '3', 2.5 -> '2.5', ' yes ' -> 'yes', '' -> NaN."""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, float, np.integer, np.floating)):
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    text = str(value).strip()
    return text if text else np.nan


def finite_number(value: Any) -> float | None:
    """A cell (or a dictionary entry) as a finite number; None where it is none (text, NaN, ±inf)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def label_order(text: str) -> tuple[int, float, str]:
    """Sort key: numbers in numeric order before text in alphabetical order."""
    try:
        return (0, float(text), "")
    except ValueError:
        return (1, 0.0, text)


def data_rows(index: Sequence[int], cells: pd.Series | None = None) -> str:
    """"7, 12" for 0-based data rows written 1-based (row 1 = first after the header), with each
    row's cell when `cells` is given: "7 ('high'), 12 ('n.a.')"."""
    rows = list(index)
    shown = [f"{r + 1}" + (f" ({clipped(cells[r])})" if cells is not None else "") for r in rows[:LISTED_ROWS]]
    more = f" and {len(rows) - LISTED_ROWS} more" if len(rows) > LISTED_ROWS else ""
    return ", ".join(shown) + more


def quoted(names: Sequence[Any]) -> str:
    """"'a', 'b' and 3 more", or "none"."""
    names = list(names)
    if not names:
        return "none"
    shown = ", ".join(clipped(n) for n in names[:LISTED_NAMES])
    return shown + (f" and {len(names) - LISTED_NAMES} more" if len(names) > LISTED_NAMES else "")


def clipped(value: Any) -> str:
    """"'high'", or for a long value "'xxxxx…' (1,000,000 characters)": a 1 MB cell is named,
    not repeated, in a message."""
    text = str(value)
    if len(text) <= QUOTED_CHARS:
        return f"'{text}'"
    return f"'{text[:QUOTED_CHARS]}…' ({len(text):,} characters)"


def close_match(name: str, candidates: Sequence[str]) -> str | None:
    """The candidate `name` was probably meant to be ('Outcome' for 'outcome'), if any."""
    lowered = {str(c).lower(): str(c) for c in candidates}
    match = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.75)
    return lowered[match[0]] if match else None
