"""The dashboard's screens, one file each, run by Streamlit as page scripts (see dashboard/widgets/shell.py).
A package only so that the import contracts (pyproject.toml) cover them."""
