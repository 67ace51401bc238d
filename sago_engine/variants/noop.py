"""Variants that do not vary: found before any model runs, never scored as "perfectly stable".

A variant is a perturbation only if the model sees something else than the base prompt. Two kinds
are not, and each would score Δ = 0 on every axis — pulling SGS towards "stable" for an edit that
never reached the model:

* **text no-op** (model-independent): the variant text equals its base prompt (case noise on a
  script without letter case — Arabic, Chinese, Hebrew, Thai, Devanagari —, a prompt that is all
  protected spans). ``variants.sample_grid`` leaves out cells that cannot change the prompt where
  it samples; a variant that is still a no-op is stored with ``kept = false`` and
  ``variants.skip_reason`` = ``text_noop_reason`` and no model answers it.
* **model-input no-op** (per model): the token ids the model would read equal the base's once the
  chat template has rendered both (templates that ``| trim`` the user message, as Llama-3's and
  Gemma's do, make whitespace at its edges vanish). Detected with the backend's own rendering,
  ``encode_prompt`` (hf_local); API backends do not show theirs, so only text no-ops apply there.
  Such a variant is not generated; the run stores one ``deltas`` row per axis with
  ``available = false`` and ``reason = MODEL_INPUT_NOOP`` and no ``responses`` row. Every score,
  test and aggregate reads available rows only, so it is left out of s_X and SGS like any
  unavailable axis, and its count per model and cell is in the statistics tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from sago_engine.types import Variant, VariantSpec

#: Every no-op reason starts with this (``variants.skip_reason`` and ``deltas.reason``).
NOOP_PREFIX = "no-op: "
#: ``deltas.reason`` of a variant whose model input equals its base prompt's.
MODEL_INPUT_NOOP = NOOP_PREFIX + "model input equals the base prompt's after the chat template"
#: Columns of a ``deltas`` row (``pipeline.compute_rows``).
DELTA_COLUMNS = ["run_id", "dataset", "prompt_id", "variant_id", "axis", "delta", "delta_norm", "available", "reason",
                 "detector"]


def text_noop_reason(spec: VariantSpec) -> str:
    """``"no-op: nothing to change for <family> · <subtype>"``: ``skip_reason`` of a variant equal to its base."""
    return f"{NOOP_PREFIX}nothing to change for {spec.family} · {spec.subtype}"


def is_noop(reason: Any) -> bool:
    """Whether a stored reason (``skip_reason`` / ``deltas.reason``) marks a no-op variant."""
    return isinstance(reason, str) and reason.startswith(NOOP_PREFIX)


def text_noops(base_text: str, variants: Iterable[Variant]) -> dict[str, str]:
    """variant_id -> ``text_noop_reason`` for each variant whose text equals ``base_text``.

    LLM rewrites not yet requested (``meta["pending_rewrite"]``, empty text) are not judged.
    """
    return {v.variant_id: text_noop_reason(v.spec) for v in variants
            if v.text == base_text and not v.meta.get("pending_rewrite")}


def model_input_noops(backend: Any, base_text: str, variants: Sequence[Variant]) -> dict[str, str]:
    """variant_id -> ``MODEL_INPUT_NOOP`` for each variant the backend would feed the same token ids as
    the base prompt (``backend.encode_prompt``: the chat template rendered and tokenised).

    Returns {} for a backend whose ``encode_prompt`` gives None (API backends: their rendering is not visible)
    or when there is no variant. Pure given the backend's tokenizer and template.
    """
    base = backend.encode_prompt(base_text) if variants else None
    if base is None:
        return {}
    return {v.variant_id: MODEL_INPUT_NOOP for v in variants if list(backend.encode_prompt(v.text)) == list(base)}


def noop_delta_rows(run_id: str, dataset: str, prompt_id: str, variant_ids: Iterable[str],
                    axes: Sequence[str], reason: str = MODEL_INPUT_NOOP) -> pd.DataFrame:
    """``deltas`` rows of skipped variants: one per (variant, axis), delta / delta_norm NULL,
    ``available = False``, ``reason``; the columns of ``pipeline.compute_rows``' deltas."""
    rows = [(run_id, dataset, prompt_id, vid, ax, None, None, False, reason, None)
            for vid in variant_ids for ax in axes]
    return pd.DataFrame(rows, columns=DELTA_COLUMNS)


def noop_table(counts: pd.DataFrame) -> pd.DataFrame:
    """``Store.noop_counts`` for display: model ("every model" for text no-ops), cell, why, variants.

    Args:
        counts: model (None for text no-ops), family, subtype, strength, position, reason, n.
    Returns:
        columns model, family, subtype, strength, position, why (the reason without its
        ``"no-op: "`` prefix), variants (n).
    """
    cols = ["model", "family", "subtype", "strength", "position", "why", "variants"]
    if counts is None or counts.empty:
        return pd.DataFrame(columns=cols)
    out = counts.assign(model=counts["model"].where(counts["model"].notna(), "every model"),
                        why=counts["reason"].map(lambda r: r[len(NOOP_PREFIX):] if is_noop(r) else r),
                        variants=counts["n"].astype(int))
    return out[cols].reset_index(drop=True)


def count_by_cell(variants: Iterable[Variant], reasons: Mapping[str, str]) -> dict[str, int]:
    """``"family · subtype"`` -> how many of ``variants`` have a reason in ``reasons`` (for the run summary)."""
    out: dict[str, int] = {}
    for v in variants:
        if v.variant_id in reasons:
            k = f"{v.spec.family} · {v.spec.subtype}"
            out[k] = out.get(k, 0) + 1
    return dict(sorted(out.items()))
