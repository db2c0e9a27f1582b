"""Compare: several algorithms on the same federation, side by side."""

import json

import pandas as pd
import streamlit as st

from dashboard.auth import require
from dashboard.common import TABLE_ROW_PX, download_csv, get_store, page_link, run_colors, site_colors_of
from dashboard.figures import learning_curves, per_site_spread
from dashboard.records import (METRIC_LABELS, distinct_names, run_label, settings_table, site_metrics,
                               summary_metrics)
from dashboard.registry import TRAIN
from fedcore.data_labels import data_label

require("view")
st.title("Compare algorithms")
st.markdown("Every site is scored on its own hold-out; a federation is only as good as its worst site, "
            "so the table shows both the mean and the worst site.")

runs = [r for r in get_store().runs() if not r.damage and r.rounds()]
if not runs:
    st.info("No run has results yet.")
    page_link(TRAIN, "Train several algorithms on the same data", icon=":material/play_arrow:")
    st.stop()

by_data: dict[str, list] = {}
for run in runs:
    by_data.setdefault(json.dumps(run.spec.get("data"), sort_keys=True), []).append(run)
data_key = st.selectbox("Data", list(by_data),
                        format_func=lambda k: f"{data_label(json.loads(k))} ({len(by_data[k])} runs)")
candidates = by_data[data_key]
labels = {r.id: run_label(r) for r in candidates}
# By default the newest run of each distinct setting (runs are listed newest first), at most six.
newest: dict[str, str] = {}
for run in candidates:
    newest.setdefault(json.dumps([run.spec.get("algorithm"), run.spec.get("params")], sort_keys=True), run.id)
chosen_ids = st.multiselect("Runs", list(labels), default=list(newest.values())[:6], format_func=labels.get)
chosen = [r for r in candidates if r.id in chosen_ids]
if not chosen:
    st.stop()
names = dict(zip((r.id for r in chosen), distinct_names(chosen)))
colours = {names[run_id]: colour for run_id, colour in run_colors(chosen).items()}  # one per run, on every chart

metric = st.radio("Metric", ["f1", "roc_auc", "balanced_accuracy"], format_func=METRIC_LABELS.get, horizontal=True)

rows = []
for run in chosen:
    last = run.rounds()[-1]
    row = {"run": names[run.id], "state": run.status.get("state"), "round": last.get("round")}
    for m in ("f1", "roc_auc", "balanced_accuracy"):
        row[f"mean {METRIC_LABELS[m]}"] = (last.get("mean") or {}).get(m)
        row[f"worst site {METRIC_LABELS[m]}"] = (last.get("worst") or {}).get(m)
        row[f"worst site for {METRIC_LABELS[m]}"] = (last.get("worst_site") or {}).get(m)
    rows.append(row)
table = pd.DataFrame(rows)
# On screen the chosen metric (mean, worst site, and which site that is), so that no column is cut;
# the download holds all three metrics.
shown = ["run", "state", "round", f"mean {METRIC_LABELS[metric]}", f"worst site {METRIC_LABELS[metric]}",
         f"worst site for {METRIC_LABELS[metric]}"]
numeric = shown[3:5]
st.dataframe(table[shown].style.highlight_max(subset=numeric, color="#d5ecd4").format("{:.3f}", subset=numeric,
                                                                                      na_rep="–"),
             hide_index=True, width="stretch", height=TABLE_ROW_PX * (len(table) + 1) + 3,
             column_config={shown[-1]: st.column_config.TextColumn("worst site (which)", width="medium")})
download_csv(table, "compare-table", "Download the table, all three metrics (CSV)")

differing = settings_table(chosen)
with st.expander(f"What differs between these runs ({len(differing)} settings)", expanded=0 < len(differing) <= 8):
    if differing.empty:
        st.caption("These runs have the same settings: they differ only by chance (or were re-run).")
    else:
        st.dataframe(differing, hide_index=True, width="stretch")

final = pd.concat([
    site_metrics(run).query("round == round.max()").assign(run=names[run.id]) for run in chosen
], ignore_index=True)
style = st.radio("Per-site distribution", ["strip", "violin"], horizontal=True)
st.plotly_chart(per_site_spread(final, metric, style, site_colors_of(chosen[0])), width="stretch", key="spread")
download_csv(final, "compare-per-site", "Download per-site scores (CSV)")

curves_shown = st.radio("Curves", ["mean and worst site", "mean", "worst site"], horizontal=True)
statistics = {"mean and worst site": ["mean", "worst"], "mean": ["mean"], "worst site": ["worst"]}[curves_shown]
curves = pd.concat([
    summary_metrics(run).query("metric == @metric and statistic in @statistics").assign(run=names[run.id])
    for run in chosen
], ignore_index=True)
st.plotly_chart(learning_curves(curves, metric, f"Learning curves: mean (solid) and worst site (dotted) "
                                f"{METRIC_LABELS[metric]}", colours), width="stretch", key="curves")
download_csv(curves, "compare-curves", "Download the learning curves (CSV)")
