"""Home: what this is, a one-click start, and every run in the store with its actions."""

import pandas as pd
import streamlit as st

from dashboard.auth import allowed, require
from dashboard.common import STATE_LABELS, get_store, is_active, settle_when_finished, show_damage
from dashboard.registry import CHECKUP, FEATURE_SHIFTS, RUN_DETAILS, page_of
from dashboard.data_roots import rerun, submit
from dashboard.records import data_name
from dashboard.records import progress, run_label
from dashboard.safe_text import md
from fedcore import jobs
from fedcore.errors import FedcoreError

QUICK_START = {
    "algorithm": "ifedavg",
    "data": "demo",
    "params": {"local_f_out": True, "scalar_w_out": True},
    "config": {"rounds": 150},
}

require("view")
store = get_store()
st.title("Federated interoperability dashboard")
st.markdown(
    "Sites that cannot pool their data can still train one model together. Hidden differences "
    "between them — a unit error, another patient population, data missing not at random, a "
    "flipped label — quietly damage that model. This dashboard trains federated models and shows "
    "**where** such differences are: which site, which feature, how large."
)
st.page_link(CHECKUP.path, label="**Which site has which problem?** The site check-up reads every lens and says so, "
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

runs = store.runs()


was_active = any(is_active(r) for r in runs)


@st.fragment(run_every=2 if was_active else None)
def runs_table() -> None:
    runs = store.runs()
    settle_when_finished(was_active, any(is_active(r) for r in runs))
    st.subheader(f"Runs ({len(runs)})")
    if not runs:
        st.info("No runs yet. Start the demo above, or choose data and algorithms under **Set up**." if allowed("train")
                else "No runs yet.")
        return
    rows = []
    for run in runs:
        info, spec = progress(run), run.spec
        rows.append({
            "state": STATE_LABELS.get(info["state"], info["state"]),
            "algorithm": run_label(run).split(" · ")[0],
            "data": data_name(spec.get("data")),
            "progress": info["fraction"],
            "round": f"{info['round']}/{info['total']}",
            "mean F1": info["mean"].get("f1"),
            "worst-site F1": info["worst"].get("f1"),
            "started": (run.status.get("started") or "")[:19].replace("T", " "),
            "run id": run.id,
        })
    event = st.dataframe(
        pd.DataFrame(rows), hide_index=True, width="stretch", on_select="rerun",
        selection_mode="single-row", key="runs_table",
        column_config={
            "progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0, format="percent"),
            "mean F1": st.column_config.NumberColumn(format="%.3f"),
            "worst-site F1": st.column_config.NumberColumn(format="%.3f"),
        },
    )
    selected = [row for row in event.selection.rows if row < len(runs)]  # a row deleted since is gone
    if not selected:
        actions = ["open", *(["re-run", "cancel"] if allowed("train") else []), *(["delete"] if allowed("delete") else [])]
        st.caption(f"Select a row to {', '.join(actions[:-1]) + ' or ' if len(actions) > 1 else ''}{actions[-1]} that run.")
        return
    run = runs[selected[0]]
    damage = run.damage
    if damage:
        show_damage(damage, "This run's records are damaged (the other runs are not); delete it, or re-run it if its "
                            "spec.json is sound")
    columns = st.columns(5)
    if columns[0].button("Open", type="primary", key="open"):
        st.switch_page(page_of(run).path, query_params={"run": run.id})
    if columns[1].button("Details", key="details"):
        st.switch_page(RUN_DETAILS.path, query_params={"run": run.id})
    if allowed("train") and columns[2].button("Re-run with the same settings", key="rerun",
                                              disabled=any(d.file == "spec.json" for d in damage)):
        try:
            again = rerun(store, run)
        except FedcoreError as error:
            st.error(md(error))
        else:
            st.toast(md(f"Queued {again.id}"))
            st.rerun()
    if is_active(run):
        if allowed("cancel") and columns[3].button("Cancel", key="cancel"):
            jobs.cancel(run)
            st.toast(md(f"Cancelling {run.id}; what it recorded so far is kept."))
            st.rerun()
    elif allowed("delete"):
        with columns[4].popover("Delete"):
            st.markdown(f"Delete run **{md(run.id)}** and everything it recorded?")
            if st.button("Yes, delete it", key="confirm_delete"):
                try:
                    jobs.delete(store, run)
                except FedcoreError as error:
                    st.error(md(error))
                else:
                    st.rerun()


runs_table()
