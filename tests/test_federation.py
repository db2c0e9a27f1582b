import numpy as np
import pytest
import torch

from fedcore.errors import DataError
from fedcore.federation import Federation, class_weights, holdout_size, split_site, stratified_holdout


@pytest.mark.parametrize(
    ("rows", "expected"),
    [(1000, 330), (400, 132), (300, 100), (133, 100), (132, 44), (10, 4), (2, 1)],
)
def test_holdout_size_follows_paper_rule_and_shrinks_for_tiny_sites(rows, expected):
    assert holdout_size(rows) == expected


def test_a_site_with_one_row_cannot_be_split():
    with pytest.raises(DataError, match="at least 2 rows"):
        holdout_size(1)


def test_stratified_holdout_keeps_class_shares_and_is_seeded():
    y = np.array([0] * 70 + [1] * 20 + [2] * 10)
    train, test = stratified_holdout(y, 33, np.random.default_rng(0))
    assert len(test) == 33 and len(train) == 67
    assert not set(train) & set(test)
    assert np.bincount(y[test]).tolist() == [23, 7, 3]
    again = stratified_holdout(y, 33, np.random.default_rng(0))[1]
    other = stratified_holdout(y, 33, np.random.default_rng(1))[1]
    assert (again == test).all() and not (other == test).all()


def test_a_class_with_two_rows_keeps_one_on_each_side():
    y = np.array([0] * 50 + [1] * 2)
    train, test = stratified_holdout(y, 10, np.random.default_rng(0))
    assert (y[train] == 1).sum() == 1 and (y[test] == 1).sum() == 1


def test_tiny_site_is_kept_with_a_warning():
    warnings: list[str] = []
    x, y = np.zeros((40, 3)), np.array([0, 1] * 20)
    site = split_site("small", x, y, seed=0, warnings=warnings)
    assert site.n_test == 14 and site.n_train == 26
    assert len(warnings) == 1 and "small" in warnings[0] and "40 rows" in warnings[0]


def test_split_depends_on_seed_and_site_name():
    x, y = np.arange(600.0).reshape(300, 2), np.array([0, 1, 1] * 100)
    a = split_site("a", x, y, 0, [])
    assert torch.equal(a.x_test, split_site("a", x, y, 0, []).x_test)
    assert not torch.equal(a.x_test, split_site("a", x, y, 1, []).x_test)
    assert not torch.equal(a.x_test, split_site("b", x, y, 0, []).x_test)


def test_class_weights_are_inverse_prevalence_summing_to_k():
    weights = class_weights(torch.tensor([0, 0, 0, 1]), 2)
    assert torch.allclose(weights, torch.tensor([0.5, 1.5]))
    absent = class_weights(torch.tensor([0, 0, 2]), 3)
    assert absent[1] == 0 and torch.isclose(absent.sum(), torch.tensor(2.0))


def test_federation_rejects_inconsistent_sites(federation):
    with pytest.raises(DataError, match="unique"):
        Federation("f", "", [federation.sites[0], federation.sites[0]], federation.feature_names,
                   federation.feature_kinds, federation.class_names)
    with pytest.raises(DataError, match="5 feature columns but 1 names"):
        Federation("f", "", federation.sites, ["only_one"], ["continuous"], federation.class_names)
    other = split_site("odd", np.zeros((150, 4)), np.array([0, 1] * 75), 0, [])
    with pytest.raises(DataError, match="shape"):
        Federation("f", "", [*federation.sites, other], federation.feature_names,
                   federation.feature_kinds, federation.class_names)
    with pytest.raises(DataError, match="kinds"):
        Federation("f", "", federation.sites, federation.feature_names, ["ordinal"] * 5,
                   federation.class_names)


def test_describe_is_json_ready(federation):
    import json

    description = federation.describe()
    json.dumps(description)
    assert [s["name"] for s in description["sites"]] == federation.site_names
    assert sum(description["sites"][0]["test_class_counts"]) == federation.sites[0].n_test


def test_image_sites_need_no_feature_names():
    images = np.zeros((150, 1, 28, 28))
    site = split_site("imaging", images, np.array([0, 1] * 75), 0, [])
    federation = Federation("img", "", [site], [], [], ["neg", "pos"])
    assert federation.input_shape == (1, 28, 28) and not federation.is_tabular
    assert federation.describe()["input_shape"] == [1, 28, 28]
