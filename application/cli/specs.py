"""From command-line flags and spec files to run specifications (before `resolve_spec` checks them)."""

from __future__ import annotations

import argparse
import json
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from data_adapters import reference_dict
from fedcore.algorithms import REGISTRY, get_algorithm
from fedcore.config import TrainConfig
from fedcore.shapes import JsonLimit, bounded_json
from fedcore.errors import FedcoreError

DATA_FLAGS = ("target", "dictionary", "name", "site_column", "site_names", "exclude", "kinds", "missing_indicators",
              "standardization", "split", "sites", "inject")




def engine_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The engine settings given as flags (None where not given)."""
    return {f.name: getattr(args, f.name) for f in fields(TrainConfig)}


def param_flag_names() -> list[str]:
    """Every algorithm parameter's name: one flag each."""
    return sorted({f.name for cls in REGISTRY.values() for f in fields(cls.Params)})


def raw_specs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Spec file values, overridden by flags; one spec per algorithm named."""
    base: dict[str, Any] = _read_spec_file(args.spec) if args.spec else {}
    config = dict(base.get("config") or {})
    config.update({name: value for name, value in engine_flags(args).items() if value is not None})
    flagged_params = {
        name: getattr(args, name) for name in param_flag_names() if getattr(args, name) is not None
    }
    algorithms = (args.algorithm or base.get("algorithm") or "")
    names = [a.strip() for a in str(algorithms).split(",") if a.strip()]
    if not names:
        raise FedcoreError(f"Name an algorithm with --algorithm (one of: {', '.join(REGISTRY)}).")
    classes = [get_algorithm(name) for name in names]
    owners = {name: [c for c in classes if name in {f.name for f in fields(c.Params)}] for name in flagged_params}
    for name, users in owners.items():
        if not users:
            raise FedcoreError(
                f"--{name.replace('_', '-')} is not a parameter of {', '.join(c.title for c in classes)}; "
                "`python -m fedcore algorithms` lists each algorithm's parameters."
            )
    specs = []
    for cls in classes:
        params = dict(base.get("params") or {}) if len(classes) == 1 else {}
        params.update({k: v for k, v in flagged_params.items() if cls in owners[k]})
        specs.append({
            "algorithm": cls.name,
            "data": data_reference(args, base.get("data")),
            "params": params,
            "config": config,
            "disclosure": disclosure_settings(args, base.get("disclosure")),
        })
    return specs


def disclosure_settings(args: argparse.Namespace, base: Any = None) -> dict[str, Any]:
    """The sites' disclosure policy: a spec file's `disclosure`, overridden by --min-count and
    --dp-epsilon (checked by `Policy.from_settings`)."""
    settings = dict(base) if isinstance(base, dict) else {}
    for name in ("min_count", "dp_epsilon"):
        if getattr(args, name, None) is not None:
            settings[name] = getattr(args, name)
    return settings


def _read_spec_file(path: str) -> dict[str, Any]:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FedcoreError(f"Spec file '{path}' does not exist.") from None
    except UnicodeDecodeError:
        raise FedcoreError(f"Spec file '{path}' is not UTF-8 text.") from None
    kind = "TOML" if file.suffix == ".toml" else "JSON"
    try:
        spec = tomllib.loads(text) if kind == "TOML" else bounded_json(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as error:
        raise FedcoreError(f"Spec file '{path}' is not valid {kind}: {error}.") from None
    except JsonLimit as error:
        raise FedcoreError(f"Spec file '{path}' {error}: not a spec.") from None
    except (RecursionError, ValueError) as error:  # TOML nested too deep, or an integer of thousands of digits
        raise FedcoreError(f"Spec file '{path}' cannot be read as a spec ({type(error).__name__}).") from None
    if not isinstance(spec, dict):
        raise FedcoreError(f"Spec file '{path}' must hold an object with algorithm, data, params, config.")
    return spec


def data_reference(args: argparse.Namespace, stored: Any = None) -> Any:
    """--data (or the spec file's data, or demo) with the data flags merged in; the object form
    as soon as a flag is given, the reference as written otherwise."""
    ref = args.data or stored or "demo"
    flags = {name: getattr(args, name) for name in DATA_FLAGS if getattr(args, name) is not None}
    if "kinds" in flags:
        flags["kinds"] = dict(flags["kinds"])
    return {**reference_dict(ref), **flags} if flags else ref
