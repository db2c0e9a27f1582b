"""Showing what data_adapters found in a federation's data, before anything trains."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from dashboard.presenters import figures
from dashboard.access.auth import can_see_rows, rows_refused
from dashboard.widgets.common import download_csv
from dashboard.presenters.safe_text import code, md
from fedcore.checkup import finding_line, untestable_summary
from application.datasets import MISSING_CODE
from fedcore.federation import Federation

DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "bar"}
PREVIEW_ROWS = 5
PREVIEW_SITES = 12  # image sources may be split into up to 100 sites: thumbnails of the first ones
THUMBNAILS = 6
THUMBNAIL_WIDTH = 88


ONE_SITE = ("Only one site: there is nothing to federate and nobody to compare it with. It can still train "
            "(as a single local model), but the lenses need several sites — iFedAvg marks a site only among "
            "three or more. Upload one file per site, or choose the column that names the site.")


def show_alignment(report: dict[str, Any]) -> None:
    """The alignment report of table sites: problems first, then the per-site details."""
    for error in report["errors"]:
        st.error(md(error))
    for warning in report["warnings"]:
        st.warning(md(warning))
    if len(report["sites"]) == 1:
        st.warning(ONE_SITE)
    classes = report["class_names"]
    sites = pd.DataFrame([
        {"site": s["site"], "file": s["file"], "rows": s["rows"], "rows used": s["rows_used"],
         "delimiter": DELIMITERS.get(s["delimiter"], s["delimiter"]), "encoding": s["encoding"],
         **{f"'{c}'": s["class_counts"].get(c, 0) for c in classes}}
        for s in report["sites"]
    ])
    st.markdown(f"**Sites and class balance** (target {code(report['target'])})")
    st.dataframe(sites, hide_index=True, width="stretch")
    left, right = st.columns(2)
    with left:
        st.markdown(f"**Columns** — at every site: {len(report['columns_in_all'])}"
                    f" · at some: {len(report['columns_in_some'])} · at one only: {len(report['columns_in_one'])}"
                    f" · excluded: {md(', '.join(report['excluded'])) or 'none'}")
        for column, where in report["columns_in_some"].items():
            st.caption(f"{code(column)} only at {md(', '.join(where))} (left out)")
        for column, where in report["columns_in_one"].items():
            st.caption(f"{code(column)} only at {md(where)} (left out)")
        kinds = pd.DataFrame([
            {"feature": name, "kind": f["kind"], "how": f["kind_from"], "values": ", ".join(map(str, f.get("values", [])))}
            for name, f in report["features"].items()
        ])
        st.dataframe(kinds, hide_index=True, width="stretch")
    with right:
        st.markdown("**Differences between sites**")
        for conflict in report["type_conflicts"]:
            text = "; ".join(f"{site} (e.g. {', '.join(examples)})" for site, examples in conflict["text_at"].items())
            st.warning(f"{code(conflict['column'])} is numbers at {md(', '.join(conflict['numeric_at']))} but text at "
                       f"{md(text)}: map the text to the numbers (or the other way round) in the mapping step, or "
                       "make the column categorical.")
        for column, values in report["category_differences"].items():
            st.warning(f"{code(column)} has different categories: "
                       + md("; ".join(f"{site}: {', '.join(v)}" for site, v in values.items())))
        if not (report["type_conflicts"] or report["category_differences"]):
            st.success("No type conflicts or category differences.")
        findings = report.get("findings")
        if findings is not None:  # the check-up's data lens on these files
            st.markdown("**What the site check-up finds** (each site's statistics against the other sites'; the same "
                        "checks as a check-up of these files)")
            for finding in findings:
                st.warning(md(finding_line(finding)))
            if not findings:
                st.success("No site's values differ from the others' beyond what they differ among themselves.")
        untestable = untestable_summary(report.get("not_testable") or [])
        if untestable:
            st.caption(md(untestable))
    show_missing(pd.DataFrame(report["missing_share"]).fillna(0.0))


def show_missing(share: pd.DataFrame, note: str = "") -> None:
    """Share of missing values, features (rows) x sites (columns): a heatmap of the features
    with gaps anywhere, and its numbers as CSV."""
    st.markdown("**Missing values** (share of each site's rows)")
    if note:
        st.caption(md(note))
    missing = share.loc[share.max(axis=1) > 0]
    if missing.empty:
        st.caption("No missing values.")
        return
    st.plotly_chart(figures.missing_heatmap(missing), width="stretch", key="missing")
    download_csv(missing.rename_axis("feature").reset_index(), "missing-values",
                 "Download the missing-value shares (CSV)")


def encoded_missing_share(federation: Federation) -> pd.DataFrame:
    """Share of missing values per binary / categorical feature (rows) and site (columns) of a
    loaded federation, counted from iFedAvg's encoding, which stores a missing value of such a
    feature as 0.5 (never a real value of theirs). A gap in a continuous feature becomes 0, the
    mean, and cannot be told from a real value: those features are left out."""
    coded = [j for j, kind in enumerate(federation.feature_kinds) if kind != "continuous"]
    return pd.DataFrame(
        {site.name: (np.concatenate([site.x_train.numpy(), site.x_test.numpy()])[:, coded] == MISSING_CODE).mean(0)
         for site in federation.sites},
        index=[federation.feature_names[j] for j in coded],
    )


def show_site_preview(federation: Federation) -> None:
    """What each site holds, as the model sees it: the first training rows of every site's
    table (after standardisation and missing-value encoding), or its first training images (to
    roles allowed to see rows)."""
    if not can_see_rows():
        st.info(rows_refused())
        return
    classes = np.array(federation.class_names)
    if federation.is_tabular:
        st.markdown(f"**First {PREVIEW_ROWS} training rows of each site** (as the model sees them: standardised, "
                    "missing values encoded; each row is the site's own, named in its first column)")
        frames = [pd.DataFrame(site.x_train[:PREVIEW_ROWS].numpy(), columns=federation.feature_names).round(3)
                  .assign(site=site.name, **{"class": classes[site.y_train[:PREVIEW_ROWS].numpy()]})
                  for site in federation.sites]
        table = pd.concat(frames, ignore_index=True)
        st.dataframe(table[["site", "class", *federation.feature_names]], hide_index=True, width="stretch")
        return
    shown = federation.sites[:PREVIEW_SITES]
    more = f" (the first {len(shown)} of {len(federation.sites)} sites)" if len(federation.sites) > len(shown) else ""
    st.markdown(f"**First {THUMBNAILS} training images of each site**{more}")
    for site in shown:
        st.markdown(f"**{md(site.name)}**")
        st.image([_thumbnail(x) for x in site.x_train[:THUMBNAILS].numpy()],
                 caption=[md(c) for c in classes[site.y_train[:THUMBNAILS].numpy()]], width=THUMBNAIL_WIDTH)


def _thumbnail(image: np.ndarray) -> np.ndarray:
    """C x H x W in [0, 1] -> H x W (grey) or H x W x 3 bytes for st.image."""
    pixels = (np.clip(image, 0.0, 1.0) * 255).round().astype(np.uint8)
    return pixels[0] if pixels.shape[0] == 1 else pixels[:3].transpose(1, 2, 0)


def show_summary(summary: dict[str, Any]) -> None:
    """Rows and class balance per site of a loaded federation (non-table sources)."""
    for warning in summary.get("warnings", []):
        st.warning(md(warning))
    shape = "×".join(map(str, summary["input_shape"]))
    st.markdown(f"**{md(summary['name'])}** · inputs {shape} · classes: {md(', '.join(summary['class_names']))}")
    rows = [{"site": s["name"], "training rows": s["n_train"], "hold-out rows": s["n_test"],
             **{f"'{c}'": a + b if a is not None and b is not None else "not shared"
                for c, a, b in zip(summary["class_names"], s["train_class_counts"], s["test_class_counts"])}}
            for s in summary["sites"]]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    if summary.get("ground_truth"):
        st.markdown("**Injected (recorded) problems**")
        st.dataframe(pd.DataFrame(summary["ground_truth"]), hide_index=True, width="stretch")
