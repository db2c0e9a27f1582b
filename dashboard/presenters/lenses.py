"""Each lens's figures and numbers from a stored run: used by its page and by the HTML report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.presenters import figures
from dashboard.presenters.record_tables import per_class_series, per_site_series
from dashboard.presenters.safe_text import plot_lines, plot_text
from fedcore.interpret.detection import detection_report
from fedcore.interpret.findings import Finding
from fedcore.interpret.significance import deviation_sums, significance_marks
from fedcore.interpret.similarity import cluster_order
from fedcore.records import FeatureShifts, SiteWeights
from fedcore.store import Run, StoredFederation, check_array
from fedcore.glossary import plain, term
from fedcore.original_units import correction_text

FEATURE_VIEWS = ("all features", "marked features only", "sorted by deviation", "marked first, by largest |z|")
DEVIATION = "total |value - feature mean|"
CENTRE_WORD = {"sd": "mean", "robust": "median"}  # what a rule's z is measured from
LAYER_WORDS = {layer: f"the {plain(layer)}" for layer in ("b_in", "w_in", "b_out", "w_out")}
# Which layer shows which kind of problem (iFedAvg's docstring says why), for the pages.
LAYER_GUIDE = (
    "**Input layers** — the input shift b_in and the input scale w_in — show a problem with *one feature at one "
    "site*: another unit (°F for °C), an offset (ages 20 years too high), a feature recorded only for some "
    "patients. **Output layers** — the output shift b_out and the output scale w_out — show a problem with *a "
    "site's labels*: flipped or differently defined outcomes; a flipped site's output scale w_out turns negative. "
    f"They exist only with an {term('local f_out')} (the default); with a shared one, label problems push the "
    "flipped site's input layers instead and mark features that are fine."
)


@dataclass
class ShiftView:
    figure: go.Figure
    table: pd.DataFrame  # site, feature, value, z, O, x, meaning: the figure's numbers (meaning: in the data's units)
    marked_cells: int
    marked_features: int
    # The grey bars, over the features shown in the order shown: site, DEVIATION / feature,
    # DEVIATION, largest |z|, x.
    site_deviation: pd.DataFrame
    feature_deviation: pd.DataFrame


def marking(run: Run, round_: int | None = None) -> FeatureShifts:
    """How an iFedAvg run marked its heatmaps (rule, SDs, spread floor, a warning) at `round_`
    (None: its latest evaluated round); the record's defaults before its first."""
    records = [r.algorithm for r in run.rounds() if isinstance(r.algorithm, FeatureShifts)
               and (round_ is None or r.round == round_)]
    return records[-1] if records else FeatureShifts()


def layers(arrays: dict[str, np.ndarray]) -> list[str]:
    return [layer for layer in ("b_in", "w_in", "b_out", "w_out") if layer in arrays]


def shift_view(run: Run, round_: int, layer: str, centre: str = "neutral", n_sd: float = 2.0,
               sd_floor: float = 0.05, features_view: str = FEATURE_VIEWS[0], rule: str = "sd",
               checkup: Sequence[Finding] | None = None, calibrated: bool = False) -> ShiftView:
    """iFedAvg's heatmap of one layer at one round, marks recomputed with the given rule; with
    `checkup` (every cell a check-up including this run tested) each cell's q and p on hover and in
    the table, and with `calibrated` the check-up's findings as the marks instead of the rule's."""
    if calibrated and (checkup is None or layer not in figures.CALIBRATED_LAYERS):
        raise ValueError(f"calibrated marks of {layer} need a check-up that tests it")
    run.require("federation.json")
    federation = run.federation
    sites = federation.site_names
    matrix = layer_matrix(run, round_, run.load_arrays(round_), layer, federation)
    columns = list(federation.feature_names) if layer.endswith("_in") else _output_columns(federation, matrix)
    marks = significance_marks(matrix, n_sd, sd_floor, rule)
    calibration = figures.calibrated_cells(checkup, layer, sites, columns) if checkup is not None else None
    cells, features_marked = (calibration.marked, np.zeros(matrix.shape[1], dtype=bool)) if calibrated \
        else (marks.cells, marks.features)
    scales = federation.scales
    meanings = np.array([[correction_text(layer, matrix[i, j], scales.get(site, {}).get(columns[j]))
                          for j in range(matrix.shape[1])] for i, site in enumerate(sites)], dtype=object)
    table = pd.DataFrame({
        "site": np.repeat(sites, matrix.shape[1]),
        "feature": np.tile(columns, len(sites)),
        "value": matrix.ravel(),
        "z": marks.z.ravel(),
        "O": marks.cells.ravel(),
        "x": np.tile(marks.features, len(sites)),
        "meaning": meanings.ravel(),
        **({"check-up q": calibration.q.ravel(), "check-up p": calibration.p.ravel(),
            "check-up O": calibration.marked.ravel()} if calibration is not None else {}),
    })
    # plotly reads hover text as HTML: names escaped
    notes = np.array([[f"<b>{plot_text(site)}</b> · " + plot_lines(
                           [columns[j], meanings[i, j], distance_text(marks.z[i, j], rule)])
                       + ("" if not marks.cells[i, j] else "<br>the paper's 2-SD rule marks it" if calibrated
                          else "<br><b>O</b>: unusually far from the other sites")
                       + ("<br>" + plot_text(calibration.notes[i, j]) if calibration is not None else "")
                       for j in range(matrix.shape[1])] for i, site in enumerate(sites)], dtype=object)
    marked = cells.any(axis=0) | features_marked
    # A constant column has no z (NaN): it ranks last, not first.
    largest_z = np.nan_to_num(np.abs(marks.z), nan=0.0).max(axis=0)
    keep = np.arange(matrix.shape[1])
    if features_view == "marked features only":
        keep = np.flatnonzero(marked)
    elif features_view == "sorted by deviation":
        keep = np.argsort(-deviation_sums(matrix)[0], kind="stable")
    elif features_view == FEATURE_VIEWS[3]:
        # The total deviation favours features every site corrects a little; the largest |z|
        # puts first the feature where one site stands out most, as the O marks do.
        keep = np.lexsort((-largest_z, ~marked))
    if len(keep) == 0:
        keep = np.arange(matrix.shape[1])  # nothing marked: show everything rather than nothing
    shown = [columns[j] for j in keep]
    feature_deviation, site_deviation = deviation_sums(matrix[:, keep])
    figure = figures.shift_heatmap(
        matrix[:, keep], marks.z[:, keep], cells[:, keep], features_marked[keep],
        sites, shown, layer, site_deviation, feature_deviation, centre, notes[:, keep],
        figures.CALIBRATED_MARKS if calibrated else figures.PAPER_MARKS,
    )
    return ShiftView(
        figure, table, int(cells.sum()), int(features_marked.sum()),
        site_deviation=pd.DataFrame({"site": sites, DEVIATION: site_deviation}),
        feature_deviation=pd.DataFrame({"feature": shown, DEVIATION: feature_deviation,
                                        "largest |z|": largest_z[keep], "x": marks.features[keep]}),
    )


def layer_matrix(run: Run, round_: int, arrays: dict[str, np.ndarray], layer: str,
                 federation: StoredFederation) -> np.ndarray:
    """A stored iFedAvg layer, checked to be sites x features (input layers) or sites x 1 or
    sites x classes (output layers); RunDamaged naming the file otherwise."""
    matrix = arrays[layer]
    if layer.endswith("_in"):
        columns = len(federation.feature_names)
    else:
        columns = 1 if matrix.ndim == 2 and matrix.shape[1] == 1 else len(federation.class_names)
    check_array(run, round_, layer, matrix, len(federation.sites), columns)
    return matrix


def distance_text(z: float, rule: str = "sd") -> str:
    """How far a site's value lies from the other sites', in words first ('2.6 SD below the
    sites' mean (z = −2.58)')."""
    if not np.isfinite(z):
        return "no spread across sites to compare with"
    side = "above" if z > 0 else "below"
    return f"{abs(z):.1f} SD {side} the sites' {CENTRE_WORD.get(rule, 'mean')} (z = {z:+.2f})"


def _output_columns(federation: StoredFederation, matrix: np.ndarray) -> list[str]:
    if matrix.shape[1] == 1:
        return ["all classes"]
    return [f"class: {name}" for name in federation.class_names]


def detection_table(run: Run, round_: int, n_sd: float = 2.0, sd_floor: float = 0.05,
                    rule: str = "sd") -> tuple[pd.DataFrame, list[dict]] | None:
    """Injected shifts against the marks of that round under the given rule (runs on data with
    ground truth only)."""
    run.require("federation.json")
    federation = run.federation
    if not federation.ground_truth:
        return None
    stored = run.load_arrays(round_)
    if "b_in" not in stored:
        return None
    arrays = {}
    for layer in layers(stored):
        matrix = layer_matrix(run, round_, stored, layer, federation)
        marks = significance_marks(matrix, n_sd, sd_floor, rule)
        arrays.update({layer: matrix, f"{layer}_O": marks.cells, f"{layer}_z": marks.z})
    sites = federation.site_names
    report = detection_report(federation.ground_truth, sites, federation.feature_names, arrays)
    scales = federation.scales

    def column(layer: str, j: int) -> str:
        return federation.feature_names[j] if layer.endswith("_in") else _output_columns(federation, arrays[layer])[j]

    def evidence(entry: dict) -> str:
        if entry["caught"] is None:  # no output layers: the labels cannot be checked
            return "; ".join(entry["evidence"])
        return "; ".join(
            f"marked in {LAYER_WORDS[m['layer']]}: {correction_text(m['layer'], m['value'], scales.get(entry['site'], {}).get(column(m['layer'], m['column'])))}"
            + (f", {distance_text(m['z'], rule)}" if m.get("z") is not None else "")
            for m in entry["marks"]) or "no mark"

    rows = [{
        "site": e["site"],
        "feature": e["feature"] or "(labels)",
        "injected problem": e["detail"],
        "caught": {True: "caught", False: "missed", None: "not checkable"}[e["caught"]],
        "evidence": evidence(e),
    } for e in report["injected"]]
    false_positives = [{**f, "column": column(f["layer"], f["column"]) if isinstance(f["column"], int) else f["column"]}
                       for f in report["false_positives"]]
    return pd.DataFrame(rows), false_positives


@dataclass
class SimilarityView:
    distance: go.Figure
    weights: go.Figure
    table: pd.DataFrame
    nearest: pd.DataFrame
    lam: float


def similarity_view(run: Run, round_: int, clustered: bool = True) -> SimilarityView | None:
    run.require("federation.json")
    arrays = run.load_arrays(round_)
    if "weights" not in arrays:
        return None
    sites = run.federation.site_names
    distance, weights = arrays["distance"], arrays["weights"]
    for name, matrix in (("distance", distance), ("weights", weights)):
        check_array(run, round_, name, matrix, len(sites), len(sites))
    order = cluster_order(distance) if clustered else list(range(len(sites)))
    names = [sites[i] for i in order]
    pick = np.ix_(order, order)
    lam = float(run.spec.param("lam"))
    table = pd.DataFrame({
        "site": np.repeat(sites, len(sites)), "other site": np.tile(sites, len(sites)),
        "distance": distance.ravel(), "weight": weights.ravel(),
    })
    nearest = pd.DataFrame([
        {"site": sites[i], **{f"nearest {k + 1}": f"{sites[j]} (d={distance[i, j]:.2f}, w={weights[i, j]:.2f})"
                             for k, j in enumerate([j for j in np.argsort(distance[i], kind="stable") if j != i][:3])}}
        for i in range(len(sites))
    ])
    how = "clustered so similar sites sit together" if clustered else "in federation order"
    return SimilarityView(
        distance=figures.matrix_heatmap(distance[pick], names, f"Distance between sites' statistics ({how}; "
                                        "colour on a log scale)", "Blues", colorbar_title="distance", log_colour=True),
        weights=figures.matrix_heatmap(weights[pick], names, f"Aggregation weights: row = who receives, λ = {lam:g} "
                                       "on the diagonal", "Greens", colorbar_title="weight"),
        table=table, nearest=nearest, lam=lam,
    )


@dataclass
class WeightsView:
    shares: pd.DataFrame  # round, site, value: p_i / sum p (what the server averaged with)
    scores: pd.DataFrame  # round, site, value: the raw p_i of the weight rule
    kappa: pd.DataFrame
    server_f1: pd.DataFrame
    near_zero: pd.DataFrame  # site, evaluated rounds near zero, first, last, latest share
    formula: str | None  # how the rule made p_i from accuracy, as the run recorded it (older runs: None)


def weights_view(run: Run, near_zero: float = 0.25) -> WeightsView:
    """AdaFed's site shares and raw scores p_i over rounds, class weights, the server's per-class
    F1, and every site whose share fell below `near_zero` of an equal share in some evaluated round."""
    shares = per_site_series(run, SiteWeights, lambda record: record.p_share)
    classes = run.federation.class_names
    rows = []
    if not shares.empty:
        equal = 1.0 / shares["site"].nunique()
        latest = shares[shares["round"] == shares["round"].max()].set_index("site")["value"]
        for site, group in shares[shares["value"] < near_zero * equal].groupby("site", sort=False):
            rows.append({"site": site, "rounds near zero": len(group), "of evaluated rounds": shares["round"].nunique(),
                         "first": int(group["round"].min()), "last": int(group["round"].max()),
                         "latest share": float(latest[site])})
    formulas = [r.algorithm.weight_formula for r in run.rounds()
                if isinstance(r.algorithm, SiteWeights) and r.algorithm.weight_formula is not None]
    return WeightsView(shares, per_site_series(run, SiteWeights, lambda record: record.p),
                       per_class_series(run, SiteWeights, lambda record: record.kappa, classes),
                       per_class_series(run, SiteWeights, lambda record: record.server_f1_per_class, classes),
                       pd.DataFrame(rows, columns=["site", "rounds near zero", "of evaluated rounds", "first", "last",
                                                   "latest share"]),
                       formulas[-1] if formulas else None)
