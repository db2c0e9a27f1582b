"""Data: pick the federation to train on and see what is in it before anything trains."""

import pandas as pd
import streamlit as st

from dashboard.common import DEMO_DATA, choose_data, chosen_data, load_run_federation
from data_adapters.demo import FEATURES
from fedcore.errors import DataError

st.title("Data")
current = chosen_data()
st.caption(f"Training currently uses: **{current['label']}**")


def site_overview(federation) -> pd.DataFrame:
    """Rows, hold-out and class balance per site, plus any recorded injected problem."""
    injected = {g["site"]: g["detail"] for g in federation.ground_truth}
    rows = []
    for site in federation.sites:
        counts = (site.y_train.bincount(minlength=federation.n_classes) + site.y_test.bincount(
            minlength=federation.n_classes)).tolist()
        total = sum(counts)
        rows.append({
            "site": site.name, "rows": total, "training rows": site.n_train, "hold-out rows": site.n_test,
            **{f"share '{name}'": count / total for name, count in zip(federation.class_names, counts)},
            **({"injected problem (ground truth)": injected.get(site.name, "none")} if injected else {}),
        })
    return pd.DataFrame(rows)


st.subheader("Synthetic demo federation")
st.info(
    "**Synthetic data — no real patients.** Eight made-up hospitals triaging suspected sepsis "
    "(outcome: sepsis within 48 h). Four carry a known, injected problem, recorded as ground truth "
    "so the lenses can be checked against it."
)
standardization = st.radio(
    "How sites standardise their features",
    ["reference", "site"],
    format_func={"reference": "with shared reference values (a data dictionary): unit errors stay visible",
                 "site": "each site on its own data (the iFedAvg paper): affine errors disappear"}.get,
)
ref = "demo" if standardization == "reference" else "demo:standardization=site"
try:
    federation = load_run_federation(ref)
except DataError as error:
    st.error(str(error))
    st.stop()
overview = site_overview(federation)
st.dataframe(overview, hide_index=True, width="stretch",
             column_config={c: st.column_config.NumberColumn(format="%.2f") for c in overview if c.startswith("share")})
st.markdown("**Features**")
st.dataframe(pd.DataFrame([{"feature": f.name, "kind": f.kind, "unit": f.unit or "–"} for f in FEATURES]),
             hide_index=True)
label = DEMO_DATA["label"] + (" — per-site standardisation" if standardization == "site" else "")
if st.button("Use this data for training", type="primary"):
    choose_data(ref, label)
    st.success(f"Training will use: {label}.")
    st.page_link("views/train.py", label="Go to Train →")
