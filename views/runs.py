"""Home: what this is, a one-click start, and every run in the store with its actions."""

import pandas as pd
import streamlit as st

from dashboard.access.auth import allowed, require
from dashboard.widgets.common import (STATE_LABELS, TABLE_ROW_PX, cancel_with_confirmation, dashboard_setting, get_store,
                              identity_editor, is_active, page_link, save_dashboard_setting, refresh_while_training,
                              show_damage)
from dashboard.presenters.registry import CHECKUP, FEATURE_SHIFTS, RUN_DETAILS, page_of
from dashboard.widgets.data_roots import rerun, submit
from dashboard.presenters.record_tables import algorithm_detail, differing_settings, progress, round_text, run_name
from dashboard.presenters.safe_text import md
from application import jobs
from fedcore.data_labels import data_label
from fedcore.errors import FedcoreError

# iFedAvg with its declared parameters (the Train page's too): a local f_out, so the flipped labels
# show as well as the feature problems; 150 rounds keep it to about a minute.
QUICK_START = {"algorithm": "ifedavg", "data": "demo", "config": {"rounds": 150}}

require("view")
store = get_store()
st.title("Federated interoperability dashboard")
st.markdown(
    "Sites that cannot pool their data can still train one model together. Hidden differences "
    "between them — a unit error, another patient population, data missing not at random, a "
    "flipped label — quietly damage that model. This dashboard trains federated models and shows "
    "**where** such differences are: which site, which feature, how large."
)
page_link(CHECKUP, "**Which site has which problem?** The site check-up reads every lens and says so, "
                   "with calibrated evidence", icon=CHECKUP.icon)

if allowed("train"):
    with st.container(border=True):
        st.markdown("#### New here? See it work in about a minute")
        st.markdown(
            "Train **iFedAvg** on the *synthetic* demo federation: eight made-up hospitals triaging "
            "sepsis, four of them with a hidden problem (an age error, temperatures in °F, a symptom "
            "recorded only for sick patients, flipped labels). The heatmap then marks where they are."
        )
        if st.button("▶ Train iFedAvg on the demo data and show the feature shifts", type="primary"):
            try:
                run = submit(store, QUICK_START)
            except FedcoreError as error:  # e.g. no run can be created in a full store
                st.error(md(error))
            else:
                st.switch_page(FEATURE_SHIFTS.path, query_params={"run": run.id})

COLUMNS = ("name", "tags", "state", "algorithm", "data", "settings", "progress", "round", "mean F1", "worst-site F1",
           "worst site", "started", "run id")
# What fits beside the sidebar at 1280 px; the others are a click away (Columns).
DEFAULT_COLUMNS = ("name", "tags", "state", "data", "settings", "round", "mean F1", "worst-site F1")
COLUMN_HELP = {
    "name": "A name you gave the run, else its algorithm and number in this store",
    "settings": "What this run does differently from the other runs of its algorithm on the same data",
    "worst site": "The site with the lowest F1 at the end of the run",
}


def chosen_columns() -> list[str]:
    stored = dashboard_setting("runs_columns", list(DEFAULT_COLUMNS))
    return [c for c in stored if c in COLUMNS] if isinstance(stored, list) else list(DEFAULT_COLUMNS)


def table_rows(runs: list) -> pd.DataFrame:
    settings = differing_settings(runs)
    rows = []
    for run in runs:
        info, spec = progress(run), run.spec
        summary = run.summary if info["state"] == "done" else None
        worst_site = summary.worst_site.get("f1") if summary is not None else None
        rows.append({
            "name": run_name(run),
            "tags": ", ".join(run.identity.tags),
            "state": STATE_LABELS.get(info["state"], info["state"]),
            "algorithm": algorithm_detail(spec),
            "data": data_label(spec.data),
            "settings": settings.get(run.id, ""),
            "progress": info["fraction"],
            "round": round_text(info),
            "mean F1": info["mean"].get("f1"),
            "worst-site F1": info["worst"].get("f1"),
            "worst site": worst_site,
            "started": (run.status.started or "")[:19].replace("T", " ") or None,
            "run id": run.id,
        })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def runs_table() -> None:
    runs = store.runs()
    refresh_while_training(runs)
    heading, chooser = st.columns([3, 2], vertical_alignment="bottom")
    heading.subheader(f"Runs ({len(runs)})")
    if not runs:
        st.info("No runs yet. Start the demo above, or choose data and algorithms under **Set up**." if allowed("train")
                else "No runs yet.")
        return
    with chooser.popover("Columns", icon=":material/view_column:"):
        shown = st.multiselect("Columns of the table", COLUMNS, default=chosen_columns(), key="runs_columns")
        if shown != chosen_columns() and allowed("train"):  # kept in the store for everyone; a viewer's for a visit
            save_dashboard_setting("runs_columns", shown)
    # The actions go above the table, filled in once the table says which row is selected: below a
    # long table they would fall out of sight.
    actions = st.container()
    event = st.dataframe(
        table_rows(runs), hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
        key="runs_table", column_order=shown or ["name"], placeholder="–",
        # Every run in view, without a scroll bar inside the page (up to 20 rows).
        height=TABLE_ROW_PX * (min(len(runs), 20) + 1) + 3,
        column_config={
            "name": st.column_config.TextColumn("name", width=150, help=COLUMN_HELP["name"]),
            "tags": st.column_config.TextColumn("tags", width=85),
            "state": st.column_config.TextColumn("state", width=72),
            "data": st.column_config.TextColumn("data", width=140),
            "settings": st.column_config.TextColumn("settings", width=90, help=COLUMN_HELP["settings"]),
            "round": st.column_config.TextColumn("round", width=68),
            "progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0, format="percent",
                                                        width="small"),
            "mean F1": st.column_config.NumberColumn(format="%.3f", width=68),
            "worst-site F1": st.column_config.NumberColumn(format="%.3f", width=92),
            "worst site": st.column_config.TextColumn(help=COLUMN_HELP["worst site"]),
            "run id": st.column_config.TextColumn("run id", width=230),
        },
    )
    selected = [row for row in event.selection.rows if row < len(runs)]  # a row deleted since is gone
    with actions:
        if not selected:
            verbs = ["open", *(["rename", "re-run", "cancel"] if allowed("train") else []),
                     *(["delete"] if allowed("delete") else [])]
            st.caption(f"Select a row to {', '.join(verbs[:-1]) + ' or ' if len(verbs) > 1 else ''}{verbs[-1]} "
                       "that run.")
            return
        run_actions(runs[selected[0]])


def run_actions(run) -> None:
    """The selected run's name, what is wrong with it if anything, and what can be done with it."""
    st.markdown(f"Selected: **{md(run_name(run))}** ({md(run.id)})")
    damage = run.damage
    if damage:
        show_damage(damage, "This run's records are damaged (the other runs are not); delete it, or re-run it if its "
                            "spec.json is sound")
    bar = st.container(horizontal=True)
    if bar.button("Open", type="primary", key="open"):
        st.switch_page(page_of(run).path, query_params={"run": run.id})
    if bar.button("Details", key="details"):
        st.switch_page(RUN_DETAILS.path, query_params={"run": run.id})
    if allowed("train") and bar.button("Re-run with the same settings", key="rerun",
                                       disabled=any(d.file == "spec.json" for d in damage)):
        try:
            again = rerun(store, run)
        except FedcoreError as error:
            st.error(md(error))
        else:
            st.toast(md(f"Queued {run_name(again)}"))
            st.rerun()
    if allowed("train"):
        with bar.popover("Name and tags"):
            identity_editor(run, key=f"identity-{run.id}")
    if is_active(run):
        if allowed("cancel"):
            cancel_with_confirmation(bar, run, "cancel")
    elif allowed("delete"):
        with bar.popover("Delete"):
            st.markdown(f"Delete run **{md(run_name(run))}** ({md(run.id)}) and everything it recorded?")
            if st.button("Yes, delete it", key="confirm_delete"):
                try:
                    jobs.delete(store, run)
                except FedcoreError as error:
                    st.error(md(error))
                else:
                    st.rerun()


runs_table()
