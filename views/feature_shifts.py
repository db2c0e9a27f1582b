"""Feature shifts (iFedAvg): which site needed which correction of which feature."""

import numpy as np
import pandas as pd
import streamlit as st

from dashboard.auth import require
from dashboard.common import download_csv, is_active, live, load_run_federation, pick_run_or_explain, run_colors
from dashboard.figures import LAYER_TITLES, feature_distribution
from dashboard.lenses import FEATURE_VIEWS, detection_table, layers, shift_view
from dashboard.registry import LENSES, RUNS
from dashboard.safe_text import md
from fedcore.interpret.significance import RULES
from fedcore.records import FeatureShifts
from fedcore.errors import FedcoreError

require("view")
st.title("Feature shifts (iFedAvg)")
st.markdown(
    "Each site learns its own small correction of every feature, *(x + b_in) · w_in*, while the "
    "rest of the model is shared. A site whose data differ — another unit, an offset, a feature "
    "recorded differently — needs a correction the others do not: its cell stands out. "
    "**O** marks a site's value far from that feature's mean across sites; **x** marks a feature "
    "whose corrections vary unusually across sites."
)
run = pick_run_or_explain(LENSES[FeatureShifts.kind], RUNS, "Start the one-click demo on the Runs page")

spec_params = run.spec["params"]

@live(run)
def lens() -> None:
    rounds = run.array_rounds()
    if not rounds:
        st.info("Waiting for the first evaluated round…")
        return
    arrays = run.load_arrays(rounds[-1])
    controls = st.columns([2, 3, 2, 3])  # wide enough for the longest "Features" option
    layer = controls[0].radio("Layer", layers(arrays), format_func=lambda l: LAYER_TITLES[l].split(" (")[0],
                              key="layer")
    follow = is_active(run) and controls[1].checkbox("Follow the latest round", value=True, key="follow")
    if follow or len(rounds) == 1:
        round_ = rounds[-1]
        controls[1].caption(f"Round {round_}")
    else:
        round_ = controls[1].select_slider("Round (watch the layers evolve)", options=rounds, value=rounds[-1],
                                           key="round")
    centre = controls[2].radio("Colour relative to", ["neutral", "column mean"], key="centre",
                               format_func={"neutral": "no correction (b=0, w=1)",
                                            "column mean": "the feature's mean across sites"}.get)
    features_view = controls[3].selectbox("Features", FEATURE_VIEWS, key="features_view")
    with st.expander("Significance rule and thresholds"):
        t0, t1, t2 = st.columns(3)
        rule = t0.radio("Rule", RULES, index=RULES.index(spec_params.get("rule", "sd")), key="rule",
                        format_func={"sd": "mean and SD (the paper's)",
                                     "robust": "median and MAD (robust to other far-off sites)"}.get)
        n_sd = t1.slider("SDs from the feature's centre for a mark", 1.0, 4.0, float(spec_params["n_sd"]), 0.1,
                         key="n_sd")
        sd_floor = t2.slider("Minimum spread of a feature across sites", 0.0, 0.5,
                             float(spec_params["sd_floor"]), 0.01, key="sd_floor")
    view = shift_view(run, round_, layer, centre, n_sd, sd_floor, features_view, rule)
    record = next((r for r in run.rounds() if r["round"] == round_), {})
    if record.get("algorithm", {}).get("warning") and rule == "sd":
        st.warning(md(record["algorithm"]["warning"]))
    st.caption(f"Round {round_}: {view.marked_cells} cells marked O, {view.marked_features} features marked x.")
    clicked = st.plotly_chart(view.figure, width="stretch", key="heatmap", on_select="rerun",
                              selection_mode="points")
    exports = st.columns(3)
    with exports[0]:
        download_csv(view.table, f"{run.id}-{layer}-round{round_}", "Heatmap: every cell's value and z (CSV)")
    with exports[1]:
        download_csv(view.site_deviation, f"{run.id}-{layer}-round{round_}-site-deviation",
                     "Per-site deviation bars (CSV)")
    with exports[2]:
        download_csv(view.feature_deviation, f"{run.id}-{layer}-round{round_}-feature-deviation",
                     "Per-feature deviation bars (CSV)")

    detection = detection_table(run, round_, n_sd, sd_floor, rule)
    if detection is not None:
        table, false_positives = detection
        st.subheader("Did the marks find the injected problems?")
        st.caption("This federation is synthetic and records what was injected where, so the marks can be checked.")
        st.dataframe(table, hide_index=True, width="stretch")
        if false_positives:
            st.caption(f"{len(false_positives)} other cells are marked without an injected problem: "
                       + md(", ".join(f"{f['site']} / {f['column']} ({f['layer']})" for f in false_positives)))
        download_csv(table, f"{run.id}-detection-round{round_}", "Download the detection table (CSV)")

    if layer.endswith("_in"):
        points = clicked.selection.points if clicked else []
        distribution(view.table, (points[0]["y"], points[0]["x"]) if points else None)


def distribution(table: pd.DataFrame, clicked: tuple[str, str] | None) -> None:
    """The data behind a cell: the chosen site's values of a feature against the other sites'.
    The cell is the one last clicked in the heatmap, else the most significant mark."""
    st.subheader("Look at the data behind a cell")
    st.caption("Click a cell of the heatmap, or pick a site and a feature.")
    federation_info = run.federation
    sites = [s["name"] for s in federation_info["sites"]]
    features = federation_info["feature_names"]
    if clicked is not None and clicked != st.session_state.get("last_click") and clicked[1] in features:
        st.session_state["last_click"] = clicked
        st.session_state["dist_site"], st.session_state["dist_feature"] = clicked
    if "dist_site" not in st.session_state:
        marked = table[table["O"]].assign(strength=lambda t: t["z"].abs()).sort_values("strength", ascending=False)
        first = marked.iloc[0] if len(marked) else table.iloc[0]
        st.session_state["dist_site"], st.session_state["dist_feature"] = first["site"], first["feature"]
    pick = st.columns(2)
    site = pick[0].selectbox("Site", sites, key="dist_site")
    feature = pick[1].selectbox("Feature", features, key="dist_feature")
    if run.federation.get("flower"):
        st.info("This run is a Flower federation: every row stayed at its site, so the server has none to show. "
                "Each site can look at its own values of this feature.")
        return
    try:
        federation = load_run_federation(run.spec["data"], int(run.spec["config"]["seed"]))
    except FedcoreError as error:
        st.info(f"The data of this run are not available on this machine ({md(error)}).")
        return
    j = features.index(feature)
    rows = []
    for s in federation.sites:
        for x, y in ((s.x_train, s.y_train), (s.x_test, s.y_test)):
            rows.append(pd.DataFrame({"site": s.name, "class": np.array(federation.class_names)[y.numpy()],
                                      "value": x[:, j].numpy()}))
    values = pd.concat(rows, ignore_index=True)
    st.plotly_chart(feature_distribution(values, site, feature, run_colors(run)), width="stretch",
                    key="distribution")
    download_csv(values.rename(columns={"value": f"{feature} (preprocessed)"}), f"{run.id}-values-of-{feature}",
                 f"Every site's values of {md(feature)} (CSV)")
    cell = table[(table["site"] == site) & (table["feature"] == feature)].iloc[0]
    st.caption(f"{md(site)}'s learned value for {md(feature)}: {cell['value']:+.3f} (z {cell['z']:+.2f}"
               f"{', marked O' if cell['O'] else ''}).")


lens()
