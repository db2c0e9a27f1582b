"""Per-site classification metrics in torch, for all sites at once, plus mean and worst site.

All sites' hold-outs are scored together: labels and log-probabilities padded to a common
length with a mask of the real rows, confusion matrices from one bincount, ROC AUC from ranks
found from runs of equal scores in each site's sorted scores. No per-round scikit-learn calls (the
reference spends most of its time there); tests check every number against scikit-learn:
F1 is sklearn's `average="weighted"`, ROC AUC is binary or one-vs-one macro, balanced accuracy
averages recall over the classes present in the hold-out. For two classes, sensitivity is the
recall of the last class (the positive one, by this project's convention) and specificity the
recall of the first; NaN for more classes, or when the hold-out lacks that class.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from fedcore.metric_names import LOWER_IS_BETTER, METRICS

__all__ = ["LOWER_IS_BETTER", "METRICS", "classification_metrics", "confusion_matrix", "mean_and_worst",
           "pad_sites", "per_class_f1", "site_metrics"]


def confusion_matrix(y: torch.Tensor, pred: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Rows are true classes, columns predicted classes."""
    flat = torch.bincount(y * n_classes + pred, minlength=n_classes * n_classes)
    return flat.reshape(n_classes, n_classes).to(torch.float64)


def per_class_f1(confusion: torch.Tensor) -> torch.Tensor:
    """F1 of every class (last dimension); 0 where a class is neither present nor predicted."""
    tp = confusion.diagonal(dim1=-2, dim2=-1)
    denominator = confusion.sum(-2) + confusion.sum(-1)
    return torch.where(denominator > 0, 2 * tp / denominator.clamp(min=1e-12), torch.zeros_like(tp))


def site_metrics(y: torch.Tensor, log_prob: torch.Tensor, valid: torch.Tensor) -> list[dict[str, float]]:
    """METRICS for every site: y [sites, rows], log_prob [sites, rows, classes], valid [sites, rows]."""
    y, valid = y.detach().cpu(), valid.detach().cpu()
    log_prob = log_prob.detach().cpu().to(torch.float64)
    n_sites, _, n_classes = log_prob.shape
    y = torch.where(valid, y, torch.zeros_like(y))
    pred = log_prob.argmax(-1)
    site_index = torch.arange(n_sites)[:, None].expand_as(y)
    cell = (site_index * n_classes + y) * n_classes + pred
    confusion = torch.bincount(cell[valid], minlength=n_sites * n_classes * n_classes)
    confusion = confusion.reshape(n_sites, n_classes, n_classes).to(torch.float64)
    support = confusion.sum(-1)
    rows = support.sum(-1)
    correct = confusion.diagonal(dim1=-2, dim2=-1)
    recall = torch.where(support > 0, correct / support.clamp(min=1), torch.zeros_like(correct))
    present = support > 0
    nll = -log_prob.gather(-1, y[..., None]).squeeze(-1)
    class_recall = torch.where(present, recall, torch.full_like(recall, math.nan))
    not_binary = torch.full((n_sites,), math.nan, dtype=torch.float64)
    metrics = {
        "f1": (per_class_f1(confusion) * support).sum(-1) / rows,
        "roc_auc": _roc_auc(y, log_prob.exp(), valid, present),
        "balanced_accuracy": recall.sum(-1) / present.sum(-1),
        "accuracy": correct.sum(-1) / rows,
        "loss": (nll * valid).sum(-1) / rows,
        "sensitivity": class_recall[:, -1] if n_classes == 2 else not_binary,
        "specificity": class_recall[:, 0] if n_classes == 2 else not_binary,
    }
    columns = {name: values.tolist() for name, values in metrics.items()}
    return [{name: column[s] for name, column in columns.items()} for s in range(n_sites)]


def classification_metrics(y: torch.Tensor, log_prob: torch.Tensor) -> dict[str, float]:
    """METRICS for one site's hold-out, from the model's log-probabilities."""
    return site_metrics(y[None], log_prob[None], torch.ones_like(y, dtype=torch.bool)[None])[0]


def pad_sites(parts: Sequence[torch.Tensor], fill: float = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack per-site tensors of different lengths along a new first dimension, padding with
    `fill`; returns (padded, valid-row mask)."""
    longest = max(len(p) for p in parts)
    padded = parts[0].new_full((len(parts), longest, *parts[0].shape[1:]), fill)
    valid = torch.zeros(len(parts), longest, dtype=torch.bool, device=parts[0].device)
    for i, part in enumerate(parts):
        padded[i, : len(part)] = part
        valid[i, : len(part)] = True
    return padded, valid


def mean_and_worst(per_site: Mapping[str, Mapping[str, float]]) -> tuple[dict, dict]:
    """Unweighted mean over sites and the worst site for every metric (NaNs ignored)."""
    mean, worst = {}, {}
    for metric in METRICS:
        # records written before a metric existed lack it: they count as NaN
        values = [v[metric] for v in per_site.values() if not math.isnan(v.get(metric, math.nan))]
        if not values:
            mean[metric] = worst[metric] = math.nan
            continue
        mean[metric] = sum(values) / len(values)
        worst[metric] = max(values) if metric in LOWER_IS_BETTER else min(values)
    return mean, worst


def _roc_auc(y: torch.Tensor, prob: torch.Tensor, valid: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """Per site: binary AUC, or the macro one-vs-one average over the class pairs present in
    its hold-out (sklearn's multi_class='ovo'); NaN for a site with a single class."""
    n_sites, _, n_classes = prob.shape
    if n_classes == 2:
        return _binary_auc(y == 1, prob[..., 1], valid)
    # One sort of each class's score p_a at each site tells, for every row, how many rows of each
    # class b score below it and how many tie with it: the AUC of p_a separating a from b (the
    # Mann-Whitney count, ties halved) for every ordered pair (a, b) at once.
    score = torch.where(valid[..., None], prob.to(torch.float64), math.inf)
    ordered, by_score = _sort(score.permute(2, 0, 1))  # [a, sites, rows]
    first, after = _tie_runs(ordered)
    member = torch.nn.functional.one_hot(y, n_classes).to(torch.float64) * valid[..., None]  # [sites, rows, b]
    in_order = member[torch.arange(n_sites)[None, :, None], by_score]  # [a, sites, rows, b], rows by p_a
    before = torch.nn.functional.pad(in_order.cumsum(2), (0, 0, 1, 0))  # rows of class b among the first k
    # A row of class a beats (before[first] + before[after]) / 2 rows of each class b, where first
    # and after bound its run of tied scores; summed over those rows as one weighted sum of the
    # counts, each row putting half its weight on `first` and half on `after`.
    own_class = in_order.diagonal(dim1=0, dim2=3).permute(2, 0, 1) / 2  # [a, sites, rows]: the row is of class a
    weight = torch.zeros(before.shape[:3], dtype=torch.float64)
    weight.scatter_add_(2, first, own_class).scatter_add_(2, after, own_class)
    wins = torch.bmm(weight.flatten(0, 1)[:, None], before.flatten(0, 1)).view(n_classes, n_sites, n_classes)
    counts = member.sum(1)  # [sites, classes]
    directed = wins / (counts.T[:, :, None] * counts[None]).clamp(min=1)
    both = present.T[:, :, None] & present[None] & ~torch.eye(n_classes, dtype=torch.bool)[:, None, :]
    # each unordered pair counted twice (a|b and b|a), each half of its score
    total = torch.where(both, directed, torch.zeros_like(directed)).sum((0, 2)) / 2
    pairs = both.sum((0, 2)) / 2
    return torch.where(pairs > 0, total / pairs.clamp(min=1), torch.full_like(total, math.nan))


def _sort(score: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores sorted along the last dimension, and where each came from (on the CPU by numpy,
    several times faster than torch's sort for these many short rows; the order of tied scores
    does not matter to the callers)."""
    if score.device.type != "cpu":
        return torch.sort(score, dim=-1)
    by_score = torch.from_numpy(np.argsort(score.contiguous().numpy(), axis=-1))
    return score.gather(-1, by_score), by_score


def _tie_runs(ordered: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each position of scores sorted along the last dimension: where its run of equal scores
    starts, and the position just after the run ends (a cumulative max and min instead of a
    binary search per score, which is several times slower on the CPU)."""
    position = torch.arange(ordered.shape[-1], device=ordered.device).expand_as(ordered)
    starts = torch.ones_like(ordered, dtype=torch.bool)
    starts[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    first = torch.where(starts, position, 0).cummax(-1).values
    ends = torch.ones_like(starts)
    ends[..., :-1] = starts[..., 1:]
    after = torch.where(ends, position + 1, ordered.shape[-1]).flip(-1).cummin(-1).values.flip(-1)
    return first, after


def _binary_auc(positive: torch.Tensor, score: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Mann–Whitney AUC per site (rows of [sites, rows]) with average ranks for ties; rows outside
    `valid` take no part (they are sorted past every real score)."""
    score = torch.where(valid, score.to(torch.float64), torch.full_like(score, math.inf, dtype=torch.float64))
    ordered, by_score = _sort(score)
    first, after = _tie_runs(ordered)
    rank = (first + after + 1).to(torch.float64) / 2  # 1-based average rank among tied scores
    positive = positive & valid
    n_pos = positive.sum(-1).to(torch.float64)
    n_neg = (valid & ~positive).sum(-1).to(torch.float64)
    rank_sum = (rank * positive.gather(-1, by_score)).sum(-1)
    auc = (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg).clamp(min=1)
    return torch.where((n_pos > 0) & (n_neg > 0), auc, torch.full_like(auc, math.nan))
