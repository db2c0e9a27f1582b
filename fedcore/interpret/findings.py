"""A finding: one site, one lens, one kind of problem, with its calibrated evidence.

Every check of the check-up (declared in `checks`, computed by `data_checks` and `model_checks`)
turns its statistics into findings with a p-value from a stated null; `decide` then controls the
false discovery rate (Benjamini–Hochberg) within each family of checks at each site (`pool`; the
families: `checks.FAMILIES`): one broken site's many true findings loosen no other site's
threshold and no other family's, and each site's findings are a report of their own, and keeps, for
each site and feature, the most specific explanation (the registry's rank: a unit conversion
explains a shifted median and a wider spread; the shift is kept as its evidence, not listed
again) of what its check declares it explains (more missing values explain no shift of the
values that were recorded: both are listed). A cell whose statistic could not be computed
(withheld by the site, no values, too few sites) is a finding too: *not testable*, with the
reason, never counted as a test or a pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from fedcore.interpret import checks
from fedcore.interpret.calibration import benjamini_hochberg
from fedcore.interpret.checks import LENSES, RANK

FDR = 0.05  # the share of false findings tolerated among those reported, in each family
KINDS = checks.KINDS  # kind -> title, most specific first (the registry's order)
SPECIFICITY = RANK
__all__ = ["FDR", "KINDS", "LENSES", "SPECIFICITY", "Finding", "decide", "pool"]


@dataclass
class Finding:
    site: str
    lens: str
    kind: str
    feature: str | None  # None: the whole site (its labels, its weight); a categorical column: its name
    message: str  # plain language, for a person
    p: float
    effect: float = float("nan")  # the check's effect size, in the units its `effect_unit` says
    effect_unit: str = ""
    q: float = float("nan")  # Benjamini–Hochberg within its pool: the check's family at its site
    evidence: dict[str, Any] = field(default_factory=dict)  # what a drill-down shows (numbers, where)
    # Large enough to matter (the check's own threshold on its effect); a finding must be both
    # material and significant. Every tested cell counts in the false discovery rate either way.
    material: bool = True
    explained_by: str | None = None  # a more specific finding at the same site and feature (its kind)
    untestable: str = ""  # why the cell could not be tested (then p is NaN): never a pass

    @property
    def significant(self) -> bool:
        return bool(self.material and self.q < FDR)

    @property
    def tested(self) -> bool:
        return not self.untestable and math.isfinite(self.p)  # a plain float: asked of every cell, often

    @property
    def title(self) -> str:
        return KINDS.get(self.kind, self.kind)

    @property
    def family(self) -> str:
        return checks.family(self.kind)

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values.update(title=self.title, significant=self.significant, family=self.family)
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in values.items()}


def pool(finding: Finding) -> tuple[str, str]:
    """The cells whose false discovery rate is controlled together with this one's: its check's
    family at its site. Per family, so that one kind's many true findings (a flipped site's every
    feature) loosen no other kind's threshold; per site, so that one broken site's findings loosen
    no other site's (pooled over the sites, a corrupted site moved the line under the untouched
    sites' borderline cells, and they came and went with it: on the suite's tuning half, 191 of
    8,084 other sites had a new finding, 181 per site, while the corrupted site was found in 490
    of 577 cases, 506 per site), and each site's findings are a report of their own."""
    return finding.family, finding.site


def _q_values(members: Sequence[Finding]) -> None:
    """Each member's q-value: Benjamini–Hochberg over the members (NaN p: not a test)."""
    for finding, value in zip(members, benjamini_hochberg(np.array([f.p for f in members], dtype=np.float64))):
        finding.q = float(value)


def _explains_here(specific: Finding, finding: Finding) -> bool:
    """Whether a more specific finding at the same site and feature explains `finding`: one of its
    own family, or of a family its check declares (`Check.explains_here`)."""
    check = checks.BY_KIND.get(specific.kind)
    return finding.family == specific.family or (check is not None and finding.family in check.explains_here)


def decide(findings: Sequence[Finding]) -> list[Finding]:
    """Every finding with its q-value (BH within its `pool`), the weaker explanations of one site's
    feature marked `explained_by` the most specific significant one that explains them (its own
    family's, or one its check's `explains_here` names; and a site-wide finding's
    `explains` kinds at every feature of its site), strongest first."""
    families: dict[tuple[str, str], list[Finding]] = {}
    for finding in findings:
        if finding.untestable:
            finding.p = float("nan")
        families.setdefault(pool(finding), []).append(finding)
    for members in families.values():
        _q_values(members)
    significant = sorted((f for f in findings if f.significant), key=lambda f: (SPECIFICITY.get(f.kind, 99), f.q))
    site_wide: dict[str, list[Finding]] = {}
    for finding in significant:
        if checks.BY_KIND.get(finding.kind) is not None and checks.BY_KIND[finding.kind].explains:
            site_wide.setdefault(finding.site, []).append(finding)
    at_feature: dict[tuple[str, str], list[Finding]] = {}  # the significant findings there, most specific first
    for finding in significant:
        candidates = [f for f in site_wide.get(finding.site, []) if finding.kind in checks.BY_KIND[f.kind].explains]
        if finding.feature is not None:
            before = at_feature.setdefault((finding.site, finding.feature), [])
            candidates.extend(f for f in before if _explains_here(f, finding))
            before.append(finding)
        if candidates:
            finding.explained_by = min(candidates, key=lambda f: SPECIFICITY.get(f.kind, 99)).kind

    def order(f: Finding) -> tuple:
        shown = f.material and f.q < FDR  # `significant`, without the property's cost over many cells
        return (not shown, f.explained_by is not None, f.q != f.q, f.q, -abs(f.effect) if f.effect == f.effect else 0)

    return sorted(findings, key=order)
