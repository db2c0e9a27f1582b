import math

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from fedcore.metrics import classification_metrics, mean_and_worst


def _random_case(n_classes, n_rows, seed, ties=False):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n_rows, n_classes)) * 2
    prob = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    if ties:
        prob = np.round(prob, 1) + 1e-9
        prob = prob / prob.sum(1, keepdims=True)
    y = rng.integers(0, n_classes, n_rows)
    return torch.tensor(y), torch.tensor(np.log(prob))


@pytest.mark.parametrize("n_classes", [2, 3, 6])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_metrics_equal_scikit_learn(n_classes, ties, seed):
    y, log_prob = _random_case(n_classes, 200, seed, ties)
    prob = log_prob.exp().numpy()
    pred = prob.argmax(1)
    ours = classification_metrics(y, log_prob)
    y = y.numpy()
    expected_auc = (
        skm.roc_auc_score(y, prob[:, 1]) if n_classes == 2
        else skm.roc_auc_score(y, prob, multi_class="ovo", labels=list(range(n_classes)))
    )
    assert ours["f1"] == pytest.approx(skm.f1_score(y, pred, average="weighted"), abs=1e-12)
    assert ours["balanced_accuracy"] == pytest.approx(skm.balanced_accuracy_score(y, pred), abs=1e-12)
    assert ours["accuracy"] == pytest.approx(skm.accuracy_score(y, pred), abs=1e-12)
    assert ours["roc_auc"] == pytest.approx(expected_auc, abs=1e-9)
    assert ours["loss"] == pytest.approx(skm.log_loss(y, prob, labels=list(range(n_classes))), abs=1e-6)


def test_metrics_with_a_class_missing_from_the_holdout():
    # 3 classes in the model, only 0 and 2 in this hold-out; class 1 is sometimes predicted.
    y = torch.tensor([0, 0, 2, 2, 2, 0])
    log_prob = torch.log(torch.tensor([
        [0.7, 0.2, 0.1], [0.2, 0.6, 0.2], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4], [0.5, 0.1, 0.4], [0.4, 0.3, 0.3],
    ]))
    pred = log_prob.argmax(1).numpy()
    ours = classification_metrics(y, log_prob)
    assert ours["f1"] == pytest.approx(skm.f1_score(y.numpy(), pred, average="weighted"))
    with pytest.warns(UserWarning):
        expected = skm.balanced_accuracy_score(y.numpy(), pred)
    assert ours["balanced_accuracy"] == pytest.approx(expected)
    # one-vs-one over the pairs present: only (0, 2)
    prob = log_prob.exp().numpy()
    pair = [
        skm.roc_auc_score(y.numpy() == 0, prob[:, 0]),
        skm.roc_auc_score(y.numpy() == 2, prob[:, 2]),
    ]
    assert ours["roc_auc"] == pytest.approx(np.mean(pair))


def test_auc_is_nan_for_a_single_class_holdout():
    y = torch.tensor([1, 1, 1])
    assert math.isnan(classification_metrics(y, torch.log(torch.full((3, 2), 0.5)))["roc_auc"])


def test_mean_and_worst_ignore_nan_and_treat_loss_as_lower_is_better():
    sites = {
        "a": {"f1": 0.9, "roc_auc": float("nan"), "balanced_accuracy": 0.8, "accuracy": 0.9, "loss": 0.2},
        "b": {"f1": 0.5, "roc_auc": 0.7, "balanced_accuracy": 0.6, "accuracy": 0.5, "loss": 0.9},
    }
    mean, worst = mean_and_worst(sites)
    assert mean["f1"] == pytest.approx(0.7) and worst["f1"] == 0.5
    assert mean["roc_auc"] == 0.7 and worst["roc_auc"] == 0.7
    assert worst["loss"] == 0.9


def test_all_sites_at_once_equal_scikit_learn_site_by_site():
    from fedcore.metrics import pad_sites, site_metrics

    cases = [_random_case(4, n, seed, ties=seed % 2 == 0) for seed, n in enumerate([30, 57, 12, 80])]
    # one site sees only two of the four classes
    y2, lp2 = cases[2]
    cases[2] = (torch.where(y2 % 2 == 0, 0, 3), lp2)
    y, valid = pad_sites([c[0] for c in cases])
    log_prob, _ = pad_sites([c[1] for c in cases])
    batched = site_metrics(y, log_prob, valid)
    for (y_site, lp_site), ours in zip(cases, batched):
        single = classification_metrics(y_site, lp_site)
        for metric in ("f1", "roc_auc", "balanced_accuracy", "accuracy", "loss"):
            assert ours[metric] == pytest.approx(single[metric], abs=1e-12), metric
        pred = lp_site.argmax(1).numpy()
        assert ours["f1"] == pytest.approx(skm.f1_score(y_site.numpy(), pred, average="weighted"), abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sensitivity_and_specificity_equal_scikit_learn_for_two_classes(seed):
    y, log_prob = _random_case(2, 150, seed)
    pred = log_prob.argmax(1).numpy()
    ours = classification_metrics(y, log_prob)
    assert ours["sensitivity"] == pytest.approx(skm.recall_score(y.numpy(), pred, pos_label=1), abs=1e-12)
    assert ours["specificity"] == pytest.approx(skm.recall_score(y.numpy(), pred, pos_label=0), abs=1e-12)
    assert ours["balanced_accuracy"] == pytest.approx((ours["sensitivity"] + ours["specificity"]) / 2, abs=1e-12)


def test_sensitivity_is_nan_without_positives_and_for_more_classes():
    negatives_only = classification_metrics(torch.tensor([0, 0, 0]), torch.log(torch.tensor([[0.8, 0.2]] * 3)))
    assert math.isnan(negatives_only["sensitivity"]) and negatives_only["specificity"] == 1.0
    y, log_prob = _random_case(3, 50, 0)
    three = classification_metrics(y, log_prob)
    assert math.isnan(three["sensitivity"]) and math.isnan(three["specificity"])
