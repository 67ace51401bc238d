"""Significance: ε slider, one-sided t-test per model × axis (× dataset), markers, rejection counts per axis."""

import altair as alt
import streamlit as st

from pages import common
from sago_engine import paper
from sago_engine.report import wide_cells
from sago_engine.scoring import EPSILONS, MAIN_EPSILON
from sago_engine.types import AXES, AXIS_LABELS

f = common.current_filters()
st.title("Significance: is the instability above ε?")
st.caption("One-sided one-sample t-test on the per-prompt scores s_X(i): H0: E[s] ≤ ε vs H1: E[s] > ε "
           "(SAGO, arXiv 2610.01428 §Significance). Markers: * p<0.05, ** p<0.01, † p<0.001. "
           "ε = 0.05 is the operating point; 0.10 is a stress test.")
scores = common.query("prompt_scores", f)
common.empty_stop(scores, "deltas")

if "significance_eps" not in st.session_state:
    st.session_state["significance_eps"] = MAIN_EPSILON


def _preset(v: float) -> None:
    st.session_state["significance_eps"] = v


c1, *cs = st.columns([4, 1, 1, 1])
with c1:
    eps = st.slider("ε (threshold on SGS)", 0.0, 0.20, step=0.001, format="%.3f", key="significance_eps")
for col, v in zip(cs, EPSILONS):
    with col:
        st.button(f"ε = {v:g}", key=f"significance_preset_{v:g}", on_click=_preset, args=(v,),
                  type="primary" if abs(eps - v) < 1e-12 else "secondary")
per_dataset = st.toggle("Per dataset", key="significance_per_dataset",
                        help="One test per model × axis × dataset instead of pooling all prompts.")

sig = common.scored("significance_table", f, eps=float(eps), per_dataset=bool(per_dataset))
st.subheader(f"SGS mean ± std and markers at ε = {eps:.3f}")
index = ["model", "dataset"] if per_dataset else ["model"]
common.table(wide_cells(sig, index), "significance_table", f"sago_significance_eps{eps:.3f}.csv")

heat_df = common.scored_frame("significance_heatmap", sig)
order = [AXIS_LABELS[a] for a in AXES]
hm = alt.Chart(heat_df).encode(x=alt.X("axis_label:N", sort=order, title="axis", axis=alt.Axis(labelAngle=0, orient="top")),
                               y=alt.Y("row:N", title=None, axis=alt.Axis(labelLimit=320)))
heat = (hm.mark_rect().encode(
    color=alt.Color("neglog10p:Q", title="−log10 p", scale=alt.Scale(scheme="blues", domain=[0, 10]),
                    legend=alt.Legend(orient="bottom", gradientLength=240)),
    tooltip=["model", "axis_label", alt.Tooltip("sgs:Q", format=".4f"), alt.Tooltip("std:Q", format=".4f"),
             alt.Tooltip("p:Q", format=".2e"), "marker", "n_prompts"])
    + hm.mark_text(fontSize=12).encode(
        text="label:N", color=alt.condition("datum.neglog10p > 5", alt.value("white"), alt.value("black")))).properties(
    height=alt.Step(34), title=f"p-values of H0: E[s] ≤ {eps:.3f}")
common.altair_chart(heat, "significance_heatmap",
                    "Darker = stronger evidence that the model's instability on that axis exceeds ε; the cell "
                    "shows SGS and its marker. Blank (missing) cells are unavailable axes (n/a).",
                    data=sig)

st.subheader(f"Models rejecting H0 per axis at ε = {eps:.3f}")
rc = common.scored_frame("rejection_counts", common.scored("significance_table", f, eps=float(eps)))
common.table(rc.drop(columns=["axis"]).rename(columns={"axis_label": "axis"}), "significance_counts",
             f"sago_rejections_eps{eps:.3f}.csv")
st.caption("Counts use the pooled test per model × axis (all prompts of the filtered datasets).")

st.subheader("Threshold robustness (appendix B): rejections at p<0.05 / 0.01 / 0.001")
common.table(common.scored("threshold_table", f, epsilons=EPSILONS), "significance_threshold",
             "sago_threshold_table.csv")
with st.expander(f"For comparison — {paper.PAPER_SOURCE} (not computed here)"):
    st.dataframe(paper.threshold_example(), key="significance_paper_threshold", hide_index=True)
common.provenance("significance")
