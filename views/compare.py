"""Compare: several algorithms on the same federation, side by side."""

import json

import pandas as pd
import streamlit as st

from dashboard.auth import require
from dashboard.common import download_csv, get_store, run_colors
from dashboard.figures import learning_curves, per_site_spread
from dashboard.records import METRIC_LABELS, run_label, site_metrics, summary_metrics
from dashboard.registry import TRAIN

require("view")
st.title("Compare algorithms")
st.markdown("Every site is scored on its own hold-out; a federation is only as good as its worst site, "
            "so the table shows both the mean and the worst site.")

runs = [r for r in get_store().runs() if not r.damage and r.rounds()]
if not runs:
    st.info("No run has results yet.")
    st.page_link(TRAIN.path, label="Train several algorithms on the same data", icon=":material/play_arrow:")
    st.stop()

by_data: dict[str, list] = {}
for run in runs:
    by_data.setdefault(json.dumps(run.spec.get("data"), sort_keys=True), []).append(run)
data_key = st.selectbox("Data", list(by_data), format_func=lambda k: f"{json.loads(k)} ({len(by_data[k])} runs)")
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
short = {r.id: run_label(r).rsplit(" · ", 3)[0] + (f" · seed {r.spec['config']['seed']}"
         if len({c.spec["config"]["seed"] for c in chosen}) > 1 else "") for r in chosen}
if len(set(short.values())) < len(short):  # the same settings twice: tell them apart by id
    short = {r.id: f"{short[r.id]} · {r.id[9:15]}" for r in chosen}

metric = st.radio("Metric", ["f1", "roc_auc", "balanced_accuracy"], format_func=METRIC_LABELS.get, horizontal=True)

rows = []
for run in chosen:
    last = run.rounds()[-1]
    row = {"run": short[run.id], "state": run.status.get("state"), "round": last["round"]}
    for m in ("f1", "roc_auc", "balanced_accuracy"):
        row[f"mean {METRIC_LABELS[m]}"] = last["mean"].get(m)
        row[f"worst site {METRIC_LABELS[m]}"] = last["worst"].get(m)
    row["worst site (F1)"] = last.get("worst_site", {}).get("f1")
    rows.append(row)
table = pd.DataFrame(rows)
numeric = [c for c in table if c.startswith(("mean", "worst site ")) and c != "worst site (F1)"]
st.dataframe(table.style.highlight_max(subset=numeric, color="#d5ecd4").format("{:.3f}", subset=numeric, na_rep="–"),
             hide_index=True, width="stretch")
download_csv(table, "compare-table", "Download the table (CSV)")

final = pd.concat([
    site_metrics(run).query("round == round.max()").assign(run=short[run.id]) for run in chosen
], ignore_index=True)
style = st.radio("Per-site distribution", ["strip", "violin"], horizontal=True)
st.plotly_chart(per_site_spread(final, metric, style, run_colors(chosen[0])), width="stretch", key="spread")
download_csv(final, "compare-per-site", "Download per-site scores (CSV)")

shown = st.radio("Curves", ["mean and worst site", "mean", "worst site"], horizontal=True)
statistics = {"mean and worst site": ["mean", "worst"], "mean": ["mean"], "worst site": ["worst"]}[shown]
curves = pd.concat([
    summary_metrics(run).query("metric == @metric and statistic in @statistics").assign(run=short[run.id])
    for run in chosen
], ignore_index=True)
st.plotly_chart(learning_curves(curves, metric, f"Learning curves: mean (solid) and worst site (dotted) "
                                f"{METRIC_LABELS[metric]}"), width="stretch", key="curves")
download_csv(curves, "compare-curves", "Download the learning curves (CSV)")
