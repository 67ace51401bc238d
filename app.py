"""sago dashboard: the frame around the views — navigation, store picker, filters, presentation mode.

Local mode (``bash scripts/dashboard.sh``): this machine only, any store, the Live page.
Share mode (``--share DIR``): network, read-only, stores from DIR only (``dashboard.access``).
"""

import os
from pathlib import Path

import streamlit as st

import dashboard  # first: on a cold start it says so on the page while the modules below load
from dashboard import controls, data, exports, frame, safe, urlstate
from dashboard.access import unreadable_stores
from sago_engine.envcheck import EnvError, check_environment
from sago_engine.store import Store
from sago_engine.store.catalog import snapshot_caption
from sago_engine.textsafe import inert_logs

inert_logs()  # store text in a log line of this server reaches its log inert

# presentation mode starts with the sidebar collapsed (its toggle stays one click away, behind the » button)
st.set_page_config(page_title="sago — stability of LLM behaviour", page_icon=str(frame.FAVICON), layout="wide",
                   initial_sidebar_state="collapsed" if controls.presentation_requested() else "auto")

try:  # every environment variable sago reads, checked before anything else runs
    check_environment()
except EnvError as e:
    st.error(safe.md(e))
    st.stop()
frame.password_gate()
urlstate.start_run()
nav = frame.navigation()
acc = frame.access()
if acc.live and os.environ.get("SAGO_LIVE_WARMUP") == "1":  # scripts/dashboard.sh: load the Live model at start
    from sago_engine.live import probe as live

    live.start_warmup()
stores = frame.store_tokens(frame.store_options(acc))  # picker value / link token → store (never a server path)
urlstate.restore("store", "app_store_pick", "str", choices=stores)
with st.sidebar:
    controls.presentation_mode()
    with st.expander("Store", expanded=not st.session_state.get("app_presentation", False)):
        if stores:
            # share mode without a landing store: no store until the visitor picks one (never the first by name)
            unset = {"index": None} if acc.shared and frame.shared_landing(acc) is None else {}
            choice = stores.get(st.selectbox("Store file", list(stores), key="app_store_pick",
                                             placeholder="pick a store", **unset))
        else:
            choice = None
            st.caption("No readable store (*.duckdb) in the shared folder.")
        if acc.shared:
            broken = unreadable_stores(acc.share_dir)
            if broken:  # listed by file name only, never the folder's path
                st.caption("Not offered: " + "; ".join(f"{safe.md(n)} ({why})" for n, why in broken) + ".")
        typed = None
        if acc.free_paths:  # local mode only: share mode never opens a path a visitor types
            custom = st.text_input("…or a path to another store", key="app_store_custom",
                                   placeholder="/path/to/run.duckdb")
            typed = data.openable_store(frame.typed_store(custom))
            if typed:  # the link names stores of the picker only, never a typed path
                st.caption(f"Open: {safe.md(Path(typed).name)}, from the typed path. A copied link opens the "
                           "picked store.")
        if acc.shared:
            st.caption("Shared, read-only view: stores of the shared folder only.")
st.session_state["store_path"] = frame.checked_store(typed or choice)

if nav.title != "Paper reference":  # the paper page needs no store
    st.sidebar.caption(safe.md(snapshot_caption(data.query(Store.meta))))
    controls.sidebar_filters(data.query(Store.filter_options))
    with st.sidebar.expander("Export the Δ matrix of this filter"):
        st.caption("Per prompt × variant × axis: signed Δ and Δ̃ with (F, u, s, p), model, dataset.")
        exports.delta_matrix_downloads(st.session_state["sago_filters"])
with st.sidebar:
    controls.keep_theme()
urlstate.publish()
frame.mark_routed()
dashboard.started()  # a cold start's "Starting the dashboard" note (drawn when the package was first imported)
nav.run()
