"""Whether a prompt and its reply cap fit a model's context window (one rule for every backend).

A reply whose prompt plus ``max_new_tokens`` does not fit the context cannot always run to the
cap: a local model would run past the positions it was trained on, and a server (vLLM) shortens
the reply quietly and reports finish "length" as if the cap had been reached. Neither is a
normal reply, so such a prompt is an error row with this module's reason, decided before any
token is generated — the same verdict whether or not the reply would have stopped early.
"""

from __future__ import annotations

import re

__all__ = ["check_context", "context_limit_reason"]


def check_context(n_prompt: int, max_new_tokens: int, limit: int | None, *, where: str = "the model") -> str | None:
    """The reason a prompt cannot be answered within ``limit`` tokens, or None when it fits.

    Args:
        n_prompt: tokens of the rendered prompt (chat template included), ≥ 0.
        max_new_tokens: the reply cap (≥ 1; the EOS token counts, as everywhere in sago).
        limit: the context window in tokens (a local model's positions, a server's
            ``max_model_len``); None = unknown, nothing is checked.
        where: what the limit belongs to, for the message (e.g. ``"the server's max_model_len"``).
    Returns:
        None when ``n_prompt + max_new_tokens <= limit`` (or ``limit`` is None); otherwise a
        message naming both counts and the limit, for ``GenerationResult.error``.
    """
    if limit is None or n_prompt + max_new_tokens <= limit:
        return None
    if n_prompt >= limit:
        return (f"context: the prompt has {n_prompt} tokens, {where} is {limit} tokens: no room for a reply "
                f"(the prompt is not truncated)")
    return (f"context: the prompt has {n_prompt} tokens and the reply cap is {max_new_tokens} "
            f"({n_prompt + max_new_tokens} in all), {where} is {limit} tokens: a reply could not reach the cap "
            f"(lower max_new_tokens to {limit - n_prompt} or raise the limit; the reply is not shortened)")


def context_limit_reason(message: str) -> bool:
    """Whether a server's error message says the request does not fit the model's context.

    Recognises vLLM's ("This model's maximum context length is 2048 tokens. However, your
    prompt contains 2130 input tokens…"), OpenAI's (``context_length_exceeded``, "maximum
    context length"), Anthropic's ("prompt is too long") and Gemini's ("exceeds the maximum
    number of tokens") wording; case-insensitive.
    """
    return bool(re.search(r"maximum context length|context[ _]length[ _]exceeded|context window|max_model_len|"
                          r"prompt is too long|input is too long|too many (input )?tokens|"
                          r"exceeds the maximum number of tokens|input tokens exceed", message, re.IGNORECASE))
