"""A data dictionary: how each site's export maps onto the study's columns, as a small readable,
versioned JSON file (`NAME.dictionary.json`) that the CLI, spec files, Flower sites and the Data
page's mapping step all read. The source files are never changed: the dictionary is applied to
each site's table as read, before the alignment (`alignment/align.py`) sees it.

    {
      "format": "fedcore-data-dictionary/1",
      "name": "Heart study, four hospitals",
      "target": {"column": "outcome", "negative": "0", "positive": "1"},
      "drop": ["patient_id"],
      "kinds": {"chest_pain": "categorical"},
      "sites": {
        "south": {
          "rename": {"Cholestérol (mmol/L)": "chol", "Sex": "sex"},
          "drop": ["ward"],
          "missing": {"chol": [0, -1], "*": ["999"]},
          "values": {"sex": {"M": "male", "F": "female"}},
          "convert": {"chol": {"name": "cholesterol mg/dL ↔ mmol/L (× 38.67)", "a": 38.67, "b": 0}},
          "positive": ["yes"]
        }
      }
    }

Every key is optional but `format`. What each does, in the order it is applied to a site:
1. `rename` (site): source column -> study column. Several source columns renamed to one are
   merged: each row takes the first of them that has a value (in the order written).
2. `drop` (study-wide and site): columns left out (named as after step 1). A study-wide drop of a
   column a site lacks says nothing; a site's does.
3. `missing` (site): per column (`*`: every column), the cells that mean 'not measured'; a code
   matches a cell written the same way or, for numbers, the same number (0 matches '0.0').
4. `values` (site): per column, a map from the site's codes to the study's ('M' -> 'male'); codes
   not in the map stay as they are (and the alignment reports them).
5. `convert` (site): per column, y = a · x + b on its numbers; other cells stay as they are.
   `name` says which conversion in words; a name of the unit catalogue (`fedcore.interpret.unit_conversions`,
   written as `conversion_name` writes it) must agree with a and b.
6. `positive` (site): the site's target values that mean the positive class: they become
   `target.positive`, every other value `target.negative` ("1" and "0" unless given).
Then `kinds` (study-wide) are the kinds the alignment uses for those columns, and
`target.column` names the target when the data reference does not.

`validate` checks a dictionary with a message naming the file, the key, the site and the column;
`apply_dictionary` says in warnings what it did not find (a site or column the data lack).
`merge` adds one dictionary's decisions to another's (the mapping step accepts suggestions one
at a time). Pure: no file is read here but by `read_dictionary`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from data_adapters.alignment.align import SiteTable, TableSites
from data_adapters.tables.cells import as_labels, finite_number, quoted
from fedcore.errors import DataError
from fedcore.shapes import JsonLimit, bounded_json
from fedcore.federation import FEATURE_KINDS
from fedcore.interpret.unit_conversions import CONVERSIONS, Conversion

FORMAT = "fedcore-data-dictionary/1"
SUFFIX = ".dictionary.json"
MAX_BYTES = 2_000_000
MAX_DEPTH = 16  # a dictionary nests 6 deep (sites → site → convert → column → {a, b}); room for edits
MAX_PROBLEMS = 20  # listed in one message; the rest are counted
EVERY_COLUMN = "*"
TOP_KEYS = ("format", "name", "description", "target", "drop", "kinds", "sites")
SITE_KEYS = ("rename", "drop", "missing", "values", "convert", "positive")
TARGET_KEYS = ("column", "negative", "positive")


def empty_dictionary(name: str = "") -> dict[str, Any]:
    return {"format": FORMAT, **({"name": name} if name else {})}


def read_dictionary(path: str | Path) -> dict[str, Any]:
    """The dictionary at `path`, validated (DataError names the file and what is wrong)."""
    file = Path(path)
    if not file.is_file():
        raise DataError(f"The data dictionary {file} does not exist or is not a file.")
    check_size(file.stat().st_size, file.name)
    return parse_dictionary(file.read_bytes(), file.name)


def check_size(size: int, label: str) -> None:
    """DataError unless `size` bytes may be a data dictionary: every path checks this before it
    reads a byte (a file's size on disk, an upload's announced size)."""
    if size > MAX_BYTES:
        raise DataError(f"{label} is {size / 1e6:.3g} MB, larger than {MAX_BYTES / 1e6:g} MB: not a data dictionary.")


def parse_dictionary(data: bytes, label: str) -> dict[str, Any]:
    """A dictionary from a file's bytes (e.g. an upload), validated; `label` names it in messages.
    Its size, how deep it nests and how long its numbers are bound it before and while it is
    parsed (`fedcore.shapes.bounded_json`)."""
    check_size(len(data), label)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(f"{label} is not UTF-8 text: not a data dictionary.") from None
    try:
        content = bounded_json(text, MAX_DEPTH)
    except JsonLimit as error:
        raise DataError(f"{label} {error}: not a data dictionary.") from None
    except json.JSONDecodeError as error:
        raise DataError(f"{label} is not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}.") from None
    return validate(content, label)


def dictionary_bytes(content: Mapping[str, Any]) -> bytes:
    """The dictionary as the file it is saved as: indented, keys in the documented order."""
    return (json.dumps(dict(content), indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def fingerprint(content: Mapping[str, Any]) -> str:
    """sha256 of the dictionary's canonical JSON: what a run records beside the content."""
    return hashlib.sha256(json.dumps(content, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


# -- validation ----------------------------------------------------------------------------------
def validate(content: Any, label: str) -> dict[str, Any]:
    """`content` if it is a data dictionary of this format; DataError listing every problem, each
    naming the file and the key path (site, column)."""
    problems: list[str] = []

    def problem(path: list[str], text: str) -> None:
        problems.append(f"{label}: {' → '.join(path)}: {text}" if path else f"{label}: {text}")

    if not isinstance(content, Mapping):
        raise DataError(f"{label}: a data dictionary is a JSON object, not {type(content).__name__}.")
    if content.get("format") != FORMAT:
        problem(["format"], f"must be \"{FORMAT}\", not {json.dumps(content.get('format'))}"
                + (" (a newer version of the format?)." if str(content.get("format", "")).startswith("fedcore-data-dictionary/")
                   else "."))
    for key in content:
        if key not in TOP_KEYS:
            problem([key], f"is no key of a data dictionary; keys: {', '.join(TOP_KEYS)}.")
    for key in ("name", "description"):
        if key in content and not isinstance(content[key], str):
            problem([key], "must be text.")
    target = content.get("target", {})
    if not isinstance(target, Mapping):
        problem(["target"], "must be an object (column, negative, positive).")
    else:
        for key, value in target.items():
            if key not in TARGET_KEYS:
                problem(["target", key], f"is no key of the target; keys: {', '.join(TARGET_KEYS)}.")
            elif not isinstance(value, str) or not value.strip():
                problem(["target", key], "must be non-empty text.")
    _names(content.get("drop", []), ["drop"], problem)
    kinds = content.get("kinds", {})
    if not isinstance(kinds, Mapping):
        problem(["kinds"], "must be an object (column -> kind).")
    else:
        for column, kind in kinds.items():
            if kind not in FEATURE_KINDS:
                problem(["kinds", repr(column)], f"{json.dumps(kind)} is not one of {', '.join(FEATURE_KINDS)}.")
    sites = content.get("sites", {})
    if not isinstance(sites, Mapping):
        problem(["sites"], "must be an object (site -> what to do there).")
        sites = {}
    for site, entry in sites.items():
        _site(entry, ["sites", repr(site)], problem)
    if problems:
        more = len(problems) - MAX_PROBLEMS
        raise DataError("The data dictionary cannot be used:\n- " + "\n- ".join(problems[:MAX_PROBLEMS])
                        + (f"\n- and {more:,} more problem(s)." if more > 0 else ""))
    return dict(content)


def _names(value: Any, path: list[str], problem) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        problem(path, "must be a list of column names.")


def _site(entry: Any, path: list[str], problem) -> None:
    if not isinstance(entry, Mapping):
        problem(path, "must be an object (rename, drop, missing, values, convert, positive).")
        return
    for key in entry:
        if key not in SITE_KEYS:
            problem([*path, key], f"is no key of a site; keys: {', '.join(SITE_KEYS)}.")
    rename = entry.get("rename", {})
    if not isinstance(rename, Mapping) or not all(isinstance(v, str) and v.strip() for v in rename.values()):
        problem([*path, "rename"], "must map source columns to non-empty study column names.")
    if "drop" in entry:
        _names(entry["drop"], [*path, "drop"], problem)
    missing = entry.get("missing", {})
    if not isinstance(missing, Mapping):
        problem([*path, "missing"], "must be an object (column -> list of codes).")
    else:
        for column, codes in missing.items():
            if not isinstance(codes, list) or not codes or not all(_is_code(c) for c in codes):
                problem([*path, "missing", repr(column)], "must be a list of codes (numbers or text).")
    values = entry.get("values", {})
    if not isinstance(values, Mapping):
        problem([*path, "values"], "must be an object (column -> {site code: study value}).")
    else:
        for column, mapping in values.items():
            if not isinstance(mapping, Mapping) or not all(_is_code(v) for v in mapping.values()):
                problem([*path, "values", repr(column)], "must map the site's codes to the study's values.")
    convert = entry.get("convert", {})
    if not isinstance(convert, Mapping):
        problem([*path, "convert"], "must be an object (column -> {name, a, b}).")
    else:
        for column, conversion in convert.items():
            where = [*path, "convert", repr(column)]
            if not isinstance(conversion, Mapping):
                problem(where, "must be an object {name, a, b} (y = a · x + b).")
                continue
            unknown = sorted(set(conversion) - {"name", "a", "b"})
            if unknown:
                problem(where, f"has no key {', '.join(unknown)}; keys: name, a, b.")
            a, b = conversion.get("a"), conversion.get("b", 0)
            if not _number(a) or a == 0:
                problem([*where, "a"], f"must be a non-zero number, not {json.dumps(a)}.")
            elif not _number(b):
                problem([*where, "b"], f"must be a number, not {json.dumps(b)}.")
            else:
                named = catalogue_conversion(str(conversion.get("name", "")))
                if named is not None and not (math.isclose(a, named.a, rel_tol=1e-3)
                                              and math.isclose(b, named.b, rel_tol=1e-3, abs_tol=1e-6)):
                    problem(where, f"'{conversion['name']}' means a = {named.a:.4g}, b = {named.b:.4g} (the unit "
                                   f"catalogue), not a = {a:.4g}, b = {b:.4g}: the wrong way round?")
    positive = entry.get("positive")
    if positive is not None and (not isinstance(positive, list) or not positive or not all(_is_code(v) for v in positive)):
        problem([*path, "positive"], "must be a list of the site's target values that mean the positive class.")


def conversion_name(conversion: Conversion) -> str:
    """How a dictionary names a catalogue conversion: its pair of units and its formula, e.g.
    'cholesterol mg/dL ↔ mmol/L (÷ 38.67)' (the formula says which way)."""
    return f"{conversion.pair()} ({conversion.formula()})"


def catalogue_conversion(name: str) -> Conversion | None:
    """The catalogue's conversion a dictionary's name stands for, if any."""
    return next((c for c in CONVERSIONS if conversion_name(c) == name.strip()), None)


def _is_code(value: Any) -> bool:
    return (isinstance(value, str) and value.strip() != "") or _number(value)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# -- applying it ---------------------------------------------------------------------------------
def target_of(content: Mapping[str, Any] | None, given: str | None) -> str:
    """The target column: the data reference's, else the dictionary's; DataError if they differ
    or neither names one."""
    named = ((content or {}).get("target") or {}).get("column")
    if given and named and given != named:
        raise DataError(f"The data reference names the target '{given}' but the data dictionary names '{named}'.")
    if not (given or named):
        raise DataError("Name the target column (the class to predict), in the data reference or the dictionary.")
    return str(given or named)


def apply_dictionary(sites: TableSites, content: Mapping[str, Any], label: str = "the data dictionary") -> TableSites:
    """The sites' tables as the dictionary maps them (see the module's steps); every source
    table is left as it was. Warnings name what the dictionary mentions that the data lack. The
    server's own test file (csv server_test) gets the study-wide decisions and the entry named
    after its file, as a site would (`server.csv` -> `server`). DataError where a rename would
    overwrite a column the site keeps."""
    warnings: list[str] = []
    entries = content.get("sites", {})
    names = [t.site for t in sites.tables]
    server = sites.server_table
    server_entry = _entry_name(server.file) if server is not None else None
    for site in entries:
        if site not in names and site != server_entry and len(names) > 1:  # one site's data hold none of the others
            warnings.append(f"{label} has decisions for the site '{site}', which is not in the data "
                            f"(sites: {quoted(names)}).")
    target = content.get("target", {})
    tables = [_apply_site(table, entries.get(table.site, {}), content.get("drop", []), sites.target, target,
                          label, warnings) for table in sites.tables]
    if server is not None:
        server = _apply_site(server, entries.get(server_entry, {}), content.get("drop", []), sites.target, target,
                             label, warnings)
    kinds = {**sites.kinds, **content.get("kinds", {})}
    notes = {**sites.notes, "dictionary": {"file": label, "sha256": fingerprint(content), "content": dict(content)}}
    return replace(sites, tables=tables, kinds=kinds, warnings=[*sites.warnings, *warnings], notes=notes,
                   name=content.get("name") or sites.name, server_table=server)


def _entry_name(file: str) -> str:
    """The dictionary entry a file's table takes: its name without folders and extensions."""
    name = Path(file).name
    return name.split(".")[0] if "." in name else name


def _apply_site(table: SiteTable, entry: Mapping[str, Any], drop: list[str], target: str,
                target_names: Mapping[str, str], label: str, warnings: list[str]) -> SiteTable:
    frame = table.frame.copy()
    where = f"{label}, site '{table.site}' ({table.file})"

    def lacks(step: str, column: str) -> bool:
        if column in frame.columns:
            return False
        warnings.append(f"{where}: {step} '{column}', which the file does not have (columns: {quoted(frame.columns)}).")
        return True

    frame = _renamed(frame, entry.get("rename", {}), lacks, where)
    for column in entry.get("drop", []):
        lacks("drops", column)
    frame = frame.drop(columns=[c for c in dict.fromkeys([*drop, *entry.get("drop", [])]) if c in frame.columns])
    for column, codes in entry.get("missing", {}).items():
        columns = list(frame.columns) if column == EVERY_COLUMN else [column]
        if column != EVERY_COLUMN and lacks("has missing codes for", column):
            continue
        for name in columns:
            frame[name] = frame[name].mask(_matches(frame[name], codes))
    for column, mapping in entry.get("values", {}).items():
        if not lacks("maps the values of", column):
            frame[column] = _mapped(frame[column], mapping)
    for column, conversion in entry.get("convert", {}).items():
        if not lacks("converts", column):
            frame[column] = _converted(frame[column], float(conversion["a"]), float(conversion.get("b", 0)),
                                       table.decimal)
    positive = entry.get("positive")
    if positive is not None and not lacks("names the positive values of the target", target):
        labels = as_labels(frame[target])
        hits = _matches(frame[target], positive)
        frame[target] = labels.where(labels.isna(), np.where(hits, target_names.get("positive", "1"),
                                                              target_names.get("negative", "0")))
    return replace(table, frame=frame)


def _mapped(values: pd.Series, mapping: Mapping[str, Any]) -> pd.Series:
    """A site's codes as the study's: each cell written as a key of `mapping` (a number also as the
    same number, 1 for '1.0') becomes its value; other cells stay as they were."""
    labels = as_labels(values)
    keys = {str(k).strip(): v for k, v in mapping.items()}
    return labels.map(lambda v: keys.get(v, v) if isinstance(v, str) else v)


def _renamed(frame: pd.DataFrame, rename: Mapping[str, str], lacks, where: str) -> pd.DataFrame:
    """Columns renamed; several sources of one study column merged (first value per row). A rename
    onto a column the site has and keeps (not renamed itself, not named as a source of the merge)
    is refused: it would silently lose that column."""
    sources: dict[str, list[str]] = {}
    for source, study in rename.items():
        if not lacks("renames", source):
            sources.setdefault(study, []).append(source)
    for study, columns in sources.items():
        if study in frame.columns and study not in columns and study not in rename:
            raise DataError(
                f"{where}: renames {quoted(columns)} to '{study}', a column the site already has. Rename its "
                f"'{study}' too (to another name, or to '{study}' to merge the two: each row takes the first "
                "source that has a value).")
    merged = {}
    for study, columns in sources.items():
        values = frame[columns[0]]
        for column in columns[1:]:
            values = values.where(values.notna(), frame[column])
        merged[study] = values
    first = {columns[0]: study for study, columns in sources.items()}
    gone = {column for columns in sources.values() for column in columns} | set(sources)
    # every study column where its first source column was (one order at every site, one-site data too)
    order = [first.get(column, column) for column in frame.columns if column in first or column not in gone]
    return pd.DataFrame({name: merged[name] if name in merged else frame[name] for name in order}, index=frame.index)


def _matches(values: pd.Series, codes: list[Any]) -> np.ndarray:
    """Cells written as one of `codes`, or (numbers) equal to a code's number."""
    texts = {str(c).strip() for c in codes}
    numbers = [float(c) for c in codes if finite_number(c) is not None]
    labels = as_labels(values)
    hits = labels.isin(texts).to_numpy(dtype=bool, copy=True)
    if numbers:
        parsed = pd.to_numeric(labels, errors="coerce").to_numpy(dtype=np.float64)
        hits |= np.isin(parsed, numbers)
    return hits


def _converted(values: pd.Series, a: float, b: float, decimal: str) -> pd.Series:
    """a · x + b on the cells that are numbers; other cells as they were (the alignment reports them)."""
    if pd.api.types.is_numeric_dtype(values):
        return values.astype(np.float64) * a + b
    text = values.astype("string").str.strip()
    if decimal == ",":
        text = text.str.replace(",", ".", regex=False)
    numbers = pd.to_numeric(text, errors="coerce")
    return values.where(numbers.isna(), numbers * a + b)


# -- building one --------------------------------------------------------------------------------
def merge(content: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """`content` with `patch`'s decisions added (objects merged key by key, lists joined without
    repeats, other values replaced); neither argument is changed."""
    out = copy.deepcopy(dict(content))
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        elif isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = list(dict.fromkeys([*out[key], *value]))
        else:
            out[key] = copy.deepcopy(value)
    return out


def dictionary_name(files: list[str]) -> str:
    """A name for the study made from its files' names ('north, south and 2 more')."""
    stems = [Path(f).name.split(".")[0] for f in files]
    if len(stems) <= 3:
        return ", ".join(stems)
    return f"{', '.join(stems[:2])} and {len(stems) - 2} more"


# -- what a decision changes -----------------------------------------------------------------------
def effects(sites: TableSites, patch: Mapping[str, Any]) -> list[str]:
    """What applying `patch` (dictionary decisions) to the sites' tables as they are now would
    change, one line per decision, counted with the same matching the dictionary applies ('23
    values at hungary become missing (8 % of its chol)'). A decision that changes nothing says so;
    one that would be refused says why."""
    tables = {t.site: t for t in sites.tables}
    if sites.server_table is not None:
        tables.setdefault(_entry_name(sites.server_table.file), sites.server_table)
    lines: list[str] = []
    for column in patch.get("drop", []):
        where = [s for s, t in tables.items() if column in t.frame.columns]
        lines.append(f"'{column}' is left out at {_sites(where)}." if where else f"No site has a column '{column}'.")
    for column, kind in patch.get("kinds", {}).items():
        values = set().union(*(set(as_labels(t.frame[column]).dropna()) for t in tables.values() if column in t.frame))
        lines.append(f"'{column}' is used as {kind}" + (f": {len(values)} categories, one input each." if kind ==
                                                         "categorical" else f" ({len(values)} distinct values)."))
    for site, entry in patch.get("sites", {}).items():
        table = tables.get(site)
        if table is None:
            lines.append(f"No site is called '{site}'.")
            continue
        lines += _site_effects(table, entry, sites.target, patch.get("target", {}))
    return lines


def _site_effects(table: SiteTable, entry: Mapping[str, Any], target: str, names: Mapping[str, str]) -> list[str]:
    frame, site, lines = table.frame, table.site, []

    def has(column: str) -> bool:
        if column in frame.columns:
            return True
        lines.append(f"{site} has no column '{column}' (yet: a rename may come first).")
        return False

    for source, study in entry.get("rename", {}).items():
        if not has(source):
            continue
        filled = int(frame[source].notna().sum())
        if study in frame.columns and study != source and study not in entry.get("rename", {}):
            lines.append(f"Refused: {site} already has a column '{study}'; renaming '{source}' onto it would lose it "
                         "(rename that one first).")
        else:
            lines.append(f"{site}'s '{source}' ({filled} values) becomes '{study}'.")
    for column in entry.get("drop", []):
        if has(column):
            lines.append(f"{site}'s '{column}' ({int(frame[column].notna().sum())} values) is left out.")
    for column, codes in entry.get("missing", {}).items():
        columns = list(frame.columns) if column == EVERY_COLUMN else [column] if has(column) else []
        hits = sum(int(_matches(frame[c], codes).sum()) for c in columns)
        filled = sum(int(frame[c].notna().sum()) for c in columns)
        what = "any column" if column == EVERY_COLUMN else f"its '{column}'"
        lines.append(f"{hits} value(s) at {site} become missing ({hits / max(filled, 1):.0%} of {what})." if hits
                     else f"No value of {what} at {site} is {', '.join(map(str, codes))}: nothing changes.")
    for column, mapping in entry.get("values", {}).items():
        if not has(column):
            continue
        labels = as_labels(frame[column])
        counts = [f"{int((labels == str(k).strip()).sum())} '{k}' → '{v}'" for k, v in mapping.items()]
        lines.append(f"At {site}, '{column}': " + ", ".join(counts) + ".")
    for column, conversion in entry.get("convert", {}).items():
        if not has(column):
            continue
        before = pd.to_numeric(_converted(frame[column], 1.0, 0.0, table.decimal), errors="coerce")
        after = before * float(conversion["a"]) + float(conversion.get("b", 0))
        if before.notna().any():
            lines.append(f"{int(before.notna().sum())} values of '{column}' at {site} are converted: median "
                         f"{before.median():.4g} → {after.median():.4g}.")
    positive = entry.get("positive")
    if positive is not None and has(target):
        hits = _matches(frame[target], positive)
        filled = frame[target].notna().to_numpy()
        lines.append(f"At {site}, {int((hits & filled).sum())} row(s) ({', '.join(map(str, positive))}) become "
                     f"'{names.get('positive', '1')}' and {int((~hits & filled).sum())} '{names.get('negative', '0')}'.")
    return lines


def _sites(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 4 else f"{', '.join(names[:3])} and {len(names) - 3} more"
