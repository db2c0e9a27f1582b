"""Algorithm registry: every algorithm by its command-line name.

Each module of this package states one algorithm (or a family), the way its paper's box does; a
class with a `name` of its own registers itself (`base.REGISTRY`). Importing the package imports
every module in it, so a new algorithm is one new file here and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil

from fedcore.algorithms.base import REGISTRY, Algorithm, params_from_dict
from fedcore.errors import SpecError

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
# Listed (command line, Train page) in the order of their titles.
for _name in sorted(REGISTRY, key=lambda name: REGISTRY[name].title.casefold()):
    REGISTRY[_name] = REGISTRY.pop(_name)


def get_algorithm(name: str) -> type[Algorithm]:
    try:
        return REGISTRY[name]
    except KeyError:
        raise SpecError(f"Unknown algorithm '{name}'. Choose one of: {', '.join(REGISTRY)}.") from None


def build_algorithm(name: str, params: dict | None = None) -> Algorithm:
    cls = get_algorithm(name)
    return cls(params_from_dict(cls, params or {}))


__all__ = ["REGISTRY", "Algorithm", "build_algorithm", "get_algorithm", "params_from_dict"]
