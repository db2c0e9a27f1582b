"""Site similarity (FedHealth2): which sites' data look alike, and who learns from whom."""

import streamlit as st

from dashboard.access.auth import require
from dashboard.widgets.common import download_csv, live, no_rounds_yet, pick_run_or_explain
from dashboard.presenters.lenses import similarity_view
from dashboard.presenters.registry import LENSES, TRAIN
from fedcore.records import SiteSimilarity

STATISTICS = {
    "pretrained": "BatchNorm inputs of a server-pretrained model",
    "f": "BatchNorm running statistics after FedBN warm-up",
    "d": "classifier-input features of a server-pretrained model",
}

require("view")
st.title("Site similarity (FedHealth2)")
st.markdown(
    "Before training, a model trained at the server describes every site by the statistics its "
    "data produce inside the network (the inputs of each BatchNorm layer). Sites with similar "
    "statistics are close. Each site then aggregates mostly with its close sites: it keeps a share "
    "**λ** of its own model and spreads the rest by similarity. BatchNorm layers never leave a site."
)
run = pick_run_or_explain(LENSES[SiteSimilarity.kind], TRAIN, "Train FedHealth2")


@live(run)
def lens() -> None:
    rounds = run.array_rounds()
    view = similarity_view(run, rounds[-1], clustered=st.session_state.get("clustered", True)) if rounds else None
    if not rounds:
        no_rounds_yet(run)
        return
    if view is None:
        variant = run.spec.param("variant")
        st.info("The similarity is not computed yet" + (
            f": the f-variant takes it after {run.spec.param('warmup_rounds')} FedBN rounds." if variant == "f" else "."))
        return
    st.toggle("Order sites by clustering (similar sites side by side)", value=True, key="clustered")
    st.markdown(f"**λ = {view.lam:g}** (each site's weight on its own model) · statistics: "
                f"**{STATISTICS[run.spec.param('variant')]}**")
    st.plotly_chart(view.distance, width="stretch", key="distance")
    st.plotly_chart(view.weights, width="stretch", key="weights")
    st.caption("Read a row of the weights: the site on the left receives that mix of every site's model.")
    download_csv(view.table, f"{run.id}-similarity")
    st.subheader("Each site's nearest neighbours")
    st.dataframe(view.nearest, hide_index=True, width="stretch")


lens()
