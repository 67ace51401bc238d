"""A model's context length and the check that a prompt plus its reply cap fits in it.

Past the positions a model was trained on its output is garbage, and transformers only logs a
reminder (transformers PR #40775; unsloth PR #1236 raises instead). sago never runs such a prompt:
``check_context`` gives the reason, and the backend turns it into an error row (every axis
unavailable, counted in the run summary, listed by ``python -m precompute --plan``). A backend
served elsewhere (a vLLM server's ``max_model_len``) passes its own context to the same check.
"""

from __future__ import annotations

from typing import Any

from ..types import GenerationResult

__all__ = ["context_length", "check_context", "over_context_result", "OVER_CONTEXT_META"]

#: ``GenerationResult.meta`` key of a prompt refused by ``check_context``:
#: ``{"prompt_tokens", "max_new_tokens", "context"}``.
OVER_CONTEXT_META = "over_context"

_POSITION_FIELDS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def _rope_tables(cfg: Any) -> list[dict]:
    """Every RoPE parameter table of a config: ``rope_scaling`` / ``rope_parameters``, one table or one
    per layer type (gemma-3: ``{"full_attention": {...}, "sliding_attention": {...}}``)."""
    out = []
    for name in ("rope_scaling", "rope_parameters"):
        t = getattr(cfg, name, None)
        if not isinstance(t, dict):
            continue
        out.extend(v for v in t.values() if isinstance(v, dict))
        out.append(t)
    return out


def context_length(config: Any) -> int | None:
    """Tokens a model can attend over: prompt + reply positions (None when the config names none).

    ``max_position_embeddings`` (or ``n_positions`` / ``max_sequence_length`` / ``seq_length``) of
    the text config; where a RoPE scaling table has a ``factor`` > 1 (linear, dynamic, yarn), the
    scaled length ``factor × original_max_position_embeddings`` (default: the max positions) when it is
    longer — Llama-3.1's ``llama3`` table already states the scaled length as its max positions.
    A sliding-window model's context is still its max positions (the window limits what each layer
    sees, not the positions).

    Args:
        config: a ``transformers.PretrainedConfig`` (multimodal: its text config is read).
    Returns:
        The length in tokens (≥ 1), or None.
    """
    cfg = config.get_text_config() if hasattr(config, "get_text_config") else config
    n = None
    for f in _POSITION_FIELDS:
        v = getattr(cfg, f, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            n = v
            break
    if n is None:
        return None
    best = n
    for t in _rope_tables(cfg):
        factor = t.get("factor")
        if isinstance(factor, (int, float)) and not isinstance(factor, bool) and factor > 1:
            orig = t.get("original_max_position_embeddings") or n
            best = max(best, int(float(factor) * int(orig)))
    return best


def check_context(n_prompt_tokens: int, max_new_tokens: int, context: int | None) -> str | None:
    """Why a prompt cannot run: its tokens plus the reply cap exceed the model's context, or None.

    Args:
        n_prompt_tokens: tokens of the model input (the rendered prompt).
        max_new_tokens: the reply cap (tokens; the EOS token counts).
        context: the model's context in tokens (``context_length``; a server's ``max_model_len``),
            or None when unknown (then nothing is refused).
    Returns:
        ``"prompt of N tokens + reply cap M exceeds the model's context of C tokens"`` or None.
    """
    if context is None or n_prompt_tokens + max_new_tokens <= context:
        return None
    return (f"prompt of {n_prompt_tokens} tokens + reply cap {max_new_tokens} exceeds the model's context of "
            f"{context} tokens")


def over_context_result(n_prompt_tokens: int, max_new_tokens: int, context: int) -> GenerationResult:
    """The error row of a prompt ``check_context`` refused: no text, no tokens, ``finish_reason``
    "error", ``error`` the reason, ``meta[OVER_CONTEXT_META]`` the three numbers (the runner counts them).
    Raises ValueError when the prompt does fit."""
    why = check_context(n_prompt_tokens, max_new_tokens, context)
    if why is None:
        raise ValueError(f"a prompt of {n_prompt_tokens} tokens + {max_new_tokens} fits a context of {context}")
    return GenerationResult(text="", n_tokens=0, finish_reason="error", error=why,
                            meta={OVER_CONTEXT_META: {"prompt_tokens": int(n_prompt_tokens),
                                                      "max_new_tokens": int(max_new_tokens), "context": int(context)}})
