"""Algorithm registry: every algorithm by its command-line name."""

from __future__ import annotations

from fedcore.algorithms.adafed import AdaFed
from fedcore.algorithms.apfl import APFL
from fedcore.algorithms.base import Algorithm, params_from_dict
from fedcore.algorithms.centralized import Centralized
from fedcore.algorithms.fedavg import FedAvg
from fedcore.algorithms.fedbn import FedBN
from fedcore.algorithms.fedhealth2 import FedHealth2
from fedcore.algorithms.fedper import FedPer
from fedcore.algorithms.fedprox import FedProx
from fedcore.algorithms.ifedavg import IFedAvg
from fedcore.algorithms.indisco import InDISCOCM, InDISCOGM, InDISCOLM, InDISCOPM
from fedcore.algorithms.local import Local
from fedcore.errors import SpecError

REGISTRY: dict[str, type[Algorithm]] = {
    cls.name: cls
    for cls in (Local, Centralized, FedAvg, FedProx, FedBN, FedPer, APFL, IFedAvg, AdaFed, FedHealth2,
                InDISCOGM, InDISCOPM, InDISCOLM, InDISCOCM)
}


def get_algorithm(name: str) -> type[Algorithm]:
    try:
        return REGISTRY[name]
    except KeyError:
        raise SpecError(f"Unknown algorithm '{name}'. Choose one of: {', '.join(REGISTRY)}.") from None


def build_algorithm(name: str, params: dict | None = None) -> Algorithm:
    cls = get_algorithm(name)
    return cls(params_from_dict(cls, params or {}))


__all__ = ["REGISTRY", "Algorithm", "build_algorithm", "get_algorithm"]
