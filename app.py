"""The dashboard: `make run` (`python -m dashboard.serve`, which serves this script behind its guard;
`streamlit run app.py` for development). Screens live in views/, one file each; the
frame around them (sign-in, navigation by role, the live sidebar) in dashboard/widgets/shell.py, and who may
open which screen in dashboard/access/auth.py."""

from dashboard.widgets.shell import main

main()
