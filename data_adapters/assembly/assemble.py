"""From every site's full rows to a Federation — the one path all file-based sources share:

    1. partition the pooled rows into simulated sites (when asked, or when the data have no sites)
    2. injections that act on rows: unit change, missing not at random, label flip, image stamp
    3. every site's profile (federated statistics of its rows in original units: the check-up's data lens)
    4. missingness indicators (tables, optional): one 0/1 column per input column that has a
       missing value at any site
    5. the paper's hold-out split per site (stratified, max(33 %, 100 rows))
    6. standardisation of continuous features: per site (fitted on that site's training rows only),
       federated (the mean and SD pooled over all sites' training rows), or a data dictionary's
    7. injections that act on model inputs: offset, scale
    8. iFedAvg's missing-value encoding: continuous -> 0 (the site's mean), binary / categorical -> 0.5

A server test set (images: the data's test split; tables: a file of the server's own) is no
site: it is not partitioned and nothing is injected into it. A table's gets the indicators, and is
standardised with its own statistics (all its rows) and missing-encoded, as a site's rows are.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from data_adapters.tables.columns import FLOAT32_MAX
from data_adapters.assembly.inject import check, inject_inputs, inject_rows, parse_injection
from data_adapters.assembly.partition import MIN_SITE_ROWS, partition
from data_adapters.assembly.preprocessing import encode_missing, fit_standardization, scales_record, standardize
from data_adapters.tables.site_rows import RawFederation, RawSite
from fedcore.errors import DataError
from fedcore.federation import Federation, holdout_indices, make_site
from fedcore.injected import InjectedProblem
from fedcore.interpret.disclosure import DEFAULT_POLICY, Policy, released_sums
from fedcore.interpret.profile import Profile, profile_federation
from fedcore.kept import Kept

# How continuous features are standardised: 'site' (each site with the mean and SD of its own training
# rows: the iFedAvg paper's setting, which removes every affine difference between sites), 'federated'
# (every site with the mean and SD of all sites' training rows, pooled from each site's count, sum and
# sum of squares as a federation would: offsets and unit differences stay for the model to see),
# 'reference' (values a data dictionary gives), 'none' (original units).
TABLE_STANDARDIZATION = ("site", "federated", "none")


def assemble(
    raw: RawFederation,
    seed: int = 0,
    split: str | None = None,
    sites: int = 4,
    partition_seed: int = 0,
    inject: Sequence[str | Mapping[str, Any]] = (),
    standardization: str = "site",
    missing_indicators: bool = False,
    reference: dict[int, tuple[float, float]] | None = None,
    sums_only: bool = False,
    disclosure: Policy | None = DEFAULT_POLICY,
) -> Federation | np.ndarray:
    """The Federation of `raw`; `seed` sets the hold-out split (as for every source), while
    `partition_seed` fixes which rows go to which simulated site, so runs with different seeds
    compare the same sites. `reference` (feature index -> mean, SD): with standardization
    'reference', a data dictionary's values; with 'federated', the values pooled over the sites
    of a real federation (a Flower site holds only its own rows, the server pools every site's
    `moment_sums`). `sums_only`: stop before standardising and return the sites' summed
    `moment_sums` of their training rows (what a Flower site sends). `disclosure`: the policy every
    site releases its profile and sums at (`fedcore.interpret.disclosure`; None: as computed,
    unprotected, for measuring what the policy costs)."""
    if standardization == "reference" and reference is None:
        raise DataError("Standardization 'reference' needs the reference values (a data dictionary).")
    if standardization not in (*TABLE_STANDARDIZATION, "reference"):
        raise DataError(f"Standardization must be one of {', '.join(TABLE_STANDARDIZATION)}, not '{standardization}'.")
    raw = repartitioned(raw, split, sites, partition_seed)
    injections = [parse_injection(spec) for spec in inject]
    for injection in injections:
        check(injection, raw)
    truth: list[InjectedProblem] = []
    site_rows = []
    for site in raw.sites:
        x, y = site.x, site.y
        for injection in (i for i in injections if i.site == site.name and i.before_standardisation):
            x, y, entry = inject_rows(injection, x, y, raw, standardization)
            truth.append(entry)
        site_rows.append(RawSite(site.name, x, y))
    raw = replace(raw, sites=site_rows)
    # What each site would share of its rows as they are (original units, injected problems in them).
    profile = profile_of(raw, disclosure)
    if missing_indicators and raw.is_tabular:
        raw = with_missing_indicators(raw)
    warnings = list(raw.warnings)
    splits = [holdout_indices(site.name, site.y, seed, warnings) for site in raw.sites]
    if sums_only:
        return sum(moment_sums(site.x[train], disclosure) for site, (train, _) in zip(raw.sites, splits))
    if raw.is_tabular and standardization == "federated" and reference is None:
        reference = pooled_standardization([site.x[train] for site, (train, _) in zip(raw.sites, splits)],
                                           raw.feature_kinds, disclosure)
    built, scales = [], {}  # scales: what each site subtracted and divided by (values back in °C, years, ...)
    for site, (train_idx, test_idx) in zip(raw.sites, splits):
        x = site.x
        if raw.is_tabular:
            if standardization == "site":
                scales[site.name] = fit_standardization(x[train_idx], raw.feature_kinds)
                x = standardize(x, raw.feature_kinds, "reference", scales[site.name])
            elif standardization in ("federated", "reference"):
                scales[site.name] = reference
                x = standardize(x, raw.feature_kinds, "reference", reference)
            for injection in (i for i in injections if i.site == site.name and not i.before_standardisation):
                x, entry = inject_inputs(injection, x, raw, standardization)
                truth.append(entry)
            x = encode_missing(x, raw.feature_kinds)
        check_model_inputs(site.name, x, raw.feature_names)
        built.append(make_site(site.name, x, site.y, train_idx, test_idx))
    return Federation(
        name=raw.name,
        description=raw.description + (
            f" {len(truth)} injected problem(s), recorded as ground truth." if truth else ""
        ),
        sites=built,
        feature_names=list(raw.feature_names),
        feature_kinds=list(raw.feature_kinds),
        class_names=list(raw.class_names),
        ground_truth=truth,
        synthetic=raw.synthetic,
        warnings=warnings,
        source=raw.source,
        preprocessing={
            **raw.preprocessing,
            **({"standardization": STANDARDIZATION_NOTES[standardization],
                "missing": "continuous -> 0 after standardisation, binary / categorical -> 0.5",
                "missing_indicators": missing_indicators} if raw.is_tabular else {}),
            **({"scales": scales_record(scales, raw.feature_names)} if scales else {}),
            **({"server_test_standardization": "its own rows' mean and SD (as a site's)" if standardization == "site"
                else "the same values as the sites'"}
               if raw.is_tabular and raw.server_test is not None and standardization != "none" else {}),
        },
        server_test=server_inputs(raw, standardization, reference),
        profile=profile,
    )


def check_model_inputs(site: str, x: np.ndarray, feature_names: Sequence[str]) -> None:
    """DataError unless every input is a finite 32-bit float (the engine's precision). The
    alignment refuses such values by file, column and row; this is the last guard for every
    source, so that no NaN or infinity reaches training as if it were a number."""
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(x) | (np.abs(x) > FLOAT32_MAX)
    if bad.any():
        columns = np.flatnonzero(bad.any(axis=0))
        names = ", ".join(f"'{feature_names[j]}'" if j < len(feature_names) else str(j) for j in columns[:5])
        raise DataError(
            f"Site '{site}': {int(bad.sum())} input value(s) of feature(s) {names} are not finite 32-bit numbers after "
            "preprocessing (infinite, NaN, or beyond ±3.4e38); training would turn them into NaN."
        )


STANDARDIZATION_NOTES = {
    "site": "site (fitted on each site's training rows)",
    "federated": "federated (every site with the mean and SD pooled over all sites' training rows)",
    "reference": "reference (a data dictionary's values, the same for every site)",
    "none": "none",
}


def moment_sums(x: np.ndarray, disclosure: Policy | None = DEFAULT_POLICY) -> np.ndarray:
    """[3, features]: each feature's count of observed values, their sum and their sum of squares —
    all a site sends for federated standardisation, as its disclosure policy releases them."""
    return released_sums(x, disclosure)


def pooled_standardization(parts: Sequence[np.ndarray], kinds: Sequence[str],
                           disclosure: Policy | None = DEFAULT_POLICY) -> dict[int, tuple[float, float]]:
    """(mean, population SD) of every continuous feature over all the parts' observed values, from
    each part's count, sum and sum of squares alone (as each releases them): what a federation's
    sites can send."""
    return pooled_from_sums(sum(moment_sums(x, disclosure) for x in parts), kinds)


def pooled_from_sums(sums: np.ndarray, kinds: Sequence[str]) -> dict[int, tuple[float, float]]:
    """(mean, population SD) of every continuous feature from the sites' summed `moment_sums`."""
    count, total, squares = np.asarray(sums, dtype=np.float64)
    values = {}
    for j, kind in enumerate(kinds):
        if kind != "continuous":
            continue
        mean = total[j] / count[j] if count[j] else 0.0
        variance = squares[j] / count[j] - mean**2 if count[j] else 0.0
        values[j] = (float(mean), float(np.sqrt(max(variance, 0.0))))
    return values


# The last profiles made in this process, by a digest of everything they are made of: a check-up's
# every run profiles the same rows again (HAR: 0.55 s a time, six runs). A profile is not changed
# after it is made, so the one made is shared (its npz too, `Profile.to_npz`).
_PROFILES = Kept(2)


def profile_of(raw: RawFederation, disclosure: Policy | None = DEFAULT_POLICY) -> Profile | None:
    """Every site's federated statistics of its raw rows (tables only), as each site's disclosure
    policy releases them; the same profile again for the same rows, names and policy."""
    if not raw.is_tabular:
        return None
    names = (raw.feature_names, raw.feature_kinds, raw.feature_columns or raw.feature_names, raw.class_names,
             raw.preprocessing.get("units") or {})
    return _PROFILES.get(_content_key(raw, names, disclosure),
                         lambda: profile_federation([(s.name, s.x, s.y) for s in raw.sites], *names, disclosure))


def _content_key(raw: RawFederation, names: tuple, disclosure: Policy | None) -> str:
    """A digest of the sites' rows (names, values, labels: their bytes, types and shapes), the
    feature and class names and units, and the policy."""
    digest = hashlib.blake2b(digest_size=20)
    described = [names, None if disclosure is None else disclosure.to_dict()]
    digest.update(json.dumps(described, sort_keys=True, default=str).encode())
    for site in raw.sites:
        for part in (np.asarray(site.x), np.asarray(site.y)):
            digest.update(f"{site.name}|{part.dtype.str}|{part.shape}".encode())
            digest.update(np.ascontiguousarray(part).data)
    return digest.hexdigest()


def server_inputs(raw: RawFederation, standardization: str,
                  reference: dict[int, tuple[float, float]] | None = None) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The server's test set as model inputs. With per-site standardisation a table's is
    standardised with its own statistics, as every site's is with its own: in the paper's per-site
    setting a data holder never learns another's means, and a unit or offset difference between
    holders is removed the same way for the server as for the sites. Federated or dictionary
    standardisation gives the server the values every site uses; 'none' keeps every table's units."""
    if raw.server_test is None:
        return None
    x, y = raw.server_test
    if raw.is_tabular:
        if standardization == "site":
            x = standardize(x, raw.feature_kinds, "site")
        elif standardization in ("federated", "reference"):  # the values every site uses
            x = standardize(x, raw.feature_kinds, "reference", reference)
        x = encode_missing(x, raw.feature_kinds)
    return torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.int64)


def repartitioned(raw: RawFederation, split: str | None, n_sites: int, seed: int) -> RawFederation:
    """`raw` dealt out to `n_sites` simulated sites by `split` (pooling any natural sites first);
    unchanged when no split is asked for and the data have sites of their own."""
    if split is None and raw.natural_sites:
        return raw
    split = split or "iid"
    x = np.concatenate([s.x for s in raw.sites])
    y = np.concatenate([s.y for s in raw.sites])
    parts = partition(y, n_sites, split, seed, min_rows=MIN_SITE_ROWS)
    width = len(str(n_sites))
    sites = [RawSite(f"site{k + 1:0{width}d}", x[rows], y[rows]) for k, rows in enumerate(parts)]
    pooled = " (the data's own sites pooled first)" if raw.natural_sites else ""
    return replace(
        raw,
        sites=sites,
        preprocessing={**raw.preprocessing, "split": f"{split} over {n_sites} sites{pooled}", "partition_seed": seed},
    )


def with_missing_indicators(raw: RawFederation) -> RawFederation:
    """Append '<column> (missing)' (1 = missing) for every input column with a missing value at
    any site; a categorical column's one-hot features share one indicator."""
    first_feature = {}
    for j, column in enumerate(raw.feature_columns):
        first_feature.setdefault(column, j)
    gaps = [c for c, j in first_feature.items() if any(np.isnan(s.x[:, j]).any() for s in raw.sites)]
    if not gaps:
        return raw
    columns = [first_feature[c] for c in gaps]

    def indicated(x: np.ndarray) -> np.ndarray:
        return np.hstack([x, np.isnan(x[:, columns]).astype(np.float64)])

    server = raw.server_test
    return replace(
        raw,
        sites=[RawSite(s.name, indicated(s.x), s.y) for s in raw.sites],
        # The sites decide which columns get an indicator; the server's test set gets the same ones.
        server_test=None if server is None else (indicated(server[0]), server[1]),
        feature_names=[*raw.feature_names, *(f"{c} (missing)" for c in gaps)],
        feature_kinds=[*raw.feature_kinds, *(["binary"] * len(gaps))],
        feature_columns=[*raw.feature_columns, *(f"{c} (missing)" for c in gaps)],
    )

