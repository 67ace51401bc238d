"""Worst cases: prompts ranked by s_X(i) and variants by Δ̃, with both replies, their word diff, the request, tokens."""

import streamlit as st

from dashboard import choices, controls, data, exports, frame, links, prose, urlstate
from dashboard.safe import md, visible, visible_frame
from sago_engine.store import Store
from sago_engine.store.reads.worst import MAX_SEARCH, ORDERS
from sago_engine.types import AXES, AXIS_LABELS
from sago_engine.views import assumptions, worst

frame.require_frame()

ALL = "all models"
RANK_LABELS = {"prompt": "prompts by s_X(i)", "variant": "variants by Δ̃"}
ORDER_LABELS = {"abs": "|Δ̃|, largest first", "neg": "Δ̃, most negative first", "pos": "Δ̃, most positive first"}
CHANGE_CELL = {worst.BREAK: "break", worst.REPAIR: "repair", "": "—"}
REPLY_LABELS = {"all": "all", "different": "different", "unchanged": "unchanged", "right_to_wrong": "right → wrong"}
ROWS = (10, 25, 50, 100)
CHANGE_NOTE = {"breaks": "breaks only (repairs of a broken base reply left out)", "repairs": "repairs only",
               "all": "breaks, repairs and rows that are neither"}

f = controls.current_filters()
st.title("Worst cases: which prompts and variants move a model most?")
st.caption("Per axis and model: prompts ranked by s_X(i) = sqrt(mean over variants of Δ̃²) (each shown with its "
           "worst variant, the largest |Δ̃|), or single variants ranked by Δ̃ (SAGO, arXiv 2610.01428). "
           "\"Different\": the variant's reply is not identical to the base reply; \"unchanged\": it is. "
           "Pick a row to read its replies below; \"open ↗\" opens that prompt on the Prompts page. "
           "By default only **breaks** (the variant changed an answer or made it no answer): a **repair** of a base "
           "reply that is no answer (a loop, an echo, token salad) moves the reply as far, but is no worst case — "
           "pick \"repairs\" or \"all\" under Show to see them.")
controls.no_chart_note("this page ranks prompts and variants in a table; a row's replies and their diff follow it.")

models = [m for m in data.query(Store.filter_options)["models"] if f.models is None or m in f.models]
if not models:
    st.warning("No models for the current store and filters.")
    st.stop()
urlstate.restore("rank", "worst_by", choices=worst.BY, default="prompt")
urlstate.restore("axis", "worst_axis", choices=AXES, default="bleu")
urlstate.restore("model", "worst_model", choices=[ALL, *models], default=ALL)
urlstate.restore("order", "worst_order", choices=ORDERS, default="abs")
urlstate.restore("change", "worst_change", choices=worst.CHANGES, default="breaks")
urlstate.restore("replies", "worst_replies", choices=worst.REPLIES, default="all")
urlstate.restore("rows", "worst_rows", "int", choices=ROWS, default=25)
urlstate.restore("q", "worst_search", "str", default="")
st.session_state["worst_search"] = str(st.session_state.get("worst_search") or "")[:MAX_SEARCH]

with controls.page_controls():
    c1, c2, c3, c0 = st.columns([1.4, 1, 1.6, 1.4])
    with c1:
        by = st.segmented_control("Rank", worst.BY, key="worst_by", format_func=RANK_LABELS.get) or "prompt"
    with c2:
        axis = st.selectbox("Axis", AXES, key="worst_axis", format_func=AXIS_LABELS.get)
    with c3:
        model = st.selectbox("Model", [ALL, *models], key="worst_model")
    with c0:
        change = st.segmented_control("Show", worst.CHANGES, key="worst_change",
                                      help="Breaks: the base reply is an answer and the variant's reply differs from "
                                           "it or is no answer. Repairs: the base reply is no answer (loop, echo, "
                                           "token salad) and the variant's reply is one. A prompt is a break when "
                                           "any of its variants breaks it.") or "breaks"
    c4, c5, c6, c7 = st.columns([1.5, 2.5, 1.3, 0.6])
    with c4:
        search = st.text_input("Search prompts, variants and replies", key="worst_search", max_chars=MAX_SEARCH,
                               placeholder="words from a prompt or a reply (case-insensitive)")
    with c5:
        replies = st.segmented_control("Replies", worst.REPLIES, key="worst_replies", format_func=REPLY_LABELS.get,
                                       help="Different: the variant's reply text is not identical to the base reply "
                                            "(for a prompt: at least one of its variants' replies). Unchanged: identical. "
                                            "Right → wrong: the base reply is correct and the variant's is wrong "
                                            "(the store's correctness verdicts; Right or wrong page).")
    with c6:
        order = st.selectbox("Order of variants", ORDERS, key="worst_order", format_func=ORDER_LABELS.get,
                             disabled=by != "variant")
    with c7:
        n_rows = st.selectbox("Rows", ROWS, key="worst_rows")
urlstate.publish()

rows = data.with_store(worst.worst_cases, f, axis=axis, by=by, model=None if model == ALL else model,
                       order=order, replies=replies or "all", search=search or None, limit=int(n_rows), change=change)
label = AXIS_LABELS[axis]
if rows.empty:
    st.info("No prompts match" + (f" the search “{md(search.strip()[:MAX_SEARCH])}”" if search else "")
            + " with the current filters"
            + (". Show is on breaks: breaks and repairs are told apart by the reply texts, so a store that keeps no "
               "replies has none — pick \"all\" under Show." if change == "breaks" else ".")
            + (" Show is on repairs: no base reply here is a loop, an echo or token salad that a variant repaired."
               if change == "repairs" else ""))
    st.stop()

rows = rows.assign(open=[links.href(links.PROMPTS, worst.prompts_link(r)) for _, r in rows.iterrows()],
                   tied=[f"{int(n)} tied" if n > 1 else "" for n in rows["n_tied"]],
                   reference=[f"no answer: {k}" if k else "" for k in rows["base_kind"]],
                   change_cell=[CHANGE_CELL.get(c, "—") for c in rows["change"]],
                   cut=[worst.cut_cell(r) or "—" for _, r in rows.iterrows()])
if by == "prompt":
    shown = rows.assign(different=[f"{int(d)} of {int(n)}" for d, n in zip(rows["n_different"], rows["n_variants"])])
    shown = shown[["rank", "change_cell", "prompt_text", "open", "model", "dataset", "score", "different", "label",
                   "delta_norm", "cut", "reference", "tied"]]
    names = {"prompt_text": "prompt", "change_cell": "change", "score": f"s_X(i) on {label}", "different": "different replies",
             "label": "worst variant", "delta_norm": "its Δ̃"}
else:
    shown = rows[["rank", "change_cell", "prompt_text", "open", "model", "dataset", "score", "differs", "label",
                  "variant_text", "base_reply", "variant_reply", "cut", "reference", "tied"]]
    names = {"prompt_text": "prompt", "change_cell": "change", "label": "variant", "variant_text": "variant text", "score": f"Δ̃ on {label}",
             "differs": "reply differs", "base_reply": "base reply", "variant_reply": "variant's reply"}
config = {"open": st.column_config.LinkColumn("Prompts", display_text="open ↗", width="small",
                                              help="Opens this prompt and variant on the Prompts page"),
          "rank": st.column_config.NumberColumn("rank", format="%d", width="small"),
          "change": st.column_config.TextColumn("change", width="small",
                                                help="break: the variant changed an answer or made it no answer; "
                                                     "repair: the base reply is no answer and the variant's is one"),
          "prompt": st.column_config.TextColumn("prompt", width="medium"),
          "cut": st.column_config.TextColumn("cut", width="small",
                                             help="Which reply stopped at the reply cap (its text is cut): both, base, "
                                                  "variant or — (neither)"),
          names["score"]: st.column_config.NumberColumn(format="%.3f"),
          "its Δ̃": st.column_config.NumberColumn(format="%+.3f")}
csv = rows.drop(columns=["open", "tied", "reference", "change_cell", "cut"]).assign(axis=axis, axis_label=label)
event = exports.table(csv, "worst_table", f"sago_worst_{by}s_{axis}.csv", show=shown.rename(columns=names),
                      on_select="rerun", selection_mode="single-row", column_config=config)
st.caption(f"{len(rows)} row(s), worst first, {CHANGE_NOTE[change]}" + (f", matching “{md(search.strip()[:MAX_SEARCH])}”" if search else "")
           + ("." if controls.presentation_on() else
              ". The CSV holds every column of these rows (texts, tokens, latency, requests).")
           + " reference: the base reply is no answer (a repetition loop, an echo of the prompt or token salad), so "
             "Δ̃ measures distance from a broken reference.")
ties = worst.tie_note(rows)
if ties:
    st.caption(md(ties))

prose.assumptions_note(choices.assumption_statements(f, (assumptions.RANKING, assumptions.VERDICT), axes=(axis,)),
                       "worst_assumptions")

picked = list(getattr(getattr(event, "selection", None), "rows", []) or [])
r = rows.iloc[picked[0] if picked and picked[0] < len(rows) else 0]

# ---------------------------------------------------------------- the chosen row, in full
st.subheader(f"#{int(r['rank'])}: {md(r['model'])} on {md(r['prompt_id'])}")
facts = [f"dataset {r['dataset']}", f"variant {r['label']}", f"Δ̃ on {label} = {r['delta_norm']:+.4f}"]
if by == "prompt":
    facts.append(f"s_X(i) = {r['s']:.4f} over {int(r['n_variants'])} variants, "
                 f"{int(r['n_different'])} with a different reply")
st.caption(md(" · ".join(facts)))
links.page_link(links.PROMPTS, worst.prompts_link(r), "Open this prompt and variant on the Prompts page",
                icon=":material/open_in_new:")
cb, cv = st.columns(2)
with cb:
    st.caption("Base prompt")
    st.code(visible(r["prompt_text"]), language=None, wrap_lines=True)
    st.caption("Reply to the base prompt" + (f" — no answer: {r['base_kind']}" if r["base_kind"] else ""))
    st.code(visible(worst.reply_text(r["base_reply"])), language=None, wrap_lines=True)
with cv:
    st.caption("Variant")
    st.code(visible(r["variant_text"]), language=None, wrap_lines=True)
    st.caption("Reply to the variant" + (" (identical to the base reply)" if not r["differs"] else "")
               + (f" — no answer: {r['variant_kind']}" if r["variant_kind"] else ""))
    st.code(visible(worst.reply_text(r["variant_reply"])), language=None, wrap_lines=True)
if cut := worst.cut_note(r):
    st.warning(md(cut))
st.caption("Word diff of the replies: struck-through red words are only in the base reply, green ones only in the "
           "variant's reply.")
st.html(worst.reply_diff_html(r["base_reply"], r["variant_reply"]))
st.caption("Tokens, finish reason and latency of the two replies (hf_local: a batch's wall time divided by its size).")
st.dataframe(visible_frame(worst.token_table(r)), key="worst_tokens", hide_index=True)
with st.expander("Rendered requests (the chat template applied)",
                 expanded=isinstance(r["base_request"], str) or isinstance(r["variant_request"], str)):
    for name, req in (("base prompt", r["base_request"]), ("variant", r["variant_request"])):
        st.caption(f"Request for the {name}")
        st.code(visible(worst.request_text(req)), language=None, wrap_lines=True)
    if not (isinstance(r["base_request"], str) and isinstance(r["variant_request"], str)):
        st.caption("Not recorded: this store keeps no rendered request for these replies (responses.request is "
                   "empty). The run record names the chat template and its settings (Provenance).")
data.provenance("worst")
