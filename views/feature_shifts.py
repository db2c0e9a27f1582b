"""Feature shifts (iFedAvg): which site needed which correction of which feature."""

import numpy as np
import pandas as pd
import streamlit as st

from dashboard.access.auth import allowed, can_see_rows, require, rows_refused
from dashboard.presenters.checkup_view import plan_fed_by, run_names, with_names
from dashboard.widgets.common import (checkup_result, download_csv, get_store, is_active, live, no_rounds_yet, page_link,
                              pick_run_or_explain, site_colors_of)
from dashboard.presenters.figures import CALIBRATED_LAYERS, LAYER_LABELS, feature_distribution
from dashboard.presenters.lenses import (FEATURE_VIEWS, LAYER_GUIDE, detection_table, distance_text, layers, marking,
                              shift_view)
from dashboard.presenters.registry import CHECKUP, LENSES, RUNS
from dashboard.presenters.safe_text import md
from fedcore.interpret.significance import RULES
from fedcore.interpret import checks
from fedcore.interpret.findings import FDR, Finding
from fedcore.records import FeatureShifts
from fedcore.errors import FedcoreError
from fedcore.data_labels import data_label
from fedcore.glossary import plain, term

require("view")
st.title("Feature shifts (iFedAvg)")
st.markdown(
    "Each site learns its own small correction of every feature — a shift, then a scale — while the "
    "rest of the model is shared. A site whose data differ needs a correction the others do not: its "
    "cell stands out. **O** marks a site's correction far from the other sites'; **x** marks a feature "
    "whose corrections vary unusually across sites (the paper's 2-SD rule). Hover over a cell for the "
    "correction in the feature's own units. *Marks: calibrated* puts a site check-up's findings in place of "
    f"the 2-SD rule's: each site's correction against the other sites' without itself, over "
    f"{term('replicate runs')}, at a controlled false discovery rate (q-values)."
)
with st.expander("Which layer shows which kind of problem"):
    st.markdown(LAYER_GUIDE)
run = pick_run_or_explain(LENSES[FeatureShifts.kind], RUNS, "Start the one-click demo on the Runs page")

if not run.spec.param("local_f_out", earlier=True):  # runs from before the switch: local, the default
    st.warning("This run shares its output layer (f_out, the authors' setting), so it has no output layers of its "
               "sites: problems with a site's labels cannot show, and push the site's input layers instead — its "
               f"features may be marked although they are fine. The default is an {term('local f_out')}.")

@live(run)
def lens() -> None:
    rounds = run.array_rounds()
    if not rounds:
        no_rounds_yet(run)
        return
    arrays = run.load_arrays(rounds[-1])
    controls = st.columns([2, 3, 2, 3])  # wide enough for the longest "Features" option
    layer = controls[0].radio("Layer", layers(arrays), format_func=LAYER_LABELS.get, key="layer")
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
    marked = marking(run)  # the rule and thresholds the run marked with
    with st.expander("Significance rule and thresholds"):
        t0, t1, t2 = st.columns(3)
        rule = t0.radio("Rule", RULES, index=RULES.index(marked.rule), key="rule",
                        format_func={"sd": "mean and SD (the paper's)",
                                     "robust": "median and MAD (robust to other far-off sites)"}.get)
        n_sd = t1.slider("SDs from the feature's centre for a mark", 1.0, 4.0, float(marked.n_sd), 0.1, key="n_sd")
        sd_floor = t2.slider("Minimum spread of a feature across sites", 0.0, 0.5, float(marked.sd_floor), 0.01,
                             key="sd_floor")
    calibrated = st.radio("Marks", ["paper", "calibrated"], horizontal=True, key="marks",
                          format_func={"paper": "the paper's 2-SD rule",
                                       "calibrated": "calibrated by a site check-up (q-values)"}.get) == "calibrated"
    checkup = calibration(layer, calibrated, round_, rounds[-1])
    view = shift_view(run, round_, layer, centre, n_sd, sd_floor, features_view, rule, checkup,
                      calibrated and checkup is not None)
    warning = marking(run, round_).warning
    if warning and rule == "sd":
        st.warning(md(warning))
    if calibrated and checkup is not None:
        st.caption(f"Round {round_}: the check-up reports {view.marked_cells} cells (q < {FDR:g}); every tested "
                   "cell's q is on hover and in the cells' CSV.")
    else:
        st.caption(f"Round {round_}: {view.marked_cells} cells marked O, {view.marked_features} features marked x"
                   + (" · each cell's check-up q is on hover" if checkup is not None else "") + ".")
    clicked = st.plotly_chart(view.figure, width="stretch", key="heatmap", on_select="rerun",
                              selection_mode="points")
    exports = st.columns(3)
    with exports[0]:
        download_csv(view.table, f"{run.id}-{layer}-round{round_}", "Heatmap cells (CSV)")
    with exports[1]:
        download_csv(view.site_deviation, f"{run.id}-{layer}-round{round_}-site-deviation",
                     "Per-site deviation bars (CSV)")
    with exports[2]:
        download_csv(view.feature_deviation, f"{run.id}-{layer}-round{round_}-feature-deviation",
                     "Per-feature deviation bars (CSV)")

    detection = detection_table(run, round_, n_sd, sd_floor, rule)
    if detection is not None:
        table, false_positives = detection
        st.subheader("Did the paper's 2-SD marks find the injected problems?")
        st.caption("This federation is synthetic and records what was injected where, so the marks can be checked.")
        # wide rows so that the evidence wraps instead of being cut off
        st.dataframe(table, hide_index=True, width="stretch", row_height=96, height=96 * len(table) + 38,
                     column_config={  # the widths add up to what fits beside the sidebar at 1280 px
                         "site": st.column_config.TextColumn(width=120),
                         "feature": st.column_config.TextColumn(width=95),
                         "injected problem": st.column_config.TextColumn(width=175),
                         "caught": st.column_config.TextColumn(width=70),
                         "evidence": st.column_config.TextColumn(width=340),
                     })
        if false_positives:
            st.caption(f"{len(false_positives)} other cells are marked without an injected problem: "
                       + md(", ".join(f"{f['site']} / {f['column']} ({plain(f['layer'])} {f['layer']})"
                                    for f in false_positives)))
        download_csv(table, f"{run.id}-detection-round{round_}", "Download the detection table (CSV)")

    if layer.endswith("_in"):
        points = clicked.selection.points if clicked else []
        distribution(view.table, (points[0]["y"], points[0]["x"]) if points else None, rule)


def calibration(layer: str, wanted: bool, round_: int, last_round: int) -> list[Finding] | None:
    """Every cell the newest check-up that includes this run tested (None: no such check-up has
    finished this run's lens); with `wanted`, says why the marks stay the paper's where they must,
    or what the calibrated ones are. Never a q the check-up did not compute."""
    plan = plan_fed_by(run, "feature_shifts")
    result = checkup_result(plan) if plan is not None else None
    # the check-up reads its finished runs only: this one is among them once it is done
    ready = result is not None and "feature shifts" in result.sources and run.status.state == "done"
    if not wanted:
        return result.findings if ready else None
    if plan is None:
        st.info("Calibrated marks come from a **site check-up** that includes this run: it compares each site's "
                f"correction with the other sites' (without itself), over {term('replicate runs')}, and "
                f"controls the false discovery rate over every cell it tests (q-values; marked where q < {FDR:g} "
                "and the correction is large enough to matter). This run belongs to no check-up yet, so the marks "
                "shown are the paper's.")
        if allowed("train"):
            page_link(CHECKUP, "Start a check-up (the Site check-up page)", icon=CHECKUP.icon,
                      query_params={"run": run.id} if run.status.state == "done" else None)
        else:
            st.caption("Someone with the analyst role can start one on the Site check-up page.")
        return None
    if not ready:
        why = ("its iFedAvg runs are still training" if "feature_shifts" in result.pending
               else "this run has not finished" if run.status.state != "done"
               else "its iFedAvg runs did not finish")
        st.info(md(f"This run belongs to check-up {plan.id}, but {why}: no q-values yet, so the marks shown are "
                   "the paper's."))
        page_link(CHECKUP, "Open the check-up", icon=CHECKUP.icon, query_params={"checkup": plan.id})
        return None
    if layer not in CALIBRATED_LAYERS:
        st.info(f"The check-up tests the input layers cell by cell and the {term('w_out')} per site; the "
                f"{term('b_out')} has no calibrated test, so its marks are the paper's.")
        return None
    family = checks.family("output_shift" if layer == "w_out" else "feature_shift")
    cells = sum(f.tested and f.family == family for f in result.findings)
    source = with_names(result.sources["feature shifts"], run_names(plan, get_store()))
    st.caption(md(f"Calibrated marks from check-up {plan.id}: {source}; "
                  + (f"each site's mean {term('w_out')} (the labels lens) against the other sites'. "
                     if layer == "w_out" else "the mean over these runs at their last evaluated rounds. ")
                  + f"q: the {term('Benjamini–Hochberg')} within the lens's own family ({cells} cells tested): no "
                    "finding of another lens loosens it."))
    if round_ != last_round:
        st.caption(f"The values drawn are round {round_}'s; the check-up judged the runs' last rounds.")
    return result.findings


def distribution(table: pd.DataFrame, clicked: tuple[str, str] | None, rule: str) -> None:
    """The data behind a cell: the chosen site's values of a feature against the other sites'.
    The cell is the one last clicked in the heatmap, else the most significant mark."""
    st.subheader("Look at the data behind a cell")
    st.caption("Click a cell of the heatmap, or pick a site and a feature.")
    federation_info = run.federation
    sites, features = federation_info.site_names, list(federation_info.feature_names)
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
    if federation_info.flower:
        st.info("This run is a Flower federation: every row stayed at its site, so the server has none to show. "
                "Each site can look at its own values of this feature.")
        return
    if not can_see_rows():
        st.info(rows_refused())
        return
    # Imported here, not at the top: loading data rows brings in the data adapters and torch
    # (seconds on a cold start), and the heatmap above should not wait for them.
    from dashboard.widgets.data_cache import load_run_federation

    try:
        federation = load_run_federation(run.spec.data, int(run.spec.seed))
    except FedcoreError as error:
        st.info(f"The data of this run are not available on this machine ({md(error)}).")
        return
    j = features.index(feature)
    scales = federation_info.scales
    translated = all(feature in scales.get(s.name, {}) for s in federation.sites)
    rows = []
    for s in federation.sites:
        for x, y in ((s.x_train, s.y_train), (s.x_test, s.y_test)):
            model_values = x[:, j].numpy().astype(float)
            rows.append(pd.DataFrame({
                "site": s.name, "class": np.array(federation.class_names)[y.numpy()], "model input": model_values,
                "value": scales[s.name][feature].value(model_values) if translated else model_values}))
    values = pd.concat(rows, ignore_index=True)
    unit = next(iter(scales.values()), {}).get(feature).unit if translated else ""
    # The unit is the one the data say the feature has; a site that records another (°F) shows so.
    axis = (f"{feature} as each site recorded it (expected unit: {unit})" if unit else
            f"{feature} as each site recorded it" if translated else
            f"{feature} (standardised: as the model sees it)")
    st.caption(md(f"Rows of every site of this run, read on this machine from the run's data "
                  f"({data_label(run.spec.data)}): each site's own rows, training and hold-out, under its name."))
    st.plotly_chart(feature_distribution(values, site, feature, site_colors_of(run), axis), width="stretch",
                    key="distribution")
    exported = values.rename(columns={"model input": f"{feature} (preprocessed)"})
    exported = (exported.rename(columns={"value": f"{feature} ({unit or 'data units'})"}) if translated
                else exported.drop(columns="value"))
    download_csv(exported, f"{run.id}-values-of-{feature}", f"Every site's values of {md(feature)} (CSV)")
    if translated:
        st.caption("A missing value was filled with the mean it was standardised by before training, so it shows "
                   "at that mean here.")
    cell = table[(table["site"] == site) & (table["feature"] == feature)].iloc[0]
    st.caption(f"{md(site)}'s correction of {md(feature)}: {md(cell['meaning'])} · "
               f"{md(distance_text(cell['z'], rule))}{' · marked O' if cell['O'] else ''}.")


lens()
