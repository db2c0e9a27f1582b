"""benchmarks/class_mix_shape.py (a prototype): a site's quantiles predicted as the mixture, in its
class proportions, of the sites' median quantiles of each class; known answers for uniform classes."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "benchmarks")]

import class_mix_shape as prototype  # noqa: E402
from fedcore.interpret.profile import PROBABILITIES  # noqa: E402


def _profile(counts: list[list[int]]) -> SimpleNamespace:
    """Sites whose class 0 is uniform on [0, 1] and class 1 uniform on [2, 3] (their quantiles exact),
    one continuous feature; a class's extreme levels withheld, as a disclosure policy's blocks do."""
    per_class = np.stack([PROBABILITIES, 2 + PROBABILITIES])  # [classes, probabilities]
    quantiles = np.broadcast_to(per_class[None, :, :, None], (len(counts), 2, len(PROBABILITIES), 1)).copy()
    quantiles[:, :, [0, -1], :] = np.nan
    return SimpleNamespace(continuous=[0], quantiles_by_class=quantiles, class_counts=np.array(counts),
                           sites=[f"s{k}" for k in range(len(counts))])


def test_a_site_of_one_class_gets_that_class_quantiles():
    predicted = prototype.mix_predicted_quantiles(_profile([[100, 0], [0, 100], [50, 50]]))
    inner = slice(1, -1)  # the released levels
    assert predicted[0, inner, 0] == pytest.approx(PROBABILITIES[inner])
    assert predicted[1, inner, 0] == pytest.approx(2 + PROBABILITIES[inner])


def test_half_and_half_gives_the_mixture_quantiles_by_hand():
    """Half the rows in each: the mixture's CDF is x / 2 on [0, 1] and 1/2 + (x − 2) / 2 on [2, 3], so its
    quantile at 0.25 is 0.5, at 0.75 2.5, at 0.1 0.2 and at 0.9 2.8; a quarter of the rows in class 1:
    its CDF 3x / 4 on [0, 1], the quantile at 0.6 is 0.8, at 0.9 2.6."""
    predicted = prototype.mix_predicted_quantiles(_profile([[50, 50], [75, 25]]))
    at = {round(float(p), 2): k for k, p in enumerate(PROBABILITIES)}
    assert [predicted[0, at[p], 0] for p in (0.1, 0.25, 0.75, 0.9)] == pytest.approx([0.2, 0.5, 2.5, 2.8])
    assert [predicted[1, at[p], 0] for p in (0.6, 0.9)] == pytest.approx([0.8, 2.6])
