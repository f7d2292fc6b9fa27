"""The quality dashboard: data gathering (data.py) and the Streamlit page (app.py)."""
