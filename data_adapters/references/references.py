"""Data references: which source, with which options — as a string or as a JSON object.

    demo                                        demo:standardization=site
    csv:site_a.csv,site_b.csv,target=outcome    heart:PATH    har:PATH    vehicle:PATH
    npz:PATH,split=dirichlet:0.1,sites=10       idx:PATH      images:DIR,size=64
    {"source": "csv", "files": ["a.csv", "b.csv"], "target": "outcome", "exclude": ["id"]}
    csv:a.csv,b.csv,target=outcome,server_test=server.csv   (a file option: NAME=PATH)

In a string, items without '=' are the source's path(s); a list option may be repeated
(exclude=id,exclude=ward) and a kind is written kinds=column:kind. Paths holding ',' or '='
need the object form. Both forms check the same option names and types.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from data_adapters.assembly.inject import parse_injection
from data_adapters.assembly.partition import parse_split
from data_adapters.references.sources import SOURCES, Source
from fedcore.data_labels import data_label
from fedcore.errors import DataError
from data_adapters.references.flower_reference import flower_reference, is_flower_reference

Reference = str | Mapping[str, Any]
TRUE, FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


def parse_reference(ref: Reference) -> tuple[Source, dict[str, Any]]:
    """The source and typed options of a reference; DataError names what is wrong."""
    if isinstance(ref, str):
        (source, raw), from_text = _split_text(ref), True
    elif isinstance(ref, Mapping):
        raw = {k: v for k, v in ref.items() if k != "source"}
        source, from_text = _source(str(ref.get("source") or "")), False
    else:
        raise DataError(f"A data reference is a string or an object with a 'source', not {type(ref).__name__}.")
    types_ = source.option_types()
    options = {}
    for name, value in raw.items():
        if name not in types_:
            allowed = ", ".join(f"{k}=..." for k in types_) or "none"
            shown = f"{name}={value}" if from_text else name
            raise DataError(f"Data source '{source.name}' does not understand '{shown}'. Options: {allowed}.")
        options[name] = _coerce(name, types_[name], value, from_text)
    missing = [name for name in source.required(options) if name not in options]
    if missing:
        raise DataError(f"Data source '{source.name}' needs {', '.join(missing)}"
                        + (f" (e.g. {source.name}:PATH)." if source.paths in missing else "."))
    return source, options


def normalize_reference(ref: Reference) -> str | dict[str, Any]:
    """The reference as plain JSON in the form it was given, checked, with absolute paths, so a
    stored spec finds its files from any working directory. Files must exist."""
    source, options = parse_reference(ref)
    for spec in options.get("inject", []):
        parse_injection(spec)
    if options.get("split"):
        parse_split(options["split"])
    if source.paths is None:
        return ref if isinstance(ref, str) else dict(ref)
    paths = options[source.paths]
    files = {name: options[name] for name in source.files if options.get(name)}
    for path in paths if isinstance(paths, list) else [paths]:
        if not Path(path).expanduser().exists():
            raise DataError(f"{path} does not exist.")
    for name, path in files.items():
        if not Path(path).expanduser().is_file():
            raise DataError(f"{path} ({name}) does not exist or is not a file.")
    if isinstance(ref, Mapping):
        absolute = [_absolute(p) for p in paths] if isinstance(paths, list) else _absolute(paths)
        return {**dict(ref), source.paths: absolute, **{name: _absolute(path) for name, path in files.items()}}
    head, _, rest = ref.partition(":")
    return f"{head}:{','.join(_absolute_item(item, source) for item in _items(rest))}"


def reference_dict(ref: Reference) -> dict[str, Any]:
    """The object form of a reference (strings parsed, known options typed as the object form
    wants them, e.g. images=200 -> 200; not validated beyond that)."""
    if isinstance(ref, Mapping):
        return dict(ref)
    if is_flower_reference(ref):
        return flower_reference(ref).to_json()
    source, raw = _split_text(ref)
    types_ = source.option_types()
    return {"source": source.name,
            **{k: _coerce(k, types_[k], v, from_text=True) if k in types_ else v for k, v in raw.items()}}


def describe_reference(ref: Reference) -> str:
    """A short label for lists and titles: 'csv: a.csv, b.csv · target outcome · dirichlet:0.1'
    (`fedcore.data_labels`, which the dashboard uses too: one label for a reference everywhere)."""
    return data_label(ref)


def _split_text(ref: str) -> tuple[Source, dict[str, Any]]:
    head, _, rest = ref.partition(":")
    source = _source(head.strip())
    raw: dict[str, Any] = {}
    for item in _items(rest):
        key, sep, value = item.partition("=")
        if not sep:
            if source.paths is None:
                raise DataError(f"Data source '{source.name}' does not understand '{item}' (it reads no files).")
            key, value = source.paths, item
        key = key.strip()
        raw.setdefault(key, []).append(value.strip())
    # Repeated keys (and several paths) become lists; list options wrap single values when typed.
    return source, {k: v if len(v) > 1 else v[0] for k, v in raw.items()}


def _absolute_item(item: str, source: Source) -> str:
    """A path (or a NAME=PATH file option) of a text reference with its path made absolute."""
    key, sep, value = item.partition("=")
    if not sep:
        return _absolute(item)
    return f"{key}={_absolute(value.strip())}" if key.strip() in source.files else item


def _items(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _source(name: str) -> Source:
    if name not in SOURCES:
        raise DataError(f"Unknown data source '{name}'. Available: {', '.join(SOURCES)}.")
    return SOURCES[name]


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def _coerce(name: str, hint: Any, value: Any, from_text: bool) -> Any:
    """`value` as the option's type; strings from a text reference are parsed, JSON values must
    already have the right type."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):  # X | None
        if value is None:
            return None
        hint = next(a for a in args if a is not type(None))
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list:
        values = value if isinstance(value, list) else [value]
        if args[0] is str and not all(isinstance(v, str) for v in values):
            raise DataError(f"Data option {name} must be a list of strings, not {value!r}.")
        return list(values)
    if origin is dict:
        if from_text:
            pairs = [v.partition(":") for v in (value if isinstance(value, list) else [value])]
            if any(not sep for _, sep, _ in pairs):
                raise DataError(f"Data option {name} is written {name}=column:value, not '{value}'.")
            return {k.strip(): v.strip() for k, _, v in pairs}
        if not isinstance(value, Mapping):
            raise DataError(f"Data option {name} must be an object (column -> value), not {value!r}.")
        return dict(value)
    if isinstance(value, list):
        raise DataError(f"Data option {name} takes one value, not {len(value)}.")
    if from_text:
        return _parse_text(name, hint, value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise DataError(f"Data option {name} must be a {hint.__name__}, not {value!r}.")
    return value


def _parse_text(name: str, hint: type, value: str) -> Any:
    if hint is bool:
        if value.lower() not in TRUE + FALSE:
            raise DataError(f"Data option {name} must be true or false, not '{value}'.")
        return value.lower() in TRUE
    try:
        return hint(value)
    except ValueError:
        raise DataError(f"Data option {name} must be a {hint.__name__}, not '{value}'.") from None
