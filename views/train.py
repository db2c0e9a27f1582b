"""Train: pick algorithms and their main settings, launch them as background jobs, watch them."""

from dataclasses import fields

import streamlit as st

from dashboard.access.auth import require
from dashboard.widgets.common import chosen_data, get_store, page_link, refresh_while_training, show_progress
from dashboard.presenters.lenses import LAYER_GUIDE
from dashboard.presenters.registry import DATA, page_of
from dashboard.widgets.forms import field_input, params_inputs
from dashboard.widgets.data_roots import submit
from dashboard.presenters.record_tables import run_label
from dashboard.presenters.safe_text import md
from fedcore.config import TrainConfig
from fedcore.data_labels import data_label
from application.datasets import data_kind
from fedcore.errors import FedcoreError
from application.runner import algorithms, runs_over_flower

REGISTRY = algorithms()

MAIN_SETTINGS = ("rounds", "local_epochs", "batch_size", "lr", "momentum", "seed")

require("train")
store = get_store()
st.title("Train")
where = st.radio("Where the sites train", ("here", "flower"), horizontal=True, key="where",
                 format_func={"here": "Here, simulated, on the chosen data",
                              "flower": "A Flower federation: each site on its own machine, with its own data"}.get)
if where == "here":
    data = chosen_data()
    left, right = st.columns([3, 1])
    left.markdown(f"**Data:** {md(data.get('label') or data_label(data['ref']))}")
    page_link(DATA, "Change the data", into=right, icon=DATA.icon)
    images = data_kind(data["ref"]) == "image"
    kind = "image" if images else "table"
    offered = [name for name, cls in REGISTRY.items() if kind in cls.inputs]
    if images:
        st.caption("Images: the models are a small CNN with BatchNorm (or the backbone chosen under *More training "
                   "settings*); inDISCO trains a ProtoPNet on it. iFedAvg and APFL need tables.")
else:
    st.markdown("Each site runs a Flower SuperNode next to its data and connects to a SuperLink; the run "
                "waits for the sites, trains through them and shows here like any run. No row leaves a site. "
                "How to start the SuperLink and the sites: README, *Real federations over Flower* "
                "(`make flower-demo` plays it on this machine).")
    slots = st.columns([2, 1, 2])
    superlink = slots[0].text_input("SuperLink address", "127.0.0.1:9093", key="superlink",
                                    help="HOST:PORT of the SuperLink (its --port).")
    sites = slots[1].number_input("Sites to wait for", min_value=1, value=2, step=1, key="flower_sites",
                                  help="The run starts once this many SuperNodes are connected.")
    server_data = slots[2].text_input("The server's own data (optional)", "", key="server_data",
                                      help="A data reference on this machine: AdaFed's server test set.")
    data = {"ref": {"source": "flower", "superlink": superlink.strip(), "sites": int(sites),
                    **({"server_data": server_data.strip()} if server_data.strip() else {})}}
    st.caption("Over Flower: FedHealth2 runs its f-variant (set variant to f); AdaFed scores the sites' models "
               "on the server's own data (server test 'given' and the server's data above).")
    offered = [name for name, cls in REGISTRY.items() if runs_over_flower(cls)]

chosen = st.multiselect(
    "Algorithms (several run side by side on the same data, one background job each)",
    offered, default=["ifedavg" if "ifedavg" in offered else "indisco-pm"],
    format_func=lambda name: f"{REGISTRY[name].title} — {REGISTRY[name].summary}",
)

st.markdown("**Training settings** (defaults: the iFedAvg paper's protocol, used for every algorithm)")
config_fields = {f.name: f for f in fields(TrainConfig)}
config = {}
slots = st.columns(len(MAIN_SETTINGS))
for slot, name in zip(slots, MAIN_SETTINGS):
    with slot:
        config[name] = field_input(config_fields[name], key=f"config-{name}")
with st.expander("More training settings"):
    others = [f for f in fields(TrainConfig) if f.name not in MAIN_SETTINGS]
    slots = st.columns(3)
    for i, f in enumerate(others):
        with slots[i % 3]:
            config[f.name] = field_input(f, key=f"config-{f.name}")

params = {}
for name in chosen:
    cls = REGISTRY[name]
    if not fields(cls.Params):
        continue
    with st.expander(f"{cls.title} parameters", expanded=name == "ifedavg"):
        if name == "ifedavg":
            st.markdown(LAYER_GUIDE)
        if cls.config_defaults:
            st.caption(f"Its paper changes these training settings, applied unless you changed them above: "
                       f"{cls.config_defaults}")
        params[name] = params_inputs(cls.Params, key_prefix=f"params-{name}")

if st.button(f"Start {len(chosen)} run{'s' if len(chosen) != 1 else ''}", type="primary", disabled=not chosen, key="start"):
    defaults = TrainConfig().to_dict()
    changed = {k: v for k, v in config.items() if v != defaults[k]}
    try:
        started = [
            submit(store, {
                "algorithm": name, "data": data["ref"], "params": params.get(name, {}),
                # the algorithm's own engine defaults apply to the settings the user left alone
                "config": {**REGISTRY[name].config_defaults, **changed},
            })
            for name in chosen
        ]
    except FedcoreError as error:
        st.error(md(error))
    else:
        st.session_state["launched"] = [run.id for run in started]
        st.success(f"Started {len(started)} run(s); they keep training if you leave this page or close the browser.")

launched = [r for r in store.runs() if r.id in st.session_state.get("launched", [])]


def launched_progress() -> None:
    refresh_while_training(launched)
    for run in launched:
        st.markdown(f"**{md(run_label(run))}**")
        show_progress(run)
        page = page_of(run)
        page_link(page, f"Open {page.title} →", query_params={"run": run.id})


if launched:
    st.subheader("Your runs")
    launched_progress()
