"""The Data page's mapping step: after upload, before training, one decision per problem the
alignment found, each pre-filled with a suggestion (`fedcore.datasets.map_data`) that the analyst
accepts (as suggested or edited) or rejects. The accepted decisions are a data dictionary: applied
to the sites' tables as they are read (the uploaded files never change), kept as a file the data
reference names (so every run records it), downloadable, and reusable by uploading it again or
from the command line (`csv:...,dictionary=FILE`).

Nothing is applied until the analyst decides: a suggestion starts undecided. The report re-runs
on every change; new suggestions may appear once a decision makes a column comparable (a
renamed column's units). Every user-supplied name is shown through safe_text.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import streamlit as st

from dashboard.auth import allowed
from dashboard.data_roots import upload_folder
from dashboard.safe_text import code, md
from fedcore.datasets import (DICTIONARY_MAX_BYTES, check_dictionary_size, dictionary_bytes, edited_patch,
                              empty_dictionary, keep_dictionary, map_data, merge, parse_dictionary)
from fedcore.errors import DataError

DECISIONS = ("undecided", "accept", "reject")
KIND_WORDS = {"rename": "Map a column", "target": "The target column", "drop": "Leave out a column",
              "convert": "Convert units", "missing": "Missing-value code", "values": "Category codes",
              "kind": "Column kind", "positive": "Positive class"}
VALUE_HELP = {"rename": "the column's name in the study", "target": "the target's name in the study",
              "convert": "a, b in y = a · x + b", "missing": "codes, separated by commas",
              "values": "code=value; code=value", "kind": "continuous, binary or categorical",
              "positive": "the site's values meaning the positive class, separated by commas"}
STATE = "mapping"


@st.cache_data(show_spinner="Mapping the sites' columns…", max_entries=32)
def _mapped(ref_json: str, content_json: str) -> tuple[dict[str, Any], bool, list[dict[str, Any]]]:
    return map_data(json.loads(ref_json), json.loads(content_json))


def mapping_step(ref: dict[str, Any], name: str) -> dict[str, Any]:
    """Show the decisions for the table reference `ref` and return it naming the dictionary they
    make (unchanged while nothing is decided). DataError when the files cannot be read at all."""
    editable = allowed("choose data")
    # Decisions belong to these files and this target: another upload starts afresh.
    files = json.dumps({k: ref.get(k) for k in ("files", "target", "site_column", "site_names")}, sort_keys=True)
    prefix = hashlib.sha256(files.encode()).hexdigest()[:10]
    state = st.session_state.setdefault(STATE, {}).setdefault(
        prefix, {"known": {}, "base": empty_dictionary(), "upload": None})
    st.subheader("Mapping: one decision per problem")
    st.caption("Each problem the sites' files show comes with a suggestion. Accept it (edit the proposal first if it "
               "is not quite right) or reject it; the report below follows every decision. Your files are never "
               "changed: the decisions are a data dictionary, applied as the files are read.")
    _start_from_file(state, editable, prefix)
    content = merge(state["base"], {"name": name})
    for _ in range(2):  # a decision can make a column comparable: its new suggestions show at once
        content = merge(state["base"], {"name": name})
        problems = []
        for key, suggestion in state["known"].items():
            decision = st.session_state.get(f"decide-{prefix}-{key}", "undecided")
            if decision == "accept":
                try:
                    content = merge(content, edited_patch(suggestion, st.session_state.get(
                        f"value-{prefix}-{key}", suggestion["value"])))
                except ValueError as error:
                    problems.append((key, str(error)))
        report, ok, suggestions = _mapped(json.dumps(ref, sort_keys=True), json.dumps(content, sort_keys=True))
        fresh = [s for s in suggestions if s["id"] not in state["known"]]
        for suggestion in suggestions:
            state["known"][suggestion["id"]] = suggestion
        if not fresh:
            break
    open_ids = {s["id"] for s in suggestions}
    shown = [s for key, s in state["known"].items()
             if key in open_ids or st.session_state.get(f"decide-{prefix}-{key}", "undecided") != "undecided"]
    _decisions(shown, dict(problems), editable, prefix)
    decided = content != merge(empty_dictionary(), {"name": name})
    left, right = st.columns(2)
    left.download_button("Download the data dictionary", dictionary_bytes(content),
                         file_name=f"{_file_stem(name)}.dictionary.json", mime="application/json",
                         key="dictionary-download")
    right.caption("Use it again: upload it above, or from the command line as "
                  f"{code('csv:a.csv,b.csv,dictionary=FILE')}.")
    if not decided:
        return ref
    return {**ref, "dictionary": str(keep_dictionary(content, upload_folder()))}


def _start_from_file(state: dict[str, Any], editable: bool, prefix: str) -> None:
    # The browser refuses a larger file before sending it; one sent anyway is refused by its size
    # before its bytes are copied out of Streamlit's upload store.
    upload = st.file_uploader("Start from a data dictionary (optional, .dictionary.json)", type=["json"],
                              key=f"dictionary-upload-{prefix}", disabled=not editable,
                              max_upload_size=max(1, math.ceil(DICTIONARY_MAX_BYTES / 2**20)))
    if upload is None:
        return
    try:
        check_dictionary_size(upload.size, upload.name)
    except DataError as error:
        st.error(md(error))
        return
    data = upload.getvalue()
    if state["upload"] == (upload.name, len(data), hash(data)):
        return  # already taken in
    try:
        state["base"] = parse_dictionary(data, upload.name)
        state["upload"] = (upload.name, len(data), hash(data))
        st.success(md(f"Started from {upload.name}: its decisions apply; the suggestions below are what is left."))
    except DataError as error:
        st.error(md(error))


def _decisions(suggestions: list[dict[str, Any]], problems: dict[str, str], editable: bool, prefix: str) -> None:
    if not suggestions:
        st.success("Nothing to decide: the sites' columns, codes and units agree as far as the checks can tell.")
        return
    undecided = [s["id"] for s in suggestions
                 if st.session_state.get(f"decide-{prefix}-{s['id']}", "undecided") == "undecided"]

    def accept_all() -> None:
        for key in undecided:
            st.session_state[f"decide-{prefix}-{key}"] = "accept"

    st.button(f"Accept the {len(undecided)} undecided suggestion(s) as proposed", on_click=accept_all,
              disabled=not (editable and undecided), key="accept-all")
    for suggestion in suggestions:
        key = suggestion["id"]
        with st.container(border=True):
            what, value, decision = st.columns([5, 3, 2])
            where = (f" · {md(suggestion['site'])}" if suggestion["site"] else " · every site")
            what.markdown(f"**{KIND_WORDS.get(suggestion['kind'], md(suggestion['kind']))}**{where}"
                          + (f" · {code(suggestion['column'])}" if suggestion["column"] else ""))
            what.caption(md(suggestion["message"]))
            if suggestion["kind"] != "drop":
                value.text_input(VALUE_HELP.get(suggestion["kind"], "proposal"), suggestion["value"],
                                 key=f"value-{prefix}-{key}", disabled=not editable)
            decision.radio("Decision", DECISIONS, key=f"decide-{prefix}-{key}", horizontal=False, disabled=not editable,
                           label_visibility="collapsed")
            if key in problems:
                st.error(md(problems[key]) + " — this decision is not applied until the proposal reads right.")


def _file_stem(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-")[:60] or "study"
