"""Model inputs longer than a local model's context, for ``python -m precompute --plan``.

A run stores such a prompt (base or variant) as an error row, unavailable on every axis
(``sago_engine.backends.context``); the plan lists them beforehand. Only each model's tokenizer and
config are loaded (``backends.hf_local.prompt_side``), never its weights.
"""

from __future__ import annotations

from collections.abc import Iterable

from sago_engine.backends.context import check_context

__all__ = ["LOCAL_BACKENDS", "over_context", "over_context_lines"]

#: Backends whose prompts are encoded locally (the hybrid's local copy renders what its server gets).
LOCAL_BACKENDS = ("hf_local", "hybrid")
#: Inputs listed per model before the rest is summarised.
MAX_LISTED = 20


def max_tokens(n_bytes: int, template_tokens: int) -> int:
    """An upper bound on the tokens of a prompt of ``n_bytes`` UTF-8 bytes rendered in a template of
    ``template_tokens`` tokens: byte-level BPE gives at most one token per byte, SentencePiece with
    byte fallback at most one per byte plus a word-start piece per word; so 2 · bytes + template + 8."""
    return 2 * n_bytes + template_tokens + 8


def over_context(cfg, m, plan, prompt_ids: Iterable[str], side=None
                 ) -> tuple[int | None, int, list[tuple[str, str | None, int]]]:
    """The inputs of model ``m`` that exceed its context with the run's reply cap.

    Only an input whose ``max_tokens`` bound could exceed the context is encoded (at the paper's
    scale none is: the check takes no tokenizer time).

    Args:
        cfg: the ``RunConfig``; m: a local ``ModelConfig`` (``LOCAL_BACKENDS``); plan: the ``Plan``;
        prompt_ids: the prompts to check (the shard's); side: ``(renderer, context)`` when already
        loaded (``load_prompt_side``).
    Returns:
        ``(context, n_checked, rows)``: the context in tokens (None: unknown, nothing refused), how many
        inputs were checked, and per refused input ``(prompt_id, variant_id or None for the base,
        prompt tokens)``, in plan order. LLM rewrites not written yet are not checked.
    Raises:
        ValueError / ModelUnavailableError: the model's tokenizer or config cannot be loaded.
    """
    from sago_engine.backends.hf_local.prompt_side import load_prompt_side

    renderer, context = side or load_prompt_side(m.key, m.chat_template_kwargs, m.template_date)
    cap = cfg.max_new_tokens_for(m)
    wanted = set(prompt_ids)
    rows: list[tuple[str, str | None, int]] = []
    n = 0
    t0 = len(renderer.encode_prompt("")) if context else 0
    for p in plan.prompts:
        if p.prompt_id not in wanted:
            continue
        inputs = [(None, p.text)] + [(v.variant_id, v.text) for v in plan.to_generate(p.prompt_id)
                                     if not v.meta.get("pending_rewrite")]
        for vid, text in inputs:
            n += 1
            if not context or not check_context(max_tokens(len(text.encode("utf-8")), t0), cap, context):
                continue  # cannot exceed: not encoded
            k = len(renderer.encode_prompt(text))
            if check_context(k, cap, context):
                rows.append((p.prompt_id, vid, k))
    return context, n, rows


def over_context_lines(cfg, m, plan, prompt_ids: Iterable[str], side=None) -> list[str]:
    """``--plan``'s lines for model ``m``: how many inputs exceed the context and which (at most
    ``MAX_LISTED``), or why they could not be checked; ``[]`` for a model that is not local.
    ``side``: as ``over_context``."""
    if m.backend not in LOCAL_BACKENDS:
        return []
    try:
        context, n, rows = over_context(cfg, m, plan, prompt_ids, side)
    except Exception as e:  # noqa: BLE001 - the plan still prints; the run reports the same failure
        return [f"    context check skipped: {type(e).__name__}: {e}"]
    cap = cfg.max_new_tokens_for(m)
    head = (f"    over the context: {len(rows)} of {n} inputs (context {context if context else 'unknown'} tokens, "
            f"reply cap {cap}; tokenizer only, weights not loaded)")
    out = [head]
    for pid, vid, k in rows[:MAX_LISTED]:
        out.append(f"      {pid} {'base' if vid is None else vid}: prompt of {k} tokens + reply cap {cap} > {context}")
    if len(rows) > MAX_LISTED:
        out.append(f"      … and {len(rows) - MAX_LISTED} more")
    return out
