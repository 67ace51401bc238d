"""Right or wrong: correctness beside stability — each prompt placed by its correctness against s_X(i)."""

import streamlit as st

from dashboard import accuracy, charts, controls, data, exports, frame, links, urlstate
from dashboard.safe import md
from sago_engine.correctness import views
from sago_engine.correctness.compare import QUADRANTS
from sago_engine.correctness.scorers import no_scorer_fix, unscored_datasets
from sago_engine.store import Store
from sago_engine.types import AXES, AXIS_LABELS

frame.require_frame()

BY_LABELS = {"base": "base reply right", "variants": "accuracy over variants"}
SPLITS = ("median", "0.02", "0.05", "0.1", "0.2")
BREAKDOWNS = {"dataset": ("model", "dataset"), "family": ("model", "dataset", "family"),
              "subtype": ("model", "dataset", "family", "subtype"),
              "strength": ("model", "family", "subtype", "strength"), "position": ("model", "family", "position")}

f = controls.current_filters()
st.title("Right or wrong: does instability hide wrong answers?")
st.caption("Correctness is a separate measurement from the six axes, on its own scale (share of replies that are right, "
           "0 to 1) and never part of SGS. Each dot is a prompt of one model: across, how much its behaviour moves "
           "under rephrasing (s_X(i)); up, whether its base reply is right (or the share of its variants' replies "
           "that are right). Undecided and unavailable replies are left out, never counted as wrong.")

if not data.query(Store.has_correctness):
    st.info("This store holds no correctness verdicts yet. Score its stored replies (no model is rerun):")
    st.code("python -m precompute rescore STORE --correctness", language="bash")
    st.stop()

urlstate.restore("axis", "corr_axis", choices=AXES, default="bleu")
urlstate.restore("by", "corr_by", choices=tuple(BY_LABELS), default="base")
urlstate.restore("split", "corr_split", choices=SPLITS, default="median")
urlstate.restore("quadrant", "corr_quadrant", choices=("all", *QUADRANTS), default="all")
with controls.page_controls():
    c1, c2, c3 = st.columns([1, 1.4, 1])
    with c1:
        axis = st.selectbox("Axis", AXES, key="corr_axis", format_func=AXIS_LABELS.get)
    with c2:
        by = st.segmented_control("Right means", tuple(BY_LABELS), key="corr_by", format_func=BY_LABELS.get) or "base"
    with c3:
        split = st.selectbox("Unstable above s_X(i) =", SPLITS, key="corr_split",
                             help="median: the median s_X(i) of this axis over the prompts shown")
urlstate.publish()

view = data.with_store(views.quadrant_view, f, axis=axis, by=by, threshold=None if split == "median" else float(split))
pts, counts, thr = view["points"], view["counts"], view["threshold"]
if len(view["not_run"]):
    st.warning(md("Scorers not run (their replies have no verdict): " + "; ".join(
        f"{r.dataset} {r.scorer} — {r.reason.removeprefix('not run: ')}" for r in view["not_run"].itertuples()) + "."))
unscored = unscored_datasets(view["scorers"]) if pts.empty else []
if unscored:
    st.warning(md(" ".join(f"The {no_scorer_fix(d)}." for d in unscored)))
    st.stop()
data.empty_stop(pts, "prompts with a decided base reply and a decided variant reply")
label = AXIS_LABELS[axis]

y_title = "base reply" if by == "base" else "share of variant replies right"
fig = charts.quadrant_chart(pts, thr, f"s_X(i) on {label}", y_title, data.model_colors(),
                            height=controls.chart_height(500), quadrants=QUADRANTS, binary=by == "base")
exports.chart(fig, "correctness_quadrants",
              f"Dashed line: s_X(i) = {thr:.3f} ({split}); right of it a prompt counts as unstable. "
              + ("Dots of one row are spread up and down only so that they do not hide each other. "
                 if by == "base" else "") + "Scorers: "
              + md(", ".join(f"{d} {s}" for d, s in sorted(view["scorers"].items()) if s != "none")) + ".", data=pts)

st.subheader("Prompts per quadrant")
exports.table(counts, "correctness_counts", f"sago_quadrants_{axis}.csv")
st.caption("Prompts of each model in each quadrant; n: its prompts with a decided base reply and at least one "
           "decided variant reply.")

st.subheader("Accuracy under rephrasing")
accuracy.table(view["accuracy"], ("model",), "correctness_accuracy", "sago_accuracy.csv",
               caption=controls.presentation_on())
if not controls.presentation_on():
    urlstate.restore("breakdown", "corr_breakdown", choices=tuple(BREAKDOWNS), default="dataset")
    split_by = st.selectbox("Break the accuracy down by", tuple(BREAKDOWNS), key="corr_breakdown")
    urlstate.publish()
    keys = BREAKDOWNS[split_by]
    accuracy.table(data.with_store(views.breakdown_view, f, by=keys), keys, "correctness_breakdown",
                   f"sago_accuracy_by_{split_by.replace(' ', '_')}.csv")
    st.subheader("Model against model")
    pairs = data.with_store(views.model_pairs_view, f)
    exports.table(pairs, "correctness_models", "sago_accuracy_model_vs_model.csv",
                  show=pairs.assign(acc_a=pairs["acc_a"].map(lambda v: f"{v:.1%}"),
                                    acc_b=pairs["acc_b"].map(lambda v: f"{v:.1%}"),
                                    p=pairs["p"].map(lambda v: f"{v:.3g}")).rename(columns={
                      "n": "replies both decided", "acc_a": "accuracy a", "acc_b": "accuracy b",
                      "a_only": "a right, b wrong", "b_only": "b right, a wrong", "p": "McNemar p"}))
    st.caption("The same replies (same prompt, same variant or both the base prompt) that both models' verdicts "
               "decide; McNemar's exact test on the replies only one of them gets right.")

st.subheader("The prompts")
which = st.selectbox("Quadrant", ("all", *QUADRANTS), key="corr_quadrant")
urlstate.publish()
rows = pts if which == "all" else pts[pts["quadrant"] == which]
rows = rows.assign(open=[links.href(links.PROMPTS, {"dataset": str(r["dataset"]), "prompt": str(r["prompt_id"])})
                         for _, r in rows.iterrows()])
shown = rows[["open", "model", "dataset", "quadrant", "s", "base_ok", "var_acc", "text"]].rename(
    columns={"s": f"s_X(i) on {label}", "base_ok": "base right", "var_acc": "variants right", "text": "prompt"})
exports.table(rows.drop(columns=["open", "y"]).assign(axis=axis), "correctness_points", f"sago_quadrant_prompts_{axis}.csv",
              show=shown, column_config={
                  "open": st.column_config.LinkColumn("Prompts", display_text="open ↗", width="small",
                                                      help="Opens this prompt on the Prompts page: its variants, "
                                                           "both replies and the reference"),
                  f"s_X(i) on {label}": st.column_config.NumberColumn(format="%.3f"),
                  "variants right": st.column_config.NumberColumn(format="%.2f")})
st.caption(md(f"{len(rows)} of {len(pts)} prompt(s)."))

if not controls.presentation_on():
    st.subheader("Does instability predict a flip?")
    pred = data.with_store(views.predicts_view, f)
    if len(pred):
        show = pred.assign(axis=pred["axis"].map(lambda a: AXIS_LABELS.get(a, a)),
                           auroc=[f"{a:.2f} [{lo:.2f}, {hi:.2f}]" if a == a else "n/a"
                                  for a, lo, hi in zip(pred["auroc"], pred["ci_low"], pred["ci_high"])],
                           spearman=pred["spearman"].map(lambda v: f"{v:+.2f}" if v == v else "n/a"))
        show = show[["model", "axis", "n_prompts", "n_flipped", "auroc", "spearman", "verdict"]]
        show.columns = ["model", "axis", "prompts", "flipped", "AUROC [95% CI]", "ρ(accuracy change, s)", "verdict"]
        exports.table(pred, "correctness_predicts", "sago_flip_auroc.csv", show=show)
        nothing = int((pred["verdict"] != "predicts flips").sum())
        st.caption(f"AUROC of s_X(i) for the prompts whose correctness flips under some variant (0.5: no better than "
                   f"chance; bootstrap over prompts). {nothing} of {len(pred)} model × axis cells do not predict "
                   "flips: there, how unstable a prompt is says nothing about whether its answer changes.")
data.provenance("correctness")
