"""Partitioners: deal one pooled set of rows out to simulated sites.

    iid              every site gets a random, equally large share (label shares alike)
    dirichlet:ALPHA  label skew: each class is divided among the sites in Dirichlet(ALPHA)
                     proportions (Hsu et al. 2019; the NIID-Bench recipe FedHealth 2 uses with
                     ALPHA = 0.1) — small ALPHA gives sites dominated by a few classes
    quantity:BETA    quantity skew: site sizes in Dirichlet(BETA) proportions, labels IID —
                     small BETA gives very unequal sizes

Every site gets at least `min_rows` rows; the same seed gives the same partition.
"""

from __future__ import annotations

import numpy as np

from fedcore.errors import DataError

SPLITS = ("iid", "dirichlet", "quantity")
MIN_SITE_ROWS = 10
DIRICHLET_ATTEMPTS = 1000


def parse_split(text: str) -> tuple[str, float | None]:
    """'iid' -> ('iid', None); 'dirichlet:0.1' -> ('dirichlet', 0.1)."""
    kind, _, value = text.strip().partition(":")
    if kind not in SPLITS:
        raise DataError(f"Unknown split '{text}'; use iid, dirichlet:ALPHA or quantity:BETA (e.g. dirichlet:0.1).")
    if kind == "iid":
        if value:
            raise DataError(f"The iid split takes no parameter ('{text}').")
        return kind, None
    try:
        concentration = float(value)
    except ValueError:
        raise DataError(f"The {kind} split needs a positive number, e.g. {kind}:0.5; got '{text}'.") from None
    if not concentration > 0:
        raise DataError(f"The {kind} split needs a positive number, e.g. {kind}:0.5; got '{text}'.")
    return kind, concentration


def partition(
    y: np.ndarray, n_sites: int, split: str, seed: int, min_rows: int = MIN_SITE_ROWS
) -> list[np.ndarray]:
    """Sorted row indices of each site."""
    kind, concentration = parse_split(split)
    n_rows = len(y)
    if n_sites < 1:
        raise DataError(f"A federation needs at least one site, not {n_sites}.")
    if n_rows < n_sites * min_rows:
        raise DataError(
            f"{n_rows} rows cannot give {n_sites} sites at least {min_rows} rows each; use fewer sites."
        )
    rng = np.random.default_rng(seed)
    if kind == "iid":
        parts = np.array_split(rng.permutation(n_rows), n_sites)
    elif kind == "quantity":
        parts = _quantity_skew(n_rows, n_sites, concentration, rng, min_rows)
    else:
        parts = _label_skew(y, n_sites, concentration, rng, min_rows)
    return [np.sort(part) for part in parts]


def _quantity_skew(
    n_rows: int, n_sites: int, beta: float, rng: np.random.Generator, min_rows: int
) -> list[np.ndarray]:
    # Every site first gets min_rows; the rest is dealt in Dirichlet proportions, so the
    # minimum holds without retries however small beta is.
    shares = rng.dirichlet(np.full(n_sites, beta))
    extra = np.floor(shares * (n_rows - n_sites * min_rows)).astype(int)
    extra[np.argmax(shares)] += n_rows - n_sites * min_rows - extra.sum()
    cuts = np.cumsum(min_rows + extra)[:-1]
    return np.split(rng.permutation(n_rows), cuts)


def _label_skew(
    y: np.ndarray, n_sites: int, alpha: float, rng: np.random.Generator, min_rows: int
) -> list[np.ndarray]:
    # NIID-Bench: per class, Dirichlet(alpha) shares over the sites; a site already above the
    # average size gets no more of later classes; redraw until every site has min_rows.
    for _ in range(DIRICHLET_ATTEMPTS):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_sites)]
        sizes = np.zeros(n_sites, dtype=int)
        for cls in np.unique(y):
            rows = rng.permutation(np.flatnonzero(y == cls))
            shares = rng.dirichlet(np.full(n_sites, alpha))
            open_sites = sizes < len(y) / n_sites
            if open_sites.any():
                shares = shares * open_sites
            shares = shares / shares.sum()
            cuts = (np.cumsum(shares) * len(rows)).astype(int)[:-1]
            for site, chunk in enumerate(np.split(rows, cuts)):
                parts[site].append(chunk)
                sizes[site] += len(chunk)
        if sizes.min() >= min_rows:
            return [np.concatenate(p) for p in parts]
    raise DataError(
        f"A Dirichlet label split with alpha={alpha} left a site with fewer than {min_rows} rows in "
        f"{DIRICHLET_ATTEMPTS} draws; use a larger alpha or fewer sites."
    )
