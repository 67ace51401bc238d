"""sago dashboard: routes to the pages; the sidebar picks the store (read-only), filters and presentation mode."""

import os
from pathlib import Path

import streamlit as st

from pages.common import delta_matrix_downloads, presentation_mode, query, sidebar_filters
from sago_engine.report import DEMO_STORE, find_stores, snapshot_caption

st.set_page_config(page_title="sago — stability of LLM behaviour", layout="wide")

#: The seven views (ARCHITECTURE.md); url paths are what the browser shows after the host.
#: Profiles is the default page, served at "/" (Streamlit ignores a default page's url_path).
PAGES = [
    st.Page("pages/profiles.py", title="Profiles", icon=":material/radar:", url_path="profiles", default=True),
    st.Page("pages/pareto.py", title="Pareto", icon=":material/scatter_plot:", url_path="pareto"),
    st.Page("pages/rankings.py", title="Rankings", icon=":material/leaderboard:", url_path="rankings"),
    st.Page("pages/significance.py", title="Significance", icon=":material/functions:", url_path="significance"),
    st.Page("pages/sample_size.py", title="Sample size", icon=":material/stacked_line_chart:", url_path="sample_size"),
    st.Page("pages/prompts.py", title="Prompts", icon=":material/chat:", url_path="prompts"),
    st.Page("pages/variants.py", title="Variants", icon=":material/tune:", url_path="variants"),
    st.Page("pages/live.py", title="Live", icon=":material/bolt:", url_path="live"),
    st.Page("pages/paper_reference.py", title="Paper reference", icon=":material/menu_book:",
            url_path="paper_reference"),
]
nav = st.navigation(PAGES)

stores = find_stores(DEMO_STORE.parent)
options = [str(p) for p in stores] or [str(DEMO_STORE)]
if os.environ.get("SAGO_STORE"):  # a store chosen at launch: SAGO_STORE=/path/run.duckdb
    options.insert(0, os.environ["SAGO_STORE"])
    options = list(dict.fromkeys(options))
with st.sidebar:
    presentation_mode()
    with st.expander("Store", expanded=not st.session_state.get("app_presentation", False)):
        choice = st.selectbox("Store file", options, key="app_store_pick", format_func=lambda p: Path(p).name)
        custom = st.text_input("…or a path to another store", key="app_store_custom", placeholder="/path/to/run.duckdb")
st.session_state["store_path"] = custom.strip() or choice

if nav.title != "Paper reference":  # the paper page needs no store
    st.sidebar.caption(snapshot_caption(query("meta")))
    sidebar_filters(query("filter_options"))
    with st.sidebar.expander("Export the Δ matrix of this filter"):
        st.caption("Per prompt × variant × axis: signed Δ and Δ̃ with (F, u, s, p), model, dataset.")
        delta_matrix_downloads(st.session_state["sago_filters"])
nav.run()
