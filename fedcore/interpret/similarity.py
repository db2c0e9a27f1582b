"""FedHealth 2's site similarity: distances between per-channel Gaussian statistics and the
personalised aggregation weights derived from them (paper eqs. 5-7)."""

from __future__ import annotations

import numpy as np

# One site's statistics: per layer, (channel means, channel variances).
Statistics = list[tuple[np.ndarray, np.ndarray]]


def site_distances(stats: list[Statistics]) -> np.ndarray:
    """d_ij = sum over layers of the diagonal-Gaussian 2-Wasserstein distance:
    sqrt(||mu_i - mu_j||^2 + ||sqrt(var_i) - sqrt(var_j)||^2)."""
    n_sites = len(stats)
    distance = np.zeros((n_sites, n_sites))
    for layer in range(len(stats[0])):
        mu = np.stack([s[layer][0] for s in stats]).astype(np.float64)
        sd = np.sqrt(np.clip(np.stack([s[layer][1] for s in stats]).astype(np.float64), 0, None))
        squared = ((mu[:, None] - mu[None]) ** 2).sum(-1) + ((sd[:, None] - sd[None]) ** 2).sum(-1)
        distance += np.sqrt(squared)
    return distance


def similarity_weights(distance: np.ndarray, self_weight: float) -> np.ndarray:
    """w_ii = lambda; off the diagonal 1/d_ij normalised over j != i and scaled by (1 - lambda).

    Rows sum to 1. Identical statistics (d = 0) would give infinite similarity; the distance is
    floored at 1e-12 so such sites simply share the off-diagonal weight.
    """
    n_sites = len(distance)
    if n_sites == 1:
        return np.ones((1, 1))
    inverse = 1.0 / np.maximum(distance, 1e-12)
    np.fill_diagonal(inverse, 0.0)
    weights = (1 - self_weight) * inverse / inverse.sum(axis=1, keepdims=True)
    np.fill_diagonal(weights, self_weight)
    return weights


def nearest_sites(distance: np.ndarray, names: list[str], k: int = 3) -> dict[str, list[str]]:
    """Each site's k closest other sites, closest first."""
    result = {}
    for i, name in enumerate(names):
        order = [j for j in np.argsort(distance[i], kind="stable") if j != i]
        result[name] = [names[j] for j in order[:k]]
    return result


def cluster_order(distance: np.ndarray) -> list[int]:
    """Site order that puts similar sites next to each other: the leaf order of average-linkage
    agglomerative clustering (merging the two closest clusters, left cluster first)."""
    distance = np.asarray(distance, dtype=np.float64)
    clusters: list[list[int]] = [[i] for i in range(len(distance))]
    while len(clusters) > 1:
        best = None
        for a in range(len(clusters)):
            for b in range(a + 1, len(clusters)):
                linkage = distance[np.ix_(clusters[a], clusters[b])].mean()
                if best is None or linkage < best[0]:
                    best = (linkage, a, b)
        _, a, b = best
        clusters[a] = clusters[a] + clusters[b]
        del clusters[b]
    return clusters[0] if clusters else []
