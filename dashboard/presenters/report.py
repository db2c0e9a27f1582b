"""Self-contained HTML reports, openable offline: of one run (settings, scores, its lens, the
check-up it feeds) and of a check-up."""

from __future__ import annotations

import html

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from dashboard.presenters import figures
from dashboard.presenters.checkup_view import checkup_sections, html_sections, run_names
from dashboard.presenters.record_tables import (METRIC_LABELS, algorithm_detail, final_site_metrics, progress, round_text, run_name,
                               settings_json, site_metrics)
from dashboard.presenters.registry import lens_of
from dashboard.presenters.report_sections import figures_html
from fedcore.checkup import Plan
from fedcore.data_labels import data_label
from fedcore.shapes import RunDamaged
from fedcore.store import Run, RunStore

STYLE = """
body { font-family: Inter, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2rem auto; max-width: 1200px;
       color: #1d2733; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #dde3ea; }
table { border-collapse: collapse; font-size: 0.9rem; } td, th { padding: 4px 10px; border-bottom: 1px solid #eef1f4; }
th { text-align: left; background: #f5f7fa; } .note { color: #5b6b7b; font-size: 0.9rem; }
pre { background: #f5f7fa; padding: 1rem; overflow-x: auto; }
@page { size: A4 landscape; margin: 10mm; }
@media print {
  body { margin: 0; max-width: none; font-size: 11pt; }
  h1, h2, h3 { break-after: avoid; }
  .figure, figure, tr, li { break-inside: avoid; }  /* a page break goes before a figure (a finding), not through it */
  .modebar-container { display: none; }
  details { display: block; }
}
"""
# Printed (Chromium's "Save as PDF", `page.pdf()`), each figure is drawn again at a width that fits
# a landscape A4 or Letter page inside the margins above (the grid's five lenses and the sites' names
# need the width of a screen, not of a portrait page): plotly sized it for the screen, and a wider
# figure was cut at the page's edge. `relayout` draws at once (a resize would wait for a timer, and
# the page would be printed before it fired); afterwards the figure fills the screen's width again.
PRINT_WIDTH_PX = 960
PRINT_SCRIPT = """<script>
(function () {
  const plots = () => Array.from(document.querySelectorAll('.js-plotly-plot'));
  window.addEventListener('beforeprint', () => plots().forEach(p => Plotly.relayout(p, {width: %d})));
  window.addEventListener('afterprint', () => plots().forEach(p => Plotly.relayout(p, {width: null, autosize: true})));
})();
</script>""" % PRINT_WIDTH_PX


def html_report(run: Run, rows: bool = False) -> str:
    """The run as one offline HTML file; `rows`: its reader may see a site's rows (inDISCO's site
    images), otherwise they are left out."""
    spec, status, federation = run.spec, run.status, run.federation
    tags = run.identity.tags
    sections = [
        f"<h1>{html.escape(run_name(run))}</h1>",
        f"<p>{html.escape(algorithm_detail(spec))} on {html.escape(data_label(spec.data))} · "
        f"state <b>{html.escape(str(status.state))}</b> · {html.escape(round_text(progress(run)))} · "
        f"run {html.escape(run.id)} · code {html.escape(str(spec.version))}"
        + (f" · tags: {html.escape(', '.join(tags))}" if tags else "") + "</p>",
    ]
    if federation.synthetic:
        sections.append(f"<p class='note'>{html.escape(federation.description)}</p>")
    sections.append("<h2>Scores at the last evaluated round (each site on its own hold-out)</h2>")
    scores = final_site_metrics(run).rename(columns=METRIC_LABELS)
    sections.append(scores.to_html(index=False, float_format="%.3f", na_rep="–"))
    colors = figures.site_colors(federation.site_names)
    plots: list[go.Figure] = []
    metrics = site_metrics(run)
    if not metrics.empty:
        plots.append(figures.site_curves(metrics, "f1", colors))
    sections.append(figures_html(plots))
    damage = run.damage
    lens = lens_of(run)
    try:
        if damage:
            raise RunDamaged(damage)
        if lens is not None:
            sections.extend(lens.report(run, colors, rows))
    except RunDamaged as error:
        sections.append("<h2>Damaged records</h2><p class='note'>The lens cannot be drawn: "
                        + "; ".join(html.escape(str(d)) for d in error.damage) + "</p>")
    sections.extend(checkup_sections(run))
    sections.append("<h2>Settings</h2><pre>" + html.escape(settings_json(spec)) + "</pre>")
    return document(run_name(run), sections)


def document(title: str, sections: list[str]) -> str:
    """A self-contained HTML page of the report's style around `sections`; plotly.js once, inline
    (the report opens offline), and only where there is a figure to draw."""
    body = "".join(sections)
    script = (f"<script type='text/javascript'>{get_plotlyjs()}</script>{PRINT_SCRIPT}" if "Plotly.newPlot" in body
              else "")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style>{script}</head><body>{body}</body></html>")


def checkup_report(plan: Plan, store: RunStore) -> str:
    """A check-up's findings, grid and evidence (`dashboard.presenters.checkup_view`)."""
    result = plan.evaluate(store)
    sections = html_sections(result, plan.kind, plan.profile, figures.site_colors(result.sites), run_names(plan, store),
                             level=1)
    if result.pending:
        sections.insert(1, "<p class='note'>Still training when this report was made: "
                           f"{html.escape(', '.join(result.pending))}.</p>")
    return document(f"Check-up {plan.id}", sections)
