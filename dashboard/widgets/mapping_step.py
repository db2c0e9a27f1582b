"""The Data page's mapping step: after upload, before training, every decision that makes the sites'
exports one study, in the order an analyst takes them:

1. What to predict: the target column, chosen among every site's columns (each offered once with
   every site's spelling of it: `disease` at three sites and `Disease` at one is one choice), the
   column that is the target at each site that spells it otherwise, and — where the sites code it
   differently — which values are the positive class at each site.
2. The suggestions (`application.datasets.map_data`): each pre-filled, accepted (as suggested or
   edited) or rejected; a question (what the data cannot decide) offers its choices and nothing
   is chosen for the analyst.
3. Any other decision by hand: rename a column (to one of the study's columns, or a new name),
   missing-value codes, a value map (across text and numbers too), a conversion (the unit
   catalogue's, or a · x + b), the kind, leaving a column out — at one site or every site.
Every decision says what it will change before it is applied ("23 values at hungary become
missing"); the report below follows every decision.

The decisions are a data dictionary: applied to the sites' tables as they are read (the uploaded
files never change), kept as a file the data reference names (so every run records it),
downloadable, and reusable. The draft — the files, the choices, every decision — is kept per user
(`application.datasets.save_draft`: the signed-in person's own, or local mode's), so it survives a
page change, a reload and a restart. Every user-supplied name is shown through safe_text.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import streamlit as st

from dashboard.access.auth import allowed, current_access
from dashboard.widgets.common import get_store
from dashboard.widgets.data_roots import upload_folder
from dashboard.presenters.safe_text import code, md
from application.datasets import (DICTIONARY_MAX_BYTES, catalogue_conversions, check_dictionary_size, decision,
                              dictionary_bytes, edited_patch, effects_of, empty_dictionary, keep_dictionary,
                              load_draft, map_data, merge, parse_dictionary, save_draft)
from fedcore.errors import DataError

DECISIONS = ("undecided", "accept", "reject")
KIND_WORDS = {"rename": "Map a column", "target": "The target column", "drop": "Leave out a column",
              "convert": "Convert units", "missing": "Missing-value code", "values": "Category codes",
              "kind": "Column kind", "positive": "Positive class"}
VALUE_HELP = {"rename": "the column's name in the study", "target": "the target's name in the study",
              "convert": "a, b in y = a · x + b", "missing": "codes, separated by commas",
              "values": "code=value; code=value", "kind": "continuous, binary or categorical",
              "positive": "the site's values meaning the positive class, separated by commas"}
ACTIONS = {"rename": "rename", "missing": "missing values", "values": "value map", "convert": "convert units",
           "kind": "kind", "drop": "leave out"}
EVERY_SITE = "every site that has it"
LINEAR = "a · x + b, as entered below"
KEPT_MAPPINGS = 6  # file sets whose decisions a user's draft keeps
STATE = "mapping-draft"


# -- the user's draft --------------------------------------------------------------------------------------------
def user_key() -> str:
    """Whose draft: the signed-in person, or local mode's one person at this machine."""
    access = current_access()
    return f"{access.mode}:{access.who}"


def draft() -> dict[str, Any]:
    """This session's draft, read once from the user's kept draft."""
    if STATE not in st.session_state:
        st.session_state[STATE] = load_draft(get_store(), user_key()) or {}
        st.session_state[STATE + ":saved"] = json.dumps(st.session_state[STATE], sort_keys=True)
    return st.session_state[STATE]


def keep_draft() -> None:
    """Write the draft when it changed (every decision, choice or upload)."""
    text = json.dumps(draft(), sort_keys=True)
    if text != st.session_state.get(STATE + ":saved"):
        save_draft(get_store(), user_key(), draft())
        st.session_state[STATE + ":saved"] = text


@st.cache_data(show_spinner="Mapping the sites' columns…", max_entries=32)
def _mapped(ref_json: str, content_json: str) -> dict[str, Any]:
    return map_data(json.loads(ref_json), json.loads(content_json))


@st.cache_data(show_spinner=False, max_entries=64)
def _effects(ref_json: str, content_json: str, patch_json: str) -> list[str]:
    return effects_of(json.loads(ref_json), json.loads(content_json), json.loads(patch_json))


# -- the step ------------------------------------------------------------------------------------------------------
def mapping_step(ref: dict[str, Any], name: str, first_guess: str) -> dict[str, Any]:
    """Show the decisions for the table reference `ref` (no target yet: step 1 chooses it, starting
    from `first_guess`) and return it naming the target and the dictionary the decisions make.
    DataError when the files cannot be read at all."""
    editable = allowed("choose data")
    files = json.dumps({k: ref.get(k) for k in ("files", "site_column", "site_names")}, sort_keys=True)
    prefix = hashlib.sha256(files.encode()).hexdigest()[:10]
    mappings = draft().setdefault("mapping", {})
    state = mappings.setdefault(prefix, {"target": None, "target_columns": {}, "positive": {}, "base": empty_dictionary(),
                                         "manual": [], "known": {}, "order": [], "decisions": {}, "values": {},
                                         "answers": {}, "upload": None})
    mappings.pop(prefix)
    mappings[prefix] = state  # the latest file set last; the oldest beyond KEPT_MAPPINGS go
    for old in list(mappings)[:-KEPT_MAPPINGS]:
        del mappings[old]
    st.subheader("Mapping: the sites' exports as one study")
    st.caption("Your files are never changed: every decision below is a line of a data dictionary, applied as the "
               "files are read. Each decision says what it changes before you apply it; the report further down "
               "follows every one. Your decisions are kept (per user) when you leave this page or reload.")
    _start_from_file(state, editable, prefix)
    guess = _mapped(json.dumps({**ref, "target": state["target"] or first_guess}, sort_keys=True),
                    json.dumps(merge(state["base"], {"name": name}), sort_keys=True))["view"]
    target = _target_step(state, guess, editable, prefix)
    ref = {**ref, "target": target}
    ref_json = json.dumps(ref, sort_keys=True)
    # the target's values as the sites write them: every decision applied but the positive values
    before = _mapped(ref_json, json.dumps(_content(state, name, positive=False)[0], sort_keys=True))
    _remember(state, before["suggestions"])
    _positive_step(state, before, editable, prefix)
    content, problems = _content(state, name)
    mapped = _mapped(ref_json, json.dumps(content, sort_keys=True))
    _remember(state, mapped["suggestions"])
    open_ids = {s["id"] for s in mapped["suggestions"]}
    shown = [state["known"][key] for key in state["order"] if state["known"][key]["kind"] not in ("target", "positive")
             and (key in open_ids or state["decisions"].get(key, "undecided") != "undecided" or key in state["answers"])]
    st.markdown("#### 2 · Suggestions and questions")
    _suggestions(state, shown, problems, editable, prefix)
    st.markdown("#### 3 · Any other decision, by hand")
    _by_hand(state, mapped["view"], ref_json, content, editable, prefix)
    _decided(state, content, name, editable, prefix)
    keep_draft()
    if content == merge(empty_dictionary(), {"name": name, "target": {"column": target}}):
        return ref
    return {**ref, "dictionary": str(keep_dictionary(content, upload_folder()))}


def _remember(state: dict[str, Any], suggestions: list[dict[str, Any]]) -> None:
    """Every suggestion seen, newest content for each, in the order first seen."""
    for suggestion in suggestions:
        if suggestion["id"] not in state["known"]:
            state["order"].append(suggestion["id"])
        state["known"][suggestion["id"]] = suggestion


def _content(state: dict[str, Any], name: str, positive: bool = True) -> tuple[dict[str, Any], dict[str, str]]:
    """The dictionary the decisions make: a started-from file, step 1 (without the positive values
    unless `positive`), the accepted suggestions (as edited), the answered questions, then the
    decisions made by hand."""
    content = merge(state["base"], {"name": name})
    target = state["target"]
    if target:
        content = merge(content, {"target": {"column": target}})
        for site, column in state["target_columns"].items():
            if column and column != target:
                content = merge(content, {"sites": {site: {"rename": {column: target}}}})
    for site, values in state["positive"].items() if positive else ():
        if values is not None:
            names = state.get("positive_names") or {"negative": "0", "positive": "1"}
            content = merge(content, {"target": {**names, "column": target}, "sites": {site: {"positive": values}}})
    problems = {}
    for key, suggestion in state["known"].items():
        if suggestion["kind"] in ("target", "positive"):
            continue
        if suggestion.get("question"):
            chosen = state["answers"].get(key)
            if chosen is not None and chosen < len(suggestion["options"]):
                content = merge(content, suggestion["options"][chosen]["patch"])
            continue
        if state["decisions"].get(key) == "accept":
            try:
                content = merge(content, edited_patch(suggestion, state["values"].get(key, suggestion["value"])))
            except ValueError as error:
                problems[key] = str(error)
    for made in state["manual"]:
        content = merge(content, made["patch"])
    return content, problems


# -- 1: the target -----------------------------------------------------------------------------------------
def _target_step(state: dict[str, Any], view: dict[str, Any], editable: bool, prefix: str) -> str:
    st.markdown("#### 1 · What to predict")
    choices = view["target_choices"]
    names = [c["name"] for c in choices]
    labels = {c["name"]: _choice_label(c, len(view["sites"])) for c in choices}
    guessed = next((c["name"] for c in choices if view["target"] in c["spellings"].values()), names[-1])
    current = state["target"] if state["target"] in names else guessed
    if st.session_state.get("target") not in names:  # another file set's choice
        st.session_state.pop("target", None)
    target = st.selectbox("The target column (the outcome to predict), as the study calls it", names,
                          index=names.index(current), format_func=labels.get, key="target", disabled=not editable)
    if target != state["target"]:
        state["target"], state["target_columns"], state["positive"] = target, {}, {}
    spellings = next(c["spellings"] for c in choices if c["name"] == target)
    columns = view["columns"]
    lacking = [s for s in view["sites"] if s not in (columns.get(target) or {}).get("sites", [])
               and state["target_columns"].get(s) != target]
    for site in lacking:
        own = [c for c, entry in columns.items() if site in entry["sites"]]
        suggested = state["target_columns"].get(site) or spellings.get(site)
        ranked = list(dict.fromkeys([*([suggested] if suggested in own else []), *own]))
        options = ["— choose —", *ranked]
        chosen = st.selectbox(md(f"{site} has no column '{target}': which of its columns is it?"), options,
                              index=options.index(suggested) if suggested in ranked else 0,
                              key=f"target-column-{prefix}-{site}", disabled=not editable)
        state["target_columns"][site] = None if chosen == options[0] else chosen
        if chosen != options[0]:
            st.caption(md(f"{site}'s '{chosen}' becomes '{target}'" + (" (the same name once case, spacing and "
                          "synonyms are set aside)." if spellings.get(site) == chosen else ".")))
        else:
            st.warning(md(f"{site} stays out of the study until its target column is chosen."))
    return target


def _choice_label(choice: dict[str, Any], n_sites: int) -> str:
    spellings = choice["spellings"]
    others = {site: column for site, column in spellings.items() if column != choice["name"]}
    at = [site for site, column in spellings.items() if column == choice["name"]]
    where = "every site" if len(at) == n_sites else ", ".join(at)
    text = f"{choice['name']} — at {where}"
    if others:
        text += "; " + "; ".join(f"'{column}' at {site}" for site, column in others.items())
    missing = n_sites - len(spellings)
    return text + (f"; not at {missing} site(s)" if missing else "")


def _positive_step(state: dict[str, Any], mapped: dict[str, Any], editable: bool, prefix: str) -> None:
    """Where the sites code the target differently: which values are the positive class, per site
    (pre-filled where a suggestion knows)."""
    values = mapped["view"]["target_values"]
    if len({tuple(v) for v in values.values()}) <= 1 and not any(v is not None for v in state["positive"].values()):
        return
    suggested = {s["site"]: s for s in mapped["suggestions"] if s["kind"] == "positive" and s["site"]}
    common = max((tuple(v) for v in values.values()), key=lambda v: (list(values.values()).count(list(v)), -len(v)))
    names = {"negative": common[0], "positive": common[-1]} if len(common) == 2 else {"negative": "0", "positive": "1"}
    for s in suggested.values():
        names = {k: v for k, v in s["patch"].get("target", {}).items() if k != "column"} or names
    state["positive_names"] = names
    st.markdown(f"The target's values differ between the sites: which values mean **{md(names['positive'])}** (the "
                f"positive class; every other value becomes {md(names['negative'])}) at each site?")
    for site, seen in values.items():
        if list(seen) == [names["negative"], names["positive"]] and state["positive"].get(site) is None:
            continue
        default = state["positive"].get(site)
        if default is None and site in suggested and not suggested[site].get("question"):
            default = [v.strip() for v in suggested[site]["value"].split(",")]
        chosen = st.multiselect(md(f"{site}: its values {', '.join(seen)}"), seen,
                                default=[v for v in (default or []) if v in seen], key=f"positive-{prefix}-{site}",
                                disabled=not editable)
        state["positive"][site] = chosen or None
        if site in suggested:
            st.caption(md(suggested[site]["message"]))


# -- 2: suggestions and questions --------------------------------------------------------------------------
def _suggestions(state: dict[str, Any], suggestions: list[dict[str, Any]], problems: dict[str, str], editable: bool,
                 prefix: str) -> None:
    if not suggestions:
        st.success("Nothing to decide: the sites' columns, codes and units agree as far as the checks can tell.")
        return
    undecided = [s["id"] for s in suggestions if not s.get("question")
                 and state["decisions"].get(s["id"], "undecided") == "undecided"]
    open_questions = [s for s in suggestions if s.get("question") and s["id"] not in state["answers"]]

    def accept_all() -> None:
        for key in undecided:
            state["decisions"][key] = "accept"
            st.session_state[f"decide-{prefix}-{key}"] = "accept"

    left, right = st.columns([3, 2])
    left.button(f"Accept the {len(undecided)} undecided suggestion(s) as proposed", on_click=accept_all,
                disabled=not (editable and undecided), key="accept-all")
    if open_questions:
        right.caption(f"{len(open_questions)} question(s) the data cannot decide: yours to answer (accepting the "
                      "suggestions never answers them).")
    for suggestion in suggestions:
        with st.container(border=True):
            if suggestion.get("question"):
                _question(state, suggestion, editable, prefix)
            else:
                _suggestion(state, suggestion, problems, editable, prefix)


def _heading(suggestion: dict[str, Any]) -> str:
    where = f" · {md(suggestion['site'])}" if suggestion["site"] else " · every site"
    return (f"**{KIND_WORDS.get(suggestion['kind'], md(suggestion['kind']))}**{where}"
            + (f" · {code(suggestion['column'])}" if suggestion["column"] else ""))


def _suggestion(state: dict[str, Any], suggestion: dict[str, Any], problems: dict[str, str], editable: bool,
                prefix: str) -> None:
    key = suggestion["id"]
    what, value, choice = st.columns([5, 3, 2])
    what.markdown(_heading(suggestion))
    what.caption(md(suggestion["message"]))
    for line in suggestion.get("effect") or []:
        what.caption("→ " + md(line))
    if suggestion["kind"] != "drop":
        state["values"][key] = value.text_input(VALUE_HELP.get(suggestion["kind"], "proposal"),
                                                state["values"].get(key, suggestion["value"]),
                                                key=f"value-{prefix}-{key}", disabled=not editable)
    decided = state["decisions"].get(key, "undecided")
    state["decisions"][key] = choice.radio("Decision", DECISIONS, index=DECISIONS.index(decided),
                                           key=f"decide-{prefix}-{key}", disabled=not editable,
                                           label_visibility="collapsed")
    if key in problems:
        st.error(md(problems[key]) + " — this decision is not applied until the proposal reads right.")


def _question(state: dict[str, Any], suggestion: dict[str, Any], editable: bool, prefix: str) -> None:
    key = suggestion["id"]
    st.markdown(_heading(suggestion) + " · *a question: the data cannot decide*")
    st.caption(md(suggestion["message"]))
    labels = ["not decided yet", *[option["label"] for option in suggestion["options"]]]
    answered = state["answers"].get(key)
    chosen = st.radio("Your answer", range(len(labels)), index=0 if answered is None else answered + 1,
                      format_func=lambda k: md(labels[k]), key=f"answer-{prefix}-{key}", disabled=not editable)
    if chosen:
        state["answers"][key] = chosen - 1
    else:
        state["answers"].pop(key, None)
    for k, option in enumerate(suggestion["options"], 1):  # what each answer changes, before it is chosen
        lines = "; ".join(option.get("effect") or [])
        if lines:
            st.caption(("**→** " if k == chosen else "→ ") + md(f"{option['label']}: {lines}"))
    if not suggestion["options"]:
        st.caption("No choice fits on the data alone: decide it by hand below.")


# -- 3: by hand ---------------------------------------------------------------------------------------------
def _by_hand(state: dict[str, Any], view: dict[str, Any], ref_json: str, content: dict[str, Any], editable: bool,
             prefix: str) -> None:
    columns = view["columns"]
    target = view["target"]
    # Each decision gets a fresh form: widgets under new keys (a cleared key alone leaves the browser
    # showing the last column, site and decision while the page reads the defaults).
    form = f"{prefix}-{state.setdefault('form', 0)}"
    names = [c for c in columns if c != target]
    if not names:
        return
    n_sites = len(view["sites"])

    def column_label(column: str) -> str:
        entry = columns[column]
        at = "every site" if len(entry["sites"]) == n_sites else ", ".join(entry["sites"])
        kinds = set(entry["kinds"].values())
        read = "numbers" if kinds == {"numeric"} else "text" if kinds == {"text"} else "empty" if kinds == {"empty"} \
            else "numbers at some sites, text at others"
        return f"{column} — at {at} ({read})"

    left, middle, right = st.columns([3, 2, 3])
    column = left.selectbox("Column", sorted(names, key=lambda c: (-len(columns[c]["sites"]), c.lower())),
                            format_func=column_label, key=f"hand-column-{form}", disabled=not editable)
    entry = columns[column]
    action = right.radio("Decision", list(ACTIONS), format_func=ACTIONS.get, horizontal=True,
                         key=f"hand-action-{form}", disabled=not editable)
    sites = [EVERY_SITE, *entry["sites"]] if action != "kind" else [EVERY_SITE]
    site = middle.selectbox("At", sites, key=f"hand-site-{form}", disabled=not editable)
    chosen_sites = entry["sites"] if site == EVERY_SITE else [site]
    shown = "; ".join(f"{s}: {', '.join(entry['values'][s]) or 'no value'}" for s in chosen_sites)
    st.caption(md(f"Values of '{column}' — {shown}"))
    try:
        patch = _hand_patch(action, column, site, chosen_sites, entry, view, form, editable)
    except ValueError as error:
        st.error(md(error))
        return
    if patch is None:
        return
    lines = _effects(ref_json, json.dumps(content, sort_keys=True), json.dumps(patch, sort_keys=True))
    for line in lines:
        (st.error if line.startswith("Refused") else st.info)(md(line))
    refused = any(line.startswith("Refused") for line in lines)
    if st.button("Apply this decision", key=f"hand-apply-{form}", disabled=not editable or refused):
        label = f"{ACTIONS[action]} · {column} · {site if site != EVERY_SITE else 'every site'}"
        state["manual"].append({"label": label, "patch": patch, "effect": lines})
        keep_draft()
        state["form"] += 1
        for key in [k for k in st.session_state if str(k).startswith("hand-") and f"-{form}" in str(k)]:
            del st.session_state[key]  # the old form's widgets are gone
        st.rerun()


def _hand_patch(action: str, column: str, site: str, sites: list[str], entry: dict[str, Any], view: dict[str, Any],
                prefix: str, editable: bool) -> dict[str, Any] | None:
    """The decision the form describes, as a dictionary patch (one per site where it applies at
    every site); None until it is complete."""
    every = site == EVERY_SITE
    if action == "kind":
        kind = st.radio("Kind", ["continuous", "binary", "categorical"], horizontal=True, key=f"hand-kind-{prefix}",
                        disabled=not editable)
        return decision("kind", None, column, kind)
    if action == "drop":
        return decision("drop", None if every else site, column, "")
    if action == "rename":
        study = sorted(c for c, e in view["columns"].items() if c != column and c != view["target"]
                       and not set(e["sites"]) & set(sites))
        options = [*study, "a new name…"]
        chosen = st.selectbox("Becomes the study's column (columns the site(s) do not have)", options,
                              key=f"hand-rename-{prefix}", disabled=not editable)
        if chosen == options[-1]:
            chosen = st.text_input("New name", key=f"hand-new-name-{prefix}", disabled=not editable).strip()
            if not chosen:
                return None
        return _per_site(sites, lambda s: decision("rename", s, column, chosen))
    if action == "missing":
        text = st.text_input("Values meaning 'not measured' (any values, separated by commas)",
                             key=f"hand-missing-{prefix}", disabled=not editable)
        return _per_site(sites, lambda s: decision("missing", s, column, text)) if text.strip() else None
    if action == "values":
        seen = sorted({v for s in sites for v in entry["values"][s] if v != "…"})
        others = sorted({v for s, values in entry["values"].items() if s not in sites for v in values if v != "…"})
        st.caption(md("Each value at the chosen site(s) and the study's value it means"
                      + (f" (the other sites use {', '.join(others)})" if others else "") + "."))
        pairs = []
        for k, value in enumerate(seen):
            left, right = st.columns([1, 2])
            left.markdown(code(value))
            becomes = right.selectbox(md(f"'{value}' means"), ["(keep)", *others, "another value…"],
                                      key=f"hand-value-{prefix}-{k}", disabled=not editable,
                                      label_visibility="collapsed")
            if becomes == "another value…":
                becomes = right.text_input(md(f"'{value}' means"), key=f"hand-value-text-{prefix}-{k}",
                                           disabled=not editable).strip()
            if becomes and becomes != "(keep)" and becomes != value:
                pairs.append(f"{value}={becomes}")
        return _per_site(sites, lambda s: decision("values", s, column, "; ".join(pairs))) if pairs else None
    if action == "convert":
        catalogue = {c["name"]: c for c in catalogue_conversions()}
        chosen = st.selectbox("Conversion (y = a · x + b)", [LINEAR, *catalogue], key=f"hand-convert-{prefix}",
                              disabled=not editable)
        if chosen != LINEAR:
            found = catalogue[chosen]
            return _per_site(sites, lambda s: {"sites": {s: {"convert": {column: found}}}})
        left, right = st.columns(2)
        a = left.number_input("a", value=1.0, format="%.6g", key=f"hand-a-{prefix}", disabled=not editable)
        b = right.number_input("b", value=0.0, format="%.6g", key=f"hand-b-{prefix}", disabled=not editable)
        if a == 1.0 and b == 0.0:
            return None
        return _per_site(sites, lambda s: decision("convert", s, column, f"{a}, {b}"))
    return None


def _per_site(sites: list[str], make) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for site in sites:
        patch = merge(patch, make(site))
    return patch


# -- the decisions so far ----------------------------------------------------------------------------------
def _decided(state: dict[str, Any], content: dict[str, Any], name: str, editable: bool, prefix: str) -> None:
    if state["manual"]:
        st.markdown("**Decisions made by hand**")
        for k, made in enumerate(state["manual"]):
            left, right = st.columns([6, 1])
            left.markdown(md(made["label"]))
            for line in made.get("effect") or []:
                left.caption("→ " + md(line))
            if right.button("Remove", key=f"hand-remove-{prefix}-{k}", disabled=not editable):
                state["manual"].pop(k)
                keep_draft()
                st.rerun()
    left, right = st.columns(2)
    left.download_button("Download the data dictionary", dictionary_bytes(content),
                         file_name=f"{_file_stem(name)}.dictionary.json", mime="application/json",
                         key="dictionary-download")
    right.caption("Use it again: start from it above, or from the command line as "
                  f"{code('csv:a.csv,b.csv,dictionary=FILE')}.")


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
    fingerprint = [upload.name, len(data), hashlib.sha256(data).hexdigest()]
    if state["upload"] == fingerprint:
        return  # already taken in
    try:
        state["base"] = parse_dictionary(data, upload.name)
        state["upload"] = fingerprint
        target = state["base"].get("target", {}).get("column")
        if target:
            state["target"] = target
        st.success(md(f"Started from {upload.name}: its decisions apply; the suggestions below are what is left."))
    except DataError as error:
        st.error(md(error))


def _file_stem(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-")[:60] or "study"
