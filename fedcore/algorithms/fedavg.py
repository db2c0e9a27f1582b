"""FedAvg (McMahan et al. 2017): the baseline every other algorithm changes.

Nothing stays at a site: the server averages every parameter, iFedAvg's affine layers
included, uniformly over sites (the iFedAvg reference) or by training rows.
"""

from fedcore.algorithms.base import Algorithm


class FedAvg(Algorithm):
    name = "fedavg"
    title = "FedAvg"
    summary = "One shared model: the server averages every parameter of every site's model."
