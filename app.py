"""The dashboard: `streamlit run app.py` (or `make run`). Screens live in views/, one file each.
Who may open which screen: dashboard/auth.py (sign-in, roles, local mode)."""

import streamlit as st

from dashboard.auth import gate
from dashboard.common import format_duration, get_store, is_active
from dashboard.records import progress, run_label
from dashboard.safe_text import md
from fedcore import jobs

st.set_page_config(page_title="Federated interoperability", page_icon="🩺", layout="wide")
access = gate()  # a sign-in page or a refusal stops here

# Each screen with the action it serves (auth.PERMISSIONS): a role that may not do it does not see it.
SCREENS = {
    "": [("views/runs.py", "Runs", ":material/home:", "view")],
    "Set up": [
        ("views/data.py", "Data", ":material/table:", "choose data"),
        ("views/train.py", "Train", ":material/play_arrow:", "train"),
    ],
    "Lenses": [
        ("views/feature_shifts.py", "Feature shifts (iFedAvg)", ":material/grid_on:", "view"),
        ("views/site_similarity.py", "Site similarity (FedHealth2)", ":material/hub:", "view"),
        ("views/site_weights.py", "Site weights (AdaFed)", ":material/balance:", "view"),
        ("views/prototypes.py", "Prototypes (inDISCO)", ":material/image_search:", "view"),
        ("views/compare.py", "Compare", ":material/compare_arrows:", "view"),
    ],
    "Results": [("views/run.py", "Run details", ":material/description:", "view")],
    "Administration": [("views/settings.py", "Access and data folders", ":material/admin_panel_settings:", "settings")],
}
navigation = st.navigation({
    section: [st.Page(path, title=title, icon=icon, default=path == "views/runs.py")
              for path, title, icon, action in screens if access.may(action)]
    for section, screens in SCREENS.items() if any(access.may(action) for *_, action in screens)
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
                    text=md(f"{run_label(run).split(' · ')[0]}: round {info['round']}/{info['total']}{left}{score}"))


with st.sidebar:
    active_runs()

navigation.run()
