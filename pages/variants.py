"""Variants: audit of the variant set (semantic score vs the base prompt) and the paper's ablations."""

import altair as alt
import plotly.express as px
import streamlit as st

from dashboard import charts, controls, data, exports, frame, urlstate
from sago_engine.scoring.ablations import (
    TONE_TEST,
    dose_response,
    length_factor,
    recorded_threshold,
    semantic_audit,
    semantic_histogram,
    tone_asymmetry,
    tone_bars,
)
from sago_engine.store import Store
from sago_engine.types import AXES, AXIS_LABELS
from sago_engine.variants.noop import noop_table

frame.require_frame()

f = controls.current_filters()
st.title("Variants: the variant set and the ablations")
st.caption("How close the variants stay to their base prompts, and how Δ̃ depends on the variant's strength s, "
           "position p, social tone and target length (SAGO, arXiv 2610.01428 §Ablations).")

# ---------------------------------------------------------------- semantic-score audit
audit = data.query(Store.variant_audit, f, with_meta=False, with_ids=False)
data.empty_stop(audit, "variants")
thr = data.query(Store.semantic_thresholds)
threshold = recorded_threshold(thr)

st.subheader("Semantic score vs the base prompt (BERTScore-F1)")
hist = semantic_histogram(audit)
if threshold is not None:
    hist = hist.assign(threshold=threshold)
bars = alt.Chart().mark_bar().encode(
    x=alt.X("bin_start:Q", bin="binned", title="BERTScore-F1 of the variant vs its base prompt", scale=alt.Scale(domain=[0, 1])),
    x2="bin_end:Q",
    y=alt.Y("count:Q", title="variants", stack=True),
    color=alt.Color("kept:N", scale=alt.Scale(domain=["kept", "rejected"], range=["#009E73", "#D55E00"]), title=""),
    tooltip=["family:N", "kept:N", alt.Tooltip("bin_start:Q", format=".3f"), alt.Tooltip("bin_end:Q", format=".3f"),
             "count:Q"],
).properties(height=150, width=700)
layers = [bars]
if threshold is not None:
    # mid grey: seen on a light and a dark page; labelled in every panel
    layers.append(alt.Chart().mark_rule(color=charts.NEUTRAL, strokeDash=[6, 4], size=2).encode(
        x="min(threshold):Q", tooltip=[alt.Tooltip("min(threshold):Q", title="threshold", format=".3f")]))
    layers.append(alt.Chart().mark_text(align="left", baseline="top", dx=5, y=2, color=charts.NEUTRAL).encode(
        x="min(threshold):Q", text=alt.value(f"threshold t = {threshold:.3f}")))
hist_chart = alt.layer(*layers, data=hist).facet(row=alt.Row("family:N", title=None)).resolve_scale(y="independent")
thr_txt = (f"the dashed line is the filter threshold t = {threshold:.3f} on the encoder's scale" if threshold is not None
           else "runs in this store used different thresholds (see the table below)" if thr["threshold"].notna().any()
           else "no threshold is recorded in this store")
rule_txt = ("Social-register and structural variants below it are rejected; surface noise is exempt."
            if threshold is not None else "Surface noise is exempt from the filter.")
exports.altair_chart(hist_chart, key="variants_semantic_hist",
                    caption=f"How close each variant stays in meaning to its base prompt (1 = same); {thr_txt}. "
                            + rule_txt, data=hist)
with st.expander("How the threshold is mapped from the paper's 0.85"):
    st.markdown(
        "The paper keeps a non-surface variant only if BERTScore-F1 > 0.85 on RoBERTa-large. sago scores with "
        "MiniLM-L6, whose F1 scale differs (unrelated text ≈ 0.12 instead of 0.83), so the threshold is mapped by "
        "bert-score's baseline rescaling: t = b_enc + (0.85 − 0.8312) / (1 − 0.8312) × (1 − b_enc) ≈ 0.219. "
        "A raw 0.85 on RoBERTa-large is only 11 % of the way from unrelated text to identical text, so the "
        "mapped filter removes only variants close to unrelated text. Details: docs/METHOD.md, "
        "sago_engine/variants/README.md.")
    exports.table(thr, key="variants_thresholds", filename="semantic_thresholds.csv")
exports.table(semantic_audit(audit, threshold), key="variants_audit_table", filename="semantic_audit.csv",
              missing={"n_below": "no single threshold", **{c: "not scored" for c in ("min", "p05", "median", "max")}})
st.caption("Per family: variants generated, scored, kept and rejected, and the spread of their semantic scores.")

counts = data.query(Store.filter_counts)
if threshold is not None and counts["variants_scored"] and not counts["variants_rejected"]:
    st.info(f"The semantic filter rejected nothing: all {counts['variants_scored']} scored variants of this store "
            f"score above t = {threshold:.3f}. A filter that rejects nothing does not guard the measurement against "
            "variants that changed the question; docs/METHOD.md, \"Semantic filter\", gives its precision and "
            "recall on labelled pairs and a setting that rejects meaning changes (score = \"recall\").")
rejected = data.query(Store.rejected_variants, f)
with st.expander(f"Rejected variants and why ({len(rejected)}{'+' if len(rejected) >= 1000 else ''})"):
    if rejected.empty:
        st.info("No variant was rejected under the current filters.")
    else:
        exports.table(rejected, key="variants_rejected_table", filename="rejected_variants.csv")
        st.caption("Rejected variants are stored but excluded from every score; LLM rewrites (generator llm:…) "
                   "that were rejected are not sent to the models at all.")

noops = data.query(Store.noop_counts, f)
with st.expander(f"Variants that do not vary ({int(noops['n'].sum()) if len(noops) else 0})"):
    if noops.empty:
        st.info("Every variant under the current filters changes what the model reads.")
    else:
        exports.table(noop_table(noops), key="variants_noop_table", filename="noop_variants.csv")
    st.caption("A variant whose text equals its base prompt (e.g. case noise on a script without letter case), or whose "
               "model input equals the base's once the chat template has rendered it, is no perturbation: it is not "
               "run and counts in no score (it would read as Δ = 0, perfectly stable).")

# ---------------------------------------------------------------- ablations
abl = data.query(Store.ablation_frame, f)
cells = abl["cells"]
if cells.empty:
    st.warning("No deltas of kept variants for the current store and filters: the ablations need model runs.")
    st.stop()
colors = data.model_colors()
axes_present = [a for a in AXES if a in set(cells["axis"])]
families = sorted(cells["family"].unique())
urlstate.restore("axis", "variants_axis", choices=axes_present,
                 default="bleu" if "bleu" in axes_present else axes_present[0])
urlstate.restore("family", "variants_family", choices=families)
c1, c2 = st.columns(2)
with c1:
    axis = st.selectbox("Axis", axes_present, key="variants_axis", format_func=AXIS_LABELS.get)
with c2:
    family = st.selectbox("Family (F)", families, key="variants_family")
urlstate.publish()
ax_label = AXIS_LABELS[axis]

st.subheader(f"Dose-response by strength s: mean |Δ̃| of {ax_label}, chosen family")
dose_s = dose_response(cells, by="strength", level="subtype")
ds = dose_s[(dose_s["axis"] == axis) & (dose_s["family"] == family)].sort_values(["model", "subtype", "strength"])
if ds.empty:
    st.info(f"No {ax_label} values for variants of the chosen family under the current filters.")
else:
    rows = -(-ds["subtype"].nunique() // 3)
    fig = px.line(ds, x="strength", y="mean_abs", color="model", facet_col="subtype", facet_col_wrap=3, markers=True,
                  error_y="se_abs", color_discrete_map=colors, hover_data=["n", "rms", "mean_signed"],
                  facet_row_spacing=0.16 if rows > 1 else 0.03,  # room for a row's x ticks above the next row's titles
                  labels={"mean_abs": f"mean |Δ̃| ({ax_label})", "strength": "strength s"})
    # each panel has its own strength scale: label every one, in whole steps where the strengths are whole
    fig.update_xaxes(matches=None, showticklabels=True, dtick=1 if (ds["strength"] % 1 == 0).all() else None)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))
    fig.update_layout(height=controls.chart_height(300 + 140 * rows), legend_title_text="model")
    exports.chart(fig, key="variants_dose_strength", data=ds,
                 caption="Each line is one model: how much the axis moves on average as the variant gets stronger "
                         "(whiskers: ± one standard error over variants); a rising line is a dose-response.")

st.subheader(f"Dose-response by position p: mean |Δ̃| of {ax_label}")
dose_p = dose_response(cells, by="position", level="family")
dp = dose_p[dose_p["axis"] == axis].copy()
fig = px.bar(dp, x="position", y="mean_abs", color="model", facet_col="family", barmode="group", error_y="se_abs",
             color_discrete_map=colors, hover_data=["n", "rms"],
             category_orders={"position": ["PREFIX", "SUFFIX", "GLOBAL"]},
             labels={"mean_abs": f"mean |Δ̃| ({ax_label})", "position": "position p"})
fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))
fig.update_layout(height=controls.chart_height(420), legend_title_text="model")
exports.chart(fig, key="variants_dose_position", data=dp,
             caption="Mean movement of the axis when the edit is at the start (PREFIX), the end (SUFFIX) or "
                     "throughout (GLOBAL) of the prompt, per family; structural variants are always GLOBAL.")

st.subheader("Social tone asymmetry: negative vs polite register")
tone = tone_asymmetry(cells)
if tone.empty:
    st.info("No social-register variants with a negative or polite tone under the current filters.")
else:
    long = tone_bars(tone)
    long["axis_label"] = long["axis"].map(AXIS_LABELS)
    fig = px.bar(long, x="model", y="mean_abs", color="tone", barmode="group", facet_col="axis_label",
                 facet_col_wrap=3, facet_col_spacing=0.07,  # each panel's own y ticks clear of the panel before
                 color_discrete_map={"negative": "#D55E00", "polite": "#0072B2"},
                 category_orders={"axis_label": [AXIS_LABELS[a] for a in AXES], "tone": ["negative", "polite"]},
                 labels={"mean_abs": "mean |Δ̃|", "axis_label": "axis"})
    fig.update_yaxes(matches=None, showticklabels=True)
    fig.update_xaxes(title=None)  # the ticks name the models; a title under slanted names meets an export's footer
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))
    fig.update_layout(height=controls.chart_height(560))
    exports.chart(fig, key="variants_tone", data=tone,
                 caption="Orange bars taller than blue mean a rude, impatient or hostile phrasing moves that axis more "
                         "than a polite one; the table gives the one-sided test per model and axis.")
    show = tone.assign(axis=tone["axis"].map(AXIS_LABELS))
    exports.table(show, key="variants_tone_table", filename="tone_asymmetry.csv")
    st.caption(f"Test: {TONE_TEST}. Markers: * p<0.05, ** p<0.01, † p<0.001.")

st.subheader("Length factor: spread of per-prompt instability vs target length ratio")
lf = length_factor(abl["length"])
if lf.empty:
    st.info("No structural/length variants under the current filters.")
else:
    lf = lf.assign(axis_label=lf["axis"].map(AXIS_LABELS))
    fig = px.line(lf.sort_values(["model", "axis", "target_ratio"]), x="target_ratio", y="std_instability",
                  color="axis_label", facet_col="model", facet_col_wrap=4, markers=True,
                  category_orders={"axis_label": [AXIS_LABELS[a] for a in AXES]}, hover_data=["n_prompts", "mean_instability"],
                  labels={"target_ratio": "target length ratio",  # one per panel: short, so neighbours do not meet
                          "std_instability": "std over prompts of s_i", "axis_label": "axis"})
    fig.add_vline(x=1.0, line_dash="dot", line_color="#888")
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))
    fig.update_layout(height=controls.chart_height(460))
    exports.chart(fig, key="variants_length", data=lf,
                 caption="For each target length ratio (below 1, left of the dotted line = shortened; above 1 = lengthened), how much "
                         "the per-prompt instability varies between prompts, one line per axis.")
