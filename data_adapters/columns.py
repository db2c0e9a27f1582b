"""One site's columns as numbers or text labels, and what alignment asks of them.

A column is numeric at a site when its numbers outnumber its other cells and those are few —
at most STRAY_SHARE of the filled cells, or at most STRAY_CELLS (small files); the stray cells
are reported by data row and treated as missing. Wide numeric tables are converted in one block
per site, so a 561-feature file costs a handful of array operations, not one per cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from data_adapters.cells import as_labels, data_rows, label, label_order

STRAY_SHARE = 0.1
STRAY_CELLS = 3


@dataclass
class Column:
    """One column at one site: float64 numbers for 'numeric' / 'empty', object labels for 'text';
    NaN = missing. Positions match the site table's rows."""

    kind: str
    values: np.ndarray

    @property
    def missing(self) -> np.ndarray:
        return pd.isna(self.values)

    @property
    def present(self) -> np.ndarray:
        return self.values[~self.missing]


@dataclass
class SiteColumns:
    columns: dict[str, Column]
    warnings: list[str]
    errors: list[str]


def type_columns(frame: pd.DataFrame, names: Sequence[str], file: str, decimal: str) -> SiteColumns:
    """The named columns of one site's table, typed; messages name `file`, column and data row."""
    columns, warnings, errors = {}, [], []
    dtypes = frame.dtypes
    numeric = [n for n in names if pd.api.types.is_numeric_dtype(dtypes[n]) or pd.api.types.is_bool_dtype(dtypes[n])]
    block = frame[numeric].to_numpy(np.float64)
    for j, name in enumerate(numeric):
        columns[name] = Column("numeric" if not np.isnan(block[:, j]).all() else "empty", block[:, j])
    for name in (n for n in names if n not in columns):
        text = as_labels(frame[name])
        numbers = pd.to_numeric(text, errors="coerce")
        if decimal == ",":
            numbers = numbers.fillna(pd.to_numeric(text.str.replace(",", ".", regex=False), errors="coerce"))
        stray = text.notna() & numbers.isna()
        if text.isna().all():
            columns[name] = Column("empty", np.full(len(text), np.nan))
            continue
        if not _mostly_numbers(int(numbers.notna().sum()), int(stray.sum())):
            columns[name] = Column("text", text.to_numpy(dtype=object))
            continue
        if stray.any():
            warnings.append(
                f"{file}, column '{name}': {int(stray.sum())} non-numeric value(s) in a numeric column, "
                f"treated as missing: data row(s) {data_rows(text.index[stray], text)}."
            )
        columns[name] = Column("numeric", numbers.to_numpy(np.float64))
    for name, column in columns.items():
        infinite = np.isinf(column.values) if column.kind == "numeric" else np.zeros(0, bool)
        if infinite.any():
            errors.append(
                f"{file}, column '{name}': infinite value(s) at data row(s) {data_rows(frame.index[infinite])}; "
                "replace them with a number or leave the cells empty."
            )
    return SiteColumns({n: columns[n] for n in names}, warnings, errors)


def as_text(column: Column) -> Column:
    """A numeric column as labels ('3', '2.5'), for columns declared categorical."""
    if column.kind != "numeric":
        return column
    labels = np.full(len(column.values), np.nan, dtype=object)
    observed = ~np.isnan(column.values)
    uniques, inverse = np.unique(column.values[observed], return_inverse=True)
    labels[observed] = np.array([label(v) for v in uniques], dtype=object)[inverse]
    return Column("text", labels)


def distinct(columns: Sequence[Column]) -> list[str]:
    """Distinct labels over sites: numbers in numeric order, then text alphabetically."""
    labels: set[str] = set()
    for column in columns:
        if column.kind == "numeric":
            labels |= {label(v) for v in np.unique(column.present)}
        elif column.kind == "text":
            labels |= set(column.present)
    return sorted(labels, key=label_order)


def count_distinct(columns: Sequence[Column]) -> int:
    """Number of distinct values over sites, without labelling every number."""
    numbers = [c.present for c in columns if c.kind == "numeric"]
    texts = set().union(*(set(c.present) for c in columns if c.kind == "text"))
    return (len(np.unique(np.concatenate(numbers))) if numbers else 0) + len(texts)


def text_examples(column: Column, n: int = 3) -> list[str]:
    """A few of a text column's values, those that are not numbers first."""
    values = distinct([column])
    return sorted(values, key=lambda v: label_order(v)[0] == 0)[:n]


def coded_one(values: list[str]) -> str | None:
    """The value a binary column codes as 1: '1' when the values are 0 / 1 (keeping their
    meaning), else the second of the two sorted values; None for a constant column."""
    if set(values) <= {"0", "1"}:
        return "1"
    return values[1] if len(values) == 2 else None


def indicator(column: Column, value: str | None) -> np.ndarray:
    """1.0 where a cell holds `value`, 0.0 where it holds another value, NaN where it is missing."""
    if column.kind == "empty":
        return column.values.copy()
    if column.kind == "text":
        hit = (column.values == value).astype(np.float64)
    elif value is None:
        hit = np.zeros(len(column.values))
    else:
        hit = (column.values == float(value)).astype(np.float64)
    return np.where(column.missing, np.nan, hit)


def _mostly_numbers(numbers: int, stray: int) -> bool:
    return numbers > stray and (stray <= STRAY_CELLS or stray <= STRAY_SHARE * (numbers + stray))
