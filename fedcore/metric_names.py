"""The names of the metrics every evaluated round records for every site (computed in
`fedcore.metrics`). Apart from that module because readers of the store — the dashboard, the
command line's tables — need the names without loading torch."""

METRICS = ("f1", "roc_auc", "balanced_accuracy", "accuracy", "loss", "sensitivity", "specificity")
LOWER_IS_BETTER = frozenset({"loss"})
