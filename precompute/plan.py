"""The plan of a run: prompts, their variants, what the semantic filter decided, the fixed chunks."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from precompute.config import RunConfig, llm_backend_spec
from sago_engine.backends import get_backend
from sago_engine.datasets import Prompt, load_dataset
from sago_engine.measure.step import screen
from sago_engine.measure.storerows import prompt_rows, variant_from_record
from sago_engine.seeds import stable_hash
from sago_engine.store import Store
from sago_engine.types import Variant, VariantSpec
from sago_engine.variants import full_grid, make_variant, sample_grid, variant_identity
from sago_engine.variants.rewriting.llm_rewriter import (
    REWRITER_TEMPLATE_ID,
    REWRITER_TEMPLATE_TEXT,
    LLMRewriter,
    generator_id,
)
from sago_engine.variants.semantic_filter import FilterConfig
from sago_engine.variants.structural import Structural


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
    sources: list[dict] = field(default_factory=list)
    """What each ``[[data.sources]]`` entry read (``sago_engine.sources.load_source``'s record):
    stored in the run record's ``config["data_sources"]``."""

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


def _stored_rewrites(store: Store | None, wanted: dict) -> dict[tuple, Variant]:
    """The rewrites of ``wanted`` ((prompt_id, spec) → (seed, variant id)) already in ``store``, as stored."""
    known = store.variant_records([vid for _, vid in wanted.values()]) if store is not None else None
    stored = {} if known is None else {r.variant_id: r for r in known.itertuples(index=False)}
    out = {}
    for key, (_, vid) in wanted.items():
        r = stored.get(vid)
        if r is not None:
            out[key] = variant_from_record(r)
    return out


def _llm_structural(cfg: RunConfig, specs_by_prompt: dict, texts: dict[str, str], store: Store | None,
                    backend_factory: Callable | None, request: bool = True) -> tuple[dict[tuple, Variant], list[dict]]:
    """Structural variants from the LLM rewriter: (prompt_id, spec) -> Variant, plus template rows.

    Rewrites already in the store (same variant id = same prompt, spec, seed and generator)
    are reused as stored, so a resumed run never regenerates them; the rest are rewritten in
    one batched call. The backend is built only when something is left to rewrite. With
    ``request=False`` (``--plan``) nothing is requested: rewrites not yet stored are placeholders
    (empty text, ``meta["pending_rewrite"]``) with their final variant ids.
    """
    sec = cfg.rewriter
    settings = rewriter_settings(sec)
    gen = generator_id(sec["model"], settings)
    wanted = {(pid, s): variant_identity(pid, s, cfg.seed, gen)
              for pid, specs in specs_by_prompt.items() for s in specs if s.family == "structural"}
    out = _stored_rewrites(store, wanted)
    todo = [key for key in wanted if key not in out]
    if todo and not request:
        for pid, spec in todo:
            seed, vid = wanted[(pid, spec)]
            out[(pid, spec)] = Variant(vid, pid, spec, "", seed, gen, {"pending_rewrite": True})
    elif todo:
        backend = (backend_factory or get_backend)(llm_backend_spec(sec))
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


def _grid(cfg: RunConfig, prompts: list[Prompt]) -> dict[str, list[VariantSpec]]:
    """prompt_id → its (F, u, s, p) cells: a seeded sample (``per_family``) or the full grid, within ``grid_filter``."""
    gf = cfg.grid_filter

    def keep(spec) -> bool:
        return (spec.subtype in gf.get("subtypes", (spec.subtype,)) and spec.strength in gf.get("strengths", (spec.strength,))
                and spec.position in gf.get("positions", (spec.position,)))

    if cfg.per_family:
        return {p.prompt_id: sample_grid(p.prompt_id, cfg.per_family, cfg.seed, families=list(cfg.families),
                                         keep=keep if gf else None, text=p.text) for p in prompts}
    grid = [s for s in full_grid(cfg.families) if keep(s)]
    return {p.prompt_id: list(grid) for p in prompts}


def make_plan(cfg: RunConfig, store: Store | None = None, backend_factory: Callable | None = None,
              request_rewrites: bool = True, run_filter: bool = True) -> Plan:
    """Load prompts, build variants, screen them (``measure.screen``: text no-ops, the semantic
    filter on the prompts with a variant new to the store).

    With ``[rewriter]`` the structural variants come from the LLM rewriter (``backend_factory``,
    default ``get_backend``, builds its backend); those the filter rejects go to ``Plan.skip``.
    A sampled grid (``per_family``) leaves out cells that cannot change the prompt
    (``variants.spec_applies``); a variant whose text still equals its base prompt is a no-op
    (``Plan.noops``: stored ``kept = false`` with its ``skip_reason``, in ``Plan.skip``).
    ``request_rewrites=False`` (``--plan``) sends no rewrite request: rewrites not in ``store``
    are placeholders (``meta["pending_rewrite"]``, not filtered, not in ``variant_rows``).
    ``run_filter=False`` (``--plan``) skips the semantic filter's scoring (its encoder over every
    variant; minutes at the paper's scale): ``filter_info`` is empty and ``variant_rows`` holds no
    verdicts. The counts of a run do not depend on it — a rules variant the filter rejects is still
    answered — except for LLM rewrites it would reject, which are then counted as answered.
    """
    prompts, sources = load_prompts(cfg)
    specs_by_prompt = _grid(cfg, prompts)
    base_texts = {p.prompt_id: p.text for p in prompts}
    llm: dict[tuple, Variant] = {}
    templates: list[dict] = []
    if cfg.rewriter is not None:
        llm, templates = _llm_structural(cfg, specs_by_prompt, base_texts, store, backend_factory,
                                         request=request_rewrites)
    variants = {p.prompt_id: [llm[(p.prompt_id, s)] if (p.prompt_id, s) in llm
                              else make_variant(p.prompt_id, p.text, s, cfg.seed)
                              for s in specs_by_prompt[p.prompt_id]] for p in prompts}
    all_v = [v for vs in variants.values() for v in vs]
    stored = store.existing_ids("variants", "variant_id", [v.variant_id for v in all_v]) if store else set()

    def stored_kept(ids: list[str]) -> dict[str, bool]:
        rec = store.variant_records(ids) if store is not None else None
        return {} if rec is None else dict(zip(rec["variant_id"], rec["kept"].astype(bool)))

    fcfg = None if cfg.filter is None or not run_filter else FilterConfig(**cfg.filter)
    sc = screen(all_v, base_texts, fcfg, stored=stored, stored_kept=stored_kept)
    return Plan(prompts, variants, sc.variant_rows(json_meta=False), sc.info, sc.skip, templates, dict(sc.noops),
                sources)


def load_prompts(cfg: RunConfig) -> tuple[list[Prompt], list[dict]]:
    """The first ``n_prompts`` prompts of each bundled dataset (``data.datasets``) and of each
    ``[[data.sources]]`` entry, in config order, and the sources' records of what was read.

    Raises:
        DatasetError: every problem of the first source that has one (file and line or row each).
    """
    from sago_engine.sources import load_source

    prompts: list[Prompt] = []
    for d in cfg.datasets:
        prompts.extend(load_dataset(Path(cfg.data_dir) / f"{d}.jsonl", n=cfg.n_prompts, dataset=d, root=cfg.data_dir))
    records = []
    for spec in cfg.sources:
        got, rec = load_source(spec, Path(spec.get("base", ".")), n=cfg.n_prompts)
        prompts.extend(got)
        records.append(rec)
    return prompts, records


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
