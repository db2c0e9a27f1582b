"""A self-contained HTML report of one run: settings, scores and its lens, openable offline."""

from __future__ import annotations

import base64
import html
import io
import json

import plotly.graph_objects as go
from PIL import Image

from dashboard import figures, lenses, prototypes
from dashboard.records import final_site_metrics, per_site_series, site_metrics
from fedcore.shapes import RunDamaged
from fedcore.store import Run

STYLE = """
body { font-family: Inter, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2rem auto; max-width: 1200px;
       color: #1d2733; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #dde3ea; }
table { border-collapse: collapse; font-size: 0.9rem; } td, th { padding: 4px 10px; border-bottom: 1px solid #eef1f4; }
th { text-align: left; background: #f5f7fa; } .note { color: #5b6b7b; font-size: 0.9rem; }
pre { background: #f5f7fa; padding: 1rem; overflow-x: auto; }
"""


def html_report(run: Run) -> str:
    spec, status, federation = run.spec, run.status, run.federation
    sections = [
        f"<h1>Run {html.escape(run.id)}</h1>",
        f"<p>{html.escape(str(spec.get('algorithm')))} on {html.escape(json.dumps(spec.get('data')))} · "
        f"state <b>{html.escape(str(status.get('state')))}</b> · round {status.get('round')} of "
        f"{status.get('total_rounds')} · code {html.escape(str(spec.get('version')))}</p>",
    ]
    if federation.get("synthetic"):
        sections.append(f"<p class='note'>{html.escape(federation.get('description', ''))}</p>")
    sections.append("<h2>Scores at the last evaluated round (each site on its own hold-out)</h2>")
    sections.append(final_site_metrics(run).to_html(index=False, float_format="%.3f", na_rep="–"))
    colors = figures.site_colors([s["name"] for s in federation.get("sites", [])])
    plots: list[go.Figure] = []
    metrics = site_metrics(run)
    if not metrics.empty:
        plots.append(figures.site_curves(metrics, "f1", colors))
    sections.append(_figures_html(plots, first=True))
    damage = run.damage
    try:
        if damage:
            raise RunDamaged(damage)
        sections.extend(_lens_sections(run, colors))
    except RunDamaged as error:
        sections.append("<h2>Damaged records</h2><p class='note'>The lens cannot be drawn: "
                        + "; ".join(html.escape(str(d)) for d in error.damage) + "</p>")
    sections.append("<h2>Settings</h2><pre>" + html.escape(json.dumps(
        {k: spec.get(k) for k in ("algorithm", "data", "params", "config")}, indent=2)) + "</pre>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Run {html.escape(run.id)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(sections)}</body></html>")


def _lens_sections(run: Run, colors: dict[str, str]) -> list[str]:
    rounds = run.array_rounds()
    algorithm = run.spec.get("algorithm")
    if not rounds:
        return []
    last = rounds[-1]
    if algorithm == "ifedavg":
        arrays = run.load_arrays(last)
        params = run.spec["params"]
        views = [lenses.shift_view(run, last, layer, n_sd=params["n_sd"], sd_floor=params["sd_floor"],
                                   rule=params.get("rule", "sd"))
                 for layer in lenses.layers(arrays)]
        out = [f"<h2>Feature shifts at round {last}</h2>", _figures_html([v.figure for v in views])]
        detection = lenses.detection_table(run, last, params["n_sd"], params["sd_floor"], params.get("rule", "sd"))
        if detection is not None:
            out += ["<h2>Injected problems and the marks</h2>", detection[0].to_html(index=False)]
        return out
    if algorithm == "fedhealth2":
        view = lenses.similarity_view(run, last)
        if view is None:
            return []
        return [f"<h2>Site similarity (λ = {view.lam:g})</h2>", _figures_html([view.distance, view.weights]),
                view.nearest.to_html(index=False)]
    if algorithm == "adafed":
        view = lenses.weights_view(run)
        flagged = view.near_zero.to_html(index=False, float_format="%.3f") if len(view.near_zero) else "<p>none</p>"
        return ["<h2>Site weights</h2><p>Sites near zero weight (below a quarter of an equal share):</p>", flagged,
                _figures_html([figures.site_lines(view.shares, "share", "Each site's share of the server model", colors),
                               figures.class_lines(view.kappa, "κ", "Class weights κ_c")])]
    if algorithm in prototypes.ALGORITHMS:
        return _prototype_sections(run)
    if algorithm == "apfl":
        alpha = per_site_series(run, "alpha")
        return ["<h2>APFL mixing weight α per site</h2>",
                _figures_html([figures.site_lines(alpha, "α", "Weight of the personal model", colors)])]
    return []


IMAGES_PER_SITE = 6


def _prototype_sections(run: Run) -> list[str]:
    """inDISCO: the run's own local and global prototypes on each site's hold-out images, and,
    with a stamp, how far each site's boxes land on it."""
    sides = [side for side in (prototypes.load_side(run, "local"), prototypes.load_side(run, "global")) if side]
    if not sides:
        return []
    sites = [s["name"] for s in run.federation["sites"]]
    classes = run.federation["class_names"]
    arrays = sides[0].arrays
    legend = " and ".join(f"{side.title} ({prototypes.COLOUR_NAMES[side.role]})" for side in sides)
    out = [f"<h2>Prototypes at round {sides[0].record['round']}</h2>",
           f"<p class='note'>Boxes: where the prototype a hold-out image activates most looks — {html.escape(legend)}."
           + (" The stamp's place is outlined in pink.</p>" if "stamp_box" in arrays else "</p>")]
    if "stamp_box" in arrays:
        table = prototypes.overlap_table(sides, sites)
        out += [_figures_html([prototypes.overlap_figure(table, sides)]), table.to_html(index=False, float_format="%.2f")]
    for i, site in enumerate(sites):
        rows = [int(r) for r in arrays["test_rows"][i] if r >= 0][:IMAGES_PER_SITE]
        panels = [prototypes.holdout_panel(sides, i, row, classes) for row in rows]
        stamped = " (stamped)" if "stamped_site" in arrays and arrays["stamped_site"][i] else ""
        out.append(f"<h3>{html.escape(site + stamped)}</h3><div>" + "".join(
            f"<figure style='display:inline-block;margin:4px'>{_png(picture)}"
            f"<figcaption class='note'>{html.escape(caption)}</figcaption></figure>" for picture, caption in panels)
            + "</div>")
    return out


def _png(picture: Image.Image) -> str:
    """An image inline, as a data URI (the report stays one offline file)."""
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return f"<img alt='' src='data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}'>"


def _figures_html(plots: list[go.Figure], first: bool = False) -> str:
    """Figures as HTML; the first figure of the report carries plotly.js inline (no network)."""
    return "".join(
        fig.to_html(full_html=False, include_plotlyjs="inline" if first and i == 0 else False)
        for i, fig in enumerate(plots)
    )
