"""The Streamlit dashboard's shared code: reading the run store, figures, lenses, reports."""
