"""The dashboard's frame, drawn on every rerun by app.py: sign-in (dashboard/access/auth.py: a sign-in page
or a refusal stops here), navigation (st.navigation over the pages the registry defines, those the
person's role may use) and the live "training now" sidebar. Kept in a module, not in app.py, so the
import contracts cover it like every other part of the dashboard."""

from __future__ import annotations

import streamlit as st

from dashboard.presenters import registry
from dashboard.access.auth import gate
from dashboard.widgets.common import format_duration, forget_watched, get_store, is_active, refresh_if_moved
from dashboard.presenters.record_tables import progress, round_text, run_name
from dashboard.presenters.safe_text import md
from application import jobs


def page(where: registry.Page, default: bool = False) -> st.Page:
    return st.Page(where.path, title=where.title, icon=where.icon, default=default)


@st.fragment(run_every=2)
def active_runs() -> None:
    """Live progress of every queued or running job, on every page. The app's one timer: it also
    reruns a page whose runs have moved on (common.refresh_while_training)."""
    store = get_store()
    jobs.pump(store)  # start queued runs whose slot has freed
    runs = store.runs()
    refresh_if_moved(runs)
    active = [r for r in runs if is_active(r)]
    if not active:
        st.caption("No training running.")
        return
    st.markdown("**Training now**")
    for run in active:
        info = progress(run)
        where = round_text(info)
        where = f"round {where}" if "/" in where else where  # 'queued', 'starting'
        left = f", ~{format_duration(info['eta_s'])} left" if info["eta_s"] is not None else ""
        score = f" · mean F1 {info['mean']['f1']:.3f}" if info["mean"].get("f1") is not None else ""
        st.progress(min(1.0, info["fraction"]), text=f"{md(run_name(run))}: {where}{left}{score}")


SECTIONS = {
    "": [registry.RUNS, registry.CHECKUP],  # the check-up: the first thing to look at for a federation
    "Set up": [registry.DATA, registry.TRAIN],
    "Lenses": [*registry.LENS_PAGES, registry.COMPARE],
    "Results": [registry.RUN_DETAILS],
    "Administration": [registry.SETTINGS],
}


def main() -> None:
    st.set_page_config(page_title="Federated interoperability", page_icon="🩺", layout="wide")
    access = gate(lambda: [page(where, default=where == registry.RUNS) for pages in SECTIONS.values()
                           for where in pages])  # a sign-in page or a refusal stops here
    # a page a role may not use is not in the navigation, so not reachable by its URL either
    navigation = st.navigation({
        section: [page(where, default=where == registry.RUNS) for where in pages if access.may(where.action)]
        for section, pages in SECTIONS.items() if any(access.may(where.action) for where in pages)
    })
    forget_watched()
    with st.sidebar:
        active_runs()
    navigation.run()
