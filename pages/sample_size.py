"""Sample size (SAGO appendix D): std of group means over N prompts drawn without replacement; N for a CI half-width."""

import altair as alt
import streamlit as st

from dashboard import frame
from dashboard import urlstate
from pages import common
from sago_engine.stats import SAMPLE_SIZES
from sago_engine.types import AXES, AXIS_LABELS

frame.require_frame()

f = common.current_filters()
st.title("Sample size: how many prompts are enough?")
st.caption("SAGO (arXiv 2610.01428) appendix D: draw N ∈ {4, 8, 16, 32, 64, 128} prompts without replacement "
           "(capped by what exists), repeat, and take the std across repeats of the mean per (F, u, s, p) group. "
           "The paper uses N = 16 per dataset; its reviewer called that thin.")
cells = common.query("cell_prompt_scores", f)
common.empty_stop(cells, "deltas")

urlstate.restore("model", "sample_size_model", choices=sorted(cells["model"].unique()))
c1, c2 = st.columns(2)
with c1:
    repeats = st.number_input("Repeats", 50, 5000, 500, step=50, key="sample_size_repeats")
with c2:
    model = st.selectbox("Model", sorted(cells["model"].unique()), key="sample_size_model")
urlstate.publish()
curve = common.scored_frame("sample_size_std", cells[cells["model"] == model], sizes=SAMPLE_SIZES,
                            n_repeats=int(repeats), seed=0)
summ = common.scored_frame("sample_size_summary", curve)
summ = summ.assign(axis_label=summ["axis"].map(AXIS_LABELS))
order = [AXIS_LABELS[a] for a in AXES]
base = alt.Chart(summ).encode(
    x=alt.X("n:Q", title="N prompts drawn", scale=alt.Scale(type="log", base=2)),
    color=alt.Color("axis_label:N", sort=order, title="axis"))
ch = (base.mark_line(point=True).encode(
    y=alt.Y("median_std:Q", title="median over (F, u, s, p) groups of std of the group mean"),
    tooltip=["axis_label", "n", alt.Tooltip("median_std:Q", format=".4f"), alt.Tooltip("median_expected:Q", format=".4f"),
             "n_groups"])
      + base.mark_line(strokeDash=[4, 3], opacity=0.6).encode(y="median_expected:Q")).properties(
    height=common.chart_height(380), title=f"Std of the mean vs N — {model}")
common.altair_chart(ch, "sample_size_curve",
                    "Solid: std across repeats of the mean per (F, u, s, p) group (median over groups). Dashed: the exact "
                    "value for sampling without replacement, σ/√N·√((M−N)/(M−1)). N stops at the prompts available (M).",
                    data=summ)
mx = int(curve["n_available"].max()) if len(curve) else 0
if mx < max(SAMPLE_SIZES):
    st.caption(f"At most {mx} prompts per group exist here: larger N are capped (at N = M the std is 0 by construction).")

st.subheader("Prompts needed for a chosen CI half-width")
c3, c4 = st.columns(2)
with c3:
    h = st.number_input("Half-width h of the CI of SGS", 0.001, 0.5, 0.02, step=0.005, format="%.3f",
                        key="sample_size_h")
with c4:
    level = st.select_slider("Confidence", [0.90, 0.95, 0.99], value=0.95, key="sample_size_level")
need = common.scored("n_for_halfwidth", f, halfwidth=float(h), level=float(level))
need = need.assign(axis_label=need["axis"].map(AXIS_LABELS))
common.table(need[["model", "axis_label", "sigma", "n_now", "halfwidth_now", "n_needed", "status"]],
             "sample_size_needed", "sago_n_needed.csv")
st.caption("Normal approximation: n = ⌈(z·σ/h)²⌉ with z the normal quantile and σ the std of the per-prompt scores "
           "s_X(i) over all filtered prompts. halfwidth_now = z·σ/√n_now. 'no variation' (σ = 0) needs no more prompts.")
common.provenance("sample_size")
