"""The server's own test set for a table federation (AdaFed's server_test 'given'): one more
file, read and checked like a site's, then fitted onto the features the sites decided.

The sites alone decide the features, their kinds, the binary coding, the categories and the
classes — a test set must not change what the model is — so the server's file has to fit them:
- it needs the target and every feature column (other columns are ignored);
- a numeric feature holding text there, a binary feature with a third value, or a class no site
  has is an error: the model has no input or output for it;
- a category no site has is accepted with a warning and encoded as none of the sites' categories
  (all its one-hot features 0);
- rows without a target are left out (warned), and the file needs `min_rows` usable rows like a site.
Preprocessing (standardisation with the file's own statistics, missing-value encoding) happens in
`assemble`, as for a site.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from data_adapters.tables.cells import as_labels, close_match, data_rows, quoted
from data_adapters.tables.columns import Column, as_text, distinct, type_columns

if TYPE_CHECKING:  # align.py imports this module
    from data_adapters.alignment.align import SiteTable

WHAT = "the server's test set"


@dataclass
class ServerTable:
    """The server file's feature columns (typed; binary and categorical as labels), its class
    indices, and its line in the alignment report."""

    file: str
    columns: dict[str, Column] = field(default_factory=dict)
    y: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    summary: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def align_server_table(
    table: SiteTable,
    target: str,
    kinds: Mapping[str, str],
    values: Mapping[str, Sequence[str]],
    class_of: Mapping[str, int],
    class_names: Sequence[str],
    min_rows: int,
) -> ServerTable:
    """`table` checked against the sites' feature `kinds`, the `values` of their binary and
    categorical features, and `class_of` (target label -> class index); problems are listed in
    the result's errors and warnings, as the alignment report lists the sites'."""
    server = ServerTable(table.file)
    frame, where = table.frame, f"{table.file} ({WHAT})"
    missing = [name for name in [target, *kinds] if name not in frame.columns]
    if missing:
        hints = [f"'{name}' (did you mean '{hint}'?)" if (hint := close_match(name, frame.columns)) else f"'{name}'"
                 for name in missing]
        server.errors.append(
            f"{where} lacks column(s) the sites have: {', '.join(hints)}"
            + (" — the target among them" if target in missing else "")
            + f". It needs the target '{target}' and every feature column; its columns: {quoted(frame.columns)}."
        )
        return server
    labels = as_labels(frame[target])
    if labels.isna().any():
        server.warnings.append(f"{where}: {int(labels.isna().sum())} row(s) have no value in the target "
                               f"'{target}' and are left out: data row(s) {data_rows(labels.index[labels.isna()])}.")
        frame, labels = frame.loc[labels.notna()], labels[labels.notna()]
    unknown = ~labels.isin(list(class_of))
    if unknown.any():
        server.errors.append(
            f"{where}: the target '{target}' has value(s) {quoted(sorted(set(labels[unknown])))} that no site has, "
            f"at data row(s) {data_rows(labels.index[unknown])}; the sites' classes: {quoted(class_names)}."
        )
    if len(frame) < min_rows:
        server.errors.append(f"{where} has {len(frame)} usable rows; it needs at least {min_rows} (min_rows), "
                             "like a site.")
    typed = type_columns(frame, list(kinds), table.file, table.decimal)
    server.warnings += typed.warnings
    server.errors += typed.errors
    for name, kind in kinds.items():
        server.columns[name] = _fitted(name, kind, typed.columns[name], values.get(name, ()), server, where)
    server.y = labels.map(lambda v: class_of.get(v, -1)).to_numpy(dtype=np.int64, copy=True)
    absent = [class_names[k] for k in range(len(class_names)) if not (server.y == k).any()]
    if absent and not unknown.any():
        server.warnings.append(f"{where} has no row of class(es) {quoted(absent)}; the server's F1 for them is 0.")
    server.summary = {
        "file": table.file, "rows": len(table.frame), "rows_used": len(frame), "delimiter": table.delimiter,
        "encoding": table.encoding,
        "class_counts": {name: int((server.y == k).sum()) for k, name in enumerate(class_names)},
    }
    return server


def _fitted(name: str, kind: str, column: Column, known: Sequence[str], server: ServerTable, where: str) -> Column:
    """The server's cells of one feature in the form the sites' encoding reads; a misfit is noted."""
    if column.kind == "empty":
        server.warnings.append(f"{where}: column '{name}' has no values; it is encoded as missing there.")
        return column
    if kind == "continuous":
        if column.kind == "text":
            server.errors.append(f"{where}: column '{name}' holds text ({quoted(distinct([column])[:4])}) where "
                                 "the sites have numbers.")
        return column
    column = as_text(column)  # labels, compared with the sites' labels ('1' for 1.0 as for '1')
    new = [value for value in distinct([column]) if value not in known]
    if new and kind == "binary":
        server.errors.append(f"{where}: the binary column '{name}' has value(s) {quoted(new)} besides the sites' "
                             f"{quoted(known)}.")
    elif new:
        rows = int(np.isin(column.values, new).sum())
        server.warnings.append(f"{where}: column '{name}' has categories no site has, {quoted(new)} ({rows} row(s)); "
                               "they are encoded as none of the sites' categories.")
    return column
