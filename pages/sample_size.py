"""Sample size (SAGO appendix D): std of group means over N prompts drawn without replacement; N for a CI half-width."""

import altair as alt
import streamlit as st

from dashboard import charts, controls, data, exports, frame, urlstate
from sago_engine import report
from sago_engine.palette import AXIS_COLORS
from sago_engine.stats import SAMPLE_SIZES
from sago_engine.store import Store
from sago_engine.types import AXES, AXIS_LABELS

frame.require_frame()

f = controls.current_filters()
st.title("Sample size: how many prompts are enough?")
st.caption("SAGO (arXiv 2610.01428) appendix D: draw N ∈ {4, 8, 16, 32, 64, 128} prompts without replacement "
           "(only from groups with more than N prompts), repeat, and take the std across repeats of the mean per (F, u, s, p) group. "
           "The paper uses N = 16 per dataset; its reviewer called that thin.")
cells = data.query(Store.cell_prompt_scores, f)
data.empty_stop(cells, "deltas")

urlstate.restore("model", "sample_size_model", choices=sorted(cells["model"].unique()))
c1, c2 = st.columns(2)
with c1:
    repeats = st.number_input("Repeats", 50, 5000, 500, step=50, key="sample_size_repeats")
with c2:
    model = st.selectbox("Model", sorted(cells["model"].unique()), key="sample_size_model")
urlstate.publish()
curve = data.scored_frame(report.sample_size_std, cells[cells["model"] == model], sizes=SAMPLE_SIZES,
                            n_repeats=int(repeats), seed=0)
summ = data.scored_frame(report.sample_size_curve, curve, sizes=SAMPLE_SIZES)
summ = summ.assign(axis_label=summ["axis"].map(AXIS_LABELS))
order = [AXIS_LABELS[a] for a in AXES]
plotted = summ[summ["n_groups"] > 0]
base = alt.Chart(plotted).encode(
    # the domain spans every requested N: with one N plotted (a small store) a data-driven log domain
    # collapses to a point and every tick label lands on the same spot
    x=alt.X("n:Q", title="N prompts drawn (requested)",
            scale=alt.Scale(type="log", base=2, domain=[min(SAMPLE_SIZES), max(SAMPLE_SIZES)]),
            axis=alt.Axis(values=list(SAMPLE_SIZES), format="d")),
    color=alt.Color("axis_label:N", sort=order, title="axis",
                    scale=alt.Scale(domain=order, range=[AXIS_COLORS[a] for a in AXES])))
ch = (base.mark_line().encode(y=alt.Y("median_std:Q", title="std of the group mean (median over groups)"))
      + base.mark_point(filled=True).encode(
    y="median_std:Q", size=alt.Size("n_groups:Q", title="groups in the median", scale=alt.Scale(range=[15, 220]),
                                    legend=alt.Legend(orient="bottom", direction="horizontal",  # grey dots: seen on light and dark
                                                      symbolFillColor=charts.NEUTRAL, symbolStrokeColor=charts.NEUTRAL)),
    tooltip=[alt.Tooltip("axis_label:N", title="axis"), alt.Tooltip("n:Q", title="N"),
             alt.Tooltip("median_std:Q", format=".4f"), alt.Tooltip("median_expected:Q", format=".4f"),
             alt.Tooltip("n_groups:Q", title="groups with more than N prompts"),
             alt.Tooltip("n_short:Q", title="groups left out (N or fewer prompts)")])
      + base.mark_line(strokeDash=[4, 3], opacity=0.6).encode(y="median_expected:Q")).properties(
    height=controls.chart_height(380), title=alt.Title(f"Std of the mean vs N — {model}", anchor="start"),
    # fit the width only: under Streamlit's default "fit" the bottom legend squeezed the plot and
    # pushed the title out of the frame
    autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))
exports.altair_chart(ch, "sample_size_curve",
                    "Solid: std across repeats of the mean over N prompts drawn without replacement, median over the "
                    "(F, u, s, p) groups that have more than N prompts. Dashed: the exact value for sampling without "
                    "replacement, σ/√N·√((M−N)/(M−1)). Groups with N or fewer prompts are left out at that N; the dot's "
                    "size is how many groups remain, so a point that rests on few groups looks small.",
                    data=summ)
short = summ.groupby("n", as_index=False).agg(n_short=("n_short", "max"), n_total=("n_total", "max"))
short = short[short["n_short"] > 0]
if len(short):
    st.caption("Groups that cannot sample N (they have N or fewer prompts; left out of that point): "
               + "; ".join(f"N = {int(r.n)}: {int(r.n_short)} of {int(r.n_total)}" for r in short.itertuples())
               + ". No point is drawn where no group has more than N prompts.")

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
st.caption("Normal approximation: n = ⌈(z·σ/h)²⌉ with z the normal quantile and σ the std of the per-prompt scores "
           "s_X(i) over all filtered prompts. halfwidth_now = z·σ/√n_now. 'no variation' (σ = 0) needs no more prompts.")
data.provenance("sample_size")
