"""Access and data folders (administrators): how this dashboard is shared, who has which role,
and which folders it may read data from. Read-only: they are set where the README says."""

import pandas as pd
import streamlit as st

from dashboard.access import sessions
from dashboard.access.auth import DEFAULT_GROUPS_CLAIM, PERMISSIONS, ROLES, current_access, providers, read_secrets, require
from dashboard.widgets.data_roots import data_roots, upload_folder
from dashboard.presenters.safe_text import md
from application.datasets import BUNDLED, ENVIRONMENT, configured_roots

require("settings")
st.title("Access and data folders")
access = current_access()
secrets = read_secrets()
address = st.get_option("server.address") or "every interface"

st.subheader("Sign-in")
if access.mode == "local":
    st.info(f"Local mode: no sign-in is set up, so the dashboard serves on {md(address)} only and whoever uses "
            "this machine may do everything. README, *Security*, shows how to set up sign-in with your "
            "identity provider.")
else:
    auth = secrets.get("auth", {})
    rows = [{"provider": name, "metadata": (auth if name == "default" else auth[name]).get("server_metadata_url"),
             "client id": (auth if name == "default" else auth[name]).get("client_id")} for name in providers(auth)]
    st.markdown(f"Served on {md(address)}; signed in as **{md(access.who)}** ({access.role}). The app returns "
                f"from the provider to {md(auth.get('redirect_uri'))}. A sign-in lasts "
                f"{sessions.max_hours(secrets):g} hours ([sessions] max_hours); signing out ends it in every tab and "
                "browser.")
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")

st.subheader("Roles")
roles = secrets.get("roles") or {}
st.dataframe(pd.DataFrame([
    {"role": role, "may": ", ".join(a for r in ROLES[: ROLES.index(role) + 1] for a in PERMISSIONS[r]),
     "who (from [roles] in the secrets file)": ", ".join(map(str, roles.get(role) or [])) or "–"}
    for role in ROLES
]), hide_index=True, width="stretch")
st.caption(f"Groups are read from the claim {md(roles.get('groups_claim') or DEFAULT_GROUPS_CLAIM)}. "
           + ("In local mode nobody signs in and these do not apply." if access.mode == "local" else ""))

st.subheader("Data folders")
configured = set(configured_roots())
st.dataframe(pd.DataFrame([
    {"folder": str(root), "exists": root.is_dir(),
     "why": (f"{ENVIRONMENT}" if root in configured else "bundled samples" if root == BUNDLED.resolve()
             else "uploads" if root == upload_folder().resolve() else "")}
    for root in data_roots()
]), hide_index=True, width="stretch")
st.caption(f"Visitors may name files inside these folders only (symbolic links and '..' resolved first). "
           f"Add folders with the environment variable {ENVIRONMENT} (separated by ':') before starting the dashboard.")
