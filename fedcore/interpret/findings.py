"""A finding: one site, one lens, one kind of problem, with its calibrated evidence.

Every check of the check-up (`data_checks`, `model_checks`) turns its statistics into findings
with a p-value from a stated null (the check's docstring says which); `decide` then controls the
false discovery rate over all of them at once (Benjamini–Hochberg) and keeps, for each site and
feature, the most specific explanation (a unit conversion explains a shifted median and a wider
spread; the shift is kept as its evidence, not listed again).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from fedcore.interpret.calibration import benjamini_hochberg

FDR = 0.05  # the share of false findings tolerated among those reported

# Lenses (a column of the check-up), in the order the check-up shows them.
LENSES = ("data profile", "feature shifts", "labels", "contribution", "similarity", "prototypes")

# Kinds, most specific first: where several explain one site's feature, the first is the finding.
KINDS = {
    "unit": "unit or scale",
    "missing_code": "value used as a missing code",
    "category_codes": "categorical codes differ",
    "swapped_columns": "columns swapped",
    "labels_permuted": "labels look wrong",
    "labels_weak": "labels look noisy",
    "label_relation": "relation to the label differs",
    "missing_by_class": "missingness depends on the class",
    "missingness": "more missing values",
    "location": "values shifted",
    "shape": "different shape",  # a skewed or heavy-tailed column's middle is narrower too: shape says why
    "spread": "different spread",
    "correlation": "relations between features differ",
    "feature_shift": "learned input correction stands out",
    "output_shift": "learned output correction stands out",
    "low_contribution": "low weight at the server",
    "distant": "far from the other sites",
    "prototype_on_stamp": "prototypes look at a mark on the images",
}
SPECIFICITY = {kind: rank for rank, kind in enumerate(KINDS)}


@dataclass
class Finding:
    site: str
    lens: str
    kind: str
    feature: str | None  # None: the whole site (its labels, its weight)
    message: str  # plain language, for a person
    p: float
    effect: float = float("nan")  # the check's effect size, in the units its `effect_unit` says
    effect_unit: str = ""
    q: float = float("nan")  # Benjamini–Hochberg over every finding tested with it
    evidence: dict[str, Any] = field(default_factory=dict)  # what a drill-down shows (numbers, where)
    # Large enough to matter (the check's own threshold on its effect); a finding must be both
    # material and significant. Every tested cell counts in the false discovery rate either way.
    material: bool = True
    explained_by: str | None = None  # a more specific finding at the same site and feature
    # Why the cell could not be tested (p is NaN, outside the false discovery rate): e.g. "not shared
    # (fewer than 10 rows)" where the site's disclosure policy withheld a statistic the check needs.
    not_testable: str | None = None

    @property
    def significant(self) -> bool:
        return bool(self.material and self.q < FDR and not self.not_testable)

    @property
    def title(self) -> str:
        return KINDS.get(self.kind, self.kind)

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values.update(title=self.title, significant=self.significant)
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in values.items()}


def decide(findings: Sequence[Finding]) -> list[Finding]:
    """Every finding with its q-value (BH over all of them), the weaker explanations of one site's
    feature marked `explained_by` the most specific significant one, strongest first."""
    q = benjamini_hochberg(np.array([f.p for f in findings], dtype=np.float64)) if findings else []
    for finding, value in zip(findings, q):
        finding.q = float(value)
    best: dict[tuple[str, str | None], Finding] = {}
    for finding in sorted(findings, key=lambda f: (SPECIFICITY.get(f.kind, 99), f.q)):
        if finding.significant and finding.feature is not None:
            best.setdefault((finding.site, finding.feature), finding)
    wrong_labels = {f.site: f for f in sorted(findings, key=lambda f: SPECIFICITY.get(f.kind, 99), reverse=True)
                    if f.kind in ("labels_permuted", "labels_weak") and f.significant and f.feature is None}
    for finding in findings:
        top = best.get((finding.site, finding.feature))
        if finding.kind == "label_relation" and finding.site in wrong_labels:
            top = wrong_labels[finding.site]  # every feature's relation reverses when the labels do
        if top is not None and top is not finding and finding.significant:
            finding.explained_by = top.kind
    return sorted(findings, key=lambda f: (not f.significant, f.explained_by is not None, f.q, -abs(f.effect)
                                           if np.isfinite(f.effect) else 0))
