"""Prototypes (inDISCO): where a site's local and the federation's global prototypes look, drawn on
the site's own images; and the bias experiment (a stamp on one site's positive images)."""

import pandas as pd
import streamlit as st

from dashboard.access.auth import allowed, can_see_rows, require, rows_refused
from dashboard.widgets.bias_experiment import preset_choices, preset_specs
from dashboard.widgets.common import (before_first_round, download_csv, get_store, is_active, live, page_link, pick_run,
                              site_names, stop_if_damaged)
from dashboard.widgets.data_roots import submit
from dashboard.presenters.record_tables import run_name
from dashboard.presenters.registry import LENSES, TRAIN
from dashboard.presenters.prototype_images import (
    ALGORITHMS,
    COLOUR_NAMES,
    GLOBAL_SOURCES,
    STAMP_COLOUR,
    load_side,
    local_choices,
    overlap_figure,
    overlap_table,
    holdout_panel,
    render,
    side_title,
    siblings,
    stamp_and_scale,
    top_table,
)
from dashboard.presenters.safe_text import md
from fedcore.errors import FedcoreError
from fedcore.records import Prototypes

TILE_SMALL = 120  # pixels per image in the grids

require("view")
st.title("Prototypes (inDISCO)")
st.markdown(
    "A ProtoPNet classifies an image by how much parts of it look like learned **prototypes**: small "
    "patches typical of each class. Every site can compare, **on its own images**, where its **local** "
    "prototypes look (learned on its data alone) and where the **global** ones look (learned by the federation). "
    "A site whose positive images carry a shortcut — a stamp, a chest drain — has local prototypes on the shortcut; "
    "the global ones look elsewhere."
)

store = get_store()
if allowed("train"):  # the bias experiment trains
    with st.container(border=True):
        st.markdown("#### The bias experiment")
        st.markdown(
            "Four sites with the same kind of images; **site1** gets a small smiley stamped in the top-left corner of "
            "every image of its positive (last) class, training and hold-out. inDISCO trains three ways in the "
            "background — LM (each site alone), GM and PM — a few minutes on a laptop CPU."
        )
        choices = preset_choices()
        label = st.selectbox("Images", list(choices), key="preset_data",
                             help="Synthetic scans show the shortcut within a few rounds; on 28×28 X-rays the lungs are "
                                  "learnt quickly and a short run may not need the stamp.")
        data, synthetic = choices[label]
        if synthetic:
            st.info("SYNTHETIC images: made up in code (an oval 'organ', a faint spot in class 'spot'); no real scan.")
        if st.button("▶ Run the bias experiment (LM, GM and PM)", type="primary", key="preset"):
            try:
                started = [submit(store, spec) for spec in preset_specs(data)]
            except FedcoreError as error:
                st.error(md(error))
            else:  # follow the GM run (the picker is not drawn yet in this run, so its state may change)
                st.session_state["run_picker"] = st.query_params["run"] = started[0].id
                st.rerun()

run = pick_run(LENSES[Prototypes.kind], LENSES[Prototypes.kind].runs_called, key="run_picker")
if run is None:
    st.info("No inDISCO run yet: start the bias experiment above, or train indisco-gm / indisco-pm on the Train page."
            if allowed("train") else "No inDISCO run yet.")
    page_link(TRAIN, "Train", icon=TRAIN.icon)
    st.stop()
stop_if_damaged(run)

group = siblings(store.runs(), run)
scheme = run.spec.algorithm


def switch_run() -> None:
    """Before the rerun: point the run picker (and the URL) at the chosen scheme's run."""
    picked = st.session_state.get(f"scheme-{run.id}")
    if picked in group:
        st.session_state["run_picker"] = st.query_params["run"] = group[picked].id


global_names = [name for name in GLOBAL_SOURCES if name in group]
if scheme in GLOBAL_SOURCES and len(global_names) > 1:  # the GM / PM switch
    st.segmented_control("Global prototypes from (runs on the same data with the same seed)", global_names,
                         default=scheme, format_func=ALGORITHMS.get, key=f"scheme-{run.id}", on_change=switch_run)
else:
    st.caption(ALGORITHMS[scheme])
global_run = run if scheme in GLOBAL_SOURCES else (group[global_names[0]] if global_names else None)
locals_ = local_choices(group)
local_label = st.radio("Local prototypes", list(locals_), key="local_source", horizontal=True) if locals_ else None


@live(run)
def lens() -> None:
    wanted = ([locals_[local_label]] if local_label else []) + ([(global_run, "global")] if global_run else [])
    sides = [side for side in (load_side(*pair) for pair in wanted) if side is not None]
    for waiting, kind in wanted:  # a side whose run has not recorded a round yet (queued, starting, ...)
        if all(side.run.id != waiting.id or side.kind != kind for side in sides):
            (st.info if is_active(waiting) else st.warning)(
                f"{side_title(waiting, kind)} from {md(run_name(waiting))}: {md(before_first_round(waiting))}")
    if not sides:
        return
    first = sides[0]
    # The sites and classes of the run the boxes come from: the picked run may still be queued
    # (runs compare on the same data and seed, so every side has the same sites).
    sites = site_names(first.run)
    classes = first.run.federation.class_names
    stamp, scale = stamp_and_scale(first.arrays)
    st.caption(" · ".join(f"{side.title}: {side.run.spec.algorithm} round {side.round}" + (
        " (still training)" if is_active(side.run) else "") for side in sides)
        + f" · boxes: the pixels at or above the {run.spec.param('box_percentile'):g}th percentile of the "
          "upsampled activation map")
    if run.federation.synthetic:
        st.caption(f"Synthetic images: {md(run.federation.description)}")

    if stamp is not None:
        st.subheader("Boxes on the stamp, site by site")
        table = overlap_table(sides, sites)
        st.plotly_chart(overlap_figure(table, sides), width="stretch", key="overlap")
        st.dataframe(table, hide_index=True, width="stretch",
                     column_config={c: st.column_config.NumberColumn(format="percent" if "images" in c else "%.2f")
                                    for c in table if c.endswith(("images on stamp", "box share"))})
        st.caption("For every hold-out image of a site, the box of the prototype it activates most. *Images on "
                   "stamp*: the share of the site's images whose box lies at least half in the stamp's place (outlined "
                   "in pink on every image, also at sites without a stamp). *Box share*: how much of the box lies "
                   "there, averaged over the images. *Prototypes*: how many prototypes have their own patch, on the "
                   "site's training images, at least half in it. A biased site's prototypes of the other class may "
                   "look at the stamp's place too — on images without it: the stamp's absence is what they recognise.")
        download_csv(table, f"{run.id}-stamp-overlap")

    site = st.selectbox("Site", range(len(sites)), key="site", format_func=lambda i: sites[i] + (
        " (stamped)" if stamp is not None and first.arrays["stamped_site"][i] else ""))
    legend = " and ".join(f"**{side.title}** ({COLOUR_NAMES[side.role]})" for side in sides)
    # every picture below is one of the site's images: its rows
    if not can_see_rows():
        st.info(rows_refused())
    else:
        tests_tab, prototypes_tab, image_tab = st.tabs(["The site's test images", "The prototypes",
                                                        "One image, ten prototypes"])
        rows = [int(r) for r in first.arrays["test_rows"][site] if r >= 0]

        with tests_tab:
            st.markdown(f"Each recorded hold-out image of {md(sites[site])} (this site's own images), once per side, "
                        f"boxed where the prototype it activates most looks: {legend}.")
            columns = st.columns(3)
            for n, row in enumerate(rows):
                picture, caption = holdout_panel(sides, site, row, classes)
                columns[n % 3].image(picture, caption=md(caption))

        with prototypes_tab:
            st.markdown("Every prototype on the training image of its class, at this site, where it is most activated: "
                        "its source patch, boxed.")
            for column, side in zip(st.columns(len(sides)), sides):
                with column:
                    st.markdown(f"**{side.title}**")
                    found = [p for p in range(len(side.arrays["prototype_class"])) if side.get("source_image")[site, p] >= 0]
                    st.image([render(side.get("source_pixels")[site, p], scale, stamp,
                                     [(side.get("source_box")[site, p], side.colour)], tile=TILE_SMALL) for p in found],
                             caption=[md(f"P{p} · {classes[int(side.arrays['prototype_class'][p])]}") for p in found],
                             width=TILE_SMALL)

        with image_tab:
            row = st.selectbox("Hold-out image", rows, key="image", format_func=lambda r: f"hold-out image {r} (class '"
                               f"{classes[int(first.arrays['test_label'][site, first.test_position(site, r)])]}')")
            for column, side in zip(st.columns(len(sides)), sides):
                with column:
                    st.markdown(f"**{side.title}**")
                    t = side.test_position(site, row)
                    if t is None:
                        st.caption("Not among this run's recorded images.")
                        continue
                    table = top_table(side, site, t, classes)
                    st.dataframe(table, hide_index=True, width="stretch",
                                 column_config={c: st.column_config.NumberColumn(format="%.2f") for c in table.columns[3:]})
                    pixels = side.arrays["test_pixels"][site, t]
                    st.image([render(pixels, scale, stamp, [(side.get("test_box")[site, t, r], side.colour)],
                                     heat=side.get("test_heat")[site, t, r], tile=TILE_SMALL) for r in range(len(table))],
                             caption=[md(f"{row['rank']}. {row['prototype']} · {row['class']} · {row['similarity']:.2f}")
                                      for _, row in table.iterrows()], width=TILE_SMALL)
            st.caption("Heat: the prototype's activation on this image (bicubic upsampling, JET colours); box: the pixels "
                       "above the percentile. Connection: the prototype's last-layer weight for the predicted class.")

    scores = [(side, side.record.local_model) for side in sides if side.record.local_model]
    with st.expander("Scores of each site's model on its own hold-out"):
        records = [{"site": s, "model": side.title, **{k: m.get(k) for k in ("balanced_accuracy", "sensitivity",
                                                                            "specificity")}}
                   for side in sides if side.scores is not None for s, m in side.scores.sites.items()]
        records += [{"site": s, "model": f"local models as sent ({side.run.spec.algorithm})", **m}
                    for side, values in scores for s, m in values.items()]
        st.dataframe(pd.DataFrame(records), hide_index=True, width="stretch")


st.caption(f"The pink outline ({STAMP_COLOUR}) marks where the stamp is put, at every site.")
lens()
