"""Compare: several algorithms on the same federation, side by side."""

import json

import pandas as pd
import streamlit as st

from dashboard.access.auth import require
from dashboard.widgets.common import (STATE_LABELS, TABLE_ROW_PX, download_csv, get_store, page_link, run_colors,
                              site_colors_of)
from dashboard.presenters.figures import learning_curves, per_site_spread
from dashboard.presenters.record_tables import (METRIC_LABELS, distinct_names, run_label, settings_table, site_metrics,
                               summary_metrics)
from dashboard.presenters.registry import TRAIN
from fedcore.data_labels import data_label
from fedcore.glossary import term

require("view")
st.title("Compare algorithms")
st.markdown(f"Every site is scored on its own {term('hold-out')}; a federation is only as good as its worst "
            "site, so the table shows both the mean and the worst site.")

def finished(run) -> bool:
    return run.status.state == "done"


runs = [r for r in get_store().runs() if not r.damage and r.rounds()]
if not runs:
    st.info("No run has results yet.")
    page_link(TRAIN, "Train several algorithms on the same data", icon=":material/play_arrow:")
    st.stop()

by_data: dict[str, list] = {}
for run in runs:
    by_data.setdefault(json.dumps(run.spec.data, sort_keys=True), []).append(run)
data_key = st.selectbox("Data", list(by_data),
                        format_func=lambda k: f"{data_label(json.loads(k))} ({len(by_data[k])} runs)")
candidates = by_data[data_key]
# A run that did not finish (cancelled, failed, still training) is listed with its state, and chosen
# only by hand: its last round is no result to rank (a cancelled 20 000-round run was 'best' here).
labels = {r.id: run_label(r) + ("" if finished(r) else f" ({STATE_LABELS.get(r.status.state, r.state)})")
          for r in candidates}
# By default the newest finished run of each distinct setting (runs are listed newest first), at most six.
newest: dict[str, str] = {}
for run in filter(finished, candidates):
    newest.setdefault(json.dumps([run.spec.algorithm, run.spec.params], sort_keys=True), run.id)
if not newest:
    st.info("No run on this data has finished yet: choose runs below to compare what they recorded so far.")
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
    row = {"run": names[run.id], "state": run.status.state, "round": last.round}
    for m in ("f1", "roc_auc", "balanced_accuracy"):
        row[f"mean {METRIC_LABELS[m]}"] = last.mean.get(m)
        row[f"worst site {METRIC_LABELS[m]}"] = last.worst.get(m)
        row[f"worst site for {METRIC_LABELS[m]}"] = last.worst_site.get(m)
    rows.append(row)
table = pd.DataFrame(rows)
# On screen the chosen metric (mean, worst site, and which site that is), so that no column is cut;
# the download holds all three metrics.
shown = ["run", "state", "round", f"mean {METRIC_LABELS[metric]}", f"worst site {METRIC_LABELS[metric]}",
         f"worst site for {METRIC_LABELS[metric]}"]
numeric = shown[3:5]
done = [finished(run) for run in chosen]


def best_finished(column: pd.Series) -> list[str]:
    """Green for the best finished run of a column: a run that stopped early is no contender."""
    values = column.where(done)
    return ["background-color: #d5ecd4" if done[i] and value == values.max() else ""
            for i, value in enumerate(column)]


if not all(done):
    st.caption("Green marks the best finished run; runs that did not finish are shown as far as they got.")
st.dataframe(table[shown].style.apply(best_finished, subset=numeric).format("{:.3f}", subset=numeric, na_rep="–"),
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
