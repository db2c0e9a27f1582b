"""Standardised numbers back in the data's own units, from a run's preprocessing record.

Continuous features reach the model standardised: x_std = (x − mean) / sd, with each site's own
mean and SD, or with reference values every site shares (the demo's data dictionary). The data
adapters record what they used (`preprocessing.scales`: site -> feature -> [mean, sd], and
`units`: feature -> unit where the data say it), so a reader can undo it:

    a value          x = mean + sd · x_std
    iFedAvg's b_in   f_in computes (x_std + b_in) · w_in, i.e. it treats the site's x as x + sd · b_in:
                     a shift of sd · b_in in the feature's units ('+1.8 °C')
    iFedAvg's w_in   the same as mean + w_in · (x + sd · b_in − mean): deviations from the mean scaled
                     by w_in, a pure factor ('×0.56 around 37.3 °C')

Without standardisation (`standardization: none`) the values are the data's own already; binary
and one-hot features are 0/1 and never standardised. Where the record says nothing (older runs,
Flower sites that keep their statistics) there is no scale and values stay standardised.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fedcore.glossary import plain


@dataclass(frozen=True)
class Scale:
    """How one feature was standardised at one site."""

    mean: float  # the value that became 0
    sd: float  # what one standardised unit is in the feature's units
    unit: str  # '°C', or '' where the data do not say

    def value(self, standardised: float) -> float:
        return self.mean + self.sd * standardised

    def shift(self, b_in: float) -> float:
        """b_in as a shift in the feature's own units."""
        return self.sd * b_in


@dataclass(frozen=True)
class Preprocessing:
    """The parts of a federation's preprocessing record that readers use (federation.json's
    `preprocessing`, whose shape the store's reader checks: `fedcore.store.PREPROCESSING`; the
    data adapters write more, kept as stored)."""

    standardization: str = ""  # how tables were standardised, in words ('federated: ...'); '' for images
    units: Mapping[str, str] = field(default_factory=dict)  # feature -> its unit, where the data say it
    scales: Mapping[str, Mapping[str, Sequence[float]]] | None = None  # site -> feature -> [mean, sd]; None: unrecorded
    stored: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> Preprocessing:
        """The record as the data adapters wrote it (and the store's reader checked it)."""
        return cls(standardization=str(stored.get("standardization", "")),
                   units={feature: str(unit) for feature, unit in (stored.get("units") or {}).items()},
                   scales=stored.get("scales"), stored=stored)

    @property
    def unstandardised(self) -> bool:
        """The data's own values reached the model (`standardization: none`)."""
        return self.standardization.startswith("none")

    @property
    def pooled(self) -> bool:
        """Standardised with statistics pooled over the sites (`federated`)."""
        return self.standardization.startswith("federated")


def feature_scales(preprocessing: Preprocessing, sites: Sequence[str],
                   kinds: Mapping[str, str]) -> dict[str, dict[str, Scale]]:
    """site -> feature -> Scale, for every continuous feature the run's preprocessing record lets
    us translate; features or sites it cannot are absent. `kinds`: feature -> its kind."""
    if preprocessing.scales is not None:
        return {site: {feature: Scale(float(pair[0]), float(pair[1]), preprocessing.units.get(feature, ""))
                       for feature, pair in by_feature.items()}
                for site, by_feature in preprocessing.scales.items()}
    if preprocessing.unstandardised:  # the data's own values
        continuous = [f for f, kind in kinds.items() if kind == "continuous"]
        return {site: {f: Scale(0.0, 1.0, preprocessing.units.get(f, "")) for f in continuous} for site in sites}
    return {}


def number(value: float, signed: bool = False) -> str:
    """Two significant digits for a reader ('+1.8', '20', '0.056'); whole numbers from 10 up."""
    if value is None or not math.isfinite(value):
        return "–"
    sign = "+" if signed else ""
    magnitude = abs(value)
    if magnitude >= 10:
        return f"{value:{sign}.0f}"
    if magnitude >= 1:
        return f"{value:{sign}.1f}"
    return f"{value:{sign}.2g}"


def with_unit(text: str, unit: str) -> str:
    if not unit:
        return f"{text} (the data's units)"
    return f"{text}{'' if unit == '%' else ' '}{unit}"


def correction_text(layer: str, value: float, scale: Scale | None) -> str:
    """What a learned iFedAvg value does, in words and, where known, in the feature's units; the
    layer's name and value come after ('shifted by +1.8 °C (input shift b_in = +2.25)')."""
    technical = f"{plain(layer)} {layer} = {number(value, signed=layer.startswith('b'))}"
    if layer == "b_in":
        amount = f"{number(value, True)} SD" if scale is None else with_unit(number(scale.shift(value), True), scale.unit)
        return f"shifted by {amount} ({technical})"
    if layer == "w_in":
        around = "" if scale is None else f" around {with_unit(number(scale.mean), scale.unit)}"
        if value < 0:
            return f"turned around{around}, ×{number(value)} ({technical})"
        how = f"squeezed to {number(value)} of" if value < 1 else f"stretched to {number(value)} times"
        return f"{how} its spread{around} ({technical})"
    if layer == "w_out":
        if value < 0:
            return (f"outcome scores turned around, ×{number(value)} ({technical}): the site's outcome scores run "
                    "against the others' (flipped labels?)")
        return f"outcome scores scaled ×{number(value)} ({technical})"
    return f"outcome score shifted by {number(value, True)} ({technical})"


def is_scale_pair(value: Any) -> bool:
    """[mean, sd]: two finite numbers (how federation.json stores one feature's scale at one site)."""
    return (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value))
