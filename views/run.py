"""Run details: settings, progress, per-site scores over rounds, errors, and exports."""

import json

import streamlit as st

from dashboard.access.auth import allowed, can_see_rows, require
from dashboard.widgets.common import (STATE_LABELS, cancel_with_confirmation, download_csv, get_store, identity_editor,
                              is_active, live, page_link, pick_run_or_explain, site_colors_of, spec_summary)
from dashboard.presenters.registry import CHECKUP, RUN_DETAILS, TRAIN, page_of
from dashboard.widgets.data_roots import rerun
from dashboard.presenters.figures import site_curves, site_lines
from dashboard.presenters.record_tables import (METRIC_LABELS, algorithm_detail, final_site_metrics, per_site_series, run_label,
                               run_name, settings_table, site_metrics)
from dashboard.presenters.report import html_report
from dashboard.presenters.safe_text import md
from application import jobs
from fedcore.data_labels import data_label
from fedcore.errors import FedcoreError
from fedcore.records import Mixture

require("view")
st.title("Run details")
run = pick_run_or_explain(None, TRAIN, "Train something")


st.caption(md(f"{run_name(run)} · {algorithm_detail(run.spec)} on {data_label(run.spec.data)}"
              + (f" · tags: {', '.join(run.identity.tags)}" if run.identity.tags else "")))
if allowed("train"):  # a name and tags change the store: who may train may name
    with st.expander("Name and tags"):
        identity_editor(run, key=f"details-identity-{run.id}")


@live(run)
def details() -> None:
    status = run.status
    page = page_of(run)
    # one row that wraps as the page narrows (four fixed columns cut the labels short at 1280 px)
    actions = st.container(horizontal=True)
    if page != RUN_DETAILS:
        page_link(page, f"Open {page.title}", into=actions, query_params={"run": run.id})
    if allowed("train") and actions.button("Re-run with the same settings"):
        try:
            again = rerun(get_store(), run)
        except FedcoreError as error:
            st.error(md(error))
        else:
            st.toast(md(f"Queued {run_name(again)}"))
    if is_active(run) and allowed("cancel"):
        cancel_with_confirmation(actions, run, "cancel-run")
    if allowed("train") and status.state == "done":
        page_link(CHECKUP, "Check up this run's federation", into=actions, query_params={"run": run.id},
                  icon=CHECKUP.icon)
    if status.state in ("failed", "interrupted"):  # the log has what a full disk kept from status.json
        log = jobs.log_tail(run)
        if log:
            with st.expander("Worker output (last lines)"):
                st.code(log)
    st.subheader("Scores at the last evaluated round")
    final = final_site_metrics(run).rename(columns=METRIC_LABELS)  # the scores' names, not their keys
    st.dataframe(final.style.format("{:.3f}", subset=final.columns[1:], na_rep="–"), hide_index=True,
                 width="stretch")
    metrics = site_metrics(run)
    if not metrics.empty:
        metric = st.radio("Metric", list(METRIC_LABELS), format_func=METRIC_LABELS.get, horizontal=True)
        st.plotly_chart(site_curves(metrics, metric, site_colors_of(run)), width="stretch", key="curves")
        download_csv(metrics, f"{run.id}-site-metrics", "Download every round's per-site scores (CSV)")
    alpha = per_site_series(run, Mixture, lambda record: record.alpha)
    if not alpha.empty:
        st.plotly_chart(site_lines(alpha, "α", "APFL: weight of each site's personal model", site_colors_of(run)),
                        width="stretch", key="alpha")
        download_csv(alpha.rename(columns={"value": "alpha"}), f"{run.id}-apfl-alpha",
                     "Download every round's α per site (CSV)")
    warnings = run.federation.warnings
    for warning in warnings:
        st.warning(md(warning))
    with st.expander("Settings (the complete specification)"):
        st.code(spec_summary(run), language="json")
        others = [r for r in get_store().runs() if r.id != run.id]
        if others:
            other = st.selectbox("Compare the settings with", [None, *others], key="settings_other",
                                 format_func=lambda r: "another run…" if r is None else run_label(r))
            if other is not None:
                diff = settings_table([run, other])
                if diff.empty:
                    st.caption("Both runs have the same settings.")
                else:
                    st.dataframe(diff, hide_index=True, width="stretch")
        # runs record how their executor trained them (older runs only its name)
        trained = status.execution_description or status.execution
        st.caption(md(f"State: {STATE_LABELS.get(status.state)} · device {status.device or '?'}"
                      f"{f' · {trained}' if trained else ''} · code {run.spec.version}"))
    # built only when clicked: the report carries plotly.js (a few MB) so it opens offline
    st.download_button("Download a self-contained HTML report", lambda: html_report(run, can_see_rows()).encode("utf-8"),
                       file_name=f"{run.id}-report.html", mime="text/html", key="report")
    with st.expander("Last record (raw)"):
        records = run.rounds()
        if records:
            st.code(json.dumps(records[-1].algorithm.to_json(), indent=2), language="json")


details()
