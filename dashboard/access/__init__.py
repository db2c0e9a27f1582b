"""Who may do what: sign-in and roles (`auth`), sign-ins that end when they should (`sessions`), and
what the server lets through before Streamlit sees a request (`guard`). Reads `presenters`."""
