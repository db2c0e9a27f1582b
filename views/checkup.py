"""Check-up: which site has which problem, from every lens, with calibrated evidence.

A check-up (`fedcore.checkup`) is kept in the store: the data lens (every site's federated
statistics) is there as soon as it starts; the model lenses fill in as their runs finish, and this
page redraws itself while they train. The chosen check-up is the `checkup` query parameter.
"""

import streamlit as st

from dashboard.access.auth import allowed, require
from dashboard.presenters.checkup_view import (CALIBRATION, CALIBRATION_DETAILS, DATA_LENS, NOT_CHECKED, Evidence,
                                    evidence_figure, evidence_text, findings_frame, grid, grid_figure, lens_notes,
                                    NOW, q_label, REACHED, reach_frame, reach_note, reach_summary, readable, reported_frame,
                                    run_names, sharing_frame, strength, with_names)
from dashboard.widgets.common import (STATE_LABELS, checkup_reach, checkup_result, chosen_data, download_csv,
                              format_duration, get_store, page_link, refresh_while_training)
from dashboard.widgets.data_roots import check_up_run, start_checkup, train_lenses
from dashboard.presenters.figures import site_colors
from dashboard.presenters.record_tables import progress, run_label, run_name
from dashboard.presenters.registry import DATA, page_of
from dashboard.presenters.report import checkup_report
from dashboard.presenters.safe_text import md
from fedcore.checkup import ROLE_LENSES, Plan, plans, training_estimate
from fedcore.errors import FedcoreError, RunNotFound
from fedcore.interpret.disclosure import DEFAULT_MIN_COUNT, MIN_COUNT_FLOOR
from fedcore.glossary import COLUMNS, plain, term
from fedcore.interpret.findings import FDR

SHOWN_FIRST = 15  # findings listed before "show all"

require("view")
store = get_store()
st.title("Site check-up")
st.markdown(
    "Which site has which problem? Every lens looks at every site and compares it with the others: the sites' "
    "own statistics of their data (no row leaves a site) and what federated models learn there. Each cell of the "
    "grid says what a lens found at a site; below it, the findings in plain words, strongest first, each with the "
    "evidence behind it."
)


def show(plan: Plan) -> None:
    """Open `plan` (a new check-up) in the picker below, on the next run of the page. Through the
    session: a query parameter written just before `st.rerun()` is lost (the run starts again from
    the address the browser sent), and the page kept showing the check-up before."""
    st.session_state["checkup_new"] = plan.id
    st.rerun()


def estimate_text(kind: str, data, replicates: int, rounds: int) -> str:
    """How long the model lenses would train, and what the figure rests on."""
    estimate = training_estimate(store, kind, data, replicates, rounds)
    if estimate is None:
        return "No finished run in this store to time the training by yet."
    return f"About {format_duration(estimate.seconds)} of training, run after run (from {estimate.basis})."


def lens_settings(key: str, kind: str, data) -> tuple[int, int, str]:
    """Replicate runs and rounds of the model lenses' runs, with the time they would take."""
    columns = st.columns(2)
    replicates = int(columns[0].number_input(f"{plain('replicate runs').capitalize()} of iFedAvg", 2, 10, 3,
                                             key=f"{key}_replicates",
                                             help="Seeds of the feature-shift lens: their spread is the training "
                                                  "noise a finding must stand out from (replicate runs)."))
    rounds = int(columns[1].number_input("Rounds per run", 10, 2000, 300, step=10, key=f"{key}_rounds"))
    return replicates, rounds, estimate_text(kind, data, replicates, rounds)


def newest_kind(data) -> str:
    """'table' or 'image': what the newest check-up of the same data was (a table when none)."""
    return next((p.kind for p in plans(store) if p.contents.data == data), "table")


def start() -> None:
    """Start a check-up of the chosen data, or of a finished run's federation (analysts)."""
    with st.expander("Start a check-up", expanded=not plans(store) or "run" in st.query_params):
        runs = [r for r in store.runs() if r.status.state == "done"]
        wanted = st.query_params.get("run")
        options = ["data", "run"] if runs else ["data"]
        source = st.radio("What to check up", options, horizontal=True, key="checkup_source",
                          index=1 if wanted in [r.id for r in runs] and len(options) > 1 else 0,
                          format_func={"data": "The chosen data (Data page)",
                                       "run": "A finished run's federation (e.g. a Flower run)"}.get)
        if source == "data":
            data = chosen_data()
            st.markdown(f"Data: **{md(data['label'])}** · change it on the Data page.")
            # Off by default: the data lens answers in seconds; the model lenses take minutes of the
            # machine's training slots, and a check-up without them can add them later (below the grid).
            train = st.checkbox("Train the model lenses too", value=False, key="checkup_train",
                                help="Without: only the data lens (seconds). With: iFedAvg on several seeds, "
                                     "FedAvg, AdaFed and FedHealth2 (inDISCO for images) train as jobs.")
            replicates, rounds, estimate = lens_settings("checkup", newest_kind(data["ref"]), data["ref"])
            st.caption(("" if train else "The model lenses, if ticked: ") + md(estimate))
            st.markdown("**What each site may share** (its disclosure policy; README, *Disclosure control*)")
            policy_columns = st.columns(3)
            policy = policy_columns[0].number_input(
                "Smallest group a shared statistic may describe", MIN_COUNT_FLOOR, 100_000, DEFAULT_MIN_COUNT,
                key="checkup_min_count", help="Statistics of fewer rows (a class, a feature's recorded values) stay "
                "at the site and their cells say 'not testable: not shared'; quantiles come from blocks of at least this many "
                "values.")
            epsilon = policy_columns[2].number_input("ε per release", 0.01, 1000.0, 10.0, key="checkup_epsilon",
                                                     disabled=not st.session_state.get("checkup_dp", False))
            noisy = policy_columns[1].checkbox("Add noise (differential privacy)", key="checkup_dp",
                                               help="Laplace noise on every value statistic: ε-differentially private "
                                                    "per release; costs the data lens much of its power on small sites.")
            disclosure = {"min_count": int(policy), "dp_epsilon": float(epsilon) if noisy else None}
            if st.button("Start the check-up", type="primary", key="checkup_start"):
                try:
                    with st.spinner("Reading every site's statistics…"):
                        plan = start_checkup(store, data["ref"], replicates, rounds, train, disclosure)
                except FedcoreError as error:
                    st.error(md(error))
                else:
                    show(plan)
        else:
            ids = [r.id for r in runs]
            labels = {r.id: run_label(r) for r in runs}
            chosen = st.selectbox("Run", ids, index=ids.index(wanted) if wanted in ids else 0, format_func=labels.get,
                                  key="checkup_run")
            st.caption("The run's own statistics of its sites (a Flower run's come from the sites themselves) are the "
                       "data lens; the run feeds the lens its algorithm records. Nothing is trained.")
            if st.button("Check up this run's federation", type="primary", key="checkup_from_run"):
                try:
                    plan = check_up_run(store, store.get(chosen))
                except (FedcoreError, OSError, ValueError, KeyError) as error:
                    st.error(md(f"This run's federation cannot be checked up: {error}"))
                else:
                    show(plan)


if allowed("train"):
    start()
found = plans(store)
if not found:
    st.info("No check-up yet." + (" Start one above: the data lens takes seconds." if allowed("train")
                                   else " Someone with the analyst role can start one."))
    page_link(DATA, "Choose the data on the Data page", icon=":material/table:")
    st.stop()

ids = [p.id for p in found]
new = st.session_state.pop("checkup_new", None)
wanted = new or st.query_params.get("checkup")
plan_labels = {p.id: f"{p.contents.label or p.contents.data} · {p.id}" for p in found}
if new in ids:
    st.session_state["checkup_picker"] = new  # the picker would keep the check-up it showed before
chosen_id = st.selectbox("Check-up", ids, index=ids.index(wanted) if wanted in ids else 0,
                         format_func=plan_labels.get, key="checkup_picker")
if st.query_params.get("checkup") != chosen_id:
    st.query_params["checkup"] = chosen_id
plan = found[ids.index(chosen_id)]
names = run_names(plan, store)


def training(plan: Plan) -> None:
    """The runs feeding the model lenses: progress while they train, the reason when one failed."""
    runs = plan.runs(store)
    missing = sum(len(ids) for ids in plan.contents.runs.values()) - sum(map(len, runs.values()))
    for role, found_runs in runs.items():
        for run in found_runs:
            info = progress(run)
            state = info["state"]
            feeds = f"{run_name(run)} for the {' and '.join(ROLE_LENSES.get(role, (role,)))} lens"
            if state in ("queued", "running"):
                st.progress(min(1.0, info["fraction"]), text=md(
                    f"{feeds}: {STATE_LABELS.get(state, state)}, round {info['round']} of "
                    f"{info['total']} (seed {run.spec.seed})"))
            elif state != "done":
                st.warning(md(f"{feeds}: {STATE_LABELS.get(state, state)}"
                              + (f" ({info['error']})" if info["error"] else "")
                              + "; its lens stays unchecked. Start a new check-up to train it again."))
    if missing > 0:
        st.warning(f"{missing} of this check-up's runs have been deleted; their lenses stay unchecked.")


def checkup() -> None:
    refresh_while_training(run for found_runs in plan.runs(store).values() for run in found_runs)
    result = checkup_result(plan)
    profile = plan.profile
    kind = plan.kind
    colors = site_colors(result.sites)
    if result.pending:
        lenses = sorted({lens for role in result.pending for lens in ROLE_LENSES.get(role, ())})
        st.info(md(f"Still training for: {', '.join(lenses)}. Those columns fill in as their runs finish; "
                   "this page updates itself."))
    training(plan)
    for note in lens_notes(result, kind, profile):
        st.info(md(note))
    st.markdown(f"**{len(result.reported)} findings** at a {FDR:.0%} false discovery rate · "
                f"{len(result.sites)} sites · "
                f"{result.tested} cells tested" + (f", {len(result.untestable())} not testable"
                                                    if result.untestable() else ""))
    table = grid(result, kind)
    st.plotly_chart(grid_figure(table), width="stretch", key="checkup_grid")
    if profile is not None:
        st.caption("Green, “nothing found”: nothing at that site passed the calibration, which is not the same as "
                   "nothing differing there. How far each column would have to shift before it is reported is listed "
                   "just below, per site.")
        with st.expander("What each site shared (disclosure control)"):
            st.caption("No row leaves a site. Each site releases statistics at its own disclosure policy: a "
                       "statistic of a group smaller than its minimum stays at the site, quantiles come from blocks "
                       "of at least that many values, rounded. A test that needs a withheld statistic is listed as "
                       "not testable with the reason, never as 'nothing found'.")
            st.dataframe(sharing_frame(profile), hide_index=True, width="stretch")
        covered(plan, profile)
    if not plan.contents.runs and allowed("train"):
        add_lenses(plan)
    with st.expander("How the check-up decides (calibration)"):
        st.markdown(CALIBRATION)
        st.caption(CALIBRATION_DETAILS)
        st.markdown("Where each lens comes from:\n" + "\n".join(
            f"- {lens}: {md(with_names(source, names))}" for lens, source in result.sources.items()))
    findings(result, Evidence(profile, result.findings, colors))
    st.subheader("Export")
    exports = st.columns(3)
    with exports[0]:
        download_csv(reported_frame(result), f"checkup-{plan.id}-findings", "The findings (CSV)")
    with exports[1]:
        download_csv(table.frame(), f"checkup-{plan.id}-grid", "The grid (CSV)")
    # built only when clicked: the report carries plotly.js (a few MB) so it opens offline
    with exports[2]:
        st.download_button("A self-contained HTML report", lambda: checkup_report(plan, store).encode("utf-8"),
                           file_name=f"checkup-{plan.id}.html", mime="text/html", key="checkup_report")
    with st.expander(f"Every tested cell ({result.tested}), with its p- and q-value"
                     + (", and every cell that could not be tested, with the reason" if result.untestable() else "")):
        st.caption("What was not significant, or too small to matter, is a result too. p: the chance of a value at "
                   "least this extreme if the site were like the others; q: the false discovery rate at which the "
                   f"cell would be reported ({term('Benjamini–Hochberg')} over the cells of its family of checks).")
        every = findings_frame(result.findings)
        # the messages only in the CSV: tens of thousands of sentences (HAR) would make the page slow
        st.dataframe(readable(every, names).drop(columns=["message"]), hide_index=True, width="stretch",
                     column_config={COLUMNS["q"]: st.column_config.NumberColumn(format="%.2g"),
                                    COLUMNS["p"]: st.column_config.NumberColumn(format="%.2g"),
                                    COLUMNS["effect"]: st.column_config.NumberColumn(format="%.3g")})
        download_csv(lambda: every, f"checkup-{plan.id}-every-cell", "Every tested cell, with its message (CSV)")


def covered(plan: Plan, profile) -> None:
    """What a 'nothing found' covers: per site, how far a column's median would have to move."""
    with st.expander("What “nothing found” covers: how far a column would have to shift to be reported"):
        found = checkup_reach(plan)
        st.caption(md(reach_note()))
        st.dataframe(reach_summary(found), hide_index=True, width="stretch")
        every = reach_frame(found, profile)
        st.dataframe(every, hide_index=True, width="stretch", height=min(400, 38 + 35 * len(every)),
                     column_config={REACHED: st.column_config.NumberColumn(format="%.2f"),
                                    NOW: st.column_config.NumberColumn(format="%+.2f")})
        download_csv(every, f"checkup-{plan.id}-reach", "Every site and column (CSV)")


def add_lenses(plan: Plan) -> None:
    """A check-up of the data lens alone: train its model lenses now, into the same check-up."""
    with st.expander("Add the model lenses to this check-up"):
        st.caption("iFedAvg on several seeds, FedAvg, AdaFed and FedHealth2 (inDISCO for images) train as jobs; "
                   "their columns fill in as each run finishes.")
        replicates, rounds, estimate = lens_settings("add_lenses", plan.kind, plan.contents.data)
        st.caption(md(estimate))
        if st.button("Train the model lenses", key="add_lenses"):
            try:
                train_lenses(store, plan, replicates, rounds)
            except FedcoreError as error:
                st.error(md(error))
            else:
                st.rerun()


def findings(result, evidence: Evidence) -> None:
    """The ranked findings, each with the data behind it and, for a model lens, a link to its page."""
    st.subheader("Findings, strongest first")
    if not result.reported:
        checked = ", ".join(result.lenses_checked()) or NOT_CHECKED
        st.success(md(f"No site stands out from the others in any lens checked ({checked})."))
        return
    many = len(result.reported) > SHOWN_FIRST
    everything = st.toggle(f"Show all {len(result.reported)}", key="checkup_all") if many else True
    for rank, finding in enumerate(result.reported if everything else result.reported[:SHOWN_FIRST], start=1):
        where = f" · {finding.feature}" if finding.feature else ""
        with st.container(border=True):
            st.markdown(f"**{rank}. {md(finding.site)}** · {md(finding.lens)}{md(where)} · **{md(finding.title)}** · "
                        f"{q_label(finding.q)} ({strength(finding.q)} evidence)")
            st.markdown(md(finding.message))
            extra = evidence_text(finding)
            if extra:
                st.caption(md(extra))
            if finding.lens != DATA_LENS:
                drill_down(finding, rank)
            figure = evidence_figure(finding, evidence)
            if figure is not None and st.toggle("Show the data behind it", key=f"evidence-{rank}", value=rank <= 3):
                st.plotly_chart(figure, width="stretch", key=f"evidence-figure-{rank}")
            for agree in result.agreeing_with(finding):  # other lenses that see the same
                st.markdown(f"Agrees: **{md(agree.lens)}** · {md(agree.title)} · {q_label(agree.q)} — "
                            f"{md(agree.message)}")
                drill_down(agree, rank)


def drill_down(finding, rank: int) -> None:
    """A link to the lens page of the run the finding came from, saying where to look."""
    run_ids = [part.strip() for part in str(finding.evidence.get("run") or "").split(",") if part.strip()]
    if not run_ids:
        return
    try:
        run = store.get(run_ids[0])
    except RunNotFound:
        st.caption(md(f"The run it came from ({names.get(run_ids[0], run_ids[0])}) is no longer in the store."))
        return
    page = page_of(run)
    if finding.lens == "feature shifts":
        layer = finding.evidence.get("layer", "b_in")
        look = f"the cell of {finding.site} × {finding.feature} in the {term(layer)} layer"
    elif finding.kind == "output_shift":
        look = f"{finding.site}'s row in the {term('w_out')} layer"
    else:
        look = f"{finding.site}"
    replicates = f" (and {len(run_ids) - 1} repeat run(s) with other seeds)" if len(run_ids) > 1 else ""
    page_link(page, md(f"Open {page.title} for {run_name(run)}{replicates}: look at {look}"),
              query_params={"run": run.id}, icon=":material/open_in_new:")


checkup()
