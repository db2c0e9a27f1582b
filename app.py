"""The dashboard: `make run` (`python -m dashboard.serve`, which serves this script behind its guard;
`streamlit run app.py` for development). Screens live in views/, one file each; the
frame around them (sign-in, navigation by role, the live sidebar) in dashboard/shell.py, and who may
open which screen in dashboard/auth.py."""

from dashboard.shell import main

main()
