"""The check-up's model lenses: what trained federated models say about each site, calibrated
the way the data lens is (`calibration`): a site against the *other* sites, on the values the
lenses record (arrays of the run store), with the null and the material size stated per check.
Each check is declared in `checks.CHECKS` (its family: every model lens is a family of its own, so
its false discovery rate is its own and no data finding loosens it; its limits are read there).

feature shifts  iFedAvg's b_in and w_in [sites, features] (the mean over replicate runs with other
                seeds when there are several: training noise averages out, natural differences do
                not); leave-one-out t per cell with variances moderated across features; material
                when b_in lies 0.25 or more (standardised units) from the others', w_in 0.2.
labels          (a) iFedAvg's local output layer: w_out (per site, the mean over its classes' weights
                when not scalar) against the others', leave-one-out t over sites, one-sided (lower);
                material when it is negative or less than half the others' mean: the site's model
                learnt to turn its predictions around. (b) A model shared by every site (FedAvg)
                scored on the site's own hold-out: its ROC AUC below 0.5 by more than chance
                (Mann–Whitney null, the site's own class counts), one-sided; material below 0.4.
contribution    AdaFed's accuracy of each site's model on the server's test set: leave-one-out t
                over sites on its logit, one-sided (lower); material 0.1 below the others' mean.
similarity      FedHealth2: each site's mean distance to the other sites (log), leave-one-out t over
                sites, one-sided (farther); material when 1.5 times the others' mean distance.
prototypes      inDISCO: the share of a site's hold-out images whose most activated prototype looks
                at the injected stamp's place, leave-one-out t over sites, one-sided (more);
                material from 0.2 above the others.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from fedcore.glossary import plain, term
from fedcore.interpret.calibration import leave_one_out, one_sided
from fedcore.interpret.checks import limit
from fedcore.interpret.findings import Finding


def feature_shifts(layers: dict[str, np.ndarray], sites: Sequence[str], features: Sequence[str],
                   source: str = "") -> list[Finding]:
    """iFedAvg's input layers: `layers` maps 'b_in' / 'w_in' to [sites, features] or [replicates,
    sites, features] (averaged over the replicates)."""
    out = []
    for layer in ("b_in", "w_in"):
        minimum = limit("feature_shift", layer)
        if layer not in layers:
            continue
        values = np.asarray(layers[layer], dtype=np.float64)
        replicates = values.shape[0] if values.ndim == 3 else 1
        matrix = values.mean(0) if values.ndim == 3 else values
        deviation, t, p = leave_one_out(matrix)
        others = (matrix.sum(0, keepdims=True) - matrix) / max(len(sites) - 1, 1)
        noise = values.std(0, ddof=1) if replicates > 1 else np.full(matrix.shape, np.nan)
        for i, site in enumerate(sites):
            for j, feature in enumerate(features):
                out.append(Finding(
                    site, "feature shifts", "feature_shift", feature,
                    f"iFedAvg learnt a correction of {site}'s {feature} the other sites did not need: its "
                    f"{term(layer)} is {matrix[i, j]:+.2f} against {others[i, j]:+.2f} at the other sites"
                    + (f" (the mean over {replicates} {plain('replicate runs')})" if replicates > 1 else ""),
                    float(p[i, j]), float(deviation[i, j]), f"{layer} (standardised units)",
                    evidence={"layer": layer, "value": float(matrix[i, j]), "others": float(others[i, j]),
                              "replicate_sd": float(noise[i, j]), "replicates": replicates, "run": source},
                    material=bool(abs(deviation[i, j]) >= minimum)))
    return out


def output_layer(w_out: np.ndarray, sites: Sequence[str], source: str = "") -> list[Finding]:
    """iFedAvg's local output layer w_out: [sites, 1 or classes] or [replicates, sites, ...]."""
    values = np.asarray(w_out, dtype=np.float64)
    per_site = values.mean(-1)
    per_site = per_site.mean(0) if per_site.ndim == 2 else per_site
    deviation, t, p2 = leave_one_out(per_site)
    p = one_sided(t, p2, -1)[:, 0]
    out = []
    for i, site in enumerate(sites):
        others = float(np.delete(per_site, i).mean()) if len(sites) > 1 else float("nan")
        material = per_site[i] < 0 or per_site[i] < limit("output_shift", "share") * others
        out.append(Finding(site, "labels", "output_shift", None,
                           f"iFedAvg's output layer at {site} " + ("turns the shared model's predictions around"
                                                                   if per_site[i] < 0 else "weakens them")
                           + f": its {term('w_out')} is {per_site[i]:+.2f} against {others:+.2f} at the other sites. "
                           "Look at its labels",
                           float(p[i]), float(per_site[i]), "w_out", evidence={"run": source, "value": float(per_site[i])},
                           material=bool(material)))
    return out


def shared_model_auc(auc: Sequence[float], positives: Sequence[int], negatives: Sequence[int],
                     sites: Sequence[str], source: str = "") -> list[Finding]:
    """A model every site shares, scored on each site's own hold-out (binary ROC AUC, or the
    one-vs-one mean): below 0.5 beyond chance means the site's labels run against everyone else's."""
    out = []
    for site, value, n1, n0 in zip(sites, auc, positives, negatives):
        if value is None or not np.isfinite(value) or n1 < 1 or n0 < 1:
            continue
        se = np.sqrt((n1 + n0 + 1) / (12.0 * n1 * n0))  # Mann-Whitney's null SD of the AUC
        p = float(stats.norm.cdf((value - 0.5) / se))
        out.append(Finding(site, "labels", "shared_model_reversed", None,
                           f"a model trained across the federation scores ROC AUC {value:.2f} on {site}'s own "
                           f"{term('hold-out')}" + (": worse than guessing, its labels look reversed" if value < 0.5 else ""),
                           p, float(value), "ROC AUC", evidence={"run": source, "positives": n1, "negatives": n0,
                                                                  "value": float(value)},
                           material=bool(value < limit("shared_model_reversed", "auc"))))
    return out


def contribution(accuracy: Sequence[float], sites: Sequence[str], source: str = "") -> list[Finding]:
    """AdaFed: each site model's accuracy on the server's test set."""
    values = np.clip(np.asarray(accuracy, dtype=np.float64), 1e-3, 1 - 1e-3)
    deviation, t, p2 = leave_one_out(np.log(values / (1 - values)))
    p = one_sided(t, p2, -1)[:, 0]
    out = []
    for i, site in enumerate(sites):
        others = float(np.delete(values, i).mean())
        out.append(Finding(site, "contribution", "low_contribution", None,
                           f"AdaFed's server scores {site}'s model at {values[i]:.0%} accuracy against {others:.0%} for "
                           "the other sites' models", float(p[i]), float(values[i] - others), "accuracy",
                           evidence={"run": source, "value": float(values[i])},
                           material=bool(values[i] <= others - limit("low_contribution", "gap"))))
    return out


def similarity(distance: np.ndarray, sites: Sequence[str], source: str = "") -> list[Finding]:
    """FedHealth2: [sites, sites] distances between the sites' statistics."""
    d = np.asarray(distance, dtype=np.float64)
    n = len(sites)
    mean = np.array([np.delete(d[i], i).mean() for i in range(n)]) if n > 1 else np.zeros(n)
    with np.errstate(divide="ignore"):
        deviation, t, p2 = leave_one_out(np.log(mean))
    p = one_sided(t, p2, +1)[:, 0]
    out = []
    for i, site in enumerate(sites):
        others = float(np.delete(mean, i).mean()) if n > 1 else float("nan")
        out.append(Finding(site, "similarity", "distant", None,
                           f"FedHealth2 finds {site} {mean[i] / others:.1f} times as far from the other sites as they are "
                           "on average", float(p[i]), float(mean[i] / others), "distance ratio",
                           evidence={"run": source, "value": float(mean[i])},
                           material=bool(mean[i] >= limit("distant", "ratio") * others)))
    return out


def prototypes(on_stamp: Sequence[float], sites: Sequence[str], source: str = "") -> list[Finding]:
    """inDISCO: per site, the share of hold-out images whose most activated prototype looks at the
    stamp's place."""
    values = np.asarray(on_stamp, dtype=np.float64)
    deviation, t, p2 = leave_one_out(values)
    p = one_sided(t, p2, +1)[:, 0]
    return [Finding(site, "prototypes", "prototype_on_stamp", None,
                    f"{values[i]:.0%} of {site}'s {term('hold-out')} images are decided by a prototype looking at the marked "
                    f"corner, against {float(np.delete(values, i).mean()):.0%} elsewhere: a shortcut in its images?",
                    float(p[i]), float(deviation[i, 0]), "share of images",
                    evidence={"run": source, "value": float(values[i])},
                    material=bool(deviation[i, 0] >= limit("prototype_on_stamp", "gap")))
            for i, site in enumerate(sites)]
