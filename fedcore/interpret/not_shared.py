"""The data lens's cells that a site's disclosure policy left untestable, with the reason.

A site withholds a statistic of a group smaller than its minimum count (`disclosure`), and
releases quantiles only where a block of enough values stands for them. A check that needs what
was withheld cannot test the site: its cell says so ("not shared (fewer than 10 rows)"), with its
p-value NaN so that it counts in no false discovery rate — never an error, and never a silent
"nothing found". `mark` turns a check's untestable findings into such cells and adds the cells
a check skipped outright (a site whose classes were withheld has no label cells at all).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedcore.interpret.disclosure import TOO_FEW
from fedcore.interpret.findings import KINDS, Finding
from fedcore.interpret.profile import PROBABILITIES, STATISTICS, Profile

# The profile's statistics each data check reads.
NEEDS: dict[str, tuple[str, ...]] = {
    "location": ("quantiles",),
    "spread": ("quantiles",),
    "shape": ("quantiles",),
    "unit": ("quantiles",),
    "swapped_columns": ("quantiles",),
    "missing_code": ("sentinel_counts", "observed"),
    "missingness": ("observed",),
    "missing_by_class": ("observed_by_class", "class_counts"),
    "category_codes": ("mean", "observed"),
    "label_relation": ("mean_by_class", "sd_by_class", "observed_by_class"),
    "labels_permuted": ("mean_by_class", "sd_by_class", "class_counts"),
    "labels_weak": ("mean_by_class", "sd_by_class", "class_counts"),
}
# The quantiles (by probability) each quantile check reads at a site: the median, the SD's fall-back
# when the central widths are not released (spread), the 5-95 % tails (shape).
QUANTILE_CHECKS = {"location": (0.5,), "spread": (0.5,), "shape": (0.05, 0.25, 0.5, 0.75, 0.95),
                   "unit": (0.25, 0.5, 0.75), "swapped_columns": (0.25, 0.5, 0.75)}
MIN_SITES = 3  # a leave-one-out comparison needs the site and two others


def reason(profile: Profile, kind: str, site: str, feature: str | None) -> str | None:
    """Why `site` withheld a statistic the check `kind` needs at `feature`, if it did (a group
    below the minimum named before a group withheld with it)."""
    reasons = []
    for statistic in NEEDS.get(kind, ()):
        per_class = STATISTICS[statistic].group in ("class", "feature_class")
        reasons += [profile.reason(statistic, site, feature, cls) for cls in (profile.classes if per_class else [None])]
    found = [why for why in reasons if why is not None]
    return min(found, key=lambda why: not why.startswith(TOO_FEW)) if found else None


def resolution(profile: Profile, kind: str, site: str, feature: str | None) -> str | None:
    """Why a quantile check found nothing to compare: the site released too few of the quantiles
    the check reads (too few values for blocks out there), or fewer than MIN_SITES sites released
    the feature's median at all."""
    if feature not in profile.features or site not in profile.sites:
        return None
    j = profile.features.index(feature)
    needed = [int(np.flatnonzero(np.isclose(PROBABILITIES, p))[0]) for p in QUANTILE_CHECKS.get(kind, ())]
    quantiles = profile.quantiles[profile.sites.index(site), :, j]
    shared = np.flatnonzero(np.isfinite(quantiles))
    if shared.size and not np.isfinite(quantiles[needed]).all():
        low, high = PROBABILITIES[shared[0]], PROBABILITIES[shared[-1]]
        what = "its median only" if shared.size == 1 else f"its quantiles from {low:.0%} to {high:.0%} only"
        return f"not shared at this resolution ({what}: too few values for blocks further out)"
    sites = int(np.isfinite(profile.quantiles[:, needed[0] if needed else 0, j]).sum())
    if shared.size and sites < MIN_SITES and any(profile.reason("quantiles", other, feature) for other in profile.sites):
        return f"not testable (only {sites} of the sites shared this feature's values; the others had too few rows)"
    return None


def expected(profile: Profile) -> list[tuple[str, str, str | None]]:
    """The cells every site has when it shares everything: (site, check, feature)."""
    per_feature = ["missingness"] + (["missing_by_class", "label_relation"] if len(profile.classes) > 1 else [])
    cells = []
    for site in profile.sites:
        cells += [(site, kind, profile.features[j]) for j in profile.continuous for kind in ("location", "spread")]
        cells += [(site, kind, feature) for feature in profile.features for kind in per_feature]
        if len(profile.classes) > 1:
            cells += [(site, "labels_permuted", None), (site, "labels_weak", None)]
    return cells


def mark(profile: Profile, findings: Sequence[Finding], lens: str) -> list[Finding]:
    """The findings with every untestable cell marked `not_testable` (p NaN, not material), and a
    cell added for each one a check skipped because a statistic was withheld."""
    out, seen = [], set()
    for finding in findings:
        why = reason(profile, finding.kind, finding.site, finding.feature)
        if why is None and not np.isfinite(finding.p) and finding.kind in QUANTILE_CHECKS:
            why = resolution(profile, finding.kind, finding.site, finding.feature)
        if why is not None:
            finding.not_testable, finding.p, finding.material = why, float("nan"), False
        seen.add((finding.site, finding.kind, finding.feature))
        out.append(finding)
    for site, kind, feature in expected(profile):
        why = reason(profile, kind, site, feature) if (site, kind, feature) not in seen else None
        if why is not None:
            where = f"'s {feature}" if feature else ""
            out.append(Finding(site, lens, kind, feature, f"{KINDS.get(kind, kind)}: not testable at {site}{where}, "
                                                          f"{why}", float("nan"), material=False, not_testable=why))
    return out
