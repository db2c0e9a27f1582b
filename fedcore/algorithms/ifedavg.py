"""iFedAvg (Roschewitz et al. 2021): FedAvg with element-wise affine layers kept at each site.

Each site's model is f_out ∘ f_shared ∘ f_in with f_in(x) = (x + b_in) * w_in. f_in never
leaves the site (f_out too, when `local_f_out`); the server averages the rest as FedAvg does.
The learned b_in / w_in of all sites form the sites x features heatmaps; cells more than
`n_sd` SDs from their feature's mean get an 'O', features with unusual spread an 'x'.

Which layer shows which problem: f_in (b_in, w_in) a feature a site records differently — another
unit, an offset, a different scale, missing not at random; f_out (b_out, w_out) the labels — a
flip, another outcome definition or prevalence. Only a local f_out can show the latter, so it is
local by default, with one scalar w_out per site (a flipped site's turns negative). The authors'
code shares f_out (`local_f_out=False`), which then corrects label problems through the shared
layers and the f_in of the flipped site — marking its features instead; the paper benchmarks set
it so.
"""

from dataclasses import dataclass

import numpy as np
from torch import nn

from fedcore.algorithms.base import Algorithm, FedAvgParams, Records, param
from fedcore.records import FeatureShifts
from fedcore.errors import SpecError
from fedcore.interpret.significance import (
    DEFAULT_N_SD,
    DEFAULT_SD_FLOOR,
    RULES,
    max_single_site_z,
    significance_marks,
)


@dataclass
class IFedAvgParams(FedAvgParams):
    local_f_out: bool = param(
        True,
        "Keep the output layer f_out at each site too: label problems (a flip, another outcome "
        "definition) then show in b_out / w_out instead of in the flipped site's features. Off: "
        "f_out is shared, as in the authors' code.",
    )
    scalar_w_out: bool = param(
        True,
        "With a local f_out: one scalar w_out per site (a flipped site's turns negative) instead of "
        "one weight per class. Only for a local f_out: with a shared one it is stored as off.",
    )
    n_sd: float = param(DEFAULT_N_SD, "Significance: SDs from the feature's mean for a mark.")
    sd_floor: float = param(
        DEFAULT_SD_FLOOR, "Significance: a feature's SD across sites must exceed this for 'O' marks."
    )
    rule: str = param(
        "sd",
        "Significance rule: 'sd' (mean and SD, the authors' plots) or 'robust' (median and MAD: one "
        "far-off site cannot hide the others, and 3-5 sites can be marked).",
        RULES,
    )

    def __post_init__(self) -> None:
        # A scalar w_out is a per-site reading aid; a shared f_out shows no site, so it keeps its
        # weight per class (and the stored spec says so).
        self.scalar_w_out = self.scalar_w_out and self.local_f_out
        if self.n_sd <= 0 or self.sd_floor < 0:
            raise SpecError("iFedAvg: n_sd must be positive and sd_floor non-negative.")


class IFedAvg(Algorithm):
    name = "ifedavg"
    title = "iFedAvg"
    summary = "FedAvg plus per-site affine input and output layers that show feature and label problems."
    Params = IFedAvgParams
    Record = FeatureShifts
    inputs = ("table",)  # f_in corrects each feature of a table

    def build_model(self, ctx) -> nn.Module:
        return ctx.make_mlp(scalar_w_out=self.params.scalar_w_out)

    def is_local(self, name: str, module: nn.Module) -> bool:
        return name.startswith("f_in.") or (self.params.local_f_out and name.startswith("f_out."))

    def layers(self) -> dict[str, str]:
        """Recorded matrix -> model parameter."""
        names = {"b_in": "f_in.b", "w_in": "f_in.w"}
        if self.params.local_f_out:
            names.update(b_out="f_out.b", w_out="f_out.w")
        return names

    def recorded_locals(self, ctx) -> list[str]:
        return list(self.layers().values())

    def record(self, ctx) -> Records:
        arrays: dict[str, np.ndarray] = {}
        marked = {}
        for label, parameter in self.layers().items():
            matrix = ctx.stacked[parameter].detach().cpu().double().numpy()
            marks = significance_marks(matrix, self.params.n_sd, self.params.sd_floor, self.params.rule)
            arrays[label] = matrix
            arrays[f"{label}_O"] = marks.cells
            arrays[f"{label}_x"] = marks.features
            arrays[f"{label}_z"] = marks.z
            marked[label] = {"O": int(marks.cells.sum()), "x": int(marks.features.sum())}
        warning = None
        if self.params.rule == "sd" and max_single_site_z(len(ctx.models)) <= self.params.n_sd:
            warning = (
                f"With {len(ctx.models)} sites no single site can lie more than "
                f"{max_single_site_z(len(ctx.models)):.2f} SDs from a feature's mean, so the "
                f"{self.params.n_sd:g}-SD rule cannot mark a cell; read the values, or use the robust rule."
            )
        return FeatureShifts(marked, self.params.n_sd, self.params.sd_floor, self.params.rule, warning), arrays
