"""What the pages share that runs inside Streamlit: the store and the run picker (`common`), the
frame drawn on every rerun (`shell`), generated forms, the Data page's report and mapping step, the
cached data a page loads, and the page's calls into the application layer (`data_roots`: starting a
run or a check-up, the data roots; `bias_experiment`'s preset). Reads `access` and `presenters`."""
