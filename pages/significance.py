"""Significance: ε slider, one-sided t-test per model × axis (× dataset), markers, rejection counts per axis."""

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import charts, choices, controls, data, exports, frame, prose, safe, urlstate
from sago_engine.axis_spec import AXIS_SPECS
from sago_engine.external import paper
from sago_engine.measure.noise_floor import floor_table
from sago_engine.scoring.scores import EPSILONS, MAIN_EPSILON
from sago_engine.store import Store
from sago_engine.types import AXES, AXIS_LABELS, DEFAULT_NORMALIZERS
from sago_engine.views import assumptions, report, sampling
from sago_engine.views.report import normalizer_comparison, wide_cells
from sago_engine.views.tables import sgs_numbers, threshold_counts

frame.require_frame()

EPS_RANGE = (0.0, 0.20)  # the ε the slider offers (a link's eps outside is dropped)

f = controls.current_filters()
st.title("Significance: is the instability above ε?")
st.caption("One-sided one-sample t-test on the per-prompt scores s_X(i): H0: E[s] ≤ ε vs H1: E[s] > ε "
           "(SAGO, arXiv 2610.01428 §Significance). Markers: * p<0.05, ** p<0.01, † p<0.001. "
           "ε = 0.05 is the operating point; 0.10 is a stress test.")
scores = data.query(Store.prompt_scores, f)
data.empty_stop(scores, "deltas")

urlstate.restore("eps", "significance_eps", "float", default=MAIN_EPSILON, lo=EPS_RANGE[0], hi=EPS_RANGE[1])
urlstate.restore("per_dataset", "significance_per_dataset", "bool")


def _preset(v: float) -> None:
    st.session_state["significance_eps"] = v


with controls.page_controls():
    c1, *cs = st.columns([4, 1, 1, 1])
    with c1:
        eps = st.slider("ε (threshold on SGS)", *EPS_RANGE, step=0.001, format="%.3f", key="significance_eps")
    for col, v in zip(cs, EPSILONS):
        with col:
            st.button(f"ε = {v:g}", key=f"significance_preset_{v:g}", on_click=_preset, args=(v,),
                      type="primary" if abs(eps - v) < 1e-12 else "secondary")
    c5, c6 = st.columns(2)
    with c5:
        per_dataset = st.toggle("Per dataset", key="significance_per_dataset",
                                help="One test per model × axis × dataset instead of pooling all prompts.")
    with c6:
        correction = controls.correction_control("significance")

urlstate.publish()
first = controls.chart_first()  # presentation mode: the heatmap opens the page
sig = data.scored(report.significance_table, f, eps=float(eps), per_dataset=bool(per_dataset), correction=correction)
st.subheader(f"SGS mean ± std and markers at ε = {eps:.3f}")
index = ["model", "dataset"] if per_dataset else ["model"]
exports.table(sgs_numbers(sig), "significance_table", f"sago_significance_eps{eps:.3f}.csv",
              show=wide_cells(sig, index))
if correction != "none":
    st.caption(f"Markers follow {'Holm' if correction == 'holm' else 'Benjamini–Hochberg'}-adjusted p over the "
               f"{int(sig['p'].notna().sum())} tests of this table (models × axes{' × datasets' if per_dataset else ''}).")

prose.assumptions_note(choices.assumption_statements(
    f, (assumptions.VERDICT,), eps=float(eps), per_dataset=bool(per_dataset), correction=correction),
    "significance_assumptions")

# the test against the noise floor beside the test against ε
_nf = data.with_store(sampling.floors)
if len(_nf):
    st.subheader("Against the noise floor: is the instability above repeating the same prompt?")
    exports.table(floor_table(scores, _nf), "significance_noise_floor", "sago_noise_floor_test.csv")
    st.caption("floor: mean over prompts of the RMS Δ between repeats of the base prompt (models that are not "
               "deterministic at T = 0) or, in a sampled run, between its base samples and base sample 0. "
               "p: one-sided paired t-test of s_X(i) − floor_X(i) > 0.")

# sampled runs: the dice against rephrasing (a store without one shows nothing here)
_sep = data.with_store(sampling.separation_view, f)
if len(_sep["prompts"]):
    st.subheader("Rephrasing or the dice? Sampled runs")
    _axes = [a for a in AXES if a in set(_sep["prompts"]["axis"])]
    _axis = st.selectbox("Axis", _axes, format_func=AXIS_LABELS.get, key="significance_sampling_axis")
    _pts = _sep["prompts"][_sep["prompts"]["axis"] == _axis]
    exports.chart(charts.noise_vs_rephrasing(_pts, data.model_colors(), height=controls.chart_height(460)),
                  "significance_sampling",
                  "One dot per prompt: x = how far the base prompt's own samples land from its sample 0 (the dice), "
                  "y = how far the variants' samples land from it (rephrasing + dice). Above the dashed diagonal "
                  "rephrasing moves the reply more than resampling; a filled dot's exact permutation test has "
                  "p < 0.05.", data=_pts)
    exports.table(_sep["models"], "significance_sampling_models", "sago_rephrasing_vs_dice.csv")
    st.caption("share: the share of the mean squared movement due to rephrasing, 1 − Σ floor² / Σ movement² over "
               "prompts (95% percentile bootstrap over prompts, B = 1000, seed 0; below 0 when the dice moved more). "
               "n_exceeds: prompts whose one-sided exact permutation test has p < 0.05 (n_exceeds_bh: after "
               "Benjamini–Hochberg over the model's prompts). p: one-sided sign-flip test over prompts of "
               "movement − floor > 0. Δ-Cos reads the prompt only (sampling cannot move it); Δ-MR needs a variant.")
    exports.table(_sep["pass_k"], "significance_pass_k", "sago_pass_k.csv")
    st.caption("pass^k: all k samples agree with the base's majority reply — of the base prompt (the dice alone) "
               "and of each variant (rephrasing + dice); a prompt without a majority fails. "
               + sampling.AGREE_RULE + ".")

heat_df = data.scored_frame(report.significance_heatmap, sig)
order = [AXIS_LABELS[a] for a in AXES]
hm = alt.Chart(heat_df).encode(x=alt.X("axis_label:N", sort=order, title="axis", axis=alt.Axis(labelAngle=0, orient="top")),
                               y=alt.Y("row:N", title=None, axis=alt.Axis(labelLimit=320)))
heat = (hm.mark_rect().encode(
    color=alt.Color("neglog10p:Q", title="−log10 p", scale=alt.Scale(scheme="blues", domain=[0, 10]),
                    legend=alt.Legend(orient="bottom", gradientLength=240)),
    tooltip=["model", "axis_label", alt.Tooltip("sgs:Q", format=".4f"), alt.Tooltip("std:Q", format=".4f"),
             alt.Tooltip("p:Q", format=".2e"), "marker", "n_prompts"])
    + hm.mark_text(fontSize=charts.fonts(controls.presentation_on())["label"]).encode(
        text="label:N", color=alt.condition("datum.neglog10p > 5", alt.value("white"), alt.value("black")))).properties(
    height=alt.Step(34), title=f"SGS ± markers per model × axis, coloured by −log10 p of H0: E[s] ≤ {eps:.3f}")
with controls.chart_place(first):
    exports.altair_chart(heat, "significance_heatmap",
                        "Darker = stronger evidence that the model's instability on that axis exceeds ε; the cell "
                        "shows SGS and its marker. Blank (missing) cells are unavailable axes (n/a).",
                        data=sig, eps=float(eps))

with st.expander("Raw and adjusted p-values, with 95% bootstrap CIs", expanded=correction != "none"):
    ci_sig = data.scored(report.sgs_ci_table, f, eps=float(eps), per_dataset=bool(per_dataset), correction=correction)
    exports.table(data.scored_frame(report.pvalue_table, ci_sig), "significance_pvalues",
                 f"sago_pvalues_eps{eps:.3f}_{correction}.csv")
    st.caption("p_raw: one-sided t-test; p_adj: after the chosen control (= p_raw for none). Holm: step-down, "
               "family-wise error; BH: scipy.stats.false_discovery_control, false discovery rate. CI: studentized "
               "bootstrap (bootstrap-t) over prompts (B = 1000, seed 0).")
    if ci_sig["small_n"].any():
        st.warning("Some groups have fewer than 5 prompts: their tests and intervals are unreliable.")

st.subheader(f"Models rejecting H0 per axis at ε = {eps:.3f}")
rc_sig = data.scored(report.significance_table, f, eps=float(eps), correction=correction)
rc = data.scored_frame(report.rejection_counts, rc_sig.assign(p=rc_sig["p_adj"]))
exports.table(rc.drop(columns=["axis"]).rename(columns={"axis_label": "axis"}), "significance_counts",
             f"sago_rejections_eps{eps:.3f}.csv")
st.caption("Counts use the pooled test per model × axis (all prompts of the filtered datasets).")

st.subheader("Threshold robustness (appendix B): rejections at p<0.05 / 0.01 / 0.001")
exports.table(data.scored(threshold_counts, f, epsilons=EPSILONS, correction=correction), "significance_threshold",
              "sago_threshold_table.csv",
              show=data.scored(report.threshold_table, f, epsilons=EPSILONS, correction=correction))
if correction != "none":
    st.caption("Counts use adjusted p; each ε's models × axes form one family.")
with st.expander(f"For comparison — {paper.PAPER_SOURCE} (not computed here)"):
    st.dataframe(paper.threshold_example(), key="significance_paper_threshold", hide_index=True)

st.subheader("How much do the normalizers R_X matter?")
q = st.select_slider("Data-driven R_X = this quantile of |Δ| over the store (per axis)", [0.5, 0.9, 0.95, 0.99, 1.0],
                     value=0.95, key="significance_rx_q")
quant = data.query(Store.delta_abs_quantiles, f, q=float(q))
rx = data.scored_frame(report.data_driven_normalizers, quant, paper=tuple(sorted(DEFAULT_NORMALIZERS.items())))
rescaled = data.query(Store.prompt_scores_rescaled, f, normalizers=tuple(zip(rx["axis"], rx["r_data"])))
cmp_ = normalizer_comparison(scores, rescaled, rx, eps=float(eps))
exports.table(cmp_.drop(columns=["cell_paper", "cell_data"]), "significance_normalizers",
              f"sago_normalizers_q{q:g}.csv", show=cmp_.iloc[:, :10])
st.caption("SGS and raw markers under the paper's fixed R_X ("
           + ", ".join(f"{spec.label} {spec.normalizer:g} {spec.unit}" for spec in AXIS_SPECS.values())
           + ") and under R_X taken from the data. ratio = SGS(data R) / SGS(paper R). When the quantile is 0 "
           "(e.g. most Δ-MR are 0) the max |Δ| is used. " + safe.md(report.rx_pooling(quant)))

st.subheader("Length-normalized log-prob (per token) beside Δ-Prob")
ptok = data.scored_frame(report.per_token_prob, data.query(Store.per_token_logprob_deltas, f))
if len(ptok["table"]):
    prob_ci = data.scored(report.bootstrap_ci, f, by=("model", "axis"))
    prob_ci = prob_ci[prob_ci["axis"] == "prob"].assign(
        axis_label=f"{AXIS_SPECS['prob'].label} (R = {AXIS_SPECS['prob'].normalizer:g}, sequence)")
    cols = ["model", "axis_label", "sgs", "lo", "hi", "n_prompts", "status"]
    both = pd.concat([prob_ci[cols], ptok["table"][cols]]).sort_values(["model", "axis_label"])
    exports.table(both, "significance_per_token", "sago_prob_per_token.csv")
    st.caption(f"Δ-Prob / token = Δ of seq_logprob / n_tokens (nats per token), normalized by R = {ptok['r']:.3f} "
               "(the 95% quantile of |Δ per token| here; the paper fixes no constant for it). Δ-Prob itself is "
               "length-sensitive on purpose (as in the paper; docs/METHOD.md). CIs: studentized bootstrap over prompts.")
else:
    st.info("No sequence log-probs stored for the current filter (closed models: unavailable).")
data.provenance("significance")
