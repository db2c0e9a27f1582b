"""Site weights (AdaFed): how much the server trusts each site, round by round."""

import streamlit as st

from dashboard.access.auth import require
from dashboard.widgets.common import download_csv, live, no_rounds_yet, pick_run_or_explain, site_colors_of
from dashboard.presenters.figures import class_lines, site_lines
from dashboard.presenters.lenses import weights_view
from dashboard.presenters.registry import LENSES, TRAIN
from dashboard.presenters.safe_text import md
from fedcore.records import SiteWeights

require("view")
st.title("Site weights (AdaFed)")
st.markdown(
    "Each round the server scores every site's returned model on its test set and averages the "
    "models in proportion to those scores (the site weights p_i). It then scores its new model per "
    "class and raises the loss weight κ of classes it gets wrong. A site whose model keeps scoring "
    "badly — noisy or flipped labels, a very different population — is driven towards zero weight."
)
run = pick_run_or_explain(LENSES[SiteWeights.kind], TRAIN, "Train AdaFed")


@live(run)
def lens() -> None:
    view = weights_view(run)
    if view.shares.empty:
        no_rounds_yet(run)
        return
    spec = run.spec
    st.markdown(f"Weight rule: **{spec.param('weight_rule')}** · server test set: **{spec.param('server_test')}** · "
                f"adaptive loss: **{'on' if spec.param('adaptive_loss') else 'off'}** (ε = {spec.param('epsilon'):g})")
    if len(view.near_zero):
        names = md(", ".join(view.near_zero["site"]))
        st.warning(f"Driven to (near) zero weight — below a quarter of an equal share — in some rounds: **{names}**. "
                   "While there, the server hardly used their models: check these sites' data and labels.")
        st.dataframe(view.near_zero, hide_index=True, column_config={"latest share": st.column_config.NumberColumn(
            format="%.3f")})
    else:
        st.success("No site fell near zero weight in any evaluated round.")
    colors = site_colors_of(run)
    rule = spec.param("weight_rule")
    formula = view.formula or f"the {rule} rule"  # runs recorded before the formula was
    shown = st.segmented_control(
        "Site weight", ["share", "score"], default="share", key="weight_scale",
        format_func={"share": "share of the server model (p_i / Σ p)", "score": f"raw score p_i = {formula}"}.get,
        help="The raw score tells a site the rule set to zero (threshold rule) from one that merely scores lower "
             "than the others; the share is what the server averaged with.")
    if shown == "score":
        st.plotly_chart(site_lines(view.scores, f"p_i = {formula}", f"Each site's raw score p_i ({rule} rule)",
                                   colors), width="stretch", key="scores")
    else:
        st.plotly_chart(site_lines(view.shares, "share of the server model", "Each site's share of the server model",
                                   colors), width="stretch", key="shares")
    st.plotly_chart(site_lines(view.shares, "share", "The shares, stacked (they sum to 1)", colors,
                               stacked=True), width="stretch", key="stacked")
    download_csv(view.shares.rename(columns={"value": "share"}).merge(view.scores.rename(columns={"value": "p"})),
                 f"{run.id}-site-weights", "Download each site's share and raw score p_i per round (CSV)")
    left, right = st.columns(2)
    left.plotly_chart(class_lines(view.kappa, "κ (loss weight)", "Class weights κ_c = 1 / (F1_c + ε)"),
                      width="stretch", key="kappa")
    right.plotly_chart(class_lines(view.server_f1, "F1", "Server model's F1 per class"), width="stretch",
                       key="server_f1")
    download_csv(view.kappa.merge(view.server_f1, on=["round", "class"], suffixes=("_kappa", "_server_f1")),
                 f"{run.id}-classes", "Download class weights and F1 (CSV)")


lens()
