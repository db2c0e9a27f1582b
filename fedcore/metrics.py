"""Per-site classification metrics in torch, plus mean and worst site.

Computed from a confusion matrix and ranks instead of per-round scikit-learn calls (the
reference spends most of its time there); tests check every number against scikit-learn:
F1 is sklearn's `average="weighted"`, ROC AUC is binary or one-vs-one macro, balanced accuracy
averages recall over the classes present in the hold-out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F

METRICS = ("f1", "roc_auc", "balanced_accuracy", "accuracy", "loss")
LOWER_IS_BETTER = frozenset({"loss"})


def confusion_matrix(y: torch.Tensor, pred: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Rows are true classes, columns predicted classes."""
    flat = torch.bincount(y * n_classes + pred, minlength=n_classes * n_classes)
    return flat.reshape(n_classes, n_classes).to(torch.float64)


def per_class_f1(confusion: torch.Tensor) -> torch.Tensor:
    """F1 of every class; 0 where a class is neither present nor predicted (sklearn's default)."""
    tp = confusion.diagonal()
    denominator = confusion.sum(0) + confusion.sum(1)
    return torch.where(denominator > 0, 2 * tp / denominator.clamp(min=1e-12), torch.zeros_like(tp))


def roc_auc(y: torch.Tensor, prob: torch.Tensor) -> float:
    """Binary ROC AUC, or the macro one-vs-one average over class pairs present in `y`.

    NaN when `y` holds a single class (the AUC is undefined there).
    """
    present = torch.unique(y).tolist()
    if len(present) < 2:
        return math.nan
    if prob.shape[1] == 2:
        return _binary_auc(y == 1, prob[:, 1])
    pair_scores = []
    for i, a in enumerate(present):
        for b in present[i + 1 :]:
            in_pair = (y == a) | (y == b)
            y_pair, p_pair = y[in_pair], prob[in_pair]
            pair_scores.append(
                0.5 * (_binary_auc(y_pair == a, p_pair[:, a]) + _binary_auc(y_pair == b, p_pair[:, b]))
            )
    return float(sum(pair_scores) / len(pair_scores))


def classification_metrics(y: torch.Tensor, log_prob: torch.Tensor) -> dict[str, float]:
    """All of METRICS for one site's hold-out, from the model's log-probabilities."""
    y, log_prob = y.detach().cpu(), log_prob.detach().cpu().to(torch.float64)
    n_classes = log_prob.shape[1]
    confusion = confusion_matrix(y, log_prob.argmax(1), n_classes)
    support = confusion.sum(1)
    recall = confusion.diagonal()[support > 0] / support[support > 0]
    return {
        "f1": float((per_class_f1(confusion) * support).sum() / support.sum()),
        "roc_auc": roc_auc(y, log_prob.exp()),
        "balanced_accuracy": float(recall.mean()),
        "accuracy": float(confusion.diagonal().sum() / support.sum()),
        "loss": float(F.nll_loss(log_prob, y)),
    }


def mean_and_worst(per_site: Mapping[str, Mapping[str, float]]) -> tuple[dict, dict]:
    """Unweighted mean over sites and the worst site for every metric (NaNs ignored)."""
    mean, worst = {}, {}
    for metric in METRICS:
        values = [v[metric] for v in per_site.values() if not math.isnan(v[metric])]
        if not values:
            mean[metric] = worst[metric] = math.nan
            continue
        mean[metric] = sum(values) / len(values)
        worst[metric] = max(values) if metric in LOWER_IS_BETTER else min(values)
    return mean, worst


def _binary_auc(positive: torch.Tensor, score: torch.Tensor) -> float:
    """Mann–Whitney form of the AUC with average ranks for tied scores."""
    n_pos = int(positive.sum())
    n_neg = int(positive.numel() - n_pos)
    if n_pos == 0 or n_neg == 0:
        return math.nan
    ranks = _average_ranks(score.to(torch.float64))
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _average_ranks(values: torch.Tensor) -> torch.Tensor:
    """1-based ranks, tied values sharing the mean of their ranks (scipy's 'average')."""
    ordered, order = torch.sort(values, stable=True)
    _, group, counts = torch.unique_consecutive(ordered, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).to(torch.float64)
    group_rank = ends - (counts.to(torch.float64) - 1) / 2
    ranks = torch.empty_like(values, dtype=torch.float64)
    ranks[order] = group_rank[group]
    return ranks
