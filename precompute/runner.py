"""Plan → run → score → write: the precompute pipeline behind ``python -m precompute``."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd
from tqdm import tqdm

from precompute.config import ModelConfig, RunConfig, llm_backend_spec
from sago_engine.backends.context import OVER_CONTEXT_META
from sago_engine.datasets import Prompt, load_dataset
from sago_engine.noop import count_by_cell, model_input_noops, noop_delta_rows, text_noops
from sago_engine.pipeline import Unit, compute_rows, judge_rows, option_axes_for
from sago_engine.runrecord import VERSION_PACKAGES, fingerprint, library_versions, local_decoding_record  # noqa: F401 (re-exported)
from sago_engine.seeds import stable_hash
from sago_engine.store import Store, StoreError, open_store
from sago_engine.store.layout import set_aside_wal
from sago_engine.storerows import axis_options_record, prompt_rows, run_record, unit_rows, variant_rows
from sago_engine.types import AXES, Variant
from sago_engine.variants.semantic_filter import bert_rescale_baseline

log = logging.getLogger("sago.precompute")

@dataclass
class Plan:
    """The prompts and variants of a run, with the semantic filter's verdicts."""

    prompts: list[Prompt]
    variants: dict[str, list[Variant]]
    """prompt_id → its variants (stable order)."""
    variant_rows: pd.DataFrame
    filter_info: dict
    skip: frozenset[str] = frozenset()
    """Variants never generated: LLM rewrites the filter rejected, and text no-ops (``noops``)."""
    templates: list[dict] = field(default_factory=list)
    """``templates`` rows (template_id, kind, text) of the prompts the plan used (LLM rewriter)."""
    noops: dict[str, str] = field(default_factory=dict)
    """variant_id → why it is a no-op (its text equals the base prompt; ``noop.text_noop_reason``):
    stored with ``kept = false`` and that ``skip_reason``, never generated (part of ``skip``)."""

    def to_generate(self, prompt_id: str) -> list[Variant]:
        """The variants of ``prompt_id`` the models answer: all of them except ``skip``."""
        return [v for v in self.variants[prompt_id] if v.variant_id not in self.skip]

    @property
    def signature(self) -> str:
        """Hash of every prompt and variant id: part of each run id, so a changed grid is a new run."""
        return stable_hash(sorted((p.prompt_id, [v.variant_id for v in self.variants[p.prompt_id]]) for p in self.prompts))


def rewriter_settings(section: dict) -> dict:
    """What of a ``[rewriter]`` section can change a rewrite (hashed into its generator id):
    backend, max_new_tokens and the backend kwargs except ``device`` and ``batch_size``."""
    kw = {k: v for k, v in section["kwargs"].items() if k not in ("device", "batch_size")}
    return {"backend": section["backend"], "max_new_tokens": section["max_new_tokens"], **kw}


def _llm_structural(cfg: RunConfig, specs_by_prompt: dict, texts: dict[str, str], store: Store | None,
                    backend_factory: Callable | None, request: bool = True) -> tuple[dict[tuple, Variant], list[dict]]:
    """Structural variants from the LLM rewriter: (prompt_id, spec) -> Variant, plus template rows.

    Rewrites already in the store (same variant id = same prompt, spec, seed and generator)
    are reused as stored, so a resumed run never regenerates them; the rest are rewritten in
    one batched call. The backend is built only when something is left to rewrite. With
    ``request=False`` (``--plan``) nothing is requested: rewrites not yet stored are placeholders
    (empty text, ``meta["pending_rewrite"]``) with their final variant ids.
    """
    from sago_engine.variants import make_variant, variant_identity
    from sago_engine.variants.llm_rewriter import (REWRITER_TEMPLATE_ID, REWRITER_TEMPLATE_TEXT, LLMRewriter,
                                                   generator_id)
    from sago_engine.variants.structural import Structural
    from sago_engine.types import VariantSpec

    sec = cfg.rewriter
    settings = rewriter_settings(sec)
    gen = generator_id(sec["model"], settings)
    wanted = {(pid, s): variant_identity(pid, s, cfg.seed, gen)
              for pid, specs in specs_by_prompt.items() for s in specs if s.family == "structural"}
    known = store.variant_records([vid for _, vid in wanted.values()]) if store is not None else None
    stored = {} if known is None else {r.variant_id: r for r in known.itertuples(index=False)}
    out: dict[tuple, Variant] = {}
    todo = []
    for (pid, spec), (seed, vid) in wanted.items():
        r = stored.get(vid)
        if r is None:
            todo.append((pid, spec))
            continue
        out[(pid, spec)] = Variant(vid, pid, VariantSpec(r.family, r.subtype, float(r.strength), r.position), r.text,
                                int(r.seed), r.generator, json.loads(r.meta_json) if r.meta_json else {})
    if todo and not request:
        for pid, spec in todo:
            seed, vid = wanted[(pid, spec)]
            out[(pid, spec)] = Variant(vid, pid, spec, "", seed, gen, {"pending_rewrite": True})
    elif todo:
        backend = (backend_factory or _get_backend)(llm_backend_spec(sec))
        try:
            rw = LLMRewriter(backend, model=sec["model"], settings=settings, max_new_tokens=sec["max_new_tokens"])
            if rw.name != gen:  # the ids computed above must be the ids make_variant builds
                raise RuntimeError(f"rewriter generator {rw.name!r} != planned {gen!r}")
            rw.prefetch(LLMRewriter.request(spec.subtype, texts[pid], spec.strength) for pid, spec in todo)
            fam = {"structural": Structural(rw)}
            for pid, spec in todo:
                out[(pid, spec)] = make_variant(pid, texts[pid], spec, cfg.seed, families=fam)
        finally:
            backend.close()
    return out, [{"template_id": REWRITER_TEMPLATE_ID, "kind": "rewriter", "text": REWRITER_TEMPLATE_TEXT}]


def _get_backend(spec: dict):
    from sago_engine.backends import get_backend

    return get_backend(spec)


def make_plan(cfg: RunConfig, store: Store | None = None, backend_factory: Callable | None = None,
              request_rewrites: bool = True) -> Plan:
    """Load prompts, build variants, apply the semantic filter (only to variants new to the store).

    With ``[rewriter]`` the structural variants come from the LLM rewriter (``backend_factory``,
    default ``get_backend``, builds its backend); those the filter rejects go to ``Plan.skip``.
    A sampled grid (``per_family``) leaves out cells that cannot change the prompt
    (``variants.spec_applies``); a variant whose text still equals its base prompt is a no-op
    (``Plan.noops``: stored ``kept = false`` with its ``skip_reason``, in ``Plan.skip``).
    ``request_rewrites=False`` (``--plan``) sends no rewrite request: rewrites not in ``store``
    are placeholders (``meta["pending_rewrite"]``, not filtered, not in ``variant_rows``).
    """
    from sago_engine.variants import full_grid, make_variant, sample_grid
    from sago_engine.variants.semantic_filter import FilterConfig, apply_filter, effective_threshold

    prompts: list[Prompt] = []
    for d in cfg.datasets:
        prompts.extend(load_dataset(Path(cfg.data_dir) / f"{d}.jsonl", n=cfg.n_prompts, dataset=d))
    variants: dict[str, list[Variant]] = {}
    gf = cfg.grid_filter

    def keep(spec) -> bool:
        return (spec.subtype in gf.get("subtypes", (spec.subtype,)) and spec.strength in gf.get("strengths", (spec.strength,))
                and spec.position in gf.get("positions", (spec.position,)))

    specs_by_prompt = {}
    for p in prompts:
        if cfg.per_family:
            specs_by_prompt[p.prompt_id] = sample_grid(p.prompt_id, cfg.per_family, cfg.seed,
                                                       families=list(cfg.families), keep=keep if gf else None,
                                                       text=p.text)
        else:
            specs_by_prompt[p.prompt_id] = [s for s in full_grid(cfg.families) if keep(s)]
    llm: dict[tuple, Variant] = {}
    templates: list[dict] = []
    if cfg.rewriter is not None:
        llm, templates = _llm_structural(cfg, specs_by_prompt, {p.prompt_id: p.text for p in prompts}, store,
                                         backend_factory, request=request_rewrites)
    for p in prompts:
        variants[p.prompt_id] = [llm[(p.prompt_id, s)] if (p.prompt_id, s) in llm
                                 else make_variant(p.prompt_id, p.text, s, cfg.seed)
                                 for s in specs_by_prompt[p.prompt_id]]
    all_v = [v for vs in variants.values() for v in vs]
    base_texts = {p.prompt_id: p.text for p in prompts}
    noops = {vid: why for p in prompts for vid, why in text_noops(p.text, variants[p.prompt_id]).items()}
    fcfg = FilterConfig(**cfg.filter)
    known = store.existing_ids("variants", "variant_id", [v.variant_id for v in all_v]) if store else set()
    todo_prompts = {v.prompt_id for v in all_v if v.variant_id not in known}
    new_v = [v for v in all_v if v.prompt_id in todo_prompts and not v.meta.get("pending_rewrite")]
    verdicts = {}
    if new_v:
        for vd in apply_filter(new_v, base_texts, fcfg):
            verdicts[vd.variant_id] = vd
    rows = variant_rows(new_v, {i: vd.semantic_score for i, vd in verdicts.items()},
                        {i: vd.passes for i, vd in verdicts.items()}, {i: vd.kept for i, vd in verdicts.items()},
                        json_meta=False, skip_reason=noops)
    skip: frozenset[str] = frozenset()
    if cfg.rewriter is not None:
        llm_ids = [v.variant_id for v in all_v if v.generator.startswith("llm:")]
        old = [i for i in llm_ids if i not in verdicts]
        rec = store.variant_records(old) if store is not None and old else None
        stored_kept = {} if rec is None else dict(zip(rec["variant_id"], rec["kept"].astype(bool)))
        skip = frozenset(i for i in llm_ids if not (verdicts[i].kept if i in verdicts else stored_kept.get(i, True)))
    info = effective_threshold(fcfg)
    return Plan(prompts, variants, rows, info, skip | frozenset(noops), templates, noops)


def plan_chunks(prompts: list[Prompt], chunk_prompts: int, shard: tuple[int, int] | None = None) -> list[list[Prompt]]:
    """Fixed chunks of the whole prompt list (a shard K/N keeps chunks i ≡ K−1 mod N)."""
    chunks = [prompts[i : i + chunk_prompts] for i in range(0, len(prompts), chunk_prompts)]
    if shard is not None:
        k, n = shard
        chunks = [c for i, c in enumerate(chunks) if i % n == k - 1]
    return chunks


def shard_prompts(prompts: list[Prompt], chunk_prompts: int, shard: tuple[int, int] | None) -> list[Prompt]:
    """The prompts a shard runs (all of them without a shard)."""
    return [p for c in plan_chunks(prompts, chunk_prompts, shard) for p in c]


def judge_key(cfg: RunConfig) -> dict | None:
    """What of ``[judge]`` enters the run id: the section (backend, model, kwargs, max_new_tokens)
    without ``device``/``batch_size``, plus the template id. None without a judge."""
    if cfg.judge is None:
        return None
    from sago_engine.judge import JUDGE_TEMPLATE_ID

    kw = {k: v for k, v in cfg.judge["kwargs"].items() if k not in ("device", "batch_size")}
    return {"backend": cfg.judge["backend"], "model": cfg.judge["model"], "max_new_tokens": cfg.judge["max_new_tokens"],
            "kwargs": kw, "template_id": JUDGE_TEMPLATE_ID}


#: ModelConfig fields of API backends that can change an answer (so they are part of the run id);
#: concurrency, timeouts, retries and prices cannot, so changing them resumes the same run.
RUN_ID_API_FIELDS: tuple[str, ...] = ("base_url", "api_version", "top_logprobs", "omit_params", "thinking_budget",
                                       "reasoning_effort", "server_model", "server_extra_body")
#: A run whose replies are more than this share errors ends "failed", never "complete" (issue #13).
MAX_ERROR_SHARE = 0.5
#: Above this share of replies with no visible text (token budget spent), the run warns.
WARN_NO_OUTPUT_SHARE = 0.03


def run_id_for(cfg: RunConfig, m: ModelConfig, plan: Plan) -> str:
    """Deterministic run key: model, backend, dtype, decoding, seed, R_X and the plan signature.

    The decoding part holds the model's effective reply cap (``cfg.max_new_tokens_for(m)``); a
    ``label`` joins the hash when set (two labelled runs of one model never share an id). The
    answer-changing API settings (``RUN_ID_API_FIELDS``; for hybrid not ``base_url``: shards
    may use different servers of the same weights, checked by the log-prob check) and hf_local's
    ``chat_template_kwargs`` and ``template_date`` join the hash only when set, and
    ``judge_key`` only when a ``[judge]`` is set, so the run ids of plain hf_local runs (and of
    existing stores) are unchanged.
    """
    parts = [m.key, m.backend, m.dtype, {"greedy": True, "max_new_tokens": cfg.max_new_tokens_for(m)},
             cfg.seed, cfg.normalizers, cfg.filter, plan.signature]
    api = {k: getattr(m, k) for k in RUN_ID_API_FIELDS if getattr(m, k) is not None
           and not (k == "base_url" and m.backend == "hybrid")}  # hybrid: any server of the same weights
    if api:
        parts.append(api)
    if getattr(m, "chat_template_kwargs", None) is not None:  # explicit template variables change the prompt
        parts.append({"chat_template_kwargs": dict(sorted(m.chat_template_kwargs.items()))})
    if getattr(m, "template_date", None) is not None:  # the day a clock-reading template sees
        parts.append({"template_date": m.template_date})
    jk = judge_key(cfg)
    if jk is not None:
        parts.append({"judge": jk})
    if m.label is not None:
        parts.append({"label": m.label})
    return stable_hash(*parts, length=16)


def run_model_record(cfg: RunConfig, m: ModelConfig) -> dict | None:
    """The run record's ``config.run_model``: which ``[[models]]`` entry made the run, for a run
    with a ``label`` or its own ``max_new_tokens`` (None otherwise, so older records are unchanged).

    Returns:
        ``{"key": <zoo key / model name>, "label": <runs.model>, "max_new_tokens": <effective cap>}``.
        Two runs whose records are equal except ``label`` and the cap are a reply-cap ablation
        pair (``sago_engine.runpairs.cap_pairs``).
    """
    if m.label is None and m.max_new_tokens is None:
        return None
    return {"key": m.key, "label": m.name, "max_new_tokens": cfg.max_new_tokens_for(m)}


def _config_record(cfg: RunConfig, plan: Plan, judge, m: ModelConfig | None = None) -> dict:
    """The run record's ``config``: the TOML as read; with ``[judge]``/``[rewriter]`` also an
    ``llm`` entry (judge model, template id and backend info; rewriter generator and template);
    for a labelled run or one with its own cap also ``run_model`` (``run_model_record``)."""
    rm = run_model_record(cfg, m) if m is not None else None
    if cfg.judge is None and cfg.rewriter is None:
        return cfg.raw if rm is None else {**cfg.raw, "run_model": rm}
    llm: dict = {}
    if judge is not None:
        info = judge.backend.info()
        llm["judge"] = {"model": judge.model, "template_id": judge.template_id, "max_new_tokens": judge.max_new_tokens,
                        "label": judge.label,
                        "backend_info": {k: info.get(k) for k in ("backend", "model_id", "source", "weights_sha256",
                                                                  "dtype", "device", "decoding", "chat_template")
                                         if k in info}}
    if cfg.rewriter is not None:
        gens = sorted({v.generator for vs in plan.variants.values() for v in vs if v.generator.startswith("llm:")})
        llm["rewriter"] = {"generators": gens, "template_ids": [t["template_id"] for t in plan.templates],
                           "settings": rewriter_settings(cfg.rewriter), "model": cfg.rewriter["model"]}
    return {**cfg.raw, "llm": llm, **({"run_model": rm} if rm is not None else {})}


def backend_spec(cfg: RunConfig, m: ModelConfig) -> dict:
    """The ``get_backend`` spec of a model: local settings for hf_local; for API backends the
    model name, the settings given in the config (unset ones keep the backend's defaults) and
    the run seed. Never a key: API backends read theirs from the environment."""
    if m.backend == "hybrid":  # issue #17: the local copy's settings and its server's
        from precompute.config import HYBRID_FIELDS, HYBRID_SERVER_FIELDS, LOCAL_FIELDS

        return {"backend": m.backend, "model": m.key, "seed": cfg.seed,
                **{k: getattr(m, k) for k in (*LOCAL_FIELDS, *HYBRID_SERVER_FIELDS, *HYBRID_FIELDS)
                   if getattr(m, k) is not None}}
    if not m.is_api:
        spec = {"backend": m.backend, "model": m.key, "dtype": m.dtype, "device": m.device,
                "batch_size": m.batch_size}
        if m.chat_template_kwargs is not None:
            spec["chat_template_kwargs"] = dict(m.chat_template_kwargs)
        if m.template_date is not None:
            spec["template_date"] = m.template_date
        return spec
    from precompute.config import API_FIELDS

    spec = {"backend": m.backend, "model": m.key, "seed": cfg.seed,
            **{k: getattr(m, k) for k in API_FIELDS if getattr(m, k) is not None}}
    return spec


def _api_rows(run_id: str, keyed) -> pd.DataFrame:
    """``api_responses`` rows for one chunk: ``keyed`` is (response_id, GenerationResult) pairs
    (base, variants and base repeats)."""
    rows = []
    for rid, r in keyed:
        meta = r.meta or {}
        rows.append({"response_id": rid, "run_id": run_id,
                     "model_returned": meta.get("model"), "prompt_tokens": meta.get("prompt_tokens"),
                     "completion_tokens": meta.get("completion_tokens"), "cached": meta.get("cached"),
                     "attempts": meta.get("attempts"), "finish_raw": meta.get("finish_raw"),
                     "reasoning_tokens": meta.get("reasoning_tokens"), "cached_tokens": meta.get("cached_tokens")})
    return pd.DataFrame(rows)


def write_plan(store: Store, plan: Plan) -> None:
    """Insert prompts and new variants (idempotent)."""
    prompts = prompt_rows(plan.prompts)
    vr = plan.variant_rows.copy()
    if not vr.empty:
        vr["meta"] = vr["meta"].map(lambda m: json.dumps(m, sort_keys=True, ensure_ascii=False))
    with store.transaction():
        store.insert_df("prompts", prompts)
        store.insert_df("variants", vr)
        if plan.templates:
            store.insert_df("templates", pd.DataFrame(plan.templates))


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
    ``"family · subtype"`` → count). A finished unit is never redone.
    """
    run_id = run_id_for(cfg, m, plan)
    cap = cfg.max_new_tokens_for(m)
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
    from sago_engine.backends import get_backend

    backend = (backend_factory or get_backend)(backend_spec(cfg, m))
    info = backend.info()
    judge = None
    if cfg.judge is not None:
        from sago_engine.judge import Judge

        judge = Judge((backend_factory or get_backend)(llm_backend_spec(cfg.judge)),
                      max_new_tokens=cfg.judge["max_new_tokens"])
        with store.transaction():
            store.insert_df("templates", pd.DataFrame([{"template_id": judge.template_id, "kind": "judge",
                                                         "text": judge.template}]))
    chat_template = None if m.is_api else getattr(backend, "template", None)
    if isinstance(chat_template, str):  # the chat template text, keyed by the sha256 the run records
        with store.transaction():
            store.insert_df("templates", pd.DataFrame([{
                "template_id": hashlib.sha256(chat_template.encode("utf-8")).hexdigest(), "kind": "chat_template",
                "text": chat_template}]))
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    versions = library_versions()
    if m.is_api:
        decoding = {**info.get("decoding", {}), "max_new_tokens": cap,
                    "top_logprobs": info.get("top_logprobs"), "api": {k: v for k, v in info.items() if k not in (
                        "decoding", "capabilities", "backend", "model_id")}}
        if info.get("sdk"):
            versions[info["sdk"]] = info.get("sdk_version", "?")
    else:
        decoding = local_decoding_record(info, cap, m.batch_size)
    k_rep = m.repeats
    if k_rep > 1:  # noise floor: the base prompt is asked k times (recorded; old runs keep their record)
        decoding["base_repeats"] = k_rep
    opt_axes = option_axes_for(cfg.axis_options, frozenset(backend.capabilities))
    # model-input no-ops: not generated (API backends do not show their rendering: none there)
    in_chunks = [p for c in chunks for p in c]
    same_input = {p.prompt_id: {} if m.is_api else model_input_noops(backend, p.text, plan.to_generate(p.prompt_id))
                  for p in in_chunks}
    gen = {p.prompt_id: [v for v in plan.to_generate(p.prompt_id) if v.variant_id not in same_input[p.prompt_id]]
           for p in in_chunks}
    pending_v = [v for p in pending for v in plan.variants[p.prompt_id]]
    summary["noop_text"] = count_by_cell(pending_v, plan.noops)
    summary["noop_model_input"] = count_by_cell(pending_v, {k: w for p in pending for k, w in same_input[p.prompt_id].items()})
    bert_b = bert_rescale_baseline(plan.filter_info) if "bert@rescaled" in opt_axes else None
    record = run_record(run_id=run_id, model=m.name, backend=m.backend, info=info,
                        dtype=None if m.is_api else m.dtype, device=str(info.get("device", m.device)), decoding=decoding,
                        seed=cfg.seed, normalizers=cfg.normalizers, semantic_filter=plan.filter_info,
                        capabilities=backend.capabilities, versions=versions,
                        config=_config_record(cfg, plan, judge, m), started_at=now, status="running",
                        axis_options=axis_options_record(opt_axes, bert_b))
    store.upsert_run(record)
    total = sum(k_rep + len(gen[p.prompt_id]) for p in in_chunks)
    base_prompts = {p.prompt_id: p.text for p in plan.prompts}
    from sago_engine.noise import RepeatUnit, floor_rows, repeat_response_id
    from sago_engine.pipeline import budget_spent, response_id

    health = {"replies": 0, "errors": 0, "no_output": 0, "over_context": 0, "first_error": None,
              "invalid_logprobs": 0}
    bar = tqdm(total=total, desc=f"{m.name}", unit="gen", disable=not progress, dynamic_ncols=True)
    for chunk in chunks:
        texts, spans = [], []
        reps: list[int] = []
        for p in chunk:
            vs = gen[p.prompt_id]
            spans.append((len(texts), len(vs)))
            texts.append(p.text)
            texts.extend(v.text for v in vs)
            texts.extend([p.text] * (k_rep - 1))  # base repeats after the variants (noise floor)
            reps.extend([0] * (1 + len(vs)) + list(range(1, k_rep)))
        if k_rep > 1 and m.is_api:  # repeat r has its own cache key: asked afresh, not read back
            results = backend.generate(texts, cap, repeats=reps)
        else:
            results = backend.generate(texts, cap)
        units = [Unit(p.prompt_id, p.dataset, results[s], gen[p.prompt_id], results[s + 1 : s + 1 + n])
                 for p, (s, n) in zip(chunk, spans)]
        rep_units = {p.prompt_id: RepeatUnit(p.prompt_id, p.dataset, results[s], results[s + 1 + n: s + n + k_rep])
                     for p, (s, n) in zip(chunk, spans)}
        # a unit with a transient API failure (retries ran out) is not written: it stays pending
        # and the next run retries it (its successful replies come from the response cache)
        retry = {u.prompt_id for u in units if any((r.meta or {}).get("retryable")
                                                   for r in (u.base, *u.results, *rep_units[u.prompt_id].repeats))}
        if retry:
            log.warning("%s: %d prompt unit(s) hit transient API failures; left pending, rerun to retry: %s",
                        m.name, len(retry), ", ".join(sorted(retry)[:5]) + (" …" if len(retry) > 5 else ""))
            summary["retry_pending"] += len(retry)
            units = [u for u in units if u.prompt_id not in retry]
            chunk = [p for p in chunk if p.prompt_id not in retry]
        overrides, verdicts = judge_rows(run_id, units, base_prompts, judge) if judge is not None else ({}, None)
        responses, deltas = compute_rows(run_id, units, cfg.normalizers, frozenset(backend.capabilities),
                                         mr_overrides=overrides or None, options=opt_axes, bert_baseline=bert_b)
        skipped = [noop_delta_rows(run_id, p.dataset, p.prompt_id, same_input[p.prompt_id], (*AXES, *opt_axes))
                   for p in chunk if same_input[p.prompt_id]]
        if skipped:
            deltas = pd.concat([deltas, *skipped], ignore_index=True)
        repeats, floor = floor_rows(run_id, [rep_units[u.prompt_id] for u in units], cfg.normalizers,
                                    frozenset(backend.capabilities))
        keyed = [(response_id(run_id, u.prompt_id, vid), r) for u in units
                 for vid, r in zip([None, *(v.variant_id for v in u.variants)], (u.base, *u.results))]
        keyed += [(repeat_response_id(run_id, pid, j + 1), r) for pid in (u.prompt_id for u in units)
                  for j, r in enumerate(rep_units[pid].repeats)]
        bad_lp = sum(r.logprob_issue is not None for _, r in keyed)  # Δ-Prob/Δ-Ent unavailable there
        health["invalid_logprobs"] += bad_lp
        for _, r in keyed:
            health["replies"] += 1
            health["errors"] += bool(r.error)
            health["no_output"] += budget_spent(r) is not None
            health["over_context"] += bool((r.meta or {}).get(OVER_CONTEXT_META))
            if r.error and health["first_error"] is None:
                health["first_error"] = r.error[:200]
        finished = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        units_done = unit_rows(run_id, [(p.prompt_id, len(gen[p.prompt_id])) for p in chunk], finished)
        take_usage = getattr(backend, "take_usage", None)
        with store.transaction():
            store.insert_df("responses", responses)
            store.insert_df("deltas", deltas)
            if verdicts is not None:
                store.insert_df("mirroring_verdicts", verdicts)
            store.insert_df("base_repeats", repeats)
            store.insert_df("noise_floor", floor)
            store.insert_df("units", units_done)
            if callable(take_usage):
                store.insert_df("api_responses", _api_rows(run_id, keyed))
                store.add_run_usage(run_id, {**take_usage(), "invalid_logprobs": bad_lp}, m.price_in_per_mtok,
                                    m.price_out_per_mtok, m.price_cached_in_per_mtok)
        summary["generated"] += len(texts)
        bar.update(len(texts))
        if on_chunk:
            on_chunk(summary["generated"], total)
    bar.close()
    check = getattr(backend, "logprob_check", None)  # hybrid (issue #17): server vs local log-probs, warned per chunk
    if callable(check):
        summary["logprob_check"] = check()
    backend.close()
    if judge is not None:
        judge.close()
    status = "complete" if shard is None else f"shard {shard[0]}/{shard[1]} complete"
    n = max(1, health["replies"])
    summary.update(errors=health["errors"], no_output=health["no_output"], replies=health["replies"],
                   invalid_logprobs=health["invalid_logprobs"], over_context=health["over_context"])
    if health["invalid_logprobs"]:
        log.warning("%s: %d of %d replies came with invalid log-probs (placeholders, positive or non-finite "
                    "values): their Δ-Prob/Δ-Ent are stored as unavailable with the reason.", m.name,
                    health["invalid_logprobs"], health["replies"])
    if health["over_context"]:
        log.warning("%s: %d of %d prompts (base or variant) are longer than the model's context with the reply cap "
                    "of %d tokens: stored as error rows, unavailable on every axis (python -m precompute --plan "
                    "lists them)", m.name, health["over_context"], health["replies"], cap)
    if health["no_output"] / n > WARN_NO_OUTPUT_SHARE:
        log.warning("%s: %d of %d replies (%.1f%%) have no visible text: the token budget went to hidden reasoning. "
                    "Their text axes are stored as unavailable. Raise [run] max_new_tokens or set thinking_budget / "
                    "reasoning_effort for this model.", m.name, health["no_output"], health["replies"],
                    100.0 * health["no_output"] / n)
    if summary["retry_pending"]:
        status = f"incomplete: {summary['retry_pending']} prompt units failed transiently (rerun to retry)"
    elif health["errors"] / n > MAX_ERROR_SHARE:
        status = (f"failed: {health['errors']} of {health['replies']} replies are errors "
                  f"(first: {health['first_error']})")
        log.error("%s: %s", m.name, status)
    store.upsert_run({"run_id": run_id, "finished_at": dt.datetime.now(dt.timezone.utc).replace(tzinfo=None),
                      "status": status})
    summary["status"] = status
    summary["seconds"] = time.perf_counter() - t0
    return summary


def work_path(target: str | Path) -> Path:
    """The runner's private working copy next to the published store (``.<name>.work``)."""
    target = Path(target)
    return target.with_name(f".{target.name}.work")


def publish(store: Store, target: str | Path, *, clustered: bool = False, **meta) -> None:
    """Atomically publish a consistent snapshot of the working store at ``target``.

    CHECKPOINT folds the write-ahead log into the working file, which is then copied to a
    temporary file beside ``target``, fsynced and renamed over it (``os.replace`` is atomic):
    a dashboard reading ``target`` sees either the previous snapshot or this one, never a
    half-written file, and is never locked out by the writer. With ``clustered=True`` (the
    run's final publish) the snapshot is written with the per-prompt tables in prompt order
    (``Store.write_clustered_copy``; at the paper's scale about 20 s of CPU instead of a file
    copy), so the Prompts page's lookups skip all but one row group; the snapshots published
    while the run goes on are plain copies. A write-ahead log left beside ``target`` by a
    writable session that died is moved to ``<name>.wal.stale-<UTC time>`` first
    (``layout.set_aside_wal``, logged): it belongs to the file being replaced, and DuckDB would
    refuse to open the new file under it.
    """
    target = Path(target)
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")
    store.set_meta(published_at=now, **meta)
    store.checkpoint()
    tmp = target.with_name(f".{target.name}.publish-{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)
        if clustered:
            store.write_clustered_copy(tmp)
        else:
            shutil.copyfile(store.path, tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        set_aside_wal(target)  # a dead writable session's log would not match the new file
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
        tmp.with_name(tmp.name + ".wal").unlink(missing_ok=True)


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
    from precompute.config import check_run_keys

    check_run_keys(cfg, only_models)  # before any work
    target = Path(cfg.store)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        open_store(target, read_only=True).close()  # refuses a foreign file or another schema
    work = work_path(target)
    resumed = work.exists()  # a killed run's working copy may hold units not yet published
    if resumed:
        try:
            open_store(work, read_only=True).close()
        except StoreError:
            raise StoreError(f"the working copy {work} is not a readable sago store; move it away to restart "
                             f"from the published store {target}") from None
    elif target.exists():
        tmp = work.with_name(work.name + ".tmp")
        shutil.copyfile(target, tmp)
        os.replace(tmp, work)
    out = []
    try:
        with open_store(work, read_only=False, create=True) as store:
            plan = make_plan(cfg, store, backend_factory=backend_factory)
            write_plan(store, plan)
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
        # a run that failed before committing any unit leaves nothing behind to "resume"
        if not resumed and work.exists():
            try:
                with open_store(work, read_only=True) as st:
                    empty = st.counts()["units"] == 0
            except Exception:
                empty = False  # unreadable: leave it for the user to inspect
            if empty:
                work.unlink(missing_ok=True)
                work.with_name(work.name + ".wal").unlink(missing_ok=True)
        raise
    work.unlink(missing_ok=True)
    work.with_name(work.name + ".wal").unlink(missing_ok=True)
    return out
