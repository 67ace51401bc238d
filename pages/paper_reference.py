"""Paper reference: the numbers published in arXiv 2610.01428, labelled as reported (never local statistics)."""

from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

from dashboard import choices, controls, data, exports, frame, safe
from sago_engine.external import audit, paper
from sago_engine.filters import Filters
from sago_engine.types import AXES, AXIS_LABELS
from sago_engine.views import method_choices as mc

frame.require_frame()

st.title("Paper reference")
st.caption(f"Every number on this page (but the last section) is {paper.PAPER_SOURCE} (Omar et al., NeurIPS 2026 TAE workshop), "
           "transcribed as published. Nothing here is computed from a local store; Profiles and Pareto can "
           "overlay these as separate, dashed, labelled traces.")

fig2a = paper.figure_2a()
labels = [AXIS_LABELS[a] for a in AXES]
w = fig2a.pivot_table(index="model", columns="axis", values="sgs", aggfunc="first", sort=False).reindex(columns=list(AXES))
fig = go.Figure(go.Heatmap(z=w.to_numpy(), x=labels, y=list(w.index), colorscale="Blues", zmin=0, zmax=1,
                           text=[[f"{v:.2f}" for v in row] for row in w.to_numpy()], texttemplate="%{text}",
                           colorbar={"title": {"text": "SGS"}}, name=paper.PAPER_SOURCE,
                           hovertemplate="%{y}<br>%{x}: %{z:.2f}<extra>reported</extra>"))
fig.update_layout(title={"text": f"Figure 2a — total SGS, eight open models ({paper.PAPER_SOURCE})"},
                  height=controls.chart_height(460), yaxis={"autorange": "reversed"}, margin={"t": 60})
exports.chart(fig, "paper_fig2a",
             "Published total SGS per open model and axis; darker = less stable. Each column is one axis: "
             "rows are never summed.", data=paper.wide(fig2a))

st.subheader("Figure 2a — total SGS over six datasets, open models")
exports.table(paper.wide(fig2a), "paper_fig2a_table", "paper_figure_2a.csv")
st.subheader("Table 1 — closed models, ε = 0.05, Total (mean ± std, marker)")
exports.table(paper.wide(paper.table_1()), "paper_table1", "paper_table_1.csv")
st.caption("n/a: the API does not expose the quantity (no activations, no sequence log-prob; entropy only for GPT).")
st.subheader("Appendix B — models rejecting H0 at p<0.05 / 0.01 / 0.001 (example row)")
exports.table(paper.threshold_example(), "paper_threshold", "paper_threshold_example.csv")
st.markdown("**Claims reported in the paper** (for reading alongside local results):")
st.markdown(
    "- every open model exceeds ε = 0.05 on at least one axis;\n"
    "- Δ-BLEU and Δ-MR are significant at p < 0.001 for all models;\n"
    "- bigger models are not more stable; axes dissociate;\n"
    "- Llama-3.1-8B's Δ-Cos varies 3.7× across datasets (max/min), Δ-MR more than 2× — enough to reverse rankings."
)

st.subheader("Audit: the published numbers, the authors' released rows and sago, side by side")
_audit = data.with_store(audit.audit_view)
if _audit.empty:
    st.info("This store holds neither the authors' released rows nor a sago run of one of the paper's models. "
            "Import their rows with `python -m precompute import-authors <clone> --store OUT.duckdb` (docs/STORES.md, "
            "\"The SAGO authors' released rows\") and run `precompute/configs/paper_code.toml` into the same store.")
else:
    st.caption(
        "Computed from this store, except *published*. Per model and axis, each column changes one thing: "
        "*published* (Figure 2a / Table 1) → *authors_way* (their released rows, their aggregation: every variant "
        "of a prompt pooled, Δ/R_X not clipped, TruthfulQA cut to 16 common prompts; *gap* = authors_way − "
        "published, the reproduction gap) → *sago_released* (sago's Δ-BLEU / Δ-BERT / Δ-MR of the same replies, "
        "same aggregation; *definition_step* = the change) → *sago_cleaned* (the leaked prompt tails cut; "
        "*leak_effect*) → *sago_run* / *sago_code* (a sago run of the model, under sago's definitions / under "
        "the authors' definitions as option axes, unclipped; *sago_gap* = sago_code − published).")
    exports.table(_audit, "paper_audit", "paper_audit.csv", missing=audit.AUDIT_MISSING)

st.subheader("This store against the paper's scale")
st.caption(f"Computed from the store picked in the sidebar ({safe.md(Path(data.store_path()).name)}, all models and "
           "datasets), "
           "not reported: for each open method choice, the option whose SGS lies closest to the range of the paper's "
           "open models (Figure 2a), in orders of magnitude.")
# The statement reads point SGS only (the median over models per option), which the bootstrap's
# resample count does not change: a small count keeps this page fast; Method choices shows the CIs.
_lines = [mc.closest_statement(ch.title, s["closest"], s["scale"])
          for ch, s in choices.summaries(Filters(), n_resamples=choices.POINT_ONLY_RESAMPLES) if s is not None]
st.markdown("\n".join(f"- {safe.md(ln)}" for ln in _lines) if _lines else "This store has no choice with two options.")
st.page_link("pages/method_choices.py", label="Method choices: SGS, rankings and claims under each option",
             icon=":material/alt_route:")
