"""Sample size: the spread of the pooled SGS against N prompts (exact, one population per curve); N for a CI half-width."""

import altair as alt
import streamlit as st

from dashboard import controls, data, exports, frame, safe, urlstate
from sago_engine.scoring.sample_size import SAMPLE_SIZES
from sago_engine.scoring.stats import STATUS_FLAT
from sago_engine.store import Store
from sago_engine.types import AXES, AXIS_LABELS
from sago_engine.views import report
from sago_engine.views.palette import AXIS_COLORS

frame.require_frame()

f = controls.current_filters()
st.title("Sample size: how many prompts are enough?")
st.caption("How much would SGS move with another draw of N prompts? Each curve is one population: a model's "
           "per-prompt scores s_X(i) on one axis over the prompts in the filter (SGS is their mean). Solid: the "
           "exact std of the mean of N of them drawn without replacement, σ/√N·√((M−N)/(M−1)), 0 at N = M. "
           "Dashed: σ̂/√N, the std of the SGS of N new prompts from the same source. SAGO (arXiv 2610.01428) "
           "uses N = 16 per dataset; its reviewer called that thin.")
scores = data.query(Store.prompt_scores, f)
data.empty_stop(scores, "deltas")

urlstate.restore("model", "sample_size_model", choices=sorted(scores["model"].unique()))
with controls.page_controls():
    model = st.selectbox("Model", sorted(scores["model"].unique()), key="sample_size_model")
urlstate.publish()
spread = data.scored_frame(report.pooled_sgs_spread, scores[scores["model"] == model], sizes=SAMPLE_SIZES)
spread = spread.assign(axis_label=spread["axis"].map(AXIS_LABELS))
order = [AXIS_LABELS[a] for a in AXES]
base = alt.Chart(spread.dropna(subset=["sd_new"])).encode(
    # the domain spans every requested N: with one N plotted (a small store) a data-driven log domain
    # collapses to a point and every tick label lands on the same spot
    x=alt.X("n:Q", title="N prompts", scale=alt.Scale(type="log", base=2, domain=[min(SAMPLE_SIZES), max(SAMPLE_SIZES)]),
            axis=alt.Axis(values=list(SAMPLE_SIZES), format="d")),
    color=alt.Color("axis_label:N", sort=order, title="axis",
                    scale=alt.Scale(domain=order, range=[AXIS_COLORS[a] for a in AXES])),
    tooltip=[alt.Tooltip("axis_label:N", title="axis"), alt.Tooltip("n:Q", title="N"),
             alt.Tooltip("sd_within:Q", format=".4f", title="std, N of these prompts"),
             alt.Tooltip("sd_new:Q", format=".4f", title="std, N new prompts"),
             alt.Tooltip("n_available:Q", title="prompts in the filter (M)")])
within = base.transform_filter("isValid(datum.sd_within)")
ch = (within.mark_line().encode(y=alt.Y("sd_within:Q", title="std of the pooled SGS"))
      + within.mark_point(filled=True).encode(y="sd_within:Q")
      + base.mark_line(strokeDash=[4, 3], opacity=0.6).encode(y="sd_new:Q")).properties(
    height=controls.chart_height(380, chrome=160), title=alt.Title(f"Std of SGS vs N — {model}", anchor="start"),
    autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))
exports.altair_chart(ch, "sample_size_curve",
                     "Solid: the exact std of the mean of N of the filter's M prompts drawn without replacement "
                     "(finite-population formula, falls to 0 at N = M). Dashed: σ̂/√N for N new prompts (σ̂: the "
                     "sample std of s_X(i)). No simulation and no median over cells: each curve is one population.",
                     data=spread)
flat = spread.loc[spread["status"] == STATUS_FLAT, "axis_label"].drop_duplicates()
if len(flat):
    st.caption("No variation (every prompt scores the same, so both curves are 0): " + safe.md(", ".join(flat)) + ".")

st.subheader("Prompts needed for a chosen CI half-width")
c3, c4 = st.columns(2)
with c3:
    h = st.number_input("Half-width h of the CI of SGS", 0.001, 0.5, 0.02, step=0.005, format="%.3f",
                        key="sample_size_h")
with c4:
    level = st.select_slider("Confidence", [0.90, 0.95, 0.99], value=0.95, key="sample_size_level")
need = data.scored(report.n_for_halfwidth, f, halfwidth=float(h), level=float(level))
need = need.assign(axis_label=need["axis"].map(AXIS_LABELS))
exports.table(need[["model", "axis_label", "sigma", "n_now", "halfwidth_now", "n_needed", "status"]],
              "sample_size_needed", "sago_n_needed.csv")
st.caption("n_needed: the fewest prompts n ≥ 2 with t·σ/√n ≤ h, t the Student quantile with n − 1 degrees of freedom "
           "(found by stepping up from the normal approximation), σ the std of the per-prompt scores s_X(i) over "
           "all filtered prompts. halfwidth_now = t·σ/√n_now. 'no variation' (σ = 0): 2, the fewest prompts with an "
           "interval.")
data.provenance("sample_size")
