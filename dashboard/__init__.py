"""The Streamlit dashboard's shared code, in three layers: `widgets` (Streamlit on a page) over
`access` (sign-in, roles, the request guard) over `presenters` (pure: figures, lenses, reports);
`serve` is the entry point (`python -m dashboard.serve`). The screens themselves are in views/."""
