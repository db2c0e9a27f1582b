"""The HTML report's section for each lens (the registry, `dashboard.presenters.registry`, says which is whose):
each takes the run and its sites' colours and gives HTML, with the last evaluated round's figures
inline (plotly.js travels once, in the document's head: `report.document`)."""

from __future__ import annotations

import base64
import html
import io
import re

import plotly.graph_objects as go
from PIL import Image

from dashboard.presenters import figures, lenses, prototype_images as prototype_views
from dashboard.presenters.record_tables import per_site_series
from fedcore.records import Mixture
from fedcore.store import Run

IMAGES_PER_SITE = 6


def feature_shifts(run: Run, colors: dict[str, str], rows: bool = False) -> list[str]:
    rounds = run.array_rounds()
    if not rounds:
        return []
    last = rounds[-1]
    arrays = run.load_arrays(last)
    marking = lenses.marking(run)
    n_sd, sd_floor, rule = marking.n_sd, marking.sd_floor, marking.rule
    views = [lenses.shift_view(run, last, layer, n_sd=n_sd, sd_floor=sd_floor, rule=rule)
             for layer in lenses.layers(arrays)]
    out = [f"<h2>Feature shifts at round {last}</h2>", f"<p class='note'>{markdown_html(lenses.LAYER_GUIDE)} "
           "Hover over a cell for the correction in the feature's own units.</p>",
           figures_html([v.figure for v in views])]
    detection = lenses.detection_table(run, last, n_sd, sd_floor, rule)
    if detection is not None:
        out += ["<h2>Injected problems and the marks</h2>", detection[0].to_html(index=False)]
    return out


def site_similarity(run: Run, colors: dict[str, str], rows: bool = False) -> list[str]:
    rounds = run.array_rounds()
    view = lenses.similarity_view(run, rounds[-1]) if rounds else None
    if view is None:
        return []
    return [f"<h2>Site similarity (λ = {view.lam:g})</h2>", figures_html([view.distance, view.weights]),
            view.nearest.to_html(index=False)]


def site_weights(run: Run, colors: dict[str, str], rows: bool = False) -> list[str]:
    view = lenses.weights_view(run)
    if view.shares.empty:
        return []
    flagged = view.near_zero.to_html(index=False, float_format="%.3f") if len(view.near_zero) else "<p>none</p>"
    return ["<h2>Site weights</h2><p>Sites near zero weight (below a quarter of an equal share):</p>", flagged,
            figures_html([figures.site_lines(view.shares, "share", "Each site's share of the server model", colors),
                          figures.class_lines(view.kappa, "κ", "Class weights κ_c")])]


def mixture(run: Run, colors: dict[str, str], rows: bool = False) -> list[str]:
    alpha = per_site_series(run, Mixture, lambda record: record.alpha)
    if alpha.empty:
        return []
    return ["<h2>APFL mixing weight α per site</h2>",
            figures_html([figures.site_lines(alpha, "α", "Weight of the personal model", colors)])]


def prototypes(run: Run, colors: dict[str, str], rows: bool = False) -> list[str]:
    """inDISCO: the run's own local and global prototypes on each site's hold-out images (`rows`:
    the reader may see a site's rows, its images; otherwise the report says why they are left
    out), and, with a stamp, how far each site's boxes land on it."""
    sides = [side for side in (prototype_views.load_side(run, "local"), prototype_views.load_side(run, "global")) if side]
    if not sides:
        return []
    sites, classes = run.federation.site_names, run.federation.class_names
    arrays = sides[0].arrays
    legend = " and ".join(f"{side.title} ({prototype_views.COLOUR_NAMES[side.role]})" for side in sides)
    out = [f"<h2>Prototypes at round {sides[0].round}</h2>",
           f"<p class='note'>Boxes: where the prototype a hold-out image activates most looks — {html.escape(legend)}."
           + (" The stamp's place is outlined in pink.</p>" if "stamp_box" in arrays else "</p>")]
    if "stamp_box" in arrays:
        table = prototype_views.overlap_table(sides, sites)
        out += [figures_html([prototype_views.overlap_figure(table, sides)]), table.to_html(index=False, float_format="%.2f")]
    if not rows:
        return out + ["<p class='note'>Each site's images are its rows: this report leaves them out (they are "
                      "shown only to roles this deployment allows to see rows).</p>"]
    for i, site in enumerate(sites):
        shown = [int(r) for r in arrays["test_rows"][i] if r >= 0][:IMAGES_PER_SITE]
        panels = [prototype_views.holdout_panel(sides, i, row, classes) for row in shown]
        stamped = " (stamped)" if "stamped_site" in arrays and arrays["stamped_site"][i] else ""
        out.append(f"<h3>{html.escape(site + stamped)}</h3><div>" + "".join(
            f"<figure style='display:inline-block;margin:4px'>{png(picture)}"
            f"<figcaption class='note'>{html.escape(caption)}</figcaption></figure>" for picture, caption in panels)
            + "</div>")
    return out


def png(picture: Image.Image) -> str:
    """An image inline, as a data URI (the report stays one offline file)."""
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return f"<img alt='' src='data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}'>"


# A report's figures carry plotly's own template. Inside the dashboard's server the default template
# is Streamlit's, made for its front end: its colours are placeholders the front end replaces
# (#000001: in a file every bar was black) and its axes make no room for their labels (the grid's
# site names were cut off). A figure's own colours and margins still win over the template.
REPORT_TEMPLATE = "plotly_white"


def figures_html(plots: list[go.Figure]) -> str:
    """Figures as HTML, without plotly.js (the report carries it once, inline: no network), each
    in the report's template whatever plotly's default is where the report is made."""
    return "".join("<div class='figure'>" + go.Figure(fig).update_layout(template=REPORT_TEMPLATE).to_html(
        full_html=False, include_plotlyjs=False, config={"displaylogo": False}) + "</div>" for fig in plots)


def markdown_html(text: str) -> str:
    """The little Markdown the lenses' guides use (**bold**, *italic*) as HTML, the rest escaped."""
    escaped = html.escape(text)
    return re.sub(r"\*(.+?)\*", r"<i>\1</i>", re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", escaped))
