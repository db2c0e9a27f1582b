"""Plotly figures for the lenses. Pure functions of numbers: the pages fetch, these draw.

Colours: one fixed colour per site across every page (by the site's position in its
federation), diverging scales centred on the neutral value of a layer (0 for biases, 1 for
weights: RdGy and PuOr, as in the authors' heatmaps), and the same layout conventions
everywhere (sites top to bottom in federation order unless a page reorders them on purpose).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.colors as pc
import plotly.express as px
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.presenters.record_tables import METRIC_LABELS
from dashboard.presenters.safe_text import plot_text
from fedcore.checkup import format_q
from fedcore.glossary import plain, term
from fedcore.interpret.findings import FDR, KINDS, Finding

NEUTRAL = {"b_in": 0.0, "b_out": 0.0, "w_in": 1.0, "w_out": 1.0}
LAYER_TITLES = {  # what a reader sees first, the technical name after
    "b_in": f"How each site shifts each feature ({plain('b_in')} b_in)",
    "w_in": f"How each site scales each feature ({plain('w_in')} w_in)",
    "b_out": f"How each site shifts its class scores ({plain('b_out')} b_out)",
    "w_out": f"How each site scales its class scores ({plain('w_out')} w_out)",
}
LAYER_LABELS = {layer: term(layer)[0].upper() + term(layer)[1:] for layer in NEUTRAL}  # 'Input shift (b_in)'

FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=13)
# What the heatmap's marks mean, by who sets them.
PAPER_MARKS = ("O: this site's value lies unusually far from the feature's mean across sites · "
               "x: the feature's values vary unusually across sites")
CALIBRATED_MARKS = (f"O: the site check-up finds this site's correction stands out from the other sites' "
                    f"(q below {FDR:g} over every cell it tested, and large enough to matter)")
CALIBRATED_LAYERS = ("b_in", "w_in", "w_out")  # what the check-up tests (b_out: nothing)


@dataclass(frozen=True)
class CalibratedCells:
    """A check-up's verdict on every cell of one iFedAvg layer's heatmap (sites x columns)."""

    marked: np.ndarray  # bool: the check-up reports a finding there
    q: np.ndarray  # NaN where the check-up tested nothing
    p: np.ndarray
    notes: np.ndarray  # one line of hover text per cell


def calibrated_cells(findings: Sequence[Finding], layer: str, sites: Sequence[str],
                     columns: Sequence[str]) -> CalibratedCells:
    """Where a check-up's model findings (`fedcore.checkup.CheckUp.findings`, every cell tested)
    lie on a layer's heatmap: b_in and w_in cell by cell (lens 'feature shifts', the finding's
    layer); w_out a site's whole row (the check-up tests each site's output weight, the mean over
    its classes: lens 'labels'). A cell is marked where the check-up reports the finding
    (`Finding.significant`: q below the false discovery rate and large enough to matter); every
    tested cell's hover says its q and p."""
    shape = (len(sites), len(columns))
    marked, q, p = np.zeros(shape, dtype=bool), np.full(shape, np.nan), np.full(shape, np.nan)
    notes = np.full(shape, "not tested by the check-up", dtype=object)
    rows, places = {site: i for i, site in enumerate(sites)}, {column: j for j, column in enumerate(columns)}
    for finding in findings:
        if finding.site not in rows:
            continue
        if layer.endswith("_in") and finding.kind == "feature_shift" and finding.evidence.get("layer") == layer:
            cells = [places[finding.feature]] if finding.feature in places else []
        elif layer == "w_out" and finding.kind == "output_shift":
            cells = list(range(len(columns)))
        else:
            continue
        i = rows[finding.site]
        for j in cells:
            marked[i, j], q[i, j], p[i, j] = finding.significant, finding.q, finding.p
            notes[i, j] = _verdict(finding)
    return CalibratedCells(marked, q, p, notes)


def _verdict(finding: Finding) -> str:
    if finding.significant:
        verdict = "marked O: a finding"
    elif math.isfinite(finding.q) and finding.q < FDR:
        verdict = "not marked: unlikely chance, but too small to matter"
    else:
        verdict = "not marked"
    exact = (f" (the check-up names it more exactly: {KINDS.get(finding.explained_by, finding.explained_by)})"
             if finding.explained_by else "")
    return f"check-up: {_value('q', finding.q)}, {_value('p', finding.p)} · {verdict}{exact}"


def _value(name: str, value: float) -> str:
    """'q = 0.012', or 'q < 0.001' (`format_q`'s precision)."""
    text = format_q(value)
    return f"{name} {text}" if text.startswith("<") else f"{name} = {text}"


def site_colors(site_names: Sequence[str]) -> dict[str, str]:
    """A colour-blind-safe colour per site, stable for a federation (assigned in its order)."""
    palette = pc.qualitative.Safe if len(site_names) <= len(pc.qualitative.Safe) else pc.qualitative.Alphabet
    return {name: palette[i % len(palette)] for i, name in enumerate(site_names)}


# Classes and categories (sites and runs have palettes of their own). Every figure names its colours:
# plotly express bakes the default template's colours into a figure when it makes it, and inside the
# dashboard's server that template is Streamlit's, whose colours are placeholders (#000001, ...) only
# its front end fills in: a report made there drew them black.
CLASS_COLOURS = tuple(pc.qualitative.T10)

# Eight colours far apart (D3's, without its grey and olive, which read as 'inactive' next to the
# others); sites have their own palette (Safe).
RUN_PALETTE = ("#1F77B4", "#FF7F0E", "#2CA02C", "#D62728", "#9467BD", "#8C564B", "#E377C2", "#17BECF")


def run_colors(numbers: Mapping[str, int | None]) -> dict[str, str]:
    """A colour per run (run id -> number in its store), the same wherever and with whichever other
    runs it is drawn: its number picks it (consecutive runs differ; runs eight apart share one, and
    their names tell them apart), a run from before numbers by a hash of its id."""
    return {run_id: RUN_PALETTE[((number - 1) if number is not None else zlib.crc32(run_id.encode())) % len(RUN_PALETTE)]
            for run_id, number in numbers.items()}


def _style(fig: go.Figure, height: int, top: int = 60, left: int = 10, bottom: int = 10) -> go.Figure:
    fig.update_layout(height=height, font=FONT, margin=dict(l=left, r=10, t=top, b=bottom),
                      plot_bgcolor="white", paper_bgcolor="white")
    # Plotly widens a margin for long tick labels and axis titles, but only so far: the explicit
    # margins (`label_margins`) are what keeps long names inside a figure of any width.
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return plain_labels(fig)


def plain_labels(fig: go.Figure) -> go.Figure:
    """Every category (site, feature, class, run name) and trace name drawn as written: plotly reads
    HTML in them, so `<a href=...>` in a site's name would be a link (`safe_text.plot_text`).
    Annotations placed at a category move with it; the texts this module writes itself (titles,
    marks) are built from escaped names where they quote one."""
    for trace in fig.data:
        for axis in ("x", "y"):
            values = getattr(trace, axis, None)
            if values is not None and len(values) and any(isinstance(v, str) for v in values):
                trace.update({axis: [plot_text(v) if isinstance(v, str) else v for v in values]})
        if isinstance(getattr(trace, "name", None), str):
            original, trace.name = trace.name, plot_text(trace.name)
            template = getattr(trace, "hovertemplate", None)
            if isinstance(template, str) and original != trace.name:  # plotly express writes the name in
                trace.hovertemplate = template.replace(original, trace.name)
        if isinstance(getattr(trace, "legendgroup", None), str):
            trace.legendgroup = plot_text(trace.legendgroup)
    fig.for_each_xaxis(_plain_categories)
    fig.for_each_yaxis(_plain_categories)
    for annotation in fig.layout.annotations:
        for axis in ("x", "y"):
            if isinstance(annotation[axis], str):
                annotation[axis] = plot_text(annotation[axis])
    return fig


def text_px(text: str, size: float = FONT["size"]) -> float:
    """About how wide a label is drawn (average glyph 0.58 em for the sans-serif fonts we name)."""
    return 0.58 * size * len(str(text))


def label_margins(rows: Sequence[str], columns: Sequence[str], angle: float, row_title: bool = False,
                  size: float = FONT["size"]) -> tuple[int, int]:
    """(left, bottom) margins in pixels for a matrix with `rows` labelled on the left and `columns`
    below at `angle` degrees: the left one holds the longest row label and the reach of the first
    column's slanted label to the left (under the row labels); the bottom one the slanted labels."""
    rows_px = max((text_px(r, size) for r in rows), default=0) + (22 if row_title else 0)
    slant = np.cos(np.radians(abs(angle)))
    reach_left = text_px(columns[0], size) * slant if len(columns) and angle else 0
    below = max((text_px(c, size) for c in columns), default=0) * np.sin(np.radians(abs(angle))) + size
    return int(max(rows_px, reach_left) + 16), int(below + 16)


def _plain_categories(axis) -> None:
    if axis.categoryarray is not None and any(isinstance(v, str) for v in axis.categoryarray):
        axis.categoryarray = [plot_text(v) if isinstance(v, str) else v for v in axis.categoryarray]


def shift_heatmap(
    matrix: np.ndarray,
    z: np.ndarray,
    cells: np.ndarray,
    features_marked: np.ndarray,
    sites: Sequence[str],
    features: Sequence[str],
    layer: str,
    site_deviation: np.ndarray,
    feature_deviation: np.ndarray,
    centre: str = "neutral",
    notes: np.ndarray | None = None,
    marks_meaning: str = PAPER_MARKS,
) -> go.Figure:
    """Sites x features heatmap with 'O' on significant cells, 'x' above significant features,
    and the per-site / per-feature sums of |value - feature mean| (given, so that the page
    exports the very numbers drawn) as bars beside and below. `notes` (sites x features text) is
    what each cell's hover says: the correction in the data's units, how far it lies from the
    other sites, a check-up's q (`dashboard.presenters.lenses.shift_view` writes them); `marks_meaning` what
    the marks are (the paper's rule, or a check-up's calibrated findings)."""
    matrix = np.asarray(matrix, dtype=float)
    column_mean = matrix.mean(axis=0)
    name = layer.replace("_", "<sub>") + "</sub>"
    if centre == "column mean":  # colour by the departure from the feature's mean across sites
        shown, middle, bar_title = matrix - column_mean, 0.0, f"{name} − feature mean"
    else:  # colour by the correction itself, white = no correction
        shown, middle, bar_title = matrix, NEUTRAL[layer], f"{name}<br>(white: {NEUTRAL[layer]:g})"
    reach = float(np.nanmax(np.abs(shown - middle))) or 1e-6
    fig = make_subplots(
        rows=2, cols=2, shared_xaxes=True, shared_yaxes=True,
        column_widths=[0.86, 0.14], row_heights=[0.78, 0.22],
        horizontal_spacing=0.01, vertical_spacing=0.03,
    )
    fig.add_trace(
        go.Heatmap(
            z=shown, x=list(features), y=list(sites), hoverinfo="skip",
            zmid=middle, zmin=middle - reach, zmax=middle + reach,
            colorscale="RdGy" if layer.startswith("b") else "PuOr",
            colorbar=dict(title=dict(text=bar_title), len=0.75, y=0.6, x=1.02),
        ),
        row=1, col=1,
    )
    if notes is None:
        notes = np.array([[f"{layer} = {v:.3f}, z = {zz:+.2f}" for v, zz in zip(row, z_row)]
                          for row, z_row in zip(matrix, np.nan_to_num(z, nan=0.0))])
    # Heatmap cells cannot be clicked in Streamlit; an invisible point on every cell can (and
    # carries the hover text).
    fig.add_trace(
        go.Scatter(
            x=np.tile(features, len(sites)), y=np.repeat(sites, len(features)), mode="markers",
            marker=dict(size=28, symbol="square", opacity=0),
            customdata=np.asarray(notes, dtype=object).reshape(-1, 1),
            hovertemplate="%{customdata[0]}<extra>click to see the data</extra>",
        ),
        row=1, col=1,
    )
    for i, j in zip(*np.nonzero(cells)):
        fig.add_annotation(x=features[j], y=sites[i], text="<b>O</b>", showarrow=False,
                           font=dict(size=15, color="#111"), bgcolor="rgba(255,255,255,0.55)",
                           row=1, col=1)
    for j in np.flatnonzero(features_marked):
        fig.add_annotation(x=features[j], y=1.0, yref="y domain", yanchor="bottom", text="<b>x</b>",
                           showarrow=False, font=dict(size=15, color="#b00020"), row=1, col=1)
    fig.add_trace(go.Bar(x=site_deviation, y=list(sites), orientation="h",
                         marker_color="#6b7b8c", hovertemplate="%{y}: %{x:.3f}<extra>site deviation</extra>"),
                  row=1, col=2)
    fig.add_trace(go.Bar(x=list(features), y=feature_deviation, marker_color="#6b7b8c",
                         hovertemplate="%{x}: %{y:.3f}<extra>feature deviation</extra>"),
                  row=2, col=1)
    many = len(features) > 60
    angle = -45
    fig.update_xaxes(showticklabels=not many, tickangle=angle, row=2, col=1)
    fig.update_xaxes(title_text="site's total<br>deviation", title_font_size=11, row=1, col=2)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    # The feature bars' scale needs no title (the subtitle says what the bars are): a title there
    # ran into the first feature's slanted label.
    fig.update_yaxes(nticks=3, tickfont_size=10, row=2, col=1)
    fig.update_layout(
        showlegend=False, clickmode="event+select",
        title=dict(text=f"{LAYER_TITLES[layer]}<br><sup>{marks_meaning}<br>"
                        "grey bars: total |value − feature mean| of each site (right) and feature (below)</sup>",
                   x=0),
    )
    left, bottom = label_margins(sites, [] if many else features, angle)
    return _style(fig, height=max(440, 34 * len(sites) + 280) + bottom, top=110, left=left, bottom=bottom)


def feature_distribution(values: pd.DataFrame, site: str, feature: str, colors: dict[str, str],
                         axis_title: str | None = None) -> go.Figure:
    """The chosen site's values of a feature next to all other sites', per class.

    `values` has columns site, class, value (in the data's units where the run's record allows,
    else as the model sees them); `axis_title` says which."""
    frame = values.assign(group=np.where(values["site"] == site, site, "all other sites"))
    fig = px.histogram(
        frame, x="value", color="group", facet_col="class", histnorm="probability density",
        barmode="overlay", opacity=0.6, nbins=40,
        color_discrete_map={site: colors.get(site, "#d62728"), "all other sites": "#9aa5b1"},
        category_orders={"group": [site, "all other sites"]},
    )
    fig.update_layout(title=dict(text=plot_text(f"{feature}: {site} against all other sites"), x=0),
                      legend_title_text="")
    fig.for_each_annotation(lambda a: a.update(text=a.text.replace("class=", "outcome: ")))
    # One axis title under both outcomes' panels (each panel's own ran into the next one's), with
    # the axis titles' style.
    fig.update_xaxes(title_text=None)
    fig.add_annotation(text=plot_text(axis_title or f"{feature} (standardised: as the model sees it)"), name="x title",
                       x=0.5, xref="paper", y=0, yref="paper", yshift=-32, yanchor="top", showarrow=False,
                       font=dict(size=14, color="#5b6b7b"))
    return _style(fig, height=380, bottom=56)


def matrix_heatmap(matrix: np.ndarray, sites: Sequence[str], title: str, colorscale: str,
                   value_format: str = ".2f", colorbar_title: str = "", log_colour: bool = False) -> go.Figure:
    """An annotated sites x sites matrix (FedHealth2 distances or aggregation weights).

    `log_colour` colours by log10 of the value, so one far-off site does not wash out the rest;
    the numbers in the cells and the colour bar's labels stay in the original units."""
    matrix = np.asarray(matrix, dtype=float)
    text = [[format(v, value_format) for v in row] for row in matrix]
    colour, colorbar = matrix, dict(title=colorbar_title)
    if log_colour:
        positive = matrix[matrix > 0]
        floor = positive.min() if positive.size else 1.0
        colour = np.log10(np.maximum(matrix, floor))
        decades = 10.0 ** np.arange(np.floor(colour.min()), np.ceil(colour.max()) + 1)
        ticks = [t for t in np.outer(decades, [1, 2, 5]).ravel() if colour.min() <= np.log10(t) <= colour.max()]
        if len(ticks) < 2:  # a narrow range between two round numbers: label its ends and middle
            ticks = [float(f"{t:.2g}") for t in np.geomspace(10 ** colour.min(), 10 ** colour.max(), 3)]
        colorbar.update(tickvals=np.log10(ticks), ticktext=[f"{t:g}" for t in ticks])
    fig = go.Figure(go.Heatmap(
        z=colour, x=list(sites), y=list(sites), text=text, texttemplate="%{text}", customdata=matrix,
        colorscale=colorscale, colorbar=colorbar,
        hovertemplate="row %{y}<br>column %{x}<br>%{customdata:" + value_format + "}<extra></extra>",
    ))
    fig.update_yaxes(autorange="reversed", title_text="site (row)")
    fig.update_xaxes(tickangle=-35, title_text="site (column)")
    fig.update_layout(title=dict(text=title, x=0))
    left, bottom = label_margins(sites, sites, -35, row_title=True)
    return _style(fig, height=max(380, 40 * len(sites) + 160) + bottom, left=left, bottom=bottom + 22)


def _rounds_axis(fig: go.Figure, frame: pd.DataFrame) -> None:
    """Rounds are whole numbers: with few of them, tick exactly those (not 1.2, 1.4, ...)."""
    rounds = sorted(frame["round"].dropna().unique()) if "round" in frame else []
    if 0 < len(rounds) <= 12:
        fig.update_xaxes(tickvals=rounds, title_text="round")


def site_lines(frame: pd.DataFrame, y_title: str, title: str, colors: dict[str, str],
               stacked: bool = False) -> go.Figure:
    """Per-site values over rounds (columns round, site, value), lines or a stacked share."""
    draw = px.area if stacked else px.line
    fig = draw(frame, x="round", y="value", color="site", color_discrete_map=colors,
               category_orders={"site": list(colors)},
               **({} if stacked else {"markers": frame["round"].nunique() < 30}))
    fig.update_layout(title=dict(text=title, x=0), legend_title_text="site")
    fig.update_yaxes(title_text=y_title)
    _rounds_axis(fig, frame)
    return _style(fig, height=380)


def class_lines(frame: pd.DataFrame, y_title: str, title: str) -> go.Figure:
    """Per-class values over rounds (columns round, class, value)."""
    fig = px.line(frame, x="round", y="value", color="class", markers=frame["round"].nunique() < 30,
                  color_discrete_sequence=CLASS_COLOURS)
    fig.update_layout(title=dict(text=title, x=0), legend_title_text="class")
    fig.update_yaxes(title_text=y_title)
    _rounds_axis(fig, frame)
    return _style(fig, height=340)


def learning_curves(frame: pd.DataFrame, metric: str, title: str,
                    colors: Mapping[str, str] | None = None) -> go.Figure:
    """Mean and worst site over rounds; `frame` has round, run, statistic, value; `colors`: run ->
    its colour (`run_colors`), so a run looks the same in every chart."""
    fig = px.line(frame, x="round", y="value", color="run", line_dash="statistic",
                  markers=frame["round"].nunique() < 30,
                  line_dash_map={"mean": "solid", "worst": "dot"}, color_discrete_map=dict(colors or {}),
                  color_discrete_sequence=RUN_PALETTE, category_orders={"run": list(colors)} if colors else {})
    fig.update_yaxes(title_text=METRIC_LABELS[metric])
    fig.update_layout(title=dict(text=title, x=0), legend_title_text="")
    _rounds_axis(fig, frame)
    return _style(fig, height=400)


def site_curves(frame: pd.DataFrame, metric: str, colors: dict[str, str]) -> go.Figure:
    """Each site's score over rounds; `frame` is records.site_metrics(run)."""
    # markers while there are few points: a run with one evaluated round has no line to draw
    fig = px.line(frame, x="round", y=metric, color="site", color_discrete_map=colors,
                  category_orders={"site": list(colors)}, markers=frame["round"].nunique() < 30)
    fig.update_yaxes(title_text=METRIC_LABELS[metric])
    fig.update_layout(title=dict(text=f"{METRIC_LABELS[metric]} of each site on its own hold-out", x=0),
                      legend_title_text="site")
    _rounds_axis(fig, frame)
    return _style(fig, height=380)


def per_site_spread(frame: pd.DataFrame, metric: str, style: str, colors: dict[str, str]) -> go.Figure:
    """Distribution of per-site scores per run (strip or violin, as in the iFedAvg appendix);
    `frame` has run, site, and the metric."""
    if style == "violin":
        fig = px.violin(frame, x="run", y=metric, points="all", box=True, hover_data=["site"],
                        color_discrete_sequence=["#44546a"])
        fig.update_traces(marker=dict(size=7), line_color="#44546a", fillcolor="rgba(68,84,106,0.15)")
    else:
        fig = px.strip(frame, x="run", y=metric, color="site", color_discrete_map=colors,
                       category_orders={"site": list(colors)}, hover_data=["site"])
        fig.update_traces(marker=dict(size=10, line=dict(width=1, color="white")))
        means = frame.groupby("run", sort=False)[metric].mean()
        fig.add_trace(go.Scatter(x=list(means.index), y=means.values, mode="markers", name="mean",
                                 marker=dict(symbol="line-ew-open", size=40, color="black", line=dict(width=3))))
    fig.update_yaxes(title_text=METRIC_LABELS[metric])
    fig.update_xaxes(title_text="")
    fig.update_layout(title=dict(text=f"{METRIC_LABELS[metric]} per site (each dot is one site)", x=0))
    return _style(fig, height=440)


def missing_heatmap(share: pd.DataFrame) -> go.Figure:
    """Share of missing values, columns (rows of `share`) x sites, 0 white to 1 dark orange."""
    fig = go.Figure(go.Heatmap(
        z=share.values, x=list(share.columns), y=list(share.index), zmin=0, zmax=1,
        colorscale=[[0, "white"], [1, "#d94801"]],
        text=[[f"{v:.0%}" if v > 0 else "" for v in row] for row in share.values], texttemplate="%{text}",
        hovertemplate="%{y} at %{x}: %{z:.1%} missing<extra></extra>",
        # title beside the bar: on top it ran into the '100%' label
        colorbar=dict(title=dict(text="share missing", side="right"), tickformat=".0%"),
    ))
    fig.update_yaxes(autorange="reversed", title_text="feature")
    fig.update_xaxes(title_text="site", tickangle=-35)
    left, bottom = label_margins(list(share.index), list(share.columns), -35, row_title=True)
    return _style(fig, height=max(240, 28 * len(share) + 120) + bottom, top=20, left=left, bottom=bottom + 22)
