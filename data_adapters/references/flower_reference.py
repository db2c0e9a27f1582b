"""The data reference of a real federation: the rows stay at the sites, reached through Flower.

    flower:127.0.0.1:9093                       the sites connected to this SuperLink (at least 2)
    flower:127.0.0.1:9093,sites=8,wait_s=300    wait up to 300 s for 8 sites
    {"source": "flower", "superlink": "127.0.0.1:9093", "sites": 3, "server_data": "demo:site=Pine County"}

`sites` is how many SuperNodes the run waits for (the ones connected when it starts take part);
`server_data` is the server's own data (a data reference read on the SuperLink's machine), the
test set AdaFed scores the sites' models on. Reading this module needs no Flower: a Flower
federation is one more kind of data reference, checked like the others before a run is created
(which algorithms can run over Flower is the application layer's: `application.flower.eligibility`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any

from fedcore.errors import SpecError
from fedcore.store import FLOWER_SOURCE as SOURCE
from fedcore.store import FlowerReference

# the options besides the SuperLink, and what each is when a reference does not give it
DEFAULTS = {f.name: f.default for f in fields(FlowerReference) if f.init and f.default is not MISSING}


def is_flower_reference(ref: Any) -> bool:
    if isinstance(ref, Mapping):
        return ref.get("source") == SOURCE
    return isinstance(ref, str) and ref.partition(":")[0].strip() == SOURCE


def flower_reference(ref: str | Mapping[str, Any]) -> FlowerReference:
    """The reference with every option filled in and checked (`to_json()`: its object form, as a
    spec stores it); SpecError names what is wrong."""
    values = flower_options(ref)
    unknown = sorted(set(values) - {"superlink", *DEFAULTS})
    if unknown:
        raise SpecError(f"A Flower reference has no option {', '.join(unknown)}; options: "
                        f"superlink, {', '.join(DEFAULTS)}.")
    numbers = {}
    for name, kind in (("sites", int), ("wait_s", float), ("round_timeout_s", float)):
        if name in values:
            try:
                numbers[name] = kind(values[name])
            except (TypeError, ValueError):
                raise SpecError(f"Flower option {name} must be a number, not {values[name]!r}.") from None
    # server_data is one more data reference, checked with the others (`check_reference`)
    resolved = FlowerReference(_address(values.get("superlink")), **numbers, server_data=values.get("server_data") or None)
    if resolved.sites < 1 or resolved.wait_s <= 0 or resolved.round_timeout_s <= 0:
        raise SpecError("Flower options: sites must be at least 1, wait_s and round_timeout_s positive.")
    return resolved


def flower_options(ref: str | Mapping[str, Any]) -> dict[str, Any]:
    """The options as written (no defaults, nothing checked, no file touched): what the data-roots
    policy reads `server_data` from before anything opens it."""
    if not isinstance(ref, str):
        return {k: v for k, v in ref.items() if k != "source"}
    items = [item.strip() for item in ref.partition(":")[2].split(",") if item.strip()]
    values: dict[str, Any] = {key.strip(): value.strip() for key, _, value in
                              (item.partition("=") for item in items if "=" in item)}
    addresses = [item for item in items if "=" not in item]
    if len(addresses) > 1:
        raise SpecError(f"A Flower reference names one SuperLink, not {', '.join(addresses)}.")
    if addresses:
        values["superlink"] = addresses[0]
    return values


def _address(value: Any) -> str:
    host, _, port = str(value or "").rpartition(":")
    if not host or not port.isdigit():
        raise SpecError(f"The SuperLink address must be HOST:PORT (e.g. 127.0.0.1:9093), not {value!r}.")
    return f"{host}:{port}"
