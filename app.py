"""sago dashboard: routes to the pages; the sidebar picks the store (read-only)."""

from pathlib import Path

import streamlit as st

from sago_engine.report import DEMO_STORE, find_stores

st.set_page_config(page_title="sago — stability of LLM behaviour", layout="wide")

import os

stores = find_stores(DEMO_STORE.parent)
options = [str(p) for p in stores] or [str(DEMO_STORE)]
if os.environ.get("SAGO_STORE"):  # a store chosen at launch: SAGO_STORE=/path/run.duckdb
    options.insert(0, os.environ["SAGO_STORE"])
with st.sidebar:
    st.markdown("**Store**")
    choice = st.selectbox("Store file", options, key="app_store_pick", format_func=lambda p: Path(p).name)
    custom = st.text_input("…or a path to another store", key="app_store_custom", placeholder="/path/to/run.duckdb")
st.session_state["store_path"] = custom.strip() or choice

nav = st.navigation([st.Page("pages/profiles.py", title="Profiles", icon=":material/radar:", default=True)])
nav.run()
