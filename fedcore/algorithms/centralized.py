"""Centralized: one model on all sites' pooled training rows, scored on every site's hold-out.

Not possible when data cannot move; it is the yardstick of data-pooling efforts.
"""

from fedcore.algorithms.base import Algorithm
from fedcore.algorithms.local import NoParams


class Centralized(Algorithm):
    name = "centralized"
    title = "Centralized"
    summary = "One model trained on the pooled data of all sites (the data-sharing yardstick)."
    Params = NoParams
    pooled = True
