"""Profiles: radar of total SGS per model over the six axes, and SGS per dataset × axis with markers."""

import plotly.graph_objects as go
import streamlit as st

from sago_engine.report import load_store_frames, model_colors, profile_tables, radar_frame, wide_cells
from sago_engine.scoring import MAIN_EPSILON
from sago_engine.store import StoreError


@st.cache_data(show_spinner="Reading the store…")
def _frames(path: str, mtime: float):
    return load_store_frames(path)


path = st.session_state.get("store_path")
st.title("Model profiles")
st.caption(
    "SGS per axis (lower = more stable; SAGO, arXiv 2610.01428). Axes are never added together. "
    f"Markers: one-sided t-test of H0: E[s] ≤ ε at ε = {MAIN_EPSILON}: * p<0.05, ** p<0.01, † p<0.001."
)
try:
    from pathlib import Path

    frames = _frames(path, Path(path).stat().st_mtime)
except (StoreError, FileNotFoundError, OSError) as e:
    st.error(f"Cannot open the store: {e}")
    st.stop()

deltas = frames["deltas"]
if deltas.empty:
    st.warning("This store has no deltas yet.")
    st.stop()
tables = profile_tables(deltas, MAIN_EPSILON)
radar = radar_frame(tables["total"])

fig = go.Figure()
colors = model_colors(radar["model"])
for model, grp in radar.groupby("model", sort=True):
    theta = list(grp["axis"]) + [grp["axis"].iloc[0]]
    r = list(grp["sgs"]) + [grp["sgs"].iloc[0]]
    fig.add_trace(go.Scatterpolar(r=r, theta=theta, name=model, mode="lines+markers",
                                  line={"color": colors[model], "width": 2.5}))
fig.update_layout(polar={"radialaxis": {"range": [0, 1], "title": {"text": "SGS"}}}, legend_title_text="model",
                  margin={"l": 40, "r": 40, "t": 40, "b": 40}, height=480)
st.subheader("Total SGS per axis (all prompts of all datasets weigh the same)")
st.plotly_chart(fig, key="profiles_radar", width="stretch")
st.caption("Δ-Cos: under a chat template the layer-0 (embedding) cosine is trivially 1; the definition is kept.")

st.subheader("Total SGS, mean ± std over prompts")
st.dataframe(wide_cells(tables["total"], ["model"]), key="profiles_total_table", hide_index=True, width="stretch")
st.subheader("SGS per dataset × axis")
st.dataframe(wide_cells(tables["per_dataset"], ["model", "dataset"]), key="profiles_dataset_table",
             hide_index=True, width="stretch")
