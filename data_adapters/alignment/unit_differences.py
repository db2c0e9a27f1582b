"""Unit-like differences between sites' continuous columns, as the check-up finds them: cholesterol
in mg/dL at one site and mmol/L at another is the same column scaled by 38.67, and per-site
standardisation hides it.

Nothing here decides anything of its own: the columns are profiled as their sites would profile
them (`fedcore.interpret.profile`) and the check-up's data lens runs on them (`fedcore.checkup`,
the checks of `fedcore.interpret.checks`), so the Data page, `inspect`, the mapping step's
suggestions and a check-up of the same files give the same answer. Two kinds of its findings are
units (the rules are the registry's and the catalogue's, `fedcore.interpret.unit_conversions`):
- `unit` (three or more sites): the site whose quantiles a catalogue conversion, or a clean
  unexplained factor, maps onto the other sites', where its location or spread stands out;
- `unit_pair`: pairs of sites whose medians and spreads differ by a catalogue factor, for the
  columns no site-level finding names (two sites, or two sites in each unit): no culprit named.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedcore.checkup import check_up
from fedcore.interpret.findings import Finding
from fedcore.interpret.profile import profile_federation
from fedcore.interpret.unit_conversions import FAHRENHEIT, KNOWN_FACTORS

__all__ = ["FAHRENHEIT", "KNOWN_FACTORS", "site_unit_differences", "unit_differences", "unit_message"]


def unit_findings(columns: Mapping[str, Mapping[str, np.ndarray]], sites: Sequence[str]) -> list[Finding]:
    """The check-up's reported unit findings (`unit`, `unit_pair`) on these columns alone: `columns`
    maps a continuous column to site -> its values (NaN = missing; a site's columns are its rows).
    The units' family (`values`) holds continuous columns only, so its q-values are those of a
    check-up of the whole table."""
    names = list(columns)
    held = [site for site in sites if all(site in columns[name] for name in names)]
    if not names or not held:
        return []
    rows = [(site, np.column_stack([np.asarray(columns[name][site], dtype=np.float64) for name in names]),
             np.zeros(len(columns[names[0]][site]), dtype=np.int64)) for site in held]
    profile = profile_federation(rows, names, ["continuous"] * len(names), names, ["all"])
    return [f for f in check_up(profile, {}).reported if f.kind in ("unit", "unit_pair")]


def unit_differences(columns: Mapping[str, Mapping[str, np.ndarray]], sites: Sequence[str]) -> list[dict[str, Any]]:
    """Site-level findings (`site_unit_differences`), then the pairs of sites whose column differs
    by a known factor where none names the column: column, the two sites (the one with the larger
    values first), their medians, the measured factor of the medians and of the interquartile
    ranges, and the conversions that fit."""
    findings = unit_findings(columns, sites)
    pairs: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
    for finding in findings:
        for pair in finding.evidence.get("pairs", []) if finding.kind == "unit_pair" else []:
            pairs.setdefault((pair["column"], tuple(sorted(pair["sites"]))),
                             {key: value for key, value in pair.items() if key != "p"})
    return [*(_site_level(f) for f in findings if f.kind == "unit"), *pairs.values()]


def site_unit_differences(columns: Mapping[str, Mapping[str, np.ndarray]],
                          sites: Sequence[str]) -> list[dict[str, Any]]:
    """With three or more sites: each site whose values a catalogue conversion (or a clean
    unexplained factor) maps onto the other sites' — column, site, others, conversion (the unit
    pair; None for an unexplained factor), name, conversions, a, b, formula, median,
    others_median, message."""
    return [_site_level(f) for f in unit_findings(columns, sites) if f.kind == "unit"]


def _site_level(finding: Finding) -> dict[str, Any]:
    e = finding.evidence
    return {"column": finding.feature, "site": finding.site, "conversion": e.get("conversion"), "name": e.get("name"),
            "conversions": [e["conversion"]] if e.get("conversion") else [], "a": e.get("a"), "b": e.get("b"),
            "formula": e.get("formula"), "median": round(float(e.get("median", np.nan)), 4),
            "others_median": round(float(e.get("others_median", np.nan)), 4), "message": finding.message,
            "q": finding.q}


def unit_message(finding: Mapping[str, Any]) -> str:
    """One finding in words: the site that differs, or (a pair's) naming no culprit."""
    if "site" in finding:
        return finding["message"] + "."
    (a, b), (median_a, median_b) = finding["sites"], finding["medians"]
    return (f"'{finding['column']}': values at {a} are about {finding['factor']:.3g} times those at {b} "
            f"(medians {median_a:.4g} and {median_b:.4g}, spreads ×{finding['spread_factor']:.3g}), as a unit "
            f"difference would make them ({'; '.join(finding['conversions'])}?). The data cannot tell which "
            "site's unit is the intended one.")
