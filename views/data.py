"""Data: choose the federation to train on, and see what is in it before anything trains."""

from pathlib import Path

import pandas as pd
import streamlit as st

from dashboard.access.auth import require
from dashboard.widgets.common import DEMO_DATA, choose_data, chosen_data, page_link
from dashboard.widgets.data_cache import inspect_reference, load_run_federation
from dashboard.widgets.data_report import encoded_missing_share, show_alignment, show_missing, show_site_preview, show_summary
from dashboard.widgets.data_roots import check_reference, data_roots, upload_folder
from dashboard.widgets.mapping_step import draft, keep_draft, mapping_step
from dashboard.presenters.registry import CHECKUP, TRAIN
from dashboard.presenters.safe_text import md
from application.datasets import DEMO_FEATURES as FEATURES
from application.datasets import (ENVIRONMENT, UPLOAD_MAX_BYTES, UPLOAD_STANDARDIZATION, check_upload, default_name,
                              describe_reference, find_datasets, keep_upload)
from fedcore.errors import DataError

SOURCES = ("Synthetic demo federation", "A dataset on this machine", "Upload CSV files (one per site)")
SPLITS = {"iid": "evenly at random (IID)", "dirichlet:0.5": "label skew, Dirichlet α = 0.5",
          "dirichlet:0.1": "strong label skew, Dirichlet α = 0.1", "quantity:0.5": "different sizes (quantity skew)"}

require("choose data")
st.title("Data")
current = chosen_data()
st.caption(f"Training currently uses: **{md(current['label'])}**")
page_link(CHECKUP, "Check up the chosen data: which site has which problem →", icon=CHECKUP.icon)
kept_source = draft().get("source")  # this user's last choice, kept across reloads with the draft
source = st.radio("Where the data come from", SOURCES, horizontal=True, key="source",
                  index=SOURCES.index(kept_source) if kept_source in SOURCES else 0)
draft()["source"] = source


def use_button(ref, label: str, ok: bool = True) -> None:
    """Make `ref` the data the Train page uses."""
    if st.button("Use this data for training", type="primary", disabled=not ok, key="use"):
        choose_data(ref, label)
        st.success(f"Training will use: {md(label)}.")
        page_link(TRAIN, "Go to Train →")


def demo() -> None:
    st.info(
        "**Synthetic data — no real patients.** Eight made-up hospitals triaging suspected sepsis "
        "(outcome: sepsis within 48 h). Four carry a known, injected problem, recorded as ground truth "
        "so the lenses can be checked against it."
    )
    standardization = st.radio(
        "How sites standardise their features", ["reference", "site"], key="demo_standardization",
        format_func={"reference": "with shared reference values (a data dictionary): unit errors stay visible",
                     "site": "each site on its own data (the iFedAvg paper): affine errors disappear"}.get,
    )
    ref = "demo" if standardization == "reference" else "demo:standardization=site"
    federation = load_run_federation(ref)
    injected = {g.site: g.detail for g in federation.ground_truth}
    classes = federation.class_names
    rows = []
    for site in federation.sites:
        counts = (site.y_train.bincount(minlength=len(classes))
                  + site.y_test.bincount(minlength=len(classes))).tolist()
        rows.append({"site": site.name, "rows": sum(counts), "training rows": site.n_train,
                     "hold-out rows": site.n_test, **{f"'{c}'": n for c, n in zip(classes, counts)},
                     "share with sepsis": counts[1] / sum(counts),
                     "injected problem (ground truth)": injected.get(site.name, "none")})
    st.markdown("**Sites and class balance**")
    # Narrow number columns and rows tall enough (over 64 px) for the injected problem to wrap,
    # all rows in view: a problem cut off mid-sentence reads as a different one.
    narrow = {"rows": ("rows", 55), "training rows": ("train", 55), "hold-out rows": ("hold-out", 70),
              "share with sepsis": ("share sepsis", 85)}
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", row_height=66, height=66 * len(rows) + 38,
                 column_config={
                     "site": st.column_config.TextColumn(width=135),
                     **{c: st.column_config.NumberColumn(label, width=w) for c, (label, w) in narrow.items()},
                     "share with sepsis": st.column_config.NumberColumn("share sepsis", format="%.2f", width=85),
                     **{f"'{c}'": st.column_config.NumberColumn(width=70) for c in classes},
                     "injected problem (ground truth)": st.column_config.TextColumn(width=260)})
    left, right = st.columns([1, 2])
    with left:
        st.markdown("**Features**")
        # tall enough for all twelve rows: a scrolled-off feature looks like a missing one
        st.dataframe(pd.DataFrame([{"feature": f.name, "kind": f.kind, "unit": f.unit or "–"} for f in FEATURES]),
                     hide_index=True, height=35 * (len(FEATURES) + 1) + 3)
    with right:
        show_missing(encoded_missing_share(federation),
                     "Counted for the yes/no features (a missing one is stored as 0.5); a gap in a measurement "
                     "becomes the mean before training and cannot be told apart here.")
    show_site_preview(federation)
    use_button(ref, DEMO_DATA["label"] + (" — per-site standardisation" if standardization == "site" else ""))


def on_disk() -> None:
    roots = data_roots()
    found = find_datasets([root for root in roots if root.is_dir()])
    st.caption(f"Data folders this dashboard may read: {md(', '.join(str(root) for root in roots))}. Their "
               f"administrator adds more with {ENVIRONMENT} (README, *Security*); nothing outside them is read.")
    options = [label for label, _ in found] + ["Another folder or file…"]
    choice = st.selectbox("Dataset", options, key="dataset")
    if choice == options[-1]:
        kind = st.selectbox("Layout", ["heart", "har", "vehicle", "npz", "idx", "images"], key="kind",
                            format_func={"heart": "UCI heart disease (processed.*.data)", "har": "UCI HAR",
                                         "vehicle": "vehicle sensor network", "npz": "MedMNIST .npz",
                                         "idx": "MNIST / Fashion-MNIST IDX", "images": "image folders site/class/*.png"}.get)
        path = st.text_input("Path (inside one of the data folders above)", key="path")
        if not path:
            return
        ref = {"source": kind, "path": path}
    else:
        ref = dict(found[options.index(choice)][1])
    if ref["source"] in ("npz", "idx"):
        left, right = st.columns(2)
        ref["split"] = left.selectbox("How to split it into sites", list(SPLITS), format_func=SPLITS.get, key="split")
        ref["sites"] = int(right.number_input("Sites", 2, 100, 4, key="n_sites"))
    try:
        check_reference(ref)  # before anything is opened
        report, ok = inspect_reference(ref)
        if ref["source"] in ("heart", "har", "vehicle"):
            show_alignment(report)
        else:
            show_summary(report)
            st.info("These are images: FedAvg, FedBN, FedHealth2, Local, Centralized and the others train them with "
                    "a small CNN (or a torchvision backbone, see the Train page's settings); inDISCO draws its "
                    "prototype boxes on them. iFedAvg and APFL need tables.")
        if ok:  # tables that do not combine cannot be loaded; the report above says why
            show_site_preview(load_run_federation(ref))
    except DataError as error:
        st.error(md(error))
        return
    use_button(ref, describe_reference(ref), ok=ok)


def upload() -> None:
    st.markdown("One CSV per site (the file name becomes the site's name), or one file with a site column; an Excel "
                "workbook with a sheet per site, or one sheet with a site column. CSV: comma, semicolon or tab "
                "separated, optionally gzipped; most encodings are recognised. Each file "
                "is checked before it is kept; a refused file is not kept at all. Try the synthetic files in "
                "`assets/sample_sites/`.")
    files = st.file_uploader("CSV or Excel files", type=["csv", "tsv", "txt", "data", "tab", "gz", "xlsx"],
                             accept_multiple_files=True, key="files")
    kept = draft().get("upload") or {}
    left_out = ""
    if files:
        contents = {file.file_id: file.getvalue() for file in files}
        checks = {file.file_id: check_upload(file.name, contents[file.file_id]) for file in files}
        accepted = {key: check for key, check in checks.items() if check.ok}
        refused = [check for check in checks.values() if not check.ok]
        for check in refused:
            st.error(md(check.error))
        if refused:
            names = ", ".join(check.name for check in refused)
            if not st.checkbox(md(f"Leave out {names} and go on with the other {len(accepted)} file(s)"),
                               key="leave_out", disabled=not accepted):
                st.info(f"{len(refused)} of {len(checks)} file(s) refused and not kept. Training stays blocked until "
                        "you fix or remove them, or leave them out explicitly: a federation silently missing a site "
                        "would look complete.")
                return
            left_out = f" ({names} left out)"
        paths = [keep_upload(check, contents[key], upload_folder()) for key, check in accepted.items()]
        checked = list(accepted.values())
        listed = [{"name": c.name, "path": str(p)} for c, p in zip(checked, paths)]
        if kept.get("files") != listed:  # other files: their own choices
            kept = draft()["upload"] = {"files": listed, "left_out": left_out}
    elif kept.get("files") and all(Path(f["path"]).is_file() for f in kept["files"]):
        st.info(md(f"Continuing with the files you uploaded: {', '.join(f['name'] for f in kept['files'])} "
                   "(kept, with your choices and decisions, when you leave this page)."))
        if st.button("Start again with other files", key="forget_upload"):
            draft().pop("upload", None)
            keep_draft()
            st.rerun()
        checked = [check_upload(f["name"], Path(f["path"]).read_bytes()) for f in kept["files"]]
        paths = [Path(f["path"]) for f in kept["files"]]
        left_out = kept.get("left_out", "")
    else:
        keep_draft()
        return
    columns = [c for c in checked[0].columns if all(c in check.columns for check in checked)]
    everywhere = columns or list(checked[0].columns)
    layouts = ["one file per site", "a column names the site"]
    layout = st.radio("Sites", layouts, horizontal=True, key="layout",
                      index=layouts.index(kept.get("layout", layouts[0])))
    kept["layout"] = layout
    site_column = None
    if layout == layouts[1]:
        site_column = st.selectbox("Site column", everywhere, key="site_column",
                                   index=everywhere.index(kept["site_column"]) if kept.get("site_column") in everywhere
                                   else 0)
    kept["site_column"] = site_column
    if site_column is None and any(check.sheets > 1 for check in checked):
        names = None  # a workbook with several sheets: one site per sheet, named after it
        st.caption("Sites are named after the workbook's sheets.")
    elif site_column is None:
        given = kept.get("site_names") or [c.site for c in checked]
        names = st.data_editor(pd.DataFrame({"file": [c.name for c in checked], "site": given}),
                               disabled=["file"], hide_index=True, key="site_names")
        kept["site_names"] = list(names["site"])
    left, right = st.columns(2)
    standardization = left.selectbox(
        "Standardisation", UPLOAD_STANDARDIZATION, key="standardization",
        index=UPLOAD_STANDARDIZATION.index(kept.get("standardization", UPLOAD_STANDARDIZATION[0])),
        format_func={"federated": "federated: one mean and SD over all sites (unit and offset differences stay visible)",
                     "site": "each site on its own training rows (iFedAvg paper: affine differences vanish)",
                     "none": "none: values as exported"}.get)
    indicators = right.checkbox("Add a missing-value indicator for every column with gaps", key="indicators",
                                value=bool(kept.get("indicators")))
    kept.update(standardization=standardization, indicators=indicators)
    ref = {"source": "csv", "files": [str(p) for p in paths], "standardization": standardization,
           "missing_indicators": indicators}
    if site_column:
        ref["site_column"] = site_column
    elif names is not None:
        ref["site_names"] = list(names["site"])
    default = default_name([c.name for c in checked])
    ref["name"] = st.text_input("Name of this data (shown wherever it is listed)", kept.get("name") or default,
                                key="data_name").strip() or default
    kept["name"] = ref["name"]
    first = [c for c in checked[0].columns if c != site_column]  # the first file's last column, as a first guess
    try:
        ref = mapping_step(ref, ref["name"], first[-1] if first else "")
        check_reference(ref)
        report, ok = inspect_reference(ref)
    except DataError as error:
        keep_draft()
        st.error(md(error))
        return
    st.subheader("Alignment report")
    show_alignment(report)
    with st.expander("First rows of each file"):
        for check in checked:
            st.caption(md(f"{check.name} ({check.rows} rows)"))
            st.dataframe(check.preview, hide_index=True)
    if ok and len(report["sites"]) < 2:
        st.warning(md(f"Only one site ({report['sites'][0]['site']}): federated learning combines two or more. If you "
                      f"chose more files, the uploader refuses any above {UPLOAD_MAX_BYTES / 1e6:g} MB before they "
                      "reach this page; its list above says so."))
        ok = st.checkbox("Train on this one site anyway", key="one_site")
    use_button(ref, describe_reference(ref) + left_out, ok=ok)
    if not ok:
        st.info("Fix the errors above; nothing has been stored for training.")


{SOURCES[0]: demo, SOURCES[1]: on_disk, SOURCES[2]: upload}[source]()
keep_draft()
