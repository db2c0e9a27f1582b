"""The dashboard's frame, drawn on every rerun by app.py: navigation (st.navigation over the pages
the registry defines) and the live "training now" sidebar. Kept in a module, not in app.py, so the
import contracts cover it like every other part of the dashboard."""

from __future__ import annotations

import streamlit as st

from dashboard import registry
from dashboard.common import format_duration, get_store, is_active, literal
from dashboard.records import progress, round_text, run_name
from fedcore import jobs


def page(where: registry.Page, default: bool = False) -> st.Page:
    return st.Page(where.path, title=where.title, icon=where.icon, default=default)


@st.fragment(run_every=2)
def active_runs() -> None:
    """Live progress of every queued or running job, on every page."""
    store = get_store()
    jobs.pump(store)  # start queued runs whose slot has freed
    active = [r for r in store.runs() if is_active(r)]
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
        st.progress(min(1.0, info["fraction"]), text=f"{literal(run_name(run))}: {where}{left}{score}")


def main() -> None:
    st.set_page_config(page_title="Federated interoperability", page_icon="🩺", layout="wide")
    navigation = st.navigation({
        "": [page(registry.RUNS, default=True)],
        "Set up": [page(registry.DATA), page(registry.TRAIN)],
        "Lenses": [*map(page, registry.LENS_PAGES), page(registry.COMPARE)],
        "Results": [page(registry.RUN_DETAILS)],
    })
    with st.sidebar:
        active_runs()
    navigation.run()
