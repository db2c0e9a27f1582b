"""Which algorithms a real federation runs: what each declares it needs (`Algorithm.needs`) against
what the server of a Flower federation has — the sites' models and, when given, data of its own.
No list of algorithm names is kept here: a new algorithm is eligible exactly when its needs allow."""

from __future__ import annotations

from fedcore.algorithms.base import Algorithm
from fedcore.algorithms.context import Need
from fedcore.errors import SpecError
from fedcore.store import FlowerReference

OFFERED = frozenset({Need.SERVER_TEST})  # a Flower server holds no site's rows, only (optionally) its own data


def check_flower_run(algorithm: Algorithm, reference: FlowerReference) -> None:
    """SpecError, with the reason and what to change, unless `algorithm` with its parameters can run
    over the Flower federation `reference` names."""
    if "table" not in algorithm.inputs:
        raise SpecError(f"{algorithm.title} trains images; the Flower apps carry tables only, so it runs "
                        "simulated only.")
    missing = sorted(algorithm.needs() - OFFERED, key=lambda need: need.name)
    if missing:
        hint = algorithm.needs_hint or "It runs simulated only."
        raise SpecError(f"{algorithm.title} with these settings needs {'; '.join(n.value for n in missing)}, which "
                        f"the server of a real federation does not have. {hint}")
    if Need.SERVER_TEST in algorithm.needs() and not reference.server_data:
        raise SpecError(f"{algorithm.title} scores the sites' models on the server's own test set: give the server's "
                        "data as server_data (a data reference on the SuperLink's machine).")


def runs_over_flower(algorithm: type[Algorithm]) -> bool:
    """Whether some settings of this algorithm run over Flower (what the Train page offers)."""
    return "table" in algorithm.inputs and (not algorithm().needs() - OFFERED or bool(algorithm.needs_hint))
