"""Data adapters: turn a data reference into a fedcore Federation. They never train.

A data reference is `source` or `source:option=value,option=value`, e.g. `demo` or
`demo:standardization=site`. The hold-out split follows the run's seed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from data_adapters.demo import make_demo_federation
from fedcore.errors import DataError
from fedcore.federation import Federation

SOURCES: dict[str, Callable[..., Federation]] = {
    "demo": make_demo_federation,
}


def load_federation(ref: str, seed: int = 0) -> Federation:
    """The federation a data reference names, split with `seed`."""
    make, options = parse_reference(ref)
    return make(seed=seed, **options)


def parse_reference(ref: str) -> tuple[Callable[..., Federation], dict[str, object]]:
    """The loader and typed options of a data reference; DataError names what is wrong."""
    source, _, option_text = ref.partition(":")
    if source not in SOURCES:
        raise DataError(f"Unknown data source '{source}'. Available: {', '.join(SOURCES)}.")
    make = SOURCES[source]
    return make, _parse_options(source, option_text, make)


def _parse_options(source: str, text: str, make: Callable[..., Federation]) -> dict[str, object]:
    accepted = {
        name: p.default for name, p in inspect.signature(make).parameters.items() if name != "seed"
    }
    options: dict[str, object] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in accepted:
            allowed = ", ".join(f"{k}=..." for k in accepted) or "none"
            raise DataError(f"Data source '{source}' does not understand '{item}'. Options: {allowed}.")
        default = accepted[key]
        try:
            options[key] = type(default)(value) if default is not None else value
        except ValueError:
            raise DataError(f"Data option {key} must be a {type(default).__name__}, not '{value}'.") from None
    return options
