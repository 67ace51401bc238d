"""From generation results to stored rows: axes per (prompt, variant), batched across prompts.

One function serves the measurement step (``sago_engine.measure.step``) of the offline runner and of
the live page, so both compute the same numbers.
SAGO (arXiv 2610.01428) §Axes, §Notation.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sago_engine.axes import (
    bert_windows_note,
    cosine_per_layer,
    delta_bert_pairs,
    delta_bleu,
    delta_bleu_signatures,
    delta_cos_from_layers,
    delta_ent,
    delta_mr,
    delta_prob,
    detector_kind,
)
from sago_engine.axis_spec import AXIS_SPECS, NEEDS, OPTION_AXIS_SPECS
from sago_engine.measure.option_rows import OptionInputs, OptionValues
from sago_engine.measure.reply_flags import reply_flags
from sago_engine.scoring.scores import normalize
from sago_engine.seeds import stable_hash
from sago_engine.types import (
    AXES,
    GenerationResult,
    Variant,
    base_axis,
    normalizer_for,
)

#: (log-probs, entropies) of a reply's tokens under teacher forcing, each (T,) float64.
Forced = tuple[np.ndarray, np.ndarray]


@dataclass
class Unit:
    """One base prompt with its variants and their generation results (same order)."""

    prompt_id: str
    dataset: str
    base: GenerationResult
    variants: Sequence[Variant]
    results: Sequence[GenerationResult]
    base_row: bool = True
    """Whether ``compute_rows`` builds the base reply's ``responses`` row (False: a later batch
    of a prompt whose base row was built with an earlier one)."""
    prompt_text: str | None = None
    """The base prompt x (the ``mr@pairwise`` rules measure a surface-noise variant's strength
    from x and x^v); None = not known (those values are unavailable)."""
    forced: Sequence[Forced | None] | None = None
    """Per variant: the base reply's tokens teacher-forced after the variant prompt
    (``measure.force_base_replies``; ``prob@base_reply`` / ``ent@base_reply``); None = not forced."""
    forced_base: Forced | None = None
    """The base reply's tokens teacher-forced after the base prompt (the other side of those Δ)."""


def _or_nan(x: float | None) -> float:
    return float("nan") if x is None else float(x)


def _values(results: Sequence[GenerationResult], attr: str) -> np.ndarray:
    """One scalar property per result, NaN where the backend returned none (→ stored as unavailable)."""
    return np.array([_or_nan(getattr(r, attr)) for r in results], dtype=np.float64)


def response_id(run_id: str, prompt_id: str, variant_id: str | None) -> str:
    """Deterministic key of a response row."""
    return stable_hash(run_id, prompt_id, variant_id or "<base>", length=20)


#: Axes computed from the reply text only (``AxisSpec.needs == "text"``).
TEXT_AXES: frozenset[str] = frozenset(a for a in AXES if not AXIS_SPECS[a].white_box)


def budget_spent(r: GenerationResult) -> str | None:
    """Why ``r`` has no visible output to measure because the token budget went to hidden tokens, or None.

    Only two cases qualify, both with finish "length" and no error: the reply has no characters
    at all (``text == ""``), or the backend says hidden reasoning tokens used the budget
    (``meta["no_output"]``, set by the API backends for an empty or blank reply with reasoning
    tokens billed). A thinking model that spends ``max_new_tokens`` on hidden reasoning returns ""
    (Gemini ``MAX_TOKENS`` with thought tokens, OpenAI ``length`` with reasoning tokens): two such
    replies would otherwise score Δ-BLEU = Δ-BERT = Δ-MR = 0 ("perfectly stable"), one of them
    −100 / −1. A reply of whitespace only (tabs, spaces, newlines) from a model that emitted
    visible tokens is a reply: it is scored on every axis (docs/METHOD.md, "Unavailable values").
    """
    if r.error is not None or r.finish_reason != "length":
        return None
    why = (r.meta or {}).get("no_output")
    if why:
        return str(why)
    return "token budget spent with no visible text" if (r.text or "") == "" else None


def _error_reason(base: GenerationResult, res: GenerationResult) -> str | None:
    """The generation error of either reply, or None."""
    if res.error or base.error:
        return f"generation error: {(res.error or base.error)[:200]}"
    return None


def _unavailable_reason(axis: str, capabilities: frozenset[str], base: GenerationResult, res: GenerationResult) -> str | None:
    """Why ``axis`` cannot be measured for this (base, variant) pair, or None if it can: what the
    backend lacks or the replies miss, as the axis's ``AxisSpec.needs`` / ``result_field`` say."""
    if res.error or base.error:
        return _error_reason(base, res)
    spec = AXIS_SPECS[axis]
    need = NEEDS[spec.needs]
    if not spec.white_box:
        why = budget_spent(base) or budget_spent(res)
        if why:
            return f"{need.missing} ({'base' if budget_spent(base) else 'variant'}): {why}"[:300]
        return None
    if axis not in capabilities:
        return need.lacks
    if need.log_probs:  # sentinels, positive or non-finite log-probs are never summed
        for which, r in (("base", base), ("variant", res)):
            why = r.logprob_issue
            if why:
                return f"{why} ({which} reply)"[:300]
    if getattr(res, spec.result_field) is None or getattr(base, spec.result_field) is None:
        return need.missing
    return None


def text_unavailable_reason(base: GenerationResult, res: GenerationResult) -> str | None:
    """Why the text axes (``TEXT_AXES`` and their options, e.g. ``bert@rescaled``) of a (base
    reply, variant reply) pair cannot be measured — a generation error, or no visible output
    (``budget_spent``) — or None when they can. Every text axis shares this rule."""
    return _unavailable_reason(min(TEXT_AXES), frozenset(), base, res)


def option_axes_for(options: Sequence[str], capabilities: frozenset[str]) -> tuple[str, ...]:
    """The option axes a run stores, in ``OPTION_AXIS_SPECS`` order: ``options`` without the ones
    that need hidden states when the backend has none (``"cos"`` not in ``capabilities``: API-only
    runs store no Δ-Cos option at all).

    Raises:
        ValueError: a name that is not in ``OPTION_AXIS_SPECS``.
    """
    bad = [o for o in options if o not in OPTION_AXIS_SPECS]
    if bad:
        raise ValueError(f"unknown axis option(s) {bad}; valid: {', '.join(OPTION_AXIS_SPECS.names())}")
    wanted = set(options)
    return tuple(n for n, spec in OPTION_AXIS_SPECS.items()
                 if n in wanted and (spec.stored_without_hidden_states or "cos" in capabilities))


def option_values(name: str, inputs: OptionInputs) -> OptionValues:
    """The values of option axis ``name`` for one prompt's variants, by its ``OptionAxisSpec.rows``.

    Raises:
        UnknownNameError (a KeyError and a ValueError): not a registered option axis.
    """
    mod, _, attr = OPTION_AXIS_SPECS[name].rows.partition(":")
    return getattr(importlib.import_module(mod), attr)(name, inputs)


def compute_rows(
    run_id: str,
    units: Sequence[Unit],
    normalizers: Mapping[str, float],
    capabilities: frozenset[str],
    mr_overrides: Mapping[str, tuple[float, str]] | None = None,
    options: Sequence[str] = (),
    bert_baseline: float | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Compute the six axes (and the requested axis options) for every (prompt, variant) of ``units``.

    BERTScore for all pairs of all units runs in one batched call.

    Args:
        run_id: the run these rows belong to.
        units: prompts with base and variant results.
        normalizers: R_X per axis (see ``scoring.resolve_normalizers``).
        capabilities: white-box axes the backend measures (subset of {"cos","prob","ent"}).
        mr_overrides: variant_id -> (ΔMR, detector label) decided elsewhere (the LLM judge,
            ``sago_engine.measure.judge.judged_delta_mr``); replaces the offline detector's ΔMR and its
            ``detector`` label for those variants. None (default) = offline detectors only.
        options: option axes to store besides the six (names of ``axis_spec.OPTION_AXIS_SPECS``,
            e.g. ``"cos@user_mean"``, ``"bert@rescaled"``; docs/METHOD.md "Axis options"); the
            ones that need hidden states are left out when ``capabilities`` lacks "cos"
            (``option_axes_for``). Each one's values come from its ``OptionAxisSpec.rows``
            function over the unit and the plain axes' Δ (``measure.option_rows``), normalised
            with its base axis's R_X; the base axis's availability rules apply unless its
            ``base_rules`` is False. Default: none.
        bert_baseline: b of ``bert@rescaled`` (the encoder's unrelated-text baseline); required
            when an option that needs ``"bert_baseline"`` is asked for.
    Returns:
        (responses, deltas): DataFrames with the columns of the store's ``responses`` and
        ``deltas`` tables. ``responses`` has a base row per unit with ``base_row``, then one
        per variant. ``deltas`` has len(AXES) rows per variant plus one per stored option
        axis (the six plain axes' rows do not depend on ``options``); an unavailable axis has
        NULL ``delta``/``delta_norm``, ``available=False`` and a ``reason`` — never 0.
        ``detector`` says what produced an available value: Δ-MR's detector, Δ-BLEU's sacrebleu
        signature (tokenizer chosen by script), Δ-BERT's window note for replies over 510 word
        pieces (NULL otherwise and for the other axes).
    """
    opt_axes = option_axes_for(options, capabilities)
    for ax in opt_axes:
        if "bert_baseline" in OPTION_AXIS_SPECS[ax].needs and bert_baseline is None:
            raise ValueError(f"{ax} needs bert_baseline (the encoder's unrelated-text baseline)")
    cands, refs = [], []
    for u in units:
        for r in u.results:
            cands.append(r.text)
            refs.append(u.base.text)
    bert = delta_bert_pairs(cands, refs) if cands else np.zeros(0)  # one batched call for the chunk

    overrides = mr_overrides or {}
    resp_rows, delta_rows = [], []
    k = 0
    for u in units:
        base = u.base
        if u.base_row:
            resp_rows.append(_response_row(run_id, u.prompt_id, None, base, None))
        n = len(u.variants)
        if n != len(u.results):
            raise ValueError(f"{u.prompt_id}: {n} variants vs {len(u.results)} results")
        nan = float("nan")
        cos_layers: list[np.ndarray | None] = [
            cosine_per_layer(r.hidden_last, base.hidden_last) if r.hidden_last is not None and base.hidden_last is not None
            else None
            for r in u.results
        ]
        raw = {
            "cos": [nan if c is None else float(delta_cos_from_layers(c)) for c in cos_layers],
            "bleu": delta_bleu([r.text for r in u.results], base.text),
            "bert": bert[k : k + n],
            "prob": delta_prob(_values(u.results, "seq_logprob"), _or_nan(base.seq_logprob)),
            "ent": delta_ent(_values(u.results, "mean_entropy"), _or_nan(base.mean_entropy)),
            "mr": delta_mr([r.text for r in u.results], list(u.variants), base.text),
        }
        k += n
        texts = [r.text for r in u.results]
        for j, v in enumerate(u.variants):
            if v.variant_id in overrides:
                raw["mr"][j] = overrides[v.variant_id][0]
        labels: dict[str, Sequence[str | None]] = {
            "bleu": delta_bleu_signatures(texts, base.text),
            "bert": [bert_windows_note(t, base.text) for t in texts],
            "mr": [_detector(v, overrides) for v in u.variants]}
        why: dict[str, Sequence[str | None]] = {}
        inputs = OptionInputs(u, dict(raw), dict(labels), bert_baseline)
        for ax in opt_axes:  # after the plain axes: the mr@… options read the judge's Δ-MR
            got = option_values(ax, inputs)
            raw[ax] = got.values
            if got.why is not None:
                why[ax] = got.why
            if got.labels is not None:
                labels[ax] = got.labels
        for j, (v, r) in enumerate(zip(u.variants, u.results)):
            resp_rows.append(_response_row(run_id, u.prompt_id, v.variant_id, r, cos_layers[j]))
            for axis in (*AXES, *opt_axes):
                spec = OPTION_AXIS_SPECS.get(axis)
                reason = ((_unavailable_reason(base_axis(axis), capabilities, base, r)
                           if spec is None or spec.base_rules else _error_reason(base, r))
                          or why.get(axis, [None] * n)[j])
                d = float(raw[axis][j])
                if reason is None and np.isfinite(d):
                    delta_rows.append((run_id, u.dataset, u.prompt_id, v.variant_id, axis, d,
                                       float(normalize(d, normalizer_for(axis, normalizers))), True, None,
                                       labels.get(axis, [None] * n)[j]))
                else:
                    delta_rows.append((run_id, u.dataset, u.prompt_id, v.variant_id, axis, None, None, False,
                                       reason or "not computed", None))
    responses = pd.DataFrame(resp_rows)
    deltas = pd.DataFrame(delta_rows, columns=["run_id", "dataset", "prompt_id", "variant_id", "axis", "delta",
                                               "delta_norm", "available", "reason", "detector"])
    return responses, deltas


VERDICT_COLUMNS = ["run_id", "variant_id", "prompt_id", "response_of", "judge_model", "template_id", "verdict", "raw",
                   "error", "heuristic_verdict", "detector", "flags"]


def judge_rows(run_id: str, units: Sequence[Unit], base_prompts: Mapping[str, str],
               judge) -> tuple[dict[str, tuple[float, str]], pd.DataFrame]:
    """Judge the social-register variants of ``units`` (one batched call) for Δ-MR.

    Variants whose reply or base reply errored are left out (their Δ-MR is unavailable anyway).

    Args:
        run_id: the run; units: prompts with their results; base_prompts: prompt_id -> base
            prompt text; judge: a ``sago_engine.measure.judge.Judge``.
    Returns:
        (mr_overrides, verdicts): ``mr_overrides`` for ``compute_rows`` (variant_id -> (ΔMR,
        detector label); the label is ``judge:<model>`` or, where the judge gave no usable
        answer, the heuristic's); ``verdicts``: two rows per judged variant (``response_of``
        "variant" and "base") with the columns of the store's ``mirroring_verdicts`` table.
    Source: SAGO (arXiv 2610.01428) §Axes (Δ-MR; a judge for social register).
    """
    from sago_engine.measure.judge import judged_delta_mr

    sel = [(u, v, r) for u in units for v, r in zip(u.variants, u.results)
           if v.spec.family == "social_register" and not r.error and not u.base.error]
    if not sel:
        return {}, pd.DataFrame(columns=VERDICT_COLUMNS)
    judged = judged_delta_mr(judge, [v for _, v, _ in sel], [base_prompts[u.prompt_id] for u, _, _ in sel],
                             [r.text for _, _, r in sel], [u.base.text for u, _, _ in sel])
    overrides, rows = {}, []
    for (u, v, _), j in zip(sel, judged):
        overrides[v.variant_id] = (j.delta, j.detector)
        for of, verdict, heur in (("variant", j.variant, j.heuristic_variant), ("base", j.base, j.heuristic_base)):
            rows.append((run_id, v.variant_id, u.prompt_id, of, verdict.judge_model, verdict.template_id,
                         verdict.verdict, verdict.raw, verdict.error, int(heur), j.detector,
                         list(verdict.flags) or None))
    df = pd.DataFrame(rows, columns=VERDICT_COLUMNS)
    df["verdict"] = pd.array(df["verdict"].tolist(), dtype="Int64")
    return overrides, df


def _detector(v: Variant, overrides: Mapping[str, tuple[float, str]]) -> str:
    """The ``deltas.detector`` label of a variant's ΔMR: the override's label, else ``detector_kind``."""
    return overrides[v.variant_id][1] if v.variant_id in overrides else detector_kind(v)


def _response_row(run_id: str, prompt_id: str, variant_id: str | None, r: GenerationResult, cos_layers) -> dict:
    return {
        "response_id": response_id(run_id, prompt_id, variant_id),
        "run_id": run_id,
        "prompt_id": prompt_id,
        "variant_id": variant_id,
        "response": r.text,
        "n_tokens": int(r.n_tokens),
        "token_ids": None if r.token_ids is None else [int(t) for t in r.token_ids],
        "seq_logprob": r.seq_logprob,
        "mean_entropy": r.mean_entropy,
        "cos_per_layer": None if cos_layers is None else [float(x) for x in cos_layers],
        "finish_reason": r.finish_reason,
        "latency_s": float(r.latency_s),
        "error": r.error,
        "request": (r.meta or {}).get("request"),
        "flags": reply_flags(r),
    }
