"""Showing what data_adapters found in a federation's data, before anything trains."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import figures

DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "bar"}


def show_alignment(report: dict[str, Any]) -> None:
    """The alignment report of table sites: problems first, then the per-site details."""
    for error in report["errors"]:
        st.error(error)
    for warning in report["warnings"]:
        st.warning(warning)
    classes = report["class_names"]
    sites = pd.DataFrame([
        {"site": s["site"], "file": s["file"], "rows": s["rows"], "rows used": s["rows_used"],
         "delimiter": DELIMITERS.get(s["delimiter"], s["delimiter"]), "encoding": s["encoding"],
         **{f"'{c}'": s["class_counts"].get(c, 0) for c in classes}}
        for s in report["sites"]
    ])
    st.markdown(f"**Sites and class balance** (target `{report['target']}`)")
    st.dataframe(sites, hide_index=True, width="stretch")
    left, right = st.columns(2)
    with left:
        st.markdown(f"**Columns** — at every site: {len(report['columns_in_all'])}"
                    f" · at some: {len(report['columns_in_some'])} · at one only: {len(report['columns_in_one'])}"
                    f" · excluded: {', '.join(report['excluded']) or 'none'}")
        for column, where in report["columns_in_some"].items():
            st.caption(f"`{column}` only at {', '.join(where)} (left out)")
        for column, where in report["columns_in_one"].items():
            st.caption(f"`{column}` only at {where} (left out)")
        kinds = pd.DataFrame([
            {"feature": name, "kind": f["kind"], "how": f["kind_from"], "values": ", ".join(map(str, f.get("values", [])))}
            for name, f in report["features"].items()
        ])
        st.dataframe(kinds, hide_index=True, width="stretch")
    with right:
        st.markdown("**Differences between sites**")
        for conflict in report["type_conflicts"]:
            st.warning(conflict if isinstance(conflict, str) else str(conflict))
        for column, values in report["category_differences"].items():
            st.warning(f"`{column}` has different categories: "
                       + "; ".join(f"{site}: {', '.join(v)}" for site, v in values.items()))
        for outlier in report["location_outliers"]:
            st.warning(f"`{outlier['column']}` at **{outlier['site']}**: median {outlier['median']:g}, other sites "
                       f"{outlier['others_median']:g} — a different unit or code?")
        if not (report["type_conflicts"] or report["category_differences"] or report["location_outliers"]):
            st.success("No type conflicts, category differences or far-off columns.")
    missing = pd.DataFrame(report["missing_share"]).fillna(0.0)
    missing = missing.loc[missing.max(axis=1) > 0]
    st.markdown("**Missing values** (share of each site's rows)")
    if missing.empty:
        st.caption("No missing values.")
    else:
        st.plotly_chart(figures.missing_heatmap(missing), width="stretch", key="missing")


def show_summary(summary: dict[str, Any]) -> None:
    """Rows and class balance per site of a loaded federation (non-table sources)."""
    for warning in summary.get("warnings", []):
        st.warning(warning)
    shape = "×".join(map(str, summary["input_shape"]))
    st.markdown(f"**{summary['name']}** · inputs {shape} · classes: {', '.join(summary['class_names'])}")
    rows = [{"site": s["name"], "training rows": s["n_train"], "hold-out rows": s["n_test"],
             **{f"'{c}'": a + b for c, a, b in zip(summary["class_names"], s["train_class_counts"],
                                                   s["test_class_counts"])}}
            for s in summary["sites"]]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    if summary.get("ground_truth"):
        st.markdown("**Injected (recorded) problems**")
        st.dataframe(pd.DataFrame(summary["ground_truth"]), hide_index=True, width="stretch")


def save_uploads(files: list, folder: Path) -> list[Path]:
    """Write uploaded files under `folder/<digest of their contents>/` (same upload, same place),
    keeping their names; returns the paths."""
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode())
        digest.update(file.getvalue())
    target = folder / digest.hexdigest()[:16]
    target.mkdir(parents=True, exist_ok=True)
    paths = []
    for file in files:
        path = target / re.sub(r"[^A-Za-z0-9._-]+", "_", Path(file.name).name)
        if not path.exists():
            path.write_bytes(file.getvalue())
        paths.append(path)
    return paths
