"""The dashboard: `streamlit run app.py` (or `make run`). Screens live in views/, one file each."""

import streamlit as st

from dashboard.common import format_duration, get_store, is_active
from dashboard.records import progress, run_label
from fedcore import jobs

st.set_page_config(page_title="Federated interoperability", page_icon="🩺", layout="wide")

navigation = st.navigation({
    "": [st.Page("views/runs.py", title="Runs", icon=":material/home:", default=True)],
    "Set up": [
        st.Page("views/data.py", title="Data", icon=":material/table:"),
        st.Page("views/train.py", title="Train", icon=":material/play_arrow:"),
    ],
    "Lenses": [
        st.Page("views/feature_shifts.py", title="Feature shifts (iFedAvg)", icon=":material/grid_on:"),
        st.Page("views/site_similarity.py", title="Site similarity (FedHealth2)", icon=":material/hub:"),
        st.Page("views/site_weights.py", title="Site weights (AdaFed)", icon=":material/balance:"),
        st.Page("views/prototypes.py", title="Prototypes (inDISCO)", icon=":material/image_search:"),
        st.Page("views/compare.py", title="Compare", icon=":material/compare_arrows:"),
    ],
    "Results": [st.Page("views/run.py", title="Run details", icon=":material/description:")],
})


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
        left = f", ~{format_duration(info['eta_s'])} left" if info["eta_s"] is not None else ""
        score = f" · mean F1 {info['mean']['f1']:.3f}" if info["mean"].get("f1") is not None else ""
        st.progress(min(1.0, info["fraction"]),
                    text=f"{run_label(run).split(' · ')[0]}: round {info['round']}/{info['total']}{left}{score}")


with st.sidebar:
    active_runs()

navigation.run()
