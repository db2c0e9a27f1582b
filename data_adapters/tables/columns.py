"""One site's columns as numbers or text labels, and what alignment asks of them.

A column is numeric at a site when its numbers outnumber its other cells and those are few —
at most STRAY_SHARE of the filled cells, or at most STRAY_CELLS (small files); the stray cells
are reported by data row and treated as missing. Wide numeric tables are converted in one block
per site, so a 561-feature file costs a handful of array operations, not one per cell.

Numbers the model cannot compute with are refused, by file, column and data row: infinite ones
(`inf`, or a number too large even for 64-bit floats such as 1e309) and those beyond ±3.4e38,
FLOAT32_MAX — the engine computes in 32-bit floats, where they become infinite (1e308 would
silently turn into NaN, then into a column of zeros). What is merely suspicious is flagged:
`extreme_rows` finds values more than EXTREME_IQRS interquartile ranges from their site's median
(a code such as 99999 for 'not measured', a unit slip, a typo) — standardised with such a value,
every other value of the column lands near the same number and the column says nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from data_adapters.tables.cells import as_labels, data_rows, label, label_order

STRAY_SHARE = 0.1
STRAY_CELLS = 3
FLOAT32_MAX = float(np.finfo(np.float32).max)  # about 3.4e38
SQUARE_SAFE = float(np.sqrt(FLOAT32_MAX))  # about 1.8e19: beyond it a value's square overflows 32-bit floats
EXTREME_IQRS = 1000.0
EXTREME_MIN_VALUES = 10  # fewer values give no interquartile range worth measuring against


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
        numbers = _as_numbers(text, decimal)
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
        if column.kind != "numeric":
            continue
        infinite = np.isinf(column.values)
        if infinite.any():
            errors.append(
                f"{file}, column '{name}': infinite value(s) at data row(s) {data_rows(frame.index[infinite])}; "
                "replace them with a number or leave the cells empty (a number beyond ±1.8e308, such as 1e309, "
                "is infinite too)."
            )
        huge = beyond(column.values, FLOAT32_MAX) & ~infinite
        if huge.any():
            errors.append(
                f"{file}, column '{name}': value(s) beyond ±3.4e38 at data row(s) "
                f"{data_rows(frame.index[huge], printed(column.values, frame.index, huge))}; the model computes with 32-bit "
                "floats, where they are infinite. Fix them or leave the cells empty."
            )
    return SiteColumns({n: columns[n] for n in names}, warnings, errors)


def _as_numbers(text: pd.Series, decimal: str) -> pd.Series:
    """Labels as numbers (NaN where a label is none), each distinct label converted once."""
    codes, uniques = pd.factorize(text)
    labels = pd.Series(uniques, dtype=object)
    numbers = pd.to_numeric(labels, errors="coerce")
    if decimal == ",":
        numbers = numbers.fillna(pd.to_numeric(labels.str.replace(",", ".", regex=False), errors="coerce"))
    values = np.append(numbers.to_numpy(np.float64), np.nan)  # code -1 (missing) takes the last
    return pd.Series(values[codes], index=text.index)


def beyond(values: np.ndarray, limit: float) -> np.ndarray:
    """Where a finite value's magnitude exceeds `limit` (NaN: no)."""
    with np.errstate(invalid="ignore"):
        return np.isfinite(values) & (np.abs(values) > limit)


def extreme_rows(values: np.ndarray) -> tuple[np.ndarray, float]:
    """Where a value lies more than EXTREME_IQRS interquartile ranges from the median of the
    column's observed values, and that median; nothing is extreme in a column with fewer than
    EXTREME_MIN_VALUES values or no spread (a mostly constant column has no scale to be far on).
    Values refused already (infinite, beyond FLOAT32_MAX) are neither measured nor flagged."""
    usable = np.isfinite(values) & ~beyond(values, FLOAT32_MAX)
    observed = values[usable]
    if observed.size < EXTREME_MIN_VALUES:
        return np.zeros(len(values), bool), float("nan")
    q25, median, q75 = np.percentile(observed, (25, 50, 75))
    spread = q75 - q25
    if not spread > 0:
        return np.zeros(len(values), bool), float(median)
    with np.errstate(invalid="ignore", over="ignore"):
        return usable & (np.abs(values - median) > EXTREME_IQRS * spread), float(median)


def printed(values: np.ndarray, index: pd.Index, where: np.ndarray) -> pd.Series:
    """The numbers at `where` as a message prints them ('1e+39'), by data row."""
    return pd.Series([f"{v:g}" for v in values[where]], index=index[where], dtype=object)


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
