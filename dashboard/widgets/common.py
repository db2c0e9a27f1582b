"""Streamlit helpers shared by the pages: the store, the run picker, progress, the chosen data.

What must survive a browser reload lives on disk or in the URL: the chosen run is the `run`
query parameter; the chosen data is written to `<store>/.dashboard.json`; jobs are runs in
the store.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import streamlit as st

from dashboard.presenters import figures
from dashboard.access.auth import allowed, least_role
from dashboard.presenters.checkup_view import reaches
from dashboard.presenters.figures import site_colors
from dashboard.presenters.record_tables import progress, run_label, run_name, settings_json
from dashboard.presenters.registry import RUNS, Lens, Page, lens_of
from dashboard.presenters.safe_text import csv_bytes, md
from application import jobs
from fedcore.checkup import CheckUp, Plan
from fedcore.errors import FedcoreError
from fedcore.shapes import ANY, TEXT, Either, MapOf, Record, RunDamaged, required
from fedcore.store import MAX_TAGS, NAME_LENGTH, Run, RunStore, atomic_write_json, read_json

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
# <store>/.dashboard.json (the chosen data, the Runs table's columns, ...); when damaged, the
# dashboard starts again from its defaults (the demo data).
SETTINGS = Record({"data": Record({"ref": required(Either(TEXT, MapOf(ANY))), "label": required(TEXT)})})
TABLE_ROW_PX = 35  # the height of a row of st.dataframe, to size tables that should not scroll


def get_store() -> RunStore:
    return RunStore()


@st.cache_data(show_spinner="Checking every site against the others…", max_entries=8)
def _evaluated(path: str, fingerprint: str) -> CheckUp:
    return Plan(Path(path)).evaluate(get_store())


def checkup_result(plan: Plan) -> CheckUp:
    """A check-up's result, computed again only when its plan or one of its runs' states changes."""
    return _evaluated(str(plan.path), _fingerprint(plan))


def _fingerprint(plan: Plan) -> str:
    """What a check-up's result depends on: its plan and its runs' states."""
    runs = plan.runs(get_store())
    return json.dumps([plan.contents.to_json(), {role: [(r.id, r.status.state) for r in found]
                                                 for role, found in runs.items()}], sort_keys=True, default=str)


@st.cache_data(show_spinner="Working out what 'nothing found' covers…", max_entries=8)
def _reaches(path: str, fingerprint: str) -> list:
    plan = Plan(Path(path))
    return reaches(_evaluated(path, fingerprint), plan.profile)


def checkup_reach(plan: Plan) -> list:
    """Per site and column, how far its median would have to sit to be reported
    (`checkup_view.reaches`), computed again when the check-up's result is."""
    return _reaches(str(plan.path), _fingerprint(plan))


def dashboard_setting(key: str, default: Any = None) -> Any:
    """A choice the dashboard keeps across reloads and restarts, from `<store>/.dashboard.json`."""
    value = read_json(get_store().root / ".dashboard.json", {}, SETTINGS).get(key)
    return default if value is None else value


def save_dashboard_setting(key: str, value: Any) -> None:
    path = get_store().root / ".dashboard.json"
    settings = {**read_json(path, {}, SETTINGS), key: value}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, settings)


def chosen_data() -> dict[str, Any]:
    """The data the Train page will use: {'ref': data reference, 'label': what to call it}."""
    return dashboard_setting("data") or DEMO_DATA


def choose_data(ref: Any, label: str) -> None:
    save_dashboard_setting("data", {"ref": ref, "label": label})


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


def page_link(where: Page, label: str, *, into: Any = None, **options: Any) -> None:
    """A link to `where` (in the container `into`, default the page), drawn only when this
    person's role may open it: a page outside their navigation is not found (Streamlit raises),
    so instead a caption says which role may. Every page link of the dashboard is drawn here."""
    if allowed(where.action):
        (into or st).page_link(where.path, label=label, **options)
    else:
        (into or st).caption(f"{where.title} needs the {least_role(where.action)} role; ask someone who has it.")


def pick_run_or_explain(lens: Lens | None, next_page: Page, next_label: str) -> Run:
    """The page's run picker (the runs `lens` shows, or every run); without any, say what to do
    and stop the page; with a damaged one, say what is wrong and stop."""
    called = lens.runs_called if lens is not None else "Run"
    run = pick_run(lens, called)
    if run is None:
        st.info(f"No {called if lens is not None else 'run'} yet.")
        page_link(next_page, next_label, icon=":material/play_arrow:")
        st.stop()
    stop_if_damaged(run)
    return run


def stop_if_damaged(run: Run) -> None:
    """Show what is wrong with a damaged run's files and stop the page (every other run and
    page is unaffected; the Runs page can delete it)."""
    damage = run.damage
    if damage:
        show_damage(damage)
        page_link(RUNS, "Runs: delete it or pick another", icon=RUNS.icon)
        st.stop()


def show_damage(damage: Sequence[Any], lead: str = "This run's records are damaged, so it cannot be shown") -> None:
    """Which files of a run are damaged and how (the messages name files and types only)."""
    st.error(f"{lead}:\n\n" + "\n".join(f"- {problem}" for problem in damage), icon=":material/broken_image:")


WATCHED = "runs-the-page-shows"  # session key: run id -> where it stood when the page on screen was drawn


def refresh_while_training(runs: Iterable[Run]) -> None:
    """Have the page rerun once any of `runs` moves on (a round, a phase, its end), while one of them
    trains. The app's one timer does it: the sidebar's fragment (shell.active_runs, every 2 s) calls
    `refresh_if_moved`. Pages have no timed fragments of their own: two timed fragments at once made
    Streamlit's front end fail under load ("Bad delta path index") and leave a blank page."""
    standings = {run.id: standing(run) for run in runs}
    if any(state in ACTIVE_STATES for state, *_ in standings.values()):
        st.session_state.setdefault(WATCHED, {}).update(standings)


def standing(run: Run) -> tuple:
    """What a page drawn from `run` shows of where it is: its state, round and phase."""
    status = run.status
    return run.state, status.round, status.phase


def forget_watched() -> None:
    """At every full run, before the page: only the page drawn now asks to be refreshed."""
    st.session_state.pop(WATCHED, None)


def refresh_if_moved(runs: Sequence[Run]) -> None:
    """In the sidebar's timed fragment: rerun the whole app when a run the page on screen shows
    stands elsewhere than when the page was drawn, or has gone."""
    watched = st.session_state.get(WATCHED)
    if not watched:
        return
    now = {run.id: standing(run) for run in runs if run.id in watched}
    if now != watched:
        st.session_state.pop(WATCHED, None)
        st.rerun()


def live(run: Run):
    """Decorator for a page's body that draws `run`: the body under the run's progress, refreshed
    while the run trains (`refresh_while_training`)."""

    def decorate(body):
        def page() -> None:
            refresh_while_training([run])
            show_progress(run)
            try:
                body()
            except RunDamaged as error:  # an array file found damaged on loading
                show_damage(error.damage)

        return page

    return decorate


def site_colors_of(run: Run) -> dict[str, str]:
    """The run's sites' colours (one per site of its federation, the same on every chart)."""
    return site_colors(site_names(run))


def run_colors(runs: list[Run]) -> dict[str, str]:
    """Run id -> the run's colour, the same on every chart that draws these runs."""
    return figures.run_colors({run.id: run.identity.number for run in runs})


def site_names(run: Run) -> list[str]:
    """The run's sites in federation order; none before its data are loaded (a queued run)."""
    return run.federation.site_names


def identity_editor(run: Run, key: str) -> None:
    """Name and tags of a run, editable; stored with the run (identity.json)."""
    identity = run.identity
    name = st.text_input("Name", value=identity.name or "", placeholder=run_name(run), max_chars=NAME_LENGTH,
                         key=f"{key}-name", help="Empty: the run is called by its algorithm and number.")
    known = sorted({tag for other in get_store().runs() for tag in other.identity.tags} | set(identity.tags))
    # Save beside the tags, not below them: the list of tags stays open while one types tags, and
    # covered a button below it.
    tags_column, save_column = st.columns([3, 1], vertical_alignment="bottom")
    tags = tags_column.multiselect("Tags", known, default=identity.tags, accept_new_options=True,
                                   max_selections=MAX_TAGS, key=f"{key}-tags",
                                   help="Type a new tag and press Enter, or pick one other runs have.")
    if save_column.button("Save", key=f"{key}-save", width="stretch", help="Save the name and the tags"):
        try:
            run.set_identity(name, tags)
        except FedcoreError as error:
            st.error(md(error))
        else:
            st.toast("Saved.")
            st.rerun()


def cancel_with_confirmation(container: Any, run: Run, key: str) -> None:
    """A 'Cancel' control in `container` that asks first: it stops a run for good (it cannot be
    resumed), so one stray click must not end an hour of training."""
    with container.popover("Cancel", icon=":material/stop_circle:"):
        info = progress(run)
        where = f" at round {info['round']} of {info['total']}" if info["total"] else ""
        st.markdown(md(f"Stop {run_name(run)}{where}? What it recorded so far is kept; it cannot be resumed "
                       "(re-running starts again at round 1)."))
        if st.button("Yes, cancel it", key=f"{key}-confirm", type="primary"):
            jobs.cancel(run)
            st.toast(md(f"Cancelling {run_name(run)}; what it recorded so far is kept."))
            st.rerun()


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def show_progress(run: Run) -> None:
    """State, a progress bar with round / ETA / latest mean and worst-site F1, or the error."""
    info = progress(run)
    state = info["state"]
    text = f"{STATE_LABELS.get(state, state)}"
    if state == "queued":
        text += " · waiting for a free training slot"
    elif state == "running" and info["round"] == 0:
        text += f" · {info['phase'] or 'starting'}"
    elif info["total"]:
        text += f" · round {info['round']} of {info['total']}"
    text += "".join(f" · {name} F1 {info[key]['f1']:.3f}" for key, name in (("mean", "mean"), ("worst", "worst site"))
                    if info[key].get("f1") is not None)
    if state == "running" and info["eta_s"] is not None:
        text += f" · about {format_duration(info['eta_s'])} left"
    st.progress(min(1.0, info["fraction"]), text=md(text))
    if state in ("failed", "interrupted", "damaged") and info["error"]:
        what = {"failed": "This run failed", "interrupted": "This run was interrupted", "damaged": "This run is damaged"}
        st.error(f"{what[state]}: {md(info['error'])}")


def before_first_round(run: Run) -> str:
    """Why a lens has nothing to draw yet, in words: still waiting for the first evaluated round, or
    the run stopped before it (failed, cancelled, interrupted, damaged: what it said)."""
    if is_active(run):
        return "waiting for the first evaluated round…"
    info = progress(run)
    state = STATE_LABELS.get(info["state"], info["state"])
    why = f" ({info['error']})" if info["error"] else ""
    return (f"the run {state} before its first evaluated round{why}: there is nothing to draw. Re-run it from "
            "Runs or Run details.")


def no_rounds_yet(run: Run) -> None:
    """The lens area of a run without an evaluated round: waiting (information) or stopped (a warning)."""
    text = md(before_first_round(run))
    (st.info if is_active(run) else st.warning)(text[0].upper() + text[1:])


ACTIVE_STATES = ("queued", "running")


def is_active(run: Run) -> bool:
    return run.status.state in ACTIVE_STATES


def download_csv(frame: Any, name: str, label: str = "Download these numbers (CSV)") -> None:
    """A CSV download of `frame`, formula cells neutralised (safe_text.csv_bytes); `frame` may be a
    function that returns it, called only when the button is clicked (a large table)."""
    data = (lambda: csv_bytes(frame())) if callable(frame) else csv_bytes(frame)
    st.download_button(label, data, file_name=f"{name}.csv", mime="text/csv", key=f"download-{name}")


def spec_summary(run: Run) -> str:
    return settings_json(run.spec)
