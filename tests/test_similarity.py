import numpy as np
import pytest

from fedcore.interpret.similarity import nearest_sites, site_distances, similarity_weights


def _stats(mean, var):
    return [(np.array(mean, float), np.array(var, float))]


def test_distance_is_the_diagonal_gaussian_w2_summed_over_layers():
    a = _stats([0, 0], [1, 1]) + _stats([1], [4])
    b = _stats([3, 4], [1, 1]) + _stats([1], [1])
    d = site_distances([a, b])
    # layer 1: ||mu|| = 5, equal SDs; layer 2: equal means, SDs 2 vs 1
    assert d[0, 1] == pytest.approx(5 + 1)
    assert d[1, 0] == d[0, 1] and d[0, 0] == 0


def test_weights_rows_sum_to_one_with_lambda_on_the_diagonal():
    rng = np.random.default_rng(0)
    stats = [_stats(rng.normal(size=4), rng.uniform(0.5, 2, size=4)) for _ in range(5)]
    distance = site_distances(stats)
    weights = similarity_weights(distance, 0.3)
    assert np.allclose(weights.sum(1), 1) and np.allclose(np.diag(weights), 0.3)
    # closer sites get more weight
    i = 0
    others = [j for j in range(5) if j != i]
    closest = min(others, key=lambda j: distance[i, j])
    assert weights[i, closest] == max(weights[i, j] for j in others)
    assert np.allclose(weights[i, others] * distance[i, others], weights[i, others[0]] * distance[i, others[0]])


def test_identical_sites_share_weight_instead_of_dividing_by_zero():
    stats = [_stats([0], [1]), _stats([0], [1]), _stats([5], [1])]
    weights = similarity_weights(site_distances(stats), 0.5)
    assert np.isfinite(weights).all() and np.allclose(weights.sum(1), 1)


def test_nearest_sites_are_ordered():
    distance = np.array([[0, 3, 1], [3, 0, 2], [1, 2, 0]], float)
    assert nearest_sites(distance, ["a", "b", "c"], k=2) == {"a": ["c", "b"], "b": ["c", "a"], "c": ["a", "b"]}


def test_cluster_order_puts_similar_sites_side_by_side():
    from fedcore.interpret.similarity import cluster_order

    # two groups, {0, 2, 4} and {1, 3}, interleaved in the input
    points = np.array([0.0, 10.0, 0.5, 10.4, 0.2])
    distance = np.abs(points[:, None] - points[None])
    order = cluster_order(distance)
    assert sorted(order) == [0, 1, 2, 3, 4]
    groups = ["a" if points[i] < 5 else "b" for i in order]
    assert groups in (["a", "a", "a", "b", "b"], ["b", "b", "a", "a", "a"])
    assert cluster_order(np.zeros((1, 1))) == [0]
