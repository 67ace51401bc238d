"""One measurement step: the variants of a chunk of prompts → the model's replies → Δ per axis → store rows.

The offline runner (``precompute.runner``) and the Live page (``sago_engine.live.probe``) measure
through these functions, in this order, so a stored run and a saved probe are the same record
for the same replies (SAGO, arXiv 2610.01428 §Variants, §Axes):

1. ``screen`` — before any model runs: text no-ops (``noop.text_noops``) and the semantic
   filter's verdicts. Text no-ops and rejected LLM rewrites are never generated; rejected rules
   variants are generated all the same (``kept = false`` leaves them out of every score).
2. ``prepare`` — per model, before generation: the variants the model answers; those whose
   model input equals the base prompt's (``noop.model_input_noops``) are set aside.
3. ``generate`` — one ``backend.generate`` call for the chunk: per prompt the base prompt
   (unless already answered), its variants, then the base repeats of the noise floor; a sampled
   run asks each of them k times in a row (``samples``), each with its own seed.
4. ``score`` — every row of the replies: ``responses`` and ``deltas`` (``pipeline.compute_rows``),
   the judge's ``mirroring_verdicts`` (``pipeline.judge_rows``), unavailable ``deltas`` of the
   set-aside variants, ``base_repeats`` and ``noise_floor`` (``noise.floor_rows``), and the
   ``samples`` rows of a sampled run's samples 1..k−1 (sample 0 is the ``responses`` row) and
   their ``sample_deltas`` against base sample 0 (``sample_deltas.sample_delta_rows``).

Pure functions over a backend and results: nothing here touches the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from sago_engine.axis_spec import OPTION_AXIS_SPECS
from sago_engine.measure.noise_floor import FLOOR_COLUMNS, REPEAT_COLUMNS, RepeatUnit, floor_rows, repeat_response_id
from sago_engine.measure.pipeline import VERDICT_COLUMNS, Unit, compute_rows, judge_rows, option_axes_for, response_id
from sago_engine.measure.sample_deltas import SAMPLE_DELTA_COLUMNS, SampledUnit, sample_delta_rows
from sago_engine.measure.samples import SAMPLE_COLUMNS, Sample, sample_response_id, sample_rows
from sago_engine.measure.storerows import variant_rows
from sago_engine.seeds import repeat_seed, sample_seed
from sago_engine.types import AXES, GenerationResult, Variant
from sago_engine.variants.noop import DELTA_COLUMNS, model_input_noops, noop_delta_rows, text_noops
from sago_engine.variants.semantic_filter import FilterConfig, FilterVerdict, apply_filter, effective_threshold

__all__ = ["Screening", "screen", "Pending", "prepare", "Answered", "generate", "force_base_replies", "Scoring",
           "Rows", "score", "set_aside_rows", "api_rows"]


# ---------------------------------------------------------------- 1. before any model runs
@dataclass(frozen=True)
class Screening:
    """What is decided about a set of variants before any model answers them."""

    screened: tuple[Variant, ...]
    """The variants the filter judged now (their ``variants`` rows carry these verdicts)."""
    verdicts: Mapping[str, FilterVerdict]
    """variant_id → the semantic filter's verdict, for ``screened`` (empty without a filter)."""
    noops: Mapping[str, str]
    """variant_id → why it is a text no-op (its text equals the base prompt): never generated."""
    skip: frozenset[str]
    """Variants never generated: text no-ops and LLM rewrites the filter rejects."""
    info: dict = field(default_factory=dict)
    """The filter's effective threshold (``semantic_filter.effective_threshold``; {} without a filter)."""

    def kept(self, variant_id: str) -> bool:
        """The filter's ``kept`` verdict (True for a variant it did not judge, False for a text no-op)."""
        vd = self.verdicts.get(variant_id)
        return variant_id not in self.noops and (vd is None or vd.kept)

    def variant_rows(self, json_meta: bool = True) -> pd.DataFrame:
        """``variants`` rows of ``screened`` with the verdicts and no-op reasons (``storerows.variant_rows``)."""
        v = self.verdicts
        return variant_rows(self.screened, {i: d.semantic_score for i, d in v.items()},
                            {i: d.passes for i, d in v.items()}, {i: d.kept for i, d in v.items()},
                            json_meta=json_meta, skip_reason=self.noops)


def screen(variants: Sequence[Variant], base_texts: Mapping[str, str], cfg: FilterConfig | None = None,
           stored: Iterable[str] = (), stored_kept: Callable[[list[str]], Mapping[str, bool]] | None = None
           ) -> Screening:
    """Text no-ops and semantic filter verdicts of ``variants`` (SAGO §Variants), before generation.

    The filter judges every variant of each prompt that has a variant not in ``stored`` (the
    prompt-level rule needs the whole (prompt, family) group), except LLM rewrites not yet
    requested (``meta["pending_rewrite"]``). An LLM rewrite (generator ``llm:…``) the filter
    rejects is never generated; a rules variant it rejects is (``kept = false``).

    Args:
        variants: every variant of the plan or probe.
        base_texts: prompt_id → base prompt text, for every prompt of ``variants``.
        cfg: the filter's settings; None = no filter (every variant kept, ``info`` empty).
        stored: variant ids already in the store (judged by an earlier run): their prompts are
            not judged again.
        stored_kept: variant ids → their stored ``kept`` (asked for the LLM rewrites of prompts
            not judged now); None = kept.
    Returns:
        A ``Screening``. Raises KeyError (``apply_filter``) when a prompt lacks its base text.
    """
    by_prompt: dict[str, list[Variant]] = {}
    for v in variants:
        by_prompt.setdefault(v.prompt_id, []).append(v)
    noops = {vid: why for pid, vs in by_prompt.items() for vid, why in text_noops(base_texts[pid], vs).items()}
    known = set(stored)
    todo = {v.prompt_id for v in variants if v.variant_id not in known}
    judged = tuple(v for v in variants if v.prompt_id in todo and not v.meta.get("pending_rewrite"))
    verdicts = {vd.variant_id: vd for vd in apply_filter(judged, dict(base_texts), cfg)} if judged and cfg else {}
    llm = [v.variant_id for v in variants if v.generator.startswith("llm:")]
    old = [i for i in llm if i not in verdicts]
    was_kept = dict(stored_kept(old)) if old and stored_kept is not None else {}
    rejected = {i for i in llm if not (verdicts[i].kept if i in verdicts else was_kept.get(i, True))}
    return Screening(judged, verdicts, noops, frozenset(rejected) | frozenset(noops),
                     effective_threshold(cfg) if cfg else {})


# ---------------------------------------------------------------- 2. per model, before generation
@dataclass(frozen=True)
class Pending:
    """One prompt of a chunk as a model will be asked it."""

    prompt_id: str
    dataset: str
    text: str
    """The base prompt x."""
    variants: tuple[Variant, ...]
    """The variants the model answers, in order."""
    same_input: Mapping[str, str] = field(default_factory=dict)
    """variant_id → ``noop.MODEL_INPUT_NOOP``: the model reads the base prompt's token ids; never
    generated, stored as unavailable ``deltas`` rows (``set_aside_rows``)."""
    base: GenerationResult | None = None
    """The base reply when it is already known (a later batch of the same prompt): not asked
    again, and its ``responses`` row is not built again."""


def prepare(backend: Any, prompt_id: str, dataset: str, text: str, variants: Sequence[Variant],
            check_input: bool = True) -> Pending:
    """The prompt as ``backend`` will be asked it: ``variants`` without the model-input no-ops.

    Args:
        variants: the variants to answer (already without ``Screening.skip``).
        check_input: compare the backend's model inputs (``backend.encode_prompt``); False for an
            API backend, whose rendering is not visible.
    """
    same = model_input_noops(backend, text, variants) if check_input else {}
    return Pending(prompt_id, dataset, text, tuple(v for v in variants if v.variant_id not in same), same)


# ---------------------------------------------------------------- 3. generation
@dataclass(frozen=True)
class Answered:
    """One prompt with the model's replies: base, one per variant (same order), base repeats."""

    item: Pending
    base: GenerationResult
    results: Sequence[GenerationResult]
    repeats: Sequence[GenerationResult] = ()
    """Replies to the base prompt asked again (repeat r = index + 1; the noise floor)."""
    forced: Sequence[tuple | None] | None = None
    """Per variant: (log-probs, entropies) of the base reply's token ids teacher-forced after the
    variant prompt (``force_base_replies``); None = not forced."""
    forced_base: tuple | None = None
    """The same after the base prompt."""
    samples: Sequence[Sample] = ()
    """A sampled run's replies beyond sample 0 (base and variants; ``samples.Sample``)."""


def generate(backend: Any, items: Sequence[Pending], max_new_tokens: int, repeats: int = 1,
             keyed_repeats: bool = False, samples: int = 1, seed: int | None = None) -> list[Answered]:
    """One ``backend.generate`` call for ``items``: per prompt its base (unless ``item.base`` is
    set), its variants, then ``repeats − 1`` more asks of the base prompt.

    Args:
        max_new_tokens: the reply cap (tokens).
        repeats: how often the base prompt is asked (≥ 1; only for items without ``base``).
        keyed_repeats: pass ``repeats=`` (0 for base and variants, r for repeat r) to the
            backend, so each repeat has its own reply-cache key (API backends: asked afresh).
        samples, seed: a sampled run (``seed`` not None: the run seed): the base and every variant
            are asked ``samples`` (k ≥ 1) times in a row (so the k rows of a prompt share a
            decoding batch), each with its seed ``seeds.sample_seed(seed, prompt, variant, s)``,
            base repeats with ``seeds.repeat_seed``; the backend gets ``seeds=``. None: greedy, one
            ask each, no seeds passed.
    Returns:
        One ``Answered`` per item, in order (sample 0 as ``base`` / ``results``, the others in
        ``samples``).
    """
    if seed is not None:
        return _generate_sampled(backend, items, max_new_tokens, repeats, samples, seed)
    texts: list[str] = []
    keys: list[int] = []
    spans = []
    for it in items:
        k = 0 if it.base is not None else repeats - 1
        spans.append((len(texts), it.base is None, len(it.variants), k))
        texts.extend(([it.text] if it.base is None else []) + [v.text for v in it.variants] + [it.text] * k)
        keys.extend([0] * ((it.base is None) + len(it.variants)) + list(range(1, k + 1)))
    out = backend.generate(texts, max_new_tokens, repeats=keys) if keyed_repeats and repeats > 1 else (
        backend.generate(texts, max_new_tokens))
    answered = []
    for it, (s, own_base, n, k) in zip(items, spans):
        base = out[s] if own_base else it.base
        s += own_base
        answered.append(Answered(it, base, out[s: s + n], out[s + n: s + n + k]))
    return answered


def _generate_sampled(backend: Any, items: Sequence[Pending], max_new_tokens: int, repeats: int, k: int,
                      seed: int) -> list[Answered]:
    """``generate`` of a sampled run: k adjacent asks of every text, one seed per ask."""
    if k < 1:
        raise ValueError(f"samples must be >= 1, got {k}")
    texts: list[str] = []
    seeds: list[int] = []
    slots: list[tuple[int, list[tuple[str | None, int]], int]] = []  # (start, (variant id, sample) per row, repeats)
    for it in items:
        asks = ([None] if it.base is None else []) + [v.variant_id for v in it.variants]
        keys = [(vid, s) for vid in asks for s in range(k)]
        n_rep = 0 if it.base is not None else repeats - 1
        slots.append((len(texts), keys, n_rep))
        by_id = {v.variant_id: v.text for v in it.variants}
        texts += [it.text if vid is None else by_id[vid] for vid, _ in keys] + [it.text] * n_rep
        seeds += [sample_seed(seed, it.prompt_id, vid, s) for vid, s in keys]
        seeds += [repeat_seed(seed, it.prompt_id, r) for r in range(1, n_rep + 1)]
    out = backend.generate(texts, max_new_tokens, seeds=seeds)
    answered = []
    for it, (start, keys, n_rep) in zip(items, slots):
        got = dict(zip(keys, out[start: start + len(keys)]))
        base = got[(None, 0)] if it.base is None else it.base
        extra = [Sample(vid, s, seeds[start + j], got[(vid, s)]) for j, (vid, s) in enumerate(keys) if s > 0]
        end = start + len(keys)
        answered.append(Answered(it, base, [got[(v.variant_id, 0)] for v in it.variants], out[end: end + n_rep],
                                 samples=extra))
    return answered


def force_base_replies(backend: Any, answered: Sequence[Answered]) -> list[Answered]:
    """``answered`` with each base reply's token ids teacher-forced after its base prompt and after
    every variant prompt (``prob@base_reply`` / ``ent@base_reply``; the SAGO authors' code scores
    how a rephrasing moves the probability of one fixed reply).

    One ``backend.teacher_force`` call for all: per prompt 1 + (variants) rows of prompt + the base
    reply's stored token ids (EOS included when the model emitted it; never a re-tokenisation of
    the text). A backend whose ``teacher_force`` gives None (API backends), a base reply that errored or
    has no token ids leave ``forced`` None (the rows say why).
    """
    todo = [k for k, a in enumerate(answered) if not a.base.error and a.base.token_ids]
    if not todo:
        return list(answered)
    prompts, replies = [], []
    for k in todo:
        a = answered[k]
        prompts += [a.item.text] + [v.text for v in a.item.variants]
        replies += [list(a.base.token_ids)] * (1 + len(a.item.variants))
    stats = backend.teacher_force(prompts, replies)
    if stats is None:  # a backend that cannot teacher-force
        return list(answered)
    out, s = list(answered), 0
    for k in todo:
        n = len(answered[k].item.variants)
        out[k] = replace(answered[k], forced_base=stats[s], forced=list(stats[s + 1: s + 1 + n]))
        s += 1 + n
    return out


# ---------------------------------------------------------------- 4. rows
@dataclass(frozen=True)
class Scoring:
    """How replies become rows."""

    run_id: str
    normalizers: Mapping[str, float]
    """R_X per axis (``scoring.resolve_normalizers``)."""
    capabilities: frozenset[str]
    """The backend's white-box axes (subset of {"cos", "prob", "ent"})."""
    options: tuple[str, ...] = ()
    """Option axes to store besides the six (``pipeline.option_axes_for``)."""
    bert_baseline: float | None = None
    """b of ``bert@rescaled`` (required with an option that needs ``"bert_baseline"``)."""
    judge: Any = None
    """A ``sago_engine.measure.judge.Judge`` for social-register Δ-MR, or None (offline detectors)."""

    @property
    def axes(self) -> tuple[str, ...]:
        """The axes of each variant's ``deltas`` rows: the six, then the stored option axes."""
        return (*AXES, *option_axes_for(self.options, self.capabilities))

    @property
    def forces_base(self) -> bool:
        """Whether the base replies are teacher-forced after every variant prompt
        (``force_base_replies``): an option axis that needs ``"forced_base_reply"`` is stored."""
        return any("forced_base_reply" in OPTION_AXIS_SPECS[a].needs for a in self.axes if a in OPTION_AXIS_SPECS)


@dataclass
class Rows:
    """The store rows of measured prompts (the columns of the store's tables)."""

    responses: pd.DataFrame
    deltas: pd.DataFrame
    verdicts: pd.DataFrame
    """``mirroring_verdicts`` (empty without a judge)."""
    repeats: pd.DataFrame
    """``base_repeats``."""
    floor: pd.DataFrame
    """``noise_floor``."""
    samples: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SAMPLE_COLUMNS))
    """``samples``: a sampled run's replies beyond sample 0 (empty for a greedy run)."""
    sample_deltas: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SAMPLE_DELTA_COLUMNS))
    """``sample_deltas``: each sample's Δ against base sample 0 (empty for a greedy run)."""
    replies: list[tuple[str, GenerationResult]] = field(default_factory=list)
    """(response_id, reply) of every reply these rows hold (base, variants, repeats)."""
    measured: list[tuple[str, int]] = field(default_factory=list)
    """(prompt_id, variants answered) per prompt measured."""
    retry: list[str] = field(default_factory=list)
    """Prompts left out: a reply failed transiently (API retries ran out); a rerun retries them."""

    @classmethod
    def empty(cls) -> Rows:
        """No rows (the tables' columns)."""
        return cls(pd.DataFrame(columns=list(_RESPONSE_COLUMNS)), pd.DataFrame(columns=DELTA_COLUMNS),
                   pd.DataFrame(columns=VERDICT_COLUMNS), pd.DataFrame(columns=REPEAT_COLUMNS),
                   pd.DataFrame(columns=FLOOR_COLUMNS))

    def __add__(self, other: Rows) -> Rows:
        """Both sets of rows (``self``'s first)."""
        def cat(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
            return b if a.empty else a if b.empty else pd.concat([a, b], ignore_index=True)

        return Rows(cat(self.responses, other.responses), cat(self.deltas, other.deltas),
                    cat(self.verdicts, other.verdicts), cat(self.repeats, other.repeats), cat(self.floor, other.floor),
                    cat(self.samples, other.samples), cat(self.sample_deltas, other.sample_deltas),
                    self.replies + other.replies, self.measured + other.measured, self.retry + other.retry)

    def of_variants(self, variant_ids: Iterable[str]) -> Rows:
        """The rows of the base replies and of ``variant_ids`` only (responses, deltas, verdicts,
        samples, sample_deltas)."""
        keep = set(variant_ids)

        def sel(df: pd.DataFrame) -> pd.DataFrame:
            return df[df["variant_id"].isna() | df["variant_id"].isin(keep)].reset_index(drop=True)

        return replace(self, responses=sel(self.responses), deltas=sel(self.deltas), verdicts=sel(self.verdicts),
                       samples=sel(self.samples), sample_deltas=sel(self.sample_deltas))

    def for_run(self, run_id: str) -> Rows:
        """The same rows keyed for ``run_id``: ``run_id`` and the deterministic ``response_id``s."""
        resp = self.responses.assign(run_id=run_id)
        resp["response_id"] = [response_id(run_id, p, v if isinstance(v, str) else None)
                               for p, v in zip(resp["prompt_id"], resp["variant_id"])]
        rep = self.repeats.assign(run_id=run_id)
        rep["response_id"] = [repeat_response_id(run_id, p, int(r)) for p, r in zip(rep["prompt_id"], rep["repeat"])]
        smp = self.samples.assign(run_id=run_id)
        smp["response_id"] = [sample_response_id(run_id, p, v if isinstance(v, str) else None, int(k))
                              for p, v, k in zip(smp["prompt_id"], smp["variant_id"], smp["sample"])]
        sd = self.sample_deltas.assign(run_id=run_id)
        sd["response_id"] = [response_id(run_id, p, v if isinstance(v, str) else None) if int(k) == 0 else
                             sample_response_id(run_id, p, v if isinstance(v, str) else None, int(k))
                             for p, v, k in zip(sd["prompt_id"], sd["variant_id"], sd["sample"])]
        return replace(self, responses=resp, deltas=self.deltas.assign(run_id=run_id), repeats=rep, samples=smp,
                       sample_deltas=sd,
                       verdicts=self.verdicts.assign(run_id=run_id), floor=self.floor.assign(run_id=run_id))


_RESPONSE_COLUMNS = ("response_id", "run_id", "prompt_id", "variant_id", "response", "n_tokens", "token_ids",
                     "seq_logprob", "mean_entropy", "cos_per_layer", "finish_reason", "latency_s", "error")


def _retryable(a: Answered) -> bool:
    own_base = (a.base,) if a.item.base is None else ()
    return any((r.meta or {}).get("retryable") for r in (*own_base, *a.results, *a.repeats,
                                                         *(x.reply for x in a.samples)))


def score(answered: Sequence[Answered], scoring: Scoring) -> Rows:
    """Every store row of ``answered`` (one batched BERTScore call per table).

    A prompt whose base, variant or repeat reply failed transiently (``meta["retryable"]``: API
    retries ran out) gets no row (``Rows.retry``): its prompt unit stays pending. A prompt
    answered with a known base (``Pending.base``) gets no base ``responses`` row.

    Returns:
        ``Rows``: responses, deltas (``len(scoring.axes)`` rows per answered or set-aside
        variant; a sampled run's from sample 0), verdicts, repeats, floor, samples (1..k−1),
        sample_deltas (each sample against base sample 0);
        ``replies`` and ``measured`` of the prompts kept.
    """
    retry = [a.item.prompt_id for a in answered if _retryable(a)]
    ok = [a for a in answered if a.item.prompt_id not in set(retry)]
    run_id = scoring.run_id
    units = [Unit(a.item.prompt_id, a.item.dataset, a.base, a.item.variants, a.results, base_row=a.item.base is None,
                  prompt_text=a.item.text, forced=a.forced, forced_base=a.forced_base) for a in ok]
    overrides, verdicts = ({}, pd.DataFrame(columns=VERDICT_COLUMNS)) if scoring.judge is None else judge_rows(
        run_id, units, {a.item.prompt_id: a.item.text for a in ok}, scoring.judge)
    responses, deltas = compute_rows(run_id, units, scoring.normalizers, scoring.capabilities,
                                     mr_overrides=overrides or None, options=scoring.options,
                                     bert_baseline=scoring.bert_baseline)
    aside = [set_aside_rows(scoring, a.item) for a in ok if a.item.same_input]
    if aside:
        deltas = pd.concat([deltas, *aside], ignore_index=True)
    repeats, floor = floor_rows(run_id, [RepeatUnit(a.item.prompt_id, a.item.dataset, a.base, a.repeats) for a in ok],
                                scoring.normalizers, scoring.capabilities)
    replies = []
    for a in ok:
        pid = a.item.prompt_id
        replies += [(response_id(run_id, pid, None), a.base)] if a.item.base is None else []
        replies += [(response_id(run_id, pid, v.variant_id), r) for v, r in zip(a.item.variants, a.results)]
        replies += [(repeat_response_id(run_id, pid, j + 1), r) for j, r in enumerate(a.repeats)]
        replies += [(sample_response_id(run_id, pid, x.variant_id, x.sample), x.reply) for x in a.samples]
    smp = sample_rows(run_id, [(a.item.prompt_id, x) for a in ok for x in a.samples])
    sd = sample_delta_rows(run_id, [SampledUnit(a.item.prompt_id, a.item.dataset, a.base, a.item.variants, a.results,
                                                a.samples) for a in ok], scoring.normalizers, scoring.capabilities)
    return Rows(responses, deltas, verdicts, repeats, floor, smp, sd, replies,
                [(a.item.prompt_id, len(a.item.variants)) for a in ok], retry)


def set_aside_rows(scoring: Scoring, item: Pending) -> pd.DataFrame:
    """Unavailable ``deltas`` rows (reason ``noop.MODEL_INPUT_NOOP``) of ``item.same_input``, one per axis."""
    return noop_delta_rows(scoring.run_id, item.dataset, item.prompt_id, list(item.same_input), scoring.axes)


def api_rows(run_id: str, replies: Sequence[tuple[str, GenerationResult]]) -> pd.DataFrame:
    """``api_responses`` rows: per (response_id, reply) what the provider returned (``reply.meta``):
    model_returned, prompt / completion / reasoning / cached tokens, cached, attempts, finish_raw."""
    rows = []
    for rid, r in replies:
        meta = r.meta or {}
        rows.append({"response_id": rid, "run_id": run_id,
                     "model_returned": meta.get("model"), "prompt_tokens": meta.get("prompt_tokens"),
                     "completion_tokens": meta.get("completion_tokens"), "cached": meta.get("cached"),
                     "attempts": meta.get("attempts"), "finish_raw": meta.get("finish_raw"),
                     "reasoning_tokens": meta.get("reasoning_tokens"), "cached_tokens": meta.get("cached_tokens")})
    return pd.DataFrame(rows)
