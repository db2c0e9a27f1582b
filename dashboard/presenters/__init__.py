"""Pure functions of stored numbers, no Streamlit: the figures, each lens's views, the check-up's
grid and its evidence, prototype boxes drawn on images, records as tables, the HTML reports, the
registry of what is shown where, and user-supplied text made safe. The pages fetch, these draw; the
HTML report and `python -m fedcore show --html` use the same."""
