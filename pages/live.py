"""Live: perturb one typed prompt and watch each variant's deltas arrive, then its s_X radar beside the model's profile."""

import time
from pathlib import Path

import streamlit as st

from dashboard import charts, controls, data, diffview, exports, frame, safe
from sago_engine.datasets import DATASETS
from sago_engine.filters import Filters
from sago_engine.live import correctness as live_correct
from sago_engine.live import job as live_job
from sago_engine.live import probe as live
from sago_engine.live import save as live_save
from sago_engine.store import Store
from sago_engine.types import AXES, AXIS_LABELS, DEFAULT_MAX_NEW_TOKENS, POSITIONS

frame.require_frame()

ss = st.session_state


def _warm_note(slot) -> None:
    """Where the dashboard's background loading of the default model and encoder stands, drawn in ``slot``
    (an ``st.empty``: redrawn while a probe runs, so its seconds move and it turns to "loaded")."""
    w = live.warmup_status()
    slot = slot.container()
    if w["state"] == "loading":
        slot.info(f"Preparing {safe.md(w['model'])} in the background: {safe.md(w['step'])} "
                f"({w['elapsed_s']:.0f} s so far). "
                "A probe started now waits for it.", icon=":material/hourglass_top:")
    elif w["state"] == "ready":
        slot.caption(f"{safe.md(w['model'])} and the BERTScore encoder are loaded (took {w['ready_s']:.1f} s at start).")
    elif w["state"] == "failed":
        slot.warning(f"Background loading of {safe.md(w['model'])} failed: {safe.md(w['error'])}")


@st.cache_data(show_spinner=False)
def _dataset_prompts(name: str) -> list[str]:
    from sago_engine.datasets import bundled_dir, load_dataset

    return [p.text for p in load_dataset(bundled_dir() / f"{name}.jsonl", n=50, dataset=name)]


@st.cache_data(show_spinner=False)
def _grid_options(families: tuple[str, ...]) -> dict[str, list]:
    from sago_engine.variants import full_grid

    g = full_grid(list(families)) if families else []
    return {"subtypes": list(dict.fromkeys(s.subtype for s in g)), "strengths": sorted({s.strength for s in g})}


def _fill_from_dataset() -> None:
    if ss.get("live_pick"):
        ss["live_prompt"] = ss["live_pick"]


st.title("Live: probe one prompt")
st.caption("Type a prompt, choose a model and variant families: each variant v = (F, u, s, p) rewrites the prompt, "
           "the model answers base and variants (greedily, or k seeded samples each under Samples), and each "
           "row shows how far every axis moved "
           "(Δ̃, SAGO arXiv 2610.01428). Text is shown exactly as typed and generated.")
controls.no_chart_note("the probe's radar is drawn below its table of variants once a probe has run.")

warm_slot = st.empty()
_warm_note(warm_slot)
# the probe's controls and progress open the page (the first screen shows them from the click on); the
# form follows
bar = st.container()
status_slot = st.empty()  # work visible from the click: what runs, and the seconds since the click
base_slot = st.empty()
table_slot = st.empty()

# ---------------------------------------------------------------- inputs
with st.expander("Pick a prompt from a dataset"):
    c1, c2 = st.columns([1, 3])
    with c1:
        ds = st.selectbox("Dataset", DATASETS, key="live_dataset")
    with c2:
        try:
            texts = _dataset_prompts(ds)
        except Exception as e:  # a missing sample file: say so, keep the page usable
            texts = []
            st.warning(f"Cannot read the {safe.md(ds)} sample: {safe.md(e)}")
        st.selectbox("Prompt", [""] + texts, key="live_pick", on_change=_fill_from_dataset,
                     format_func=lambda t: t[:120] or "(choose)")
text = st.text_area("Prompt", key="live_prompt", placeholder="Type a prompt, e.g. What is the capital of Australia?",
                    height=90)
reference = live_correct.typed_reference(st.text_input(
    "Reference answer (optional)", key="live_reference", placeholder="e.g. Canberra",
    help=f"Accepted answers separated by {live_correct.ANSWER_SEP}: each reply is then marked right or wrong "
         "(the reply contains an accepted answer, after lower-casing and removing punctuation and articles). "
         "Correctness is shown beside the Δ columns, never folded into them."))

c1, c2, c3 = st.columns([5, 8, 3])  # the families box holds all three chips at 1280 px
with c1:
    from sago_engine.models import valid_keys

    keys = valid_keys()
    model = st.selectbox("Model", keys, index=keys.index(live.DEFAULT_MODEL) if live.DEFAULT_MODEL in keys else 0,
                         key="live_model", help="Local zoo models (tiny-random is a random test model).")
    if frame.access().free_paths:  # local mode only: a shared server loads zoo models only
        custom = st.text_input("…or a local model folder", key="live_model_path", placeholder="/path/to/hf-model")
        model = custom.strip() or model
with c2:
    fams = st.multiselect("Families", ["social_register", "surface_noise", "structural"],
                          default=["social_register", "surface_noise", "structural"], key="live_families")
    opts = _grid_options(tuple(fams))
    subtypes = st.multiselect("Subtypes", opts["subtypes"], key="live_subtypes", placeholder="all")
with c3:
    max_v = st.number_input("Max variants", 1, 200, 24, key="live_max_variants",
                            help="A stratified sample over the families when more cells match.")
    max_new = st.number_input("New tokens", 1, 256, DEFAULT_MAX_NEW_TOKENS, key="live_max_new")
c1, c2, c3, c4 = st.columns([4, 4, 2, 2])
with c1:
    strengths = st.multiselect("Strengths", opts["strengths"], key="live_strengths", placeholder="all",
                               format_func=lambda v: f"{v:g}")
with c2:
    positions = st.multiselect("Positions", list(POSITIONS), key="live_positions", placeholder="all")
with c3:
    temperature = st.number_input("Temperature", 0.0, 2.0, 0.0, 0.1, key="live_temperature", format="%.2f",
                                  help="0 = greedy decoding (the default). Above 0 each reply is sampled, seeded as a "
                                       "run with the same seed would be (same prompt and variant: same reply).")
with c4:
    n_samples = st.number_input("Samples (k)", 1, 16, 1, key="live_samples",
                                help="Replies per prompt and per variant (k > 1 needs temperature > 0): the base "
                                     "prompt's k samples show how far the dice alone move a reply.")

# ---------------------------------------------------------------- variants, at once
probe, problem = None, None
try:
    sampling = live.Sampling(float(temperature), int(n_samples))
    probe = live.plan_probe(text, live.Selection(tuple(fams), tuple(subtypes), tuple(strengths), tuple(positions),
                                                 int(max_v)))
except live.LiveError as e:
    problem = str(e)

job_entry = ss.get("live_job")  # (key, ProbeJob) of this session's latest probe
b1, b2, _ = bar.columns([1, 1, 4])
# clicks set a session flag in a callback (not the button's return value), so a click survives the
# frame's reroute of a page run outside app.py (dashboard.frame.require_frame)
b1.button("Run probe", key="live_run", type="primary", icon=":material/play_arrow:",
          on_click=lambda: ss.__setitem__("live_run_requested", True))
run = bool(ss.pop("live_run_requested", False))


def _cancel() -> None:
    if ss.get("live_job"):
        ss["live_job"][1].cancel()  # the probe stops within one forward pass of the model


b2.button("Cancel", key="live_cancel", on_click=_cancel, icon=":material/stop:",
          disabled=not (run or (job_entry is not None and job_entry[1].running)))

if problem:
    (st.error if run or text.strip() else st.info)(safe.md(problem))
    st.stop()

assert probe is not None
if "live_cache" not in ss:
    ss["live_cache"] = {}  # per browser session: results of this session only
key = (model, int(max_new), probe.prompt_id, tuple(v.variant_id for v in probe.variants), sampling)
if run:
    if job_entry is not None:
        job_entry[1].cancel()  # a probe still running gives way to this one at once
    job_entry = ss["live_job"] = (key, live_job.ProbeJob(model, probe, int(max_new), cache=ss["live_cache"],
                                                         sampling=sampling).start())
    ss.pop("live_result", None)

st.subheader(f"Variants ({len(probe.variants)})")
with st.expander("The edit of each variant (red struck = removed, green = added)", expanded=False):
    for v, row in zip(probe.variants, live.variant_table(probe).itertuples()):
        st.caption(safe.md(row.label))
        diffview.show_edit(probe.text, v.text)
plan_slot = st.empty()  # before a probe: the planned variants


def _status_line(stt: dict) -> None:
    res, n = stt["result"], len(probe.variants)
    scored = f"{res.done}/{len(res.probe.variants) - len(res.skipped)} variants scored" if res is not None else ""
    t = f"{stt['elapsed_s']:.1f} s"
    text = {"starting": f":material/hourglass_top: **Running** · starting · {t}",
            "loading": f":material/hourglass_top: **Running** · {safe.md(stt['step'])} (once per server process) · {t}",
            "running": f":material/hourglass_top: **Running** · {safe.md(stt['step'])} · {t}",
            "done": f":material/check_circle: **Done** · {scored} in {t}",
            "cancelled": f":material/stop_circle: **Cancelled** after {t} · {scored or f'0/{n} variants scored'}",
            "failed": f":material/error: **Failed** after {t}"}[stt["state"]]
    status_slot.markdown(text)


def _base(res: "live.ProbeResult") -> None:
    if res.base is None:
        return
    with base_slot.container():
        verdict = live_correct.probe_correctness(res.rows.responses, reference)[0] if reference else None
        st.caption(f"Base response ({safe.md(res.model)})" + (f" — {verdict.verdict}" if verdict else "") + ":")
        st.code(safe.visible(res.base.text), language=None, wrap_lines=True)


def _show(res: "live.ProbeResult") -> None:
    _base(res)
    ss["live_draws"] = ss.get("live_draws", 0) + 1  # a fresh key per redraw of the slot
    table = live.result_table(res)
    if reference:  # the reply's verdict beside its Δ columns (pending variants: "…")
        verdicts = live_correct.probe_correctness(res.rows.responses, reference)[1].set_index("variant_id")["verdict"]
        table.insert(1, "correct", [verdicts.get(v.variant_id) for v in res.probe.variants])  # the table's order
    deltas = [AXIS_LABELS[a] for a in AXES]
    # a variant still running has no values yet: its cells read "…", never "None"
    shown = safe.visible_frame(table).style.format(na_rep="…").format({c: "{:+.3f}" for c in deltas}, na_rep="…")
    table_slot.dataframe(shown, key=f"live_results_{ss['live_draws']}", hide_index=True, width="stretch")


res = None
if job_entry is not None and (job_entry[0] == key or job_entry[1].running):
    job = job_entry[1]
    drawn = None
    while True:  # redraw until the job ends; a click (Cancel, Run) reruns the page at once
        stt = job.status()
        _status_line(stt)
        _warm_note(warm_slot)
        if stt["result"] is not None and stt["result"] is not drawn:
            drawn = stt["result"]
            _show(drawn)
        if not job.running:
            break
        time.sleep(0.25)
    stt = job.status()  # the final state: drawn once more (it may have ended after the last redraw)
    _status_line(stt)
    _warm_note(warm_slot)
    if stt["result"] is not None and stt["result"] is not drawn:
        _show(stt["result"])
    if stt["error"]:
        kind, msg = stt["error"]
        st.error(f"Cannot load the model {safe.md(repr(job.model))}: {safe.md(msg)}" if kind == "load" else msg)
        st.stop()
    res = stt["result"]
    if res is not None and job_entry[0] == key:
        ss["live_result"] = (key, res, job.info)
elif ss.get("live_result") and ss["live_result"][0] == key:
    res = ss["live_result"][1]
    _show(res)
if res is None:
    with plan_slot.container():
        st.dataframe(safe.visible_frame(live.variant_table(probe)), key="live_variants", hide_index=True, width="stretch")
        st.caption("Press Run probe (above the prompt) to answer the base prompt and these variants.")
    st.stop()

st.caption("Δ̃ ∈ [−1, 1] per axis: 0 = same as the base response; n/a = the backend cannot measure the axis. "
           "Mirroring: whether the reply starts/stops reflecting the variant's surface attribute. "
           "kept: the semantic filter's verdict, decided before the model runs (a variant it rejects is answered "
           "all the same, as in a stored run, but counts in no s_X).")
tm = res.timings
first_s = f"{tm['first_result_s']:.2f} s" if "first_result_s" in tm else "none"
total_s = f"total {tm['total_s']:.2f} s" if "total_s" in tm else "stopped before the end"  # a cancel mid-batch
st.caption(f"Timing: first result {first_s}, {total_s} "
           f"(semantic filter {tm['filter']:.2f} s, generate {tm['generate']:.2f} s, scoring {tm['score']:.2f} s).")
prof = live.prompt_profile(res)
rests_on = int(prof["n_variants"].max()) if len(prof) else 0
planned = len(res.probe.variants) - len(res.skipped)
if not res.complete:
    st.warning(f"{'Cancelled' if res.cancelled else 'Partial'}: {res.done} of {planned} variants were scored, so "
               f"this prompt's radar rests on {rests_on} of {planned} variants. Saving stores it as a partial run; "
               "Run probe again to finish it (the variants scored so far are reused).")
if not res.done:
    if res.skipped and res.complete:
        st.info("No variant changes what the model reads (see skip_reason), so this prompt has no s_X: "
                "a variant that does not vary is skipped, never scored as Δ = 0.")
    st.stop()

# ---------------------------------------------------------------- radar: this prompt vs the model's profile
store_prof, store_note = None, "The current store has no run of this model."
try:
    if res.model in data.query(Store.filter_options).get("models", []):
        store_prof = live.store_profile(data.query(Store.prompt_scores, Filters(models=(res.model,))))
        store_note = (f"Dashed: {safe.md(res.model)}'s SGS_X over all prompts of the store "
                      f"{safe.md(Path(data.store_path()).name)}.")
except Exception:  # noqa: BLE001 - the radar of the probe stands on its own
    pass
fig = charts.live_radar(prof, store_prof, res.model, height=controls.chart_height(460))
exports.chart(fig, key="live_radar", caption="This prompt's per-axis instability s_X = RMS of Δ̃ over its kept "
             f"variants (lower = more stable; axes are never added), resting on {rests_on} of {planned} variants"
             + ("" if res.complete else " (partial probe)") + ". " + store_note, data=prof)

# ---------------------------------------------------------------- sampled: the dice beside the rephrasing
if not res.sampling.greedy:
    smp = res.sampling
    st.subheader("The dice and the rephrasing")
    move = live.probe_movement(res)
    if move.empty:
        st.info(f"Sampled at temperature {smp.temperature:g} with k = {smp.samples}: "
                + ("the dice need k ≥ 2 samples per input." if smp.samples < 2 else
                   "no variant's samples are scored yet."))
    else:
        shown = move[["axis_label", "floor", "move", "share", "p", "exceeds", "n_floor", "n_move"]].rename(columns={
            "axis_label": "axis", "floor": "dice (base samples)", "move": "rephrasing + dice",
            "share": "share due to rephrasing", "exceeds": "rephrasing > dice"})
        st.dataframe(shown.style.format({"dice (base samples)": "{:.3f}", "rephrasing + dice": "{:.3f}",
                                         "share due to rephrasing": "{:+.2f}", "p": "{:.3g}"}, na_rep="n/a"),
                     key="live_movement", hide_index=True, width="stretch")
        st.caption(f"Temperature {smp.temperature:g}, k = {smp.samples} samples per input, seed {res.probe.seed}. "
                   "Dice: RMS Δ̃ of the base prompt's samples 1..k−1 against its sample 0 (resampling alone); "
                   "rephrasing + dice: RMS Δ̃ of every sample of every kept variant against the same base sample 0; "
                   "share: the part of the squared movement rephrasing adds; p: exact one-sided permutation test of "
                   "\"rephrasing moves it more than resampling\" (as the Significance page computes for a stored "
                   "sampled run). The Δ columns above are each variant's sample 0.")

# ---------------------------------------------------------------- save
target = frame.access().probe_store(live_save.default_user_store())
if not frame.access().writes:
    st.stop()
st.button("Save to store" if res.complete else "Save as partial run", key="live_save", icon=":material/save:",
          help=f"Adds this probe as a run (dataset 'live') to {safe.md(target)}; never to the shipped demo store.",
          on_click=lambda: ss.__setitem__("live_save_requested", True))
if ss.pop("live_save_requested", False):
    try:
        path, run_id = live_save.save_probe(res, target, ss["live_result"][2])
        st.success(f"Saved as run {safe.md(run_id)}"
                   + ("" if res.complete else f" (status partial: {res.done} of {planned} variants)")
                   + f" in {safe.md(path)}. Open that file in the sidebar's store picker "
                   "(…or a path to another store) to see it on the other pages.")
    except Exception as e:  # noqa: BLE001
        st.error(f"Could not save: {type(e).__name__}: {safe.md(e)}")
