"""Rankings: each model's rank per dataset on one axis (bump chart), bootstrap reversal probabilities, max/min SGS ratio."""

import altair as alt
import streamlit as st

from dashboard import accuracy, charts, choices, controls, data, exports, frame, links, prose, safe, urlstate
from sago_engine.scoring import pairwise
from sago_engine.scoring.scores import MAIN_EPSILON
from sago_engine.scoring.stats import REVERSAL_THRESHOLD
from sago_engine.scoring.store_shape import ranking_note
from sago_engine.store import Store
from sago_engine.types import AXES, AXIS_LABELS
from sago_engine.views import assumptions, report

frame.require_frame()

f = controls.current_filters()
st.title("Rankings across datasets")
st.caption("Rank 1 = lowest SGS_X(d) (most stable) among the shown models on that dataset (SAGO, arXiv 2610.01428). "
           "A dataset says nothing about another dataset: ranks can reverse.")
scores = data.query(Store.prompt_scores, f)
data.empty_stop(scores, "deltas")
per = data.scored(report.score_tables, f, eps=MAIN_EPSILON)["per_dataset"]
ranks = data.scored_frame(report.rankings, per)
urlstate.restore("axis", "rankings_axis", choices=AXES, default="cos")
with controls.page_controls():
    axis = st.selectbox("Axis", AXES, key="rankings_axis", format_func=AXIS_LABELS.get)
urlstate.publish()

shape = ranking_note(scores["model"].nunique(), scores["dataset"].nunique())
if shape:
    st.info(shape)
colors = data.model_colors()
r = ranks[ranks["axis"] == axis].copy()
r["SGS"] = r["sgs"].round(4)
ci_d = data.scored(report.bootstrap_ci, f, by=("model", "dataset", "axis"))
r = r.merge(ci_d[["model", "dataset", "axis", "lo", "hi"]], on=["model", "dataset", "axis"], how="left")
dom = sorted(r["model"].unique())
n_models = int(r["rank"].max()) if len(r) else 1
sel = alt.selection_point(fields=["model"], bind="legend")
base = alt.Chart(r).encode(
    x=alt.X("dataset:N", title="dataset", sort=sorted(r["dataset"].unique()), axis=alt.Axis(labelAngle=0)),
    y=alt.Y("rank:Q", title=f"rank on {AXIS_LABELS[axis]} (1 = most stable)", scale=alt.Scale(reverse=True, domain=[1, max(1, n_models)]),
            axis=alt.Axis(tickMinStep=1, format="d")),
    color=alt.Color("model:N", scale=alt.Scale(domain=dom, range=[colors.get(m, "#444") for m in dom]), title="model",
                    legend=alt.Legend(labelLimit=320)),
    opacity=alt.condition(sel, alt.value(1.0), alt.value(0.2)),
    tooltip=["model", "dataset", alt.Tooltip("rank:Q"), alt.Tooltip("SGS:Q", format=".4f"),
             alt.Tooltip("lo:Q", format=".4f", title="95% CI low"), alt.Tooltip("hi:Q", format=".4f", title="95% CI high")],
)
bump = (base.mark_line(strokeWidth=3) + base.mark_circle(size=160)).add_params(sel).properties(
    height=controls.chart_height(380), title=f"Rank per dataset — SGS {AXIS_LABELS[axis]}")
exports.altair_chart(bump, "rankings_bump",
                    "Each line follows one model across datasets; a crossing means two models swap order "
                    "(a ranking reversal). Higher = more stable.",
                    data=r[["model", "dataset", "axis", "sgs", "rank", "n_models"]])

if r["model"].nunique() > 1:
    lead = data.scored(pairwise.leader_sentences, f, per_dataset=True, correction=controls.current_correction(), seed=0)
    st.caption(f"Is rank 1 ahead of rank 2 on {AXIS_LABELS[axis]}? {pairwise.TEST_NAME.capitalize()} per "
               "dataset, exact over every sign assignment at 16 prompts "
               "(family: every pair × axis × dataset; the multiple-comparison control chosen on Significance).")
    prose.sentences(lead.loc[lead["axis"] == axis, "sentence"])
    links.page_link(links.PAIRWISE, {"axis": axis}, "Every pair of models: Model vs model",
                    icon=":material/compare_arrows:")
prose.assumptions_note(choices.assumption_statements(f, (assumptions.RANKING,), axes=(axis,), per_dataset=True),
                       "rankings_assumptions")
absent = sorted(set(scores["model"]) - set(r["model"]))
if absent:
    st.caption(f"Not ranked on {AXIS_LABELS[axis]} (axis unavailable, n/a): {safe.md(', '.join(absent))}.")

st.subheader("Ranking reversals (bootstrap)")
if shape:
    st.caption("No reversal can be computed here: see the note at the top of the page.")
n_boot = st.number_input("Bootstrap resamples B", 200, 5000, 1000, step=100, key="rankings_boot",
                         help="Prompts resampled with replacement within each dataset, the same prompts for every "
                              "model (paired), seed 0.")
rp = data.scored(report.reversal_table, f, n_resamples=int(n_boot), seed=0)
thr = REVERSAL_THRESHOLD
rp_axis = rp[rp["axis"] == axis]
called = rp_axis[rp_axis["reversal"].astype(bool)]
st.caption(f"A pair is called a reversal only when the bootstrap probability that its order on dataset A differs "
           f"from its order on dataset B is ≥ {thr:.2f}. On {AXIS_LABELS[axis]}: {len(called)} reversal(s) called, "
           f"{int(rp_axis['observed_flip'].sum())} order flip(s) in the point estimates "
           f"({int(rp['reversal'].astype(bool).sum())} called over all axes).")
cols = ["axis_label", "model_a", "model_b", "dataset_a", "dataset_b", "diff_a", "diff_b", "p_reversal"]
exports.table(called[cols].rename(columns={"axis_label": "axis"}), "rankings_reversals", f"sago_reversals_{axis}.csv")
with st.expander("Every pair of models and datasets, with P(reversal) — including flips that are not called reversals"):
    exports.table(rp_axis[cols + ["observed_flip", "reversal"]].rename(columns={"axis_label": "axis"}),
                 "rankings_reversals_all", "sago_reversal_probabilities.csv")
    st.caption("diff = SGS(model_a) − SGS(model_b) on that dataset; opposite signs = an observed flip.")

st.subheader("Spread across datasets: max / min SGS")
ratio = data.scored_frame(report.dataset_ratio, per)
if len(ratio):
    heat_df = data.scored_frame(report.ratio_heatmap, ratio)
    order = [AXIS_LABELS[a] for a in AXES]
    hm = alt.Chart(heat_df).encode(
        x=alt.X("axis_label:N", sort=order, title="axis", axis=alt.Axis(labelAngle=0, orient="top")),
        y=alt.Y("model:N", title="model", axis=alt.Axis(labelLimit=320)))
    # colour from 1× up to at least 2×: ratios of 1.0–1.1× stay pale instead of spanning the whole scale
    top = max(2.0, float(heat_df["ratio_capped"].max()))
    heat = (hm.mark_rect().encode(
        color=alt.Color("ratio_capped:Q", title="max/min", scale=alt.Scale(scheme="orangered", domain=[1, top], clamp=True),
                        legend=alt.Legend(orient="bottom", gradientLength=240, format=".1f")),
        tooltip=["model", "axis_label", "max_dataset", alt.Tooltip("max_sgs:Q", format=".4f"), "min_dataset",
                 alt.Tooltip("min_sgs:Q", format=".4f"), alt.Tooltip("ratio:Q", format=".2f")])
        + hm.mark_text(fontSize=charts.fonts(controls.presentation_on())["label"] + 1).encode(
            text="ratio_label:N",
            color=alt.condition(f"datum.ratio_capped > {1 + (top - 1) * 0.6}", alt.value("white"), alt.value("black")))).properties(
        height=alt.Step(34), title="max/min of SGS_X(d) over datasets")
    exports.altair_chart(heat, "rankings_ratio_heatmap",
                        "How many times larger a model's SGS is on its least stable dataset than on its most "
                        "stable one (the paper reports 3.7× for Llama-3.1-8B on Δ-Cos). 1× = same on every dataset.",
                        data=ratio)
    show = ratio[["model", "axis_label", "max_dataset", "max_sgs", "min_dataset", "min_sgs", "ratio", "n_datasets"]]
    exports.table(show.rename(columns={"axis_label": "axis"}), "rankings_ratio", "sago_dataset_ratio.csv")
else:
    st.info("Needs at least one model with scores on two or more datasets.")
st.caption("Ranks and ratios use the datasets, models and variants of the current filter.")
accuracy.section(f, ("model", "dataset"), "rankings_accuracy", "sago_accuracy_per_dataset.csv",
                 "Accuracy under rephrasing per dataset (share of replies right — not an SGS)")
data.provenance("rankings")
