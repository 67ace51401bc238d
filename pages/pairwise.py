"""Model vs model: every pair of models per axis — paired difference, bootstrap CI, exact paired test, matrix."""

import streamlit as st

from dashboard import charts, choices, controls, data, exports, frame, prose, urlstate
from sago_engine.scoring import pairwise, signflip
from sago_engine.store import Store
from sago_engine.types import AXES, AXIS_LABELS
from sago_engine.views import assumptions

frame.require_frame()

TOTAL = "Total (all datasets)"
RESAMPLES = (1000, 5000, pairwise.PAIR_RESAMPLES, 50_000)
f = controls.current_filters()
st.title("Model against model: is the difference real?")
st.caption("Paired on the prompts both models answered: d(i) = s_X(i) of the row model − s_X(i) of the column model. "
           "Two-sided paired test on d (by default the sign-flip permutation test on the mean d; the Wilcoxon "
           "signed-rank test with Pratt's zeros is the other choice), exact over every sign assignment up to "
           f"{signflip.EXACT_MEAN_MAX_N} non-zero differences, seeded Monte Carlo with its error above; 95% bootstrap "
           "CI of the mean d over prompts (seeded per pair), p adjusted over every pair × axis of the table "
           "(× dataset when one dataset is shown) with the chosen control. Lower SGS = more stable.")
scores = data.query(Store.prompt_scores, f)
data.empty_stop(scores, "deltas")
models = sorted(scores["model"].unique())
if len(models) < 2:
    st.info("Needs at least two models in the current store and filters.")
    st.stop()
datasets = sorted(scores["dataset"].unique())

urlstate.restore("axis", "pairwise_axis", choices=AXES, default="bleu")
urlstate.restore("scope", "pairwise_scope", choices=[TOTAL, *datasets], default=TOTAL)
urlstate.restore("B", "pairwise_boot", "int", choices=RESAMPLES, default=pairwise.PAIR_RESAMPLES)
urlstate.restore("test", "pairwise_test", choices=list(pairwise.TESTS), default=pairwise.DEFAULT_TEST)
with controls.page_controls():
    c1, c2, c3, c4, c5 = st.columns([1, 1.4, 1.6, 1, 1.6])
    with c1:
        axis = st.selectbox("Axis", AXES, key="pairwise_axis", format_func=AXIS_LABELS.get)
    with c2:
        scope = st.selectbox("Scope", [TOTAL, *datasets], key="pairwise_scope",
                             help="Total: every prompt of every dataset weighs the same. A dataset: its prompts only; "
                                  "the correction's family is then every pair × axis × dataset.")
    with c3:
        correction = controls.correction_control("pairwise")
    with c4:
        n_boot = st.selectbox("Bootstrap resamples B", RESAMPLES, key="pairwise_boot")
    with c5:
        test = st.selectbox("Paired test", list(pairwise.TESTS), key="pairwise_test",
                            format_func=lambda k: pairwise.TESTS[k].capitalize(),
                            help="The sign-flip test on the mean tests the difference the page shows (the default); "
                                 "the signed-rank test asks whether one model is more stable across the prompts "
                                 "(Method choices compares the two).")
urlstate.publish()

per_dataset = scope != TOTAL
dataset = scope if per_dataset else None
table = data.scored(pairwise.paired_table, f, per_dataset=per_dataset, correction=correction,
                    n_resamples=int(n_boot), seed=0, test=test)
cells = data.scored_frame(pairwise.matrix_cells, table, axis=axis, dataset=dataset)
label = AXIS_LABELS[axis]
fig = charts.pairwise_matrix(cells, models, title=f"{label}: SGS of the row model − SGS of the column model — {controls.scope_title(scope, f)}")
if controls.presentation_on():
    fig.update_layout(height=controls.chart_height(640))
exports.chart(fig, "pairwise_matrix",
              "Blue: the row model is more stable (lower SGS on the shared prompts), red: less stable; grey: not "
              f"distinguishable (adjusted p ≥ {pairwise.ALPHA}). Each cell: the mean paired difference with its marker "
              "(* p<0.05, ** p<0.01, † p<0.001, adjusted) and the adjusted p; hover for the 95% CI and the raw p.",
              data=cells)

rows = table[(table["axis"] == axis) & (table["dataset"].isna() if dataset is None else table["dataset"] == dataset)]
st.subheader(f"In words: {label}, {scope}")
prose.sentences(pairwise.pair_sentence(r) for _, r in rows.iterrows())
prose.assumptions_note(choices.assumption_statements(f, (assumptions.RANKING,), axes=(axis,), per_dataset=per_dataset,
                                                    correction=correction, dataset=dataset), "pairwise_assumptions")

st.subheader("Every pair, axis" + (" and dataset" if per_dataset else ""))
cols = ["axis_label", "dataset", "model_a", "model_b", "n_prompts", "sgs_a", "sgs_b", "diff", "ci_low", "ci_high",
        "ci_call", "n_zero", "r_plus", "r_minus", "p", "p_adj", "marker", "correction", "test", "method", "mc_se",
        "verdict", "better"]
exports.table(table[[c for c in cols if per_dataset or c != "dataset"]], "pairwise_table",
              f"sago_pairwise_{'per_dataset' if per_dataset else 'total'}_{correction}.csv")
st.caption(f"{pairwise.TESTS[test].capitalize()}, two-sided; method: how its null was computed (exact over every "
           "sign assignment, or Monte Carlo with mc_se, the standard error of p). diff = SGS(model_a) − SGS(model_b) "
           "on the shared prompts (negative: model_a is more stable); ci_low / ci_high: its 95% studentized "
           "bootstrap interval (B resamples of the prompts, not adjusted); ci_call: whether it excludes 0, or "
           "borderline when its end lies within the resampling error of 0; n_zero: prompts on which both score the "
           "same; r_plus / r_minus: signed-rank sums. verdict a / b: that model is more stable (adjusted p < 0.05, "
           "in the direction of the mean difference; under the signed-rank test the rank sums must agree); none: not "
           "distinguishable. Method: docs/METHOD.md, \"Model against model\".")
data.provenance("pairwise")
