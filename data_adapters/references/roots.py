"""Which files a data reference may name when someone else chooses it (the dashboard's visitors).

The rules, checked before anything is opened, listed or tested for existence:
- A data root is a folder the operator of the machine allows: the folders in $FEDCORE_DATA_DIRS
  (separated by ':'), plus the ones the caller adds (the dashboard adds its bundled samples and
  its upload folder). With none configured, no file on the machine can be named.
- A path is allowed when, with `~`, `..` and every symbolic link resolved, it is a root or lies
  inside one; a relative path is taken from the working directory. A link inside a root that
  points outside it is outside.
- Every path in a reference counts: the source's path(s), its file options (a server test set),
  and for a Flower federation the server's own data, recursively.
- A refusal says which path and which roots, never whether the path exists or what it holds.

The command line does not apply these rules: whoever types a path there can already read it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from data_adapters.references.references import Reference, parse_reference
from fedcore.errors import DataError
from data_adapters.references.flower_reference import flower_options, is_flower_reference

ENVIRONMENT = "FEDCORE_DATA_DIRS"


class OutsideDataRoots(DataError):
    """A path outside every data root: refused before it is opened."""


def configured_roots() -> list[Path]:
    """The operator's data roots from $FEDCORE_DATA_DIRS, resolved (empty when unset)."""
    listed = os.environ.get(ENVIRONMENT, "")
    return [Path(folder).expanduser().resolve() for folder in listed.split(os.pathsep) if folder.strip()]


def within_roots(path: str | os.PathLike, roots: Sequence[Path]) -> Path:
    """`path` resolved (symbolic links, `..`, `~`), if it is one of `roots` or inside one; else
    OutsideDataRoots. The only place the dashboard decides whether a path may be read."""
    text = os.fspath(path)
    if not text.strip() or "\x00" in text:
        raise OutsideDataRoots(f"'{text}' is not a path.")
    resolved = Path(text).expanduser().resolve()
    for root in roots:
        if resolved.is_relative_to(Path(root).expanduser().resolve()):
            return resolved
    allowed = ", ".join(str(root) for root in roots) or f"none are set up ({ENVIRONMENT})"
    raise OutsideDataRoots(f"{text} is outside the data folders this dashboard may read ({allowed}).")


def reference_paths(ref: Reference) -> list[str]:
    """Every path a reference names, as written: the source's path(s), its file options, and
    those of a Flower federation's server data. Reads nothing from disk."""
    if is_flower_reference(ref):
        server_data = flower_options(ref).get("server_data")
        return reference_paths(server_data) if server_data else []
    source, options = parse_reference(ref)
    named = options.get(source.paths) if source.paths else None
    paths = named if isinstance(named, list) else [named] if named else []
    return [str(p) for p in [*paths, *(options.get(name) for name in source.files)] if p]


def check_reference_roots(ref: Reference, roots: Sequence[Path]) -> None:
    """OutsideDataRoots (a DataError) unless every path of `ref` lies inside `roots`."""
    for path in reference_paths(ref):
        within_roots(path, roots)

