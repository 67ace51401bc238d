"""Prompts: one prompt under its variants — (F, u, s, p), the edit highlighted, responses side by side, Δ̃ heatmap."""

import streamlit as st

from dashboard import charts, controls, data, diffview, exports, frame, safe, urlstate
from sago_engine.correctness.scorers import answers
from sago_engine.external import degenerate
from sago_engine.store import Store
from sago_engine.views.detail import (
    BASE_LABEL,
    heatmap_frame,
    labelled_variants,
    responses_side_by_side,
    variant_numbers,
    variant_rows,
)

frame.require_frame()

f = controls.current_filters()
st.title("Prompts: one prompt under its variants")
st.caption("Each variant v = (family F, subtype u, strength s, position p) rewrites the base prompt; Δ̃ is how far "
           "each axis moved from the base response (SAGO, arXiv 2610.01428). Text is shown exactly as stored.")
controls.no_chart_note("the Δ̃ heatmap of a prompt (one row per variant, one panel per model) is taller than one "
                       "screen; it follows the replies below.")

plist = data.query(Store.prompt_list, f)
data.empty_stop(plist, "prompts with variants")

datasets = sorted(plist["dataset"].unique())
urlstate.restore("dataset", "prompts_dataset", choices=datasets)
c1, c2 = st.columns([1, 3])
with c1:
    dataset = st.selectbox("Dataset", datasets, key="prompts_dataset")
sub = plist[plist["dataset"] == dataset]
texts = dict(zip(sub["prompt_id"], sub["text"]))
counts = dict(zip(sub["prompt_id"], sub["n_variants"]))
urlstate.restore("prompt", "prompts_prompt", choices=list(sub["prompt_id"]))
with c2:
    pid = st.selectbox("Prompt", list(sub["prompt_id"]), key="prompts_prompt",
                       format_func=lambda p: f"{p} ({counts[p]} variants) — {safe.visible(texts[p][:90])}")

detail = data.query(Store.prompt_detail, f, prompt_id=pid)
if detail["prompt"].empty:
    st.warning("This prompt is not in the current store and filters.")
    st.stop()
base_text = str(detail["prompt"]["text"].iloc[0])
st.subheader("Base prompt x_i")
st.code(safe.visible(base_text), language=None, wrap_lines=True)
refs = answers(detail["prompt"]["reference"].iloc[0])
if refs:
    st.caption("Reference (the dataset's accepted answers; Right or wrong scores the replies against them)")
    st.code(safe.visible("\n".join(refs)), language=None, wrap_lines=True)

variants = labelled_variants(detail["variants"])
st.subheader(f"Variants x_i^(v) ({len(variants)})")
if variants.empty:
    st.info("No variants of this prompt match the filters.")
    st.stop()
exports.table(variant_numbers(detail["variants"]), key="prompts_variants", filename=f"variants_{pid.replace(':', '_')}.csv",
              show=variant_rows(detail["variants"]))
st.caption("One row per variant; semantic_score is BERTScore-F1 against the base prompt (surface-noise variants are "
           "exempt from the semantic filter, so they have none); kept says whether scoring uses the variant.")

# ---------------------------------------------------------------- one variant: the edit and the responses
st.subheader("The edit and the responses, variant by variant")
labels = list(variants["label"])
urlstate.restore("variant", "prompts_variant", choices=labels)
label = st.selectbox("Variant", labels, key="prompts_variant")
urlstate.publish()
row = variants[variants["label"] == label].iloc[0]
diffview.show_edit(base_text, str(row["text"]))
st.caption("What the variant changed: struck-through red text was removed from the base prompt, green text was added.")

side = responses_side_by_side(detail)
models = [c for c in side.columns if c not in ("variant", "variant_id")]
if not models:
    st.info("No responses for this prompt from the selected models.")
else:
    base_row = side[side["variant"] == BASE_LABEL].iloc[0]
    var_row = side[side["variant"] == label].iloc[0]
    for m in models:
        st.text(safe.visible(f"Model: {m}"))
        cb, cv = st.columns(2)
        base_kind = degenerate.reply_kind(base_row[m], base_text) if isinstance(base_row[m], str) else ""
        var_kind = degenerate.reply_kind(var_row[m], str(row["text"])) if isinstance(var_row[m], str) else ""
        with cb:
            st.caption("Response to the base prompt" + (f" — no answer ({base_kind}): a broken reference for Δ̃"
                                                        if base_kind else ""))
            st.code(safe.visible(base_row[m]), language=None, wrap_lines=True)
        with cv:
            st.caption("Response to this variant" + (f" — no answer ({var_kind})" if var_kind else ""))
            st.code(safe.visible(var_row[m]), language=None, wrap_lines=True)

# ---------------------------------------------------------------- heatmap of Δ̃ per variant × axis
st.subheader("Δ̃ per variant (F · u · s · p) × axis")
heat = heatmap_frame(detail)
if heat.empty:
    st.info("No deltas for this prompt from the selected models.")
else:
    ch = charts.delta_heatmap(heat, columns=2, label_size=charts.fonts(controls.presentation_on())["label"])

    def _pick_variant() -> None:
        """A clicked cell shows its variant's edit and responses above (the Variant box)."""
        sel = st.session_state["prompts_heatmap"].selection.get(charts.HEATMAP_SELECTION) or []
        if sel and sel[0].get("label") in labels:
            st.session_state["prompts_variant"] = sel[0]["label"]

    exports.altair_chart(ch, key="prompts_heatmap",
                        caption="Each cell is Δ̃ of one axis for one variant: 0 = no change from the base response, "
                                "red = the axis fell, blue = it rose, grey = n/a (the model cannot measure that axis). "
                                "Click a cell to show that variant's edit and responses above.",
                        data=heat, on_select=_pick_variant)

if models:
    st.subheader("All responses side by side")
    exports.table(side.drop(columns=["variant_id"]), key="prompts_responses",
                 filename=f"responses_{pid.replace(':', '_')}.csv")
    st.caption("The base prompt's response first, then each variant's, one column per model.")
