"""Method choices: SGS, markers, rankings and the paper's claims under each option the paper leaves open;
the mirroring judge against the heuristic and against the user's own labels."""

from pathlib import Path

import streamlit as st

from dashboard import accuracy, charts, choices, controls, data, exports, frame, safe, urlstate
from sago_engine.scoring import judge_audit, pairwise
from sago_engine.scoring.scores import EPSILONS, MAIN_EPSILON
from sago_engine.store import Store
from sago_engine.store.sidecar.judge_labels import no_labels, read_labels, write_label
from sago_engine.views import method_choices as mc
from sago_engine.views.tables import sgs_numbers

frame.require_frame()

f = controls.current_filters()
st.title("Method choices: how much do open choices move the results?")
st.caption("SAGO (arXiv 2610.01428) fixes the formulas but leaves some measurement choices open. sago records each "
           "as an option and recomputes SGS (95% studentized-bootstrap CI over prompts, B = 1000, seed 0; markers: "
           "one-sided t-test of H0: E[s] ≤ ε), the models' order between options (Kendall's τ-b: pairs of models "
           "that keep vs swap order; robust with few models and ties) and which of the paper's claims still hold.")
urlstate.restore("eps", "methods_eps", "float", choices=EPSILONS, default=MAIN_EPSILON)
with controls.page_controls():
    eps = st.select_slider("ε (threshold of the markers and claims)", list(EPSILONS), key="methods_eps",
                           format_func=lambda v: f"{v:g}")
urlstate.publish()
first = controls.chart_first()  # presentation mode: the first choice's chart opens the page

summ = choices.summaries(f, eps=float(eps))

st.subheader("Which options come closest to the paper's published scale?")
lines = [mc.closest_statement(ch.title, s["closest"], s["scale"]) for ch, s in summ if s is not None]
st.markdown("\n".join(f"- {safe.md(ln)}" for ln in lines) if lines else "No choice with two options in this store.")
st.caption("Distance: per axis, how many orders of magnitude the median SGS over this store's models lies outside "
           "the range of the paper's eight open models (Figure 2a; 0 = inside), averaged over the axes the choice "
           "changes. The models differ from the paper's, so this compares scales, not models.")

lead = next((i for i, (_ch, s) in enumerate(summ) if s is not None), None)  # the first choice with a chart
for i, (ch, s) in enumerate(summ):
    st.header(safe.md(ch.title))
    if s is None:
        st.info(safe.md(ch.missing) if ch.missing else "Fewer than two options have scores for the current filter.")
        continue
    st.markdown("\n".join(f"- **{safe.md(k)}**: {safe.md(v)}" for k, v in ch.notes.items()))
    options = [o for o in ch.options if o in set(s["sgs"]["option"])]
    with controls.chart_place(first if i == lead else None):
        if first is not None and i == lead:  # above the page's text: the chart names its choice
            st.subheader(safe.md(ch.title))
        # presentation mode: the opening chart's model rows share 180 px per panel, so it fits the first screen
        row_px = max(30, 180 // max(1, s["sgs"]["model"].nunique())) if first is not None and i == lead else 60
        exports.altair_chart(charts.option_intervals(s["sgs"], options, height=min(60, row_px)), f"methods_chart_{i}",
                             "Each dot is a model's SGS under one option, the bar its 95% bootstrap CI. Dots that "
                             "move apart between options show how much the choice matters for that model.",
                             data=s["sgs"])
    exports.table(sgs_numbers(s["sgs"]), f"methods_sgs_{i}", f"sago_method_{ch.key}_sgs.csv",
                  show=mc.option_wide(s["sgs"], options))
    st.caption(f"SGS [95% CI] and marker at ε = {eps:g} per option.")
    st.markdown(f"**Rank agreement with '{safe.md(ch.reference)}'**")
    exports.table(s["ranks"], f"methods_ranks_{i}", f"sago_method_{ch.key}_ranks.csv")
    st.caption("n_discordant: pairs of models whose order flips. τ-b = 1: same order, −1: reversed; NaN with the "
               "reason when it cannot be computed. p is two-sided; p_method says how it was computed (exact, or a "
               "permutation test when SGS are tied).")
    st.markdown("**The paper's claims under each option**")
    exports.table(mc.claims_wide(s["claims"], options), f"methods_claims_{i}", f"sago_method_{ch.key}_claims.csv",
                  wrap=True)
    st.caption("(a) and (b) use raw one-sided p over every axis of the option; (c) uses the Rankings page's bootstrap "
               "(P(reversal) ≥ 0.95) on the axes this choice changes.")
    with st.expander("Distance to the paper's scale, per axis"):
        exports.table(s["scale"], f"methods_scale_{i}", f"sago_method_{ch.key}_scale.csv")

# ---------------------------------------------------------------- correctness scorer
accuracy.scorer_choice(f)

# ---------------------------------------------------------------- the paired test of Model vs model
st.header("Model vs model: which paired test")
tests = " and ".join(f"the {t}" for t in pairwise.TESTS.values())
diff_rows = data.scored(pairwise.tests_compared, f, correction="holm")
st.markdown(f"Model vs model, Rankings and Profiles test each pair of models with the {pairwise.TEST_NAME} "
            "(it tests the mean difference the pages show); the other choice is the Wilcoxon signed-rank test, "
            "which asks whether one model is more stable across the shared prompts. Both are exact over every sign "
            "assignment at the pages' prompt counts. "
            + (f"Under Holm, every verdict is the same under {tests}." if diff_rows.empty else
               f"Under Holm, {len(diff_rows)} verdict(s) differ between them:"))
if not diff_rows.empty:
    exports.table(diff_rows, "methods_paired_test", "sago_method_paired_test.csv")
    st.caption("verdict a / b: that model is more stable (Holm-adjusted p < 0.05); none: not distinguishable. "
               "Family: every pair × axis (all datasets), or every pair × axis × dataset (per dataset).")

# ---------------------------------------------------------------- mirroring judge audit
st.header("Δ-MR: mirroring judge vs heuristic")
examples = data.query(Store.mirroring_examples, f)
if examples.empty:
    st.info("No judge verdicts in this store. Δ-MR of social-register variants is decided by an LLM judge only when "
            "the run's config has a [judge] section (docs/CONFIG.md, '[judge] and [rewriter]'); the offline heuristic's "
            "verdict is stored beside each judge answer.")
    data.provenance("methods")
    st.stop()

agr = data.scored_frame(judge_audit.judge_vs_heuristic, examples)
c1, c2, c3 = st.columns(3)
c1.metric("Cohen's κ (judge vs heuristic)", "n/a" if agr["kappa"] != agr["kappa"] else f"{agr['kappa']:.3f}")
c2.metric("Agreement", "n/a" if agr["n"] == 0 else f"{agr['agree']:.1%}")
c3.metric("Judge calls with a usable verdict", f"{agr['n']} / {agr['n_calls']}")
if agr["reason"]:
    st.caption(f"κ is not defined: {safe.md(agr['reason'])}.")
st.dataframe(agr["confusion"], key="methods_confusion")
st.caption("Counts of judge (rows) vs heuristic (columns) verdicts: YES = the reply mirrors the variant's register. "
           "κ and the table: scikit-learn (cohen_kappa_score, confusion_matrix).")
exports.table(agr["per_model"], "methods_judge_models", "sago_judge_agreement_per_model.csv")
st.subheader("Where they disagree")
exports.table(judge_audit.disagreements(examples), "methods_disagreements", "sago_judge_disagreements.csv")

st.subheader("Check the judge yourself")
sample = judge_audit.audit_sample(examples)
store_file = Path(data.store_path())
acc = frame.access()
label_file = acc.label_store(store_file)
try:
    labels = read_labels(label_file, store_file)
except ValueError as e:  # a sidecar is untrusted input: refused, never run
    st.warning(f"The label file {safe.md(label_file.name)} cannot be read ({safe.md(data.path_free(str(e), label_file))}); no labels are shown "
               "and none can be saved until it is moved away.")
    labels, label_broken = no_labels(), True
else:
    label_broken = False
done = set(zip(labels["run_id"], labels["variant_id"], labels["response_of"]))
keys = list(zip(sample["run_id"], sample["variant_id"], sample["response_of"]))
st.caption(f"The paper hand-checked 10% of its judge calls. This seeded sample holds {len(sample)} of the {agr['n']} "
           f"usable calls (ordered by a hash of each call, the same on every machine); {sum(k in done for k in keys)} "
           f"labelled so far. Labels go to {safe.md(label_file.name)} beside the store, never into the store.")
first_open = next((j for j, k in enumerate(keys) if k not in done), 0)
pick = st.selectbox("Example", list(range(len(sample))), index=first_open, key="methods_label_pick",
                    format_func=lambda j: f"#{j + 1} · {sample['model'].iloc[j]} · {sample['variant_id'].iloc[j]} "
                                          f"({sample['response_of'].iloc[j]} reply)"
                                          + (" · labelled" if keys[j] in done else ""))
row = sample.iloc[int(pick)]
st.text(safe.visible(f"Variant prompt ({row['subtype']}, strength {row['strength']:g}):"))
st.code(safe.visible(row["variant_prompt"]), language=None, wrap_lines=True)
st.text(safe.visible(f"Judged reply ({row['response_of']}):"))
st.code(safe.visible(row["response"]), language=None, wrap_lines=True)
st.text(safe.visible(f"Judge's raw answer: {row['raw']!s}   ·   judge verdict: {'YES' if row['verdict'] == 1 else 'NO'}"
                     f"   ·   heuristic verdict: {'YES' if row['heuristic_verdict'] == 1 else 'NO'}"))
if label_broken:
    pass
elif not acc.writes:
    st.info("Labelling is off on this shared server: it was started without --live, so it writes nothing (a "
            "visitor's label would be a write into the shared folder). Run the dashboard locally, or share with "
            "--live, to record labels.")
else:
    mine = st.radio("Your label: does the reply show the variant's register?", ["YES", "NO"], horizontal=True,
                    key="methods_label_value", index=None)
    st.button("Save label", key="methods_label_save", disabled=mine is None,
              on_click=lambda: st.session_state.__setitem__("methods_label_requested", True))
    if st.session_state.pop("methods_label_requested", False):  # set in on_click: survives the frame's reroute
        try:
            write_label(label_file, store_file, row["run_id"], row["variant_id"], row["response_of"],
                        1 if mine == "YES" else 0)
            st.success(f"Saved to {safe.md(label_file.name)}.")
            labels = read_labels(label_file, store_file)
        except Exception as e:  # noqa: BLE001 - a folder without write access, a locked file
            st.error(f"Could not save the label: {type(e).__name__}: {safe.md(e)}")

if len(labels):
    la = judge_audit.label_agreement(examples, labels)
    st.subheader(f"Your {la['n_labelled']} label(s) against the judge and the heuristic")
    k1, k2 = st.columns(2)
    for col, name, r in ((k1, "judge", la["vs_judge"]), (k2, "heuristic", la["vs_heuristic"])):
        with col:
            st.metric(f"κ (you vs {name})", "n/a" if r["kappa"] != r["kappa"] else f"{r['kappa']:.3f}")
            st.caption(f"{r['n']} items, agreement {r['agree']:.0%}" if r["n"] else "no items")
            if r["reason"]:
                st.caption(f"κ is not defined: {safe.md(r['reason'])}.")
            st.dataframe(r["confusion"], key=f"methods_label_conf_{name}")
data.provenance("methods")
