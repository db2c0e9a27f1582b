"""Data: choose the federation to train on, and see what is in it before anything trains."""

import pandas as pd
import streamlit as st

from dashboard.common import DEMO_DATA, choose_data, chosen_data, get_store
from dashboard.data_cache import inspect_reference, load_run_federation
from dashboard.data_report import (encoded_missing_share, save_uploads, show_alignment, show_missing,
                                   show_site_preview, show_summary)
from dashboard.registry import TRAIN
from fedcore.datasets import DEMO_FEATURES as FEATURES
from fedcore.datasets import describe_reference, find_datasets, read_text_table, search_folders, site_name
from fedcore.errors import DataError

SOURCES = ("Synthetic demo federation", "A dataset on this machine", "Upload CSV files (one per site)")
SPLITS = {"iid": "evenly at random (IID)", "dirichlet:0.5": "label skew, Dirichlet α = 0.5",
          "dirichlet:0.1": "strong label skew, Dirichlet α = 0.1", "quantity:0.5": "different sizes (quantity skew)"}

st.title("Data")
current = chosen_data()
st.caption(f"Training currently uses: **{current['label']}**")
source = st.radio("Where the data come from", SOURCES, horizontal=True, key="source")


def use_button(ref, label: str, ok: bool = True) -> None:
    """Make `ref` the data the Train page uses."""
    if st.button("Use this data for training", type="primary", disabled=not ok, key="use"):
        choose_data(ref, label)
        st.success(f"Training will use: {label}.")
        st.page_link(TRAIN.path, label="Go to Train →")


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
    injected = {g["site"]: g["detail"] for g in federation.ground_truth}
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
    found = find_datasets()
    folders = ", ".join(str(f) for f in search_folders()) or "none of the usual folders exist"
    st.caption(f"Looked in: {folders}. Set FEDCORE_DATA_DIRS to look elsewhere.")
    options = [label for label, _ in found] + ["Another folder or file…"]
    choice = st.selectbox("Dataset", options, key="dataset")
    if choice == options[-1]:
        kind = st.selectbox("Layout", ["heart", "har", "vehicle", "npz", "idx", "images"], key="kind",
                            format_func={"heart": "UCI heart disease (processed.*.data)", "har": "UCI HAR",
                                         "vehicle": "vehicle sensor network", "npz": "MedMNIST .npz",
                                         "idx": "MNIST / Fashion-MNIST IDX", "images": "image folders site/class/*.png"}.get)
        path = st.text_input("Path", key="path")
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
        st.error(str(error))
        return
    use_button(ref, describe_reference(ref), ok=ok)


def upload() -> None:
    st.markdown("One CSV per site (the file name becomes the site's name), or one file with a site column. "
                "Comma, semicolon or tab separated; most encodings are recognised. Try the synthetic files in "
                "`assets/sample_sites/`.")
    files = st.file_uploader("CSV files", type=["csv", "tsv", "txt", "data"], accept_multiple_files=True, key="files")
    if not files:
        return
    paths = save_uploads(files, get_store().root / "_uploads")
    tables = {}
    for path in paths:
        try:
            tables[path] = read_text_table(str(path), 200_000_000)
        except DataError as error:
            st.error(str(error))
    if len(tables) < len(paths):
        st.info("Fix or remove the files above; nothing has been stored for training.")
        return
    columns = [c for c in tables[paths[0]].frame.columns if all(c in t.frame.columns for t in tables.values())]
    everywhere = columns or list(tables[paths[0]].frame.columns)
    layout = st.radio("Sites", ["one file per site", "a column names the site"], horizontal=True, key="layout")
    site_column = st.selectbox("Site column", everywhere, key="site_column") if layout.startswith("a column") else None
    if site_column is None:
        names = st.data_editor(pd.DataFrame({"file": [p.name for p in paths], "site": [site_name(p) for p in paths]}),
                               disabled=["file"], hide_index=True, key="site_names")
    choices = [c for c in everywhere if c != site_column]
    target = st.selectbox("Target (the outcome to predict)", choices, index=len(choices) - 1, key="target")
    exclude = st.multiselect("Leave out columns (identifiers, dates, …)", [c for c in choices if c != target],
                             key="exclude")
    left, right = st.columns(2)
    standardization = left.selectbox(
        "Standardisation", ["site", "none"], key="standardization",
        format_func={"site": "each site on its own training rows (iFedAvg paper)",
                     "none": "none: values as exported (unit differences stay visible)"}.get)
    indicators = right.checkbox("Add a missing-value indicator for every column with gaps", key="indicators")
    ref = {"source": "csv", "files": [str(p) for p in paths], "target": target, "exclude": exclude,
           "standardization": standardization, "missing_indicators": indicators}
    if site_column:
        ref["site_column"] = site_column
    else:
        ref["site_names"] = list(names["site"])
    try:
        report, ok = inspect_reference(ref)
    except DataError as error:
        st.error(str(error))
        return
    st.subheader("Alignment report")
    show_alignment(report)
    with st.expander("First rows of each file"):
        for path, table in tables.items():
            st.caption(f"{path.name} ({len(table.frame)} rows)")
            st.dataframe(table.frame.head(5), hide_index=True)
    use_button(ref, describe_reference(ref), ok=ok)
    if not ok:
        st.info("Fix the errors above; nothing has been stored for training.")


{SOURCES[0]: demo, SOURCES[1]: on_disk, SOURCES[2]: upload}[source]()
