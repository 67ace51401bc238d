"""Profiles: radar of SGS per model over the six axes (total or one dataset), bootstrap CIs, n/a axes, paper overlay."""

import plotly.graph_objects as go
import streamlit as st

from dashboard import accuracy, charts, choices, controls, data, exports, frame, links, prose, urlstate
from sago_engine.external import degenerate, paper
from sago_engine.measure.noise_floor import floor_table, reply_health_table
from sago_engine.scoring import pairwise
from sago_engine.scoring.cap_health import cut_table, cut_warning
from sago_engine.scoring.scores import MAIN_EPSILON
from sago_engine.scoring.store_shape import per_dataset_note
from sago_engine.store import Store
from sago_engine.types import AXES, AXIS_LABELS
from sago_engine.views import assumptions, report, sampling
from sago_engine.views.report import radar_axis_scales, wide_cells, wide_ci_cells
from sago_engine.views.tables import sgs_numbers

frame.require_frame()

SCALES = ("common (paper)", "per axis")
B_RANGE = (100, 10000)  # bootstrap resamples the widget offers (a link's B outside is dropped)
f = controls.current_filters()
st.title("Model profiles")
st.caption(
    "SGS per axis (lower = more stable; SAGO, arXiv 2610.01428). Axes are never added together. "
    f"Markers: one-sided t-test of H0: E[s] ≤ ε at ε = {MAIN_EPSILON}: * p<0.05, ** p<0.01, † p<0.001."
)
scores = data.query(Store.prompt_scores, f)
data.empty_stop(scores, "deltas")
datasets = sorted(scores["dataset"].unique())

urlstate.restore("scope", "profiles_scope", choices=["Total (all datasets)", *datasets])
urlstate.restore("B", "profiles_boot", "int", default=1000, lo=B_RANGE[0], hi=B_RANGE[1])
urlstate.restore("ci", "profiles_ci", choices=["bands", "whiskers", "off"])
urlstate.restore("paper", "profiles_paper", "bool")
urlstate.restore("scale", "profiles_scale", choices=SCALES)
with controls.page_controls():
    c1, c2, c3 = st.columns([2, 1, 1])
    with c1:
        which = st.selectbox("Scope", ["Total (all datasets)", *datasets], key="profiles_scope",
                             help="Total: every prompt of every dataset weighs the same.")
    with c2:
        n_boot = st.number_input("Bootstrap resamples B", *B_RANGE, step=100, key="profiles_boot",
                                 help="Percentile bootstrap over prompts (scipy.stats.bootstrap), seeded; 95% CI.")
    with c3:
        ci_style = st.radio("CI", ["bands", "whiskers", "off"], key="profiles_ci", horizontal=True)
    correction = controls.correction_control("profiles")
    scale_mode = st.radio("Radial scale", SCALES, key="profiles_scale", horizontal=True,
                          help="Common: one SGS scale for every spoke, as in the paper. Per axis: each spoke is "
                               "scaled to the largest value shown on it (its maximum is printed beside the axis name), "
                               "so small axes such as Δ-Cos become readable; spokes are then not comparable with each "
                               "other.")
    overlay = st.toggle("Overlay values reported in arXiv 2610.01428 (Figure 2a, Table 1)", key="profiles_paper",
                        help="Published totals, drawn dashed and labelled; never mixed into local numbers.")

urlstate.publish()
dataset = None if which.startswith("Total") else which
radar = data.scored(report.radar_data, f, dataset=dataset, n_resamples=int(n_boot), seed=0)
colors = data.model_colors()
per_axis = scale_mode == SCALES[1]
rep_overlay = paper.reported_totals() if overlay and dataset is None else None
scales = (radar_axis_scales(radar, use_ci=ci_style != "off", extra=rep_overlay) if per_axis
          else {a: 1.0 for a in AXES})
labels = [AXIS_LABELS[a] for a in AXES]
spokes = [f"{AXIS_LABELS[a]} (max {scales[a]:.3g})" if per_axis else AXIS_LABELS[a] for a in AXES]


def _scaled(values, axes):
    """Divide each value by its spoke's scale (1 on the common scale); None stays a gap."""
    return [None if v is None or v != v else float(v) / scales[a] for v, a in zip(values, axes)]


def _closed(v):
    return list(v) + [v[0]]


fig = go.Figure()
for model, grp in radar.groupby("model", sort=True):
    grp = grp.set_index("axis").loc[list(AXES)]
    col = colors.get(model, "#444444")
    r = _scaled([None if not ok else v for v, ok in zip(grp["sgs"], grp["available"])], AXES)
    hover = [f"{model}<br>{AXIS_LABELS[a]}: " + ("n/a (unavailable)" if not ok else f"{v:.3f} [{lo:.3f}, {hi:.3f}]")
             for a, v, lo, hi, ok in zip(grp.index, grp["sgs"], grp["lo"], grp["hi"], grp["available"])]
    if ci_style == "bands" and grp["available"].all() and grp["lo"].notna().all():
        fig.add_trace(go.Scatterpolar(r=_closed(_scaled(grp["hi"], AXES)) + _closed(_scaled(grp["lo"], AXES))[::-1],
                                      theta=_closed(spokes) + _closed(spokes)[::-1], mode="lines",
                                      fill="toself", fillcolor=col, opacity=0.18, line={"width": 0, "color": col},
                                      name=f"{model} 95% CI", legendgroup=model, showlegend=False, hoverinfo="skip"))
    fig.add_trace(charts.radar_trace(r, spokes, model, legendgroup=model, mode="lines+markers",
                                     line={"color": col, "width": 2.5}, text=hover, hoverinfo="text"))
    if ci_style == "whiskers":
        for a, lab, lo, hi, ok in zip(grp.index, spokes, grp["lo"], grp["hi"], grp["available"]):
            if ok and lo == lo:
                fig.add_trace(go.Scatterpolar(r=[lo / scales[a], hi / scales[a]], theta=[lab, lab], mode="lines",
                                              line={"color": col, "width": 5}, opacity=0.45, legendgroup=model,
                                              showlegend=False, hoverinfo="skip", name=f"{model} 95% CI {lab}"))
if overlay and dataset is None:
    rep = rep_overlay
    pcol = paper.paper_colors()
    for model, grp in rep.groupby("model", sort=False):
        vals = dict(zip(grp["axis"], grp["sgs"]))
        r = _scaled([vals.get(a) for a in AXES], AXES)
        fig.add_trace(charts.radar_trace(
            r, spokes, f"{model} ({paper.PAPER_SOURCE})", mode="lines", legendgroup="reported",
            legendgrouptitle_text="Reported (paper)", line={"dash": "dash", "width": 1.5, "color": pcol[model]},
            meta={"source": paper.PAPER_SOURCE}, visible=True))
hi_max = radar[["sgs", "hi"]].max().max()
rmax = max(0.05, float(hi_max if hi_max == hi_max else 1.0))
if rep_overlay is not None:
    rmax = max(rmax, float(rep_overlay["sgs"].max()))
# no radial title: it is drawn across the tick labels; the chart's title names the scale
radial = ({"range": [0, 1.05], "tickformat": ".0%"} if per_axis else {"range": [0, min(1.0, rmax * 1.1)]})
radial["angle"] = 30  # the radial scale between the first two spokes, not on top of Δ-Cos's
fig.update_layout(polar=charts.polar_layout(radial),
                  legend_title_text="model", margin={"l": 40, "r": 40, "t": 40, "b": 40},
                  height=controls.chart_height(520),
                  title={"text": f"SGS per axis — {controls.scope_title(which, f)}"
                         + (" — PER-AXIS SCALE: % of each spoke's max" if per_axis else "")})
exports.chart(fig, "profiles_radar",
             "Each line is one model; closer to the centre = more stable on that axis. Shaded band / whisker = 95% "
             "bootstrap CI over prompts. A gap means the axis is unavailable for that model (n/a, not 0). A model's "
             "worst prompts on an axis: click its cell in the total SGS table below."
             + (" Per-axis scale: each spoke runs from 0 to the largest value shown on it (printed beside the "
                "axis name); compare models along a spoke, not spokes with each other." if per_axis
                else " Common scale, as in the paper: one SGS scale for all six spokes."),
             data=radar)
if radar["model"].nunique() > 1:
    lead = data.scored(pairwise.leader_sentences, f, per_dataset=dataset is not None, correction=correction,
                       n_resamples=int(n_boot), seed=0)
    st.subheader("Is the most stable model ahead of the runner-up?")
    prose.sentences(lead["sentence"] if dataset is None else lead.loc[lead["dataset"] == dataset, "sentence"])
    links.page_link(links.PAIRWISE, {"scope": which}, "Every pair of models, per axis: Model vs model",
                    icon=":material/compare_arrows:")
prose.assumptions_note(choices.assumption_statements(
    f, (assumptions.RANKING, assumptions.VERDICT), per_dataset=dataset is not None, correction=correction,
    dataset=dataset), "profiles_assumptions")
if overlay and dataset is not None:
    st.info("The paper reports totals only: the overlay is drawn on the Total scope.")
st.caption("Δ-Cos: under a chat template the layer-0 (embedding) cosine is trivially 1; the definition is kept.")

tables = data.scored(report.score_tables, f, eps=MAIN_EPSILON, correction=correction)
mc_note = "" if correction == "none" else f" Markers use {correction.upper() if correction == 'bh' else 'Holm'}-adjusted p."
st.subheader("Total SGS, mean ± std over prompts")
total_shown = wide_cells(tables["total"], ["model"])
picked = exports.table(sgs_numbers(tables["total"]), "profiles_total_table", "sago_sgs_total.csv", show=total_shown,
                       on_select="rerun", selection_mode="single-cell").selection.cells
axis_of = {label: a for a, label in AXIS_LABELS.items()}
if picked and picked[0][1] in axis_of:  # a cell: that model's worst prompts on that axis
    links.jump(links.WORST, {"rank": "prompt", "model": total_shown.iloc[picked[0][0]]["model"],
                             "axis": axis_of[picked[0][1]]})
st.caption("Family of tests for the correction: every model × axis of this table." + mc_note
           + " Click a cell to see that model's worst prompts on that axis.")
# replies that are not answers, and the noise floor, beside the SGS
def health_table(title: str, df, key: str, filename: str, caption: str) -> None:
    """A reply-health table under its bold title, with its caption; its many columns wrap to the page's width."""
    st.markdown(f"**{title}**")
    exports.table(df, key, filename, wrap=True)
    st.caption(caption)


health = reply_health_table(data.query(Store.reply_health))
if len(health):
    health_table("Reply health: replies that are not answers, per model", health, "profiles_reply_health",
                 "sago_reply_health.csv",
                 "Errors; empty replies (of which budget_spent: the token budget went to hidden reasoning, so the "
                 "text axes of those pairs are n/a); refused (content filter / safety / refusal), judge answers "
                 "without an unambiguous YES/NO (fell back to the heuristic), replies whose server log-probs were "
                 "unusable (invalid_logprobs: their Δ-Prob and Δ-Ent are n/a).")
cuts = cut_table(data.query(Store.cut_replies), data.query(Store.cut_pairs))
if len(cuts) and not cuts["cut"].any():
    st.caption("Reply cap: no stored reply stopped at max_new_tokens.")
elif len(cuts):
    health_table("Reply health: replies cut at the reply cap, per model × dataset", cuts, "profiles_cut_replies",
                 "sago_cut_replies.csv",
                 "cut: replies that stopped at max_new_tokens (finish reason \"length\"; flag hit_cap) instead of "
                 "ending on their own; both_cut: variant pairs whose base and variant replies were both cut — equal "
                 "lengths by construction, so Δ-MR's length rule and Δ-BLEU compare cut text there. Stored values "
                 "are unchanged; this marks where to read them with care.")
    warn = cut_warning(cuts)
    if warn:
        st.warning(warn)
flagged = data.scored_frame(degenerate.reply_flags, data.query(Store.reply_texts, f))
counts = data.scored_frame(degenerate.degenerate_counts, flagged[["model", "variant_id", "kind"]])
if len(counts) and counts["degenerate"].sum():
    st.markdown("**Replies that are no answer: loops, echoes, token salad, per model**")
    exports.table(counts, "profiles_degenerate", "sago_degenerate_replies.csv")
    st.caption("loop: half or more of the reply's word 4-grams repeat an earlier one; echo: the reply restates the "
               "prompt's first line (twice, or as nearly all of it); salad: not text in any language. A degenerate "
               "base reply is a broken reference: Method choices shows SGS and rankings without those prompts.")
nf = data.with_store(sampling.floors)
if len(nf):
    exports.table(floor_table(data.query(Store.prompt_scores, f), nf), "profiles_noise_floor", "sago_noise_floor.csv")
    st.caption("Noise floor: the same axes between repeats of the base prompt, or in a sampled run between its "
               "base samples and base sample 0 (RMS per prompt, mean over prompts). p: one-sided paired t-test of "
               "s − floor > 0 over prompts (is the instability above what asking the same prompt again gives?).")
accuracy.section(f, ("model",), "profiles_accuracy", "sago_accuracy.csv",
                 "Accuracy under rephrasing (share of replies right — not an SGS)")
st.subheader("SGS per dataset × axis")
one = per_dataset_note(len(datasets))
if one:
    st.caption(one)
else:
    exports.table(sgs_numbers(tables["per_dataset"]), "profiles_dataset_table", "sago_sgs_per_dataset.csv",
                  show=wide_cells(tables["per_dataset"], ["model", "dataset"]))
st.subheader("Total SGS with 95% bootstrap CI")
ci_tab = data.scored(report.sgs_ci_table, f, eps=MAIN_EPSILON, correction=correction, n_resamples=int(n_boot))
exports.table(sgs_numbers(ci_tab), "profiles_ci_table", "sago_sgs_total_ci.csv", show=wide_ci_cells(ci_tab, ["model"]))
st.caption("Percentile bootstrap over prompts (scipy.stats.bootstrap, seed 0). \"no variation\": every per-prompt "
           "score is equal, so the interval has zero width (no NaN)." + mc_note)
small = ci_tab[ci_tab["small_n"]]
if len(small):
    st.warning(f"{len(small)} model × axis group(s) rest on fewer than 5 prompts: intervals and tests are unreliable.")

st.subheader("Axis availability per model")
avail = data.query(Store.axis_availability, f)
av = avail.assign(axis_label=avail["axis"].map(AXIS_LABELS),
                  status=[("available" if ok else f"n/a — {why or 'not measured'}")
                          for ok, why in zip(avail["available"], avail["reasons"])])
av_w = av.pivot_table(index="model", columns="axis_label", values="status", aggfunc="first")
av_w = av_w.reindex(columns=labels).fillna("n/a — no rows").reset_index()
exports.table(av_w, "profiles_availability", "sago_axis_availability.csv")
data.provenance("profiles")
