"""Whether the sites' target labels can be one set of classes, checked before anything trains.

The classes are the union of the labels every site uses, so a label one site writes differently
would silently become a class of its own: `yes`/`no` at one site and `1`/`0` at another make four
classes, of which each site sees two. Rules, for a target without documented labels (a source
that documents them, such as heart disease, refuses unknown values in `align.py` instead):
- refused: a label that is an infinite number (`inf`): a measurement gone wrong, not a class;
- refused: a label holding a control character (a NUL byte, an escape code): damage in the file;
- refused: labels that differ only in case, spacing or number format (`Yes` / `yes`, `1` / `1.0`):
  one class spelled two ways;
- refused: number codes and words among the labels (`0`, `1` at one site, `no`, `yes` at another,
  or `unknown` among numbers): two codings of the classes, which only the user can map;
- refused: a site that shares no label with the other sites (each site coding its classes its
  own way, e.g. `1`/`2` against `0`/`1` with nothing in common);
- flagged (a warning, for every target): a class found at one site only, with its rows — a rare
  class, or a different coding of a class (`0`/`1` at one site, `1`/`2` at another).
Each message names the files, and the data rows where a label needs fixing.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping

import numpy as np
import pandas as pd

from data_adapters.tables.cells import clipped, data_rows, label_order, quoted


def label_problems(target: str, labels: Mapping[str, pd.Series], files: Mapping[str, str]) -> list[str]:
    """Errors in the labels (site -> the target's labels as read, by data row) of a target
    without documented labels; see the module's rules."""
    errors = []
    for site, values in labels.items():
        distinct = values.dropna().unique()
        for problem, test in (("an infinite number", _infinite),
                              ("a control character (damage in the file?)", _has_control)):
            rows = values.isin([value for value in distinct if test(value)]).to_numpy()
            if rows.any():
                shown = values[rows].map(repr).str.slice(1, -1)  # control characters as escapes: '1\x00'
                errors.append(f"{files[site]}: the target '{target}' holds {problem} at data row(s) "
                              f"{data_rows(values.index[rows], shown)}; a class is a name or a whole number. "
                              "Fix the cells, or empty them to leave the rows out.")
    if errors:
        return errors
    seen = {site: sorted(set(values), key=label_order) for site, values in labels.items()}
    spellings: dict[str, set[str]] = {}
    for values in seen.values():
        for value in values:
            spellings.setdefault(_spelling_key(value), set()).add(value)
    for variants in (sorted(v, key=label_order) for v in spellings.values() if len(v) > 1):
        where = "; ".join(f"{quoted([v])} at {_files_with(v, seen, files)}" for v in variants)
        errors.append(f"The target '{target}' spells one class several ways: {where}. Use one spelling at "
                      "every site.")
    if errors:
        return errors
    union = set().union(*map(set, seen.values())) if seen else set()
    numbers = {v for v in union if _number(v) is not None}
    if numbers and numbers != union:
        per_site = "; ".join(f"{files[site]}: {quoted(values)}" for site, values in seen.items())
        errors.append(
            f"The target '{target}' mixes number codes and words ({per_site}). Read as they are these would be "
            f"{len(union)} classes; code the classes the same way at every site (recode one site's labels, or "
            "empty the cells that are not a class) before training."
        )
        return errors
    if len(seen) > 1:
        for site, values in seen.items():
            others = set().union(*(set(v) for s, v in seen.items() if s != site))
            if not others & set(values):
                errors.append(
                    f"{files[site]} (site '{site}') shares no class of the target '{target}' with the other sites: it "
                    f"has {quoted(values)}, they have {quoted(sorted(others, key=label_order))}. The sites must code "
                    "the classes the same way; recode one of them before training."
                )
    return errors


def single_site_classes(target: str, class_names: list[str], y: Mapping[str, np.ndarray],
                        rows: Mapping[str, pd.Index], files: Mapping[str, str]) -> list[str]:
    """Warnings for classes found at one site only (site -> class indices, and their data rows)."""
    if len(y) < 2:
        return []
    warnings = []
    for k, name in enumerate(class_names):
        at = [site for site, classes in y.items() if (classes == k).any()]
        if len(at) == 1:
            hits = rows[at[0]][y[at[0]] == k]
            warnings.append(
                f"Class {clipped(name)} of the target '{target}' is only at {files[at[0]]} (site '{at[0]}', "
                f"{len(hits)} row(s): data row(s) {data_rows(hits)}). A rare class, or a different coding of a class "
                "at that site? The model learns it from that site alone."
            )
    return warnings


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _infinite(value: str) -> bool:
    number = _number(value)
    return number is not None and math.isinf(number)


def _has_control(value: str) -> bool:
    return any(unicodedata.category(ch) == "Cc" for ch in value)


def _spelling_key(value: str) -> str:
    """What two spellings of one class share: numbers by value, words without case or spacing."""
    number = _number(value)
    if number is not None and math.isfinite(number):
        return repr(number)
    return re.sub(r"[\s_-]+", " ", value.casefold()).strip()


def _files_with(value: str, seen: Mapping[str, list[str]], files: Mapping[str, str]) -> str:
    return ", ".join(files[site] for site, values in seen.items() if value in values)
