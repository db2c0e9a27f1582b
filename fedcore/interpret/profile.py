"""Federated statistics of a table: what each site can share about its own rows without moving one.

Each site summarises its rows in their *original units* (before any standardisation: a unit error
is visible there and nowhere else once each site has standardised itself), per feature and per
class:
    rows and class counts; observed (non-missing) values, overall and per class;
    mean and SD, overall and per class;
    quantiles at 21 probabilities (1 %, 5 %, 10 %, ..., 95 %, 99 %), overall and per class;
    the share of whole-number values; how often each usual missing-value code occurs (-999, -99,
    -9, -1, 0, 9, 99, 999, 9999);
    the correlations between its continuous features (pairwise complete rows).
Each is declared once in STATISTICS (the group whose rows govern it, its kind, what it reveals),
and released at the site's disclosure policy (`fedcore.interpret.disclosure`): no statistic of
fewer than its minimum count of rows, quantiles from blocks of at least that many values (so the
1 and 99 % ones, and all beyond the outermost blocks, stay unreleased), values rounded; what is
withheld is NaN, with its reason in `Profile.withheld`.
`site_profile` computes one site's summary (a Flower site runs it on its own rows and sends the
arrays); `Profile` stacks every site's, is stored with a run (`profile.npz`, arrays only) and is
what the check-up's data lens compares (`fedcore.interpret.data_checks`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedcore.interpret.disclosure import (DEFAULT_POLICY, Groups, Policy, Statistic, Withheld, describe_policy,
                                          dp_noise, location, release)

PROBABILITIES = np.array([0.01, *np.round(np.arange(0.05, 0.951, 0.05), 2), 0.99])
SENTINELS = np.array([-999.0, -99.0, -9.0, -1.0, 0.0, 9.0, 99.0, 999.0, 9999.0])

# Every statistic a site shares, declared once: the group whose row count governs it, the rule the
# site's disclosure policy releases it by (`disclosure.KINDS`) and what it reveals about the rows.
# `disclosure.release` applies the policy to exactly these; an array not declared here never leaves a site.
STATISTICS: dict[str, Statistic] = {
    "rows": Statistic("site", "size", "how many rows the site has"),
    "class_counts": Statistic("class", "count", "how many of the site's rows are of each class"),
    "observed": Statistic("site", "cell_count", "in how many rows each feature is recorded (so how many miss it)"),
    "observed_by_class": Statistic("class", "cell_count", "the same within each class"),
    "mean": Statistic("feature", "location", "the centre of a feature's values"),
    "sd": Statistic("feature", "location", "how widely a feature's values vary"),
    "mean_by_class": Statistic("feature_class", "location", "the centre of a feature's values within each class"),
    "sd_by_class": Statistic("feature_class", "location", "how widely they vary within each class"),
    "quantiles": Statistic("feature", "location",
                           "a feature's distribution: the value below which a given share of its values lie"),
    "quantiles_by_class": Statistic("feature_class", "location", "the same within each class"),
    "integer_share": Statistic("feature", "share", "the share of a feature's values that are whole numbers"),
    "sentinel_counts": Statistic("feature", "cell_count",
                                 "how many of a feature's values are exactly each usual missing-value code"),
    "correlation": Statistic("pair", "correlation", "how two continuous features vary together"),
}
ARRAYS = tuple(STATISTICS)


@dataclass
class SiteProfile:
    """What one site releases: its statistics (ARRAYS), what it withheld and why, and the policy
    it released them at (None: none, as computed)."""

    arrays: dict[str, np.ndarray]
    withheld: list[Withheld] = field(default_factory=list)
    policy: dict[str, Any] | None = None


def site_profile(x: np.ndarray, y: np.ndarray, features: Sequence[str], kinds: Sequence[str], classes: Sequence[str],
                 policy: Policy | None = DEFAULT_POLICY) -> SiteProfile:
    """One site's summary of its rows x [rows, features] (NaN = missing, original units) with class
    indices y, as its disclosure `policy` releases it (None: as computed, unprotected: only for
    measuring what the policy costs)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    n_classes = len(classes)
    continuous = [j for j, kind in enumerate(kinds) if kind == "continuous"]
    observed = ~np.isnan(x)
    out: dict[str, np.ndarray] = {
        "rows": np.array(len(x)),
        "class_counts": np.bincount(y, minlength=n_classes),
        "observed": observed.sum(0),
        "observed_by_class": np.stack([observed[y == k].sum(0) for k in range(n_classes)]),
    }
    noise = None if policy is None else dp_noise(x, policy)
    out["mean"], out["sd"], out["quantiles"] = location(x, PROBABILITIES, policy, noise)
    per_class = [location(x[y == k], PROBABILITIES, policy, noise) for k in range(n_classes)]
    out["mean_by_class"] = np.stack([m for m, _, _ in per_class])
    out["sd_by_class"] = np.stack([s for _, s, _ in per_class])
    out["quantiles_by_class"] = np.stack([q for _, _, q in per_class])
    with np.errstate(invalid="ignore"):
        whole = np.where(observed, np.isclose(x, np.round(x)), False).sum(0)
        out["integer_share"] = np.where(out["observed"] > 0, whole / np.maximum(out["observed"], 1), np.nan)
    out["sentinel_counts"] = np.stack([(x == value).sum(0) for value in SENTINELS])
    out["correlation"], pairs = _correlation(x[:, continuous])
    groups = Groups(len(x), out["class_counts"], out["observed"], out["observed_by_class"], pairs, list(features),
                    list(classes), continuous)
    arrays, withheld = release(out, STATISTICS, groups, policy, noise)
    if noise is not None:  # a feature too small for a range: its values are withheld under the noise
        for j in np.flatnonzero(np.isnan(noise.low) & (out["observed"] >= policy.min_count)):
            withheld += [Withheld(name, features[j], None, "not shared under differential privacy (too few values "
                                                           "for a range to clip them to)")
                         for name, declared in STATISTICS.items() if declared.kind == "location"]
    return SiteProfile(arrays, withheld, None if policy is None else policy.to_dict())


def _correlation(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pearson correlations of the columns over pairwise complete rows (NaN where fewer than 3 rows
    or no spread), all pairs at once: sums over the rows where both columns are observed; and
    those rows' counts."""
    observed = (~np.isnan(x)).astype(np.float64)
    values = np.nan_to_num(x)
    n = observed.T @ observed  # rows where both are observed
    sums = values.T @ observed  # [j, k]: sum of column j over the rows where k is observed too
    squares = (values**2).T @ observed
    products = values.T @ values
    with np.errstate(invalid="ignore", divide="ignore"):
        covariance = products - sums * sums.T / n
        spread = (squares - sums**2 / n) * (squares - sums**2 / n).T
        out = covariance / np.sqrt(spread)
    return np.where((n >= 3) & (spread > 1e-12 * np.maximum(n, 1)), np.clip(out, -1, 1), np.nan), n


@dataclass
class Profile:
    """Every site's summary (`site_profile`), stacked over sites, with the names that say what
    the axes are, and what each site withheld at which policy."""

    sites: list[str]
    features: list[str]
    kinds: list[str]
    columns: list[str]  # the input column each feature came from (a categorical gives several one-hot features)
    classes: list[str]
    arrays: dict[str, np.ndarray]  # ARRAYS, each [sites, ...]; NaN where a site withheld it
    units: dict[str, str] = field(default_factory=dict)  # feature -> unit, where the data say
    # site -> the policy it released at (`Policy.to_dict`; None: released as computed)
    policies: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    withheld: dict[str, list[Withheld]] = field(default_factory=dict)  # site -> what it did not share, and why

    @classmethod
    def of_sites(cls, per_site: Sequence[SiteProfile], sites: Sequence[str], features: Sequence[str],
                 kinds: Sequence[str], columns: Sequence[str], classes: Sequence[str],
                 units: Mapping[str, str] | None = None) -> Profile:
        arrays = {name: np.stack([np.asarray(p.arrays[name]) for p in per_site]) for name in ARRAYS}
        arrays["rows"] = arrays["rows"].reshape(len(per_site))  # a count per site (transports may add an axis)
        return cls(list(sites), list(features), list(kinds), list(columns or features), list(classes), arrays,
                   dict(units or {}), {site: p.policy for site, p in zip(sites, per_site)},
                   {site: list(p.withheld) for site, p in zip(sites, per_site)})

    @property
    def continuous(self) -> list[int]:
        """The features whose correlations the profile keeps (in `correlation`'s order)."""
        return [j for j, kind in enumerate(self.kinds) if kind == "continuous"]

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(name)

    def reason(self, statistic: str, site: str, feature: str | None = None, cls: str | None = None) -> str | None:
        """Why `site` did not share `statistic` (of `feature`, of class `cls`), or None when it did."""
        for entry in self.withheld.get(site, []):
            if entry.statistic == statistic and entry.feature in (None, feature) and entry.cls in (None, cls):
                return entry.reason
        return None

    def policy_text(self, site: str) -> str:
        """The policy `site` released its statistics at, in words."""
        if site not in self.policies:
            return "not recorded (released before disclosure control)"
        return describe_policy(self.policies[site])

    def site_meta(self, site: str) -> dict[str, Any]:
        """What one site sends with its arrays: the names, and its own policy and withheld list."""
        return {**self.meta(), "policies": {site: self.policies.get(site)},
                "withheld": {site: [w.to_list() for w in self.withheld.get(site, [])]}}

    def meta(self) -> dict[str, Any]:
        return {"sites": self.sites, "features": self.features, "kinds": self.kinds, "columns": self.columns,
                "classes": self.classes, "units": self.units, "probabilities": PROBABILITIES.tolist(),
                "sentinels": SENTINELS.tolist(), "policies": self.policies,
                "withheld": {site: [w.to_list() for w in entries] for site, entries in self.withheld.items()}}

    def to_npz(self) -> bytes:
        """The profile as one npz (arrays, and the names as a JSON string array): nothing pickled."""
        buffer = io.BytesIO()
        np.savez_compressed(buffer, meta=np.array(json.dumps(self.meta())),
                            **{name: value.astype(np.float32) if value.dtype.kind == "f" else value
                               for name, value in self.arrays.items()})
        return buffer.getvalue()

    @classmethod
    def from_npz(cls, data: Mapping[str, np.ndarray]) -> Profile:
        meta = json.loads(str(data["meta"]))
        arrays = {name: np.asarray(data[name], dtype=np.float64 if data[name].dtype.kind == "f" else data[name].dtype)
                  for name in ARRAYS}
        return cls(meta["sites"], meta["features"], meta["kinds"], meta["columns"], meta["classes"], arrays,
                   meta.get("units") or {}, *read_disclosure(meta))


def read_disclosure(meta: Mapping[str, Any]) -> tuple[dict[str, dict | None], dict[str, list[Withheld]]]:
    """The policies and withheld lists a profile's meta records (none: a profile from before
    disclosure control, whose sites released everything as computed)."""
    policies = meta.get("policies")
    withheld = meta.get("withheld")
    policies = {str(k): (v if isinstance(v, dict) else None) for k, v in policies.items()} \
        if isinstance(policies, dict) else {}
    entries = {str(site): [w for w in map(Withheld.from_list, values if isinstance(values, list) else []) if w]
               for site, values in (withheld.items() if isinstance(withheld, dict) else [])}
    return policies, entries


def profile_federation(sites: Sequence[tuple[str, np.ndarray, np.ndarray]], features: Sequence[str],
                       kinds: Sequence[str], columns: Sequence[str], classes: Sequence[str],
                       units: Mapping[str, str] | None = None, policy: Policy | None = DEFAULT_POLICY) -> Profile:
    """The profile of every (name, x, y) site, as if each had computed and sent its own, every
    site releasing at `policy` (None: as computed, unprotected: for measuring the policy's cost)."""
    return Profile.of_sites([site_profile(x, y, features, kinds, classes, policy) for _, x, y in sites],
                            [name for name, _, _ in sites], features, kinds, columns, classes, units)
