"""The dashboard: `streamlit run app.py` (or `make run`). Screens live in views/, one file each; the
frame around them (navigation, the live sidebar) in dashboard/shell.py."""

from dashboard.shell import main

main()
