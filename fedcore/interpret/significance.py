"""Significance marks on a sites x features matrix (iFedAvg's b_in / w_in heatmaps).

rule "sd" — the rule of the authors' plotting code, with population SDs (ddof=0) down each
feature column:
- 'O' on cell (i, j): |m_ij - mean_i(m_.j)| > n_sd * SD_i(m_.j)  and  SD_i(m_.j) > sd_floor;
- 'x' on feature j:   s_j - mean_k(s_k) > n_sd * SD_k(s_k), with s_j = SD_i(m_.j)
  (signed: only features whose spread across sites is unusually high).

rule "robust" — the same questions asked with medians and MADs (scaled by 1.4826 to estimate an
SD), so that one far-off site does not widen the yardstick for the others (with the SD rule, a
site with flipped labels, whose whole row moves, can hide every other site's shift), and so that
a federation of 3 to 5 sites can still single one out (the SD rule cannot: see max_single_site_z):
- 'O' on cell (i, j): |m_ij - median_i(m_.j)| > n_sd * max(1.4826 MAD_i(m_.j), sd_floor);
- 'x' on feature j:   r_j - median_k(r_k) > n_sd * max(1.4826 MAD_k(r_k), sd_floor), with r_j the
  column's robust spread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_N_SD = 2.0
DEFAULT_SD_FLOOR = 0.05
RULES = ("sd", "robust")
MAD_TO_SD = 1.4826  # the MAD of a normal sample times this estimates its SD


@dataclass(frozen=True)
class Marks:
    cells: np.ndarray  # bool, sites x features: 'O'
    features: np.ndarray  # bool, features: 'x'
    z: np.ndarray  # float, sites x features: the rule's deviation in its own spread units (NaN: none)


def significance_marks(
    m: np.ndarray, n_sd: float = DEFAULT_N_SD, sd_floor: float = DEFAULT_SD_FLOOR, rule: str = "sd"
) -> Marks:
    m = np.asarray(m, dtype=np.float64)
    if rule == "robust":
        deviation = m - np.median(m, axis=0)
        spread = MAD_TO_SD * np.median(np.abs(deviation), axis=0)
        scale = np.maximum(spread, sd_floor)
        cells = np.abs(deviation) > n_sd * scale
        spread_deviation = spread - np.median(spread)
        features = spread_deviation > n_sd * max(MAD_TO_SD * np.median(np.abs(spread_deviation)), sd_floor)
        return Marks(cells=cells, features=features, z=deviation / scale)
    if rule != "sd":
        raise ValueError(f"rule must be one of {RULES}, not {rule!r}")
    column_mean = m.mean(axis=0)
    column_sd = m.std(axis=0)
    deviation = m - column_mean
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(column_sd > 0, deviation / column_sd, np.nan)
    cells = (np.abs(deviation) > n_sd * column_sd) & (column_sd > sd_floor)
    features = (column_sd - column_sd.mean()) > n_sd * column_sd.std()
    return Marks(cells=cells, features=features, z=z)


def deviation_sums(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature and per-site sums of |m - column mean| (the bars beside the heatmap)."""
    deviation = np.abs(np.asarray(m, dtype=np.float64) - np.mean(m, axis=0))
    return deviation.sum(axis=0), deviation.sum(axis=1)


def max_single_site_z(n_sites: int) -> float:
    """Largest |z| one site can reach among n sites with population SDs: sqrt(n - 1).

    With 5 or fewer sites it is at most 2, so the default 2-SD rule can never mark a single
    site's cell; callers warn the user instead of showing an empty heatmap as 'no shifts'.
    """
    return float(np.sqrt(max(n_sites - 1, 0)))
