"""Readers that never raise on a bad file: a value of a declared shape, and what was wrong.

A file on disk can be missing, empty, cut off, binary garbage, or valid JSON of the wrong shape
(a list where an object belongs, text where a number belongs). Code that reads a run should not
have to guard against each of these: the readers here return a value that has the declared
shape and a list of `Damage` (which file, what problem). The rules:

- A whole file that cannot be read, parsed, or is not of its declared kind reads as `None`
  (or the reader's default) with one Damage.
- In an object (`Record`), a declared field whose value does not fit its shape is left out, or
  replaced by its default when it has one; a required field that is missing is a Damage too.
  Undeclared fields are kept as they are (newer writers may add some).
- A list or map with one misfit element is a misfit as a whole: a site list with a hole would
  shift every site after it, so it is never silently shortened.
- In a JSON-lines log, a line that is not JSON or does not fit is left out and reported; a last
  line without its newline is a record still being written (or torn by a killed writer) and is
  skipped without a report.

Messages describe types only, never the offending value (it may be anything a file held).
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedcore.errors import FedcoreError

MAX_LISTED = 3  # problems named per file; the rest are counted
# Bounds on JSON that a reader parses: Python's parser recurses once per level (100,000 levels
# overflow its stack) and refuses integers above 4,300 digits with a ValueError of its own. A
# run's files nest 4 deep, spec files and data dictionaries 6; numbers are written in at most
# 25 characters.
MAX_JSON_DEPTH = 64
MAX_NUMBER_CHARACTERS = 40
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_OPENING, _CLOSING = np.frombuffer(b"{[", dtype=np.uint8), np.frombuffer(b"}]", dtype=np.uint8)


class JsonLimit(ValueError):
    """JSON text past a limit on how deep it nests or how long its numbers are (the message
    says which, and how far, e.g. 'nests objects and lists 100,000 deep (at most 64)')."""


def bounded_json(text: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads(text)` for text from outside: JsonLimit before parsing when it nests more than
    `max_depth` deep, and while parsing at a number longer than MAX_NUMBER_CHARACTERS;
    json.JSONDecodeError as json.loads raises it."""
    depth = json_depth(text)
    if depth > max_depth:
        raise JsonLimit(f"nests objects and lists {depth:,} deep (at most {max_depth})")

    def number(kind: type) -> Callable[[str], Any]:
        def parse(literal: str) -> Any:
            if len(literal) > MAX_NUMBER_CHARACTERS:
                raise JsonLimit(f"holds a number written with {len(literal):,} characters (at most "
                                f"{MAX_NUMBER_CHARACTERS})")
            return kind(literal)
        return parse

    try:
        return json.loads(text, parse_int=number(int), parse_float=number(float))
    except RecursionError:  # the depth check is meant to make this unreachable
        raise JsonLimit("nests too deep to be read") from None


def json_depth(text: str) -> int:
    """How deep JSON text's objects and lists nest, counted without parsing it (brackets inside
    strings left out)."""
    brackets = _JSON_STRING.sub("", text).encode("utf-8", errors="replace")
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.isin(codes, _OPENING).astype(np.int64) - np.isin(codes, _CLOSING).astype(np.int64)
    return int(np.cumsum(steps).max(initial=0))


@dataclass(frozen=True)
class Damage:
    """One thing wrong with one file of a run: `file` relative to the run folder."""

    file: str
    problem: str

    def __str__(self) -> str:
        return f"{self.file}: {self.problem}"


class RunDamaged(FedcoreError):
    """A file a reader needs is damaged; the message names the file and the problem (and the
    run, when the reader knows it)."""

    def __init__(self, damage: Iterable[Damage], run: str | None = None) -> None:
        self.damage, self.run = list(damage), run
        super().__init__((f"Run {run}: " if run else "") + "; ".join(str(d) for d in self.damage))


_MISFIT = object()  # what `Shape.fit` returns for a value that does not fit


def kind_of(value: Any) -> str:
    """What a JSON value is, in words (never the value itself)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN or infinity"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class Shape:
    """What a JSON value must be. `fit` returns the value (objects with misfit fields left out) or
    `_MISFIT`, appending what is wrong to `problems`; `where` names the value ('config.rounds').
    `ok` is the quick yes/no for a value that fits in full (most values: a run's log has
    thousands of records, and only a damaged one needs the careful walk)."""

    name = "a value"

    def ok(self, value: Any) -> bool:
        raise NotImplementedError

    def fit(self, value: Any, where: str, problems: list[str]) -> Any:
        raise NotImplementedError

    def misfit(self, value: Any, where: str, problems: list[str]) -> Any:
        problems.append(f"{_quoted(where)} should be {self.name}, not {kind_of(value)}")
        return _MISFIT


def _quoted(where: str) -> str:
    return f"'{where}'" if where else "the content"


_PLAIN_KEY = re.compile(r"[\w .-]{1,60}")


def _key(key: str) -> str:
    """A key of a damaged file as it may be shown: plain words only (never markup)."""
    return key if _PLAIN_KEY.fullmatch(key) else "(a key)"


class Scalar(Shape):
    def __init__(self, name: str, test: Callable[[Any], bool]) -> None:
        self.name, self.test = name, test
        self.ok = test

    def fit(self, value: Any, where: str, problems: list[str]) -> Any:
        return value if self.test(value) else self.misfit(value, where, problems)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


TEXT = Scalar("text", lambda v: isinstance(v, str))
WHOLE = Scalar("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool))
NUMBER = Scalar("a number", _is_number)
FLAG = Scalar("true or false", lambda v: isinstance(v, bool))
SCALAR = Scalar("a number, text, true/false or null",
                lambda v: v is None or isinstance(v, (str, bool)) or _is_number(v))


class Anything(Shape):
    def ok(self, value: Any) -> bool:
        return True

    def fit(self, value: Any, where: str, problems: list[str]) -> Any:
        return value


ANY = Anything()


class OneOf(Shape):
    """Text that is one of a fixed set of words."""

    def __init__(self, choices: Iterable[str]) -> None:
        self.choices = tuple(choices)
        self.name = "one of " + ", ".join(self.choices)

    def ok(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.choices

    def fit(self, value: Any, where: str, problems: list[str]) -> Any:
        return value if self.ok(value) else self.misfit(value, where, problems)

    def misfit(self, value: Any, where: str, problems: list[str]) -> Any:
        detail = "another word" if isinstance(value, str) else kind_of(value)
        problems.append(f"{_quoted(where)} should be {self.name}, not {detail}")
        return _MISFIT


class Nullable(Shape):
    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.name = f"{shape.name} or null"

    def ok(self, value: Any) -> bool:
        return value is None or self.shape.ok(value)

    def fit(self, value: Any, where: str, problems: list[str]) -> Any:
        return None if value is None else self.shape.fit(value, where, problems)


class Either(Shape):
    """The first of several shapes the value fits."""

    def __init__(self, *shapes: Shape) -> None:
        self.shapes = shapes
        self.name = " or ".join(s.name for s in shapes)

    def ok(self, value: Any) -> bool:
        return any(shape.ok(value) for shape in self.shapes)

    def fit(self, value: Any, where: str, problems: list[str]) -> Any:
        for shape in self.shapes:
            attempt: list[str] = []
            fitted = shape.fit(value, where, attempt)
            if fitted is not _MISFIT and not attempt:
                return fitted
        return self.misfit(value, where, problems)


class ListOf(Shape):
    def __init__(self, item: Shape) -> None:
        self.item = item
        self.name = f"a list of {item.name}"

    def ok(self, value: Any) -> bool:
        return isinstance(value, list) and all(map(self.item.ok, value))

    def fit(self, value: Any, where: str, problems: list[str]) -> Any:
        if self.ok(value):
            return value
        if not isinstance(value, list):
            return self.misfit(value, where, problems)
        out = []
        for i, element in enumerate(value):
            fitted = self.item.fit(element, f"{where}[{i}]", problems)
            if fitted is _MISFIT:
                return _MISFIT
            out.append(fitted)
        return out


class MapOf(Shape):
    """An object with any keys whose values all have one shape (site -> metrics)."""

    def __init__(self, item: Shape) -> None:
        self.item = item
        self.name = "an object"

    def ok(self, value: Any) -> bool:
        return isinstance(value, dict) and all(map(self.item.ok, value.values()))

    def fit(self, value: Any, where: str, problems: list[str]) -> Any:
        if self.ok(value):
            return value
        if not isinstance(value, dict):
            return self.misfit(value, where, problems)
        out = {}
        for key, element in value.items():
            fitted = self.item.fit(element, f"{where}.{_key(key)}" if where else _key(key), problems)
            if fitted is _MISFIT:
                return _MISFIT
            out[key] = fitted
        return out


_NO_DEFAULT = object()


@dataclass(frozen=True)
class Field:
    shape: Shape
    required: bool = False
    default: Any = _NO_DEFAULT  # what a reader sees when the value is missing or misfit

    def fallback(self) -> Any:
        default = self.default
        return default() if callable(default) else default


def required(shape: Shape, default: Any = _NO_DEFAULT) -> Field:
    return Field(shape, True, default)


def optional(shape: Shape) -> Field:
    return Field(shape)


class Record(Shape):
    """An object with declared fields (`Field`s, or bare shapes for optional ones); undeclared
    fields pass unchanged. `check` may add problems that involve several fields."""

    name = "an object"

    def __init__(self, fields: Mapping[str, Field | Shape],
                 check: Callable[[dict[str, Any]], list[str]] | None = None) -> None:
        self.fields = {k: f if isinstance(f, Field) else optional(f) for k, f in fields.items()}
        self.check = check

    def ok(self, value: Any) -> bool:
        return (isinstance(value, dict)
                and all(declared.shape.ok(value[key]) if key in value
                        else not declared.required and declared.default is _NO_DEFAULT
                        for key, declared in self.fields.items())
                and (self.check is None or not self.check(value)))

    def fit(self, value: Any, where: str, problems: list[str]) -> Any:
        if self.ok(value):
            return value
        if not isinstance(value, dict):
            return self.misfit(value, where, problems)
        out = dict(value)
        for key, declared in self.fields.items():
            path = f"{where}.{key}" if where else key
            if key not in value:
                if declared.required:
                    problems.append(f"{_quoted(path)} is missing")
                fitted = _MISFIT
            else:
                fitted = declared.shape.fit(value[key], path, problems)
            if fitted is _MISFIT:
                out.pop(key, None)
                if declared.default is not _NO_DEFAULT:
                    out[key] = declared.fallback()
            else:
                out[key] = fitted
        if self.check is not None:
            problems.extend(self.check(out))
        return out


def fits(value: Any, shape: Shape) -> bool:
    """Whether a value has the shape, in full (for values taken out of a loosely typed record)."""
    problems: list[str] = []
    return shape.fit(value, "", problems) is not _MISFIT and not problems


def _listed(problems: list[str]) -> str:
    shown = "; ".join(problems[:MAX_LISTED])
    return shown + (f" (and {len(problems) - MAX_LISTED} more)" if len(problems) > MAX_LISTED else "")


# -- files ---------------------------------------------------------------------------------------
def read_json(path: Path, shape: Shape, name: str, missing_ok: bool = False) -> tuple[Any, list[Damage]]:
    """A JSON file fitted to `shape`: (value, []) when all is well; (None, [Damage]) when the file
    is missing (unless `missing_ok`), unreadable, empty, not JSON or not of the shape at its top;
    (value with misfit fields left out, [Damage]) when only some fields are wrong."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, [] if missing_ok else [Damage(name, "is missing")]
    except OSError as error:
        return None, [Damage(name, f"cannot be read ({error.strerror or type(error).__name__})")]
    text, problem = _decode(data)
    if problem:
        return None, [Damage(name, problem)]
    try:
        value = bounded_json(text)
    except json.JSONDecodeError as error:
        return None, [Damage(name, f"is not valid JSON, cut off or garbled ({error.msg}: line {error.lineno}, "
                                   f"column {error.colno})")]
    except JsonLimit as error:
        return None, [Damage(name, f"is no file fedcore writes: it {error}")]
    problems: list[str] = []
    fitted = shape.fit(value, "", problems)
    if fitted is _MISFIT:
        return None, [Damage(name, f"should hold {shape.name}, not {kind_of(value)}")]
    return fitted, [Damage(name, _listed(problems))] if problems else []


def _decode(data: bytes) -> tuple[str, str | None]:
    if not data.strip():
        return "", "is empty"
    if b"\x00" in data:
        return "", "holds binary data, not text"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return "", "holds binary data, not UTF-8 text"


def read_json_lines(path: Path, shape: Shape, name: str) -> tuple[list[Any], list[Damage]]:
    """The records of an append-only JSON-lines log that fit `shape`; a missing log is empty.
    Lines that are not JSON or do not fit are left out and reported (by line number); a last line
    without its newline is skipped silently (a writer is still writing it, or was killed)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], []
    except OSError as error:
        return [], [Damage(name, f"cannot be read ({error.strerror or type(error).__name__})")]
    lines = data.split(b"\n")
    torn = lines.pop()  # b"" when the log ends with its newline
    records, unreadable, misfits = [], [], []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            value = bounded_json(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, JsonLimit):
            unreadable.append(number)
            continue
        problems: list[str] = []
        fitted = shape.fit(value, "", problems)
        if fitted is _MISFIT or problems:
            misfits.append(f"line {number}: " + (_listed(problems) if problems else
                                                 f"should hold {shape.name}, not {kind_of(value)}"))
            continue
        records.append(fitted)
    if torn.strip():
        try:  # complete but for its newline: keep it
            value = bounded_json(torn.decode("utf-8"))
            problems = []
            fitted = shape.fit(value, "", problems)
            if fitted is not _MISFIT and not problems:
                records.append(fitted)
        except (UnicodeDecodeError, json.JSONDecodeError, JsonLimit):
            pass
    damage = []
    if unreadable:
        listed = ", ".join(map(str, unreadable[:MAX_LISTED])) + (
            f" and {len(unreadable) - MAX_LISTED} more" if len(unreadable) > MAX_LISTED else "")
        damage.append(Damage(name, f"{'line' if len(unreadable) == 1 else 'lines'} {listed} "
                                   f"{'is' if len(unreadable) == 1 else 'are'} not valid JSON (left out)"))
    if misfits:
        damage.append(Damage(name, _listed(misfits) + " (left out)"))
    return records, damage


def npz_damage(path: Path, name: str) -> Damage | None:
    """A quick look at an npz file without reading its arrays: is it a zip of .npy members?
    (Catches missing, empty, cut-off and garbage files; a garbled member shows on loading.)"""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except FileNotFoundError:
        return Damage(name, "is missing")
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
        return Damage(name, _npz_problem(path, error))
    strangers = [n for n in names if not n.endswith(".npy")]
    if strangers:
        return Damage(name, "is not an array file (it holds members other than arrays)")
    return None


def read_npz(path: Path, name: str, text: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """Every array of an npz file, never unpickling; RunDamaged naming the file otherwise. Arrays
    must hold numbers, except those named in `text`, which may hold strings."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except FileNotFoundError:
        raise RunDamaged([Damage(name, "is missing")]) from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as error:
        raise RunDamaged([Damage(name, _npz_problem(path, error))]) from None
    strange = [key for key, array in arrays.items() if array.dtype.kind not in ("biufU" if key in text else "biuf")]
    if strange:
        raise RunDamaged([Damage(name, f"holds arrays that are not numbers ({', '.join(strange[:MAX_LISTED])})")])
    return arrays


def _npz_problem(path: Path, error: BaseException) -> str:
    try:
        size = path.stat().st_size
    except OSError:
        size = None
    if size == 0:
        return "is empty"
    if isinstance(error, ValueError) and "pickle" in str(error):
        return "holds Python objects, which are never unpickled"
    if isinstance(error, (zipfile.BadZipFile, EOFError)):
        return "is not a readable array file (cut off or garbled)"
    return f"cannot be read ({type(error).__name__})"
