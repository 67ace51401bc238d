"""Plan → run per model in chunks → write → publish: the precompute pipeline behind ``python -m precompute``.

``run`` plans once (``precompute.plan``), then runs each model over the fixed chunks of the plan:
each chunk is measured by ``sago_engine.measure.step`` (the Live page's measurement step too) and
committed with its ``units`` rows in one transaction, so a killed run resumes where it stopped;
snapshots are published atomically (``precompute.publish``). Run ids and records:
``precompute.records``; reply health and the final status: ``precompute.summary``.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from precompute.config import RunConfig, check_run_keys, llm_backend_spec
from precompute.model_config import ModelConfig
from precompute.plan import Plan, make_plan, plan_chunks, shard_prompts, write_plan
from precompute.publish import open_work, publish, remove_work, work_path
from precompute.records import backend_spec, model_run_record, run_id_for
from precompute.summary import Health, final_status
from precompute.terminal import shown
from precompute.watch import ReplyBar
from sago_engine.axis_spec import OPTION_AXIS_SPECS
from sago_engine.backends import get_backend
from sago_engine.correctness.rescore import inspect_correctness
from sago_engine.measure.judge import Judge
from sago_engine.measure.pipeline import option_axes_for
from sago_engine.measure.step import Pending, Rows, Scoring, api_rows, force_base_replies, generate, prepare, score
from sago_engine.measure.storerows import unit_rows, utc_now
from sago_engine.runtime import progress as reply_progress
from sago_engine.runtime.threads import apply_threads
from sago_engine.store import Store, open_store
from sago_engine.variants.noop import count_by_cell
from sago_engine.variants.semantic_filter import bert_rescale_baseline

__all__ = ["run", "run_model", "Plan", "make_plan", "write_plan", "shard_prompts", "run_id_for", "backend_spec",
           "publish", "work_path"]

log = logging.getLogger("sago.precompute")


def _open_backends(cfg: RunConfig, m: ModelConfig, store: Store, backend_factory: Callable | None):
    """The model's backend and, with ``[judge]``, the judge; their templates go into ``templates``."""
    factory = backend_factory or get_backend
    backend = factory(backend_spec(cfg, m))
    try:
        judge = None if cfg.judge is None else Judge(factory(llm_backend_spec(cfg.judge)),
                                                     max_new_tokens=cfg.judge["max_new_tokens"])
    except BaseException:
        backend.close()
        raise
    rows = [] if judge is None else [{"template_id": judge.template_id, "kind": "judge", "text": judge.template}]
    chat_template = None if m.is_api else backend.template
    if isinstance(chat_template, str):  # the chat template text, keyed by the sha256 the run records
        rows.append({"template_id": hashlib.sha256(chat_template.encode("utf-8")).hexdigest(),
                     "kind": "chat_template", "text": chat_template})
    if rows:
        with store.transaction():
            store.insert_df("templates", pd.DataFrame(rows))
    return backend, judge


def _start_run(cfg: RunConfig, m: ModelConfig, plan: Plan, store: Store, run_id: str, backend, judge) -> Scoring:
    """Record the run as "running" and return how its replies become rows."""
    caps = frozenset(backend.capabilities)
    options = option_axes_for(cfg.axis_options, caps)
    needs_b = any("bert_baseline" in OPTION_AXIS_SPECS[o].needs for o in options)
    bert_b = bert_rescale_baseline(plan.filter_info) if needs_b else None
    store.upsert_run(model_run_record(cfg, m, plan, run_id, backend, judge, options, bert_b))
    return Scoring(run_id, cfg.normalizers, caps, options, bert_b, judge)


def _commit(store: Store, rows: Rows, run_id: str, m: ModelConfig, backend, health: Health) -> None:
    """Write one chunk's rows and its finished ``units`` in one transaction; count its replies.

    An API backend's per-reply ``api_responses`` and its usage (``take_usage``, priced) go in
    the same transaction.
    """
    if rows.retry:
        first = ", ".join(sorted(rows.retry)[:5]) + (" …" if len(rows.retry) > 5 else "")
        log.warning("%s: %d prompt unit(s) hit transient API failures; left pending, rerun to retry: %s",
                    m.name, len(rows.retry), first)
    bad_lp = health.add(r for _, r in rows.replies)
    usage = backend.take_usage()  # None: a backend that counts no usage (local models)
    frames = {"responses": rows.responses, "deltas": rows.deltas, "mirroring_verdicts": rows.verdicts,
              "base_repeats": rows.repeats, "noise_floor": rows.floor, "samples": rows.samples,
              "sample_deltas": rows.sample_deltas,
              "units": unit_rows(run_id, rows.measured, utc_now())}
    spent = None
    if usage is not None:
        frames["api_responses"] = api_rows(run_id, rows.replies)
        spent = {"run_id": run_id, "usage": {**usage, "invalid_logprobs": bad_lp},
                 "price_in_per_mtok": m.price_in_per_mtok, "price_out_per_mtok": m.price_out_per_mtok,
                 "price_cached_in_per_mtok": m.price_cached_in_per_mtok}
    store.write_chunk(frames, usage=spent)


def _noop_counts(plan: Plan, pending, items: dict[str, Pending]) -> dict:
    """The summary's no-op counts over the pending prompts: text no-ops and this model's model-input no-ops."""
    pending_v = [v for p in pending for v in plan.variants[p.prompt_id]]
    same = {k: w for p in pending for k, w in items[p.prompt_id].same_input.items()}
    return {"noop_text": count_by_cell(pending_v, plan.noops), "noop_model_input": count_by_cell(pending_v, same)}


def run_model(cfg: RunConfig, m: ModelConfig, plan: Plan, store: Store, progress: bool = True,
              backend_factory: Callable | None = None, shard: tuple[int, int] | None = None,
              on_chunk: Callable[[int, int], None] | None = None) -> dict:
    """Run one model over every pending prompt unit of the plan; commit per chunk of prompts.

    A variant whose model input equals its base prompt's (``noop.model_input_noops``: the
    backend's ``encode_prompt`` gives the same token ids; hf_local only) is not generated: its
    ``deltas`` rows are stored unavailable with ``noop.MODEL_INPUT_NOOP`` as the reason.

    Returns a summary dict (run_id, model, pending, generated, retry_pending, errors, no_output,
    replies, invalid_logprobs, over_context: replies refused because the prompt plus the reply cap
    exceeds the model's context (``backends.context``), status, seconds; noop_text /
    noop_model_input: the pending prompts' text no-ops and this model's model-input no-ops, each
    ``"family · subtype"`` → count; correctness: on a run of an Inspect task, the verdicts of the
    task's own scorers and those not run with the reason, ``CorrectnessResult.as_dict``). A
    finished unit is never redone.
    """
    run_id, cap = run_id_for(cfg, m, plan), cfg.max_new_tokens_for(m)
    done = store.done_units(run_id)
    # Chunks are fixed over the whole plan (not over what is pending), so a resumed or sharded
    # run feeds the model exactly the same batches as an uninterrupted one: identical numbers.
    chunks = [c for c in plan_chunks(plan.prompts, cfg.chunk_prompts, shard) if any(p.prompt_id not in done for p in c)]
    pending = [p for c in chunks for p in c if p.prompt_id not in done]
    summary = {"run_id": run_id, "model": m.name, "pending": len(pending), "generated": 0, "retry_pending": 0,
               "seconds": 0.0, "noop_text": {}, "noop_model_input": {}}
    if not pending:
        log.info("run %s (%s): all %d prompts done; nothing to run", run_id, m.name, len(plan.prompts))
        return summary
    t0 = time.perf_counter()
    backend, judge = _open_backends(cfg, m, store, backend_factory)
    try:
        scoring = _start_run(cfg, m, plan, store, run_id, backend, judge)
        items = {p.prompt_id: prepare(backend, p.prompt_id, p.dataset, p.text, plan.to_generate(p.prompt_id),
                                      check_input=not m.is_api) for c in chunks for p in c}
        summary.update(_noop_counts(plan, pending, items))
        health = Health()
        k = m.samples if m.sampling is not None else 1  # replies per base prompt and per variant
        total = sum(m.repeats - 1 + k * (1 + len(it.variants)) for it in items.values())
        with ReplyBar(total, shown(m.name, 40), enabled=progress) as bar:
            for chunk in chunks:
                work = [items[p.prompt_id] for p in chunk]
                n_work = sum(m.repeats - 1 + k * (1 + len(it.variants)) for it in work)
                # the bar moves as each reply finishes; its note follows the decoding steps in between
                with reply_progress.reporting(bar.within(n_work)), reply_progress.stepping(bar.step):
                    answered = generate(backend, work, cap, repeats=m.repeats, keyed_repeats=m.is_api, samples=k,
                                        seed=cfg.seed if m.sampling is not None else None)
                rows = score(force_base_replies(backend, answered) if scoring.forces_base else answered, scoring)
                _commit(store, rows, run_id, m, backend, health)
                summary["retry_pending"] += len(rows.retry)
                summary["generated"] += n_work
                bar.set_done(summary["generated"])
                if on_chunk:
                    on_chunk(summary["generated"], total)
        check = backend.logprob_check()  # hybrid: server vs local log-probs, warned per chunk
        if check is not None:
            summary["logprob_check"] = check
    finally:
        backend.close()
        if judge is not None:
            judge.close()
    summary.update(health.counts(), status=final_status(m.name, health, summary["retry_pending"], shard, cap))
    store.upsert_run({"run_id": run_id, "finished_at": utc_now(), "status": summary["status"]})
    verdicts = inspect_correctness(store, run_id)  # an Inspect task's own scorer, where it runs offline
    if verdicts is not None:
        summary["correctness"] = verdicts.as_dict()["correctness"]
    summary["seconds"] = time.perf_counter() - t0
    return summary


def run(cfg: RunConfig, progress: bool = True, only_models: list[str] | None = None,
        backend_factory: Callable | None = None, shard: tuple[int, int] | None = None,
        publish_every_s: float = 30.0, on_progress: Callable[[str, int, int], None] | None = None) -> list[dict]:
    """Plan, then run every model (or ``only_models``) into ``cfg.store``. Returns per-model summaries.

    The runner writes a private working copy (``work_path``) and publishes consistent snapshots
    to ``cfg.store`` every ``publish_every_s`` seconds and at the end. Killed at any moment, the
    same command resumes from the working copy (or from the published store when there is no
    working copy): committed prompt units are kept, none is duplicated.

    Args:
        shard: ``(K, N)`` with 1 ≤ K ≤ N — run only chunks whose index ≡ K−1 (mod N).
        on_progress: called after each committed (and, when due, published) chunk with the
            model's name, the texts generated so far and the texts this run has to generate.
    Raises:
        ConfigError: an API model's key variable is unset (all missing ones listed; nothing done).
        StoreError: ``cfg.store`` exists but is not a sago store of this schema (never overwritten).
        ApiFatalError: an API answered 401/403/404 (bad key, no access, unknown model); the
            units committed so far stay, a rerun resumes.
    """
    check_run_keys(cfg, only_models)  # before any work
    apply_threads()  # the semantic filter's encoder runs before any backend sets the count
    target = Path(cfg.store)
    work, resumed = open_work(target)
    out = []
    try:
        with open_store(work, read_only=False, create=True) as store:
            plan = make_plan(cfg, store, backend_factory=backend_factory)
            write_plan(store, plan)
            if plan.filter_info:  # recorded with each run: what the filter did to this plan's variants
                plan.filter_info.update(store.filter_counts([v.variant_id for vs in plan.variants.values() for v in vs]))
            last = [time.monotonic()]

            def on_chunk(name: str, done: int, total: int) -> None:
                if time.monotonic() - last[0] >= publish_every_s:
                    publish(store, target, progress=f"{done}/{total}", status="running")
                    last[0] = time.monotonic()
                if on_progress is not None:
                    on_progress(name, done, total)

            for m in cfg.models:
                if only_models and m.key not in only_models and m.name not in only_models:
                    continue
                out.append(run_model(cfg, m, plan, store, progress=progress, backend_factory=backend_factory,
                                     shard=shard, on_chunk=lambda d, t, name=m.name: on_chunk(name, d, t)))
            if resumed or not plan.variant_rows.empty or any(s["generated"] for s in out) or not target.exists():
                failed = sum(s.get("retry_pending", 0) for s in out)
                broken = [s["model"] for s in out if str(s.get("status", "")).startswith("failed")]
                publish(store, target, clustered=True,
                        progress="done" if not failed else f"{failed} prompt units to retry",
                        status="failed" if broken else "complete" if not failed else "incomplete")
            # else: nothing new — the published store stays byte-for-byte as it was
    except BaseException:
        if not resumed:  # a run that failed before committing any unit leaves nothing behind to "resume"
            remove_work(work, only_if_empty=True)
        raise
    remove_work(work)
    return out
