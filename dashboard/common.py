"""Streamlit helpers shared by the pages: the store, the run picker, progress, the chosen data.

What must survive a browser reload lives on disk or in the URL: the chosen run is the `run`
query parameter; the chosen data is written to `<store>/.dashboard.json`; jobs are runs in
the store.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import streamlit as st

from dashboard.figures import site_colors
from dashboard.records import progress, run_label
from dashboard.registry import RUNS, Lens, Page, lens_of
from dashboard.safe_text import csv_bytes, md
from fedcore.datasets import inspect_data, load_federation
from fedcore.shapes import ANY, TEXT, Either, MapOf, Record, RunDamaged, required
from fedcore.store import Run, RunStore, atomic_write_json, read_json

STATE_LABELS = {
    "queued": "queued",
    "running": "running",
    "done": "done",
    "failed": "failed",
    "cancelled": "cancelled",
    "interrupted": "interrupted",
    "damaged": "damaged",
}
DEMO_DATA = {"ref": "demo", "label": "Synthetic sepsis triage (demo, 8 hospitals)"}
# <store>/.dashboard.json; when damaged, the dashboard starts again from the demo data.
SETTINGS = Record({"data": Record({"ref": required(Either(TEXT, MapOf(ANY))), "label": required(TEXT)})})


def get_store() -> RunStore:
    return RunStore()


@st.cache_resource(show_spinner="Loading the data…", max_entries=8)
def cached_federation(ref_json: str, seed: int = 0):
    """A federation loaded once per (data reference, seed); the reference as JSON text so that
    dict references can be cache keys."""
    return load_federation(json.loads(ref_json), seed)


def load_run_federation(ref: Any, seed: int = 0):
    return cached_federation(json.dumps(ref, sort_keys=True), seed)


@st.cache_data(show_spinner="Checking the data…", max_entries=16)
def cached_inspection(ref_json: str) -> tuple[dict[str, Any], bool]:
    """`inspect_data` once per data reference (as JSON text), as (report dict, ok): every widget
    on the Data page reruns it, and a 30-site table takes seconds to align."""
    report = inspect_data(json.loads(ref_json))
    return report.to_dict(), report.ok


def inspect_reference(ref: Any) -> tuple[dict[str, Any], bool]:
    return cached_inspection(json.dumps(ref, sort_keys=True))


def chosen_data() -> dict[str, Any]:
    """The data the Train page will use: {'ref': data reference, 'label': what to call it}."""
    return read_json(get_store().root / ".dashboard.json", {}, SETTINGS).get("data") or DEMO_DATA


def choose_data(ref: Any, label: str) -> None:
    path = get_store().root / ".dashboard.json"
    settings = read_json(path, {}, SETTINGS)
    settings["data"] = {"ref": ref, "label": label}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, settings)


def pick_run(lens: Lens | None = None, label: str = "Run", key: str = "run_picker") -> Run | None:
    """A run picker bound to the `run` query parameter (so reloads and links keep it): the runs
    `lens` shows, or every run."""
    runs = [r for r in get_store().runs() if lens is None or lens_of(r) == lens]
    if not runs:
        return None
    ids = [r.id for r in runs]
    wanted = st.query_params.get("run")
    index = ids.index(wanted) if wanted in ids else 0
    labels = {r.id: run_label(r) for r in runs}  # no state here: a selectbox keeps stale option text
    chosen = st.selectbox(label, ids, index=index, format_func=labels.get, key=key)
    if st.query_params.get("run") != chosen:
        st.query_params["run"] = chosen
    return runs[ids.index(chosen)]


def pick_run_or_explain(lens: Lens | None, next_page: Page, next_label: str) -> Run:
    """The page's run picker (the runs `lens` shows, or every run); without any, say what to do
    and stop the page; with a damaged one, say what is wrong and stop."""
    called = lens.runs_called if lens is not None else "Run"
    run = pick_run(lens, called)
    if run is None:
        st.info(f"No {called if lens is not None else 'run'} yet.")
        st.page_link(next_page.path, label=next_label, icon=":material/play_arrow:")
        st.stop()
    stop_if_damaged(run)
    return run


def stop_if_damaged(run: Run) -> None:
    """Show what is wrong with a damaged run's files and stop the page (every other run and
    page is unaffected; the Runs page can delete it)."""
    damage = run.damage
    if damage:
        show_damage(damage)
        st.page_link(RUNS.path, label="Runs: delete it or pick another", icon=RUNS.icon)
        st.stop()


def show_damage(damage: Sequence[Any], lead: str = "This run's records are damaged, so it cannot be shown") -> None:
    """Which files of a run are damaged and how (the messages name files and types only)."""
    st.error(f"{lead}:\n\n" + "\n".join(f"- {problem}" for problem in damage), icon=":material/broken_image:")


def live(run: Run, interval: float = 3.0):
    """Decorator for a page's body: a fragment that shows the run's progress, redraws every
    `interval` seconds while the run trains, and settles the page once it has finished."""
    was_active = is_active(run)

    def decorate(body):
        @st.fragment(run_every=interval if was_active else None)
        def fragment() -> None:
            settle_when_finished(was_active, is_active(run))
            show_progress(run)
            try:
                body()
            except RunDamaged as error:  # an array file found damaged on loading
                show_damage(error.damage)

        return fragment

    return decorate


def run_colors(run: Run) -> dict[str, str]:
    return site_colors([s["name"] for s in run.federation.get("sites", [])])


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def show_progress(run: Run) -> None:
    """State, a progress bar with round / ETA / latest mean and worst-site F1, or the error."""
    info = progress(run)
    state = info["state"]
    scores = "".join(f" · {name} F1 {info[key]['f1']:.3f}" for key, name in (("mean", "mean"), ("worst", "worst site"))
                     if info[key].get("f1") is not None)
    text = f"{STATE_LABELS.get(state, state)} · round {info['round']} of {info['total']}{scores}"
    if state == "running":
        starting = f" · {info['phase']}" if info["round"] == 0 and info["phase"] else " · starting"
        text += f" · about {format_duration(info['eta_s'])} left" if info["eta_s"] is not None else starting
    st.progress(min(1.0, info["fraction"]), text=md(text))
    if state in ("failed", "interrupted", "damaged") and info["error"]:
        what = {"failed": "This run failed", "interrupted": "This run was interrupted", "damaged": "This run is damaged"}
        st.error(f"{what[state]}: {md(info['error'])}")


def is_active(run: Run) -> bool:
    return run.status.get("state") in ("queued", "running")


def settle_when_finished(was_active: bool, active_now: bool) -> None:
    """Inside a fragment that refreshes while training runs: once nothing is training any more,
    rerun the whole page once, so it stops refreshing and every label shows the final state."""
    if was_active and not active_now:
        st.rerun()


def download_csv(frame: Any, name: str, label: str = "Download these numbers (CSV)") -> None:
    """A CSV download of `frame`, formula cells neutralised (safe_text.csv_bytes); `frame` may be a
    function that returns it, called only when the button is clicked (a large table)."""
    data = (lambda: csv_bytes(frame())) if callable(frame) else csv_bytes(frame)
    st.download_button(label, data, file_name=f"{name}.csv", mime="text/csv", key=f"download-{name}")


def spec_summary(run: Run) -> str:
    spec = run.spec
    return json.dumps({k: spec.get(k) for k in ("algorithm", "data", "params", "config")}, indent=2)
